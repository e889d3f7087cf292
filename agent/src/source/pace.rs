//! When a polling task reads its source next (see docs/metadata.md, "Polling"). A source that
//! long-polls asks again at once (never more than once a second when nothing changed); one that
//! cannot is read every `poll_interval` ±10%, and after an error on the jittered backoff of
//! `backoff::source_retry`. Fast-follow: after a poll that brought a new document, or once the
//! daemon says the engine may have moved (`EngineMoved`: a signal was delivered, which a
//! NO_SIGNAL deployment's finish also counts as), such a source is read again after ~1 s, then
//! at doubling delays (2, 4, 8, ... s, ±10%) until the step reaches the poll interval, where the
//! normal schedule resumes. An engine such as Heat releases the next deployment of a chain about
//! a second after a signal; waiting a whole interval for it would add one interval per hop.
//! Fast-follow polls never start less than a second after the previous poll of the same source,
//! however many signals arrive.

use std::sync::Arc;
use std::time::Duration;

use rand::rngs::StdRng;
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::backoff::{jitter, source_retry};

/// A long-poll answered without a change sooner than this waits out the rest before the next
/// request, so a server that ignores `?wait=` cannot make us spin.
pub(crate) const MIN_LONG_POLL_GAP: Duration = Duration::from_secs(1);
/// The first fast-follow step; each further one doubles it.
pub(crate) const FIRST_FOLLOW_STEP: Duration = Duration::from_secs(1);
/// No fast-follow poll starts sooner than this after the previous poll of the same source.
pub(crate) const MIN_FOLLOW_GAP: Duration = Duration::from_secs(1);
/// Plain polls and fast-follow steps are scaled by a random factor in `[0.9, 1.1]`.
const POLL_JITTER: f64 = 0.1;

/// "The engine may have moved": the outbox raises it when a signal is delivered, and every
/// polling task that cannot long-poll starts its fast-follow sequence. Cloning shares it; a
/// burst of raises coalesces into one.
#[derive(Debug, Clone)]
pub(crate) struct EngineMoved {
    sender: Arc<watch::Sender<()>>,
}

impl Default for EngineMoved {
    fn default() -> Self {
        EngineMoved::new()
    }
}

impl EngineMoved {
    pub(crate) fn new() -> EngineMoved {
        EngineMoved { sender: Arc::new(watch::Sender::new(())) }
    }

    /// Tells every listening polling task (none is fine: `once` has no polling tasks).
    pub(crate) fn raise(&self) {
        self.sender.send_replace(());
    }

    /// A listener that sees only raises from now on.
    pub(crate) fn listen(&self) -> watch::Receiver<()> {
        self.sender.subscribe()
    }
}

/// What one poll brought, as far as timing is concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PollOutcome {
    pub(crate) failed: bool,
    /// A new document replaced the source's last one.
    pub(crate) changed: bool,
    /// The source can long-poll (it decides after each answer: the server advertises it).
    pub(crate) long_poll: bool,
}

/// One source's timing between polls: error count, fast-follow sequence, jitter.
#[derive(Debug)]
pub(crate) struct Pacer {
    poll_interval: Duration,
    rng: StdRng,
    failures: u32,
    /// The base of the next fast-follow step; `None` when no sequence runs.
    follow_step: Option<Duration>,
    /// `None` when fast-follow is off (`[agent] fast_follow = false`).
    moved: Option<watch::Receiver<()>>,
}

impl Pacer {
    /// `moved` is the daemon's `EngineMoved` listener, `None` to turn fast-follow off.
    pub(crate) fn new(poll_interval: Duration, moved: Option<watch::Receiver<()>>, rng: StdRng) -> Pacer {
        Pacer { poll_interval, rng, failures: 0, follow_step: None, moved }
    }

    /// Sleeps after a poll that started at `started` and ended with `outcome`, until the next
    /// poll is due; returns false when `shutdown` came first. While the source is healthy and
    /// cannot long-poll, a raised `EngineMoved` restarts fast-follow and brings the next poll
    /// forward (never back).
    pub(crate) async fn pause(&mut self, outcome: PollOutcome, started: Instant, shutdown: &CancellationToken) -> bool {
        let mut deadline = self.next_poll_at(outcome, started);
        let following = !outcome.failed && !outcome.long_poll;
        loop {
            let listening = following && self.moved.is_some();
            tokio::select! {
                () = tokio::time::sleep_until(deadline) => break,
                () = shutdown.cancelled() => return false,
                raised = changed(self.moved.as_mut()), if listening => {
                    if raised {
                        deadline = deadline.min(self.restart_follow(started));
                    } else {
                        // The daemon is ending: only shutdown and the schedule remain.
                        self.moved = None;
                    }
                }
            }
        }
        if let Some(moved) = self.moved.as_mut().filter(|_| !following) {
            // A raise while the source failed or long-polled needs no answer, now or later.
            moved.mark_unchanged();
        }
        true
    }

    /// When the next poll is due after `outcome`.
    fn next_poll_at(&mut self, outcome: PollOutcome, started: Instant) -> Instant {
        let now = Instant::now();
        if outcome.failed {
            self.failures = self.failures.saturating_add(1);
            self.follow_step = None;
            return now + source_retry(self.poll_interval).delay(self.failures, &mut self.rng);
        }
        self.failures = 0;
        if outcome.long_poll {
            self.follow_step = None;
            let gap = if outcome.changed { Duration::ZERO } else { MIN_LONG_POLL_GAP.saturating_sub(now - started) };
            return now + gap;
        }
        if outcome.changed && self.moved.is_some() {
            return self.restart_follow(started);
        }
        match self.follow_step() {
            Some(at) => at.max(started + MIN_FOLLOW_GAP),
            None => now + jitter(self.poll_interval, POLL_JITTER, &mut self.rng),
        }
    }

    /// Starts the fast-follow sequence again; returns when its first poll is due. With an
    /// interval of a second or less the normal schedule is as fast, and stays in charge.
    fn restart_follow(&mut self, started: Instant) -> Instant {
        self.follow_step = Some(FIRST_FOLLOW_STEP);
        let at = self
            .follow_step()
            .unwrap_or_else(|| Instant::now() + jitter(self.poll_interval, POLL_JITTER, &mut self.rng));
        at.max(started + MIN_FOLLOW_GAP)
    }

    /// Takes the next fast-follow step, doubling the one after: when its poll is due, or `None`
    /// once the step would reach the poll interval (the sequence is over).
    fn follow_step(&mut self) -> Option<Instant> {
        let step = self.follow_step.take().filter(|step| *step < self.poll_interval)?;
        self.follow_step = Some(step.saturating_mul(2));
        Some(Instant::now() + jitter(step, POLL_JITTER, &mut self.rng).min(self.poll_interval))
    }
}

/// Whether `moved` was raised (false once its sender is gone); pending without a listener.
async fn changed(moved: Option<&mut watch::Receiver<()>>) -> bool {
    match moved {
        Some(moved) => moved.changed().await.is_ok(),
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests;
