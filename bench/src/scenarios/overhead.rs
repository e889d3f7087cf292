//! Scenario 2, per-deployment overhead: N no-op script deployments, each signalled by POST to a
//! loopback receiver. anneal: `anneal-agent once` on a local document. Peer: heat-agents'
//! `55-heat-config` on the same list (os-apply-config's output), running `hook-script.py` and
//! `heat-config-notify` per deployment, as os-refresh-config would call it.

use std::time::Duration;

use serde_json::{Value, json};
use tokio::process::Command;

use super::{Context, millis, noop_deployment, temp_dir, write_agent_config};
use crate::children::run_ok;
use crate::error::{BenchError, BenchResult, create_dir, write_file};
use crate::peers::Peers;
use crate::receiver::Receiver;
use crate::report::{Measurement, ScenarioReport};

const AGENT_LIMIT: Duration = Duration::from_secs(300);
const PEER_LIMIT: Duration = Duration::from_secs(900);

pub async fn run(context: &Context) -> BenchResult<ScenarioReport> {
    let counts: &[usize] = if context.smoke { &[5] } else { &[50, 500] };
    let mut report = ScenarioReport::new(
        "overhead",
        "2. Per-deployment overhead",
        "heat-agents 13.0.0 (PyPI sdist): 55-heat-config + hook-script.py + heat-config-notify",
    );
    let peers = context.peers(&mut report)?.cloned();
    report.command("anneal-agent once --config $TMP/agent.toml   # [[source]] kind = \"local\"");
    if peers.is_some() {
        report
            .command("HEAT_SHELL_CONFIG=$TMP/run/heat-config HEAT_CONFIG_HOOKS=$TMP/hooks ... python3 55-heat-config");
    }
    for &count in counts {
        let anneal = agent_once(context, count).await?;
        let peer = match &peers {
            Some(peers) => Some(heat_config(peers, count).await?),
            None => None,
        };
        let per = |total: f64| total / count as f64;
        let anneal_per = per(anneal);
        let peer_per = peer.map(per);
        let ratio = peer_per.map(|peer| peer / anneal_per);
        let target = if peer.is_some() { "≥ 100x less than the peer" } else { "≥ 100x (peer not measured)" };
        let measurement = Measurement::new(&format!("wall time per deployment, {count} deployments"), "ms", anneal_per)
            .with_peer(peer_per)
            .with_target(target, ratio.is_some_and(|ratio| ratio >= 100.0))
            .note(&format!(
                "total: anneal {:.0} ms{}",
                anneal,
                peer.map(|peer| format!(", peer {peer:.0} ms")).unwrap_or_default()
            ));
        report.measurements.push(measurement);
    }
    Ok(report)
}

fn deployments(receiver: &Receiver, count: usize) -> Vec<Value> {
    (0..count).map(|index| noop_deployment(index, Some(&format!("{}/signal/{index}", receiver.base())))).collect()
}

/// Milliseconds of `anneal-agent once` for `count` deployments; checks every signal arrived.
async fn agent_once(context: &Context, count: usize) -> BenchResult<f64> {
    let receiver = Receiver::start().await?;
    let root = temp_dir("anneal-bench-once-")?;
    let local = root.path().join("local.d");
    create_dir(&local)?;
    write_file(&local.join("metadata.json"), &json!({ "deployments": deployments(&receiver, count) }).to_string())?;
    let source = format!("[[source]]\nkind = \"local\"\npath = \"{}\"\n", local.display());
    let config = write_agent_config(root.path(), "", &source)?;
    let mut command = Command::new(&context.binaries.agent);
    command.arg("once").arg("--config").arg(config).env("ANNEAL_LOG", "warn");
    let finished = run_ok("anneal-agent once", command, AGENT_LIMIT).await?;
    expect_signals(&receiver, count, "anneal-agent once")?;
    Ok(millis(finished.wall))
}

/// Milliseconds of `55-heat-config` for `count` deployments; checks every signal arrived.
async fn heat_config(peers: &Peers, count: usize) -> BenchResult<f64> {
    let receiver = Receiver::start().await?;
    let root = temp_dir("anneal-bench-heat-config-")?;
    peers.prepare_heat_config(root.path())?;
    let list = Value::Array(deployments(&receiver, count));
    write_file(&root.path().join("run/heat-config"), &list.to_string())?;
    let mut command = Command::new(peers.venv_bin("python3"));
    command.arg(peers.heat_config()).current_dir(root.path()).env_clear().envs(peers.environment(root.path()));
    let finished = run_ok("55-heat-config", command, PEER_LIMIT).await?;
    expect_signals(&receiver, count, "55-heat-config")?;
    Ok(millis(finished.wall))
}

fn expect_signals(receiver: &Receiver, count: usize, what: &str) -> BenchResult<()> {
    if receiver.requests() != count {
        return Err(BenchError::Failed(format!(
            "{what}: the receiver got {} signals, expected {count}",
            receiver.requests()
        )));
    }
    Ok(())
}
