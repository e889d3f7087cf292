//! Scenario 8, a chain on a real Heat: the 5-hop chain of `tests/fixtures/real-heat/chain5.yaml`
//! (each hop's input is the previous hop's output, all on one `OS::Heat::DeployedServer`) on a
//! real OpenStack Heat + Keystone (tests/peers/real-heat), converged in turn by the stock agents
//! (os-collect-config + os-refresh-config + os-apply-config + heat-agents) polling every second,
//! by anneal-agent polling every second, and by anneal-agent at its default interval (30 s).
//! Each agent starts from the server's metadata once Heat has created the server (the stock
//! chain renders os-collect-config.conf from it, anneal-agent runs `bootstrap
//! --from-metadata`); the figure is the time from that start to CREATE_COMPLETE, so Heat's own
//! work before the server exists is left out for all three alike. The smoke run skips it (with
//! a note): starting a real Heat alone takes about 20 s; the tests run the same harness
//! (tests/tests/real_heat_*.rs).

use std::time::{Duration, Instant};

use anneal_tests::real_heat::{fixture_template, unique_stack_name};
use anneal_tests::{AgentSettings, AnnealServer, HeatApi, RealHeat, StockServer};

use super::{Context, millis};
use crate::error::{BenchError, BenchResult};
use crate::report::{Measurement, ScenarioReport, percentile};

/// How long one stack may take, server creation excluded (the default-interval variant polls
/// every 30 s, so five hops may take several minutes).
const STACK_LIMIT: Duration = Duration::from_secs(900);
/// anneal-agent's documented default `poll_interval_secs` (docs/configuration.md).
const ANNEAL_DEFAULT_POLL_SECS: u64 = 30;

/// Who converges the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Variant {
    Stock,
    AnnealEverySecond,
    AnnealDefault,
}

impl Variant {
    fn label(self) -> &'static str {
        match self {
            Variant::Stock => "stock os-collect-config chain, polling every 1 s",
            Variant::AnnealEverySecond => "anneal-agent, poll_interval_secs = 1",
            Variant::AnnealDefault => "anneal-agent, default poll_interval_secs (30)",
        }
    }
}

/// The running agents of one variant, stopped when dropped.
enum Agents {
    Stock(Box<StockServer>),
    Anneal(Box<AnnealServer>),
}

pub async fn run(context: &Context) -> BenchResult<ScenarioReport> {
    let mut report = ScenarioReport::new(
        "real-heat",
        "8. A chain on a real Heat",
        "os-collect-config 14.1.0 + heat-agents 13.0.0 on openstack-heat 27.0.1",
    );
    if context.smoke {
        report.notes.push("skipped in smoke mode: it starts a real Keystone + Heat (about 20 s)".into());
        return Ok(report);
    }
    let (fixture, rounds) = ("chain5.yaml", 3);
    let variants = [Variant::Stock, Variant::AnnealEverySecond, Variant::AnnealDefault];
    report.command(
        "tests/peers/real-heat/ctl.py start <target>/real-heat/private-bench   # keystone + heat-engine/heat-api/heat-api-cfn on loopback",
    );
    report.command(&format!(
        "POST /v1/<project>/stacks {{template: tests/fixtures/real-heat/{fixture}, transport POLL_SERVER_CFN, signal CFN_SIGNAL}}"
    ));
    report.command("os-collect-config --polling-interval 1 cfn   # after os-apply-config renders its config from the server's metadata");
    report.command("anneal-agent bootstrap --from-metadata $TMP/server-metadata.json; anneal-agent run");
    // An instance of its own, stopped when the scenario ends: nothing else loads it meanwhile.
    let heat = RealHeat::private("bench").await;
    let api = heat.admin().await;
    let mut figures: Vec<(Variant, Vec<f64>)> = Vec::new();
    for variant in variants {
        let mut times = Vec::with_capacity(rounds);
        for _ in 0..rounds {
            times.push(converge(&api, variant, fixture).await.map_err(|error| with_heat_log(error, &heat))?);
        }
        figures.push((variant, times));
    }
    report.measurements = measurements(&figures, fixture);
    report.notes.push(format!(
        "{rounds} stack(s) per variant, one after the other, on one shared Heat; POLL_SERVER_CFN + CFN_SIGNAL \
         (Heat's defaults); the time runs from the agents' start (the server exists) to CREATE_COMPLETE seen \
         (status polled every 200 ms)"
    ));
    if context.binaries.profile != "release" {
        report.notes.push(format!("{} build of anneal-agent", context.binaries.profile));
    }
    Ok(report)
}

/// One stack converged by `variant`: the milliseconds from the agents' start to
/// CREATE_COMPLETE.
async fn converge(api: &HeatApi, variant: Variant, fixture: &str) -> BenchResult<f64> {
    let parameters = [("transport", "POLL_SERVER_CFN"), ("signal", "CFN_SIGNAL")];
    let stack = api.create_stack(&unique_stack_name("bench"), &fixture_template(fixture), &parameters).await;
    api.wait_resource_status(&stack, "server", "CREATE_COMPLETE", Duration::from_secs(120)).await;
    let metadata = api.resource_metadata(&stack, "server").await;
    let started = Instant::now();
    let agents = match variant {
        Variant::Stock => Agents::Stock(Box::new(StockServer::start(&metadata).await)),
        Variant::AnnealEverySecond => {
            Agents::Anneal(Box::new(AnnealServer::start(&metadata, AgentSettings::default()).await))
        }
        Variant::AnnealDefault => {
            let settings = AgentSettings::default().line(&format!("poll_interval_secs = {ANNEAL_DEFAULT_POLL_SECS}"));
            Agents::Anneal(Box::new(AnnealServer::start(&metadata, settings).await))
        }
    };
    let shown = api.wait_stack_settled(&stack, None, STACK_LIMIT).await;
    let elapsed = started.elapsed();
    let status = shown["stack_status"].as_str().unwrap_or_default();
    if status != "CREATE_COMPLETE" {
        let logs = match &agents {
            Agents::Stock(server) => server.logs(),
            Agents::Anneal(server) => server.logs(),
        };
        return Err(BenchError::Failed(format!(
            "{}: stack {} ended {status}: {shown}\n{logs}",
            variant.label(),
            stack.name
        )));
    }
    drop(agents);
    Ok(millis(elapsed))
}

fn measurements(figures: &[(Variant, Vec<f64>)], fixture: &str) -> Vec<Measurement> {
    let median =
        |variant: Variant| figures.iter().find(|(known, _)| *known == variant).map(|(_, times)| percentile(times, 0.5));
    let stock = median(Variant::Stock);
    figures
        .iter()
        .filter(|(variant, _)| *variant != Variant::Stock)
        .map(|(variant, times)| {
            Measurement::new(
                &format!("{fixture}: agents' start to CREATE_COMPLETE, median"),
                "ms",
                percentile(times, 0.5),
            )
            .with_peer(stock)
            .note(&format!(
                "{} (max {:.0} ms) vs the {}",
                variant.label(),
                percentile(times, 1.0),
                Variant::Stock.label()
            ))
        })
        .collect()
}

fn with_heat_log(error: BenchError, heat: &RealHeat) -> BenchError {
    BenchError::Failed(format!("{error}\n{}", heat.log_tail()))
}
