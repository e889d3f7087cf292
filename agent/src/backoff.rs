//! Every retry schedule of the agent, as values of one type: a source that fails to fetch
//! (`source_retry`), a signal the engine did not acknowledge (`SIGNAL_RETRY`, kept in the journal
//! across restarts: see docs/journal.md) and `once`'s short in-process retries of a signal
//! (`FLUSH_RETRY`). The schedule is exponential from `initial`, never longer than `max`, spread
//! by a random factor so a fleet of agents behind one engine does not retry in step.

use std::time::Duration;

use rand::Rng;

/// An exponential backoff schedule.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Backoff {
    /// The delay after the first failure.
    pub(crate) initial: Duration,
    /// No delay is longer, jitter included.
    pub(crate) max: Duration,
    /// Each further failure multiplies the delay by this.
    pub(crate) factor: u32,
    /// The delay is scaled by a random factor in `[1 - jitter, 1 + jitter]` (0: exact).
    pub(crate) jitter: f64,
}

/// An undelivered signal: 1 s doubling to 5 min, ±20%.
pub(crate) const SIGNAL_RETRY: Backoff =
    Backoff { initial: Duration::from_secs(1), max: Duration::from_secs(300), factor: 2, jitter: 0.2 };

/// `once` retrying a signal before it gives up for this run: 0.5 s doubling to 4 s, exact.
pub(crate) const FLUSH_RETRY: Backoff =
    Backoff { initial: Duration::from_millis(500), max: Duration::from_secs(4), factor: 2, jitter: 0.0 };

/// The longest pause after fetch errors, whatever the poll interval.
pub(crate) const MAX_SOURCE_RETRY: Duration = Duration::from_secs(300);

/// A source whose fetch failed: 1 s doubling up to its poll interval (at least 1 s, at most
/// [`MAX_SOURCE_RETRY`]), ±20%.
pub(crate) fn source_retry(poll_interval: Duration) -> Backoff {
    let max = poll_interval.clamp(Duration::from_secs(1), MAX_SOURCE_RETRY);
    Backoff { initial: Duration::from_secs(1), max, factor: 2, jitter: 0.2 }
}

impl Backoff {
    /// The wait after the `attempt`-th failure in a row (1 after the first; 0 counts as 1).
    pub(crate) fn delay(&self, attempt: u32, rng: &mut impl Rng) -> Duration {
        let base = self.base(attempt);
        if self.jitter == 0.0 { base } else { jitter(base, self.jitter, rng).min(self.max) }
    }

    /// The delay before jitter: `initial * factor^(attempt - 1)`, at most `max`.
    fn base(&self, attempt: u32) -> Duration {
        let exponent = attempt.saturating_sub(1).min(32);
        self.factor
            .checked_pow(exponent)
            .map_or(self.max, |multiplier| self.initial.saturating_mul(multiplier))
            .min(self.max)
    }
}

/// `duration` scaled by a random factor in `[1 - spread, 1 + spread]`.
pub(crate) fn jitter(duration: Duration, spread: f64, rng: &mut impl Rng) -> Duration {
    let factor = rng.random_range((1.0 - spread)..=(1.0 + spread));
    duration.mul_f64(factor)
}

#[cfg(test)]
mod tests {
    use rand::SeedableRng;
    use rand::rngs::StdRng;

    use super::*;

    #[test]
    fn signal_retry_doubles_with_jitter_up_to_five_minutes() {
        let mut rng = StdRng::seed_from_u64(7);
        for _ in 0..50 {
            for (attempts, base) in [(0, 1.0), (1, 1.0), (2, 2.0), (4, 8.0)] {
                let delay = SIGNAL_RETRY.delay(attempts, &mut rng).as_secs_f64();
                assert!((base * 0.8..=base * 1.2).contains(&delay), "attempt {attempts}: {delay}");
            }
            let capped = SIGNAL_RETRY.delay(40, &mut rng);
            let max = Duration::from_secs(300);
            assert!(capped <= max && capped >= max.mul_f64(0.8), "{capped:?}");
        }
    }

    #[test]
    fn source_retry_doubles_up_to_the_poll_interval_with_jitter() {
        let mut rng = StdRng::seed_from_u64(7);
        let schedule = source_retry(Duration::from_secs(30));
        for (failures, base) in [(1, 1), (2, 2), (3, 4), (5, 16), (6, 30), (40, 30)] {
            let delay = schedule.delay(failures, &mut rng);
            let base = Duration::from_secs(base);
            assert!(delay >= base.mul_f64(0.8) && delay <= base.mul_f64(1.2), "{failures}: {delay:?}");
        }
        let long = source_retry(Duration::from_secs(3600)).delay(20, &mut rng);
        assert!(long <= MAX_SOURCE_RETRY && long >= MAX_SOURCE_RETRY.mul_f64(0.8), "{long:?}");
        assert_eq!(source_retry(Duration::ZERO).max, Duration::from_secs(1));
    }

    #[test]
    fn flush_retry_is_exact() {
        let mut rng = StdRng::seed_from_u64(1);
        let delays: Vec<u128> = (1..=6).map(|attempt| FLUSH_RETRY.delay(attempt, &mut rng).as_millis()).collect();
        assert_eq!(delays, [500, 1_000, 2_000, 4_000, 4_000, 4_000]);
    }

    #[test]
    fn huge_attempt_counts_stay_at_the_cap() {
        let mut rng = StdRng::seed_from_u64(1);
        let exact = Backoff { jitter: 0.0, ..SIGNAL_RETRY };
        assert_eq!(exact.delay(u32::MAX, &mut rng), Duration::from_secs(300));
        let tripling = Backoff { factor: 3, ..exact };
        assert_eq!(tripling.delay(3, &mut rng), Duration::from_secs(9));
    }
}
