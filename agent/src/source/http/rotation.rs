//! Which of an `http` source's URLs a fetch uses (docs/configuration.md, "`kind = "http"`"): the
//! URLs are replicas of one service, in the operator's order of preference. The source reads URL
//! 0; a request that fails as a replica fails (no connection, a timeout, a 5xx) moves it to the
//! next URL for the next attempt, which the poll's usual backoff spaces out, cycling through the
//! list. While it is on a later URL, a fetch at least `PRIMARY_RETRY` after URL 0 was last tried
//! asks URL 0 first and, when that fails too, the current URL within the same fetch: a dead first
//! replica then costs one extra request every half minute (or once per long-poll cycle), never a
//! failed fetch, and the source returns to URL 0 as soon as it answers. Any answer that is not a
//! 5xx (a 304, a 404, a 401) shows the replica is up. Pure: the caller passes the time in.

use std::time::{Duration, Instant};

/// How long the source stays on a later URL before it asks the first one again.
pub(crate) const PRIMARY_RETRY: Duration = Duration::from_secs(30);

/// What the source knows of its URLs: which one it uses, and when it last tried URL 0.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Rotation {
    len: usize,
    active: usize,
    /// When a request last went to URL 0; `None` before the first.
    primary_tried_at: Option<Instant>,
}

/// The URLs one fetch tries, in order: `first`, and `fallback` only if `first` fails as a replica.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Plan {
    pub(crate) first: usize,
    pub(crate) fallback: Option<usize>,
}

/// How a request to one URL ended, as far as the choice of URL is concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Answer {
    /// The replica answered (2xx, 304, any 4xx, a redirect): it is up.
    Answered,
    /// No connection, a timeout, or a 5xx: the replica is down or failing.
    Failed,
}

/// What recording an answer changed, for the log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Switch {
    /// The URL in use failed; the next attempt uses `to`.
    FailedOver { from: usize, to: usize },
    /// URL 0 answered again while the source was on `from`; it is back on URL 0.
    Returned { from: usize },
}

impl Rotation {
    /// A rotation over `len` URLs (at least one), starting on URL 0.
    pub(crate) fn new(len: usize) -> Rotation {
        Rotation { len: len.max(1), active: 0, primary_tried_at: None }
    }

    /// The URL in use.
    pub(crate) fn active(&self) -> usize {
        self.active
    }

    /// The URLs a fetch starting at `now` tries.
    pub(crate) fn plan(&self, now: Instant) -> Plan {
        let primary_due =
            self.primary_tried_at.is_none_or(|tried| now.saturating_duration_since(tried) >= PRIMARY_RETRY);
        if self.active != 0 && primary_due {
            Plan { first: 0, fallback: Some(self.active) }
        } else {
            Plan { first: self.active, fallback: None }
        }
    }

    /// Records how the request to URL `index` that started at `now` ended.
    pub(crate) fn record(&mut self, index: usize, answer: Answer, now: Instant) -> Option<Switch> {
        if index == 0 {
            self.primary_tried_at = Some(now);
        }
        let from = self.active;
        match answer {
            Answer::Answered if index != from => {
                self.active = index;
                (index == 0).then_some(Switch::Returned { from })
            }
            Answer::Failed if index == from && self.len > 1 => {
                self.active = (from + 1) % self.len;
                Some(Switch::FailedOver { from, to: self.active })
            }
            // A failed retry of URL 0 leaves the source where it is; a success keeps it there.
            Answer::Answered | Answer::Failed => None,
        }
    }

    /// Makes the next fetch retry URL 0, as if `PRIMARY_RETRY` had passed (the source's tests).
    #[cfg(test)]
    pub(crate) fn make_primary_retry_due(&mut self) {
        self.primary_tried_at = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(start: Instant, secs: u64) -> Instant {
        start + Duration::from_secs(secs)
    }

    #[test]
    fn one_url_never_moves() {
        let now = Instant::now();
        let mut rotation = Rotation::new(1);
        assert_eq!(rotation.plan(now), Plan { first: 0, fallback: None });
        assert_eq!(rotation.record(0, Answer::Failed, now), None);
        assert_eq!(rotation.plan(at(now, 100)), Plan { first: 0, fallback: None });
    }

    #[test]
    fn failures_move_to_the_next_url_and_cycle() {
        let start = Instant::now();
        let mut rotation = Rotation::new(3);
        assert_eq!(rotation.record(0, Answer::Failed, start), Some(Switch::FailedOver { from: 0, to: 1 }));
        assert_eq!(rotation.plan(at(start, 1)), Plan { first: 1, fallback: None }, "URL 0 was just tried");
        assert_eq!(rotation.record(1, Answer::Failed, at(start, 1)), Some(Switch::FailedOver { from: 1, to: 2 }));
        assert_eq!(rotation.record(2, Answer::Failed, at(start, 3)), Some(Switch::FailedOver { from: 2, to: 0 }));
        assert_eq!(rotation.active(), 0, "after the last URL comes the first");
        assert_eq!(rotation.plan(at(start, 7)), Plan { first: 0, fallback: None });
    }

    #[test]
    fn answers_that_are_not_failures_keep_the_url() {
        let start = Instant::now();
        let mut rotation = Rotation::new(2);
        assert_eq!(rotation.record(0, Answer::Answered, start), None);
        assert_eq!(rotation.active(), 0);
        rotation.record(0, Answer::Failed, start);
        assert_eq!(rotation.record(1, Answer::Answered, at(start, 1)), None);
        assert_eq!(rotation.active(), 1);
    }

    #[test]
    fn the_first_url_is_asked_again_after_the_retry_interval() {
        let start = Instant::now();
        let mut rotation = Rotation::new(3);
        rotation.record(0, Answer::Failed, start);
        rotation.record(1, Answer::Answered, at(start, 1));
        assert_eq!(rotation.plan(at(start, 29)), Plan { first: 1, fallback: None });
        let due = at(start, 30);
        assert_eq!(rotation.plan(due), Plan { first: 0, fallback: Some(1) });
        // Still down: the same fetch falls back to URL 1, and URL 0 waits another interval.
        assert_eq!(rotation.record(0, Answer::Failed, due), None);
        assert_eq!(rotation.active(), 1, "a failed retry of URL 0 is not a fail-over");
        assert_eq!(rotation.plan(at(start, 59)), Plan { first: 1, fallback: None });
        let again = at(start, 60);
        assert_eq!(rotation.plan(again), Plan { first: 0, fallback: Some(1) });
        assert_eq!(rotation.record(0, Answer::Answered, again), Some(Switch::Returned { from: 1 }));
        assert_eq!(rotation.plan(at(start, 61)), Plan { first: 0, fallback: None });
    }

    #[test]
    fn a_failing_fallback_moves_on_while_url_0_is_retried() {
        let start = Instant::now();
        let mut rotation = Rotation::new(3);
        rotation.record(0, Answer::Failed, start);
        let due = at(start, 45);
        let plan = rotation.plan(due);
        assert_eq!(plan, Plan { first: 0, fallback: Some(1) });
        assert_eq!(rotation.record(0, Answer::Failed, due), None);
        assert_eq!(rotation.record(1, Answer::Failed, due), Some(Switch::FailedOver { from: 1, to: 2 }));
        assert_eq!(rotation.plan(at(start, 46)), Plan { first: 2, fallback: None });
    }
}
