//! The `zaqar` source (ZAQAR_MESSAGE): Heat posts the server's whole metadata as a message to
//! the queue `queue_id` whenever it changes; the agent claims the queued messages over Zaqar's v2
//! HTTP API (`POST /v2/queues/{queue}/claims`, oldest first, 204 when none) and the newest
//! message's body is the document. An empty queue means nothing changed: the last document stays.
//!
//! A fetch only claims. The claimed messages are deleted
//! (`DELETE /v2/queues/{queue}/messages/{id}?claim_id=...`) by `settle`, which the collector calls
//! once the document is in the source cache (`poll`, `collector`): a crash between the two loses
//! nothing, because the claimed messages come back when their claim lapses and are read again.
//! The claim's ttl (300 s, with 60 s of grace) is the trade-off: long enough to cover a fetch of
//! several slow claim rounds and the cache write before the delete, short enough that the
//! messages of an agent that crashed in between come back within five minutes. A delete that
//! fails is not an error for the same reason. A message that comes back after a newer one was
//! read (its `age` says it was posted earlier) is deleted without being used, so a lapsed claim
//! never rolls the document back within one process.
//!
//! os-collect-config's zaqar collector pops one message per poll (zaqarclient's `queue.pop()`,
//! which deletes as it claims); claiming every queued message and keeping the newest reaches the
//! same last document without replaying the older ones. The endpoint is the catalog's `messaging`
//! service; requests carry `X-Auth-Token`, `X-Project-ID` and a `Client-ID` (a UUID derived from
//! the credentials, stable across restarts).

use std::time::{Duration, Instant};

use reqwest::header::{ACCEPT, CONTENT_TYPE, LOCATION};
use reqwest::{Client, Method, Response, StatusCode, Url};
use serde_json::Value;
use sha2::{Digest, Sha256};
use tokio_util::sync::CancellationToken;

use super::body::read_limited;
use super::{Fetched, MAX_DOCUMENT_BYTES, SourceError, error_chain, require_object};
use crate::config::ZaqarSourceConfig;
use crate::httpclient::{self, TrustRoots};
use crate::keystone::{AUTH_TOKEN_HEADER, Credentials, KeystoneSession};
use crate::secret::redact_url;

/// The catalog service type of Zaqar's HTTP API.
pub(crate) const MESSAGING: &str = "messaging";
pub(crate) const CLIENT_ID_HEADER: &str = "client-id";
pub(crate) const PROJECT_ID_HEADER: &str = "x-project-id";
/// Zaqar's largest claim (its default `max_messages_per_claim_or_pop`).
const CLAIM_LIMIT: usize = 20;
/// Claims per fetch: a queue holding more than this many batches is read over several polls.
const CLAIM_ROUNDS: usize = 10;
/// A claim's lifetime and grace: it must outlast the fetch and the cache write before `settle`
/// deletes the messages; a crashed agent's claimed messages come back after it (see above).
const CLAIM_BODY: &str = r#"{"ttl": 300, "grace": 60}"#;
/// Zaqar gives a message's age in whole seconds, so posting times estimated from two answers
/// differ by up to about a second: a message is older than the document only beyond this.
const SAME_POST_TOLERANCE: Duration = Duration::from_secs(2);

/// A zaqar source: its Keystone session, queue and client id.
#[derive(Debug)]
pub(crate) struct ZaqarSource {
    name: String,
    keystone: KeystoneSession,
    region: Option<String>,
    queue_id: String,
    client_id: String,
    client: Client,
    read_timeout: Duration,
    body_limit: usize,
    /// The messages the last fetch claimed, deleted by `settle`; forgotten by the next fetch
    /// when `settle` was not called (the cache write failed: their claim lapses instead).
    unsettled: Vec<Receipt>,
    /// When the message of the current document was posted (on this process's monotonic clock),
    /// to tell a message that comes back after a lapsed claim from a newer one.
    document_posted: Option<Instant>,
}

/// What deletes one claimed message.
#[derive(Debug)]
struct Receipt {
    id: String,
    claim_id: String,
}

/// One claimed message.
#[derive(Debug)]
struct Claimed {
    receipt: Receipt,
    body: Value,
    /// Seconds since it was posted, when Zaqar said.
    age: Option<u64>,
}

impl Claimed {
    fn posted(&self) -> Option<Instant> {
        Instant::now().checked_sub(Duration::from_secs(self.age?))
    }
}

impl ZaqarSource {
    /// Builds the client (trusting `roots` besides the system's); nothing is sent yet.
    pub(crate) fn new(
        name: String,
        config: &ZaqarSourceConfig,
        roots: &TrustRoots,
    ) -> Result<ZaqarSource, SourceError> {
        let client = httpclient::build(config.client.connect_timeout, None, roots)
            .map_err(|source| SourceError::Client { source_name: name.clone(), source })?;
        let credentials = Credentials::from(&config.keystone);
        let client_id = client_id(&format!("zaqar source {} {}", credentials.user_id, config.queue_id));
        let keystone = KeystoneSession::new(credentials, client.clone(), config.client.read_timeout)
            .map_err(|source| SourceError::Keystone { source_name: name.clone(), source })?;
        Ok(ZaqarSource {
            name,
            keystone,
            region: config.keystone.region_name.clone(),
            queue_id: config.queue_id.clone(),
            client_id,
            client,
            read_timeout: config.client.read_timeout,
            body_limit: MAX_DOCUMENT_BYTES,
            unsettled: Vec::new(),
            document_posted: None,
        })
    }

    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    /// What the source reads, for the cache identity (no secret in it).
    pub(super) fn described(&self) -> String {
        let credentials = self.keystone.credentials();
        format!("zaqar {} {} {} {}", credentials.auth_url, credentials.user_id, credentials.project_id, self.queue_id)
    }

    pub(crate) async fn fetch(&mut self, shutdown: &CancellationToken) -> Result<Fetched, SourceError> {
        tokio::select! {
            result = self.fetch_now() => result,
            () = shutdown.cancelled() => Ok(Fetched::Cancelled),
        }
    }

    async fn fetch_now(&mut self) -> Result<Fetched, SourceError> {
        // Not settled: the document they came from is not persisted, so their claim must lapse.
        self.unsettled.clear();
        let mut receipts = Vec::new();
        let mut newest = None;
        for _ in 0..CLAIM_ROUNDS {
            let claimed = match self.claim().await {
                Ok(claimed) => claimed,
                Err(error) if receipts.is_empty() => return Err(error),
                Err(error) => {
                    // What was claimed so far is used; the rest is read by the next poll.
                    tracing::warn!(source = %self.name, error = %error_chain(&error), "cannot claim more messages; using the newest claimed so far");
                    break;
                }
            };
            let full = claimed.len() == CLAIM_LIMIT;
            for message in claimed {
                let posted = message.posted();
                receipts.push(message.receipt);
                if self.older_than_document(posted) {
                    tracing::debug!(source = %self.name, "a message older than the document came back after its claim lapsed; deleting it unread");
                    continue;
                }
                newest = Some((message.body, posted));
            }
            if !full {
                break;
            }
        }
        // Deleted by `settle` even when the newest body is refused, so a bad message does not
        // block the queue.
        self.unsettled = receipts;
        let Some((body, posted)) = newest else {
            tracing::debug!(source = %self.name, "no new message in the queue");
            return Ok(Fetched::Unchanged);
        };
        let document = require_object(&self.name, "the newest message's body", body)?;
        self.document_posted = posted;
        tracing::debug!(source = %self.name, "fetched metadata from the queue");
        Ok(Fetched::Document(document))
    }

    /// Whether a message posted at `posted` is older than the current document's.
    fn older_than_document(&self, posted: Option<Instant>) -> bool {
        match (posted, self.document_posted) {
            (Some(posted), Some(document)) => posted + SAME_POST_TOLERANCE < document,
            _ => false,
        }
    }

    /// The document of the last fetch is persisted: deletes the messages it came from. A delete
    /// that fails is not an error: that message and the rest come back when their claim lapses
    /// and are read again (or skipped as older), so nothing is lost.
    pub(crate) async fn settle(&mut self, shutdown: &CancellationToken) {
        let receipts = std::mem::take(&mut self.unsettled);
        tokio::select! {
            () = self.delete_all(&receipts) => {}
            () = shutdown.cancelled() => {}
        }
    }

    async fn delete_all(&self, receipts: &[Receipt]) {
        for (index, receipt) in receipts.iter().enumerate() {
            if let Err(error) = self.delete(receipt).await {
                let left = receipts.len() - index;
                tracing::debug!(source = %self.name, error = %error_chain(&error), left, "cannot delete read messages; they come back when their claim lapses");
                return;
            }
        }
    }

    /// Claims up to `CLAIM_LIMIT` messages, oldest first; none when the queue is empty.
    async fn claim(&self) -> Result<Vec<Claimed>, SourceError> {
        let limit = CLAIM_LIMIT.to_string();
        let (response, url) =
            self.call(Method::POST, &["claims"], &[("limit", limit.as_str())], Some(CLAIM_BODY)).await?;
        let status = response.status();
        if status == StatusCode::NO_CONTENT {
            return Ok(Vec::new());
        }
        if !status.is_success() {
            return Err(self.answered("POST", &url, status));
        }
        let location = response.headers().get(LOCATION).and_then(|value| value.to_str().ok()).map(str::to_string);
        let body = read_limited(&self.name, &url, response, self.body_limit).await?;
        parse_claim(&body, location.as_deref()).map_err(|reason| SourceError::BadResponse {
            source_name: self.name.clone(),
            what: format!("the claim answer of {url}"),
            reason,
        })
    }

    /// Deletes one claimed message (already gone counts as deleted).
    async fn delete(&self, receipt: &Receipt) -> Result<(), SourceError> {
        let segments = ["messages", receipt.id.as_str()];
        let query = [("claim_id", receipt.claim_id.as_str())];
        let (response, url) = self.call(Method::DELETE, &segments, &query, None).await?;
        let status = response.status();
        if status.is_success() || status == StatusCode::NOT_FOUND {
            return Ok(());
        }
        Err(self.answered("DELETE", &url, status))
    }

    /// Sends `method` to `{endpoint}/v2/queues/{queue}/{segments}?{query}` with a token, once
    /// more with a fresh token after a 401. Returns the response and the redacted URL.
    async fn call(
        &self,
        method: Method,
        segments: &[&str],
        query: &[(&str, &str)],
        body: Option<&'static str>,
    ) -> Result<(Response, String), SourceError> {
        let keystone_error = |source| SourceError::Keystone { source_name: self.name.clone(), source };
        let mut retried = false;
        loop {
            let token = self.keystone.token().await.map_err(keystone_error)?;
            let endpoint = token.endpoint(MESSAGING, self.region.as_deref()).map_err(keystone_error)?;
            let url =
                queue_url(&endpoint, &self.queue_id, segments, query).ok_or_else(|| SourceError::BadEndpoint {
                    source_name: self.name.clone(),
                    url: redact_url(&endpoint),
                    service_type: MESSAGING,
                })?;
            let redacted = redact_url(url.as_str());
            let mut request = self
                .client
                .request(method.clone(), url)
                .timeout(self.read_timeout)
                .header(AUTH_TOKEN_HEADER, token.header())
                .header(CLIENT_ID_HEADER, &self.client_id)
                .header(PROJECT_ID_HEADER, &self.keystone.credentials().project_id)
                .header(ACCEPT, "application/json");
            if let Some(body) = body {
                request = request.header(CONTENT_TYPE, "application/json").body(body);
            }
            let response = request.send().await.map_err(|source| SourceError::Send {
                source_name: self.name.clone(),
                method: method_name(&method),
                url: redacted.clone(),
                source: source.without_url(),
            })?;
            if response.status() == StatusCode::UNAUTHORIZED && !retried {
                tracing::debug!(source = %self.name, "zaqar refused the token; authenticating again");
                self.keystone.invalidate(&token).await;
                retried = true;
                continue;
            }
            return Ok((response, redacted));
        }
    }

    fn answered(&self, method: &'static str, url: &str, status: StatusCode) -> SourceError {
        SourceError::Answered { source_name: self.name.clone(), method, url: url.to_string(), status: status.as_u16() }
    }

    #[cfg(test)]
    fn client_id(&self) -> &str {
        &self.client_id
    }
}

fn method_name(method: &Method) -> &'static str {
    if *method == Method::DELETE { "DELETE" } else { "POST" }
}

/// `{endpoint}/v2/queues/{queue}/{segments...}?{query}`, each part percent-encoded as a path
/// segment; `None` when the endpoint is not an http(s) URL that can carry a path.
pub(crate) fn queue_url(endpoint: &str, queue_id: &str, segments: &[&str], query: &[(&str, &str)]) -> Option<Url> {
    let mut url = Url::parse(endpoint).ok()?;
    let dots = |part: &str| part == "." || part == "..";
    if !matches!(url.scheme(), "http" | "https") || dots(queue_id) || segments.iter().any(|part| dots(part)) {
        return None;
    }
    url.set_query(None);
    url.path_segments_mut().ok()?.pop_if_empty().extend(["v2", "queues", queue_id]).extend(segments);
    if !query.is_empty() {
        url.query_pairs_mut().extend_pairs(query);
    }
    Some(url)
}

/// The messages of a claim answer (`{"messages": [...]}`, or v1.1's bare list), each with its id
/// and claim id taken from its `href` (`/v2/queues/q/messages/ID?claim_id=CID`), falling back to
/// its `id` and the claim's `Location`.
fn parse_claim(body: &[u8], location: Option<&str>) -> Result<Vec<Claimed>, String> {
    let value: Value = serde_json::from_slice(body).map_err(|error| format!("not JSON: {error}"))?;
    let messages = match value {
        Value::Object(mut object) => object.remove("messages").unwrap_or(Value::Null),
        list => list,
    };
    let Value::Array(messages) = messages else {
        return Err("no \"messages\" list".to_string());
    };
    if messages.len() > CLAIM_LIMIT {
        return Err(format!("{} messages for a claim of at most {CLAIM_LIMIT}", messages.len()));
    }
    let location_claim = location.and_then(|location| last_segment(location.split('?').next()?));
    messages
        .into_iter()
        .enumerate()
        .map(|(index, mut message)| {
            let href = message.get("href").and_then(Value::as_str).unwrap_or_default().to_string();
            let (href_path, href_query) = href.split_once('?').unwrap_or((&href, ""));
            let id = message.get("id").and_then(Value::as_str).map(str::to_string).or_else(|| last_segment(href_path));
            let claim_id = href_query
                .split('&')
                .find_map(|pair| pair.strip_prefix("claim_id="))
                .filter(|claim| !claim.is_empty())
                .map(str::to_string)
                .or_else(|| location_claim.clone());
            match (id, claim_id) {
                (Some(id), Some(claim_id)) => Ok(Claimed {
                    receipt: Receipt { id, claim_id },
                    age: message.get("age").and_then(Value::as_u64),
                    body: message.get_mut("body").map(Value::take).unwrap_or(Value::Null),
                }),
                _ => Err(format!("message {index} has no id or claim id")),
            }
        })
        .collect()
}

fn last_segment(path: &str) -> Option<String> {
    path.rsplit('/').next().filter(|segment| !segment.is_empty()).map(str::to_string)
}

/// A UUID (version 4 layout) derived from `seed`: Zaqar wants a `Client-ID` that stays the same
/// for one client across restarts, and the agent keeps no state for it.
pub(crate) fn client_id(seed: &str) -> String {
    let digest = Sha256::digest(format!("anneal-agent {seed}").as_bytes());
    let mut bytes = [0_u8; 16];
    bytes.copy_from_slice(&digest[..16]);
    bytes[6] = (bytes[6] & 0x0f) | 0x40;
    bytes[8] = (bytes[8] & 0x3f) | 0x80;
    let hex: String = bytes.iter().map(|byte| format!("{byte:02x}")).collect();
    format!("{}-{}-{}-{}-{}", &hex[..8], &hex[8..12], &hex[12..16], &hex[16..20], &hex[20..])
}

#[cfg(test)]
mod tests;
