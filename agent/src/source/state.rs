//! What the agent knows of each source, and the merged view built from that: a `Slot` is one
//! source with its last good document, the validators in its cache file and its last error; the
//! per-source states in config order merge into the `Collected` view the scheduler works from.
//! Both the collector (`once`) and the polling tasks (the daemon) keep their state here.

use std::collections::HashMap;
use std::time::Duration;

use anneal_protocol::Deployment;
use anneal_protocol::deployment::{Rejected, deployments_from_document};
use serde_json::Value;

use super::cache::CachedDocument;
use super::{Fetched, Source, SourceError, Validators, error_chain};
use crate::clock::now_millis;
use crate::selfconfig::{CarriedKey, METADATA_KEY};

/// The merged view handed to the scheduler.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Collected {
    /// In config order, then list order; a later source's deployment with the same id replaces
    /// the earlier one in the earlier one's position.
    pub(crate) deployments: Vec<Deployment>,
    /// Entries of a `deployments` list that could not be read: (source name, why).
    pub(crate) rejected: Vec<(String, Rejected)>,
    /// Sources whose last fetch failed: (source name, error). Such a source contributes its
    /// cached document if it has one, and nothing otherwise.
    pub(crate) failing: Vec<(String, String)>,
    /// Every source has a document (fresh or its last good one): the deployments are all the
    /// engine listed, so an id missing from them has really left (journal retention relies on it).
    pub(crate) complete: bool,
    /// Each source with a document, in source order, and the `os-collect-config` key it carries
    /// if any, for self-configuration (see `crate::selfconfig::tracker`).
    pub(crate) self_config_keys: Vec<CarriedKey>,
    /// Every document deep-merged in config order, as os-apply-config merges the files
    /// os-collect-config leaves: what the built-in apply-config hook renders its templates with.
    /// Made only when a deployment of group `apply-config` is listed (a merge copies every
    /// document).
    pub(crate) metadata: Option<std::sync::Arc<Value>>,
}

/// Merges documents given in config order (see `Collected::deployments` for the rule).
pub(crate) fn merge_documents<'a>(documents: impl IntoIterator<Item = (&'a str, &'a Value)>) -> Collected {
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

/// Builds `Collected` from (name, document, failing) per source in config order.
pub(super) fn collected_from<'a>(
    slots: impl Iterator<Item = (&'a str, Option<&'a Value>, Option<&'a String>)> + Clone,
) -> Collected {
    let documents = slots.clone().filter_map(|(name, document, _)| document.map(|document| (name, document)));
    let mut collected = merge_documents(documents);
    collected.complete = slots.clone().all(|(_, document, _)| document.is_some());
    if collected.deployments.iter().any(|deployment| deployment.group == APPLY_CONFIG) {
        let documents = slots.clone().filter_map(|(_, document, _)| document);
        collected.metadata = Some(std::sync::Arc::new(deep_merge(documents)));
    }
    collected.self_config_keys = slots
        .clone()
        .filter_map(|(name, document, _)| {
            Some(CarriedKey { source: name.to_string(), key: document?.get(METADATA_KEY).cloned() })
        })
        .collect();
    collected.failing =
        slots.filter_map(|(name, _, failing)| failing.map(|error| (name.to_string(), error.clone()))).collect();
    collected
}

/// The group whose built-in hook reads the merged metadata.
const APPLY_CONFIG: &str = "apply-config";

/// os-apply-config's `merge_configs`: the documents that are objects, merged in order; a key
/// whose value is an object on both sides is merged again, any other value replaces.
fn deep_merge<'a>(documents: impl Iterator<Item = &'a Value>) -> Value {
    let mut merged = Value::Object(serde_json::Map::new());
    for document in documents.filter(|document| document.as_object().is_some_and(|map| !map.is_empty())) {
        merge_into(&mut merged, document);
    }
    merged
}

fn merge_into(target: &mut Value, source: &Value) {
    let (Value::Object(target), Value::Object(source)) = (target, source) else { return };
    for (key, value) in source {
        match target.get_mut(key) {
            Some(existing @ Value::Object(_)) if value.is_object() => merge_into(existing, value),
            Some(existing @ Value::Object(_)) => *existing = value.clone(),
            Some(existing) => *existing = value.clone(),
            None => {
                target.insert(key.clone(), value.clone());
            }
        }
    }
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
    /// This source's own poll interval (a self-configured source's `polling_interval`); the
    /// config's when `None`.
    pub(super) poll_interval: Option<Duration>,
}

/// What recording one fetch result changed.
pub(super) struct Recorded {
    /// The document differs from the previous one.
    pub(super) changed: bool,
    /// A cache entry to write.
    pub(super) persist: Option<CachedDocument>,
}

impl Slot {
    /// A source with what its cache file held (`document` and the validators stored with it).
    pub(super) fn new(source: Source, document: Option<Value>, stored_validators: Validators) -> Slot {
        Slot { source, document, stored_validators, cache_stale: false, failing: None, poll_interval: None }
    }

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
                self.failing = Some(
                    "no document yet: the source reported no change (304 Not Modified, or an empty queue) and none is cached"
                        .to_string(),
                );
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
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn metadata_is_merged_as_os_apply_config_merges_its_files() {
        let first = json!({"a": {"x": 1, "y": {"deep": true}}, "b": [1], "deployments": [{"id": "1", "group": "apply-config"}]});
        let second = json!({"a": {"y": {"more": 2}, "z": 3}, "b": [2], "c": "new"});
        let collected = collected_from(
            [("one", Some(&first), None), ("two", Some(&json!("not a map")), None), ("three", Some(&second), None)]
                .into_iter(),
        );
        let metadata = collected.metadata.expect("an apply-config deployment asks for the merge");
        assert_eq!(
            *metadata,
            json!({"a": {"x": 1, "y": {"deep": true, "more": 2}, "z": 3}, "b": [2],
                   "deployments": [{"id": "1", "group": "apply-config"}], "c": "new"})
        );
        let without = json!({"deployments": [{"id": "2", "group": "script"}]});
        assert!(collected_from([("one", Some(&without), None)].into_iter()).metadata.is_none());
    }
}
