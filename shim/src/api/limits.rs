//! Connection admission: how many connections the shim serves at once, in total and per client
//! address, so that a crowd of slow or idle clients cannot use up its file descriptors and
//! starve the agents' metadata polls. See docs/http-api.md ("Limits").
//!
//! A connection is *active* from accept until it closes, except while one of its requests is
//! held as a metadata long-poll: then it counts as *held* instead. The two are capped
//! separately because they cost different things: an active connection is a client sending (or
//! about to send) a request, bounded in time by the head, body and idle deadlines but not in
//! number by anything else; a held long-poll is an authenticated agent waiting for a change, and
//! a fleet keeps one per server (the fleet benchmark parks 10,000 from one address). So the
//! per-address cap counts active connections only, and the held ones have their own caps
//! (`held`: per server, then in all). A new connection over the per-address cap is answered 503
//! at once and closed without reading it; one over the global cap first makes room by closing
//! the oldest connection that has not yet sent a whole request head (a slowloris' connections
//! are those), and is refused only when there is none. The gate also owns the request-body
//! budget every admitted connection draws on (`budget`).

use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use tokio_util::sync::CancellationToken;

use super::budget::{BodyBudget, BodyBudgetLimits, CapabilityBodies, CapabilityBody, Reservation};
pub use super::caps::{PeerKey, Refusal};
use super::held::{HeldPolls, PollEnd};

/// The caps; see the module comment for what each counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnectionLimits {
    /// Active connections (all client addresses together).
    pub max_connections: usize,
    /// Active connections from one client address.
    pub max_connections_per_peer: usize,
    /// Metadata long-polls held at once.
    pub max_long_polls: usize,
}

/// File descriptors kept for everything but client connections (database, WAL, log, listener,
/// the connections being accepted and refused).
const RESERVED_FILES: u64 = 64;
/// One address may hold at most this fraction of the active connections, whatever the open-file
/// limit made of the global cap: an attacker needs this many addresses to fill it.
const PEER_FRACTION: usize = 8;
/// Below this open-file limit the caps would be too small to serve a fleet and its operator at
/// once (`serve` refuses to start).
pub const MIN_OPEN_FILES: u64 = 256;

impl ConnectionLimits {
    /// Far above what a fleet's agents keep active between their long-polls and signals.
    pub const DEFAULT_MAX_CONNECTIONS: usize = 8192;
    /// Room for a fleet behind one NAT address whose agents all signal at once, a few times
    /// over; an attacker needs eight addresses to fill the global cap.
    pub const DEFAULT_MAX_CONNECTIONS_PER_PEER: usize = Self::DEFAULT_MAX_CONNECTIONS / PEER_FRACTION;
    /// Room for the fleet benchmark's 10,000 agents and as many more.
    pub const DEFAULT_MAX_LONG_POLLS: usize = 20_000;

    /// The caps, lowered where needed so that every connection they admit has a file
    /// descriptor under `open_files` (the process's soft `RLIMIT_NOFILE`): active connections
    /// first (they are what every request needs), long-polls get what is left; one address keeps
    /// at most an eighth of the active connections.
    pub fn fit_to_open_files(self, open_files: u64) -> ConnectionLimits {
        let budget = usize::try_from(open_files.saturating_sub(RESERVED_FILES)).unwrap_or(usize::MAX).max(2);
        let max_connections = self.max_connections.min(budget / 2).max(1);
        ConnectionLimits {
            max_connections,
            max_connections_per_peer: self.max_connections_per_peer.min(max_connections / PEER_FRACTION).max(1),
            max_long_polls: self.max_long_polls.min(budget - max_connections).max(1),
        }
    }
}

impl Default for ConnectionLimits {
    fn default() -> ConnectionLimits {
        ConnectionLimits {
            max_connections: Self::DEFAULT_MAX_CONNECTIONS,
            max_connections_per_peer: Self::DEFAULT_MAX_CONNECTIONS_PER_PEER,
            max_long_polls: Self::DEFAULT_MAX_LONG_POLLS,
        }
    }
}

/// The counters every connection is admitted through (one per listener), and the request-body
/// budget its requests draw on.
#[derive(Debug)]
pub(super) struct Gate {
    limits: ConnectionLimits,
    counts: Mutex<Counts>,
    bodies: Arc<BodyBudget>,
    capability_bodies: Arc<CapabilityBodies>,
}

#[derive(Debug, Default)]
struct Counts {
    active: usize,
    active_by_peer: HashMap<PeerKey, usize>,
    /// Admitted connections that have not sent a whole request head yet, oldest first: what a
    /// full gate closes to make room.
    awaiting_head: BTreeMap<u64, Headless>,
    next_connection: u64,
    polls: HeldPolls,
}

/// A connection without a request head yet, as the gate closes it.
#[derive(Debug)]
struct Headless {
    peer: PeerKey,
    close: CancellationToken,
    released: Arc<AtomicBool>,
}

impl Gate {
    pub(super) fn new(limits: ConnectionLimits, body_limits: BodyBudgetLimits) -> Arc<Gate> {
        Arc::new(Gate {
            limits,
            counts: Mutex::default(),
            bodies: BodyBudget::new(body_limits),
            capability_bodies: Arc::default(),
        })
    }

    /// Counts a new connection from `peer` as active, or says which cap it is over. At the
    /// global cap the oldest connection without a request head is closed to make room.
    pub(super) fn admit(self: &Arc<Gate>, address: IpAddr) -> Result<Admission, Refusal> {
        let peer = PeerKey::of(address);
        let mut counts = self.counts();
        if counts.active_by_peer.get(&peer).copied().unwrap_or(0) >= self.limits.max_connections_per_peer {
            return Err(Refusal::PeerConnections { peer, limit: self.limits.max_connections_per_peer });
        }
        if counts.active >= self.limits.max_connections && !self.close_oldest_headless(&mut counts) {
            return Err(Refusal::Connections { limit: self.limits.max_connections });
        }
        *counts.active_by_peer.entry(peer).or_default() += 1;
        counts.active += 1;
        let id = counts.next_connection;
        counts.next_connection += 1;
        let close = CancellationToken::new();
        let released = Arc::new(AtomicBool::new(false));
        counts.awaiting_head.insert(id, Headless { peer, close: close.clone(), released: Arc::clone(&released) });
        let admitted = Admitted { gate: Arc::clone(self), peer, id, released, head_seen: AtomicBool::new(false) };
        Ok(Admission { slot: Slot(Arc::new(admitted)), closed: close })
    }

    /// Closes the oldest connection that has not sent a request head and stops counting it;
    /// false when there is none.
    fn close_oldest_headless(&self, counts: &mut Counts) -> bool {
        let Some((_, oldest)) = counts.awaiting_head.pop_first() else { return false };
        oldest.released.store(true, Ordering::Relaxed);
        release_active(counts, oldest.peer);
        oldest.close.cancel();
        true
    }

    /// Active and held connections now.
    #[cfg(test)]
    pub(super) fn counts_now(&self) -> (usize, usize) {
        let counts = self.counts();
        (counts.active, counts.polls.held())
    }

    fn counts(&self) -> MutexGuard<'_, Counts> {
        // Every update is a few integer and map operations that cannot panic half-way.
        self.counts.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

fn release_active(counts: &mut Counts, peer: PeerKey) {
    counts.active = counts.active.saturating_sub(1);
    if let Some(from_peer) = counts.active_by_peer.get_mut(&peer) {
        *from_peer = from_peer.saturating_sub(1);
        if *from_peer == 0 {
            counts.active_by_peer.remove(&peer);
        }
    }
}

/// An admitted connection: its slot, and the token the gate cancels to close it (only while
/// it has sent no request head).
pub(super) struct Admission {
    pub(super) slot: Slot,
    pub(super) closed: CancellationToken,
}

/// An admitted connection (a request extension, shared by its requests); released when the
/// connection and its last request are gone.
#[derive(Debug, Clone)]
pub(super) struct Slot(Arc<Admitted>);

#[derive(Debug)]
struct Admitted {
    gate: Arc<Gate>,
    peer: PeerKey,
    id: u64,
    /// Set (under the gate's lock) once the gate no longer counts this connection.
    released: Arc<AtomicBool>,
    head_seen: AtomicBool,
}

impl Drop for Admitted {
    fn drop(&mut self) {
        let mut counts = self.gate.counts();
        counts.awaiting_head.remove(&self.id);
        if !self.released.swap(true, Ordering::Relaxed) {
            release_active(&mut counts, self.peer);
        }
    }
}

impl Slot {
    /// Marks that the connection sent a whole request head: from now on the gate never closes
    /// it to make room.
    pub(super) fn head_received(&self) {
        if !self.0.head_seen.swap(true, Ordering::Relaxed) {
            self.0.gate.counts().awaiting_head.remove(&self.0.id);
        }
    }

    /// Whether the connection sent a whole request head yet.
    pub(super) fn has_sent_a_head(&self) -> bool {
        self.0.head_seen.load(Ordering::Relaxed)
    }

    /// The client address the connection counts against.
    pub(super) fn peer(&self) -> PeerKey {
        self.0.peer
    }

    /// Moves the connection from active to held for as long as the returned guard lives, as
    /// one of `server`'s long-polls; refused when the caps say so (see `held`).
    pub(super) fn hold(&self, server: &str) -> Result<Held, Refusal> {
        let gate = &self.0.gate;
        let mut counts = gate.counts();
        let (sequence, end) = counts.polls.admit(server, gate.limits.max_long_polls)?;
        release_active(&mut counts, self.0.peer);
        Ok(Held { slot: self.clone(), server: server.to_string(), sequence, end })
    }

    /// Reserves `bytes` of the body budget for a request of this connection (waiting a while
    /// for room).
    pub(super) async fn reserve_body(&self, bytes: usize) -> Result<Reservation, Refusal> {
        self.0.gate.bodies.reserve(self.0.peer, bytes).await
    }

    /// One of the few bodies a capability token may have in flight at once.
    pub(super) fn capability_body(&self, token: &str) -> Result<CapabilityBody, Refusal> {
        CapabilityBodies::enter(&self.0.gate.capability_bodies, token)
    }
}

/// A held long-poll; dropping it makes the connection active again (over the caps if need be:
/// a connection already served is never cut for them).
#[derive(Debug)]
pub(super) struct Held {
    slot: Slot,
    server: String,
    sequence: u64,
    end: PollEnd,
}

impl Held {
    /// Cancelled when the gate ends this poll early (a newer poll of the same server took its
    /// place): answer it as unchanged.
    pub(super) fn ended_early(&self) -> &CancellationToken {
        self.end.token()
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        let gate = &self.slot.0.gate;
        let mut counts = gate.counts();
        counts.polls.release(&self.server, self.sequence);
        counts.active += 1;
        *counts.active_by_peer.entry(self.slot.0.peer).or_default() += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn address(last: u8) -> IpAddr {
        IpAddr::from([127, 0, 0, last])
    }

    fn gate(max_connections: usize, max_connections_per_peer: usize, max_long_polls: usize) -> Arc<Gate> {
        let limits = ConnectionLimits { max_connections, max_connections_per_peer, max_long_polls };
        Gate::new(limits, BodyBudgetLimits::default())
    }

    /// Admits and marks the head received, as a served request does.
    fn served(gate: &Arc<Gate>, last: u8) -> Slot {
        let slot = gate.admit(address(last)).unwrap().slot;
        slot.head_received();
        slot
    }

    #[test]
    fn caps_count_active_connections_globally_and_per_peer() {
        let gate = gate(3, 2, 1);
        let first = served(&gate, 1);
        let _second = served(&gate, 1);
        let refusal = gate.admit(address(1)).err().unwrap();
        assert_eq!(refusal, Refusal::PeerConnections { peer: PeerKey::of(address(1)), limit: 2 });
        assert_eq!(refusal.to_string(), "too many connections from 127.0.0.1 (limit 2); retry later");
        let _third = served(&gate, 2);
        assert_eq!(gate.admit(address(3)).err().unwrap(), Refusal::Connections { limit: 3 });
        drop(first);
        assert!(gate.admit(address(1)).is_ok());
        assert_eq!(gate.counts_now(), (2, 0), "the refused and dropped connections are not counted");
    }

    #[test]
    fn a_full_gate_closes_the_oldest_connection_without_a_request_head() {
        let gate = gate(3, 3, 1);
        let oldest = gate.admit(address(1)).unwrap();
        let _served = served(&gate, 2);
        let younger = gate.admit(address(1)).unwrap();
        let newcomer = gate.admit(address(3)).expect("room made by closing a headless connection");
        assert!(oldest.closed.is_cancelled(), "the oldest headless connection is closed");
        assert!(!younger.closed.is_cancelled());
        assert_eq!(gate.counts_now(), (3, 0));
        drop(oldest);
        assert_eq!(gate.counts_now(), (3, 0), "a closed connection is not released twice");
        younger.slot.head_received();
        newcomer.slot.head_received();
        assert_eq!(gate.admit(address(4)).err().unwrap(), Refusal::Connections { limit: 3 });
    }

    #[test]
    fn held_long_polls_free_their_active_slot_and_have_their_own_cap() {
        let gate = gate(1, 1, 1);
        let polling = served(&gate, 1);
        let held = polling.hold("vm1").unwrap();
        assert_eq!(gate.counts_now(), (0, 1));
        let other = served(&gate, 1);
        assert_eq!(other.hold("vm2").unwrap_err(), Refusal::LongPolls { limit: 1 });
        drop(held);
        assert_eq!(gate.counts_now(), (2, 0), "an answered long-poll is active again, over the cap");
        drop((polling, other));
        assert_eq!(gate.counts_now(), (0, 0));
    }

    #[test]
    fn ipv6_peers_are_counted_by_their_64_prefix() {
        let key = |text: &str| PeerKey::of(text.parse().unwrap());
        assert_eq!(key("2001:db8:1:2:aaaa::1"), key("2001:db8:1:2:bbbb::2"));
        assert_ne!(key("2001:db8:1:2::1"), key("2001:db8:1:3::1"));
        assert_eq!(key("2001:db8:1:2:aaaa::1").to_string(), "2001:db8:1:2::/64");
        assert_eq!(key("::ffff:10.1.2.3"), key("10.1.2.3"));
        assert_eq!(key("10.1.2.3").to_string(), "10.1.2.3");
    }

    #[test]
    fn limits_fit_under_the_open_file_limit_with_an_eighth_per_address() {
        let defaults = ConnectionLimits::default();
        assert_eq!(defaults.max_connections_per_peer, 1024);
        assert_eq!(defaults.fit_to_open_files(1 << 20), defaults);
        let fitted = defaults.fit_to_open_files(1024);
        assert_eq!(fitted.max_connections, 480);
        assert_eq!(fitted.max_connections_per_peer, 60, "one address keeps an eighth, not the whole cap");
        assert_eq!(fitted.max_long_polls, 480);
        let low = defaults.fit_to_open_files(2100);
        assert_eq!(low.max_connections_per_peer, low.max_connections / 8);
        let fleet = defaults.fit_to_open_files(20_000);
        assert!(fleet.max_long_polls >= 10_000, "{fleet:?}");
        assert_eq!(fleet.max_connections, 8192);
    }
}
