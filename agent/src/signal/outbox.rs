//! The outbox: delivers the signals of finished deployments until the engine acknowledges them.
//! It only touches journal entries in state Finished, sends each through `SignalSender`, and
//! writes the entry back after every attempt (attempt count, next attempt time and last error, or
//! Signalled), so a restart resumes exactly where it stopped and never reruns a hook to resend a
//! result. Permanent refusals stay Finished with `permanent_failure` set: they are not retried
//! automatically, and `status` shows them. It reads only the entries the journal's index of
//! undelivered signals names (see `journal::index`), never the whole journal on each pass. Each
//! delivery raises `EngineMoved`, so the polling tasks look for what the engine released next (a
//! NO_SIGNAL deployment owes no signal: the executor raises it when one finishes). Where an HTTP
//! signal goes is `route`'s choice: a newer document's URL for the deployment, and the next
//! replica after its receiver failed as a host; an entry whose URL a newer document replaced is
//! attempted at once, whatever its backoff said.

use std::sync::Arc;
use std::time::Duration;

use rand::SeedableRng;
use rand::rngs::StdRng;
use tokio::sync::Notify;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use super::outcome::DeliveryOutcome;
use super::route::{self, SignalRouter};
use super::send::{Attempt, SignalSender};
use crate::backoff::FLUSH_RETRY;
use crate::clock::{millis, now_millis};
use crate::failpoint::{self, Failpoint};
use crate::journal::{Entry, Journal, JournalError, Owed};
use crate::secret::redact_url;
use crate::source::pace::EngineMoved;

/// How many entries `flush` delivers at once.
const FLUSH_PARALLEL: usize = 8;
/// How long the daemon loop waits after the journal could not be read or written.
const JOURNAL_ERROR_DELAY: Duration = Duration::from_secs(5);

/// What `flush` achieved.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OutboxSummary {
    /// Signals acknowledged during this flush.
    pub delivered: usize,
    /// Signals still owed (transient failures, or shutdown came first).
    pub pending: usize,
    /// Signals refused for good, during this flush or before.
    pub permanent: usize,
}

/// Delivers journaled results. Cloning is cheap (shared journal and connection pool).
#[derive(Debug, Clone)]
pub(crate) struct Outbox {
    journal: Arc<Journal>,
    sender: SignalSender,
    moved: EngineMoved,
    router: Arc<SignalRouter>,
}

/// Where one entry ended up after `flush` tried it.
enum Delivery {
    Delivered,
    Pending,
    Permanent,
}

impl Outbox {
    /// `moved` is raised after every delivery (see `source::pace`). Until `with_router`, every
    /// signal goes where its deployment says.
    pub(crate) fn new(journal: Arc<Journal>, sender: SignalSender, moved: EngineMoved) -> Outbox {
        Outbox { journal, sender, moved, router: Arc::default() }
    }

    /// Sends HTTP signals where `router` says (see `route`); the daemon keeps it up to date.
    pub(crate) fn with_router(self, router: Arc<SignalRouter>) -> Outbox {
        Outbox { router, ..self }
    }

    /// Builds the signal client in the background (see `SignalSender::warm_up`).
    pub(crate) fn warm_up(&self) -> tokio::task::JoinHandle<()> {
        self.sender.warm_up()
    }

    /// `once`: delivers every Finished entry now (ignoring its scheduled time), retrying transient
    /// failures up to `attempts` tries per entry (at least one) with a short backoff. Up to eight
    /// entries are in flight at once, so one signal's round trip and journal fsync overlap
    /// another's; each entry still goes send → record, on its own.
    pub(crate) async fn flush(
        &self,
        attempts: u32,
        shutdown: &CancellationToken,
    ) -> Result<OutboxSummary, JournalError> {
        let mut summary = OutboxSummary { permanent: self.journal.refused_count()?, ..OutboxSummary::default() };
        let mut due = self.journal.load_undelivered(Owed::Signal)?.into_iter();
        let mut in_flight = JoinSet::new();
        loop {
            while in_flight.len() < FLUSH_PARALLEL {
                let Some(mut entry) = due.next() else { break };
                let (outbox, shutdown) = (self.clone(), shutdown.clone());
                in_flight
                    .spawn(async move { outbox.deliver_with_retries(&mut entry, attempts.max(1), &shutdown).await });
            }
            // Dropping the set on an error aborts the other deliveries; each is recorded or not,
            // never half (the journal replaces files atomically).
            let Some(joined) = in_flight.join_next().await else { break };
            match joined.map_err(writer_failed)?? {
                Delivery::Delivered => summary.delivered += 1,
                Delivery::Pending => summary.pending += 1,
                Delivery::Permanent => summary.permanent += 1,
            }
        }
        Ok(summary)
    }

    /// Daemon: until shutdown, delivers every entry that is due, then sleeps until the next one
    /// is due or `wake` is notified (a deployment just finished).
    pub(crate) async fn run(&self, wake: Arc<Notify>, shutdown: CancellationToken) {
        loop {
            // Register interest before reading the journal, so a notification sent while this
            // pass runs (even with notify_waiters) wakes the next sleep instead of being lost.
            let notified = wake.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let next_due = match self.deliver_due(&shutdown).await {
                Ok(next_due) => next_due,
                Err(error) => {
                    tracing::error!(error = %crate::error_chain(&error), "outbox pass failed");
                    Some(now_millis().saturating_add(millis(JOURNAL_ERROR_DELAY)))
                }
            };
            if shutdown.is_cancelled() {
                return;
            }
            let sleep = next_due.map(|at| Duration::from_millis(at.saturating_sub(now_millis())));
            tokio::select! {
                () = shutdown.cancelled() => return,
                () = &mut notified => {}
                () = sleep_or_forever(sleep) => {}
            }
        }
    }

    /// One pass of the daemon loop: attempts each due entry once; returns when the earliest
    /// remaining entry becomes due.
    async fn deliver_due(&self, shutdown: &CancellationToken) -> Result<Option<u64>, JournalError> {
        let mut next_due: Option<u64> = None;
        for mut entry in self.journal.load_undelivered(Owed::Signal)? {
            // A newer document's URL is tried at once: the backoff was the old URL's.
            let due = self.adopt_current(&mut entry) || entry.delivery_due(now_millis());
            if due && self.attempt(&mut entry, shutdown).await?.is_none() {
                return Ok(None);
            }
            if entry.awaits_delivery() {
                let at = entry.next_attempt_at().unwrap_or(0);
                next_due = Some(next_due.map_or(at, |earliest| earliest.min(at)));
            }
        }
        Ok(next_due)
    }

    async fn deliver_with_retries(
        &self,
        entry: &mut Entry,
        attempts: u32,
        shutdown: &CancellationToken,
    ) -> Result<Delivery, JournalError> {
        // Jitter needs no cryptographic quality.
        let mut rng = StdRng::seed_from_u64(now_millis());
        for attempt in 1..=attempts {
            match self.attempt(entry, shutdown).await? {
                None => return Ok(Delivery::Pending),
                Some(DeliveryOutcome::Delivered { .. }) => return Ok(Delivery::Delivered),
                Some(DeliveryOutcome::Permanent { .. }) => return Ok(Delivery::Permanent),
                Some(DeliveryOutcome::Transient { .. }) if attempt < attempts => {
                    tokio::select! {
                        () = shutdown.cancelled() => return Ok(Delivery::Pending),
                        () = tokio::time::sleep(FLUSH_RETRY.delay(attempt, &mut rng)) => {}
                    }
                }
                Some(DeliveryOutcome::Transient { .. }) => {}
            }
        }
        Ok(Delivery::Pending)
    }

    /// Sends once and records the attempt durably; `None` when shutdown interrupted the send
    /// (nothing is recorded then: the attempt may or may not have arrived, and the signal id lets
    /// the receiver drop the duplicate).
    async fn attempt(
        &self,
        entry: &mut Entry,
        shutdown: &CancellationToken,
    ) -> Result<Option<DeliveryOutcome>, JournalError> {
        self.adopt_current(entry);
        let Attempt { outcome, host_failed } = tokio::select! {
            () = shutdown.cancelled() => return Ok(None),
            attempt = attempt_entry(&self.sender, entry) => attempt,
        };
        if matches!(outcome, DeliveryOutcome::Delivered { .. }) {
            failpoint::hit(Failpoint::AfterSignalAck);
        }
        entry.delivery_attempted(outcome.clone(), now_millis());
        if host_failed && entry.awaits_delivery() {
            self.fail_over(entry);
        }
        self.record(entry).await?;
        log_attempt(entry, &outcome);
        if matches!(outcome, DeliveryOutcome::Delivered { .. }) {
            // The engine has the result: it may release the next deployment now.
            self.moved.raise();
        }
        Ok(Some(outcome))
    }

    /// Takes the current document's signal URL for `entry` when it is a newer one; true when it
    /// did (the entry is written with the next attempt).
    fn adopt_current(&self, entry: &mut Entry) -> bool {
        let adopted = self.router.adopt_current(entry);
        if adopted {
            let url = route::current_url(entry).map(|url| redact_url(&url)).unwrap_or_default();
            tracing::info!(deployment_id = %entry.id, url, "a newer document gives the signal another URL; using it");
        }
        adopted
    }

    /// Points `entry`'s next attempt at the next replica, when its URL's origin is a source's.
    fn fail_over(&self, entry: &mut Entry) {
        let failed = route::current_url(entry).map(|url| redact_url(&url)).unwrap_or_default();
        if let Some(next) = self.router.fail_over(entry) {
            tracing::warn!(
                deployment_id = %entry.id,
                url = failed,
                next_url = %redact_url(&next),
                "signal receiver failing; the next attempt goes to the next replica"
            );
        }
    }

    /// Writes the attempt on a blocking thread: its fsync then holds up neither the other
    /// deliveries nor, in the daemon, the executor on the async thread.
    async fn record(&self, entry: &Entry) -> Result<(), JournalError> {
        let journal = Arc::clone(&self.journal);
        let entry = entry.clone();
        tokio::task::spawn_blocking(move || journal.write_delivery(&entry)).await.map_err(writer_failed)?
    }
}

/// Sends `entry`'s stored result once over its deployment's transport, an HTTP signal to the URL
/// `route` chose; an entry without a result has nothing to send, for good.
pub(super) async fn attempt_entry(sender: &SignalSender, entry: &Entry) -> Attempt {
    let Some(result) = &entry.result else {
        return DeliveryOutcome::Permanent { error: "no result recorded for this deployment".into() }.into();
    };
    sender.send(&entry.id, route::transport_of(entry), result).await
}

/// [`attempt_entry`]'s outcome alone, for the sender's tests.
#[cfg(test)]
pub(super) async fn send_entry(sender: &SignalSender, entry: &Entry) -> DeliveryOutcome {
    attempt_entry(sender, entry).await.outcome
}

/// A delivery or journal-writer task that did not finish (a panic; with `panic = "abort"` in
/// release builds, only in tests): reported as a failed journal write.
fn writer_failed(error: tokio::task::JoinError) -> JournalError {
    JournalError::Writer { detail: error.to_string() }
}

fn log_attempt(entry: &Entry, outcome: &DeliveryOutcome) {
    let attempts = entry.signal.as_ref().map_or(0, |signal| signal.attempts);
    let id = entry.id.as_str();
    match outcome {
        DeliveryOutcome::Delivered { status } => {
            tracing::info!(deployment_id = id, status, attempts, "signal delivered");
        }
        DeliveryOutcome::Transient { error } => {
            let retry_in_ms = entry.next_attempt_at().map(|at| at.saturating_sub(now_millis()));
            tracing::warn!(deployment_id = id, error, attempts, retry_in_ms, "signal not delivered; will retry");
        }
        DeliveryOutcome::Permanent { error } => {
            tracing::error!(deployment_id = id, error, attempts, "signal refused; not retrying automatically");
        }
    }
}

async fn sleep_or_forever(duration: Option<Duration>) {
    match duration {
        Some(duration) => tokio::time::sleep(duration).await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod route_tests;
#[cfg(test)]
mod tests;
