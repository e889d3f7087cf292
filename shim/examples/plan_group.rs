//! Times the plan (`stack update --dry-run`) of an update of one SoftwareDeploymentGroup over N
//! servers, in-process on a real SQLite file: the group is created and every member answered,
//! then an update that changes the config for every member under a `rolling_update` of
//! `BATCH` members is planned (and the plan checked: N runs in N / BATCH batches). For the
//! bench (bench/README.md, "Plans") and for profiling:
//! `cargo run --release -p anneal-shim --example plan_group -- [SERVERS [BATCH]]`

use std::time::Instant;

use anneal_shim::engine::{Engine, EngineConfig, TokenKey, sweeper};
use anneal_shim::model::{AddServer, Service, StackRequest};
use anneal_shim::store::SqliteStore;
use anneal_shim::template::MaxResources;
use serde_json::{Map, Value, json};

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let servers: usize = std::env::args().nth(1).and_then(|text| text.parse().ok()).unwrap_or(10_000);
    let batch: usize = std::env::args().nth(2).and_then(|text| text.parse().ok()).unwrap_or(500);
    let dir = tempfile::tempdir()?;
    let store = SqliteStore::open(&dir.path().join("shim.db"))?;
    let config = EngineConfig { max_resources: MaxResources(None), ..EngineConfig::new("http://127.0.0.1:1") };
    let engine = Engine::new(store, TokenKey::from_secret(b"plan_group"), config);
    let names: Vec<String> = (0..servers).map(|index| format!("fleet-{index:05}")).collect();
    for name in &names {
        engine.add_server(AddServer { name: name.clone(), ..AddServer::default() }).await?;
    }
    let started = Instant::now();
    engine.create_stack(request(&names, batch, "one")).await?;
    while sweeper::pass(&engine).await? > 0 {}
    for name in &names {
        let document: Value = serde_json::from_str(&engine.metadata(name).await?.body)?;
        let entry = &document["deployments"][0];
        let url = entry["inputs"].as_array().and_then(|inputs| {
            inputs.iter().find(|input| input["name"] == "deploy_signal_id").and_then(|input| input["value"].as_str())
        });
        let token = url.and_then(|url| url.rsplit('/').next()).ok_or("no signal URL")?;
        engine.deployment_signal(token, json!({"deploy_status_code": 0}), None).await?;
    }
    let status = engine.show_stack("fleet").await?.summary.status;
    println!("created and answered {servers} members in {:.1} s: {status}", started.elapsed().as_secs_f64());
    let rounds: u32 = std::env::var("PLAN_ROUNDS").ok().and_then(|text| text.parse().ok()).unwrap_or(3);
    for round in 1..=rounds {
        let (started, cpu) = (Instant::now(), cpu_seconds());
        let plan = engine.preview_stack(Some("fleet"), request(&names, batch, "two")).await?;
        let (took, cpu) = (started.elapsed(), cpu_seconds() - cpu);
        let batches = plan.groups.first().map_or(1, |group| group.batches);
        println!(
            "plan {round}: {:.0} ms ({:.0} ms of CPU) for {} runs in {batches} batches ({} updated, outcome {})",
            took.as_secs_f64() * 1000.0,
            cpu * 1000.0,
            plan.runs.len(),
            plan.resource_changes.updated.len(),
            plan.outcome
        );
    }
    let started = Instant::now();
    engine.update_stack("fleet", request(&names, batch, "two")).await?;
    println!("the update itself: {:.0} ms to commit", started.elapsed().as_secs_f64() * 1000.0);
    Ok(())
}

/// The group over every server, its config printing `message`, rolling `batch` at a time.
fn request(names: &[String], batch: usize, message: &str) -> StackRequest {
    let members: Map<String, Value> = names.iter().map(|name| (name.clone(), json!(name))).collect();
    let template = json!({
        "heat_template_version": "2018-08-31",
        "resources": {
            "config": {"type": "OS::Heat::SoftwareConfig",
                       "properties": {"group": "script", "config": format!("#!/bin/sh\necho {message}\n")}},
            "fleet": {"type": "OS::Heat::SoftwareDeploymentGroup",
                      "update_policy": {"rolling_update": {"max_batch_size": batch}},
                      "properties": {"config": {"get_resource": "config"}, "servers": members}},
        },
    });
    StackRequest { name: Some("fleet".into()), template: template.to_string(), ..Default::default() }
}

/// The CPU time this process has used (user and system), from /proc/self/stat: steadier than
/// wall time on a machine doing other work. Zero where /proc is not there.
fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // The fields after the command name (which may hold spaces) in parentheses.
    let fields: Vec<&str> = stat.rsplit_once(") ").map_or(Vec::new(), |(_, rest)| rest.split(' ').collect());
    let ticks = |index: usize| fields.get(index).and_then(|text| text.parse::<f64>().ok()).unwrap_or(0.0);
    // utime and stime are fields 14 and 15 of the line, 12 and 13 after the name; 100 ticks/s.
    (ticks(11) + ticks(12)) / 100.0
}
