//! The metadata long-polls held at once, per server and in all. An agent keeps one long-poll
//! open (two for a moment while it reconnects), so a server holds at most
//! `MAX_LONG_POLLS_PER_SERVER`: a further one ends that server's oldest, which answers 304 (the
//! agent polls again). That applies before the global cap, so one server's token cannot take
//! the slots every other agent needs. The global cap admits one poll per server first: when it
//! is reached, a server holding none still gets in by ending another server's second poll;
//! only a server that already holds one is refused (503).

use std::collections::{BTreeMap, HashMap, VecDeque};

use tokio_util::sync::CancellationToken;

use super::caps::Refusal;

/// Long-polls one server may hold at once.
pub const MAX_LONG_POLLS_PER_SERVER: usize = 2;

/// The held long-polls, by server. Guarded by the gate's lock.
#[derive(Debug, Default)]
pub(super) struct HeldPolls {
    held: usize,
    by_server: HashMap<String, VecDeque<HeldPoll>>,
    /// Every poll that is not its server's newest, by sequence (oldest first): what a server
    /// without a poll may end when the global cap is reached.
    spare: BTreeMap<u64, String>,
    next_sequence: u64,
}

#[derive(Debug)]
struct HeldPoll {
    sequence: u64,
    end: CancellationToken,
}

/// How the gate ends a held poll early.
#[derive(Debug)]
pub(super) struct PollEnd(CancellationToken);

impl PollEnd {
    /// Cancelled when the poll is ended early.
    pub(super) fn token(&self) -> &CancellationToken {
        &self.0
    }
}

impl HeldPolls {
    /// Registers a new long-poll of `server`, ending another poll where the rules above say
    /// so; its sequence number (to release it) and how it may be ended.
    pub(super) fn admit(&mut self, server: &str, max_long_polls: usize) -> Result<(u64, PollEnd), Refusal> {
        let holding = self.by_server.get(server).map_or(0, VecDeque::len);
        if holding >= MAX_LONG_POLLS_PER_SERVER {
            self.end_oldest_of(server);
        } else if self.held >= max_long_polls {
            let Some((_, other)) = self.spare.first_key_value().filter(|_| holding == 0) else {
                return Err(Refusal::LongPolls { limit: max_long_polls });
            };
            let other = other.clone();
            self.end_oldest_of(&other);
        }
        let sequence = self.next_sequence;
        self.next_sequence += 1;
        let end = CancellationToken::new();
        self.by_server.entry(server.to_string()).or_default().push_back(HeldPoll { sequence, end: end.clone() });
        self.held += 1;
        self.refresh_spare(server);
        Ok((sequence, PollEnd(end)))
    }

    /// Forgets a poll that ended (answered, or its client left); nothing when the gate had
    /// already ended it.
    pub(super) fn release(&mut self, server: &str, sequence: u64) {
        let Some(polls) = self.by_server.get_mut(server) else { return };
        let Some(position) = polls.iter().position(|poll| poll.sequence == sequence) else { return };
        polls.remove(position);
        self.held -= 1;
        self.spare.remove(&sequence);
        self.refresh_spare(server);
    }

    /// Long-polls held now.
    #[cfg(test)]
    pub(super) fn held(&self) -> usize {
        self.held
    }

    fn end_oldest_of(&mut self, server: &str) {
        let Some(oldest) = self.by_server.get_mut(server).and_then(VecDeque::pop_front) else { return };
        oldest.end.cancel();
        self.held -= 1;
        self.spare.remove(&oldest.sequence);
        self.refresh_spare(server);
    }

    /// Keeps `spare` in step with `server`'s polls (all but its newest), and drops the
    /// server's entry once it holds none.
    fn refresh_spare(&mut self, server: &str) {
        let Some(polls) = self.by_server.get(server) else { return };
        if polls.is_empty() {
            self.by_server.remove(server);
            return;
        }
        for poll in polls.iter().take(polls.len() - 1) {
            self.spare.insert(poll.sequence, server.to_string());
        }
        if let Some(newest) = polls.back() {
            self.spare.remove(&newest.sequence);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn is_ended(end: &PollEnd) -> bool {
        end.0.is_cancelled()
    }

    #[test]
    fn a_server_holds_at_most_two_polls_and_a_third_ends_its_oldest() {
        let mut polls = HeldPolls::default();
        let (_, first) = polls.admit("vm1", 100).unwrap();
        let (_, second) = polls.admit("vm1", 100).unwrap();
        let (_, third) = polls.admit("vm1", 100).unwrap();
        assert!(is_ended(&first) && !is_ended(&second) && !is_ended(&third));
        assert_eq!(polls.held(), 2);
    }

    #[test]
    fn at_the_global_cap_a_server_without_a_poll_ends_another_servers_second() {
        let mut polls = HeldPolls::default();
        let (_, hog_first) = polls.admit("hog", 3).unwrap();
        let (_, hog_second) = polls.admit("hog", 3).unwrap();
        let (_, _vm1) = polls.admit("vm1", 3).unwrap();
        let (_, vm2) = polls.admit("vm2", 3).expect("a server's first poll gets in");
        assert!(is_ended(&hog_first) && !is_ended(&hog_second), "the hog keeps one poll");
        assert_eq!(polls.held(), 3);
        assert_eq!(polls.admit("vm1", 3).unwrap_err(), Refusal::LongPolls { limit: 3 }, "a second poll never evicts");
        assert_eq!(polls.admit("vm3", 3).unwrap_err(), Refusal::LongPolls { limit: 3 }, "one poll each, no spare");
        assert!(!is_ended(&vm2));
    }

    #[test]
    fn released_and_ended_polls_are_forgotten_once() {
        let mut polls = HeldPolls::default();
        let (first, _) = polls.admit("vm1", 10).unwrap();
        let (second, _) = polls.admit("vm1", 10).unwrap();
        let (third, _) = polls.admit("vm1", 10).unwrap();
        polls.release("vm1", first);
        assert_eq!(polls.held(), 2, "the first was already ended by the third");
        polls.release("vm1", second);
        polls.release("vm1", third);
        assert_eq!(polls.held(), 0);
        assert!(polls.by_server.is_empty() && polls.spare.is_empty());
    }
}
