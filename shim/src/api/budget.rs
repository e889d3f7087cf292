//! The request-body budget: how many bytes of request bodies the shim buffers at once, in all
//! and per client address, and how many bodies one capability token (a signal or handle URL)
//! may have in flight. Without it, N slow connections that each declare and trickle a 1 MiB
//! body pin N MiB (a body is buffered whole before it is parsed). A body's bytes are reserved
//! when its handler starts reading it (so after its credential was checked): its declared
//! `Content-Length` at once, a chunked body as it arrives. A reservation that does not fit waits
//! `wait_for_room` for others to finish, then is refused with 503; a chunked body that outgrows the
//! room left is refused at once. See docs/http-api.md ("Limits").

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::sync::Notify;

use super::caps::{PeerKey, Refusal};
use crate::token::hash_token;

/// The budget's sizes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BodyBudgetLimits {
    /// Bytes of request bodies buffered at once, all clients together.
    pub total_bytes: usize,
    /// Bytes of request bodies buffered at once for one client address.
    pub per_peer_bytes: usize,
    /// How long a body waits for room before it is refused with 503.
    pub wait_for_room: Duration,
}

impl BodyBudgetLimits {
    /// 32 bodies of the largest size at once: thousands of agents' signals (a few KiB each).
    pub const DEFAULT_TOTAL_BYTES: usize = 32 << 20;
    /// Eight of the largest bodies from one address; four addresses to fill the whole budget.
    pub const DEFAULT_PER_PEER_BYTES: usize = 8 << 20;
    /// Others' bodies arrive within the body deadline; most far sooner.
    pub const DEFAULT_WAIT_FOR_ROOM: Duration = Duration::from_secs(5);
}

impl Default for BodyBudgetLimits {
    fn default() -> BodyBudgetLimits {
        BodyBudgetLimits {
            total_bytes: Self::DEFAULT_TOTAL_BYTES,
            per_peer_bytes: Self::DEFAULT_PER_PEER_BYTES,
            wait_for_room: Self::DEFAULT_WAIT_FOR_ROOM,
        }
    }
}

/// Request bodies a capability token may have in flight at once (an agent sends one signal per
/// deployment at a time; one more covers a retry racing its first attempt).
pub const MAX_BODIES_PER_TOKEN: usize = 2;

/// The bytes reserved now. One per gate.
#[derive(Debug)]
pub(super) struct BodyBudget {
    limits: BodyBudgetLimits,
    reserved: Mutex<Reserved>,
    freed: Notify,
}

#[derive(Debug, Default)]
struct Reserved {
    total: usize,
    by_peer: HashMap<PeerKey, usize>,
}

impl BodyBudget {
    pub(super) fn new(limits: BodyBudgetLimits) -> Arc<BodyBudget> {
        Arc::new(BodyBudget { limits, reserved: Mutex::default(), freed: Notify::new() })
    }

    /// Reserves `bytes` for `peer`, waiting up to `wait_for_room` for others to free room.
    pub(super) async fn reserve(self: &Arc<Self>, peer: PeerKey, bytes: usize) -> Result<Reservation, Refusal> {
        let deadline = tokio::time::Instant::now() + self.limits.wait_for_room;
        loop {
            // Registered before the attempt, so a release between the two is not missed.
            let freed = self.freed.notified();
            let refusal = match self.try_take(peer, bytes) {
                Ok(()) => return Ok(Reservation { budget: Arc::clone(self), peer, bytes }),
                Err(refusal) => refusal,
            };
            tokio::select! {
                () = freed => {}
                () = tokio::time::sleep_until(deadline) => return Err(refusal),
            }
        }
    }

    fn try_take(&self, peer: PeerKey, bytes: usize) -> Result<(), Refusal> {
        let mut reserved = self.reserved();
        let from_peer = reserved.by_peer.get(&peer).copied().unwrap_or(0);
        if from_peer.saturating_add(bytes) > self.limits.per_peer_bytes {
            return Err(Refusal::PeerBodyBytes { peer, limit: self.limits.per_peer_bytes });
        }
        if reserved.total.saturating_add(bytes) > self.limits.total_bytes {
            return Err(Refusal::BodyBytes { limit: self.limits.total_bytes });
        }
        reserved.total += bytes;
        *reserved.by_peer.entry(peer).or_default() += bytes;
        Ok(())
    }

    fn give_back(&self, peer: PeerKey, bytes: usize) {
        let mut reserved = self.reserved();
        reserved.total = reserved.total.saturating_sub(bytes);
        if let Some(from_peer) = reserved.by_peer.get_mut(&peer) {
            *from_peer = from_peer.saturating_sub(bytes);
            if *from_peer == 0 {
                reserved.by_peer.remove(&peer);
            }
        }
        drop(reserved);
        self.freed.notify_waiters();
    }

    /// Bytes reserved now, in all.
    #[cfg(test)]
    pub(super) fn reserved_now(&self) -> usize {
        self.reserved().total
    }

    fn reserved(&self) -> MutexGuard<'_, Reserved> {
        // Each update is a few integer and map operations that cannot panic half-way.
        self.reserved.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Bytes of the budget held for one request body; given back when dropped.
#[derive(Debug)]
pub(super) struct Reservation {
    budget: Arc<BodyBudget>,
    peer: PeerKey,
    bytes: usize,
}

impl Reservation {
    /// Bytes held.
    pub(super) fn bytes(&self) -> usize {
        self.bytes
    }

    /// Holds `more` bytes as well, now or never (a chunked body growing past its reservation).
    pub(super) fn grow(&mut self, more: usize) -> Result<(), Refusal> {
        self.budget.try_take(self.peer, more)?;
        self.bytes += more;
        Ok(())
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        if self.bytes > 0 {
            self.budget.give_back(self.peer, self.bytes);
        }
    }
}

/// Bodies in flight per capability token, keyed by the token's hash (no token is kept).
#[derive(Debug, Default)]
pub(super) struct CapabilityBodies {
    in_flight: Mutex<HashMap<String, usize>>,
}

impl CapabilityBodies {
    /// Counts one more body for `token`, or refuses beyond `MAX_BODIES_PER_TOKEN`.
    pub(super) fn enter(bodies: &Arc<CapabilityBodies>, token: &str) -> Result<CapabilityBody, Refusal> {
        let key = hash_token(token);
        let mut in_flight = bodies.in_flight();
        let count = in_flight.entry(key.clone()).or_default();
        if *count >= MAX_BODIES_PER_TOKEN {
            return Err(Refusal::TokenBodies { limit: MAX_BODIES_PER_TOKEN });
        }
        *count += 1;
        Ok(CapabilityBody { bodies: Arc::clone(bodies), key })
    }

    fn in_flight(&self) -> MutexGuard<'_, HashMap<String, usize>> {
        self.in_flight.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// One body counted against its token; dropped when its request is done.
#[derive(Debug)]
pub(super) struct CapabilityBody {
    bodies: Arc<CapabilityBodies>,
    key: String,
}

impl Drop for CapabilityBody {
    fn drop(&mut self) {
        let mut in_flight = self.bodies.in_flight();
        if let Some(count) = in_flight.get_mut(&self.key) {
            *count -= 1;
            if *count == 0 {
                in_flight.remove(&self.key);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::net::IpAddr;

    use super::*;

    fn peer(last: u8) -> PeerKey {
        PeerKey::of(IpAddr::from([127, 0, 0, last]))
    }

    fn limits(total_bytes: usize, per_peer_bytes: usize, wait_for_room: Duration) -> BodyBudgetLimits {
        BodyBudgetLimits { total_bytes, per_peer_bytes, wait_for_room }
    }

    #[tokio::test]
    async fn reservations_are_bounded_per_peer_and_in_all() {
        let budget = BodyBudget::new(limits(300, 200, Duration::ZERO));
        let first = budget.reserve(peer(1), 150).await.unwrap();
        let refusal = budget.reserve(peer(1), 100).await.unwrap_err();
        assert_eq!(refusal, Refusal::PeerBodyBytes { peer: peer(1), limit: 200 });
        let _second = budget.reserve(peer(2), 150).await.unwrap();
        assert_eq!(budget.reserve(peer(3), 1).await.unwrap_err(), Refusal::BodyBytes { limit: 300 });
        drop(first);
        assert_eq!(budget.reserved_now(), 150);
        let mut chunked = budget.reserve(peer(3), 0).await.unwrap();
        chunked.grow(100).unwrap();
        assert_eq!(chunked.grow(100).unwrap_err(), Refusal::BodyBytes { limit: 300 });
        assert_eq!(chunked.bytes(), 100);
    }

    #[tokio::test(start_paused = true)]
    async fn a_reservation_waits_for_room_then_gives_up() {
        let budget = BodyBudget::new(limits(100, 100, Duration::from_secs(5)));
        let holder = budget.reserve(peer(1), 100).await.unwrap();
        let waiting = tokio::spawn({
            let budget = Arc::clone(&budget);
            async move { budget.reserve(peer(2), 60).await.map(|held| held.bytes()) }
        });
        tokio::time::sleep(Duration::from_secs(1)).await;
        drop(holder);
        assert_eq!(waiting.await.unwrap(), Ok(60), "served once room was freed");
        let _held = budget.reserve(peer(1), 60).await.unwrap();
        let started = tokio::time::Instant::now();
        assert!(budget.reserve(peer(2), 60).await.is_err());
        assert_eq!(started.elapsed(), Duration::from_secs(5), "refused once its wait for room was over");
    }

    #[test]
    fn a_token_has_at_most_two_bodies_in_flight() {
        let bodies = Arc::new(CapabilityBodies::default());
        let first = CapabilityBodies::enter(&bodies, "token-a").unwrap();
        let _second = CapabilityBodies::enter(&bodies, "token-a").unwrap();
        let refusal = CapabilityBodies::enter(&bodies, "token-a").unwrap_err();
        assert_eq!(refusal, Refusal::TokenBodies { limit: 2 });
        assert!(CapabilityBodies::enter(&bodies, "token-b").is_ok(), "other tokens are not affected");
        drop(first);
        assert!(CapabilityBodies::enter(&bodies, "token-a").is_ok());
        assert!(!bodies.in_flight().keys().any(|key| key.contains("token")), "only hashes are kept");
    }
}
