//! The `http` source: GET a JSON metadata document from any URL (the shim, a Swift temp URL, a
//! plain web server). Conditional requests (`If-None-Match` / `If-Modified-Since`), long-poll
//! when the server advertises it (`X-Anneal-Long-Poll`), a bearer token from a file, a body size
//! limit; the client is the agent's one kind (`httpclient`: the configured CA files, no proxy, no
//! redirects). The token and the URL's query string never reach a log. A source may list several
//! URLs, replicas of one service: `rotation` picks the one each request goes to.

mod rotation;

use std::fmt;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use reqwest::header::{AUTHORIZATION, ETAG, HeaderMap, HeaderValue, IF_MODIFIED_SINCE, IF_NONE_MATCH, LAST_MODIFIED};
use reqwest::{Client, Response, StatusCode};
use tokio_util::sync::CancellationToken;

use super::body::{read_limited, request_error};
use super::{Fetched, MAX_DOCUMENT_BYTES, SourceError, Validators, parse_document};
use crate::config::HttpSourceConfig;
use crate::httpclient::{self, TrustRoots};
use crate::secret::{Secret, redact_url};
use rotation::{Answer, Rotation, Switch};

/// Response header by which a server (the shim) says it holds `?wait=N` requests, up to N seconds.
pub(crate) const LONG_POLL_HEADER: &str = "x-anneal-long-poll";

/// An http metadata source with its client and the validators of the last document.
pub(crate) struct HttpSource {
    name: String,
    /// The configured URLs, in fail-over order (never empty).
    urls: Vec<String>,
    /// Each URL without query string, userinfo or token-like path segments, for messages.
    redacted: Vec<String>,
    /// Which URL the next request goes to.
    rotation: Rotation,
    client: Client,
    token_file: Option<PathBuf>,
    /// The whole `Authorization` header value, marked sensitive.
    authorization: Option<Secret<HeaderValue>>,
    read_timeout: Duration,
    long_poll: Duration,
    /// The longest wait the server advertised on its last answer; `None` if it did not.
    server_long_poll: Option<u64>,
    validators: Validators,
    body_limit: usize,
}

impl fmt::Debug for HttpSource {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter
            .debug_struct("HttpSource")
            .field("name", &self.name)
            .field("urls", &self.redacted)
            .field("active", &self.rotation.active())
            .field("authorization", &self.authorization)
            .field("server_long_poll", &self.server_long_poll)
            .field("validators", &self.validators)
            .finish_non_exhaustive()
    }
}

impl HttpSource {
    /// Builds the client (trusting `roots` besides the system's) and reads the token file (an
    /// unreadable or empty one is an error).
    pub(crate) fn new(name: String, config: &HttpSourceConfig, roots: &TrustRoots) -> Result<HttpSource, SourceError> {
        let client = httpclient::build(config.connect_timeout, None, roots)
            .map_err(|source| SourceError::Client { source_name: name.clone(), source })?;
        let authorization = match &config.token_file {
            Some(path) => Some(read_token(&name, path)?),
            None => None,
        };
        Ok(HttpSource {
            redacted: config.urls.iter().map(|url| redact_url(url)).collect(),
            urls: config.urls.clone(),
            rotation: Rotation::new(config.urls.len()),
            name,
            client,
            token_file: config.token_file.clone(),
            authorization,
            read_timeout: config.read_timeout,
            long_poll: config.long_poll,
            server_long_poll: None,
            validators: Validators::default(),
            body_limit: MAX_DOCUMENT_BYTES,
        })
    }

    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    /// What the source reads, for `Source::identity`: `http URL`, the URLs of a list on one line
    /// each (a one-URL source keeps the identity, and so the cache, it had before lists existed).
    /// Query strings included: never log it.
    pub(super) fn described(&self) -> String {
        format!("http {}", self.urls.join("\n"))
    }

    pub(crate) fn validators(&self) -> &Validators {
        &self.validators
    }

    pub(crate) fn restore_validators(&mut self, validators: Validators) {
        self.validators = validators;
    }

    pub(crate) fn can_long_poll(&self) -> bool {
        self.long_poll_wait().is_some()
    }

    /// The `?wait=` to send: the smaller of ours and the server's maximum. Only with an ETag,
    /// since without one the server has nothing to wait on and would answer at once.
    fn long_poll_wait(&self) -> Option<u64> {
        let wait = self.long_poll.as_secs().min(self.server_long_poll?);
        (wait > 0 && self.validators.etag.is_some()).then_some(wait)
    }

    /// One conditional GET (a long-poll one when `wait` and the server supports it).
    pub(crate) async fn fetch(&mut self, wait: bool, shutdown: &CancellationToken) -> Result<Fetched, SourceError> {
        tokio::select! {
            result = self.fetch_now(wait) => result,
            () = shutdown.cancelled() => Ok(Fetched::Cancelled),
        }
    }

    /// The URLs `rotation` plans, the second only when the first failed as a replica (see
    /// `rotation`: a retry of URL 0 that fails falls back to the URL in use).
    async fn fetch_now(&mut self, wait: bool) -> Result<Fetched, SourceError> {
        let plan = self.rotation.plan(Instant::now());
        let result = self.fetch_from(plan.first, wait).await;
        match (plan.fallback, &result) {
            (Some(fallback), Err(error)) if is_replica_failure(error) => {
                tracing::debug!(
                    source = %self.name,
                    url = %self.redacted[plan.first],
                    error = %super::error_chain(error),
                    "the first metadata URL still fails; staying on the current one"
                );
                self.fetch_from(fallback, wait).await
            }
            _ => result,
        }
    }

    /// One conditional GET to URL `index`, whose outcome `rotation` records.
    async fn fetch_from(&mut self, index: usize, wait: bool) -> Result<Fetched, SourceError> {
        let started = Instant::now();
        let wait_secs = if wait { self.long_poll_wait() } else { None };
        let result = self.request(index, wait_secs).await;
        let answer = match &result {
            Err(error) if is_replica_failure(error) => Answer::Failed,
            _ => Answer::Answered,
        };
        let switch = self.rotation.record(index, answer, started);
        self.log_switch(switch, &result);
        result
    }

    async fn request(&mut self, index: usize, wait_secs: Option<u64>) -> Result<Fetched, SourceError> {
        let mut response = self.send(index, wait_secs).await?;
        // The token may have been rotated on disk; one retry with the new one.
        if response.status() == StatusCode::UNAUTHORIZED && self.reload_token() {
            response = self.send(index, wait_secs).await?;
        }
        self.handle(index, response).await
    }

    fn log_switch(&self, switch: Option<Switch>, result: &Result<Fetched, SourceError>) {
        match switch {
            Some(Switch::FailedOver { from, to }) => {
                let error = result.as_ref().err().map(|error| super::error_chain(error)).unwrap_or_default();
                tracing::warn!(
                    source = %self.name,
                    url = %self.redacted[from],
                    next_url = %self.redacted[to],
                    error,
                    "metadata URL failing; the next attempt uses the next one"
                );
            }
            Some(Switch::Returned { from }) => tracing::info!(
                source = %self.name,
                url = %self.redacted[0],
                from_url = %self.redacted[from],
                "the first metadata URL answers again; using it"
            ),
            None => {}
        }
    }

    async fn send(&self, index: usize, wait_secs: Option<u64>) -> Result<Response, SourceError> {
        let base = &self.urls[index];
        let (url, timeout) = match wait_secs {
            Some(secs) => (with_wait(base, secs), self.read_timeout + Duration::from_secs(secs)),
            None => (base.clone(), self.read_timeout),
        };
        let mut request = self.client.get(url).timeout(timeout);
        if let Some(authorization) = &self.authorization {
            request = request.header(AUTHORIZATION, authorization.expose().clone());
        }
        // Validators are echoed verbatim; one that cannot be a header value (a corrupt cache) is
        // just not sent.
        if let Some(etag) = self.validators.etag.as_deref().and_then(|etag| HeaderValue::from_str(etag).ok()) {
            request = request.header(IF_NONE_MATCH, etag);
        }
        let last_modified = self.validators.last_modified.as_deref();
        if let Some(since) = last_modified.and_then(|since| HeaderValue::from_str(since).ok()) {
            request = request.header(IF_MODIFIED_SINCE, since);
        }
        let redacted = &self.redacted[index];
        tracing::debug!(source = %self.name, url = %redacted, wait = ?wait_secs, "fetching metadata");
        request.send().await.map_err(|source| request_error(&self.name, redacted, source))
    }

    async fn handle(&mut self, index: usize, response: Response) -> Result<Fetched, SourceError> {
        let redacted = self.redacted[index].clone();
        let status = response.status();
        if status.is_success() || status == StatusCode::NOT_MODIFIED {
            self.server_long_poll =
                header_text(response.headers(), LONG_POLL_HEADER).and_then(|text| text.trim().parse::<u64>().ok());
        }
        match status.as_u16() {
            304 => Ok(Fetched::Unchanged),
            200..=299 => {
                let validators = Validators {
                    etag: header_text(response.headers(), ETAG.as_str()),
                    last_modified: header_text(response.headers(), LAST_MODIFIED.as_str()),
                };
                let body = read_limited(&self.name, &redacted, response, self.body_limit).await?;
                let document = parse_document(&self.name, &redacted, &body)?;
                self.validators = validators;
                tracing::debug!(source = %self.name, bytes = body.len(), "fetched metadata");
                Ok(Fetched::Document(document))
            }
            404 => Err(SourceError::NotFound { source_name: self.name.clone(), url: redacted }),
            300..=399 => {
                Err(SourceError::Redirect { source_name: self.name.clone(), url: redacted, status: status.as_u16() })
            }
            _ => Err(SourceError::Status { source_name: self.name.clone(), url: redacted, status: status.as_u16() }),
        }
    }

    /// Re-reads the token file; true when it now holds a different token.
    fn reload_token(&mut self) -> bool {
        let Some(path) = &self.token_file else {
            return false;
        };
        match read_token(&self.name, path) {
            Ok(fresh) => {
                let changed = self.authorization.as_ref().is_none_or(|old| old.expose() != fresh.expose());
                self.authorization = Some(fresh);
                changed
            }
            Err(error) => {
                tracing::warn!(source = %self.name, error = %super::error_chain(&error), "cannot re-read the token");
                false
            }
        }
    }

    #[cfg(test)]
    fn set_body_limit(&mut self, limit: usize) {
        self.body_limit = limit;
    }

    #[cfg(test)]
    fn make_primary_retry_due(&mut self) {
        self.rotation.make_primary_retry_due();
    }
}

/// Reads and trims the bearer token; returns the whole `Authorization` value, marked sensitive.
fn read_token(name: &str, path: &Path) -> Result<Secret<HeaderValue>, SourceError> {
    let bad = |reason: &str| SourceError::BadFile {
        source_name: name.to_string(),
        path: path.to_path_buf(),
        reason: reason.to_string(),
    };
    let text = fs::read_to_string(path).map_err(|source| SourceError::ReadFile {
        source_name: name.to_string(),
        path: path.to_path_buf(),
        source,
    })?;
    let token = text.trim();
    if token.is_empty() {
        return Err(bad("the token file is empty"));
    }
    let mut value = HeaderValue::from_str(&format!("Bearer {token}"))
        .map_err(|_| bad("the token has characters that cannot be sent in an HTTP header"))?;
    value.set_sensitive(true);
    Ok(Secret::new(value))
}

/// Whether `error` says the replica behind the URL is down or failing (no connection, a timeout,
/// a body cut short, a 5xx), so the source moves to its next URL. Other answers, 4xx included,
/// come from a replica that is up: they are the service's answer, which another replica of the
/// same service would give too.
fn is_replica_failure(error: &SourceError) -> bool {
    match error {
        SourceError::Request { .. } => true,
        SourceError::Status { status, .. } => *status >= 500,
        _ => false,
    }
}

/// `url` with `wait=<secs>` added to its query string (any fragment is dropped: it is never sent).
fn with_wait(url: &str, secs: u64) -> String {
    let base = url.split_once('#').map_or(url, |(base, _)| base);
    let separator = match base.split_once('?') {
        None => "?",
        Some((_, query)) if query.is_empty() || query.ends_with('&') => "",
        Some(_) => "&",
    };
    format!("{base}{separator}wait={secs}")
}

fn header_text(headers: &HeaderMap, name: &str) -> Option<String> {
    headers.get(name).and_then(|value| value.to_str().ok()).map(str::to_string)
}

#[cfg(test)]
mod failover_tests;
#[cfg(test)]
mod tests;
