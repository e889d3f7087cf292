//! The `ec2` source: the EC2-style metadata service tree (Nova's `/latest/meta-data/`) walked
//! into one JSON object, as os-collect-config's ec2 collector builds it: a URL ending in `/` is a
//! directory whose answer lists one entry per line, an entry `name=value` stands for the
//! directory `name/` (how `public-keys/` lists `0=my-key`), an entry ending in `/` is walked, any
//! other is a leaf whose text is the value. The server is not trusted to be small: the depth, the
//! number of requests and the total bytes of one walk are bounded (`Limits`), and entry names
//! that would change the URL's meaning are refused. See docs/configuration.md#kind--ec2.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use reqwest::Client;
use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;

use super::body::{read_limited, request_error};
use super::{Fetched, MAX_DOCUMENT_BYTES, SourceError};
use crate::config::Ec2SourceConfig;
use crate::httpclient::{self, TrustRoots};
use crate::secret::redact_url;

/// Bounds on one walk of the tree. Nova's tree is 3 levels deep, a few dozen entries and a few
/// kilobytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Limits {
    /// Directories below the root.
    pub(crate) depth: usize,
    /// GET requests, the root's included.
    pub(crate) requests: usize,
    /// Bytes of all answers together.
    pub(crate) bytes: usize,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits { depth: 8, requests: 1000, bytes: MAX_DOCUMENT_BYTES }
    }
}

#[derive(Debug)]
pub(crate) struct Ec2Source {
    name: String,
    /// `metadata_url` as configured.
    url: String,
    /// The root directory's URL: `metadata_url` with exactly one trailing `/`.
    root: String,
    client: Client,
    read_timeout: Duration,
    limits: Limits,
}

/// What one walk has used so far.
#[derive(Debug, Default)]
struct Used {
    requests: usize,
    bytes: usize,
}

type NodeFuture<'a> = Pin<Box<dyn Future<Output = Result<Value, SourceError>> + Send + 'a>>;

impl Ec2Source {
    pub(crate) fn new(name: String, config: &Ec2SourceConfig, roots: &TrustRoots) -> Result<Ec2Source, SourceError> {
        let client = httpclient::build(config.client.connect_timeout, None, roots)
            .map_err(|source| SourceError::Client { source_name: name.clone(), source })?;
        Ok(Ec2Source {
            name,
            url: config.metadata_url.clone(),
            root: format!("{}/", config.metadata_url.trim_end_matches('/')),
            client,
            read_timeout: config.client.read_timeout,
            limits: Limits::default(),
        })
    }

    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    pub(super) fn url(&self) -> &str {
        &self.url
    }

    /// Walks the whole tree; any failing request fails the fetch (os-collect-config's too).
    pub(crate) async fn fetch(&self, shutdown: &CancellationToken) -> Result<Fetched, SourceError> {
        let mut used = Used::default();
        tokio::select! {
            result = self.node(self.root.clone(), 0, &mut used) => result.map(Fetched::Document),
            () = shutdown.cancelled() => Ok(Fetched::Cancelled),
        }
    }

    /// The value at `url`: an object for a directory (`depth` levels below the root), the text
    /// of a leaf otherwise.
    fn node<'a>(&'a self, url: String, depth: usize, used: &'a mut Used) -> NodeFuture<'a> {
        Box::pin(async move {
            let text = self.get_text(&url, used).await?;
            if !url.ends_with('/') {
                return Ok(Value::String(text));
            }
            let mut directory = Map::new();
            // Skipping blank lines (a trailing newline) where os-collect-config would fail.
            for entry in text.split('\n').filter(|line| !line.is_empty()) {
                let (key, child) = self.entry(&url, entry)?;
                let child_depth = if child.ends_with('/') { depth + 1 } else { depth };
                if child_depth > self.limits.depth {
                    return Err(self.over_limit(format!("the tree is deeper than {} levels", self.limits.depth)));
                }
                let value = self.node(format!("{url}{child}"), child_depth, used).await?;
                directory.insert(key, value);
            }
            Ok(Value::Object(directory))
        })
    }

    /// The key and the relative URL of one line of a directory listing.
    fn entry(&self, url: &str, line: &str) -> Result<(String, String), SourceError> {
        let child = match line.split_once('=') {
            Some((name, _)) => format!("{name}/"),
            None => line.to_string(),
        };
        let key = child.strip_suffix('/').unwrap_or(&child).to_string();
        let unsafe_name = key.is_empty()
            || key == "."
            || key == ".."
            || key.chars().any(|c| c.is_control() || matches!(c, '/' | '?' | '#' | '\\' | '%'));
        if unsafe_name {
            return Err(SourceError::BadResponse {
                source_name: self.name.clone(),
                what: redact_url(url),
                reason: format!("the listing has an entry that is not a plain name: {line:?}"),
            });
        }
        Ok((key, child))
    }

    /// One GET, counted against the limits; the answer must be UTF-8 text.
    async fn get_text(&self, url: &str, used: &mut Used) -> Result<String, SourceError> {
        used.requests += 1;
        if used.requests > self.limits.requests {
            return Err(self.over_limit(format!("the tree needs more than {} requests", self.limits.requests)));
        }
        let redacted = redact_url(url);
        tracing::debug!(source = %self.name, url = %redacted, "fetching a metadata entry");
        let response = self
            .client
            .get(url)
            .timeout(self.read_timeout)
            .send()
            .await
            .map_err(|source| request_error(&self.name, &redacted, source))?;
        let status = response.status().as_u16();
        let url_error = |redacted: String| match status {
            404 => SourceError::NotFound { source_name: self.name.clone(), url: redacted },
            300..=399 => SourceError::Redirect { source_name: self.name.clone(), url: redacted, status },
            _ => SourceError::Status { source_name: self.name.clone(), url: redacted, status },
        };
        if !(200..300).contains(&status) {
            return Err(url_error(redacted));
        }
        let remaining = self.limits.bytes - used.bytes;
        let body = match read_limited(&self.name, &redacted, response, remaining).await {
            Err(SourceError::TooLarge { .. }) => {
                return Err(SourceError::TooLarge {
                    source_name: self.name.clone(),
                    what: format!("the metadata tree under {}", redact_url(&self.root)),
                    limit: self.limits.bytes,
                });
            }
            other => other?,
        };
        used.bytes += body.len();
        String::from_utf8(body).map_err(|_| SourceError::BadResponse {
            source_name: self.name.clone(),
            what: redacted,
            reason: "the answer is not UTF-8 text".to_string(),
        })
    }

    fn over_limit(&self, reason: String) -> SourceError {
        SourceError::BadResponse { source_name: self.name.clone(), what: redact_url(&self.root), reason }
    }

    #[cfg(test)]
    fn set_limits(&mut self, limits: Limits) {
        self.limits = limits;
    }
}

#[cfg(test)]
mod tests;
