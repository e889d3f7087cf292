//! The daemon's per-source polling task: fetch, cache, publish, then pause as `pace::Pacer`
//! decides (long-poll back to back, plain polls every `poll_interval` ±10%, backoff after errors,
//! fast-follow after a change or a delivered signal). Every task publishes its source's state
//! into one shared table, which sends the merged view when it changes.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use rand::SeedableRng;
use rand::rngs::StdRng;
use serde_json::Value;
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::cache::{Cache, CachedDocument};
use super::pace::{Pacer, PollOutcome};
use super::state::{Collected, Slot, collected_from};
use super::{Fetched, error_chain};
use crate::clock::now_millis;

/// What the shared table knows of one source.
#[derive(Debug)]
pub(super) struct SlotView {
    name: String,
    document: Option<Value>,
    failing: Option<String>,
    reported: bool,
}

impl SlotView {
    pub(super) fn new(name: &str, document: Option<Value>, failing: Option<String>) -> SlotView {
        SlotView { name: name.to_string(), document, failing, reported: false }
    }

    /// A source that could not be built: no task reports for it, and it stays failing without a
    /// document (the merged view is never complete while it is listed).
    pub(super) fn unbuilt(name: &str, error: &str) -> SlotView {
        SlotView { name: name.to_string(), document: None, failing: Some(error.to_string()), reported: true }
    }
}

/// The table of all sources and the channel the merged view is published on.
#[derive(Debug)]
pub(super) struct Shared {
    views: Mutex<Vec<SlotView>>,
    sender: watch::Sender<Arc<Collected>>,
    /// ms since the epoch of the last fetch that did not fail (see `Collector::last_success`).
    last_success: Arc<std::sync::atomic::AtomicU64>,
}

impl Shared {
    pub(super) fn new(
        views: Vec<SlotView>,
        sender: watch::Sender<Arc<Collected>>,
        last_success: Arc<std::sync::atomic::AtomicU64>,
    ) -> Shared {
        Shared { views: Mutex::new(views), sender, last_success }
    }

    /// Records source `index`'s state (`document` is `Some` when it was replaced) and sends the
    /// merged view: unconditionally when this completes the first round, else when it changed.
    fn publish(&self, index: usize, document: Option<Value>, failing: Option<String>) {
        if failing.is_none() {
            self.last_success.fetch_max(crate::clock::now_millis(), std::sync::atomic::Ordering::Relaxed);
        }
        // The lock is never held across an await; a panic elsewhere cannot corrupt this table.
        let mut views = self.views.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(view) = views.get_mut(index) else {
            return;
        };
        let first_report = !view.reported;
        let changed = document.is_some() || view.failing != failing;
        view.reported = true;
        if let Some(document) = document {
            view.document = Some(document);
        }
        view.failing = failing;
        if !views.iter().all(|view| view.reported) || !(changed || first_report) {
            return;
        }
        let collected = collected_from(
            views.iter().map(|view| (view.name.as_str(), view.document.as_ref(), view.failing.as_ref())),
        );
        // This slot's first report while all others have reported: the first round is complete.
        if first_report {
            self.sender.send_replace(Arc::new(collected));
        } else {
            self.sender.send_if_modified(|current| {
                let modified = **current != collected;
                if modified {
                    *current = Arc::new(collected);
                }
                modified
            });
        }
    }
}

/// Polls one source until shutdown, every `poll_interval` unless the slot has its own. `moved`
/// is the daemon's `EngineMoved` listener (`None`: fast-follow is off).
pub(super) async fn poll_source(
    index: usize,
    mut slot: Slot,
    shared: Arc<Shared>,
    cache: Cache,
    poll_interval: Duration,
    moved: Option<watch::Receiver<()>>,
    shutdown: CancellationToken,
) {
    let poll_interval = slot.poll_interval.unwrap_or(poll_interval);
    let mut pacer = Pacer::new(poll_interval, moved, new_rng(index));
    loop {
        let started = Instant::now();
        let result = slot.source.fetch(true, &shutdown).await;
        if matches!(result, Ok(Fetched::Cancelled)) {
            break;
        }
        let failed = result.is_err();
        let recorded = slot.record(result);
        let persisted = match recorded.persist {
            Some(cached) => persist(cache.clone(), cached).await,
            None => true,
        };
        if persisted {
            slot.source.settle(&shutdown).await;
        } else {
            slot.cache_write_failed();
        }
        let document = if recorded.changed { slot.document.clone() } else { None };
        shared.publish(index, document, slot.failing.clone());
        let outcome = PollOutcome { failed, changed: recorded.changed, long_poll: slot.source.can_long_poll() };
        if !pacer.pause(outcome, started, &shutdown).await {
            break;
        }
    }
    tracing::debug!(source = %slot.source.name(), "source polling stopped");
}

/// Writes a cache entry off the async thread (it fsyncs); returns whether it was written. A
/// failure (a full disk) keeps the older file whole and is retried after the next fetch.
async fn persist(cache: Cache, cached: CachedDocument) -> bool {
    let source = cached.source.clone();
    match tokio::task::spawn_blocking(move || cache.store(&cached)).await {
        Ok(Ok(())) => true,
        Ok(Err(error)) => {
            tracing::warn!(%source, error = %error_chain(&error), "cannot write the source cache; will retry");
            false
        }
        Err(error) => {
            tracing::warn!(%source, %error, "source cache writer failed; will retry");
            false
        }
    }
}

fn new_rng(index: usize) -> StdRng {
    // Jitter needs no cryptographic quality; fall back to a time seed if the OS refuses.
    StdRng::try_from_os_rng().unwrap_or_else(|_| StdRng::seed_from_u64(now_millis() ^ index as u64))
}
