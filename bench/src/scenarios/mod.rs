//! The scenarios of the benchmark issue, each a module returning a `ScenarioReport`:
//! 1 `footprint`, 2 `overhead`, 3 `latency`, 4 `chain`, 5 `fleet`, 6 `graph`, 7 `throughput`,
//! 8 `real_heat`, 9 `hooks`. `Context` says which binaries to run, where the peers are, which stores the
//! scenarios that compare them measure (5, 6 and 7: `backend`, with `engines` for the
//! in-process ones and `shims` for the ones that run `anneal-shim serve`) and whether this is
//! the smoke run (tiny sizes).

pub mod backend;
mod chain;
mod engines;
mod fleet;
mod footprint;
mod graph;
mod hooks;
mod latency;
mod overhead;
mod real_heat;
mod shims;
mod throughput;

pub use self::fleet::serve_floor;

use std::path::Path;

use serde_json::{Value, json};

use self::backend::{Backend, Database, PostgresServer};
use crate::binaries::Binaries;
use crate::error::{BenchError, BenchResult, create_dir, write_file};
use crate::peers::Peers;
use crate::report::ScenarioReport;

/// What every scenario needs.
#[derive(Debug)]
pub struct Context {
    pub binaries: Binaries,
    /// The installed peers, or why they are not there.
    pub peers: Result<Peers, String>,
    pub smoke: bool,
    /// The stores scenarios 5, 6 and 7 measure.
    pub database: Database,
    /// The PostgreSQL server those scenarios share (a database each), started by the first
    /// that needs it and stopped when the run ends.
    postgres: tokio::sync::OnceCell<PostgresServer>,
}

impl Context {
    pub fn new(binaries: Binaries, peers: Result<Peers, String>, smoke: bool, database: Database) -> Context {
        Context { binaries, peers, smoke, database, postgres: tokio::sync::OnceCell::new() }
    }

    /// The shared PostgreSQL server when `backends` holds a PostgreSQL variant, started on
    /// first use: with fsync on in full runs, so a commit is as durable as SQLite's
    /// `synchronous=FULL`; off in smoke, which only checks that the harness works.
    pub async fn postgres(&self, backends: &[Backend]) -> BenchResult<Option<&PostgresServer>> {
        if !backends.iter().any(|backend| matches!(backend, Backend::Postgres { .. })) {
            return Ok(None);
        }
        self.postgres.get_or_try_init(|| async { PostgresServer::start(!self.smoke) }).await.map(Some)
    }

    /// The peers; a missing install fails a full run and skips the peer (with a note) in smoke.
    pub fn peers(&self, report: &mut ScenarioReport) -> BenchResult<Option<&Peers>> {
        match (&self.peers, self.smoke) {
            (Ok(peers), _) => Ok(Some(peers)),
            (Err(why), true) => {
                report.notes.push(format!("peer skipped in smoke mode: {why}"));
                Ok(None)
            }
            (Err(why), false) => Err(BenchError::Failed(why.clone())),
        }
    }
}

/// The scenarios, in the order `all` runs them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Scenario {
    /// 1: idle RSS, binary size, exec to first metadata request.
    Footprint,
    /// 2: per-deployment overhead of no-op script deployments.
    Overhead,
    /// 3: change-to-hook-start latency.
    Latency,
    /// 4: a 20-hop cross-server get_attr chain over 20 agents.
    Chain,
    /// 5: 10,000 long-polling agents (one load generator) on one shim, or spread over replicas.
    Fleet,
    /// 6: 10k/50k-deployment random DAG over simulated servers; statements per signal and per
    /// deployment.
    Graph,
    /// 7: durable signals per second; statements per signal.
    Throughput,
    /// 8: a 5-hop chain on a real Heat: the stock agents vs anneal-agent, each polling every
    /// second, and anneal-agent at its default interval.
    RealHeat,
    /// 9: per-deployment overhead of the built-in hooks vs heat-agents' Python hooks (same
    /// fake tool).
    Hooks,
}

impl Scenario {
    pub const ALL: [Scenario; 9] = [
        Scenario::Footprint,
        Scenario::Overhead,
        Scenario::Latency,
        Scenario::Chain,
        Scenario::Fleet,
        Scenario::Graph,
        Scenario::Throughput,
        Scenario::RealHeat,
        Scenario::Hooks,
    ];

    pub async fn run(self, context: &Context) -> BenchResult<ScenarioReport> {
        let started = std::time::Instant::now();
        let mut report = match self {
            Scenario::Footprint => footprint::run(context).await?,
            Scenario::Overhead => overhead::run(context).await?,
            Scenario::Latency => latency::run(context).await?,
            Scenario::Chain => chain::run(context).await?,
            Scenario::Fleet => fleet::run(context).await?,
            Scenario::Graph => graph::run(context).await?,
            Scenario::Throughput => throughput::run(context).await?,
            Scenario::RealHeat => real_heat::run(context).await?,
            Scenario::Hooks => hooks::run(context).await?,
        };
        report.seconds = started.elapsed().as_secs_f64();
        Ok(report)
    }
}

/// A no-op `script` deployment in Heat's metadata format, signalled by POST to `signal_url`
/// when one is given.
pub fn noop_deployment(index: usize, signal_url: Option<&str>) -> Value {
    let inputs = match signal_url {
        Some(url) => json!([
            {"name": "deploy_signal_id", "value": url, "type": "String"},
            {"name": "deploy_signal_verb", "value": "POST", "type": "String"},
        ]),
        None => json!([]),
    };
    json!({
        "id": format!("bench-{index:05}"),
        "name": format!("{index:05}_noop"),
        "group": "script",
        "config": "#!/bin/sh\n",
        "inputs": inputs,
        "outputs": [],
        "options": null,
    })
}

/// Writes an agent config under `root` (state and hooks dirs there) with `sources` appended.
pub fn write_agent_config(root: &Path, extra: &str, sources: &str) -> BenchResult<std::path::PathBuf> {
    create_dir(&root.join("hooks"))?;
    let config = root.join("agent.toml");
    let text = format!(
        "[agent]\nstate_dir = \"{}\"\nhooks_dirs = [\"{}\"]\n{extra}\n{sources}",
        root.join("state").display(),
        root.join("hooks").display()
    );
    write_file(&config, &text)?;
    Ok(config)
}

/// A fresh temp dir whose name starts with `prefix`.
/// A private (0700) temp dir: `anneal-shim serve` refuses a database directory others may enter.
pub fn temp_dir(prefix: &str) -> BenchResult<tempfile::TempDir> {
    use std::os::unix::fs::PermissionsExt as _;
    let dir = tempfile::Builder::new()
        .prefix(prefix)
        .tempdir()
        .map_err(|source| BenchError::Process { what: "create a temp dir".into(), source })?;
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700))
        .map_err(|source| BenchError::Process { what: "make a temp dir private".into(), source })?;
    Ok(dir)
}

/// Polls `GET /v1/stacks/<name>` every 5 ms until the stack is `CREATE_COMPLETE` (its detail is
/// returned); a failed stack or the deadline is an error.
pub async fn wait_stack_complete(
    http: &reqwest::Client,
    base: &str,
    admin: &str,
    name: &str,
    limit: std::time::Duration,
) -> BenchResult<Value> {
    let deadline = std::time::Instant::now() + limit;
    loop {
        let response = http
            .get(format!("{base}/v1/stacks/{name}"))
            .bearer_auth(admin)
            .send()
            .await
            .map_err(crate::error::http_error("GET /v1/stacks/<name>"))?;
        let detail: Value = response.json().await.map_err(crate::error::http_error("stack detail"))?;
        match detail["status"].as_str().unwrap_or_default() {
            "CREATE_COMPLETE" => return Ok(detail),
            "CREATE_FAILED" => return Err(BenchError::Failed(format!("stack {name} failed: {detail}"))),
            _ if std::time::Instant::now() >= deadline => {
                return Err(BenchError::Failed(format!("stack {name} not complete after {limit:?}: {detail}")));
            }
            _ => tokio::time::sleep(std::time::Duration::from_millis(5)).await,
        }
    }
}

/// Milliseconds in a `Duration`.
pub fn millis(duration: std::time::Duration) -> f64 {
    duration.as_secs_f64() * 1000.0
}
