//! Statements and commits per signal for scenario 7. `anneal-shim serve` has no statement
//! counter, so the same work is replayed in-process on a fresh store of the same kind (and, on
//! PostgreSQL, as many engines as there were replicas, each with its replication task): one
//! stack of no-op deployments on one server, and for every signal the two `Service` calls the
//! signal route makes (`signal_token_known`, a read, then `deployment_signal`), `SENDERS` at a
//! time, spread over the engines in turn. The stores' own counters give the figures.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anneal_shim::model::{AddServer, Service, SignalAck, StackRequest};
use serde_json::{Value, json};

use super::{SENDERS, signal_ids, template};
use crate::error::{BenchError, BenchResult};
use crate::scenarios::backend::{Backend, PostgresServer};
use crate::scenarios::engines::{CountsCommits, Engines, join_all};
use crate::scenarios::temp_dir;

/// The token key of the replay's engines.
const KEY_SECRET: &[u8] = b"anneal-bench-throughput";

/// What the replay counted over its signals.
pub struct Replayed {
    pub signals: usize,
    pub statements: u64,
    pub commits: u64,
    pub elapsed: Duration,
}

impl Replayed {
    pub fn statements_per_signal(&self) -> f64 {
        self.statements as f64 / self.signals.max(1) as f64
    }

    pub fn commits_per_signal(&self) -> f64 {
        self.commits as f64 / self.signals.max(1) as f64
    }
}

/// Replays `signals` signals on a fresh store of `backend`.
pub async fn replay(backend: Backend, postgres: Option<&PostgresServer>, signals: usize) -> BenchResult<Replayed> {
    match backend {
        Backend::Sqlite => {
            let dir = temp_dir("anneal-bench-replay-")?;
            let engines = Engines::sqlite(&dir.path().join("shim.db"), KEY_SECRET)?;
            replay_on(&engines, signals).await
        }
        Backend::Postgres { replicas } => {
            let postgres = postgres.ok_or_else(|| BenchError::Failed("no PostgreSQL server".into()))?;
            let url = postgres.create_database(&backend.database_name("throughput_replay", None))?;
            let engines = Engines::postgres(&url, replicas, KEY_SECRET).await?;
            replay_on(&engines, signals).await
        }
    }
}

async fn replay_on<S: CountsCommits>(engines: &Engines<S>, signals: usize) -> BenchResult<Replayed> {
    let admin = engines.get(0);
    admin
        .add_server(AddServer { name: "sink".into(), ..AddServer::default() })
        .await
        .map_err(failed("add a server"))?;
    let request = StackRequest { name: Some("replay".into()), template: template(signals), ..Default::default() };
    admin.create_stack(request).await.map_err(failed("create the stack"))?;
    let document = admin.metadata("sink").await.map_err(failed("read the document"))?;
    let body: Value = serde_json::from_str(&document.body)
        .map_err(|error| BenchError::Failed(format!("the document is not JSON: {error}")))?;
    let tokens: Vec<String> = signal_ids(&body)
        .iter()
        .filter_map(|url| url.rsplit_once("/v1/signals/").map(|(_, token)| token.to_string()))
        .collect();
    if tokens.len() != signals {
        return Err(BenchError::Failed(format!("the document has {} signal URLs, expected {signals}", tokens.len())));
    }
    let (statements, commits) = (engines.statements(), engines.commits());
    let started = Instant::now();
    send_all(engines, tokens).await?;
    let elapsed = started.elapsed();
    let replayed = Replayed {
        signals,
        statements: engines.statements() - statements,
        commits: engines.commits() - commits,
        elapsed,
    };
    let detail = admin.show_stack("replay").await.map_err(failed("show the stack"))?;
    if detail.summary.status != "CREATE_COMPLETE" {
        return Err(BenchError::Failed(format!("the replayed stack is {} after its signals", detail.summary.status)));
    }
    Ok(replayed)
}

/// Every token's signal once, from `SENDERS` tasks, signal `n` through engine `n mod len`.
async fn send_all<S: CountsCommits>(engines: &Engines<S>, tokens: Vec<String>) -> BenchResult<()> {
    let queue = Arc::new(Mutex::new(tokens.into_iter().enumerate().collect::<Vec<_>>()));
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..SENDERS {
        let (queue, engines) = (Arc::clone(&queue), engines.all());
        tasks.spawn(async move {
            loop {
                let next = queue.lock().ok().and_then(|mut tokens| tokens.pop());
                let Some((index, token)) = next else { return Ok(()) };
                let engine = &engines[index % engines.len()];
                // The signal route looks the token up before it reads the body.
                if !engine.signal_token_known(&token).await.map_err(failed("look a token up"))? {
                    return Err(BenchError::Failed("a signal token is unknown".into()));
                }
                let acknowledgement = engine
                    .deployment_signal(&token, json!({"deploy_status_code": 0}), None)
                    .await
                    .map_err(failed("signal"))?;
                if acknowledgement != Some(SignalAck::Applied) {
                    return Err(BenchError::Failed(format!("a signal was answered {acknowledgement:?}")));
                }
            }
        });
    }
    join_all(tasks, "a replay task failed").await.map(drop)
}

/// Wraps a `Service` error with what was being done.
fn failed(what: &str) -> impl FnOnce(anneal_shim::model::ServiceError) -> BenchError + '_ {
    move |error| BenchError::Failed(format!("{what}: {}", anneal_shim::error_chain(&error)))
}
