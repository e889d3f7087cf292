//! The `http` source: GET a JSON metadata document from any URL (the shim, a Swift temp URL, a
//! plain web server). Conditional requests (`If-None-Match` / `If-Modified-Since`), long-poll
//! when the server advertises it (`X-Anneal-Long-Poll`), a bearer token from a file, a body size
//! limit; the client is the agent's one kind (`httpclient`: the configured CA files, no proxy, no
//! redirects). The token and the URL's query string never reach a log.

use std::fmt;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

use reqwest::header::{AUTHORIZATION, ETAG, HeaderMap, HeaderValue, IF_MODIFIED_SINCE, IF_NONE_MATCH, LAST_MODIFIED};
use reqwest::{Client, Response, StatusCode};
use tokio_util::sync::CancellationToken;

use super::body::{read_limited, request_error};
use super::{Fetched, MAX_DOCUMENT_BYTES, SourceError, Validators, parse_document};
use crate::config::HttpSourceConfig;
use crate::httpclient::{self, TrustRoots};
use crate::secret::{Secret, redact_url};

/// Response header by which a server (the shim) says it holds `?wait=N` requests, up to N seconds.
pub(crate) const LONG_POLL_HEADER: &str = "x-anneal-long-poll";

/// An http metadata source with its client and the validators of the last document.
pub(crate) struct HttpSource {
    name: String,
    url: String,
    /// The URL without query string or userinfo, for messages.
    redacted_url: String,
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
            .field("url", &self.redacted_url)
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
            redacted_url: redact_url(&config.url),
            url: config.url.clone(),
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

    /// The configured URL, query string included: never log it (use `redact_url`).
    pub(super) fn url(&self) -> &str {
        &self.url
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

    async fn fetch_now(&mut self, wait: bool) -> Result<Fetched, SourceError> {
        let wait_secs = if wait { self.long_poll_wait() } else { None };
        let mut response = self.send(wait_secs).await?;
        // The token may have been rotated on disk; one retry with the new one.
        if response.status() == StatusCode::UNAUTHORIZED && self.reload_token() {
            response = self.send(wait_secs).await?;
        }
        self.handle(response).await
    }

    async fn send(&self, wait_secs: Option<u64>) -> Result<Response, SourceError> {
        let (url, timeout) = match wait_secs {
            Some(secs) => (with_wait(&self.url, secs), self.read_timeout + Duration::from_secs(secs)),
            None => (self.url.clone(), self.read_timeout),
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
        tracing::debug!(source = %self.name, url = %self.redacted_url, wait = ?wait_secs, "fetching metadata");
        request.send().await.map_err(|source| request_error(&self.name, &self.redacted_url, source))
    }

    async fn handle(&mut self, response: Response) -> Result<Fetched, SourceError> {
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
                let body = read_limited(&self.name, &self.redacted_url, response, self.body_limit).await?;
                let document = parse_document(&self.name, &self.redacted_url, &body)?;
                self.validators = validators;
                tracing::debug!(source = %self.name, bytes = body.len(), "fetched metadata");
                Ok(Fetched::Document(document))
            }
            404 => Err(SourceError::NotFound { source_name: self.name.clone(), url: self.redacted_url.clone() }),
            300..=399 => Err(SourceError::Redirect {
                source_name: self.name.clone(),
                url: self.redacted_url.clone(),
                status: status.as_u16(),
            }),
            _ => Err(SourceError::Status {
                source_name: self.name.clone(),
                url: self.redacted_url.clone(),
                status: status.as_u16(),
            }),
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
mod tests;
