//! Where an HTTP signal goes (docs/configuration.md, "`kind = "http"`"). A deployment's signal URL
//! is absolute and names the replica that rendered the document; when that replica dies, the
//! signal must not wait on it forever. Two rules, both kept in the journal entry's `SignalRecord`
//! so a restart resumes them:
//!
//! - after an attempt whose receiver failed as a host (no connection, a timeout, a 5xx), when the
//!   URL's origin (scheme, host, port) is the origin of one of an `http` source's URLs, the next
//!   attempt goes to the same path and query (byte for byte: it carries the signal's token) on
//!   the next origin of that source's list, cycling, as the source itself fails over
//!   (`target_url`). A URL whose origin no source lists is retried as it is;
//! - when the current document lists the same deployment (same id and `deploy_action`) with
//!   another `deploy_signal_id`, that newer URL replaces the queued one (`document_url`), and
//!   any fail-over target is dropped: the newer URL names a replica that was alive to render it.
//!
//! `Replicas` and the functions on entries are pure; `SignalRouter` adds the current document's
//! URLs, which the daemon updates and the outbox reads.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use anneal_protocol::{Deployment, SignalTransport};
use reqwest::Url;

use crate::config::{Config, SourceConfig};
use crate::journal::Entry;

/// An origin as the signal URL is compared with it, and as it is written into a rewritten URL.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Origin {
    scheme: String,
    host: String,
    port: u16,
    /// `scheme://host[:port]`, the port only when it is not the scheme's default.
    written: String,
}

impl Origin {
    /// The origin of an http(s) URL; `None` for anything else.
    fn of(url: &Url) -> Option<Origin> {
        let scheme = url.scheme();
        let host = url.host_str().filter(|host| !host.is_empty())?;
        if !matches!(scheme, "http" | "https") {
            return None;
        }
        let port = url.port_or_known_default()?;
        let written = match url.port() {
            Some(port) => format!("{scheme}://{host}:{port}"),
            None => format!("{scheme}://{host}"),
        };
        Some(Origin { scheme: scheme.to_string(), host: host.to_string(), port, written })
    }

    fn same(&self, other: &Origin) -> bool {
        (&self.scheme, &self.host, self.port) == (&other.scheme, &other.host, other.port)
    }
}

/// The origins of each `http` source that lists more than one, in its order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Replicas {
    lists: Vec<Vec<Origin>>,
}

impl Replicas {
    /// The origins of the config's `http` sources.
    pub(crate) fn from_config(config: &Config) -> Replicas {
        Replicas::new(config.sources.iter().filter_map(|source| match source {
            SourceConfig::Http(http) => Some(http.urls.as_slice()),
            _ => None,
        }))
    }

    /// The origins of each list of URLs; a list with fewer than two distinct origins offers no
    /// other replica and is left out.
    pub(crate) fn new<'a>(lists: impl IntoIterator<Item = &'a [String]>) -> Replicas {
        let mut kept = Vec::new();
        for urls in lists {
            let mut origins: Vec<Origin> = Vec::new();
            for origin in urls.iter().filter_map(|url| Url::parse(url).ok()).filter_map(|url| Origin::of(&url)) {
                if !origins.iter().any(|known| known.same(&origin)) {
                    origins.push(origin);
                }
            }
            if origins.len() > 1 {
                kept.push(origins);
            }
        }
        Replicas { lists: kept }
    }

    /// The URL to try after `url`'s host failed: its path and query on the next origin of the
    /// first list holding its origin, cycling; `None` when no list holds it (or `url` carries
    /// userinfo, which another host must not be sent).
    pub(crate) fn next_url(&self, url: &str) -> Option<String> {
        let parsed = Url::parse(url).ok()?;
        if !parsed.username().is_empty() || parsed.password().is_some() {
            return None;
        }
        let origin = Origin::of(&parsed)?;
        self.lists.iter().find_map(|origins| {
            let index = origins.iter().position(|known| known.same(&origin))?;
            with_origin(url, &origins[(index + 1) % origins.len()])
        })
    }
}

/// `url` with its scheme and authority replaced by `origin`; the rest (path, query, fragment) is
/// kept as written. `None` when `url` is not written `scheme://authority...`, or when the result
/// would not keep the path and query `url` has (a form only the URL parser reads the same way).
fn with_origin(url: &str, origin: &Origin) -> Option<String> {
    let (_, rest) = url.split_once("://")?;
    let tail = &rest[rest.find(['/', '?', '#']).unwrap_or(rest.len())..];
    let rewritten = format!("{}{tail}", origin.written);
    let (before, after) = (Url::parse(url).ok()?, Url::parse(&rewritten).ok()?);
    let kept = before.path() == after.path() && before.query() == after.query();
    kept.then_some(rewritten)
}

/// The signal URL a deployment gives, with its action, as the current document lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Listed {
    action: Option<String>,
    url: String,
}

/// Replicas and the current document's signal URLs; shared by the daemon and the outbox.
#[derive(Debug, Default)]
pub(crate) struct SignalRouter {
    replicas: Replicas,
    current: Mutex<HashMap<String, Listed>>,
}

impl SignalRouter {
    pub(crate) fn new(replicas: Replicas) -> SignalRouter {
        SignalRouter { replicas, current: Mutex::default() }
    }

    /// Notes the signal URL of each deployment of the current document; true when one differs
    /// from before (the outbox should then look at its queue again).
    pub(crate) fn observe(&self, deployments: &[Deployment]) -> bool {
        let listed: HashMap<String, Listed> = deployments
            .iter()
            .filter_map(|deployment| match deployment.signal_transport() {
                SignalTransport::Http { url, .. } => {
                    let action = deployment.input_str("deploy_action").map(str::to_string);
                    Some((deployment.id.clone(), Listed { action, url }))
                }
                _ => None,
            })
            .collect();
        // Never held across an await; a panic elsewhere cannot leave the map half-written.
        let mut current = self.current.lock().unwrap_or_else(PoisonError::into_inner);
        let changed = listed.iter().any(|(id, now)| current.get(id) != Some(now));
        *current = listed;
        changed
    }

    /// Before an attempt: takes the current document's URL for `entry`'s deployment when it is a
    /// newer one (see the module comment); true when the entry changed.
    pub(crate) fn adopt_current(&self, entry: &mut Entry) -> bool {
        let listed = self.current.lock().unwrap_or_else(PoisonError::into_inner).get(&entry.id).cloned();
        listed.is_some_and(|listed| adopt(entry, listed.action.as_deref(), &listed.url))
    }

    /// After an attempt whose receiver failed as a host: points `entry` at the next replica;
    /// returns the new URL, `None` when its origin is no source's (it is retried as it is).
    pub(crate) fn fail_over(&self, entry: &mut Entry) -> Option<String> {
        let next = self.replicas.next_url(&current_url(entry)?)?;
        entry.signal.as_mut()?.target_url = Some(next.clone());
        Some(next)
    }
}

/// `entry`'s signal transport, its URL replaced by where the next attempt goes.
pub(crate) fn transport_of(entry: &Entry) -> SignalTransport {
    match (entry.deployment.signal_transport(), current_url(entry)) {
        (SignalTransport::Http { verb, .. }, Some(url)) => SignalTransport::Http { url, verb },
        (transport, _) => transport,
    }
}

/// Where `entry`'s next HTTP attempt goes: the fail-over target, else the newer document's URL,
/// else the deployment's own; `None` when its transport is not HTTP.
pub(crate) fn current_url(entry: &Entry) -> Option<String> {
    let SignalTransport::Http { url: own, .. } = entry.deployment.signal_transport() else { return None };
    let signal = entry.signal.as_ref();
    let chosen = signal.and_then(|signal| signal.target_url.clone().or_else(|| signal.document_url.clone()));
    Some(chosen.unwrap_or(own))
}

/// Takes `url` as `entry`'s signal URL when the deployment (same `action`) was listed with
/// another; true when the entry changed.
pub(crate) fn adopt(entry: &mut Entry, action: Option<&str>, url: &str) -> bool {
    let SignalTransport::Http { url: own, .. } = entry.deployment.signal_transport() else { return false };
    if entry.deployment.input_str("deploy_action") != action {
        return false;
    }
    let Some(signal) = entry.signal.as_mut() else { return false };
    if signal.document_url.as_deref().unwrap_or(&own) == url {
        return false;
    }
    signal.document_url = (url != own).then(|| url.to_string());
    signal.target_url = None;
    true
}

#[cfg(test)]
mod tests;
