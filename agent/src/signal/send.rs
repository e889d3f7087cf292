//! Sending one deployment signal: a finished deployment's result travels to the engine over the
//! transport its inputs select (see docs/metadata.md), and the answer is classified as delivered,
//! worth retrying, or permanently refused. This module does not retry, sleep or touch the journal
//! (the outbox does); it never follows redirects, never changes the signal URL, and never logs the
//! URL's query string, which carries the credentials.
//!
//! HEAT_SIGNAL and ZAQAR_SIGNAL (Keystone first, then Heat's or Zaqar's API) are in `openstack`.
//!
//! The HTTP helpers here (URL check, response and error classification) are shared with
//! `waitsignal`, so both commands agree on what is transient; the client is the agent's one kind
//! (`httpclient`: the configured CA files, no environment proxy, no redirects).

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use super::outcome::{DeliveryOutcome, signal_id};
use crate::httpclient::{self, TrustRoots};
use crate::secret::redact_url;
use anneal_protocol::signal::{MAX_SIGNAL_CHARS, signal_body};
use anneal_protocol::{HookResult, HttpVerb, SignalTransport};
use reqwest::{Method, StatusCode, Url, header};

/// The idempotency header: the receiver can drop a signal it has already applied.
pub(crate) const SIGNAL_ID_HEADER: &str = "X-Anneal-Signal-Id";
/// How long a signal may take to connect, and in total.
pub(crate) const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
pub(crate) const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);
/// At most this much of a refusal's response body is kept in the error text.
pub(crate) const BODY_EXCERPT_CHARS: usize = 200;
/// Bytes of a response body read for the excerpt; the rest is never downloaded.
const BODY_READ_LIMIT: usize = 4096;

/// What one attempt became, and whether its receiver failed as a host (no connection, a timeout,
/// a 5xx): the outbox then sends the next attempt to the same path on the next replica, when the
/// URL's origin is one of a source's (see `route`). Only HTTP signals set `host_failed`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Attempt {
    pub(crate) outcome: DeliveryOutcome,
    pub(crate) host_failed: bool,
}

impl From<DeliveryOutcome> for Attempt {
    fn from(outcome: DeliveryOutcome) -> Attempt {
        Attempt { outcome, host_failed: false }
    }
}

/// Why the signal client could not be built (reported as a transient delivery failure: the
/// next attempt builds it again).
#[derive(Debug, thiserror::Error)]
pub(crate) enum DeliverError {
    #[error("cannot build the HTTP client for signals")]
    Client {
        #[source]
        source: reqwest::Error,
    },
}

/// Sends deployment signals over HTTP with one shared connection pool (kept alive between
/// signals). The client is built on the first HTTP signal, not before: building it loads the
/// system's CA roots and pulls in the TLS stack, which an agent whose deployments signal nothing
/// (or nothing yet) should not pay for in memory or start-up time.
#[derive(Debug, Clone)]
pub(crate) struct SignalSender {
    connect: Duration,
    request: Duration,
    roots: TrustRoots,
    client: Arc<OnceLock<reqwest::Client>>,
    /// Keystone sessions of HEAT_SIGNAL / ZAQAR_SIGNAL credentials, shared by clones.
    sessions: Arc<openstack::KeystoneSessions>,
}

impl SignalSender {
    /// A sender with the standard timeouts (connect 10 s, whole request 60 s) that trusts `roots`
    /// (the configured CA files, as the sources do) besides the system's.
    pub(crate) fn new(roots: TrustRoots) -> SignalSender {
        SignalSender { roots, ..SignalSender::with_timeouts(CONNECT_TIMEOUT, REQUEST_TIMEOUT) }
    }

    /// A sender with other timeouts and no extra roots (tests use short ones).
    pub(crate) fn with_timeouts(connect: Duration, request: Duration) -> SignalSender {
        SignalSender {
            connect,
            request,
            roots: TrustRoots::default(),
            client: Arc::new(OnceLock::new()),
            sessions: Arc::default(),
        }
    }

    /// Builds the client now, on a blocking thread (reading the system's CA roots takes
    /// milliseconds), for a caller that knows signals will follow (`once`, while its hooks run).
    pub(crate) fn warm_up(&self) -> tokio::task::JoinHandle<()> {
        let sender = self.clone();
        tokio::task::spawn_blocking(move || {
            // A failure is not kept: the first send builds again and reports it.
            let _ = sender.client();
        })
    }

    /// The shared client, built now if this is the first signal. A failed build is not kept, so
    /// the next attempt tries again (the outbox retries it as a transient failure).
    fn client(&self) -> Result<&reqwest::Client, DeliverError> {
        if let Some(client) = self.client.get() {
            return Ok(client);
        }
        let built = httpclient::build(self.connect, Some(self.request), &self.roots)
            .map_err(|source| DeliverError::Client { source })?;
        Ok(self.client.get_or_init(|| built))
    }

    /// Sends deployment `id`'s `result` once over `transport`.
    pub(crate) async fn send(&self, id: &str, transport: SignalTransport, result: &HookResult) -> Attempt {
        match transport {
            SignalTransport::Http { url, verb } => self.send_http(id, &url, verb, result).await,
            SignalTransport::Zaqar { keystone, queue_id } => {
                self.send_zaqar(id, &keystone, &queue_id, result).await.into()
            }
            SignalTransport::HeatApi { keystone, stack_id, resource_name } => {
                self.send_heat(id, &keystone, &stack_id, &resource_name, result).await.into()
            }
            // NO_SIGNAL: the engine is not waiting, so there is nothing to deliver.
            SignalTransport::None => DeliveryOutcome::Delivered { status: 0 }.into(),
        }
    }

    async fn send_http(&self, id: &str, url: &str, verb: HttpVerb, result: &HookResult) -> Attempt {
        let parsed = match check_url(url) {
            Ok(parsed) => parsed,
            Err(error) => return DeliveryOutcome::Permanent { error }.into(),
        };
        let body = signal_body(result, MAX_SIGNAL_CHARS);
        let signal_id = signal_id(id, &body);
        let method = match verb {
            HttpVerb::Post => Method::POST,
            HttpVerb::Put => Method::PUT,
        };
        let client = match self.client() {
            Ok(client) => client,
            Err(error) => return DeliveryOutcome::Transient { error: crate::error_chain(&error) }.into(),
        };
        tracing::debug!(deployment_id = id, %method, url = %redact_url(url), %signal_id, "sending signal");
        crate::failpoint::hit_mid_signal(&parsed, method.as_str(), &signal_id, &body);
        let request = client
            .request(method, parsed)
            .header(header::CONTENT_TYPE, "application/json")
            .header(SIGNAL_ID_HEADER, signal_id)
            .body(body);
        let attempt = read_attempt(request.send().await).await;
        tracing::debug!(deployment_id = id, url = %redact_url(url), ?attempt, "signal attempt finished");
        attempt
    }
}

/// Parses a signal URL for sending. Heat signs the URL exactly as it publishes it, so a parse
/// that would change it is logged (it may then be refused); an unusable URL is a permanent error
/// whose text never contains the query string.
pub(crate) fn check_url(url: &str) -> Result<Url, String> {
    let parsed = Url::parse(url).map_err(|error| format!("invalid signal URL {}: {error}", redact_url(url)))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(format!("unsupported signal URL scheme `{}` in {}", parsed.scheme(), redact_url(url)));
    }
    if parsed.as_str() != url {
        tracing::warn!(
            url = %redact_url(url),
            sent = %redact_url(parsed.as_str()),
            "signal URL is not in normal form; it is sent normalised and its signature may not match"
        );
    }
    Ok(parsed)
}

/// Classifies what a sent request became (the response, or why there is none), and whether the
/// receiving host failed: a 5xx, or any failure on the way (connect, timeout, reset, a connection
/// closed without an answer).
pub(crate) async fn read_attempt(sent: Result<reqwest::Response, reqwest::Error>) -> Attempt {
    match sent {
        Ok(response) => {
            let host_failed = response.status().is_server_error();
            Attempt { outcome: read_outcome(response).await, host_failed }
        }
        Err(error) => {
            let outcome = classify_error(error);
            let host_failed = matches!(outcome, DeliveryOutcome::Transient { .. });
            Attempt { outcome, host_failed }
        }
    }
}

/// Classifies a response: 2xx delivered; 408, 429 and 5xx transient; everything else (3xx and
/// other 4xx) permanent. The error text has the status and a short excerpt of the body.
pub(crate) async fn read_outcome(response: reqwest::Response) -> DeliveryOutcome {
    let status = response.status();
    if status.is_success() {
        return DeliveryOutcome::Delivered { status: status.as_u16() };
    }
    let excerpt = body_excerpt(response).await;
    let error = if excerpt.is_empty() { format!("HTTP {status}") } else { format!("HTTP {status}: {excerpt}") };
    if is_transient_status(status) {
        DeliveryOutcome::Transient { error }
    } else {
        DeliveryOutcome::Permanent { error }
    }
}

/// Whether a non-2xx status is worth retrying.
pub(crate) fn is_transient_status(status: StatusCode) -> bool {
    status == StatusCode::REQUEST_TIMEOUT || status == StatusCode::TOO_MANY_REQUESTS || status.is_server_error()
}

/// Classifies a failed request: a request that could not even be built is permanent, anything
/// that went wrong on the way (connect, timeout, reset) is transient. The text has no URL.
pub(crate) fn classify_error(error: reqwest::Error) -> DeliveryOutcome {
    let permanent = error.is_builder();
    let error = crate::error_chain(&error.without_url());
    if permanent { DeliveryOutcome::Permanent { error } } else { DeliveryOutcome::Transient { error } }
}

/// The first [`BODY_EXCERPT_CHARS`] characters of the body, read no further than needed.
async fn body_excerpt(mut response: reqwest::Response) -> String {
    let mut bytes = Vec::new();
    while bytes.len() < BODY_READ_LIMIT {
        match response.chunk().await {
            Ok(Some(chunk)) => bytes.extend_from_slice(&chunk),
            Ok(None) | Err(_) => break,
        }
    }
    let text = String::from_utf8_lossy(&bytes);
    let excerpt: String = text.trim().chars().take(BODY_EXCERPT_CHARS).collect();
    excerpt.trim_end().to_string()
}

mod openstack;
#[cfg(test)]
mod tests;
