//! The daemon's per-source polling task and its timing: long-poll back to back when the source
//! can, otherwise poll every `poll_interval` with ±10% jitter; after an error, jittered
//! exponential backoff from 1 s up to the poll interval (at most 5 min: `backoff::source_retry`). Every task publishes its
//! source's state into one shared table, which sends the merged view when it changes.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::Value;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::cache::{Cache, CachedDocument};
use super::state::{Collected, Slot, collected_from};
use super::{Fetched, error_chain};
use crate::backoff::{jitter, source_retry};
use crate::clock::now_millis;

/// A long-poll answered without a change sooner than this waits out the rest before the next
/// request, so a server that ignores `?wait=` cannot make us spin.
pub(crate) const MIN_LONG_POLL_GAP: Duration = Duration::from_secs(1);

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
}

/// The table of all sources and the channel the merged view is published on.
#[derive(Debug)]
pub(super) struct Shared {
    views: Mutex<Vec<SlotView>>,
    sender: watch::Sender<Arc<Collected>>,
}

impl Shared {
    pub(super) fn new(views: Vec<SlotView>, sender: watch::Sender<Arc<Collected>>) -> Shared {
        Shared { views: Mutex::new(views), sender }
    }

    /// Records source `index`'s state (`document` is `Some` when it was replaced) and sends the
    /// merged view: unconditionally when this completes the first round, else when it changed.
    fn publish(&self, index: usize, document: Option<Value>, failing: Option<String>) {
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

/// Polls one source until shutdown, every `poll_interval` unless the slot has its own.
pub(super) async fn poll_source(
    index: usize,
    mut slot: Slot,
    shared: Arc<Shared>,
    cache: Cache,
    poll_interval: Duration,
    shutdown: CancellationToken,
) {
    let mut rng = new_rng(index);
    let mut failures: u32 = 0;
    let poll_interval = slot.poll_interval.unwrap_or(poll_interval);
    loop {
        let started = Instant::now();
        let result = slot.source.fetch(true, &shutdown).await;
        if matches!(result, Ok(Fetched::Cancelled)) {
            break;
        }
        let failed = result.is_err();
        let recorded = slot.record(result);
        if let Some(cached) = recorded.persist {
            if !persist(cache.clone(), cached).await {
                slot.cache_write_failed();
            }
        }
        let document = if recorded.changed { slot.document.clone() } else { None };
        shared.publish(index, document, slot.failing.clone());
        let delay = if failed {
            failures = failures.saturating_add(1);
            source_retry(poll_interval).delay(failures, &mut rng)
        } else {
            failures = 0;
            next_poll_delay(slot.source.can_long_poll(), recorded.changed, started.elapsed(), poll_interval, &mut rng)
        };
        tokio::select! {
            () = tokio::time::sleep(delay) => {}
            () = shutdown.cancelled() => break,
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

/// The pause before the next request after a successful one.
pub(crate) fn next_poll_delay(
    can_long_poll: bool,
    changed: bool,
    elapsed: Duration,
    poll_interval: Duration,
    rng: &mut impl Rng,
) -> Duration {
    if !can_long_poll {
        return jitter(poll_interval, 0.1, rng);
    }
    if changed { Duration::ZERO } else { MIN_LONG_POLL_GAP.saturating_sub(elapsed) }
}

fn new_rng(index: usize) -> StdRng {
    // Jitter needs no cryptographic quality; fall back to a time seed if the OS refuses.
    StdRng::try_from_os_rng().unwrap_or_else(|_| StdRng::seed_from_u64(now_millis() ^ index as u64))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn polling_is_jittered_by_ten_percent() {
        let mut rng = StdRng::seed_from_u64(1);
        let interval = Duration::from_secs(30);
        let delays: Vec<_> =
            (0..50).map(|_| next_poll_delay(false, false, Duration::ZERO, interval, &mut rng)).collect();
        assert!(delays.iter().all(|delay| *delay >= Duration::from_secs(27) && *delay <= Duration::from_secs(33)));
        assert!(delays.iter().any(|delay| *delay != delays[0]), "delays vary");
    }

    #[test]
    fn long_poll_goes_straight_on_but_never_spins() {
        let mut rng = StdRng::seed_from_u64(1);
        let interval = Duration::from_secs(30);
        assert_eq!(next_poll_delay(true, true, Duration::ZERO, interval, &mut rng), Duration::ZERO);
        let quick = next_poll_delay(true, false, Duration::from_millis(100), interval, &mut rng);
        assert_eq!(quick, Duration::from_millis(900));
        assert_eq!(next_poll_delay(true, false, Duration::from_secs(60), interval, &mut rng), Duration::ZERO);
    }
}
