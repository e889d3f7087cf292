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
//! per-address cap counts active connections only, and the held ones have their own global cap.
//! A new connection over a cap is answered 503 at once and closed without reading it; a
//! long-poll over the held cap is answered 503 (the agent retries after its backoff).

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

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

impl ConnectionLimits {
    /// Far above what a fleet's agents keep active between their long-polls and signals.
    pub const DEFAULT_MAX_CONNECTIONS: usize = 8192;
    /// Room for a fleet behind one NAT address whose agents all signal at once, a few times
    /// over; an attacker needs eight addresses to fill the global cap.
    pub const DEFAULT_MAX_CONNECTIONS_PER_PEER: usize = 1024;
    /// Room for the fleet benchmark's 10,000 agents and as many more.
    pub const DEFAULT_MAX_LONG_POLLS: usize = 20_000;

    /// The caps, lowered where needed so that every connection they admit has a file
    /// descriptor under `open_files` (the process's soft `RLIMIT_NOFILE`): active connections
    /// first (they are what every request needs), long-polls get what is left.
    pub fn fit_to_open_files(self, open_files: u64) -> ConnectionLimits {
        let budget = usize::try_from(open_files.saturating_sub(RESERVED_FILES)).unwrap_or(usize::MAX).max(2);
        let max_connections = self.max_connections.min(budget / 2).max(1);
        ConnectionLimits {
            max_connections,
            max_connections_per_peer: self.max_connections_per_peer.min(max_connections),
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

/// Why a connection or a long-poll was refused; the text is the 503's message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("too many connections to the shim (limit {limit}); retry later")]
    Connections { limit: usize },
    #[error("too many connections from {peer} (limit {limit}); retry later")]
    PeerConnections { peer: PeerKey, limit: usize },
    #[error("too many metadata long-polls held (limit {limit}); retry later")]
    LongPolls { limit: usize },
}

/// What the per-address cap counts by: an IPv4 address, or an IPv6 address's /64 prefix (one
/// host is routinely given a whole /64, so per address would be no cap at all).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PeerKey(IpAddr);

impl PeerKey {
    pub fn of(address: IpAddr) -> PeerKey {
        match address {
            IpAddr::V4(v4) => PeerKey(IpAddr::V4(v4)),
            IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
                Some(v4) => PeerKey(IpAddr::V4(v4)),
                None => {
                    let prefix = u128::from(v6) & !((1u128 << 64) - 1);
                    PeerKey(IpAddr::V6(prefix.into()))
                }
            },
        }
    }
}

impl std::fmt::Display for PeerKey {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            IpAddr::V4(v4) => write!(formatter, "{v4}"),
            IpAddr::V6(v6) => write!(formatter, "{v6}/64"),
        }
    }
}

/// The counters every connection is admitted through (one per listener).
#[derive(Debug)]
pub(super) struct Gate {
    limits: ConnectionLimits,
    counts: Mutex<Counts>,
}

#[derive(Debug, Default)]
struct Counts {
    active: usize,
    active_by_peer: HashMap<PeerKey, usize>,
    held: usize,
}

impl Gate {
    pub(super) fn new(limits: ConnectionLimits) -> Arc<Gate> {
        Arc::new(Gate { limits, counts: Mutex::default() })
    }

    /// Counts a new connection from `peer` as active, or says which cap it is over.
    pub(super) fn admit(self: &Arc<Gate>, address: IpAddr) -> Result<Slot, Refusal> {
        let peer = PeerKey::of(address);
        let mut counts = self.counts();
        if counts.active >= self.limits.max_connections {
            return Err(Refusal::Connections { limit: self.limits.max_connections });
        }
        let from_peer = counts.active_by_peer.entry(peer).or_default();
        if *from_peer >= self.limits.max_connections_per_peer {
            return Err(Refusal::PeerConnections { peer, limit: self.limits.max_connections_per_peer });
        }
        *from_peer += 1;
        counts.active += 1;
        Ok(Slot(Arc::new(Admitted { gate: Arc::clone(self), peer })))
    }

    /// Active and held connections now.
    #[cfg(test)]
    pub(super) fn counts_now(&self) -> (usize, usize) {
        let counts = self.counts();
        (counts.active, counts.held)
    }

    fn counts(&self) -> MutexGuard<'_, Counts> {
        // Every update is a few integer operations that cannot panic half-way.
        self.counts.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn release_active(&self, counts: &mut Counts, peer: PeerKey) {
        counts.active = counts.active.saturating_sub(1);
        if let Some(from_peer) = counts.active_by_peer.get_mut(&peer) {
            *from_peer = from_peer.saturating_sub(1);
            if *from_peer == 0 {
                counts.active_by_peer.remove(&peer);
            }
        }
    }
}

/// An admitted connection (a request extension, shared by its requests); released when the
/// connection and its last request are gone.
#[derive(Debug, Clone)]
pub(super) struct Slot(Arc<Admitted>);

#[derive(Debug)]
struct Admitted {
    gate: Arc<Gate>,
    peer: PeerKey,
}

impl Drop for Admitted {
    fn drop(&mut self) {
        let mut counts = self.gate.counts();
        self.gate.release_active(&mut counts, self.peer);
    }
}

impl Slot {
    /// The client address the connection counts against.
    pub(super) fn peer(&self) -> PeerKey {
        self.0.peer
    }

    /// Moves the connection from active to held for as long as the returned guard lives, or
    /// refuses when the held cap is reached.
    pub(super) fn hold(&self) -> Result<Held, Refusal> {
        let gate = &self.0.gate;
        let mut counts = gate.counts();
        if counts.held >= gate.limits.max_long_polls {
            return Err(Refusal::LongPolls { limit: gate.limits.max_long_polls });
        }
        counts.held += 1;
        gate.release_active(&mut counts, self.0.peer);
        Ok(Held { slot: self.clone() })
    }
}

/// A held long-poll; dropping it makes the connection active again (over the caps if need be:
/// a connection already served is never cut for them).
#[derive(Debug)]
pub(super) struct Held {
    slot: Slot,
}

impl Drop for Held {
    fn drop(&mut self) {
        let gate = &self.slot.0.gate;
        let mut counts = gate.counts();
        counts.held = counts.held.saturating_sub(1);
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

    #[test]
    fn caps_count_active_connections_globally_and_per_peer() {
        let gate = Gate::new(ConnectionLimits { max_connections: 3, max_connections_per_peer: 2, max_long_polls: 1 });
        let first = gate.admit(address(1)).unwrap();
        let _second = gate.admit(address(1)).unwrap();
        let refusal = gate.admit(address(1)).unwrap_err();
        assert_eq!(refusal, Refusal::PeerConnections { peer: PeerKey::of(address(1)), limit: 2 });
        assert_eq!(refusal.to_string(), "too many connections from 127.0.0.1 (limit 2); retry later");
        let _third = gate.admit(address(2)).unwrap();
        assert_eq!(gate.admit(address(3)).unwrap_err(), Refusal::Connections { limit: 3 });
        drop(first);
        assert!(gate.admit(address(1)).is_ok());
        assert_eq!(gate.counts_now(), (2, 0), "the refused and dropped connections are not counted");
    }

    #[test]
    fn held_long_polls_free_their_active_slot_and_have_their_own_cap() {
        let gate = Gate::new(ConnectionLimits { max_connections: 1, max_connections_per_peer: 1, max_long_polls: 1 });
        let polling = gate.admit(address(1)).unwrap();
        let held = polling.hold().unwrap();
        assert_eq!(gate.counts_now(), (0, 1));
        let other = gate.admit(address(1)).expect("a held long-poll leaves its active slot free");
        assert_eq!(other.hold().unwrap_err(), Refusal::LongPolls { limit: 1 });
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
    fn limits_fit_under_the_open_file_limit() {
        let defaults = ConnectionLimits::default();
        assert_eq!(defaults.fit_to_open_files(1 << 20), defaults);
        let fitted = defaults.fit_to_open_files(1024);
        assert_eq!(fitted.max_connections, 480);
        assert_eq!(fitted.max_connections_per_peer, 480);
        assert_eq!(fitted.max_long_polls, 480);
        let fleet = defaults.fit_to_open_files(20_000);
        assert!(fleet.max_long_polls >= 10_000, "{fleet:?}");
        assert_eq!(fleet.max_connections, 8192);
    }
}
