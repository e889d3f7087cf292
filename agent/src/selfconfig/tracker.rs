//! Which `os-collect-config` keys the daemon acts on, and how long their sources stay.
//!
//! A key counts only from a document that is the server's own Heat metadata: a source of a kind
//! that reads it (`heat-local`, `config-drive`, `ec2`, `heat`, `cfn`, `zaqar`), an `http` or
//! `local` source with `self_configure = true`, and the self-configured sources themselves. Any
//! other source's key is ignored with a warning naming the source (never the key's values).
//!
//! Only a key a source newly carries is acted on, so a stale key (the boot-time copy in
//! cfn-init-data) never switches back from a newer one a self-configured source delivered; of
//! several new keys, the last source's wins, as in the merge of the documents. The sources a key
//! gives are kept with their supplier: the config's source that carried it (a self-configured
//! source's newer key keeps that root, so a chain of keys ends with it), or `bootstrap`. While the
//! supplier has a document without the key, fresh or cached, the sources are dropped and the file
//! removed: a redirect does not outlive the repair of the source that made it, across restarts
//! too. A supplier that is down keeps its cached document, and the sources with it. A key that
//! points a source at a host no polled source reads from is logged as a warning (kind and host,
//! never a path, query or credential).

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::{CarriedKey, Collector, Persisted, SelfConfig, Supplier, derive};
use crate::config::{Config, SourceConfig};
use crate::error_chain;

/// Who a source of the view is, as far as its key goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Standing {
    /// One of the config's sources; `may_configure` is its `SourceConfig::self_configure`.
    Configured { may_configure: bool },
    /// A self-configured source: its document is the server's Heat metadata too.
    SelfConfigured,
    /// No source is called so: its key never counts.
    Unknown,
}

const MAY_CONFIGURE: Standing = Standing::Configured { may_configure: true };

/// What the config says about keys: whose may configure, and which hosts its sources read.
struct KeyPolicy {
    /// Each config source's name (`source[0] heat-local`) and its `self_configure`.
    configured: HashMap<String, bool>,
    /// `host:port` of every config source that reads a URL.
    hosts: BTreeSet<String>,
}

impl KeyPolicy {
    fn of(config: &Config) -> KeyPolicy {
        let sources = config.sources.iter().enumerate();
        let configured = sources.map(|(index, source)| (source.name_at(index), source.self_configure())).collect();
        let hosts = config.sources.iter().flat_map(hosts_of).collect();
        KeyPolicy { configured, hosts }
    }

    fn standing(&self, source: &str) -> Standing {
        if let Some(&may_configure) = self.configured.get(source) {
            return Standing::Configured { may_configure };
        }
        if Collector::DEFAULT_ORDER.iter().any(|collector| collector.source_name() == source) {
            return Standing::SelfConfigured;
        }
        Standing::Unknown
    }
}

/// What the daemon knows of self-configuration: the sources in use with their supplier, and the
/// key each source's document carried when last looked at. No `Debug`: the keys hold credentials.
pub(crate) struct Tracker {
    state_dir: PathBuf,
    policy: KeyPolicy,
    current: Option<Persisted>,
    /// Per source looked at whose key counts: the key its document carried (`None`: none).
    seen: HashMap<String, Option<Value>>,
    /// Sources whose key is ignored, with that key: each is warned about once.
    ignored: HashMap<String, Value>,
    /// Sources were persisted before the start (an earlier run, `bootstrap`): a source's first
    /// key is taken as one already applied, so a stale cfn-init-data cannot undo a `bootstrap`.
    persisted_at_start: bool,
}

impl Tracker {
    /// The persisted sources of `state_dir` for the sources of `config`. A file that cannot be
    /// used is logged and ignored (the config's own sources still run, and the next key rewrites
    /// it); one whose supplier may not configure the agent (any more) is dropped.
    pub(crate) fn load(state_dir: &Path, config: &Config) -> Tracker {
        let current = super::load(state_dir).unwrap_or_else(|error| {
            tracing::warn!(error = %error_chain(&error), "ignoring the self-configured sources");
            None
        });
        let policy = KeyPolicy::of(config);
        let mut tracker = Tracker {
            state_dir: state_dir.to_path_buf(),
            policy,
            current,
            seen: HashMap::new(),
            ignored: HashMap::new(),
            persisted_at_start: false,
        };
        if let Some(supplier) = tracker.supplier().map(str::to_string) {
            if tracker.policy.standing(&supplier) != MAY_CONFIGURE {
                tracker.drop_sources(&supplier, "the source the self-configured sources came from may not configure the agent (not in the config, or without self_configure): dropping them");
            }
        }
        tracker.persisted_at_start = tracker.current.is_some();
        tracker
    }

    pub(crate) fn current(&self) -> Option<&SelfConfig> {
        self.current.as_ref().map(|persisted| &persisted.config)
    }

    /// At start, with the cached documents (before any fetch): the keys they carry are taken as
    /// applied, unless the supplier's document has none (a repair the last run did not act on),
    /// which drops the sources. Returns whether the sources changed.
    pub(crate) fn start(&mut self, cached: &[CarriedKey]) -> bool {
        if self.current.is_none() {
            return false;
        }
        if self.drop_if_repaired(cached) {
            return true;
        }
        self.record(cached);
        false
    }

    /// Looks at the keys of a new view of the documents. Returns whether the sources changed
    /// (persisted already): the caller then switches its polling set. No new key, a key giving
    /// the sources in use, or one that does not validate (logged) changes nothing; the supplier
    /// dropping its key drops the sources (and the config's own keys are then looked at as on a
    /// first start).
    pub(crate) fn observe(&mut self, view: &[CarriedKey]) -> bool {
        self.warn_ignored(view);
        let dropped = match self.resolve_unrecorded(view) {
            Some(refused) => {
                self.drop_sources(&refused, "the self-configured sources came from a source that may not configure the agent (without self_configure): dropping them");
                true
            }
            None => self.drop_if_repaired(view),
        };
        self.follow(view) || dropped
    }

    /// The config's source the sources in use came from, if one did.
    fn supplier(&self) -> Option<&str> {
        match &self.current {
            Some(Persisted { supplier: Supplier::Source(name), .. }) => Some(name),
            _ => None,
        }
    }

    /// Whether `source`'s key counts now.
    fn counts(&self, source: &str) -> bool {
        match self.policy.standing(source) {
            Standing::Configured { may_configure } => may_configure,
            // Only while they are polled: after a drop their last documents are stale.
            Standing::SelfConfigured => self.current.is_some(),
            Standing::Unknown => false,
        }
    }

    /// Whether `key` in `source`'s document has not been acted on yet.
    fn is_new(&self, source: &str, key: &Value) -> bool {
        match self.seen.get(source) {
            Some(Some(seen)) => seen != key,
            Some(None) => true,
            None => !self.persisted_at_start,
        }
    }

    /// Records the keys of `view` whose sources count as seen.
    fn record(&mut self, view: &[CarriedKey]) {
        let counted: Vec<(String, Option<Value>)> = view
            .iter()
            .filter(|carried| self.counts(&carried.source))
            .map(|carried| (carried.source.clone(), carried.key.clone()))
            .collect();
        self.seen.extend(counted);
    }

    /// The newest key that counts, acted on (see `observe`).
    fn follow(&mut self, view: &[CarriedKey]) -> bool {
        let newest = view.iter().rev().filter(|carried| self.counts(&carried.source)).find_map(|carried| {
            let key = carried.key.as_ref()?;
            self.is_new(&carried.source, key).then(|| (carried.source.clone(), key.clone()))
        });
        self.record(view);
        let Some((source, key)) = newest else { return false };
        let derived = match derive(&key) {
            Ok(derived) => derived,
            Err(error) => {
                tracing::warn!(source = %source, error = %error_chain(&error), "ignoring the os-collect-config key; keeping the sources in use");
                return false;
            }
        };
        if self.current().is_some_and(|current| current.text == derived.text) {
            return false;
        }
        let persisted = Persisted { config: derived, supplier: self.supplier_for(&source) };
        if let Err(error) = super::store(&self.state_dir, &persisted) {
            tracing::error!(error = %error_chain(&error), "cannot persist the self-configured sources; keeping the sources in use");
            // Acted on again with the next view.
            self.seen.clear();
            self.persisted_at_start = false;
            return false;
        }
        self.warn_new_hosts(&source, &persisted.config);
        tracing::info!(source = %source, sources = ?persisted.config.source_names(), "the os-collect-config key changed: switching to its sources");
        self.current = Some(persisted);
        true
    }

    /// A config source supplies itself; a self-configured source's key keeps the current root.
    fn supplier_for(&self, source: &str) -> Supplier {
        match self.policy.standing(source) {
            Standing::SelfConfigured => {
                self.current.as_ref().map_or(Supplier::Unrecorded, |persisted| persisted.supplier.clone())
            }
            Standing::Configured { .. } | Standing::Unknown => Supplier::Source(source.to_string()),
        }
    }

    /// Drops the sources when their supplier has a document without the key.
    fn drop_if_repaired(&mut self, view: &[CarriedKey]) -> bool {
        let Some(supplier) = self.supplier().map(str::to_string) else { return false };
        if !view.iter().any(|carried| carried.source == supplier && carried.key.is_none()) {
            return false;
        }
        self.drop_sources(&supplier, "the source the self-configured sources came from no longer carries the os-collect-config key: dropping them");
        true
    }

    /// Forgets the sources in use and removes the file. What the config's own sources carry is
    /// then looked at as on a first start.
    fn drop_sources(&mut self, source: &str, why: &str) {
        if let Err(error) = super::remove(&self.state_dir) {
            tracing::error!(error = %error_chain(&error), "cannot remove the self-configured sources' file; the next start drops them again");
        }
        tracing::warn!(source = %source, "{why}");
        self.current = None;
        self.seen.clear();
        self.persisted_at_start = false;
    }

    /// Warns once per key about each source whose key does not count.
    fn warn_ignored(&mut self, view: &[CarriedKey]) {
        for carried in view {
            let refused = matches!(
                self.policy.standing(&carried.source),
                Standing::Configured { may_configure: false } | Standing::Unknown
            );
            match &carried.key {
                Some(key) if refused => {
                    if self.ignored.get(&carried.source) != Some(key) {
                        tracing::warn!(source = %carried.source, "ignoring the os-collect-config key of a source that may not configure the agent (an http or local source needs self_configure = true)");
                        self.ignored.insert(carried.source.clone(), key.clone());
                    }
                }
                _ => {
                    self.ignored.remove(&carried.source);
                }
            }
        }
    }

    /// A file written before suppliers were recorded: once every config source has a document,
    /// the supplier is the last config source whose key gives the sources in use, else
    /// `bootstrap`; when a source that may not configure the agent carries that key, its name is
    /// returned and the sources are to be dropped.
    fn resolve_unrecorded(&mut self, view: &[CarriedKey]) -> Option<String> {
        let text = match &self.current {
            Some(Persisted { supplier: Supplier::Unrecorded, config }) => config.text.clone(),
            _ => return None,
        };
        if !self.policy.configured.keys().all(|name| view.iter().any(|carried| &carried.source == name)) {
            return None;
        }
        let gives_these = |key: &Value| derive(key).is_ok_and(|derived| derived.text == text);
        let carriers: Vec<&str> = view
            .iter()
            .filter(|carried| carried.key.as_ref().is_some_and(gives_these))
            .map(|carried| carried.source.as_str())
            .collect();
        let standing = |source: &&str| self.policy.standing(source);
        if let Some(refused) =
            carriers.iter().find(|source| !matches!(standing(source), MAY_CONFIGURE | Standing::SelfConfigured))
        {
            return Some(refused.to_string());
        }
        let root = carriers.iter().rev().find(|source| standing(source) == MAY_CONFIGURE);
        let supplier = root.map_or(Supplier::Bootstrap, |source| Supplier::Source(source.to_string()));
        tracing::info!(supplier = ?supplier, "recorded where the self-configured sources came from");
        let persisted = self.current.as_mut()?;
        persisted.supplier = supplier;
        if let Err(error) = super::store(&self.state_dir, persisted) {
            tracing::error!(error = %error_chain(&error), "cannot record where the self-configured sources came from");
        }
        None
    }

    /// Warns about each host `derived` points a source at that no polled source reads from.
    fn warn_new_hosts(&self, supplier: &str, derived: &SelfConfig) {
        for NewHost { source, kind, host } in self.new_hosts(derived) {
            tracing::warn!(source = %source, kind, host = %host, key_from = %supplier, "the os-collect-config key points a source at a new host");
        }
    }

    /// The hosts of `derived`'s sources that neither the config's sources nor the sources in use
    /// read from, each once per source.
    fn new_hosts(&self, derived: &SelfConfig) -> Vec<NewHost> {
        let mut polled = self.policy.hosts.clone();
        if let Some(current) = self.current() {
            polled.extend(current.sources.iter().flat_map(|(_, source)| hosts_of(source)));
        }
        let mut found = Vec::new();
        for (collector, source) in &derived.sources {
            let hosts: BTreeSet<String> = hosts_of(source).into_iter().collect();
            found.extend(hosts.difference(&polled).map(|host| NewHost {
                source: collector.source_name(),
                kind: source.kind(),
                host: host.clone(),
            }));
        }
        found
    }
}

/// A self-configured source pointed at a host nothing polled before.
#[derive(Debug, PartialEq, Eq)]
struct NewHost {
    source: String,
    kind: &'static str,
    /// `host:port`.
    host: String,
}

/// `host:port` of every URL `source` reads (for `heat` and `zaqar`, Keystone's: the service's
/// endpoint comes from its catalog).
fn hosts_of(source: &SourceConfig) -> Vec<String> {
    let urls: Vec<&str> = match source {
        SourceConfig::Http(http) => http.urls.iter().map(String::as_str).collect(),
        SourceConfig::Cfn(cfn) => vec![cfn.metadata_url.as_str()],
        SourceConfig::Ec2(ec2) => vec![ec2.metadata_url.as_str()],
        SourceConfig::Heat(heat) => vec![heat.keystone.auth_url.as_str()],
        SourceConfig::Zaqar(zaqar) => vec![zaqar.keystone.auth_url.as_str()],
        SourceConfig::Local(_) | SourceConfig::HeatLocal(_) | SourceConfig::ConfigDrive(_) => Vec::new(),
    };
    urls.into_iter().filter_map(host_of).collect()
}

/// `host:port` of `url` (the scheme's port when it names none); nothing of its user, path or
/// query.
fn host_of(url: &str) -> Option<String> {
    let parsed = reqwest::Url::parse(url).ok()?;
    Some(format!("{}:{}", parsed.host_str()?, parsed.port_or_known_default()?))
}

#[cfg(test)]
mod tests;
