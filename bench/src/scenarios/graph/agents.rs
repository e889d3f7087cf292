//! Simulated agents for scenario 6: one task per server, going through the same `Service`
//! methods the HTTP API calls (`watch_metadata` as a long-poll does, `metadata` as a GET does,
//! `deployment_signal` as a signal POST does). Whenever its server's document changes, a task
//! signals each new deployment complete at once, with output `o` = the deployment's name, after
//! checking that every input is its predecessor's output. At most `IN_FLIGHT` signals are in
//! flight across all tasks. With several engines (replicas), server k's task reads through
//! engine k mod N, as an agent polls one replica, and the signals go to the engines in turn, as
//! a load balancer would spread them: most signals are committed through another engine than
//! the one their server's document is read through.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use anneal_shim::engine::Engine;
use anneal_shim::model::{Service, SignalAck};
use serde_json::{Value, json};
use tokio::sync::{Notify, Semaphore, watch};
use tokio::task::JoinSet;

use super::dag::{Dag, deployment_index, deployment_name};
use super::service_error;
use crate::error::{BenchError, BenchResult};
use crate::scenarios::engines::{CountsCommits, Engines, block_off_workers};

/// Signals in flight at once, like 64 concurrent HTTP senders.
pub const IN_FLIGHT: usize = 64;

/// The running tasks. They wait for `release` before reading anything; `finished` is notified
/// when every deployment of the graph was signalled.
pub struct SimulatedAgents<S: CountsCommits> {
    tasks: JoinSet<BenchResult<()>>,
    gate: watch::Sender<bool>,
    shared: Arc<Shared<S>>,
}

struct Shared<S: CountsCommits> {
    /// Every engine; signal `n` goes to engine `n mod len`.
    engines: Vec<Engine<S>>,
    next_engine: AtomicUsize,
    dag: Arc<Dag>,
    permits: Semaphore,
    signalled: AtomicUsize,
    finished: Notify,
}

/// One server's task.
struct ServerAgent<S: CountsCommits> {
    server: String,
    /// The engine this server's documents are read through.
    reader: Engine<S>,
    versions: watch::Receiver<u64>,
    gate: watch::Receiver<bool>,
    shared: Arc<Shared<S>>,
    done: HashSet<String>,
}

impl<S: CountsCommits> SimulatedAgents<S> {
    /// Subscribes to every server's document (before the stack exists) and starts the tasks.
    pub async fn start(engines: &Engines<S>, dag: Arc<Dag>, servers: &[String]) -> BenchResult<SimulatedAgents<S>> {
        let (gate, gate_receiver) = watch::channel(false);
        let shared = Arc::new(Shared {
            engines: engines.all(),
            next_engine: AtomicUsize::new(0),
            dag,
            permits: Semaphore::new(IN_FLIGHT),
            signalled: AtomicUsize::new(0),
            finished: Notify::new(),
        });
        let mut tasks = JoinSet::new();
        for (index, server) in servers.iter().enumerate() {
            let reader = engines.get(index).clone();
            let versions = reader.watch_metadata(server).await.map_err(service_error("watch a server's metadata"))?;
            let agent = ServerAgent {
                server: server.clone(),
                reader,
                versions,
                gate: gate_receiver.clone(),
                shared: Arc::clone(&shared),
                done: HashSet::new(),
            };
            tasks.spawn(agent.run());
        }
        Ok(SimulatedAgents { tasks, gate, shared })
    }

    /// Lets the tasks go (after the stack's create returned, so its statements are counted apart).
    pub fn release(&self) {
        self.gate.send_replace(true);
    }

    /// Waits until every deployment was signalled (true) or `limit` passed (false); fails when
    /// a task fails.
    pub async fn wait_finished(&mut self, limit: Duration) -> BenchResult<bool> {
        let shared = Arc::clone(&self.shared);
        tokio::select! {
            () = shared.finished.notified() => Ok(true),
            Some(joined) = self.tasks.join_next() => match joined {
                Ok(Err(error)) => Err(error),
                Ok(Ok(())) => Err(BenchError::Failed("a simulated agent stopped early".into())),
                Err(error) => Err(BenchError::Failed(format!("a simulated agent panicked: {error}"))),
            },
            () = tokio::time::sleep(limit) => Ok(false),
        }
    }

    /// Deployments signalled so far.
    pub fn signalled(&self) -> usize {
        self.shared.signalled.load(Ordering::Relaxed)
    }

    /// Stops the tasks and waits until they are gone, with their clones of the engines (which
    /// must not be the last ones: see `engines`).
    pub async fn stop(&mut self) {
        self.tasks.abort_all();
        while self.tasks.join_next().await.is_some() {}
    }
}

impl<S: CountsCommits> Drop for SimulatedAgents<S> {
    fn drop(&mut self) {
        if !self.tasks.is_empty() {
            block_off_workers(self.stop());
        }
    }
}

impl<S: CountsCommits> ServerAgent<S> {
    async fn run(mut self) -> BenchResult<()> {
        if self.gate.wait_for(|open| *open).await.is_err() {
            return Ok(());
        }
        loop {
            // Marked seen before the read: a change after the read wakes `changed` again.
            self.versions.borrow_and_update();
            let document =
                self.reader.metadata(&self.server).await.map_err(service_error("read a server's metadata"))?;
            let body: Value = serde_json::from_str(&document.body)
                .map_err(|error| BenchError::Failed(format!("{}'s document is not JSON: {error}", self.server)))?;
            for deployment in body["deployments"].as_array().into_iter().flatten() {
                self.complete(deployment).await?;
            }
            if self.versions.changed().await.is_err() {
                return Ok(());
            }
        }
    }

    /// Signals `deployment` complete unless it was already.
    async fn complete(&mut self, deployment: &Value) -> BenchResult<()> {
        let id = deployment["id"].as_str().unwrap_or_default();
        if input(deployment, "deploy_action") != Some("CREATE") || self.done.contains(id) {
            return Ok(());
        }
        let name = input(deployment, "deploy_resource_name").unwrap_or_default().to_string();
        self.check_inputs(&name, deployment)?;
        let url = input(deployment, "deploy_signal_id").unwrap_or_default();
        let token = url.rsplit_once("/v1/signals/").map(|(_, token)| token).unwrap_or_default();
        let body = json!({"deploy_status_code": 0, "deploy_stdout": "", "deploy_stderr": "", "o": name});
        let acknowledgement = {
            let _permit = self.shared.permits.acquire().await.map_err(|_| BenchError::Failed("closed".into()))?;
            let turn = self.shared.next_engine.fetch_add(1, Ordering::Relaxed);
            let engine = &self.shared.engines[turn % self.shared.engines.len()];
            engine.deployment_signal(token, body, None).await.map_err(service_error("signal"))?
        };
        if acknowledgement != Some(SignalAck::Applied) {
            return Err(BenchError::Failed(format!("the signal of {name} was answered {acknowledgement:?}")));
        }
        self.done.insert(id.to_string());
        if self.shared.signalled.fetch_add(1, Ordering::Relaxed) + 1 == self.shared.dag.len() {
            self.shared.finished.notify_one();
        }
        Ok(())
    }

    /// Input `iJ` of deployment `dK` must be the output of its J-th predecessor (its name).
    fn check_inputs(&self, name: &str, deployment: &Value) -> BenchResult<()> {
        let index = deployment_index(name)
            .filter(|&index| index < self.shared.dag.len())
            .ok_or_else(|| BenchError::Failed(format!("unexpected deployment {name:?} on {}", self.server)))?;
        for (position, &predecessor) in self.shared.dag.predecessors[index].iter().enumerate() {
            let expected = deployment_name(predecessor);
            let found = input(deployment, &format!("i{position}"));
            if found != Some(expected.as_str()) {
                return Err(BenchError::Failed(format!(
                    "{name}: input i{position} is {found:?}, expected {expected}'s output {expected:?}"
                )));
            }
        }
        Ok(())
    }
}

fn input<'a>(deployment: &'a Value, name: &str) -> Option<&'a str> {
    deployment["inputs"].as_array()?.iter().find(|input| input["name"] == name)?["value"].as_str()
}
