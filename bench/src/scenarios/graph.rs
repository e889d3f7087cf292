//! Scenario 6, graph scale: the engine in-process on a real SQLite file (WAL,
//! `synchronous=FULL`), one stack whose template is a seeded random DAG of N deployments over
//! N/10 servers (fan-in and fan-out up to 10, inputs through `get_attr`), and simulated agents
//! that complete each deployment as soon as it is released. It measures the time from the
//! stack's create to its last signal (the stack is then CREATE_COMPLETE) and the store
//! statements per deployment (the store's own counter), at three graph sizes, to show that
//! the work per deployment does not grow with the graph.

mod agents;
mod dag;

use std::sync::Arc;
use std::time::{Duration, Instant};

use anneal_shim::engine::{Engine, EngineConfig, TokenKey};
use anneal_shim::model::{AddServer, Service, StackRequest};
use anneal_shim::store::{SqliteStore, Store};
use tokio::task::JoinSet;

use self::agents::{IN_FLIGHT, SimulatedAgents};
use self::dag::{Dag, MAX_DEGREE, server_name};
use super::{Context, temp_dir};
use crate::error::{BenchError, BenchResult};
use crate::report::{Measurement, ScenarioReport};

const SEED: u64 = 0x5eed_0006;
/// Deployments per server, as in the 10,000 over 1,000.
const PER_SERVER: usize = 10;
/// The size the 10 s target is for.
const TARGET_SIZE: usize = 10_000;
/// Templates of 50,000 deployments are about 15 MB; the engine's default limit is 1 MiB.
const TEMPLATE_LIMIT: usize = 64 << 20;

/// How long one size may take to converge before it is stopped and reported as it stands.
const CONVERGE_LIMIT: Duration = Duration::from_secs(90);

/// One graph size's figures.
struct Converged {
    deployments: usize,
    servers: usize,
    edges: usize,
    max_fan_out: usize,
    depth: usize,
    template_bytes: usize,
    create: Duration,
    /// From create_stack to the last signal, or to `CONVERGE_LIMIT`.
    elapsed: Duration,
    signalled: usize,
    create_statements: u64,
    signal_statements: u64,
}

impl Converged {
    fn finished(&self) -> bool {
        self.signalled == self.deployments
    }

    /// The create's statements per deployment plus the signals' per deployment signalled (the
    /// same as all statements over all deployments when the graph converged).
    fn statements_per_deployment(&self) -> f64 {
        self.create_statements as f64 / self.deployments as f64
            + self.signal_statements as f64 / self.signalled.max(1) as f64
    }

    fn signal_rate(&self) -> f64 {
        self.signalled as f64 / self.elapsed.saturating_sub(self.create).as_secs_f64().max(1e-9)
    }

    fn note(&self) -> String {
        format!(
            "{} deployments over {} servers: {} get_attr edges (largest fan-out {}), longest path {} deployments, \
             template {:.1} MB; create {:.2} s ({:.1} statements/deployment), then {} signals at {:.0}/s \
             ({:.1} statements each)",
            self.deployments,
            self.servers,
            self.edges,
            self.max_fan_out,
            self.depth,
            self.template_bytes as f64 / 1e6,
            self.create.as_secs_f64(),
            self.create_statements as f64 / self.deployments as f64,
            self.signalled,
            self.signal_rate(),
            self.signal_statements as f64 / self.signalled.max(1) as f64,
        )
    }
}

pub async fn run(context: &Context) -> BenchResult<ScenarioReport> {
    let sizes: &[usize] = if context.smoke { &[200, 400] } else { &[1_000, TARGET_SIZE, 50_000] };
    let limit = CONVERGE_LIMIT;
    let mut report = ScenarioReport::new("graph", "6. Graph scale", "none (Heat's engine is not run here)");
    report.command(&format!(
        "in-process: Engine::new(SqliteStore::open($TMP/shim.db)); Service::add_server x N/{PER_SERVER}; \
         Service::create_stack(one template of N deployments); {IN_FLIGHT} signals in flight through Service::deployment_signal"
    ));
    // The engine parses with the same 1 MiB limit as the HTTP body limit; in-process we raise it
    // so that one graph is one stack (several stacks would hide any per-stack O(N) work).
    anneal_shim::template::raise_template_limit(TEMPLATE_LIMIT);
    let mut results = Vec::with_capacity(sizes.len());
    for &size in sizes {
        eprintln!("anneal-bench: graph of {size} deployments ...");
        let result = converge(size, limit).await?;
        if context.smoke && !result.finished() {
            // A few hundred deployments that do not converge in a minute is a broken engine, not a slow one.
            return Err(BenchError::Failed(format!("smoke: {}", result.note())));
        }
        eprintln!("anneal-bench: {}", result.note());
        results.push(result);
    }
    report.measurements = measurements(&results, limit);
    report.notes.extend(results.iter().map(Converged::note));
    report.notes.push(format!(
        "DAG: xorshift64 seed {SEED:#x}; each deployment draws 0-{MAX_DEGREE} predecessors among the 1,000 before it, \
         none feeding more than {MAX_DEGREE}; a random server each; one stack per size (the template size limit is raised \
         in-process with anneal_shim::template::raise_template_limit; the HTTP API keeps 1 MiB)"
    ));
    report.notes.push(format!(
        "simulated agents: one task per server (watch_metadata, metadata, deployment_signal), which checks every input \
         is its predecessor's output and signals at once; the converge time runs from create_stack to the last signal; \
         a size still running after {} s is stopped and reported as it stands",
        limit.as_secs()
    ));
    if context.binaries.profile != "release" {
        report.notes.push(format!("{} build: the figures are not representative", context.binaries.profile));
    }
    Ok(report)
}

fn measurements(results: &[Converged], limit: Duration) -> Vec<Measurement> {
    let mut rows = Vec::new();
    for result in results {
        let metric = format!("converge, {} deployments / {} servers", result.deployments, result.servers);
        let seconds = result.elapsed.as_secs_f64();
        let mut row = Measurement::new(&metric, "s", seconds);
        if !result.finished() {
            row = row.note(&format!(
                "NOT converged: stopped after {} s with {} of {} signalled",
                limit.as_secs(),
                result.signalled,
                result.deployments
            ));
        }
        if result.deployments == TARGET_SIZE {
            row = row.with_target("< 10 s", result.finished() && seconds < 10.0);
        }
        rows.push(row);
    }
    for result in results {
        let metric = format!("store statements per deployment, {}", result.deployments);
        let row = Measurement::new(&metric, "statements", result.statements_per_deployment());
        rows.push(if result.finished() {
            row
        } else {
            row.note(&format!(
                "partial ({} of {} signalled), not comparable: the first signals of a graph release fewer successors",
                result.signalled, result.deployments
            ))
        });
    }
    let converged: Vec<&Converged> = results.iter().filter(|result| result.finished()).collect();
    if let [smallest, .., largest] = converged[..] {
        let growth = largest.statements_per_deployment() / smallest.statements_per_deployment();
        let mut row = Measurement::new(
            &format!("statements per deployment, {} vs {}", largest.deployments, smallest.deployments),
            "x",
            growth,
        )
        .with_target("bounded by a constant (≤ 1.1x)", growth <= 1.1)
        .note("every statement counts, BEGIN and COMMIT included");
        if converged.len() < results.len() {
            row = row.note("only the sizes that converged are compared");
        }
        rows.push(row);
    }
    rows
}

/// One size: a fresh store and engine, servers registered, the graph created and converged (or
/// stopped at `limit`).
async fn converge(deployments: usize, limit: Duration) -> BenchResult<Converged> {
    let servers = deployments.div_ceil(PER_SERVER);
    let dag = Arc::new(Dag::generate(deployments, servers, SEED));
    let dir = temp_dir("anneal-bench-graph-")?;
    let store = SqliteStore::open(&dir.path().join("shim.db"))
        .map_err(|error| BenchError::Failed(format!("open the store: {}", anneal_shim::error_chain(&error))))?;
    // Nothing connects to this URL: it only appears in the signal URLs of the documents.
    let config = EngineConfig::new("http://127.0.0.1:9");
    let engine = Engine::new(store, TokenKey::from_secret(b"anneal-bench-graph"), config);
    let names: Vec<String> = (0..servers).map(server_name).collect();
    register(&engine, &names).await?;
    let mut agents = SimulatedAgents::start(&engine, Arc::clone(&dag), &names).await?;
    let template = dag.template();
    let template_bytes = template.len();
    let request = StackRequest { name: Some("graph".into()), template, ..Default::default() };
    let before = engine.store().statements();
    let started = Instant::now();
    engine.create_stack(request).await.map_err(service_error("create the stack"))?;
    let create = started.elapsed();
    let after_create = engine.store().statements();
    agents.release();
    let finished = agents.wait_finished(limit).await?;
    let elapsed = started.elapsed();
    let (after, signalled) = (engine.store().statements(), agents.signalled());
    drop(agents);
    if finished {
        let detail = engine.show_stack("graph").await.map_err(service_error("show the stack"))?;
        if detail.summary.status != "CREATE_COMPLETE" {
            return Err(BenchError::Failed(format!("the stack is {} after the last signal", detail.summary.status)));
        }
    }
    Ok(Converged {
        deployments,
        servers,
        edges: dag.edges(),
        max_fan_out: dag.max_fan_out(),
        depth: dag.depth(),
        template_bytes,
        create,
        elapsed,
        signalled,
        create_statements: after_create - before,
        signal_statements: after - after_create,
    })
}

/// Registers the servers, `IN_FLIGHT` at a time (their commits are grouped).
async fn register(engine: &Engine<SqliteStore>, names: &[String]) -> BenchResult<()> {
    for chunk in names.chunks(IN_FLIGHT) {
        let mut tasks = JoinSet::new();
        for name in chunk {
            let (engine, name) = (engine.clone(), name.clone());
            tasks.spawn(async move { engine.add_server(AddServer { name, ..AddServer::default() }).await });
        }
        while let Some(joined) = tasks.join_next().await {
            let added = joined.map_err(|error| BenchError::Failed(format!("add_server panicked: {error}")))?;
            added.map_err(service_error("add a server"))?;
        }
    }
    Ok(())
}

/// Wraps a `Service` error with what was being done.
fn service_error(what: &str) -> impl FnOnce(anneal_shim::model::ServiceError) -> BenchError + '_ {
    move |error| BenchError::Failed(format!("{what}: {}", anneal_shim::error_chain(&error)))
}
