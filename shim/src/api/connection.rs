//! Serving connections, with the limits that keep slow, stalled or numerous clients from
//! holding the shim's connections (and their tasks, buffers and file descriptors): every
//! connection is admitted through the caps of `limits` (over a cap it is answered 503 and
//! closed at once; a connection that has not sent a request head may be closed to make room),
//! and the request head must arrive within `REQUEST_HEAD_TIMEOUT` (hyper's header timer, which
//! `axum::serve` leaves without a timer and so never fires; it also closes a keep-alive
//! connection that sends no next request in that time). Request bodies have limits of their own
//! (`body`). Long-polls are not affected: they wait after the request was read. Graceful
//! shutdown stops accepting, lets requests in flight finish and closes idle connections. See
//! docs/http-api.md ("Limits").

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper::Request;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinSet;
use tokio::time::Instant;
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;
use tower::ServiceExt as _;

use super::limits::{Admission, Gate, Refusal, Slot};
use super::peer::{Peer, SharedStream};

/// How long a client may take to send a request's line and headers.
pub const REQUEST_HEAD_TIMEOUT: Duration = Duration::from_secs(10);
/// How long to wait before accepting again after an accept error such as too many open files.
const ACCEPT_ERROR_PAUSE: Duration = Duration::from_millis(200);
/// At most one warning per this interval about refused connections (an attack must not flood
/// the log); the count of those refused in between is in the next one.
const REFUSAL_LOG_INTERVAL: Duration = Duration::from_secs(10);

/// Accepts connections until `shutdown` is cancelled, then waits for the open ones to finish.
pub(super) async fn serve_connections(
    listener: TcpListener,
    app: Router,
    gate: Arc<Gate>,
    tls: Option<TlsAcceptor>,
    shutdown: CancellationToken,
) -> std::io::Result<()> {
    let mut connections = JoinSet::new();
    let mut refusals = RefusalLog::default();
    loop {
        let (stream, address) = tokio::select! {
            () = shutdown.cancelled() => break,
            Some(_) = connections.join_next(), if !connections.is_empty() => continue,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(error) if is_per_connection(&error) => continue,
                Err(error) => {
                    tracing::warn!(error = %error, "cannot accept a connection; pausing");
                    tokio::time::sleep(ACCEPT_ERROR_PAUSE).await;
                    continue;
                }
            },
        };
        match gate.admit(address.ip()) {
            Ok(admission) => {
                connections.spawn(serve_tcp(stream, admission, app.clone(), tls.clone(), shutdown.clone()));
            }
            Err(refusal) => {
                refuse(&stream, &refusal);
                refusals.note(&refusal);
            }
        }
    }
    while connections.join_next().await.is_some() {}
    Ok(())
}

/// Errors that concern only the connection being accepted, not the listener.
fn is_per_connection(error: &std::io::Error) -> bool {
    use std::io::ErrorKind;
    matches!(error.kind(), ErrorKind::ConnectionRefused | ErrorKind::ConnectionAborted | ErrorKind::ConnectionReset)
}

/// Answers a connection over a cap with 503 (without reading its request: the answer is
/// written into the empty send buffer of a fresh socket, so it never waits) and closes it.
fn refuse(stream: &TcpStream, refusal: &Refusal) {
    let body = serde_json::json!({"error": {"code": 503, "message": refusal.to_string()}}).to_string();
    let response = format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\
         retry-after: 1\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = stream.try_write(response.as_bytes());
    let _ = socket2::SockRef::from(stream).shutdown(std::net::Shutdown::Write);
}

/// Counts refused connections between warnings.
#[derive(Default)]
struct RefusalLog {
    last_warning: Option<Instant>,
    unreported: u64,
}

impl RefusalLog {
    fn note(&mut self, refusal: &Refusal) {
        self.unreported += 1;
        let due = self.last_warning.is_none_or(|last| last.elapsed() >= REFUSAL_LOG_INTERVAL);
        if due {
            tracing::warn!(refused = self.unreported, latest = %refusal, "refusing connections over the limits");
            self.last_warning = Some(Instant::now());
            self.unreported = 0;
        }
    }
}

/// Serves one admitted connection until it closes, or until the gate closes it to make room or
/// the shim shuts down while it has not sent a request head (nothing is in flight then).
async fn serve_tcp(
    stream: TcpStream,
    admission: Admission,
    app: Router,
    tls: Option<TlsAcceptor>,
    shutdown: CancellationToken,
) {
    let Admission { slot, closed } = admission;
    let (stream, peer) = SharedStream::new(stream);
    let context = ConnectionContext { peer: Some(peer), slot };
    // TLS (see `tls`): the handshake first, within its own deadline; `peer` still watches the
    // TCP socket underneath. No request head can have come before it ends, so the gate's
    // closing and shutdown end it at once.
    match tls {
        None => serve_connection(stream, context, app, Ending { shutdown, closed }).await,
        Some(acceptor) => {
            let handshake = tokio::select! {
                stream = super::tls::handshake(&acceptor, stream) => stream,
                () = closed.cancelled() => None,
                () = shutdown.cancelled() => None,
            };
            if let Some(stream) = handshake {
                serve_connection(stream, context, app, Ending { shutdown, closed }).await;
            }
        }
    }
}

/// What ends a connection from the shim's side: `shutdown` (gracefully: requests in flight
/// finish; at once while it has sent no request head) and `closed`, cancelled when the gate
/// closes the connection, which has sent no request head, to make room.
pub(super) struct Ending {
    pub(super) shutdown: CancellationToken,
    pub(super) closed: CancellationToken,
}

/// What every request of a connection carries as extensions: the socket to watch during a
/// long-poll (none when the transport cannot be watched that way) and the connection's slot
/// under the caps.
#[derive(Clone)]
pub(super) struct ConnectionContext {
    pub(super) peer: Option<Peer>,
    pub(super) slot: Slot,
}

/// Serves HTTP/1.1 on one connection, whatever its transport (plain TCP here; a TLS stream
/// wraps the same `SharedStream`), until it closes or `shutdown` ends it gracefully.
/// The two ends are watched in this one `select!` (not around it): every held long-poll's
/// connection keeps this future, so it stays small.
pub(super) async fn serve_connection<I>(io: I, context: ConnectionContext, app: Router, ending: Ending)
where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let slot = context.slot.clone();
    let service = TowerToHyperService::new(app.map_request(move |mut request: Request<Incoming>| {
        if let Some(peer) = &context.peer {
            request.extensions_mut().insert(peer.clone());
        }
        context.slot.head_received();
        request.extensions_mut().insert(context.slot.clone());
        request
    }));
    let mut builder = http1::Builder::new();
    // `half_close`: hyper does not read while a request is in flight (see `peer`, which
    // watches for a client that hangs up during a long-poll instead).
    builder.timer(TokioTimer::new()).header_read_timeout(REQUEST_HEAD_TIMEOUT).half_close(true);
    let connection = builder.serve_connection(TokioIo::new(io), service);
    let mut connection = std::pin::pin!(connection);
    tokio::select! {
        result = connection.as_mut() => {
            if let Err(error) = result {
                tracing::debug!(error = %error, "connection ended with an error");
            }
            return;
        }
        () = ending.closed.cancelled() => {
            tracing::debug!("closed a connection without a request head to make room");
            return;
        }
        // Nothing is in flight on a connection without a head: it need not wait for its timeout.
        () = ending.shutdown.cancelled() => {
            if !slot.has_sent_a_head() {
                return;
            }
            connection.as_mut().graceful_shutdown();
        }
    }
    if let Err(error) = connection.await {
        tracing::debug!(error = %error, "connection ended with an error during shutdown");
    }
}
