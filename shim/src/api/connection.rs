//! Serving connections, with the limits that keep slow, stalled or numerous clients from
//! holding the shim's connections (and their tasks, buffers and file descriptors): every
//! connection is admitted through the caps of `limits` (over a cap it is answered 503 and
//! closed at once), the request head must arrive within `REQUEST_HEAD_TIMEOUT` (hyper's header
//! timer, which `axum::serve` leaves without a timer and so never fires; it also closes a
//! keep-alive connection that sends no next request in that time), and a request body may
//! neither pause for longer than `BODY_IDLE_TIMEOUT` between chunks nor take longer than the
//! body deadline as a whole. Long-polls are not affected: they wait after the request was read.
//! Graceful shutdown stops accepting, lets requests in flight finish and closes idle
//! connections. See docs/http-api.md ("Limits").

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes, HttpBody};
use axum::extract::Request as AxumRequest;
use axum::middleware::Next;
use axum::response::Response;
use hyper::Request;
use hyper::body::{Frame, Incoming, SizeHint};
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinSet;
use tokio::time::{Instant, Sleep};
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;
use tower::ServiceExt as _;

use super::limits::{Gate, Refusal, Slot};
use super::peer::{Peer, SharedStream};

/// How long a client may take to send a request's line and headers.
pub const REQUEST_HEAD_TIMEOUT: Duration = Duration::from_secs(10);
/// The longest pause allowed while a request body is arriving.
pub const BODY_IDLE_TIMEOUT: Duration = Duration::from_secs(10);
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
            Ok(slot) => {
                connections.spawn(serve_tcp(stream, slot, app.clone(), tls.clone(), shutdown.clone()));
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

async fn serve_tcp(stream: TcpStream, slot: Slot, app: Router, tls: Option<TlsAcceptor>, shutdown: CancellationToken) {
    let (stream, peer) = SharedStream::new(stream);
    let context = ConnectionContext { peer: Some(peer), slot };
    // TLS (see `tls`): the handshake first, within its own deadline; `peer` still watches the
    // TCP socket underneath.
    match tls {
        None => serve_connection(stream, context, app, shutdown).await,
        Some(acceptor) => {
            if let Some(stream) = super::tls::handshake(&acceptor, stream).await {
                serve_connection(stream, context, app, shutdown).await;
            }
        }
    }
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
pub(super) async fn serve_connection<I>(io: I, context: ConnectionContext, app: Router, shutdown: CancellationToken)
where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let service = TowerToHyperService::new(app.map_request(move |mut request: Request<Incoming>| {
        if let Some(peer) = &context.peer {
            request.extensions_mut().insert(peer.clone());
        }
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
        () = shutdown.cancelled() => connection.as_mut().graceful_shutdown(),
    }
    if let Err(error) = connection.await {
        tracing::debug!(error = %error, "connection ended with an error during shutdown");
    }
}

/// The time limits of a request body.
#[derive(Debug, Clone, Copy)]
pub(super) struct BodyTimes {
    /// The longest pause between two chunks.
    pub(super) idle: Duration,
    /// The whole body must have arrived this long after the request head.
    pub(super) whole: Duration,
}

/// Middleware: gives the request body an idle deadline and an overall one. The body is still
/// read lazily by the extractors (so authentication comes before it is read); a read past
/// either deadline fails with a `TimedOut` error, answered with 408.
pub(super) async fn limit_body_time(request: AxumRequest, next: Next, times: BodyTimes) -> Response {
    let (parts, body) = request.into_parts();
    if body.is_end_stream() {
        return next.run(AxumRequest::from_parts(parts, body)).await;
    }
    let body = TimedBody {
        inner: body,
        idle: Box::pin(tokio::time::sleep(times.idle)),
        deadline: Box::pin(tokio::time::sleep(times.whole)),
        times,
    };
    next.run(AxumRequest::from_parts(parts, Body::new(body))).await
}

/// A request body whose every frame must arrive within `times.idle` of the previous one, and
/// all of it within `times.whole`.
struct TimedBody {
    inner: Body,
    idle: Pin<Box<Sleep>>,
    deadline: Pin<Box<Sleep>>,
    times: BodyTimes,
}

impl TimedBody {
    fn timed_out(&self, message: String) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        let error = std::io::Error::new(std::io::ErrorKind::TimedOut, message);
        Poll::Ready(Some(Err(axum::Error::new(error))))
    }

    fn too_slow(&self) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        let whole = self.times.whole.as_secs();
        self.timed_out(format!("the request body did not arrive within {whole} s; send it at once"))
    }
}

impl HttpBody for TimedBody {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(self: Pin<&mut Self>, context: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        let this = self.get_mut();
        // Checked before reading too: a client that trickles just fast enough that every poll
        // finds a chunk must still be cut at the deadline.
        if this.deadline.is_elapsed() {
            return this.too_slow();
        }
        match Pin::new(&mut this.inner).poll_frame(context) {
            Poll::Ready(frame) => {
                this.idle.as_mut().reset(Instant::now() + this.times.idle);
                Poll::Ready(frame)
            }
            Poll::Pending => {
                if this.deadline.as_mut().poll(context).is_ready() {
                    return this.too_slow();
                }
                match this.idle.as_mut().poll(context) {
                    Poll::Ready(()) => {
                        let idle = this.times.idle.as_secs();
                        this.timed_out(format!(
                            "the request body stalled for more than {idle} s; send it without pauses"
                        ))
                    }
                    Poll::Pending => Poll::Pending,
                }
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// The message of the deadline a body read failed on (see `TimedBody`), if it failed on one.
pub(super) fn timed_out(error: &(dyn std::error::Error + 'static)) -> Option<String> {
    let mut current = Some(error);
    while let Some(error) = current {
        if let Some(io) = error.downcast_ref::<std::io::Error>().filter(|io| io.kind() == std::io::ErrorKind::TimedOut)
        {
            return Some(io.to_string());
        }
        current = error.source();
    }
    None
}
