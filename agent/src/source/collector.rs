//! The collector: all configured sources, each with its last good document, merged into the one
//! view the scheduler works from (`Collected`). `collect_once` fetches every source one time (the
//! `once` command); `spawn` starts one polling task per source for the daemon and publishes the
//! merged view on a watch channel whenever it changes. A failing source never empties the view:
//! it keeps contributing its last good document (from memory or from the cache on disk).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use anneal_protocol::Deployment;
use anneal_protocol::deployment::{Rejected, deployments_from_document};
use serde_json::Value;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::cache::{Cache, CachedDocument};
use super::{Fetched, Source, SourceError, Validators, error_chain};
use crate::clock::now_millis;
use crate::config::Config;

/// The merged view handed to the scheduler.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Collected {
    /// In config order, then list order; a later source's deployment with the same id replaces
    /// the earlier one in the earlier one's position.
    pub deployments: Vec<Deployment>,
    /// Entries of a `deployments` list that could not be read: (source name, why).
    pub rejected: Vec<(String, Rejected)>,
    /// Sources whose last fetch failed: (source name, error). Such a source contributes its
    /// cached document if it has one, and nothing otherwise.
    pub failing: Vec<(String, String)>,
}

pub(super) fn merge_documents<'a>(documents: impl IntoIterator<Item = (&'a str, &'a Value)>) -> Collected {
    let mut collected = Collected::default();
    let mut positions: HashMap<String, usize> = HashMap::new();
    for (name, document) in documents {
        let (deployments, rejected) = deployments_from_document(document);
        collected.rejected.extend(rejected.into_iter().map(|rejection| (name.to_string(), rejection)));
        for deployment in deployments {
            match positions.get(&deployment.id) {
                Some(&position) => collected.deployments[position] = deployment,
                None => {
                    positions.insert(deployment.id.clone(), collected.deployments.len());
                    collected.deployments.push(deployment);
                }
            }
        }
    }
    collected
}

/// All sources with their last good documents.
#[derive(Debug)]
pub struct Collector {
    slots: Vec<Slot>,
    cache: Cache,
}

impl Collector {
    /// Builds every source and loads their caches (restoring the HTTP validators with them).
    pub fn new(config: &Config) -> Result<Collector, SourceError> {
        let cache = Cache::open(&config.agent.state_dir)?;
        let mut slots = Vec::with_capacity(config.sources.len());
        for (index, source_config) in config.sources.iter().enumerate() {
            let mut source = Source::from_config(index, source_config)?;
            let cached = cache.load(source.name(), &source.identity());
            let (document, stored_validators) = match cached {
                Some(cached) => {
                    tracing::debug!(source = %source.name(), fetched_at = cached.fetched_at, "loaded cached document");
                    source.restore_validators(cached.validators.clone());
                    (Some(cached.document), cached.validators)
                }
                None => (None, Validators::default()),
            };
            slots.push(Slot { source, document, stored_validators, cache_stale: false, failing: None });
        }
        Ok(Collector { slots, cache })
    }

    /// Whether any source has a document, fresh or cached.
    pub fn has_document(&self) -> bool {
        self.slots.iter().any(|slot| slot.document.is_some())
    }

    /// The merged view of what is known now, without fetching.
    pub fn collected(&self) -> Collected {
        collected_from(
            self.slots.iter().map(|slot| (slot.source.name(), slot.document.as_ref(), slot.failing.as_ref())),
        )
    }

    /// `once`: fetches every source one time without long-poll; a failing source falls back to
    /// its cached document. Shutdown stops early; sources not fetched are listed as failing.
    pub async fn collect_once(&mut self, shutdown: &CancellationToken) -> Collected {
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
                }
            }
        }
        self.collected()
    }

    /// The daemon: one task per source (see `poll::poll_source`). The receiver starts with the
    /// view known now (cached documents); the first change notification comes once every source
    /// has been tried once, and later ones whenever the merged view changes. All tasks end on
    /// shutdown, which drops the sender. Must be called within a tokio runtime.
    pub fn spawn(self, poll_interval: Duration, shutdown: CancellationToken) -> watch::Receiver<Arc<Collected>> {
        let (sender, receiver) = watch::channel(Arc::new(self.collected()));
        let views = self
            .slots
            .iter()
            .map(|slot| super::poll::SlotView::new(slot.source.name(), slot.document.clone(), slot.failing.clone()))
            .collect();
        let shared = Arc::new(super::poll::Shared::new(views, sender));
        for (index, slot) in self.slots.into_iter().enumerate() {
            let task = super::poll::poll_source(
                index,
                slot,
                Arc::clone(&shared),
                self.cache.clone(),
                poll_interval,
                shutdown.clone(),
            );
            tokio::spawn(task);
        }
        receiver
    }
}

/// Builds `Collected` from (name, document, failing) per source in config order.
pub(super) fn collected_from<'a>(
    slots: impl Iterator<Item = (&'a str, Option<&'a Value>, Option<&'a String>)> + Clone,
) -> Collected {
    let documents = slots.clone().filter_map(|(name, document, _)| document.map(|document| (name, document)));
    let mut collected = merge_documents(documents);
    collected.failing =
        slots.filter_map(|(name, _, failing)| failing.map(|error| (name.to_string(), error.clone()))).collect();
    collected
}

/// One source and what we know of it.
#[derive(Debug)]
pub(super) struct Slot {
    pub(super) source: Source,
    pub(super) document: Option<Value>,
    /// The validators in the cache file, to rewrite it when only they change.
    stored_validators: Validators,
    /// The last cache write failed (a full disk): the file holds an older document, so the next
    /// fetch writes it again even when nothing changed.
    cache_stale: bool,
    pub(super) failing: Option<String>,
}

/// What recording one fetch result changed.
pub(super) struct Recorded {
    /// The document differs from the previous one.
    pub(super) changed: bool,
    /// A cache entry to write.
    pub(super) persist: Option<CachedDocument>,
}

impl Slot {
    /// Records that writing the cache entry `record` asked for failed, so the next fetch retries.
    pub(super) fn cache_write_failed(&mut self) {
        self.cache_stale = true;
    }

    /// The cache entry for the current document (and the validators it came with); from here on
    /// the cache is taken as written unless `cache_write_failed` says otherwise.
    fn cache_entry(&mut self) -> Option<CachedDocument> {
        let document = self.document.clone()?;
        let validators = self.source.validators();
        self.stored_validators = validators.clone();
        self.cache_stale = false;
        Some(CachedDocument {
            source: self.source.name().to_string(),
            identity: self.source.identity(),
            document,
            validators,
            fetched_at: now_millis(),
        })
    }

    /// Records a fetch result (not `Cancelled`): keeps the last good document on error.
    pub(super) fn record(&mut self, result: Result<Fetched, SourceError>) -> Recorded {
        let name = self.source.name().to_string();
        let mut recorded = Recorded { changed: false, persist: None };
        match result {
            Ok(Fetched::Document(document)) => {
                if self.failing.take().is_some() {
                    tracing::info!(source = %name, "source recovered");
                }
                recorded.changed = self.document.as_ref() != Some(&document);
                let rewrite =
                    recorded.changed || self.cache_stale || self.source.validators() != self.stored_validators;
                self.document = Some(document);
                if rewrite {
                    recorded.persist = self.cache_entry();
                }
            }
            Ok(Fetched::Unchanged) if self.document.is_none() => {
                // Validators without a document (a cache written by hand?): ask unconditionally.
                self.source.restore_validators(Validators::default());
                self.failing = Some("the server answered 304 Not Modified but no document is cached".to_string());
            }
            Ok(Fetched::Unchanged) | Ok(Fetched::Cancelled) => {
                if self.failing.take().is_some() {
                    tracing::info!(source = %name, "source recovered");
                }
            }
            Err(error) => {
                let text = error_chain(&error);
                let fallback =
                    if self.document.is_some() { "keeping its last good document" } else { "no document yet" };
                if error.is_transient() {
                    tracing::warn!(source = %name, error = %text, "fetch failed; {fallback}");
                } else {
                    tracing::error!(source = %name, error = %text, "fetch failed; {fallback}");
                }
                self.failing = Some(text);
            }
        }
        // A cache write that failed (a full disk) is retried after every fetch until it succeeds,
        // so the file does not keep an older document once the change has been seen.
        if recorded.persist.is_none() && self.cache_stale {
            recorded.persist = self.cache_entry();
        }
        recorded
    }
}

#[cfg(test)]
mod tests;
