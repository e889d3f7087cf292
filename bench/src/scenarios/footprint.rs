//! Scenario 1, agent footprint: the idle RSS of `anneal-agent run` and of `os-collect-config`
//! on the same local document, the size of the (release: stripped) agent binary, and the time
//! from exec to the first metadata request on a loopback receiver, for both.

use std::path::Path;
use std::time::{Duration, Instant};

use anneal_tests::Daemon;
use serde_json::json;
use tokio::process::Command;

use super::{Context, millis, noop_deployment, temp_dir, write_agent_config};
use crate::children::{idle_resident_kib, poll_until};
use crate::error::{BenchResult, file_error, write_file};
use crate::peers::Peers;
use crate::receiver::Receiver;
use crate::report::{Measurement, ScenarioReport, percentile};

const MIB: f64 = 1024.0 * 1024.0;

/// How much sampling a run does.
struct Sizes {
    settle: Duration,
    samples: usize,
    agent_starts: usize,
    peer_starts: usize,
}

pub async fn run(context: &Context) -> BenchResult<ScenarioReport> {
    let sizes = if context.smoke {
        Sizes { settle: Duration::from_secs(1), samples: 1, agent_starts: 2, peer_starts: 1 }
    } else {
        Sizes { settle: Duration::from_secs(5), samples: 3, agent_starts: 10, peer_starts: 5 }
    };
    let mut report = ScenarioReport::new("footprint", "1. Agent footprint", "os-collect-config 14.1.0 (PyPI)");
    let peers = context.peers(&mut report)?.cloned();
    let size = binary_size(context, &mut report)?;
    let rss = idle_rss(context, peers.as_ref(), &sizes, &mut report).await?;
    let start = first_request(context, peers.as_ref(), &sizes, &mut report).await?;
    report.measurements = vec![size, rss, start];
    Ok(report)
}

fn binary_size(context: &Context, report: &mut ScenarioReport) -> BenchResult<Measurement> {
    let agent = &context.binaries.agent;
    let bytes = std::fs::metadata(agent).map_err(file_error(agent))?.len() as f64;
    report.command(&format!("stat -c %s target/{}/anneal-agent", context.binaries.profile));
    let mut measurement = Measurement::new("anneal-agent binary size", "MiB", bytes / MIB)
        .with_target("< 8 MiB", bytes < 8.0 * MIB)
        .note(&format!("{} bytes", bytes as u64));
    measurement = if context.binaries.profile == "release" {
        measurement.note("release profile: opt-level z, LTO, strip = true")
    } else {
        measurement.note(&format!("{} profile, not stripped: the target applies to release", context.binaries.profile))
    };
    Ok(measurement)
}

async fn idle_rss(
    context: &Context,
    peers: Option<&Peers>,
    sizes: &Sizes,
    report: &mut ScenarioReport,
) -> BenchResult<Measurement> {
    let root = temp_dir("anneal-bench-rss-")?;
    let local = root.path().join("local.d");
    crate::error::create_dir(&local)?;
    let deployments: Vec<_> = (0..5).map(|index| noop_deployment(index, None)).collect();
    write_file(&local.join("metadata.json"), &json!({ "deployments": deployments }).to_string())?;

    let agent_root = root.path().join("agent");
    let source = format!("[[source]]\nkind = \"local\"\npath = \"{}\"\n", local.display());
    let config = write_agent_config(&agent_root, "", &source)?;
    let mut command = Command::new(&context.binaries.agent);
    command.arg("run").arg("--config").arg(&config).env("ANNEAL_LOG", "info");
    report.command("anneal-agent run --config $TMP/agent.toml   # [[source]] kind = \"local\", 5 no-op deployments");
    let agent = Daemon::spawn(command, &agent_root.join("agent.out"), &agent_root.join("agent.log"));
    let agent_kib = idle_resident(&agent, sizes).await?;
    drop(agent);

    let mut peer_kib = None;
    if let Some(peers) = peers {
        let peer_root = root.path().join("peer");
        crate::error::create_dir(&peer_root.join("peer-logs"))?;
        let command = peers.os_collect_config(
            &peer_root,
            "collectors = local\ncommand = true",
            &format!("[local]\npath = {}\n", local.display()),
        )?;
        report.command("os-collect-config --config-file $TMP/os-collect-config.conf   # collectors = local, command = true, the same document");
        let peer = Daemon::spawn(command, &peer_root.join("occ.out"), &peer_root.join("occ.log"));
        peer_kib = Some(idle_resident(&peer, sizes).await?);
    }
    let anneal_mib = agent_kib as f64 / 1024.0;
    let peer_mib = peer_kib.map(|kib| kib as f64 / 1024.0);
    let met = anneal_mib < 5.0 && peer_mib.is_none_or(|peer| anneal_mib <= peer / 10.0);
    let target = if peer_mib.is_some() { "≤ 1/10 of the peer and < 5 MiB" } else { "< 5 MiB (peer not measured)" };
    Ok(Measurement::new("idle RSS (VmRSS)", "MiB", anneal_mib).with_peer(peer_mib).with_target(target, met).note(
        &format!(
            "largest of {} sample(s) after {} s idle; the peer is its python process",
            sizes.samples,
            sizes.settle.as_secs()
        ),
    ))
}

async fn idle_resident(daemon: &Daemon, sizes: &Sizes) -> BenchResult<u64> {
    let pid = daemon.pid().ok_or_else(|| crate::error::BenchError::Failed("a daemon exited at once".into()))?;
    let kib = idle_resident_kib(pid, sizes.settle, sizes.samples, Duration::from_secs(1)).await?;
    if daemon.pid().is_none() {
        return Err(crate::error::BenchError::Failed(format!("the daemon died while idling: {}", daemon.log_text())));
    }
    Ok(kib)
}

async fn first_request(
    context: &Context,
    peers: Option<&Peers>,
    sizes: &Sizes,
    report: &mut ScenarioReport,
) -> BenchResult<Measurement> {
    report.command("anneal-agent run --config $TMP/agent.toml   # [[source]] kind = \"http\", a loopback receiver");
    let mut agent_ms = Vec::new();
    for _ in 0..sizes.agent_starts {
        let root = temp_dir("anneal-bench-start-")?;
        agent_ms.push(time_to_first_request(root.path(), |url| agent_command(context, root.path(), url)).await?);
    }
    let mut peer_ms = Vec::new();
    if let Some(peers) = peers {
        report.command(
            "os-collect-config --config-file $TMP/os-collect-config.conf   # collectors = request, the same receiver",
        );
        for _ in 0..sizes.peer_starts {
            let root = temp_dir("anneal-bench-start-")?;
            let sections = |url: &str| format!("[request]\nmetadata_url = {url}\n");
            let start = |url: &str| {
                peers.os_collect_config(root.path(), "collectors = request\ncommand = true", &sections(url))
            };
            peer_ms.push(time_to_first_request(root.path(), start).await?);
        }
    }
    let anneal = percentile(&agent_ms, 0.5);
    let peer = (!peer_ms.is_empty()).then(|| percentile(&peer_ms, 0.5));
    Ok(Measurement::new("exec to first metadata request (median)", "ms", anneal).with_peer(peer).note(&format!(
        "{} agent starts, {} peer starts",
        agent_ms.len(),
        peer_ms.len()
    )))
}

fn agent_command(context: &Context, root: &Path, url: &str) -> BenchResult<Command> {
    let source = format!("[[source]]\nkind = \"http\"\nurl = \"{url}\"\n");
    let config = write_agent_config(root, "", &source)?;
    let mut command = Command::new(&context.binaries.agent);
    command.arg("run").arg("--config").arg(config).env("ANNEAL_LOG", "info");
    Ok(command)
}

/// Starts what `start` builds against a fresh receiver; milliseconds until its first request.
async fn time_to_first_request(root: &Path, start: impl FnOnce(&str) -> BenchResult<Command>) -> BenchResult<f64> {
    let receiver = Receiver::start().await?;
    let command = start(&format!("{}/metadata", receiver.base()))?;
    let spawned = Instant::now();
    let daemon = Daemon::spawn(command, &root.join("start.out"), &root.join("start.log"));
    let first = poll_until("the first metadata request", Duration::from_secs(30), Duration::from_millis(1), || {
        receiver.first_request()
    })
    .await;
    let first = first.map_err(|error| {
        crate::error::BenchError::Failed(format!("{error}; its log: {}", crate::children::tail(&daemon.log_text())))
    })?;
    drop(daemon);
    Ok(millis(first.duration_since(spawned)))
}
