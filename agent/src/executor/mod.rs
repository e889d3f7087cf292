//! The executor: turns the current list of deployments into hook runs, journaling each step
//! before acting on it. It owns the journal's `seen → started → finished` half (the outbox owns
//! `finished → signalled`), recovers interrupted runs on start-up per `options.on_interrupt`
//! (`recovery`), records how runs ended (`record`), and never starts an id the journal already
//! holds as finished (see docs/journal.md).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use anneal_protocol::{Deployment, HookResult};
use tokio::sync::Notify;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tracing::{error, info, warn};

use crate::clock::now_millis;
use crate::failpoint::{self, Failpoint};
use crate::fsutil::Spares;
use crate::hook::{HookChoice, HookError, HookRun, HookRunner, Spawned};
use crate::journal::{Entry, Journal, JournalError, State};
use crate::orphan;
use crate::schedule::{self, Decision, Progress};
use crate::source::pace::EngineMoved;

mod prune;
mod record;
mod recovery;

/// The reason a restarted agent gives for a run it found interrupted.
pub(crate) const INTERRUPTED_REASON: &str = "interrupted: agent restarted during the run";

/// What went wrong while executing; the deployment concerned is named.
#[derive(Debug, thiserror::Error)]
pub enum ExecutorError {
    #[error("cannot record deployment {id} in the journal")]
    Journal {
        id: String,
        #[source]
        source: JournalError,
    },
    #[error("cannot read the journal")]
    LoadJournal(#[source] JournalError),
    #[error("cannot find deployment {id} in the journal")]
    Unknown { id: String },
}

/// Counts for one `once` invocation (or a daemon's lifetime).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunCounts {
    pub ran: usize,
    pub failed: usize,
}

/// What a pending deployment needs before the ordering rules see it.
enum Preparation {
    Ready { resolved: Box<Deployment>, choice: HookChoice },
    Skip(String),
    Wait(String),
    Invalid(String),
}

/// What a run task hands back: the deployment id, the hook's process once it was spawned (for
/// the journal, without reading the run marker back), and the run's outcome.
type RunOutput = (String, Option<Spawned>, Result<HookRun, HookError>);

pub(crate) struct Executor {
    journal: Arc<Journal>,
    runner: Arc<HookRunner>,
    hook_timeout: Duration,
    parallel: usize,
    entries: HashMap<String, Entry>,
    /// Interrupted runs whose deployment asked for `on_interrupt: rerun`.
    rerun: HashSet<String>,
    /// Results of finished runs that the journal could not take yet (a full disk).
    unrecorded: HashMap<String, HookResult>,
    running: JoinSet<RunOutput>,
    running_ids: HashMap<tokio::task::Id, String>,
    wake_outbox: Arc<Notify>,
    /// Raised when a NO_SIGNAL deployment finishes: nothing is delivered for it, so the outbox
    /// cannot raise it (see `source::pace`).
    moved: EngineMoved,
    counts: RunCounts,
}

impl Executor {
    /// Loads the journal and settles every run a previous process left interrupted.
    pub(crate) fn new(
        journal: Arc<Journal>,
        runner: Arc<HookRunner>,
        hook_timeout: Duration,
        parallel: usize,
        wake_outbox: Arc<Notify>,
        moved: EngineMoved,
    ) -> Result<Executor, ExecutorError> {
        // Spare files an earlier agent left behind hold old versions of entries; this process
        // owns the journal from here on.
        Spares::remove_stale(journal.dir());
        let entries = journal.load_all().map_err(ExecutorError::LoadJournal)?;
        let entries = entries.into_iter().map(|entry| (entry.id.clone(), entry)).collect();
        let mut executor = Executor {
            journal,
            runner,
            hook_timeout,
            parallel: parallel.max(1),
            entries,
            rerun: HashSet::new(),
            unrecorded: HashMap::new(),
            running: JoinSet::new(),
            running_ids: HashMap::new(),
            wake_outbox,
            moved,
            counts: RunCounts::default(),
        };
        executor.recover()?;
        Ok(executor)
    }

    /// The merged metadata of the collection the next starts come from (built-in apply-config).
    pub(crate) fn set_metadata(&self, metadata: Option<Arc<serde_json::Value>>) {
        self.runner.set_metadata(metadata);
    }

    pub(crate) fn counts(&self) -> &RunCounts {
        &self.counts
    }

    pub(crate) fn is_idle(&self) -> bool {
        self.running.is_empty()
    }

    /// Ids of deployments that wait for something (a missing hook), with the reason.
    pub(crate) fn waiting<'a>(
        &'a self,
        deployments: &'a [Deployment],
    ) -> impl Iterator<Item = (&'a str, &'a str)> + 'a {
        deployments.iter().filter_map(|deployment| {
            let entry = self.entries.get(&deployment.id)?;
            match (entry.state, &entry.waiting_reason) {
                (State::Waiting, Some(reason)) => Some((deployment.id.as_str(), reason.as_str())),
                _ => None,
            }
        })
    }

    /// Starts every deployment the ordering rules allow now; returns how many started.
    pub(crate) fn start_ready(
        &mut self,
        deployments: &[Deployment],
        shutdown: &CancellationToken,
    ) -> Result<usize, ExecutorError> {
        self.record_unrecorded()?;
        // One hook lookup per kind of deployment per round, not one per pending deployment: the
        // lookup touches the file system, and every finished run starts a new round.
        let mut choices = HashMap::new();
        let mut started = 0;
        // A deployment is prepared (component resolved, hook chosen) only when the ordering rules
        // would start it: preparing every pending one on every round made `once` quadratic. One
        // that turns out not runnable (skipped, waiting for its hook, invalid) changes what may
        // start, so the rules are asked again (at most once per deployment: each such answer
        // settles one, and a state change the journal refuses must not spin here).
        for _ in 0..=deployments.len() {
            let (progress, mut ready) = self.round_progress(deployments, &mut choices)?;
            let mut settled_one = false;
            for decision in schedule::decide(deployments, &progress, self.parallel) {
                match decision {
                    Decision::Fail { index, reason } => {
                        let id = &deployments[index].id;
                        warn!(deployment_id = %id, %reason, "deployment not run");
                        self.finish(id, HookResult::from_process("", &reason, 1))?;
                    }
                    Decision::Start { index } => {
                        let prepared = match ready.remove(&index) {
                            Some(prepared) => Some(prepared),
                            None => self.settle_unready(&deployments[index], &mut choices)?,
                        };
                        match prepared {
                            Some((resolved, choice)) => {
                                self.start(*resolved, choice, shutdown)?;
                                started += 1;
                            }
                            None => settled_one = true,
                        }
                    }
                }
            }
            if !settled_one {
                break;
            }
        }
        Ok(started)
    }

    /// Every deployment's progress for the ordering rules, in list order. Pending ones are
    /// recorded as seen; waiting ones are prepared again (their hook may have appeared) and count
    /// as pending, ready to start (keyed by list index), once they can run.
    #[allow(clippy::type_complexity)]
    fn round_progress(
        &mut self,
        deployments: &[Deployment],
        choices: &mut HashMap<(String, bool), HookChoice>,
    ) -> Result<(Vec<Progress>, HashMap<usize, (Box<Deployment>, HookChoice)>), ExecutorError> {
        let mut progress = Vec::with_capacity(deployments.len());
        let mut ready = HashMap::new();
        for (index, deployment) in deployments.iter().enumerate() {
            let mut state = self.progress_of(&deployment.id);
            match state {
                Progress::Pending => self.ensure_seen(deployment)?,
                Progress::Waiting => match self.prepare(deployment, choices) {
                    Preparation::Ready { resolved, choice } => {
                        ready.insert(index, (resolved, choice));
                        state = Progress::Pending;
                    }
                    Preparation::Wait(_) => {}
                    // The hook appeared but may not be run (another user could change it): the
                    // deployment is settled (failed, saying why) when the rules reach it.
                    Preparation::Skip(_) | Preparation::Invalid(_) => state = Progress::Pending,
                },
                _ => {}
            }
            progress.push(state);
        }
        Ok((progress, ready))
    }

    /// Prepares a deployment the rules would start: `Some` when it can run; otherwise records
    /// why not (skipped, waiting for its hook, invalid) and returns `None`.
    fn settle_unready(
        &mut self,
        deployment: &Deployment,
        choices: &mut HashMap<(String, bool), HookChoice>,
    ) -> Result<Option<(Box<Deployment>, HookChoice)>, ExecutorError> {
        match self.prepare(deployment, choices) {
            Preparation::Ready { resolved, choice } => return Ok(Some((resolved, choice))),
            Preparation::Skip(reason) => self.update(&deployment.id, |entry| {
                entry.skipped(reason);
                Ok(())
            })?,
            Preparation::Wait(reason) => self.mark_waiting(&deployment.id, reason)?,
            Preparation::Invalid(reason) => self.finish(&deployment.id, HookResult::from_process("", &reason, 1))?,
        }
        Ok(None)
    }

    /// Waits for one running hook to end and journals its result; `None` when nothing runs.
    pub(crate) async fn finish_next(&mut self) -> Option<Result<(), ExecutorError>> {
        let joined = self.running.join_next_with_id().await?;
        let (id, spawned, outcome) = match joined {
            Ok((task, output)) => {
                self.running_ids.remove(&task);
                output
            }
            Err(join_error) => {
                let id = self.running_ids.remove(&join_error.id()).unwrap_or_default();
                (id, None, Err(HookError::Panicked { detail: join_error.to_string() }))
            }
        };
        Some(self.record_run(&id, spawned, outcome))
    }

    /// Runs what is due until nothing runs and nothing more may start (`anneal-agent once`).
    pub(crate) async fn converge(
        &mut self,
        deployments: &[Deployment],
        shutdown: &CancellationToken,
    ) -> Result<(), ExecutorError> {
        loop {
            self.start_ready(deployments, shutdown)?;
            match self.finish_next().await {
                Some(result) => result?,
                None => return Ok(()),
            }
        }
    }

    fn progress_of(&self, id: &str) -> Progress {
        let Some(entry) = self.entries.get(id) else { return Progress::Pending };
        match entry.state {
            State::Seen => Progress::Pending,
            State::Waiting => Progress::Waiting,
            // Started and not running: an interrupted run to redo (on_interrupt: rerun), or a run
            // whose result waits for the journal (busy until it is recorded; never run again).
            State::Started if self.rerun.contains(id) => Progress::Pending,
            State::Started => Progress::Running,
            State::Finished | State::Signalled => Progress::Done { failed: entry.failed() },
            State::Skipped => Progress::Skipped,
        }
    }

    fn prepare(&self, deployment: &Deployment, choices: &mut HashMap<(String, bool), HookChoice>) -> Preparation {
        let resolved = match deployment.resolve_component() {
            Ok(Some(resolved)) => resolved,
            Ok(None) => {
                let action = deployment.input_str("deploy_action").unwrap_or("?");
                return Preparation::Skip(format!("component has no config for action {action}"));
            }
            Err(error) => return Preparation::Invalid(format!("invalid component deployment: {error}")),
        };
        // The choice depends on the group and, for Heat::Ungrouped, on whether the config is a script.
        let is_script = resolved.config.as_str().is_some_and(|config| config.starts_with("#!"));
        let key = (resolved.group.clone(), is_script);
        let choice = choices.entry(key).or_insert_with(|| self.runner.choose(&resolved)).clone();
        match choice {
            HookChoice::Skip { reason } => Preparation::Skip(reason),
            HookChoice::Missing { group, searched } => {
                let dirs: Vec<String> = searched.iter().map(|dir| dir.display().to_string()).collect();
                Preparation::Wait(format!("no hook for group {group} in {}", dirs.join(", ")))
            }
            HookChoice::Unsafe { group, problem } => {
                Preparation::Invalid(format!("anneal: cannot run the hook for group {group}: {problem}"))
            }
            choice => Preparation::Ready { resolved: Box::new(resolved), choice },
        }
    }

    fn start(
        &mut self,
        resolved: Deployment,
        choice: HookChoice,
        shutdown: &CancellationToken,
    ) -> Result<(), ExecutorError> {
        let id = resolved.id.clone();
        let now = now_millis();
        self.update(&id, |entry| entry.started(now))?;
        failpoint::hit(Failpoint::AfterStarted);
        self.rerun.remove(&id);
        let timeout = resolved.options.timeout.map_or(self.hook_timeout, Duration::from_secs);
        info!(deployment_id = %id, name = resolved.display_name(), group = %resolved.group, "starting hook");
        let runner = Arc::clone(&self.runner);
        let marker = orphan::marker_path(self.journal.dir(), &id);
        let token = shutdown.clone();
        let task_id = self.running.spawn(async move {
            let mut process = None;
            // The pid and start time (safe against pid reuse) of the hook, for a successor agent;
            // the child's environment names this file for the moment before it exists.
            let on_spawn = |spawned: Spawned| {
                failpoint::hit(Failpoint::AfterSpawn);
                if let Err(source) = orphan::write_marker(&marker, spawned.pid, spawned.process_start_time) {
                    warn!(pid = spawned.pid, error = %source, "cannot record the hook's start time");
                }
                process = Some(spawned);
            };
            let outcome = runner.run(&resolved, &choice, timeout, &token, on_spawn).await;
            (resolved.id, process, outcome)
        });
        self.running_ids.insert(task_id.id(), id);
        Ok(())
    }

    fn ensure_seen(&mut self, deployment: &Deployment) -> Result<(), ExecutorError> {
        if self.entries.contains_key(&deployment.id) {
            return Ok(());
        }
        let entry = Entry::seen(deployment, now_millis());
        self.journal.write(&entry).map_err(|source| ExecutorError::Journal { id: entry.id.clone(), source })?;
        self.entries.insert(entry.id.clone(), entry);
        failpoint::hit(Failpoint::AfterSeen);
        Ok(())
    }

    fn mark_waiting(&mut self, id: &str, reason: String) -> Result<(), ExecutorError> {
        let unchanged =
            self.entries.get(id).is_some_and(|entry| entry.waiting_reason.as_deref() == Some(reason.as_str()));
        if unchanged {
            return Ok(());
        }
        error!(deployment_id = %id, %reason, "deployment waits for its hook");
        self.update(id, |entry| {
            entry.waiting(reason);
            Ok(())
        })
    }

    /// Applies `change` to a copy of the entry, writes it durably, and only then keeps it; a
    /// rejected transition writes nothing.
    fn update(
        &mut self,
        id: &str,
        change: impl FnOnce(&mut Entry) -> Result<(), JournalError>,
    ) -> Result<(), ExecutorError> {
        let journal_error = |source| ExecutorError::Journal { id: id.to_string(), source };
        let mut entry = self.entries.get(id).cloned().ok_or_else(|| ExecutorError::Unknown { id: id.to_string() })?;
        change(&mut entry).map_err(journal_error)?;
        self.journal.write(&entry).map_err(journal_error)?;
        self.entries.insert(id.to_string(), entry);
        Ok(())
    }
}
