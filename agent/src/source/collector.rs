//! The collector: all configured sources, each with its last good document, merged into the one
//! view the scheduler works from (`Collected`). `collect_once` fetches every source one time (the
//! `once` command); `spawn` starts one polling task per source for the daemon and publishes the
//! merged view on a watch channel whenever it changes. A failing source never empties the view:
//! it keeps contributing its last good document (from memory or from the cache on disk). The
//! self-configured sources (`crate::selfconfig`) follow the config's own; when they change the
//! daemon builds a new collector and stops the old one's tasks with their own token. A
//! self-configured source that cannot be built stays in the view as a failing source without a
//! document, so the view is incomplete and journal retention prunes nothing (docs/journal.md).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::cache::Cache;
use super::pace::EngineMoved;
use super::poll::{Shared, SlotView, poll_source};
use super::state::{Collected, Slot, collected_from};
use super::{Fetched, Source, SourceError, Validators, error_chain};
use crate::config::Config;
use crate::httpclient::TrustRoots;
use crate::selfconfig::SelfConfig;

/// All sources with their last good documents.
#[derive(Debug)]
pub(crate) struct Collector {
    slots: Vec<Slot>,
    /// Self-configured sources that could not be built: (source name, why). They count as
    /// failing sources without a document, after the slots.
    unbuilt: Vec<(String, String)>,
    cache: Cache,
    /// When a source last fetched without failing (ms since the epoch, 0: never), for the
    /// metrics textfile; set by the polling tasks.
    last_success: Arc<AtomicU64>,
}

impl Collector {
    /// Builds every source of `config` (http clients trusting `roots` besides the system's) and
    /// loads their caches (restoring the HTTP validators with them).
    #[cfg(test)]
    pub(crate) fn new(config: &Config, roots: &TrustRoots) -> Result<Collector, SourceError> {
        Collector::with_self_config(config, None, roots)
    }

    /// `new`, followed by the self-configured sources of `self_config` (see `crate::selfconfig`),
    /// each polled at its `polling_interval`. A self-configured source that cannot be built is
    /// logged and not polled (the metadata chose it, and the config's own sources must still run),
    /// but it stays in the view as failing: the deployments only it would list are unknown, so
    /// the view is not complete.
    pub(crate) fn with_self_config(
        config: &Config,
        self_config: Option<&SelfConfig>,
        roots: &TrustRoots,
    ) -> Result<Collector, SourceError> {
        let cache = Cache::open(&config.agent.state_dir)?;
        let mut slots = Vec::with_capacity(config.sources.len());
        let mut unbuilt = Vec::new();
        for (index, source_config) in config.sources.iter().enumerate() {
            let source = Source::from_config(index, source_config, roots)?;
            slots.push(load_slot(&cache, source));
        }
        for (collector, source_config) in self_config.map(|derived| derived.sources.as_slice()).unwrap_or_default() {
            let name = collector.source_name();
            match Source::named(name.clone(), source_config, roots) {
                Ok(source) => {
                    let mut slot = load_slot(&cache, source);
                    slot.poll_interval = self_config.and_then(|derived| derived.poll_interval);
                    slots.push(slot);
                }
                Err(error) => {
                    let text = error_chain(&error);
                    tracing::error!(error = %text, "cannot set up a self-configured source; not polling it");
                    unbuilt.push((name, format!("cannot set up the source: {text}")));
                }
            }
        }
        Ok(Collector { slots, unbuilt, cache, last_success: Arc::default() })
    }

    /// The names of the sources polled, in order.
    /// When a source last fetched without failing (ms since the epoch, 0: never yet), as the
    /// polling tasks record it; `starting_from` carries an earlier collector's value over.
    pub(crate) fn last_success(&self, starting_from: u64) -> Arc<AtomicU64> {
        self.last_success.fetch_max(starting_from, Ordering::Relaxed);
        Arc::clone(&self.last_success)
    }

    pub(crate) fn source_names(&self) -> Vec<String> {
        self.slots.iter().map(|slot| slot.source.name().to_string()).collect()
    }

    /// Whether any source has a document, fresh or cached.
    pub(crate) fn has_document(&self) -> bool {
        self.slots.iter().any(|slot| slot.document.is_some())
    }

    /// The merged view of what is known now, without fetching.
    pub(crate) fn collected(&self) -> Collected {
        let slots = self.slots.iter().map(|slot| (slot.source.name(), slot.document.as_ref(), slot.failing.as_ref()));
        let unbuilt = self.unbuilt.iter().map(|(name, error)| (name.as_str(), None, Some(error)));
        collected_from(slots.chain(unbuilt))
    }

    /// `once`: fetches every source one time without long-poll; a failing source falls back to
    /// its cached document. Each source is settled once its document is in the cache, so a zaqar
    /// source's messages are deleted before the process ends (the next `once` would otherwise
    /// read them again after their claim lapsed). Shutdown stops early; sources not fetched are
    /// listed as failing.
    pub(crate) async fn collect_once(&mut self, shutdown: &CancellationToken) -> Collected {
        for slot in &mut self.slots {
            let result = slot.source.fetch(false, shutdown).await;
            if matches!(result, Ok(Fetched::Cancelled)) {
                slot.failing = Some("not fetched: shutting down".to_string());
                continue;
            }
            if let Some(cached) = slot.record(result).persist {
                if let Err(error) = self.cache.store(&cached) {
                    tracing::warn!(error = %error_chain(&error), "cannot write the source cache");
                    slot.cache_write_failed();
                    continue;
                }
            }
            // Persisted: what the document came from may go (a zaqar source's messages).
            slot.source.settle(shutdown).await;
        }
        self.collected()
    }

    /// The daemon: one task per source (see `poll::poll_source`). The receiver starts with the
    /// view known now (cached documents); the first change notification comes once every source
    /// has been tried once, and later ones whenever the merged view changes. All tasks end on
    /// shutdown, which drops the sender. With `moved`, the tasks of sources that cannot long-poll
    /// fast-follow its raises (see `pace`); `None` turns fast-follow off. Must be called within a
    /// tokio runtime.
    pub(crate) fn spawn(
        self,
        poll_interval: Duration,
        moved: Option<&EngineMoved>,
        shutdown: CancellationToken,
    ) -> watch::Receiver<Arc<Collected>> {
        let (sender, receiver) = watch::channel(Arc::new(self.collected()));
        let views = self
            .slots
            .iter()
            .map(|slot| SlotView::new(slot.source.name(), slot.document.clone(), slot.failing.clone()))
            .chain(self.unbuilt.iter().map(|(name, error)| SlotView::unbuilt(name, error)))
            .collect();
        let shared = Arc::new(Shared::new(views, sender, Arc::clone(&self.last_success)));
        for (index, slot) in self.slots.into_iter().enumerate() {
            let listener = moved.map(EngineMoved::listen);
            let shared = Arc::clone(&shared);
            let task = poll_source(index, slot, shared, self.cache.clone(), poll_interval, listener, shutdown.clone());
            tokio::spawn(task);
        }
        receiver
    }
}

/// `source` with what its cache file holds.
fn load_slot(cache: &Cache, mut source: Source) -> Slot {
    match cache.load(source.name(), &source.identity()) {
        Some(cached) => {
            tracing::debug!(source = %source.name(), fetched_at = cached.fetched_at, "loaded cached document");
            source.restore_validators(cached.validators.clone());
            Slot::new(source, Some(cached.document), cached.validators)
        }
        None => Slot::new(source, None, Validators::default()),
    }
}

#[cfg(test)]
mod tests;
