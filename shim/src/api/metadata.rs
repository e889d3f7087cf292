//! Serving servers' metadata documents: the agent route (bearer token, `ETag` /
//! `If-None-Match`, long-poll with `?wait=SECS`) and the route for stock os-collect-config
//! (token in the URL, `Last-Modified` / `If-Modified-Since`). A 304 costs one `metadata()`
//! call, which the engine answers from memory; a held long-poll costs a watch receiver.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::body::{Body, Bytes};
use axum::extract::rejection::{PathRejection, QueryRejection};
use axum::extract::{Extension, Path, Query, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode, header};
use axum::response::Response;
use serde::Deserialize;
use tokio::time::Instant;

use super::auth::ServerCredential;
use super::conditional::{entity_tag, if_none_match, not_modified_since};
use super::limits::{Held, Slot};
use super::peer::Peer;
use super::{ApiError, AppState, auth};
use crate::model::{MetadataDocument, Service};
use crate::token::hash_token;

/// Tells the agent how long the server may hold a long-poll, so it can set its own timeout.
pub(super) const LONG_POLL_HEADER: &str = "x-anneal-long-poll";

#[derive(Debug, Deserialize)]
pub(super) struct MetadataQuery {
    wait: Option<String>,
}

/// `GET /v1/servers/{name}/metadata`.
pub(super) async fn server_metadata<S: Service>(
    State(state): State<AppState<S>>,
    path: Result<Path<String>, PathRejection>,
    query: Result<Query<MetadataQuery>, QueryRejection>,
    peer: Option<Extension<Peer>>,
    slot: Option<Extension<Slot>>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let Path(name) = path?;
    let credential = auth::authorize_server(&state, &headers, &name).await?;
    state.service.touch_server(&name);
    let Query(query) = query?;
    let wait = parse_wait(query.wait.as_deref(), state.config.long_poll_max)?;
    let document = state.service.metadata(&name).await?;
    let long_poll = HeaderValue::from(state.config.long_poll_max.as_secs());
    if if_none_match(&headers, document.version) != Some(true) {
        return Ok(document_response(StatusCode::OK, document, Some(long_poll)));
    }
    let client_version = document.version;
    // Nothing below needs the request's headers. Dropping them before the wait releases the
    // read buffer they point into, which would otherwise stay allocated while the poll is held.
    drop(headers);
    let document = match wait {
        Some(wait) => {
            let poll = LongPoll { server: &name, credential, wait, peer: peer.map(|Extension(peer)| peer), slot };
            match wait_for_change(&state, document, poll).await? {
                Some(document) => document,
                // The server was removed while the poll was held: its token is dead (a server added
                // again under the name gets a new one), so the answer is what a dead token gets.
                None => return Err(ApiError::Forbidden { resource: format!("the metadata of server {name}") }),
            }
        }
        None => document,
    };
    let status = if document.version == client_version { StatusCode::NOT_MODIFIED } else { StatusCode::OK };
    Ok(document_response(status, document, Some(long_poll)))
}

/// `GET|HEAD /v1/metadata/{token}` (axum answers HEAD from the GET route without the body).
pub(super) async fn request_metadata<S: Service>(
    State(state): State<AppState<S>>,
    path: Result<Path<String>, PathRejection>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let Path(token) = path?;
    let server = auth::server_of_url_token(&state, &token).await?;
    state.service.touch_server(&server);
    let document = state.service.metadata(&server).await?;
    // RFC 9110 §13.2.2: If-None-Match, when present, decides and If-Modified-Since is ignored.
    let unchanged = match if_none_match(&headers, document.version) {
        Some(matched) => matched,
        None => not_modified_since(&headers, &document.last_modified),
    };
    let status = if unchanged { StatusCode::NOT_MODIFIED } else { StatusCode::OK };
    Ok(document_response(status, document, None))
}

/// `?wait=SECS`: `None` to answer at once (absent or 0), else the hold time, clamped to
/// `long_poll_max`.
pub(super) fn parse_wait(wait: Option<&str>, long_poll_max: Duration) -> Result<Option<Duration>, ApiError> {
    let Some(text) = wait else {
        return Ok(None);
    };
    let seconds: u64 = text
        .trim()
        .parse()
        .map_err(|_| ApiError::bad_request(format!("wait must be a whole number of seconds, got {text:?}")))?;
    if seconds == 0 {
        return Ok(None);
    }
    Ok(Some(Duration::from_secs(seconds).min(long_poll_max)))
}

/// A long-poll to hold: whose, with which credential, for how long, on which connection.
struct LongPoll<'a> {
    server: &'a str,
    credential: ServerCredential,
    wait: Duration,
    /// The client's socket, to see it hang up (none for a router used without `serve`).
    peer: Option<Peer>,
    /// The connection's slot under the caps (none for a router used without `serve`).
    slot: Option<Extension<Slot>>,
}

/// Holds the request until the server's document is no longer at `current.version`, the wait
/// ends, or the shim shuts down; returns the document to answer with, or `None` when the
/// server was removed (its document's publisher went away). When the client hangs up, the
/// request ends at once (`ApiError::ClientGone`; nobody reads the answer). While held, the
/// connection counts under the long-poll caps instead of the active ones (see `held`): 503 when
/// they refuse it, and unchanged (304) when a newer poll of the same server takes its place.
/// The token is checked again before a newer document goes out, unless the document was
/// rendered for this very token, and a replaced token's poll ends with 401 when its grace does.
async fn wait_for_change<S: Service>(
    state: &AppState<S>,
    current: MetadataDocument,
    poll: LongPoll<'_>,
) -> Result<Option<MetadataDocument>, ApiError> {
    let LongPoll { server, credential, wait, peer, slot } = poll;
    let held = match slot {
        Some(Extension(slot)) => Some(slot.hold(server).map_err(|refusal| {
            tracing::debug!(server, %refusal, "long-poll refused");
            ApiError::Refused(refusal)
        })?),
        None => None,
    };
    let deadline = Instant::now() + wait;
    let mut versions = state.service.watch_metadata(server).await?;
    let _counted = state.service.metrics().hold_long_poll();
    // Each watched future is written out here rather than wrapped in a helper taking a future:
    // a wrapper keeps its argument and the future it awaits, and every one of 10,000 held
    // polls pays for the copies (the fleet bench's RSS).
    let client_gone = async {
        match &peer {
            Some(peer) => peer.gone().await,
            None => std::future::pending().await,
        }
    };
    let mut client_gone = std::pin::pin!(client_gone);
    let taken_over = held.as_ref().map(Held::ended_early);
    // One timer for both ends: the wait (answered unchanged) and a replaced token's grace (401).
    let grace_ends = credential.grace_ends_at.map(instant_of_unix_millis).filter(|grace| *grace < deadline);
    let wakes_at = grace_ends.unwrap_or(deadline);
    loop {
        // Covers a change between `metadata()` and the subscription as well as each wake-up.
        if *versions.borrow_and_update() != current.version {
            // Boxed: futures awaited once, at the answer, need not swell every held poll's state.
            let document = Box::pin(state.service.metadata(server)).await?;
            if document.version != current.version {
                // Hashed here, not kept while held: 10,000 held polls would each keep 88 bytes more.
                if credential.grace_ends_at.is_some() || *document.server_token_hash != hash_token(&credential.token) {
                    Box::pin(auth::check_server_token(state, &credential.token, server)).await?;
                }
                if let Some(announced) = document.announced_at {
                    state.service.metrics().wakeup(announced.elapsed());
                }
                return Ok(Some(document));
            }
        }
        tokio::select! {
            changed = versions.changed() => {
                if changed.is_err() {
                    // Nothing more will come on this receiver: the engine dropped the
                    // server's document because the server was removed.
                    return Ok(None);
                }
            }
            () = tokio::time::sleep_until(wakes_at) => {
                return if grace_ends.is_some() { Err(ApiError::TokenExpired) } else { Ok(Some(current)) };
            }
            () = state.shutdown.cancelled() => return Ok(Some(current)),
            () = client_gone.as_mut() => return Err(ApiError::ClientGone),
            () = async { if let Some(ended) = taken_over { ended.cancelled().await } }, if taken_over.is_some() => {
                return Ok(Some(current));
            }
        }
    }
}

/// The `Instant` of the Unix time `at` (milliseconds); now if it has passed.
fn instant_of_unix_millis(at: u64) -> Instant {
    let now = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |since| since.as_millis());
    let left = u128::from(at).saturating_sub(now);
    Instant::now() + Duration::from_millis(u64::try_from(left).unwrap_or(u64::MAX).min(u64::from(u32::MAX)))
}

/// The document (or, for 304, only its headers). The body is shared with the engine's cache,
/// not copied.
fn document_response(status: StatusCode, document: MetadataDocument, long_poll: Option<HeaderValue>) -> Response {
    let mut response = Response::new(if status == StatusCode::OK {
        Body::from(Bytes::from_owner(SharedText(document.body)))
    } else {
        Body::empty()
    });
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    if let Ok(tag) = HeaderValue::from_str(&entity_tag(document.version)) {
        headers.insert(header::ETAG, tag);
    }
    match HeaderValue::from_str(&document.last_modified) {
        Ok(date) => {
            headers.insert(header::LAST_MODIFIED, date);
        }
        Err(_) => tracing::warn!(version = document.version, "metadata document has an unusable Last-Modified date"),
    }
    if let Some(value) = long_poll {
        headers.insert(HeaderName::from_static(LONG_POLL_HEADER), value);
    }
    response
}

/// `Arc<str>` as bytes, so `Bytes::from_owner` can borrow the cached document.
struct SharedText(std::sync::Arc<str>);

impl AsRef<[u8]> for SharedText {
    fn as_ref(&self) -> &[u8] {
        self.0.as_bytes()
    }
}
