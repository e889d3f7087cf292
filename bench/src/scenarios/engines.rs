//! In-process engines for the scenarios that drive `Engine` directly (6, and 7's statement
//! count): one `Engine<SqliteStore>`, or N `Engine<PgStore>`s on one database, each with its
//! own `PgStore` (pool, LISTEN connection) and its own `replication` task, as N replicas of
//! `anneal-shim serve` would be. Documents read through one engine are changed by commits made
//! through another, so the cross-replica wake-up path (NOTIFY at commit, re-read, re-render)
//! is part of what is measured.
//!
//! `PgStore` uses the blocking `postgres` crate, whose connections own a runtime each: a store
//! is opened on the blocking pool, and dropped only off the async workers, after every task
//! holding a clone of its engine has ended (`Drop` below), since dropping it on a worker
//! panics (and the release profile aborts on a panic).

use std::future::Future;
use std::path::Path;

use anneal_shim::engine::{Engine, EngineConfig, TokenKey, replication};
use anneal_shim::store::{PgStore, SqliteStore, Store};
use anneal_shim::template::MaxResources;
use tokio::task::{JoinHandle, JoinSet};

use crate::error::{BenchError, BenchResult};

/// Nothing connects to this URL: it only appears in the signal URLs of the documents.
const PUBLIC_URL: &str = "http://127.0.0.1:9";

/// A store whose commits can be counted (both backends count them for the benchmarks, beside
/// `Store::statements`).
pub trait CountsCommits: Store {
    fn commits(&self) -> u64;
}

impl CountsCommits for SqliteStore {
    fn commits(&self) -> u64 {
        SqliteStore::commits(self)
    }
}

impl CountsCommits for PgStore {
    fn commits(&self) -> u64 {
        PgStore::commits(self)
    }
}

/// The engines of one variant, with their replication tasks.
pub struct Engines<S: CountsCommits> {
    engines: Vec<Engine<S>>,
    followers: Vec<Follower>,
}

/// A running `replication::run` and what stops it.
struct Follower {
    task: JoinHandle<()>,
    stop: Box<dyn FnOnce() + Send>,
}

/// The engines' configuration: no limit on a stack's resources, as the shims are started with
/// (`shims::SERVE_ARGS`): the graph's stacks have 10,000 and 50,000 deployments.
fn config() -> EngineConfig {
    EngineConfig { max_resources: MaxResources(None), ..EngineConfig::new(PUBLIC_URL) }
}

impl Engines<SqliteStore> {
    /// One engine on a SQLite file (WAL, `synchronous=FULL`); nothing to follow.
    pub fn sqlite(path: &Path, secret: &[u8]) -> BenchResult<Engines<SqliteStore>> {
        let store = SqliteStore::open(path)
            .map_err(|error| BenchError::Failed(format!("open the store: {}", anneal_shim::error_chain(&error))))?;
        let engine = Engine::new(store, TokenKey::from_secret(secret), config());
        Ok(Engines { engines: vec![engine], followers: Vec::new() })
    }
}

impl Engines<PgStore> {
    /// `count` engines on the database at `url`, each its own `PgStore`, opened one after the
    /// other (the first brings the schema up to date) on the blocking pool; each follows the
    /// others' commits.
    pub async fn postgres(url: &str, count: usize, secret: &[u8]) -> BenchResult<Engines<PgStore>> {
        let mut engines = Engines { engines: Vec::with_capacity(count), followers: Vec::with_capacity(count) };
        for _ in 0..count {
            let url = url.to_string();
            let store = blocking("PgStore::open", move || PgStore::open(&url))
                .await?
                .map_err(|error| BenchError::Failed(format!("open the store: {}", anneal_shim::error_chain(&error))))?;
            let engine = Engine::new(store, TokenKey::from_secret(secret), config());
            engines.followers.push(follow(engine.clone()));
            engines.engines.push(engine);
        }
        Ok(engines)
    }
}

impl<S: CountsCommits> Engines<S> {
    /// Engine `index` modulo their number: callers spread work round-robin.
    pub fn get(&self, index: usize) -> &Engine<S> {
        &self.engines[index % self.engines.len()]
    }

    /// Clones of every engine, for tasks.
    pub fn all(&self) -> Vec<Engine<S>> {
        self.engines.clone()
    }

    /// Statements executed by every engine's store so far.
    pub fn statements(&self) -> u64 {
        self.engines.iter().map(|engine| engine.store().statements()).sum()
    }

    /// COMMITs of every engine's store so far.
    pub fn commits(&self) -> u64 {
        self.engines.iter().map(|engine| engine.store().commits()).sum()
    }
}

impl<S: CountsCommits> Drop for Engines<S> {
    fn drop(&mut self) {
        let followers = std::mem::take(&mut self.followers);
        let engines = std::mem::take(&mut self.engines);
        // The followers end first (their clones go with them), then the stores are dropped
        // here, off the async workers.
        block_off_workers(async move {
            for follower in followers {
                (follower.stop)();
                let _ = follower.task.await;
            }
        });
        tokio::task::block_in_place(|| drop(engines));
    }
}

/// Starts `replication::run` for `engine`. The bench does not depend on tokio-util, so the
/// shutdown token's type is the one `replication::run` names, inferred from that call.
fn follow<S: Store>(engine: Engine<S>) -> Follower {
    let shutdown = Default::default();
    let task = tokio::spawn(replication::run(engine, Clone::clone(&shutdown)));
    Follower { task, stop: Box::new(move || shutdown.cancel()) }
}

/// Runs `future` to completion from synchronous code (a `Drop`) on the multi-threaded runtime,
/// without holding up the other tasks; does nothing outside a runtime.
pub fn block_off_workers<F: Future>(future: F) -> Option<F::Output> {
    let handle = tokio::runtime::Handle::try_current().ok()?;
    Some(tokio::task::block_in_place(|| handle.block_on(future)))
}

/// Runs `work` (store calls, which block) on the blocking pool.
pub async fn blocking<T: Send + 'static>(what: &str, work: impl FnOnce() -> T + Send + 'static) -> BenchResult<T> {
    tokio::task::spawn_blocking(work).await.map_err(|error| BenchError::Failed(format!("{what} panicked: {error}")))
}

/// Joins every task of `tasks`; on the first failure aborts the others, and still waits until
/// they are gone: tasks hold clones of the engines, which must not outlive `Engines`.
pub async fn join_all<T: 'static>(mut tasks: JoinSet<BenchResult<T>>, what: &str) -> BenchResult<Vec<T>> {
    let mut outcome = Ok(Vec::with_capacity(tasks.len()));
    while let Some(joined) = tasks.join_next().await {
        let result = joined.map_err(|error| BenchError::Failed(format!("{what}: {error}"))).and_then(|result| result);
        match (&mut outcome, result) {
            (Ok(values), Ok(value)) => values.push(value),
            (Ok(_), Err(error)) => {
                tasks.abort_all();
                outcome = Err(error);
            }
            (Err(_), _) => {}
        }
    }
    outcome
}
