//! Scenario 7, signal throughput: real `anneal-shim serve` processes, stacks of N deployments
//! in progress, and 64 concurrent senders posting each deployment's signal once over loopback.
//! Durable: each is committed before its 2xx. On each store of `--db`, side by side: a SQLite
//! file (WAL, `synchronous=FULL`), PostgreSQL with one replica, and PostgreSQL with three, the
//! signals spread over the replicas in turn. The serve process has no statement counter, so
//! the statements and commits per signal come from an in-process replay of the same calls on a
//! fresh store of the same kind (`replay`).

mod http;
mod replay;

use std::time::Duration;

use serde_json::{Map, Value, json};

use self::replay::Replayed;
use super::Context;
use super::backend::{Backend, PostgresServer, metric, side_by_side};
use super::shims::Shims;
use crate::error::{BenchError, BenchResult, http_error};
use crate::report::{Measurement, ScenarioReport};

const SENDERS: usize = 64;
/// Deployments per stack: the shim takes request bodies up to 1 MiB.
const PER_STACK: usize = 2_000;

/// One variant's figures.
struct Measured {
    backend: Backend,
    signals: usize,
    stacks: usize,
    elapsed: Duration,
    replayed: Replayed,
}

pub async fn run(context: &Context) -> BenchResult<ScenarioReport> {
    let count: usize = if context.smoke { 200 } else { 20_000 };
    let backends = context.database.backends();
    let mut report = ScenarioReport::new("throughput", "7. Signal throughput", "none (Heat's engine is not run here)");
    for &backend in &backends {
        for command in Shims::commands(backend) {
            report.command(&command);
        }
    }
    report.command(&format!(
        "POST /v1/stacks ({PER_STACK} deployments per stack, {count} in all); then {SENDERS} concurrent senders POST /v1/signals/<token>"
    ));
    report.command(&format!(
        "in-process replay per store: one stack of {} deployments; {SENDERS} in flight: Service::signal_token_known + \
         Service::deployment_signal",
        count.min(PER_STACK)
    ));
    let postgres = context.postgres(&backends).await?;
    let mut per_backend = Vec::with_capacity(backends.len());
    let mut sqlite_rate = None;
    for &backend in &backends {
        eprintln!("anneal-bench: signals on {} ...", backend.label());
        let measured = measure(backend, postgres, count).await?;
        let rate = measured.rate();
        per_backend.push(measured.rows(sqlite_rate));
        if backend == Backend::Sqlite {
            sqlite_rate = Some(rate);
        }
    }
    report.measurements = side_by_side(per_backend);
    if let Some(postgres) = postgres {
        report.notes.push(format!("{}; with 3 replicas, signal k goes to replica k mod 3", postgres.describe()));
    }
    report.notes.push(
        "statements per signal: `anneal-shim serve` counts none, so each store's figure comes from the in-process \
         replay (the same Service calls the signal route makes, on a fresh store of the same kind, as many engines as \
         replicas, each with its replication task); every statement the stores count, BEGIN and COMMIT of write \
         transactions included"
            .into(),
    );
    if context.binaries.profile != "release" {
        report.notes.push(format!("{} build: the figures are not representative", context.binaries.profile));
    }
    Ok(report)
}

/// The variant over HTTP, then its replay.
async fn measure(backend: Backend, postgres: Option<&PostgresServer>, count: usize) -> BenchResult<Measured> {
    let shims = Shims::start(backend, postgres, &backend.database_name("throughput", None)).await?;
    let (elapsed, stacks) = over_http(&shims, count)
        .await
        .map_err(|error| BenchError::Failed(format!("{}: {error}\n{}", backend.label(), shims.log_tails())))?;
    drop(shims);
    let replayed = replay::replay(backend, postgres, count.min(PER_STACK)).await?;
    Ok(Measured { backend, signals: count, stacks, elapsed, replayed })
}

/// Registers the sink, creates the stacks on the first shim, and sends every signal, spread
/// over the shims; returns the time the signals took and the number of stacks.
async fn over_http(shims: &Shims, count: usize) -> BenchResult<(Duration, usize)> {
    let admin = shims.admin_token();
    let base = shims.get(0).url();
    let http = reqwest::Client::builder().pool_max_idle_per_host(128).build().map_err(http_error("HTTP client"))?;
    let credentials = shims.get(0).cli_json(&["server", "add", "sink", "--format", "json"]).await;
    let (Some(metadata_url), Some(token)) = (credentials["metadata_url"].as_str(), credentials["token"].as_str())
    else {
        return Err(BenchError::Failed(format!("server add printed no metadata_url/token: {credentials}")));
    };
    let stacks: Vec<String> = (0..count.div_ceil(PER_STACK)).map(|index| format!("many-{index}")).collect();
    for (index, stack) in stacks.iter().enumerate() {
        http::create_stack(&http, base, admin, stack, template(PER_STACK.min(count - index * PER_STACK))).await?;
    }
    let urls = http::signal_urls(&http, metadata_url, token).await?;
    if urls.len() != count {
        return Err(BenchError::Failed(format!("the document has {} deployments, expected {count}", urls.len())));
    }
    let spread = urls.iter().enumerate().map(|(index, url)| shims.rebase(url, index)).collect::<BenchResult<_>>()?;
    let elapsed = http::send_all(&http, spread, SENDERS).await?;
    for stack in &stacks {
        let status = http::stack_status(&http, base, admin, stack).await?;
        if status != "CREATE_COMPLETE" {
            return Err(BenchError::Failed(format!("stack {stack} not complete after the signals: {status}")));
        }
    }
    Ok((elapsed, stacks.len()))
}

impl Measured {
    fn rate(&self) -> f64 {
        self.signals as f64 / self.elapsed.as_secs_f64()
    }

    /// Signals per second (with the target), then statements and commits per signal.
    fn rows(&self, sqlite_rate: Option<f64>) -> Vec<Measurement> {
        let rate = self.rate();
        let mut throughput = Measurement::new(
            &metric(&format!("durable signals per second, {SENDERS} senders"), self.backend),
            "signals/s",
            rate,
        )
        .with_target("≥ 5,000/s", rate >= 5000.0)
        .note(&format!(
            "{} signals to {} stacks in {:.2} s; the senders run on the same 2 cores as the shim",
            self.signals,
            self.stacks,
            self.elapsed.as_secs_f64()
        ));
        if let Some(sqlite) = sqlite_rate {
            throughput = throughput.note(&format!("{:.2}x SQLite's rate", rate / sqlite));
        }
        let replayed = &self.replayed;
        let statements = Measurement::new(
            &metric("store statements per signal", self.backend),
            "statements",
            replayed.statements_per_signal(),
        )
        .note(&format!(
            "in-process replay: {} statements / {} signals ({:.0} signals/s in-process)",
            replayed.statements,
            replayed.signals,
            replayed.signals as f64 / replayed.elapsed.as_secs_f64().max(1e-9)
        ));
        let commits =
            Measurement::new(&metric("commits per signal", self.backend), "commits", replayed.commits_per_signal())
                .note(&format!("in-process replay: {} commits / {} signals", replayed.commits, replayed.signals));
        vec![throughput, statements, commits]
    }
}

/// A template of `count` no-op script deployments on server `sink`.
fn template(count: usize) -> String {
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
    json!({"heat_template_version": "2018-08-31", "resources": resources}).to_string()
}

/// The `deploy_signal_id` of every deployment in a server's document.
fn signal_ids(document: &Value) -> Vec<String> {
    let deployments = document["deployments"].as_array().cloned().unwrap_or_default();
    deployments
        .iter()
        .filter_map(|deployment| {
            let inputs = deployment["inputs"].as_array()?;
            let input = inputs.iter().find(|input| input["name"] == "deploy_signal_id")?;
            input["value"].as_str().map(str::to_string)
        })
        .collect()
}
