//! Scenario 7, signal throughput: a real `anneal-shim serve` on a SQLite file (WAL,
//! `synchronous=FULL`), one stack of N deployments in progress, and 64 concurrent senders posting
//! each deployment's signal once over loopback. Durable: each is committed before its 2xx.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anneal_tests::Shim;
use serde_json::{Map, Value, json};

use super::Context;
use crate::error::{BenchError, BenchResult, file_error, http_error};
use crate::report::{Measurement, ScenarioReport};

const SENDERS: usize = 64;
/// Deployments per stack: the shim takes request bodies up to 1 MiB.
const PER_STACK: usize = 2_000;

pub async fn run(context: &Context) -> BenchResult<ScenarioReport> {
    let count: usize = if context.smoke { 200 } else { 20_000 };
    let mut report = ScenarioReport::new("throughput", "7. Signal throughput", "none (Heat's engine is not run here)");
    report.command("anneal-shim serve --listen 127.0.0.1:0 --db sqlite://$TMP/shim.db");
    report.command(&format!(
        "POST /v1/stacks ({PER_STACK} deployments per stack, {count} in all); then {SENDERS} concurrent senders POST /v1/signals/<token>"
    ));
    let shim = Shim::start().await;
    let token_file = shim.token_file();
    let admin = std::fs::read_to_string(&token_file).map_err(file_error(&token_file))?.trim().to_string();
    let http = reqwest::Client::builder().pool_max_idle_per_host(128).build().map_err(http_error("HTTP client"))?;
    let credentials = shim.cli_json(&["server", "add", "sink", "--format", "json"]).await;
    let (Some(metadata_url), Some(token)) = (credentials["metadata_url"].as_str(), credentials["token"].as_str())
    else {
        return Err(BenchError::Failed(format!("server add printed no metadata_url/token: {credentials}")));
    };
    let stacks: Vec<String> = (0..count.div_ceil(PER_STACK)).map(|index| format!("many-{index}")).collect();
    for (index, stack) in stacks.iter().enumerate() {
        create_stack(&http, &shim, &admin, stack, PER_STACK.min(count - index * PER_STACK)).await?;
    }
    let urls = signal_urls(&http, metadata_url, token).await?;
    if urls.len() != count {
        return Err(BenchError::Failed(format!("the document has {} deployments, expected {count}", urls.len())));
    }
    let elapsed = send_all(&http, urls).await?;
    for stack in &stacks {
        let status = stack_status(&http, &shim, &admin, stack).await?;
        if status != "CREATE_COMPLETE" {
            return Err(BenchError::Failed(format!("stack {stack} not complete after the signals: {status}")));
        }
    }
    let rate = count as f64 / elapsed.as_secs_f64();
    report.measurements.push(
        Measurement::new(&format!("durable signals per second, {SENDERS} senders"), "signals/s", rate)
            .with_target("≥ 5,000/s", rate >= 5000.0)
            .note(&format!(
                "{count} signals to {} stacks in {:.2} s; the senders run on the same 2 cores as the shim",
                stacks.len(),
                elapsed.as_secs_f64()
            )),
    );
    if context.binaries.profile != "release" {
        report.notes.push(format!("{} build: the figure is not representative", context.binaries.profile));
    }
    Ok(report)
}

async fn create_stack(http: &reqwest::Client, shim: &Shim, admin: &str, name: &str, count: usize) -> BenchResult<()> {
    let mut resources = Map::new();
    resources.insert(
        "config".into(),
        json!({"type": "OS::Heat::SoftwareConfig", "properties": {"group": "script", "config": "#!/bin/sh\n"}}),
    );
    for index in 0..count {
        resources.insert(
            format!("d{index}"),
            json!({"type": "OS::Heat::SoftwareDeployment",
                   "properties": {"config": {"get_resource": "config"}, "server": "sink"}}),
        );
    }
    let template = json!({"heat_template_version": "2018-08-31", "resources": resources});
    let response = http
        .post(format!("{}/v1/stacks", shim.url()))
        .bearer_auth(admin)
        .json(&json!({"name": name, "template": template.to_string()}))
        .timeout(Duration::from_secs(300))
        .send()
        .await
        .map_err(http_error("POST /v1/stacks"))?;
    if !response.status().is_success() {
        let status = response.status();
        return Err(BenchError::Failed(format!(
            "stack create: {status}: {}",
            response.text().await.unwrap_or_default()
        )));
    }
    Ok(())
}

async fn signal_urls(http: &reqwest::Client, metadata_url: &str, token: &str) -> BenchResult<Vec<String>> {
    let response =
        http.get(metadata_url).bearer_auth(token).send().await.map_err(http_error("GET the server's metadata"))?;
    let document: Value = response.json().await.map_err(http_error("the server's metadata"))?;
    let deployments = document["deployments"].as_array().cloned().unwrap_or_default();
    Ok(deployments
        .iter()
        .filter_map(|deployment| {
            let inputs = deployment["inputs"].as_array()?;
            let input = inputs.iter().find(|input| input["name"] == "deploy_signal_id")?;
            input["value"].as_str().map(str::to_string)
        })
        .collect())
}

/// Posts every URL once from `SENDERS` tasks; fails on any non-2xx.
async fn send_all(http: &reqwest::Client, urls: Vec<String>) -> BenchResult<Duration> {
    let queue = Arc::new(Mutex::new(urls));
    let started = Instant::now();
    let mut senders = tokio::task::JoinSet::new();
    for _ in 0..SENDERS {
        let (queue, http) = (Arc::clone(&queue), http.clone());
        senders.spawn(async move {
            loop {
                let next = queue.lock().ok().and_then(|mut urls| urls.pop());
                let Some(url) = next else { return Ok(()) };
                let response = http
                    .post(url)
                    .header("Content-Type", "application/json")
                    .body("{\"deploy_status_code\": 0}")
                    .send()
                    .await
                    .map_err(http_error("POST a signal"))?;
                if !response.status().is_success() {
                    return Err(BenchError::Failed(format!("a signal was answered {}", response.status())));
                }
            }
        });
    }
    while let Some(joined) = senders.join_next().await {
        joined.map_err(|error| BenchError::Failed(format!("a sender task failed: {error}")))??;
    }
    Ok(started.elapsed())
}

async fn stack_status(http: &reqwest::Client, shim: &Shim, admin: &str, name: &str) -> BenchResult<String> {
    let response = http
        .get(format!("{}/v1/stacks/{name}", shim.url()))
        .bearer_auth(admin)
        .send()
        .await
        .map_err(http_error("GET /v1/stacks/<name>"))?;
    let detail: Value = response.json().await.map_err(http_error("stack detail"))?;
    Ok(detail["status"].as_str().unwrap_or_default().to_string())
}
