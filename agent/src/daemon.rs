//! Wiring for `anneal-agent run` and `anneal-agent once`: builds the collector, executor and
//! outbox from a validated config and drives them until shutdown (run) or until nothing more is
//! due (once). Shutdown is the `CancellationToken` the caller passes in; a cancelled run kills
//! running hook groups, and the journal keeps them as interrupted for the next start. When a
//! document that may configure the agent carries a new `os-collect-config` key, or the source
//! that supplied the key drops it, the self-configured sources are persisted (or dropped) and
//! the polling tasks rebuilt around them (see docs/openstack.md), the journal left as it is.
//! The outbox and the executor tell the polling tasks when the engine may have moved (a signal
//! delivered, a NO_SIGNAL deployment finished) through one shared `EngineMoved`, so sources
//! that cannot long-poll fast-follow (docs/metadata.md, "Polling"). Each new view of the metadata
//! also tells the outbox's `SignalRouter` which signal URL each deployment has now, so a queued
//! signal follows a newer document's URL.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use anneal_protocol::{Deployment, SignalTransport};
use tokio::sync::{Notify, watch};
use tokio_util::sync::CancellationToken;
use tracing::{error, info, warn};

use crate::clock::now_millis;
use crate::config::Config;
use crate::error_chain;
use crate::executor::{Executor, ExecutorError, RunCounts};
use crate::fsutil;
use crate::hook::{HookRunner, HookSettings};
use crate::httpclient::{CaFileError, TrustRoots};
use crate::journal::{Journal, JournalError};
use crate::selfconfig::tracker::Tracker;
use crate::signal::outbox::{Outbox, OutboxSummary};
use crate::signal::route::{Replicas, SignalRouter};
use crate::signal::send::SignalSender;
use crate::source::SourceError;
use crate::source::collector::Collector;
use crate::source::pace::EngineMoved;
use crate::source::state::Collected;

/// Per-stream bound on the hook output the agent keeps.
const MAX_HOOK_OUTPUT_BYTES: usize = crate::hook::DEFAULT_MAX_OUTPUT_BYTES;
/// How many times `once` tries each signal before leaving it in the outbox.
const ONCE_SIGNAL_ATTEMPTS: u32 = 4;
/// How long the daemon waits before retrying after a journal write failed (a full disk).
const JOURNAL_RETRY: Duration = Duration::from_secs(5);

#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    #[error("cannot use the state directory {path}")]
    StateDir {
        path: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot open the journal")]
    Journal(#[from] JournalError),
    #[error(transparent)]
    Executor(#[from] ExecutorError),
    #[error("cannot set up the metadata sources")]
    Source(#[from] SourceError),
    #[error("cannot set up the trust roots")]
    Trust(#[from] CaFileError),
    #[error("cannot collect metadata: no source answered and none has a cached document: {detail}")]
    NoMetadata { detail: String },
}

/// What `once` did, for its exit code and summary line.
#[derive(Debug, Clone, Default)]
pub struct OnceReport {
    pub counts: RunCounts,
    pub waiting: usize,
    pub signals: OutboxSummary,
}

impl OnceReport {
    /// Exit 0 only if everything it ran succeeded and every signal was acknowledged.
    pub fn succeeded(&self) -> bool {
        self.counts.failed == 0 && self.signals.pending == 0 && self.signals.permanent == 0
    }
}

/// The parts both commands share.
struct Parts {
    executor: Executor,
    outbox: Arc<Outbox>,
    wake_outbox: Arc<Notify>,
    /// Raised by the outbox and the executor, heard by the polling tasks.
    moved: EngineMoved,
    collector: Collector,
    /// The self-configured sources (see docs/openstack.md), to follow changes of the key.
    tracker: Tracker,
    /// The trust roots, for a collector rebuilt when the self-configured sources change.
    roots: TrustRoots,
    /// Where HTTP signals go: the outbox reads it, each new view of the metadata updates it.
    router: Arc<SignalRouter>,
}

fn build(config: &Config, base_env: Vec<(String, String)>) -> Result<Parts, DaemonError> {
    let settings = &config.agent;
    // Everything the agent keeps, and every hook it runs from there, sits below this directory:
    // one that someone else owns or may write is refused, not tightened (see docs/security.md).
    fsutil::ensure_private_dir(&settings.state_dir)
        .map_err(|source| DaemonError::StateDir { path: settings.state_dir.clone(), source })?;
    let journal = Arc::new(Journal::open(&settings.state_dir)?);
    let runner = Arc::new(HookRunner::new(hook_settings(config, base_env)));
    let wake_outbox = Arc::new(Notify::new());
    let moved = EngineMoved::new();
    let executor = Executor::new(
        Arc::clone(&journal),
        runner,
        settings.hook_timeout,
        settings.parallel,
        Arc::clone(&wake_outbox),
        moved.clone(),
    )?;
    // One set of roots for every client: a signal goes to the engine the metadata came from.
    let roots = TrustRoots::from_config(config)?;
    // A signal to one replica of a source may go to the others (docs/configuration.md).
    let router = Arc::new(SignalRouter::new(Replicas::from_config(config)));
    let outbox = Arc::new(
        Outbox::new(journal, SignalSender::new(roots.clone()), moved.clone()).with_router(Arc::clone(&router)),
    );
    let mut tracker = Tracker::load(&settings.state_dir, config);
    let mut collector = Collector::with_self_config(config, tracker.current(), &roots)?;
    // With sources persisted, the keys of the cached documents were acted on before: only a
    // key a source newly carries may change them (a stale one at boot must not switch back).
    // A supplier whose cached document lost the key drops them before anything is polled.
    if tracker.start(&collector.collected().self_config_keys) {
        collector = Collector::with_self_config(config, tracker.current(), &roots)?;
    }
    Ok(Parts { executor, outbox, wake_outbox, moved, collector, tracker, roots, router })
}

/// The hook runner's settings: directories under `state_dir`, the environment `main` built.
pub fn hook_settings(config: &Config, mut base_env: Vec<(String, String)>) -> HookSettings {
    let settings = &config.agent;
    base_env.extend(settings.hook_env.iter().map(|(name, value)| (name.clone(), value.clone())));
    HookSettings {
        hooks_dirs: settings.hooks_dirs.clone(),
        work_dir: settings.state_dir.join("script"),
        outputs_dir: settings.state_dir.join("outputs"),
        base_env,
        kill_grace: settings.hook_kill_grace,
        max_output_bytes: MAX_HOOK_OUTPUT_BYTES,
        run_markers_dir: Some(Journal::dir_in(&config.agent.state_dir)),
    }
}

/// `anneal-agent once`: collect, run what is due, deliver signals, return what happened.
pub async fn once(
    config: &Config,
    base_env: Vec<(String, String)>,
    shutdown: CancellationToken,
) -> Result<OnceReport, DaemonError> {
    let Parts { mut executor, outbox, collector: mut sources, mut tracker, roots, router, .. } =
        build(config, base_env)?;
    let mut collected = sources.collect_once(&shutdown).await;
    // New self-configured sources are fetched in the same cycle (once: the key is not
    // looked at again, so this cannot loop).
    if tracker.observe(&collected.self_config_keys) {
        match Collector::with_self_config(config, tracker.current(), &roots) {
            Ok(switched) => {
                sources = switched;
                collected = sources.collect_once(&shutdown).await;
            }
            Err(error) => error!(error = %error_chain(&error), "cannot switch to the self-configured sources"),
        }
    }
    log_collected(&collected);
    if !sources.has_document() {
        let detail: Vec<String> = collected.failing.iter().map(|(name, error)| format!("{name}: {error}")).collect();
        return Err(DaemonError::NoMetadata { detail: detail.join("; ") });
    }
    // The signals go out once every hook ran; the client they need is built meanwhile.
    let client_ready = collected.deployments.iter().any(signals_through_client).then(|| outbox.warm_up());
    executor.set_metadata(collected.metadata.clone());
    executor.converge(&collected.deployments, &shutdown).await?;
    prune(&mut executor, &collected, config);
    let waiting = executor.waiting(&collected.deployments).count();
    if let Some(client_ready) = client_ready {
        let _ = client_ready.await;
    }
    router.observe(&collected.deployments);
    let signals = outbox.flush(ONCE_SIGNAL_ATTEMPTS, &shutdown).await?;
    let polled = if collected.failing.is_empty() { now_millis() } else { 0 };
    write_metrics(config, polled);
    Ok(OnceReport { counts: executor.counts().clone(), waiting, signals })
}

/// Whether `deployment`'s signal goes through the signal client: every transport but NO_SIGNAL
/// (HEAT_SIGNAL and ZAQAR_SIGNAL reach Keystone and Heat or Zaqar with it too).
fn signals_through_client(deployment: &Deployment) -> bool {
    !matches!(deployment.signal_transport(), SignalTransport::None)
}

/// `anneal-agent run`: runs until `shutdown` is cancelled. `ready` is called once the config,
/// journal and sources are set up (sd_notify READY).
pub async fn run(
    config: &Config,
    base_env: Vec<(String, String)>,
    shutdown: CancellationToken,
    ready: impl FnOnce(),
) -> Result<(), DaemonError> {
    let Parts { mut executor, outbox, wake_outbox, moved, collector, mut tracker, roots, router } =
        build(config, base_env)?;
    ready();
    info!(state_dir = %config.agent.state_dir.display(), sources = ?collector.source_names(), "agent running");
    let outbox_task = tokio::spawn({
        let outbox = Arc::clone(&outbox);
        let wake = Arc::clone(&wake_outbox);
        let shutdown = shutdown.clone();
        async move { outbox.run(wake, shutdown).await }
    });
    // Fast-follow off: the polling tasks get no listener and keep the plain schedule.
    let moved = config.agent.fast_follow.then_some(moved);
    let mut polling = Polling::start(collector, config.agent.poll_interval, moved.clone(), &shutdown, 0);
    let mut current: Arc<Collected> = polling.updates.borrow_and_update().clone();
    route_signals(&router, &current, &wake_outbox);
    // Hooks may appear without a metadata change (another package installs one): look again.
    let mut recheck = tokio::time::interval(config.agent.poll_interval);
    let mut retry_after_error = false;
    loop {
        executor.set_metadata(current.metadata.clone());
        if let Err(error) = executor.start_ready(&current.deployments, &shutdown) {
            error!(error = %error_chain(&error), "cannot start deployments; will retry");
            retry_after_error = true;
        }
        tokio::select! {
            () = shutdown.cancelled() => break,
            changed = polling.updates.changed() => {
                if changed.is_err() {
                    break;
                }
                current = polling.updates.borrow_and_update().clone();
                if tracker.observe(&current.self_config_keys) {
                    polling.switch(config, &tracker, &roots, moved.clone(), &shutdown);
                    current = polling.updates.borrow_and_update().clone();
                }
                log_collected(&current);
                prune(&mut executor, &current, config);
                route_signals(&router, &current, &wake_outbox);
            }
            Some(finished) = executor.finish_next(), if !executor.is_idle() => {
                if let Err(error) = finished {
                    error!(error = %error_chain(&error), "cannot record a hook result; will retry");
                }
                write_metrics(config, polling.last_success());
            }
            _ = recheck.tick() => {
                prune(&mut executor, &current, config);
                write_metrics(config, polling.last_success());
            }
            () = tokio::time::sleep(JOURNAL_RETRY), if retry_after_error => retry_after_error = false,
        }
    }
    info!("shutting down: stopping running hooks");
    stop_hooks(&mut executor).await;
    let _ = outbox_task.await;
    info!("agent stopped");
    Ok(())
}

/// Waits for every running hook (its group stopped by the shutdown token) and journals how it
/// ended.
async fn stop_hooks(executor: &mut Executor) {
    while let Some(finished) = executor.finish_next().await {
        if let Err(error) = finished {
            error!(error = %error_chain(&error), "cannot record a hook result during shutdown");
        }
    }
}

/// Gives the router the signal URLs of a new view of the metadata; when one changed, the outbox
/// is woken, so a queued signal whose URL a newer document replaced goes there now.
fn route_signals(router: &SignalRouter, collected: &Collected, wake_outbox: &Notify) {
    if router.observe(&collected.deployments) {
        wake_outbox.notify_one();
    }
}

/// The polling tasks of one collector: their own token (a child of shutdown), so a switch of
/// the self-configured sources stops them without stopping the agent, and their merged view.
/// `moved`, when fast-follow is on, is heard by every task.
struct Polling {
    token: CancellationToken,
    updates: watch::Receiver<Arc<Collected>>,
    /// When a source last answered (ms since the epoch), for the metrics textfile.
    last_success: Arc<AtomicU64>,
}

impl Polling {
    fn start(
        collector: Collector,
        poll_interval: Duration,
        moved: Option<EngineMoved>,
        shutdown: &CancellationToken,
        last_success: u64,
    ) -> Polling {
        let token = shutdown.child_token();
        let last_success = collector.last_success(last_success);
        let updates = collector.spawn(poll_interval, moved.as_ref(), token.clone());
        Polling { token, updates, last_success }
    }

    fn last_success(&self) -> u64 {
        self.last_success.load(Ordering::Relaxed)
    }

    /// Replaces the polling tasks by those of the config's sources and the self-configured ones
    /// now in `tracker`. The new collector is built first: if it cannot be (its cache directory
    /// became unusable) the old tasks keep running. Journal and executor are untouched; the
    /// caches are keyed by source name, which a switch keeps for sources that stay.
    fn switch(
        &mut self,
        config: &Config,
        tracker: &Tracker,
        roots: &TrustRoots,
        moved: Option<EngineMoved>,
        shutdown: &CancellationToken,
    ) {
        match Collector::with_self_config(config, tracker.current(), roots) {
            Ok(collector) => {
                info!(sources = ?collector.source_names(), "switching the polled sources");
                self.token.cancel();
                let last_success = self.last_success();
                *self = Polling::start(collector, config.agent.poll_interval, moved, shutdown, last_success);
            }
            Err(error) => error!(error = %error_chain(&error), "cannot switch to the self-configured sources"),
        }
    }
}

/// Journal retention (see docs/journal.md, "Retention"), only from a complete view of the
/// metadata: an id missing because a source has no document yet may still be listed.
fn prune(executor: &mut Executor, collected: &Collected, config: &Config) {
    if collected.complete {
        executor.prune(&collected.deployments, config.agent.journal_retention, now_millis());
    }
}

/// Rewrites the metrics textfile, when one is configured, from the journal; a failure is
/// logged and the next write tries again.
fn write_metrics(config: &Config, last_success: u64) {
    let Some(path) = &config.agent.metrics_textfile else { return };
    let entries = Journal::open(&config.agent.state_dir).and_then(|journal| journal.load_all());
    let written = match entries {
        Ok(entries) => crate::metrics::write(path, &crate::metrics::render(&entries, last_success))
            .map_err(|error| format!("{}: {error}", path.display())),
        Err(error) => Err(error_chain(&error)),
    };
    if let Err(error) = written {
        warn!(%error, "cannot write the metrics textfile");
    }
}

fn log_collected(collected: &Collected) {
    for (source, rejected) in &collected.rejected {
        warn!(source = %source, index = rejected.index, id = rejected.id.as_deref().unwrap_or(""), reason = %rejected.reason, "deployment entry rejected");
    }
    for (source, error) in &collected.failing {
        warn!(source = %source, error = %error, "source failing; using its last good document");
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    fn deployment(inputs: Value) -> Deployment {
        serde_json::from_value(json!({"id": "d", "group": "script", "config": "", "inputs": inputs})).unwrap()
    }

    #[test]
    fn once_warms_the_signal_client_for_every_transport_but_no_signal() {
        let input = |name: &str, value: &str| json!({"name": name, "value": value});
        let http = deployment(json!([input("deploy_signal_id", "http://127.0.0.1:1/signal")]));
        let heat = deployment(json!([input("deploy_auth_url", "http://127.0.0.1:1/v3")]));
        let zaqar =
            deployment(json!([input("deploy_auth_url", "http://127.0.0.1:1/v3"), input("deploy_queue_id", "q")]));
        for (signalled, transport) in [(&http, "http"), (&heat, "HEAT_SIGNAL"), (&zaqar, "ZAQAR_SIGNAL")] {
            assert!(signals_through_client(signalled), "{transport}: {:?}", signalled.signal_transport());
        }
        assert!(!signals_through_client(&deployment(json!([]))), "NO_SIGNAL sends nothing");
    }
}
