//! Scenario 3, change-to-hook-start latency: the shim publishes a change (a new stack with one
//! deployment for the server, created through its HTTP API) and the hook's script records when
//! it started (`$EPOCHREALTIME`). anneal-agent long-polls; stock os-collect-config (the whole
//! chain: os-refresh-config, os-apply-config, 55-heat-config, hook-script.py) polls the shim's
//! request URL at its fastest setting (1 s) and at its default (30 s, a small sample).

use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anneal_tests::{Agent, AgentSettings, Daemon, Shim};
use serde_json::json;
use tokio::process::Command;

use super::{Context, temp_dir};
use crate::children::{poll_until, tail};
use crate::error::{BenchError, BenchResult, file_error, http_error};
use crate::peers::Peers;
use crate::report::{Measurement, ScenarioReport, percentile};

/// The shim, its admin token and an HTTP client.
struct Publisher {
    shim: Shim,
    token: String,
    http: reqwest::Client,
}

/// How a series of changes is spaced: pollers get a random pause in [0, jitter) first so that
/// changes land at random points of their poll cycle.
struct Series<'a> {
    server: &'a str,
    markers: &'a Path,
    changes: usize,
    jitter: Duration,
    wait_limit: Duration,
}

pub async fn run(context: &Context) -> BenchResult<ScenarioReport> {
    let (anneal_changes, fast_changes, default_changes) = if context.smoke { (5, 0, 0) } else { (200, 40, 5) };
    let mut report = ScenarioReport::new(
        "latency",
        "3. Change-to-hook-start latency",
        "os-collect-config 14.1.0 + os-refresh-config + os-apply-config + heat-agents 13.0.0",
    );
    let peers = if context.smoke {
        report.notes.push("peer skipped in smoke mode: each change waits for a poll cycle of seconds".into());
        None
    } else {
        context.peers(&mut report)?.cloned()
    };
    let shim = Shim::start().await;
    let token_file = shim.token_file();
    let token = std::fs::read_to_string(&token_file).map_err(file_error(&token_file))?.trim().to_string();
    let publisher = Publisher { shim, token, http: reqwest::Client::new() };
    report.command("anneal-shim serve --listen 127.0.0.1:0 --db sqlite://$TMP/shim.db");
    report.command("POST /v1/stacks {name, template: one SoftwareDeployment whose script writes $EPOCHREALTIME}");

    let anneal = anneal_series(context, &publisher, anneal_changes, &mut report).await?;
    let (fast, slow) = match &peers {
        Some(peers) => {
            let fast = stock_series(peers, &publisher, fast_changes, true, &mut report).await?;
            let slow = stock_series(peers, &publisher, default_changes, false, &mut report).await?;
            (Some(fast), Some(slow))
        }
        None => (None, None),
    };
    let figure = |values: &Option<Vec<f64>>, p: f64| values.as_ref().map(|values| percentile(values, p));
    let p99 = percentile(&anneal, 0.99);
    let counts = format!(
        "anneal {} changes; os-collect-config {} at polling_interval=1, {} at its default 30 s",
        anneal.len(),
        fast.as_ref().map_or(0, Vec::len),
        slow.as_ref().map_or(0, Vec::len)
    );
    report.measurements = vec![
        Measurement::new("p50, vs os-collect-config polling_interval=1", "ms", percentile(&anneal, 0.5))
            .with_peer(figure(&fast, 0.5)),
        Measurement::new("p99, vs os-collect-config polling_interval=1", "ms", p99)
            .with_peer(figure(&fast, 0.99))
            .with_target("anneal p99 < 50 ms", p99 < 50.0),
        Measurement::new("p50, vs os-collect-config default (30 s)", "ms", percentile(&anneal, 0.5))
            .with_peer(figure(&slow, 0.5))
            .note("the peer's sample is small: a change waits up to 30 s"),
        Measurement::new("p99, vs os-collect-config default (30 s)", "ms", p99)
            .with_peer(figure(&slow, 0.99))
            .note("with 5 samples the peer's p99 is its maximum"),
    ];
    report.notes.push(counts);
    report.notes.push("each series starts with one warm-up change that is not counted".into());
    Ok(report)
}

async fn anneal_series(
    context: &Context,
    publisher: &Publisher,
    changes: usize,
    report: &mut ScenarioReport,
) -> BenchResult<Vec<f64>> {
    let dir = temp_dir("anneal-bench-latency-")?;
    let agent = Agent::register(&publisher.shim, dir.path(), "anneal", &AgentSettings::default()).await;
    let mut command = Command::new(&context.binaries.agent);
    command.arg("run").arg("--config").arg(agent.config_path()).env("ANNEAL_LOG", "info");
    report.command(
        "anneal-agent run --config $TMP/agent.toml   # [[source]] kind = \"http\": the shim's metadata URL (long-poll)",
    );
    let daemon = Daemon::spawn(command, &agent.dir().join("agent.out"), &agent.log_path());
    let markers = dir.path().join("markers");
    crate::error::create_dir(&markers)?;
    let series = Series {
        server: "anneal",
        markers: &markers,
        changes,
        jitter: Duration::ZERO,
        wait_limit: Duration::from_secs(30),
    };
    let result = publish_series(publisher, &series).await;
    result.map_err(|error| BenchError::Failed(format!("{error}\nagent log: {}", tail(&daemon.log_text()))))
}

async fn stock_series(
    peers: &Peers,
    publisher: &Publisher,
    changes: usize,
    fastest: bool,
    report: &mut ScenarioReport,
) -> BenchResult<Vec<f64>> {
    let server = if fastest { "stock-fast" } else { "stock-default" };
    let credentials = publisher.shim.cli_json(&["server", "add", server, "--format", "json"]).await;
    let request_url = credentials["request_url"]
        .as_str()
        .ok_or_else(|| BenchError::Failed("server add printed no request_url".into()))?;
    let dir = temp_dir("anneal-bench-stock-")?;
    let root = dir.path();
    peers.prepare_refresh_chain(root)?;
    let polling = if fastest { "polling_interval = 1\nmin_polling_interval = 1\n" } else { "" };
    let settings =
        format!("command = os-refresh-config --lockfile {}/orc.lock\ncollectors = request\n{polling}", root.display());
    let command = peers.os_collect_config(root, &settings, &format!("[request]\nmetadata_url = {request_url}\n"))?;
    report.command(&format!(
        "os-collect-config --config-file $TMP/os-collect-config.conf   # collectors = request, command = os-refresh-config{}",
        if fastest { ", polling_interval = min_polling_interval = 1" } else { ", default polling" }
    ));
    let daemon = Daemon::spawn(command, &root.join("occ.out"), &root.join("occ.log"));
    let cached = root.join("occ/request.json");
    poll_until("os-collect-config's first cycle", Duration::from_secs(60), Duration::from_millis(50), || {
        cached.is_file().then_some(())
    })
    .await?;
    if !fastest {
        // Its sleep doubles from min_polling_interval (1 s) each cycle up to 30 s: 1+2+4+8+16.
        tokio::time::sleep(Duration::from_secs(32)).await;
    }
    let markers = root.join("markers");
    crate::error::create_dir(&markers)?;
    let jitter = if fastest { Duration::from_secs(1) } else { Duration::from_secs(30) };
    let series = Series { server, markers: &markers, changes, jitter, wait_limit: Duration::from_secs(120) };
    let result = publish_series(publisher, &series).await;
    result.map_err(|error| BenchError::Failed(format!("{error}\nos-collect-config log: {}", tail(&daemon.log_text()))))
}

/// Publishes `changes` stacks one after the other; milliseconds from each publication to its
/// hook's start.
async fn publish_series(publisher: &Publisher, series: &Series<'_>) -> BenchResult<Vec<f64>> {
    let mut random = seed();
    let mut latencies = Vec::with_capacity(series.changes);
    // Change 0 is a warm-up (the agent's first long-poll may not be in place yet): not counted.
    for index in 0..=series.changes {
        if !series.jitter.is_zero() {
            random ^= random << 13;
            random ^= random >> 7;
            random ^= random << 17;
            tokio::time::sleep(series.jitter.mul_f64((random % 10_000) as f64 / 10_000.0)).await;
        }
        let stack = format!("{}-{index}", series.server);
        let marker = series.markers.join(&stack);
        let sent = publish(publisher, &stack, series.server, &marker).await?;
        let started =
            poll_until("the hook to start", series.wait_limit, Duration::from_millis(1), || read_marker(&marker))
                .await?;
        if index > 0 {
            latencies.push((started - sent) * 1000.0);
        }
        wait_complete(publisher, &stack, series.wait_limit).await?;
    }
    Ok(latencies)
}

/// Creates stack `stack` with one deployment on `server`; returns when the request was sent
/// (seconds since the epoch).
async fn publish(publisher: &Publisher, stack: &str, server: &str, marker: &Path) -> BenchResult<f64> {
    let script = format!("#!/bin/bash\necho \"$EPOCHREALTIME\" > {}.tmp && mv {0}.tmp {0}\n", marker.display());
    let template = json!({
        "heat_template_version": "2018-08-31",
        "resources": {
            "config": {"type": "OS::Heat::SoftwareConfig", "properties": {"group": "script", "config": script}},
            "deployment": {
                "type": "OS::Heat::SoftwareDeployment",
                "properties": {"config": {"get_resource": "config"}, "server": server},
            },
        },
    });
    let body = json!({"name": stack, "template": template.to_string()});
    let sent = epoch_seconds();
    let response = publisher
        .http
        .post(format!("{}/v1/stacks", publisher.shim.url()))
        .bearer_auth(&publisher.token)
        .json(&body)
        .send()
        .await
        .map_err(http_error("POST /v1/stacks"))?;
    if !response.status().is_success() {
        let status = response.status();
        let text = response.text().await.unwrap_or_default();
        return Err(BenchError::Failed(format!("POST /v1/stacks: {status}: {text}")));
    }
    Ok(sent)
}

async fn wait_complete(publisher: &Publisher, stack: &str, limit: Duration) -> BenchResult<()> {
    super::wait_stack_complete(&publisher.http, publisher.shim.url(), &publisher.token, stack, limit).await.map(drop)
}

fn read_marker(marker: &Path) -> Option<f64> {
    std::fs::read_to_string(marker).ok()?.trim().replace(',', ".").parse().ok()
}

fn epoch_seconds() -> f64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|elapsed| elapsed.as_secs_f64()).unwrap_or_default()
}

fn seed() -> u64 {
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map(|elapsed| elapsed.subsec_nanos()).unwrap_or(1);
    u64::from(nanos) | 1
}
