//! Login throttling per client address (`PeerKey`: an IPv4 address or an IPv6 /64), so the
//! admin token cannot be guessed at the rate the shim answers. Each address has one login
//! attempt checked at a time, and after `MAX_FAILURES` failed ones in `WINDOW` it is refused
//! (429 with `Retry-After`) for `LOCKOUT`, whatever token it sends; a success clears its record.
//! At most `MAX_TRACKED` addresses are remembered: when that many are, the records that no
//! longer hold anything back are dropped, and if none can go, the addresses not tracked share
//! one record, so a spray of addresses cannot grow the map (it can only slow every untracked
//! address's logins to the rate of one). In memory, per process: each replica counts its own.
//! See docs/http-api.md, "The web view's routes".

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use crate::api::PeerKey;

/// Failed logins an address may make within `WINDOW` before it is locked out.
pub(crate) const MAX_FAILURES: u32 = 5;
/// The window failures are counted in, from the first one.
pub(crate) const WINDOW: Duration = Duration::from_secs(60);
/// How long an address that reached `MAX_FAILURES` is refused.
pub(crate) const LOCKOUT: Duration = Duration::from_secs(60);
/// Addresses remembered at most (a record is a few dozen bytes).
pub(crate) const MAX_TRACKED: usize = 4096;

/// Why an attempt is refused before its token is looked at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Refused {
    /// Too many failures: refused until `retry_after` has passed.
    LockedOut { retry_after: Duration },
    /// Another attempt from the same address (or, when the map is full, from any untracked
    /// one) is being checked.
    Busy,
}

/// Whose record an attempt counts in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Holder {
    Peer(PeerKey),
    /// The record the untracked addresses share while `MAX_TRACKED` are tracked.
    Untracked,
}

/// How an attempt ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Outcome {
    Failed,
    Succeeded,
    /// The token was never compared (an unreadable body): counts for nothing.
    Abandoned,
}

#[derive(Debug, Default, Clone, Copy)]
struct Record {
    failures: u32,
    window_start: Option<Instant>,
    locked_until: Option<Instant>,
    in_flight: bool,
}

impl Record {
    /// Holds nothing back at `now`: it can be forgotten.
    fn is_idle(&self, now: Instant) -> bool {
        !self.in_flight
            && self.locked_until.is_none_or(|until| until <= now)
            && self.window_start.is_none_or(|start| now.duration_since(start) >= WINDOW)
    }
}

#[derive(Debug, Default)]
struct Records {
    peers: HashMap<PeerKey, Record>,
    untracked: Record,
}

impl Records {
    fn record(&mut self, holder: Holder) -> &mut Record {
        match holder {
            Holder::Peer(peer) => self.peers.entry(peer).or_default(),
            Holder::Untracked => &mut self.untracked,
        }
    }

    /// Where `peer`'s attempt counts: its own record, unless it has none and no room is left.
    fn holder_for(&mut self, peer: PeerKey, now: Instant) -> Holder {
        if self.peers.contains_key(&peer) {
            return Holder::Peer(peer);
        }
        if self.peers.len() >= MAX_TRACKED {
            self.peers.retain(|_, record| !record.is_idle(now));
        }
        if self.peers.len() >= MAX_TRACKED { Holder::Untracked } else { Holder::Peer(peer) }
    }
}

#[derive(Debug, Default)]
pub(super) struct LoginThrottle {
    records: Mutex<Records>,
}

impl LoginThrottle {
    /// Starts an attempt from `peer`, or refuses it; an attempt begun must be `finish`ed.
    pub(super) fn begin(&self, peer: PeerKey, now: Instant) -> Result<Holder, Refused> {
        let mut records = self.lock();
        let holder = records.holder_for(peer, now);
        let record = records.record(holder);
        if let Some(until) = record.locked_until.filter(|until| *until > now) {
            return Err(Refused::LockedOut { retry_after: until - now });
        }
        if record.in_flight {
            return Err(Refused::Busy);
        }
        record.in_flight = true;
        Ok(holder)
    }

    /// Ends an attempt `begin` let through; true when this failure locked its address out.
    pub(super) fn finish(&self, holder: Holder, outcome: Outcome, now: Instant) -> bool {
        let mut records = self.lock();
        let record = records.record(holder);
        record.in_flight = false;
        let mut locked = false;
        match outcome {
            Outcome::Abandoned => {}
            Outcome::Succeeded => *record = Record::default(),
            Outcome::Failed => {
                if record.window_start.is_none_or(|start| now.duration_since(start) >= WINDOW) {
                    record.window_start = Some(now);
                    record.failures = 0;
                }
                record.failures += 1;
                if record.failures >= MAX_FAILURES {
                    record.locked_until = Some(now + LOCKOUT);
                    record.failures = 0;
                    record.window_start = None;
                    locked = true;
                }
            }
        }
        if let Holder::Peer(peer) = holder {
            if records.peers.get(&peer).is_some_and(|record| record.is_idle(now)) {
                records.peers.remove(&peer);
            }
        }
        locked
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Records> {
        // Every update is a few assignments that cannot panic half-way.
        self.records.lock().unwrap_or_else(PoisonError::into_inner)
    }

    #[cfg(test)]
    fn tracked(&self) -> usize {
        self.lock().peers.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn peer(index: u32) -> PeerKey {
        PeerKey::of(std::net::IpAddr::from(std::net::Ipv4Addr::from(0x0a00_0000 + index)))
    }

    fn fail(throttle: &LoginThrottle, from: PeerKey, now: Instant) -> bool {
        let holder = throttle.begin(from, now).unwrap();
        throttle.finish(holder, Outcome::Failed, now)
    }

    #[test]
    fn an_address_is_locked_out_after_its_failures_and_others_are_not() {
        let throttle = LoginThrottle::default();
        let start = Instant::now();
        for attempt in 1..MAX_FAILURES {
            assert!(!fail(&throttle, peer(1), start), "attempt {attempt}");
        }
        assert!(fail(&throttle, peer(1), start), "the last allowed failure locks the address");
        let later = start + Duration::from_secs(10);
        assert_eq!(throttle.begin(peer(1), later), Err(Refused::LockedOut { retry_after: LOCKOUT - (later - start) }));
        let other = throttle.begin(peer(2), later).expect("another address is not held back");
        throttle.finish(other, Outcome::Succeeded, later);
        let after = start + LOCKOUT;
        let again = throttle.begin(peer(1), after).expect("the lockout ends");
        throttle.finish(again, Outcome::Succeeded, after);
        assert_eq!(throttle.tracked(), 0, "a success leaves nothing behind");
    }

    #[test]
    fn failures_older_than_the_window_are_forgotten_and_unread_attempts_do_not_count() {
        let throttle = LoginThrottle::default();
        let start = Instant::now();
        for _ in 1..MAX_FAILURES {
            fail(&throttle, peer(1), start);
        }
        let holder = throttle.begin(peer(1), start).unwrap();
        assert_eq!(throttle.begin(peer(1), start), Err(Refused::Busy), "one attempt at a time per address");
        assert!(!throttle.finish(holder, Outcome::Abandoned, start));
        assert!(!fail(&throttle, peer(1), start + WINDOW), "a new window");
    }

    #[test]
    fn a_spray_of_addresses_shares_one_record_once_the_map_is_full() {
        let throttle = LoginThrottle::default();
        let now = Instant::now();
        for index in 0..MAX_TRACKED as u32 {
            fail(&throttle, peer(index), now);
        }
        assert_eq!(throttle.tracked(), MAX_TRACKED);
        for index in 0..MAX_FAILURES {
            fail(&throttle, peer(100_000 + index), now);
        }
        assert_eq!(throttle.tracked(), MAX_TRACKED, "the map does not grow");
        assert!(matches!(throttle.begin(peer(200_000), now), Err(Refused::LockedOut { .. })));
        let tracked = throttle.begin(peer(7), now).expect("a tracked address keeps its own record");
        throttle.finish(tracked, Outcome::Abandoned, now);
        let quiet = now + WINDOW;
        let fresh = throttle.begin(peer(300_000), quiet + LOCKOUT).expect("idle records make room again");
        assert_eq!(fresh, Holder::Peer(peer(300_000)));
    }
}
