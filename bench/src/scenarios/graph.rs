//! Scenario 6, graph scale: the engine in-process, one stack whose template is a seeded random
//! DAG of N deployments over N/10 servers (fan-in and fan-out up to 10, inputs through
//! `get_attr`), and simulated agents that complete each deployment as soon as it is released.
//! It measures the time from the stack's create to its last signal (the stack is then
//! CREATE_COMPLETE), signals per second, and the store statements and commits per signal and
//! per deployment (the stores' own counters), at three graph sizes, to show that the work per
//! deployment does not grow with the graph. On each store of `--db`, side by side: a SQLite
//! file (WAL, `synchronous=FULL`), PostgreSQL with one engine, and PostgreSQL with three
//! engines, each with its own `PgStore` and replication task as three replicas would have
//! (`engines`); with three, each server's documents are read through one engine and the
//! signals are spread round-robin over all of them.

mod agents;
mod dag;
mod figures;

use std::sync::Arc;
use std::time::{Duration, Instant};

use anneal_shim::model::{AddServer, Service, StackRequest};
use tokio::task::JoinSet;

use self::agents::{IN_FLIGHT, SimulatedAgents};
use self::dag::{Dag, MAX_DEGREE, server_name};
use self::figures::{Converged, measurements};
use super::backend::{Backend, PostgresServer};
use super::engines::{CountsCommits, Engines, join_all};
use super::{Context, temp_dir};
use crate::error::{BenchError, BenchResult};
use crate::report::ScenarioReport;

const SEED: u64 = 0x5eed_0006;
/// Deployments per server, as in the 10,000 over 1,000.
const PER_SERVER: usize = 10;
/// The size the 10 s target is for.
const TARGET_SIZE: usize = 10_000;
/// Templates of 50,000 deployments are about 15 MB; the engine's default limit is 1 MiB.
const TEMPLATE_LIMIT: usize = 64 << 20;
/// The token key of every engine (the engines of one database must share it, as replicas do).
const KEY_SECRET: &[u8] = b"anneal-bench-graph";

/// How long one size may take to converge before it is stopped and reported as it stands.
const CONVERGE_LIMIT: Duration = Duration::from_secs(90);

pub async fn run(context: &Context) -> BenchResult<ScenarioReport> {
    let sizes: &[usize] = if context.smoke { &[100, 200] } else { &[1_000, TARGET_SIZE, 50_000] };
    let backends = context.database.backends();
    let limit = CONVERGE_LIMIT;
    let mut report = ScenarioReport::new("graph", "6. Graph scale", "none (Heat's engine is not run here)");
    commands(&mut report, &backends);
    // The engine parses with the same 1 MiB limit as the HTTP body limit; in-process we raise it
    // so that one graph is one stack (several stacks would hide any per-stack O(N) work).
    anneal_shim::template::raise_template_limit(TEMPLATE_LIMIT);
    let postgres = context.postgres(&backends).await?;
    let mut results = Vec::with_capacity(sizes.len() * backends.len());
    for &backend in &backends {
        for &size in sizes {
            if size > TARGET_SIZE && !matches!(backend, Backend::Sqlite) {
                // PostgreSQL commits signal by signal (no group commit yet): 50,000 would not
                // converge within the limit and would only cost minutes of the run.
                continue;
            }
            eprintln!("anneal-bench: graph of {size} deployments on {} ...", backend.label());
            let result = converge_on(backend, postgres, size, limit).await?;
            if context.smoke && !result.finished() {
                // A few hundred deployments that do not converge in a minute is a broken engine, not a slow one.
                return Err(BenchError::Failed(format!("smoke: {}", result.note())));
            }
            eprintln!("anneal-bench: {}", result.note());
            results.push(result);
        }
    }
    report.measurements = measurements(&results, &backends, limit);
    report.notes.extend(results.iter().map(Converged::note));
    notes(&mut report, postgres, limit);
    if context.binaries.profile != "release" {
        report.notes.push(format!("{} build: the figures are not representative", context.binaries.profile));
    }
    Ok(report)
}

fn commands(report: &mut ScenarioReport, backends: &[Backend]) {
    for backend in backends {
        let engines = match backend {
            Backend::Sqlite => "Engine::new(SqliteStore::open($TMP/shim.db))".to_string(),
            Backend::Postgres { replicas: 1 } => {
                "Engine::new(PgStore::open(postgres://$PG/graph_r1_N)) + replication::run".to_string()
            }
            Backend::Postgres { replicas } => format!(
                "{replicas} x (Engine::new(PgStore::open(postgres://$PG/graph_r{replicas}_N)) + replication::run), \
                 server k's documents read through engine k mod {replicas}, signals round-robin"
            ),
        };
        report.command(&format!(
            "in-process: {engines}; Service::add_server x N/{PER_SERVER}; Service::create_stack(one template of N \
             deployments); {IN_FLIGHT} signals in flight through Service::deployment_signal"
        ));
    }
}

fn notes(report: &mut ScenarioReport, postgres: Option<&PostgresServer>, limit: Duration) {
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
    if let Some(postgres) = postgres {
        report.notes.push(format!(
            "{}; statements per signal count everything from the create's return to the last signal on every engine: \
             the signals' transactions (BEGIN, the write lock, the work, pg_notify, COMMIT), the agents' document \
             loads and the replication tasks' re-reads after each NOTIFY (whose read-only BEGIN and COMMIT, and the \
             pool's check of a connection on checkout, PgStore does not count)",
            postgres.describe()
        ));
    }
}

/// One size on one store: a fresh database and engines, then `converge`.
async fn converge_on(
    backend: Backend,
    postgres: Option<&PostgresServer>,
    deployments: usize,
    limit: Duration,
) -> BenchResult<Converged> {
    match backend {
        Backend::Sqlite => {
            let dir = temp_dir("anneal-bench-graph-")?;
            let engines = Engines::sqlite(&dir.path().join("shim.db"), KEY_SECRET)?;
            converge(&engines, backend, deployments, limit).await
        }
        Backend::Postgres { replicas } => {
            let postgres = postgres.ok_or_else(|| BenchError::Failed("no PostgreSQL server".into()))?;
            let url = postgres.create_database(&backend.database_name("graph", Some(deployments)))?;
            let engines = Engines::postgres(&url, replicas, KEY_SECRET).await?;
            converge(&engines, backend, deployments, limit).await
        }
    }
}

/// One size: servers registered, the graph created and converged (or stopped at `limit`).
async fn converge<S: CountsCommits>(
    engines: &Engines<S>,
    backend: Backend,
    deployments: usize,
    limit: Duration,
) -> BenchResult<Converged> {
    let servers = deployments.div_ceil(PER_SERVER);
    let dag = Arc::new(Dag::generate(deployments, servers, SEED));
    let names: Vec<String> = (0..servers).map(server_name).collect();
    register(engines, &names).await?;
    let mut agents = SimulatedAgents::start(engines, Arc::clone(&dag), &names).await?;
    let template = dag.template();
    let template_bytes = template.len();
    let request = StackRequest { name: Some("graph".into()), template, ..Default::default() };
    let (before, commits_before) = (engines.statements(), engines.commits());
    let started = Instant::now();
    engines.get(0).create_stack(request).await.map_err(service_error("create the stack"))?;
    let create = started.elapsed();
    let (after_create, commits_after_create) = (engines.statements(), engines.commits());
    agents.release();
    let finished = agents.wait_finished(limit).await?;
    let elapsed = started.elapsed();
    let (after, commits_after, signalled) = (engines.statements(), engines.commits(), agents.signalled());
    agents.stop().await;
    if finished {
        let detail = engines.get(0).show_stack("graph").await.map_err(service_error("show the stack"))?;
        if detail.summary.status != "CREATE_COMPLETE" {
            return Err(BenchError::Failed(format!("the stack is {} after the last signal", detail.summary.status)));
        }
    }
    Ok(Converged {
        backend,
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
        create_commits: commits_after_create - commits_before,
        signal_commits: commits_after - commits_after_create,
    })
}

/// Registers the servers, `IN_FLIGHT` at a time (their commits are grouped on SQLite), spread
/// over the engines.
async fn register<S: CountsCommits>(engines: &Engines<S>, names: &[String]) -> BenchResult<()> {
    for (chunk_index, chunk) in names.chunks(IN_FLIGHT).enumerate() {
        let mut tasks = JoinSet::new();
        for (index, name) in chunk.iter().enumerate() {
            let (engine, name) = (engines.get(chunk_index * IN_FLIGHT + index).clone(), name.clone());
            tasks.spawn(async move {
                engine
                    .add_server(AddServer { name, ..AddServer::default() })
                    .await
                    .map_err(service_error("add a server"))
            });
        }
        join_all(tasks, "add_server panicked").await?;
    }
    Ok(())
}

/// Wraps a `Service` error with what was being done.
fn service_error(what: &str) -> impl FnOnce(anneal_shim::model::ServiceError) -> BenchError + '_ {
    move |error| BenchError::Failed(format!("{what}: {}", anneal_shim::error_chain(&error)))
}
