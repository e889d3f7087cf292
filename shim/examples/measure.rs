//! Measures the shim on loopback with a real SQLite file (not a timed test; the benchmark
//! harness in bench/ will supersede it):
//! 1. long-poll wake-up latency: server B long-polls; a signal for A's deployment releases B's
//!    deployment (its input is A's output); time from sending the signal to B's poll answering;
//! 2. durable signals per second: N deployments in progress, signalled by 64 concurrent senders.
//!
//! `cargo run --release -p anneal-shim --example measure -- [ROUNDS] [SIGNALS]`

use std::sync::Arc;
use std::time::{Duration, Instant};

use anneal_shim::api::{self, ApiConfig};
use anneal_shim::engine::{Engine, EngineConfig, TokenKey};
use anneal_shim::model::{AddServer, Service, StackRequest};
use anneal_shim::store::{SqliteStore, Store};
use anneal_shim::token;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

const CHAIN: &str = r##"
heat_template_version: 2018-08-31
resources:
  config_a:
    type: OS::Heat::SoftwareConfig
    properties: {group: script, outputs: [{name: out}], config: "#!/bin/sh\n"}
  deploy_a:
    type: OS::Heat::SoftwareDeployment
    properties: {config: {get_resource: config_a}, server: a}
  config_b:
    type: OS::Heat::SoftwareConfig
    properties: {group: script, inputs: [{name: in}], config: "#!/bin/sh\n"}
  deploy_b:
    type: OS::Heat::SoftwareDeployment
    properties: {config: {get_resource: config_b}, server: b, input_values: {in: {get_attr: [deploy_a, out]}}}
"##;

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let arguments: Vec<u64> = std::env::args().skip(1).filter_map(|argument| argument.parse().ok()).collect();
    let rounds = arguments.first().copied().unwrap_or(200) as usize;
    let signals = arguments.get(1).copied().unwrap_or(2000) as usize;
    let dir = tempfile::tempdir()?;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let base = format!("http://{}", listener.local_addr()?);
    let store = SqliteStore::open(&dir.path().join("shim.db"))?;
    let engine = Arc::new(Engine::new(store, TokenKey::from_secret(b"measure"), EngineConfig::new(base.clone())));
    let shutdown = CancellationToken::new();
    let admin = token::new_token()?;
    let server = tokio::spawn(api::serve(
        listener,
        Arc::clone(&engine),
        ApiConfig::new(token::hash_token(&admin)),
        shutdown.clone(),
    ));
    let http = reqwest::Client::builder().pool_max_idle_per_host(128).build()?;
    let a = engine.add_server(AddServer { name: "a".into(), ..AddServer::default() }).await?;
    let b = engine.add_server(AddServer { name: "b".into(), ..AddServer::default() }).await?;

    let mut latencies = Vec::with_capacity(rounds);
    for round in 0..rounds {
        latencies.push(wake_latency(&engine, &http, &a.token, &b.token, &base, round).await?);
    }
    latencies.sort();
    let percentile = |p: f64| latencies[((latencies.len() as f64 - 1.0) * p).round() as usize];
    println!(
        "long-poll wake-up after a signal ({rounds} rounds): p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
        ms(percentile(0.5)),
        ms(percentile(0.99)),
        ms(percentile(1.0))
    );

    let (rate, statements) = signal_rate(&engine, &http, &a.token, &base, signals).await?;
    println!(
        "durable signals on SQLite, 64 concurrent senders: {signals} in total, {rate:.0} signals/s, {statements:.1} store statements per signal"
    );
    shutdown.cancel();
    let _ = server.await;
    Ok(())
}

fn ms(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1000.0
}

async fn document(
    http: &reqwest::Client,
    base: &str,
    server: &str,
    token: &str,
) -> Result<(Value, String), reqwest::Error> {
    let response = http.get(format!("{base}/v1/servers/{server}/metadata")).bearer_auth(token).send().await?;
    let etag = response.headers().get("etag").and_then(|value| value.to_str().ok()).unwrap_or_default().to_string();
    let body = serde_json::from_str(&response.text().await?).unwrap_or(Value::Null);
    Ok((body, etag))
}

fn input_value(deployment: &Value, name: &str) -> String {
    deployment["inputs"]
        .as_array()
        .and_then(|inputs| inputs.iter().find(|input| input["name"] == name))
        .and_then(|input| input["value"].as_str())
        .unwrap_or_default()
        .to_string()
}

fn signal_url(deployment: &Value) -> String {
    input_value(deployment, "deploy_signal_id")
}

async fn wake_latency<S: Store>(
    engine: &Engine<S>,
    http: &reqwest::Client,
    a_token: &str,
    b_token: &str,
    base: &str,
    round: usize,
) -> Result<Duration, Box<dyn std::error::Error>> {
    let name = format!("chain{round}");
    let request = StackRequest { name: Some(name.clone()), template: CHAIN.into(), ..Default::default() };
    engine.create_stack(request).await?;
    let (_, etag) = document(http, base, "b", b_token).await?;
    let poll = {
        let http = http.clone();
        let url = format!("{base}/v1/servers/b/metadata?wait=30");
        let token = b_token.to_string();
        tokio::spawn(async move {
            let response = http.get(url).bearer_auth(token).header("If-None-Match", etag).send().await;
            (Instant::now(), response.map(|response| response.status().as_u16()))
        })
    };
    tokio::time::sleep(Duration::from_millis(5)).await;
    let (a_document, _) = document(http, base, "a", a_token).await?;
    let stack_prefix = format!("{name}/");
    let newest = a_document["deployments"]
        .as_array()
        .and_then(|list| {
            list.iter().find(|deployment| input_value(deployment, "deploy_stack_id").starts_with(&stack_prefix))
        })
        .cloned()
        .unwrap_or(Value::Null);
    let sent = Instant::now();
    http.post(signal_url(&newest))
        .body(json!({"out": round}).to_string())
        .header("Content-Type", "application/json")
        .send()
        .await?;
    let (woke, status) = poll.await?;
    if status? != 200 {
        return Err("the long-poll ended without the change".into());
    }
    Ok(woke.duration_since(sent))
}

async fn signal_rate<S: Store>(
    engine: &Engine<S>,
    http: &reqwest::Client,
    a_token: &str,
    base: &str,
    count: usize,
) -> Result<(f64, f64), Box<dyn std::error::Error>> {
    let mut template = String::from(
        "heat_template_version: 2018-08-31\nresources:\n  config:\n    type: OS::Heat::SoftwareConfig\n    properties: {group: script, config: \"#!/bin/sh\\n\"}\n",
    );
    for index in 0..count {
        template.push_str(&format!("  d{index}:\n    type: OS::Heat::SoftwareDeployment\n    properties: {{config: {{get_resource: config}}, server: a}}\n"));
    }
    let request = StackRequest { name: Some("many".into()), template, ..Default::default() };
    engine.create_stack(request).await?;
    let (a_document, _) = document(http, base, "a", a_token).await?;
    let urls: Vec<String> = a_document["deployments"]
        .as_array()
        .map(|list| {
            list.iter().filter(|d| input_value(d, "deploy_stack_id").starts_with("many/")).map(signal_url).collect()
        })
        .unwrap_or_default();
    let queue = Arc::new(std::sync::Mutex::new(urls));
    let statements_before = engine.store().statements();
    let started = Instant::now();
    let mut senders = Vec::new();
    for _ in 0..64 {
        let (queue, http) = (Arc::clone(&queue), http.clone());
        senders.push(tokio::spawn(async move {
            loop {
                let next = queue.lock().ok().and_then(|mut urls| urls.pop());
                let Some(url) = next else { return };
                let _ = http
                    .post(url)
                    .body("{\"deploy_status_code\": 0}")
                    .header("Content-Type", "application/json")
                    .send()
                    .await;
            }
        }));
    }
    for sender in senders {
        sender.await?;
    }
    let elapsed = started.elapsed().as_secs_f64();
    let statements = (engine.store().statements() - statements_before) as f64 / count as f64;
    let detail = engine.show_stack("many").await?;
    if detail.summary.status != "CREATE_COMPLETE" {
        return Err(format!("stack not complete after the signals: {}", detail.summary.status).into());
    }
    Ok((count as f64 / elapsed, statements))
}
