//! Serving connections, with the deadlines that keep a slow or stalled client from holding a
//! connection (and its task and buffers) forever: the request head must arrive within
//! `REQUEST_HEAD_TIMEOUT` (hyper's header timer, which `axum::serve` leaves without a timer and
//! so never fires), and a request body may not pause for longer than `BODY_IDLE_TIMEOUT`
//! between chunks. Long-polls are not affected: they wait after the request was read.
//! Graceful shutdown stops accepting, lets requests in flight finish and closes idle
//! connections.

use std::future::Future;
use std::pin::Pin;
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
use tokio::net::TcpListener;
use tokio::task::JoinSet;
use tokio::time::{Instant, Sleep};
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;
use tower::ServiceExt as _;

use super::peer::{Peer, SharedStream};

/// How long a client may take to send a request's line and headers.
pub const REQUEST_HEAD_TIMEOUT: Duration = Duration::from_secs(10);
/// The longest pause allowed while a request body is arriving.
pub const BODY_IDLE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long to wait before accepting again after an accept error such as too many open files.
const ACCEPT_ERROR_PAUSE: Duration = Duration::from_millis(200);

/// Accepts connections until `shutdown` is cancelled, then waits for the open ones to finish.
pub(super) async fn serve_connections(
    listener: TcpListener,
    app: Router,
    tls: Option<TlsAcceptor>,
    shutdown: CancellationToken,
) -> std::io::Result<()> {
    let mut connections = JoinSet::new();
    loop {
        let stream = tokio::select! {
            () = shutdown.cancelled() => break,
            Some(_) = connections.join_next(), if !connections.is_empty() => continue,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(error) if is_per_connection(&error) => continue,
                Err(error) => {
                    tracing::warn!(error = %error, "cannot accept a connection; pausing");
                    tokio::time::sleep(ACCEPT_ERROR_PAUSE).await;
                    continue;
                }
            },
        };
        connections.spawn(serve_one(stream, app.clone(), tls.clone(), shutdown.clone()));
    }
    while connections.join_next().await.is_some() {}
    Ok(())
}

/// Errors that concern only the connection being accepted, not the listener.
fn is_per_connection(error: &std::io::Error) -> bool {
    use std::io::ErrorKind;
    matches!(error.kind(), ErrorKind::ConnectionRefused | ErrorKind::ConnectionAborted | ErrorKind::ConnectionReset)
}

async fn serve_one(stream: tokio::net::TcpStream, app: Router, tls: Option<TlsAcceptor>, shutdown: CancellationToken) {
    let (stream, peer) = SharedStream::new(stream);
    // TLS (see `tls`): the handshake first, within its own deadline; `peer` still watches the
    // TCP socket underneath.
    match tls {
        None => serve_http(stream, peer, app, shutdown).await,
        Some(acceptor) => {
            if let Some(stream) = super::tls::handshake(&acceptor, stream).await {
                serve_http(stream, peer, app, shutdown).await;
            }
        }
    }
}

async fn serve_http<I>(stream: I, peer: Peer, app: Router, shutdown: CancellationToken)
where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let service = TowerToHyperService::new(app.map_request(move |mut request: Request<Incoming>| {
        request.extensions_mut().insert(peer.clone());
        request
    }));
    let mut builder = http1::Builder::new();
    // `half_close`: hyper does not read while a request is in flight (see `peer`, which
    // watches for a client that hangs up during a long-poll instead).
    builder.timer(TokioTimer::new()).header_read_timeout(REQUEST_HEAD_TIMEOUT).half_close(true);
    let connection = builder.serve_connection(TokioIo::new(stream), service);
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

/// Middleware: gives the request body an idle deadline. The body is still read lazily by the
/// extractors (so authentication comes before it is read); a pause longer than
/// `BODY_IDLE_TIMEOUT` makes the read fail with a `TimedOut` error, answered with 408.
pub(super) async fn limit_body_pauses(request: AxumRequest, next: Next) -> Response {
    let (parts, body) = request.into_parts();
    if body.is_end_stream() {
        return next.run(AxumRequest::from_parts(parts, body)).await;
    }
    let body = IdleTimeoutBody { inner: body, idle: Box::pin(tokio::time::sleep(BODY_IDLE_TIMEOUT)) };
    next.run(AxumRequest::from_parts(parts, Body::new(body))).await
}

/// The message of the error a stalled body read fails with.
pub(super) const BODY_STALLED: &str = "the request body stalled; send it without pauses";

/// A request body whose every frame must arrive within `BODY_IDLE_TIMEOUT` of the previous one.
struct IdleTimeoutBody {
    inner: Body,
    idle: Pin<Box<Sleep>>,
}

impl HttpBody for IdleTimeoutBody {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(self: Pin<&mut Self>, context: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        let this = self.get_mut();
        match Pin::new(&mut this.inner).poll_frame(context) {
            Poll::Ready(frame) => {
                this.idle.as_mut().reset(Instant::now() + BODY_IDLE_TIMEOUT);
                Poll::Ready(frame)
            }
            Poll::Pending => match this.idle.as_mut().poll(context) {
                Poll::Ready(()) => {
                    let stalled = std::io::Error::new(std::io::ErrorKind::TimedOut, BODY_STALLED);
                    Poll::Ready(Some(Err(axum::Error::new(stalled))))
                }
                Poll::Pending => Poll::Pending,
            },
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// Whether a body read failed because the client paused too long (see `IdleTimeoutBody`).
pub(super) fn is_stalled(error: &(dyn std::error::Error + 'static)) -> bool {
    let mut current = Some(error);
    while let Some(error) = current {
        if error.downcast_ref::<std::io::Error>().is_some_and(|io| io.kind() == std::io::ErrorKind::TimedOut) {
            return true;
        }
        current = error.source();
    }
    false
}
