//! The live graph streams (`GET /ui/api/stacks/{name}/watch`, Server-Sent Events). One watcher
//! per stack, shared by all its streams: a task that reads the stack's graph when the engine
//! says it may have changed (`Service::watch_stack`: this process's commits, other replicas'
//! as PostgreSQL announces them), at most once per `MIN_REFRESH_INTERVAL`, and serialises the
//! `graph` event (`{graph, svg}`) once per change; every stream sends those same bytes. What a
//! stack's streams send together is paced at `STREAM_BYTES_PER_SEC` (the first graph of a new
//! stream excepted), and a large graph watched by many streams is read again no faster than
//! that lets it go out: a 1,000-node stack's event is about 1 MB, so 400 viewers of it get an
//! update every 6 s or so, spread over those seconds, not 760 MB/s in bursts. The
//! task ends when the last stream of its stack goes. A stream ends when its client hangs up
//! (the socket is watched, as a held long-poll's is, so a closed tab frees its place under the
//! caps at once), with the shim, when its
//! session is revoked (a logout here ends it at once; one elsewhere, or the session's expiry,
//! is seen at its next keep-alive), and after a `gone` event when the stack is deleted. Streams
//! are capped per session and per client address (429 over a cap). In memory, per process.
//! See docs/http-api.md, "The web view's routes".

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use tokio::sync::watch;
use tokio::time::{Instant, Interval};
use tokio_util::sync::CancellationToken;

use super::{GraphView, ViewState};
use crate::api::peer::Peer;
use crate::api::{ApiError, AppState, PeerKey};
use crate::graph::StackGraph;
use crate::model::{Service, ServiceError};

/// Live streams one session may hold open at once.
pub(crate) const MAX_STREAMS_PER_SESSION: usize = 8;
/// Live streams one client address may hold open at once (sessions and the admin token alike).
pub(crate) const MAX_STREAMS_PER_PEER: usize = 32;
/// A watched stack's graph is read at most this often, however fast its commits come.
pub(crate) const MIN_REFRESH_INTERVAL: Duration = Duration::from_millis(500);
/// What the streams of one stack may carry per second, all together: beyond it the stack is
/// refreshed less often than `MIN_REFRESH_INTERVAL`.
pub(crate) const STREAM_BYTES_PER_SEC: u64 = 64 << 20;
/// After a failed read, the next one.
const ERROR_RETRY: Duration = Duration::from_secs(2);
/// A comment line this often keeps proxies from closing an idle stream; a session stream's
/// session is checked again at each one.
const KEEP_ALIVE: Duration = Duration::from_secs(15);
/// The `Retry-After` of a stream refused over a cap (one of the caller's views must close first).
const CAP_RETRY_AFTER_SECS: u64 = 10;

/// What a stack's watcher last saw: what each of its streams sends next.
#[derive(Clone)]
enum Snapshot {
    /// Not read yet.
    Reading,
    /// The `graph` event of the latest graph.
    Graph(Bytes),
    /// The `gone` event: the stack was deleted.
    Gone(Bytes),
    /// The first read failed (a database hiccup); retried.
    Unreadable,
}

/// One stack's watcher, held by its streams; the task goes with the last of them.
struct Watcher {
    snapshots: watch::Receiver<Snapshot>,
    task: tokio::task::AbortHandle,
    /// When the streams' next update may start, so that together they send at most
    /// `STREAM_BYTES_PER_SEC` (a new graph reaches 400 streams over seconds, not in one burst
    /// that starves the agents' polls).
    next_turn: Mutex<Instant>,
}

impl Watcher {
    /// When a stream may start sending an update of `bytes`; the turns after it move on.
    fn turn(&self, bytes: usize) -> Instant {
        let mut next = lock(&self.next_turn);
        let start = (*next).max(Instant::now());
        let nanos = u64::try_from(bytes).unwrap_or(u64::MAX).saturating_mul(1_000_000_000) / STREAM_BYTES_PER_SEC;
        *next = start + Duration::from_nanos(nanos);
        start
    }
}

impl Drop for Watcher {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The watchers and the open streams of this process.
#[derive(Default)]
pub(super) struct Live {
    watchers: Mutex<HashMap<String, Weak<Watcher>>>,
    streams: Mutex<Streams>,
}

#[derive(Default)]
struct Streams {
    by_session: HashMap<String, SessionStreams>,
    by_peer: HashMap<PeerKey, usize>,
}

struct SessionStreams {
    open: usize,
    /// Cancelled by the session's logout: its streams end.
    revoked: CancellationToken,
}

impl Live {
    /// Ends this process's streams of the session `key` (its logout).
    pub(super) fn revoke(&self, key: &str) {
        if let Some(streams) = lock(&self.streams).by_session.get(key) {
            streams.revoked.cancel();
        }
    }

    /// `name`'s watcher, started if it has none (or only one of a deleted stack of that name).
    fn watcher<S: Service>(&self, state: &AppState<S>, name: &str) -> Arc<Watcher> {
        let mut watchers = lock(&self.watchers);
        watchers.retain(|_, watcher| watcher.strong_count() > 0);
        let current = watchers.get(name).and_then(Weak::upgrade);
        if let Some(watcher) = current.filter(|watcher| !matches!(*watcher.snapshots.borrow(), Snapshot::Gone(_))) {
            return watcher;
        }
        let (sender, snapshots) = watch::channel(Snapshot::Reading);
        // Subscribed before the first read, so no commit falls between the two.
        let changes = state.service.watch_stack(name);
        let task =
            tokio::spawn(follow(Arc::clone(&state.service), name.to_string(), sender, changes, state.shutdown.clone()));
        let watcher = Arc::new(Watcher { snapshots, task: task.abort_handle(), next_turn: Mutex::new(Instant::now()) });
        watchers.insert(name.to_string(), Arc::downgrade(&watcher));
        watcher
    }
}

/// A stream counted under the caps until it is dropped.
struct Ticket {
    view: Arc<ViewState>,
    session: Option<String>,
    peer: PeerKey,
    revoked: CancellationToken,
}

impl Ticket {
    /// Counts a new stream of `session` (`None`: the admin bearer token) from `peer`, or refuses
    /// it over a cap.
    fn admit(view: &Arc<ViewState>, session: Option<String>, peer: PeerKey) -> Result<Ticket, ApiError> {
        let refuse =
            |message: String| Err(ApiError::TooManyRequests { message, retry_after_secs: CAP_RETRY_AFTER_SECS });
        let mut streams = lock(&view.live.streams);
        if streams.by_peer.get(&peer).is_some_and(|open| *open >= MAX_STREAMS_PER_PEER) {
            return refuse(format!(
                "too many live views open from {peer} (limit {MAX_STREAMS_PER_PEER}); close one and reload"
            ));
        }
        let revoked = match &session {
            Some(key) => {
                let entry = streams
                    .by_session
                    .entry(key.clone())
                    .or_insert_with(|| SessionStreams { open: 0, revoked: CancellationToken::new() });
                if entry.open >= MAX_STREAMS_PER_SESSION {
                    return refuse(format!(
                        "too many live views open in this session (limit {MAX_STREAMS_PER_SESSION}); close one and \
                         reload"
                    ));
                }
                entry.open += 1;
                entry.revoked.clone()
            }
            None => CancellationToken::new(),
        };
        *streams.by_peer.entry(peer).or_default() += 1;
        Ok(Ticket { view: Arc::clone(view), session, peer, revoked })
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        let mut streams = lock(&self.view.live.streams);
        if let Some(open) = streams.by_peer.get_mut(&self.peer) {
            *open = open.saturating_sub(1);
            if *open == 0 {
                streams.by_peer.remove(&self.peer);
            }
        }
        if let Some(key) = &self.session {
            if let Some(entry) = streams.by_session.get_mut(key) {
                entry.open = entry.open.saturating_sub(1);
                if entry.open == 0 {
                    streams.by_session.remove(key);
                }
            }
        }
    }
}

/// `GET /ui/api/stacks/{name}/watch`: Server-Sent Events. `graph` (`{graph, svg}`) at once and
/// again whenever the graph changes; `gone` when the stack is deleted, then the end. 404 for an
/// unknown stack, 429 over a cap.
pub(super) async fn watch<S: Service>(
    state: &AppState<S>,
    session: Option<String>,
    (peer, client): (PeerKey, Option<Peer>),
    name: &str,
) -> Result<Response, ApiError> {
    let ticket = Ticket::admit(&state.view, session.clone(), peer)?;
    let watcher = state.view.live.watcher(state, name);
    let mut snapshots = watcher.snapshots.clone();
    let first = tokio::select! {
        () = state.shutdown.cancelled() => None,
        seen = snapshots.wait_for(|snapshot| !matches!(snapshot, Snapshot::Reading)) => seen.ok().map(|seen| seen.clone()),
    };
    let first = match first {
        Some(Snapshot::Graph(event)) => event,
        Some(Snapshot::Gone(_)) => return Err(ApiError::NotFound { what: "stack".into() }),
        Some(Snapshot::Reading | Snapshot::Unreadable) | None => {
            return Err(ApiError::Rejected {
                status: StatusCode::SERVICE_UNAVAILABLE,
                message: format!("the graph of stack {name} cannot be read now; retry later"),
            });
        }
    };
    let stream = Stream {
        first: Some(first),
        snapshots,
        watcher,
        ticket,
        client,
        service: Arc::clone(&state.service),
        session,
        shutdown: state.shutdown.clone(),
        keep_alive: tokio::time::interval_at(Instant::now() + KEEP_ALIVE, KEEP_ALIVE),
        ended: false,
    };
    let body = Body::from_stream(futures_util::stream::unfold(stream, Stream::next));
    let headers = [
        (header::CONTENT_TYPE, HeaderValue::from_static("text/event-stream")),
        (header::CACHE_CONTROL, HeaderValue::from_static("no-cache")),
    ];
    Ok((headers, body).into_response())
}

/// One open stream: what it sends next.
struct Stream<S> {
    first: Option<Bytes>,
    snapshots: watch::Receiver<Snapshot>,
    watcher: Arc<Watcher>,
    ticket: Ticket,
    /// The connection's socket, watched for the client hanging up (none in process).
    client: Option<Peer>,
    service: Arc<S>,
    session: Option<String>,
    shutdown: CancellationToken,
    keep_alive: Interval,
    ended: bool,
}

impl<S: Service> Stream<S> {
    async fn next(mut self) -> Option<(Result<Bytes, Infallible>, Stream<S>)> {
        if self.ended {
            return None;
        }
        if let Some(first) = self.first.take() {
            return Some((Ok(first), self));
        }
        loop {
            tokio::select! {
                () = self.shutdown.cancelled() => return None,
                () = self.ticket.revoked.cancelled() => return None,
                () = client_gone(self.client.as_ref()) => return None,
                _ = self.keep_alive.tick() => {
                    if !self.session_still_open().await {
                        return None;
                    }
                    return Some((Ok(Bytes::from_static(b":\n\n")), self));
                }
                changed = self.snapshots.changed() => if changed.is_err() { return None },
            }
            let snapshot = self.snapshots.borrow_and_update().clone();
            let update = match snapshot {
                Snapshot::Graph(event) => event,
                Snapshot::Gone(event) => {
                    self.ended = true;
                    return Some((Ok(event), self));
                }
                Snapshot::Reading | Snapshot::Unreadable => continue,
            };
            if !self.wait_for_turn(update.len()).await {
                return None;
            }
            // A newer graph that came in the meantime goes instead.
            let latest = self.snapshots.borrow_and_update().clone();
            return match latest {
                Snapshot::Gone(event) => {
                    self.ended = true;
                    Some((Ok(event), self))
                }
                Snapshot::Graph(newer) => Some((Ok(newer), self)),
                Snapshot::Reading | Snapshot::Unreadable => Some((Ok(update), self)),
            };
        }
    }

    /// Waits for this stream's turn to send an update of `bytes`; false when the stream ends
    /// meanwhile.
    async fn wait_for_turn(&self, bytes: usize) -> bool {
        let turn = self.watcher.turn(bytes);
        tokio::select! {
            () = self.shutdown.cancelled() => false,
            () = self.ticket.revoked.cancelled() => false,
            () = client_gone(self.client.as_ref()) => false,
            () = tokio::time::sleep_until(turn) => true,
        }
    }

    /// False once the stream's session is gone (logged out on another replica) or expired; a
    /// failed lookup keeps the stream (the next keep-alive asks again).
    async fn session_still_open(&self) -> bool {
        let Some(key) = &self.session else { return true };
        !matches!(self.service.ui_session_valid(key).await, Ok(false))
    }
}

/// Completes when the client hangs up; never without a socket to watch.
async fn client_gone(client: Option<&Peer>) {
    match client {
        Some(client) => client.gone().await,
        None => std::future::pending().await,
    }
}

/// The watcher's task: reads `name`'s graph now and after each change, publishing it when it
/// differs from the last, until the stack is gone (then it waits to be dropped) or shutdown.
async fn follow<S: Service>(
    service: Arc<S>,
    name: String,
    snapshots: watch::Sender<Snapshot>,
    mut changes: watch::Receiver<u64>,
    shutdown: CancellationToken,
) {
    let mut last: Option<StackGraph> = None;
    let mut pause = MIN_REFRESH_INTERVAL;
    loop {
        let read_at = Instant::now();
        match service.stack_graph(&name).await {
            Ok(graph) if last.as_ref() != Some(&graph) => {
                // The layout and the SVG of a large graph take a while: off the runtime's threads.
                let rendered = tokio::task::spawn_blocking(move || {
                    let event = graph_event(&graph);
                    (graph, event)
                });
                let Ok((graph, event)) = rendered.await else { return };
                pause = refresh_pause(event.len(), snapshots.receiver_count());
                snapshots.send_replace(Snapshot::Graph(event));
                last = Some(graph);
            }
            Ok(_) => {}
            Err(ServiceError::NotFound { .. }) => {
                snapshots.send_replace(Snapshot::Gone(gone_event(&name)));
                shutdown.cancelled().await;
                return;
            }
            Err(error) => {
                tracing::debug!(stack = %name, error = %crate::error_chain(&error), "cannot read a watched stack's graph");
                if last.is_none() {
                    snapshots.send_replace(Snapshot::Unreadable);
                }
                tokio::select! {
                    () = shutdown.cancelled() => return,
                    () = tokio::time::sleep(ERROR_RETRY) => continue,
                }
            }
        }
        tokio::select! {
            () = shutdown.cancelled() => return,
            changed = changes.changed() => if changed.is_err() { return },
        }
        // Changes that come in the meantime are read together.
        tokio::select! {
            () = shutdown.cancelled() => return,
            () = tokio::time::sleep_until(read_at + pause) => {}
        }
        changes.mark_unchanged();
    }
}

/// How long after a read the next one may come: `MIN_REFRESH_INTERVAL`, or longer when
/// `streams` copies of an `event_bytes` event would carry more than `STREAM_BYTES_PER_SEC`.
fn refresh_pause(event_bytes: usize, streams: usize) -> Duration {
    let carried = u64::try_from(event_bytes.saturating_mul(streams)).unwrap_or(u64::MAX);
    MIN_REFRESH_INTERVAL.max(Duration::from_millis(carried.saturating_mul(1000) / STREAM_BYTES_PER_SEC))
}

/// The `graph` event of `graph`: `{graph, svg}` as one line of JSON.
fn graph_event(graph: &StackGraph) -> Bytes {
    let view = GraphView::of(graph);
    let json = serde_json::to_vec(&view).unwrap_or_default();
    let mut event = Vec::with_capacity(json.len() + 22);
    event.extend_from_slice(b"event: graph\ndata: ");
    event.extend_from_slice(&json);
    event.extend_from_slice(b"\n\n");
    Bytes::from(event)
}

/// The `gone` event of stack `name` (line breaks, which would end the data line, dropped).
fn gone_event(name: &str) -> Bytes {
    let name: String = name.chars().filter(|character| !matches!(character, '\n' | '\r')).collect();
    Bytes::from(format!("event: gone\ndata: {name}\n\n"))
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // Every update is a few counter and map operations that cannot panic half-way.
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_large_graph_with_many_streams_is_refreshed_less_often() {
        assert_eq!(refresh_pause(100_000, 10), MIN_REFRESH_INTERVAL, "a small audience: twice a second");
        let crowded = refresh_pause(1_000_000, 400);
        assert!(crowded > Duration::from_secs(5) && crowded < Duration::from_secs(7), "{crowded:?}");
    }
}
