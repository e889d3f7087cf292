//! Times one stack create whose SoftwareDeploymentGroup spans N registered servers, in-process
//! on a real SQLite file (the engine half of bench scenario 5, without HTTP), for profiling:
//! `[SCRIPT_LINES=N] cargo run --release -p anneal-shim --example group_create -- [SERVERS [MEMBERS_PER_TRANSACTION]]`

use std::time::Instant;

use anneal_shim::engine::{Engine, EngineConfig, TokenKey, sweeper};
use anneal_shim::model::{AddServer, Service, StackRequest};
use anneal_shim::store::{SqliteStore, Store};
use anneal_shim::template::MaxResources;
use serde_json::{Map, Value, json};

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let servers: usize = std::env::args().nth(1).and_then(|text| text.parse().ok()).unwrap_or(10_000);
    let dir = tempfile::tempdir()?;
    let store = SqliteStore::open(&dir.path().join("shim.db"))?;
    // A group over N servers is N + 2 resources, over Heat's default limit of 1,000.
    let mut config = EngineConfig { max_resources: MaxResources(None), ..EngineConfig::new("http://127.0.0.1:1") };
    if let Some(chunk) = std::env::args().nth(2).and_then(|text| text.parse().ok()) {
        config.release_chunk = chunk;
    }
    let engine = Engine::new(store, TokenKey::from_secret(b"group_create"), config);
    let names: Vec<String> = (0..servers).map(|index| format!("fleet-{index:05}")).collect();
    for name in &names {
        engine.add_server(AddServer { name: name.clone(), ..AddServer::default() }).await?;
    }
    // SCRIPT_LINES=N pads the script with N comment lines (32 bytes each): a real config's
    // size, which every member's publication carries.
    let padding: usize = std::env::var("SCRIPT_LINES").ok().and_then(|text| text.parse().ok()).unwrap_or(0);
    let script = format!("#!/bin/sh\n{}", "# a line padding a long script.\n".repeat(padding));
    let members: Map<String, Value> = names.iter().map(|name| (name.clone(), json!(name))).collect();
    let template = json!({
        "heat_template_version": "2018-08-31",
        "resources": {
            "config": {"type": "OS::Heat::SoftwareConfig", "properties": {"group": "script", "config": script}},
            "fleet": {"type": "OS::Heat::SoftwareDeploymentGroup",
                      "properties": {"config": {"get_resource": "config"}, "servers": members}},
        },
    });
    if std::env::var_os("GROUP_CREATE_PAUSE").is_some() {
        // Lets a profiler attach to the create alone: press enter (or close stdin) to go on.
        println!("servers added; pid {}", std::process::id());
        let _ = std::io::stdin().read_line(&mut String::new());
    }
    let before = engine.store().statements();
    let started = Instant::now();
    let request = StackRequest { name: Some("fleet".into()), template: template.to_string(), ..Default::default() };
    engine.create_stack(request).await?;
    let created = started.elapsed();
    // The members past the create's first chunk: released by the sweeper, a chunk per sweep.
    let mut chunks = 0;
    while sweeper::pass(&engine).await? > 0 {
        chunks += 1;
    }
    let released = started.elapsed();
    let statements = engine.store().statements() - before;
    println!(
        "create over {servers} servers: committed in {:.1} ms, every member published after {:.1} ms \
         ({chunks} more chunks), {statements} statements",
        created.as_secs_f64() * 1000.0,
        released.as_secs_f64() * 1000.0
    );
    Ok(())
}
