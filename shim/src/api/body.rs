//! The limits on a request body while it arrives: its route's size cap (a few KiB for the routes
//! that take no credential, whose body is read before anything is checked; the API's body
//! limit for the others), its share of the body budget (`budget`: reserved when the handler
//! starts reading, so after the credential was checked), a longest pause between chunks and a
//! deadline for the whole body. The body is still read lazily by the extractors; a read that
//! breaks a limit fails with a `BodyRefusal`, which `ApiError::from_body_rejection` answers
//! (413, 503, 408). See docs/http-api.md ("Limits").

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::{Body, Bytes, HttpBody};
use axum::extract::Request;
use axum::middleware::Next;
use axum::response::Response;
use hyper::body::{Frame, SizeHint};
use tokio::time::{Instant, Sleep};

use super::budget::Reservation;
use super::caps::Refusal;
use super::limits::Slot;

/// The longest pause allowed while a request body is arriving.
pub const BODY_IDLE_TIMEOUT: Duration = Duration::from_secs(10);
/// The largest body a route without a credential reads (a login is about 100 bytes).
pub const PUBLIC_BODY_LIMIT: usize = 4096;

/// The limits of one route's request bodies.
#[derive(Debug, Clone, Copy)]
pub(super) struct BodyRules {
    /// The longest pause between two chunks.
    pub(super) idle: Duration,
    /// The whole body must have arrived this long after the request head.
    pub(super) whole: Duration,
    /// The largest body the route takes.
    pub(super) max_bytes: usize,
}

/// Why a request body was not read whole.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(super) enum BodyRefusal {
    #[error("request body is larger than {limit} bytes")]
    TooLarge { limit: usize },
    #[error("the request body did not arrive within {seconds} s; send it at once")]
    TooSlow { seconds: u64 },
    #[error("the request body stalled for more than {seconds} s; send it without pauses")]
    Stalled { seconds: u64 },
    #[error(transparent)]
    Busy(Refusal),
}

/// The `BodyRefusal` a failed body read came from, if it came from one.
pub(super) fn refusal_in(error: &(dyn std::error::Error + 'static)) -> Option<BodyRefusal> {
    let mut current = Some(error);
    while let Some(error) = current {
        if let Some(refusal) = error.downcast_ref::<BodyRefusal>() {
            return Some(refusal.clone());
        }
        current = error.source();
    }
    None
}

/// Middleware: puts the body of a request under `rules`. The budget reservation it makes is
/// held until the response is ready, since the buffered body lives as long as its handler.
pub(super) async fn guard(request: Request, next: Next, rules: BodyRules) -> Response {
    let (parts, body) = request.into_parts();
    if body.is_end_stream() {
        return next.run(Request::from_parts(parts, body)).await;
    }
    let reservation = Arc::new(Mutex::new(None));
    let body = GuardedBody {
        inner: body,
        slot: parts.extensions.get::<Slot>().cloned(),
        phase: Phase::Unreserved,
        reservation: Arc::clone(&reservation),
        received: 0,
        idle: Box::pin(tokio::time::sleep(rules.idle)),
        deadline: Box::pin(tokio::time::sleep(rules.whole)),
        rules,
    };
    let response = next.run(Request::from_parts(parts, Body::new(body))).await;
    drop(reservation);
    response
}

type Reserving = Pin<Box<dyn Future<Output = Result<Reservation, Refusal>> + Send>>;

enum Phase {
    Unreserved,
    Reserving(Reserving),
    Reading,
}

/// A request body under its route's rules (see the module comment).
struct GuardedBody {
    inner: Body,
    /// The connection's slot under the caps (none for a router used without `serve`).
    slot: Option<Slot>,
    phase: Phase,
    reservation: Arc<Mutex<Option<Reservation>>>,
    received: usize,
    idle: Pin<Box<Sleep>>,
    deadline: Pin<Box<Sleep>>,
    rules: BodyRules,
}

type Polled = Poll<Option<Result<Frame<Bytes>, axum::Error>>>;

fn refuse(refusal: BodyRefusal) -> Polled {
    Poll::Ready(Some(Err(axum::Error::new(refusal))))
}

impl GuardedBody {
    fn too_slow(&self) -> Polled {
        refuse(BodyRefusal::TooSlow { seconds: self.rules.whole.as_secs() })
    }

    /// Starts the reservation: the declared length at once (refused over the route's cap), or
    /// nothing yet for a body of unknown length.
    fn start(&mut self) -> Result<(), BodyRefusal> {
        let declared = self.inner.size_hint().exact().map_or(0, |length| usize::try_from(length).unwrap_or(usize::MAX));
        if declared > self.rules.max_bytes {
            return Err(BodyRefusal::TooLarge { limit: self.rules.max_bytes });
        }
        self.phase = match self.slot.take() {
            Some(slot) => Phase::Reserving(Box::pin(async move { slot.reserve_body(declared).await })),
            None => Phase::Reading,
        };
        Ok(())
    }

    /// Counts a chunk: over the cap, or past the reservation with no room to grow, it fails.
    fn charge(&mut self, length: usize) -> Result<(), BodyRefusal> {
        self.received = self.received.saturating_add(length);
        if self.received > self.rules.max_bytes {
            return Err(BodyRefusal::TooLarge { limit: self.rules.max_bytes });
        }
        let mut reservation = self.reservation.lock().unwrap_or_else(PoisonError::into_inner);
        match reservation.as_mut() {
            Some(held) if self.received > held.bytes() => {
                held.grow(self.received - held.bytes()).map_err(BodyRefusal::Busy)
            }
            _ => Ok(()),
        }
    }

    fn poll_reserved(&mut self, context: &mut Context<'_>) -> Poll<Result<(), BodyRefusal>> {
        loop {
            match &mut self.phase {
                Phase::Unreserved => self.start()?,
                Phase::Reserving(reserving) => {
                    let reservation = std::task::ready!(reserving.as_mut().poll(context)).map_err(BodyRefusal::Busy)?;
                    *self.reservation.lock().unwrap_or_else(PoisonError::into_inner) = Some(reservation);
                    self.phase = Phase::Reading;
                    // The wait for room is the shim's, not a pause of the client's.
                    self.idle.as_mut().reset(Instant::now() + self.rules.idle);
                }
                Phase::Reading => return Poll::Ready(Ok(())),
            }
        }
    }
}

impl HttpBody for GuardedBody {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(self: Pin<&mut Self>, context: &mut Context<'_>) -> Polled {
        let this = self.get_mut();
        // Checked before reading too: a client that trickles just fast enough that every poll
        // finds a chunk must still be cut at the deadline.
        if this.deadline.is_elapsed() {
            return this.too_slow();
        }
        match this.poll_reserved(context) {
            Poll::Ready(Ok(())) => {}
            Poll::Ready(Err(refusal)) => return refuse(refusal),
            Poll::Pending => {
                return if this.deadline.as_mut().poll(context).is_ready() { this.too_slow() } else { Poll::Pending };
            }
        }
        match Pin::new(&mut this.inner).poll_frame(context) {
            Poll::Ready(Some(Ok(frame))) => {
                this.idle.as_mut().reset(Instant::now() + this.rules.idle);
                let length = frame.data_ref().map_or(0, Bytes::len);
                match this.charge(length) {
                    Ok(()) => Poll::Ready(Some(Ok(frame))),
                    Err(refusal) => refuse(refusal),
                }
            }
            Poll::Ready(other) => Poll::Ready(other),
            Poll::Pending => {
                if this.deadline.as_mut().poll(context).is_ready() {
                    return this.too_slow();
                }
                match this.idle.as_mut().poll(context) {
                    Poll::Ready(()) => refuse(BodyRefusal::Stalled { seconds: this.rules.idle.as_secs() }),
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
