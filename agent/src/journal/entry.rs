//! One journal entry and its state machine: what the agent knows about one derived deployment id,
//! from first sight to an acknowledged signal (see docs/journal.md). The transitions only change
//! the value; the caller writes the entry with `Journal::write` before it acts on the new state, so
//! a crash always finds the journal a step ahead of the world.

use anneal_protocol::signal::{MAX_SIGNAL_CHARS, signal_body};
use anneal_protocol::{Deployment, HookResult, Outcome, SignalTransport, evaluate};
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};

use super::{JournalError, State};
use crate::backoff::SIGNAL_RETRY;
use crate::clock::millis;
use crate::signal::outcome::{DeliveryOutcome, signal_id};

/// One run of the hook (a rerun after an interrupted run is a second attempt).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct RunRecord {
    pub(crate) attempt: u32,
    pub(crate) pid: Option<u32>,
    /// Field 22 of `/proc/<pid>/stat`, so a restarted agent can tell its old hook from a reused pid.
    pub(crate) process_start_time: Option<u64>,
    pub(crate) started_at: u64,
    pub(crate) finished_at: Option<u64>,
    pub(crate) duration_ms: Option<u64>,
}

/// Where the signal of a finished deployment stands.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct SignalRecord {
    /// `"http"`, `"none"`, `"zaqar"` or `"heat"`.
    pub(crate) transport: String,
    pub(crate) attempts: u32,
    /// When the outbox may try again (unix ms); `None` means now.
    pub(crate) next_attempt_at: Option<u64>,
    pub(crate) last_error: Option<String>,
    pub(crate) delivered_at: Option<u64>,
    /// Set when the receiver refused the signal for good; the outbox stops retrying it.
    pub(crate) permanent_failure: Option<String>,
    /// The `X-Anneal-Signal-Id` an HTTP signal carries.
    pub(crate) signal_id: Option<String>,
    /// An HTTP signal's URL from a newer document that lists the same deployment (same id and
    /// action) with another `deploy_signal_id` than the one it was first seen with (see
    /// `signal::route`). Absent from entries written before it existed, and when not needed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) document_url: Option<String>,
    /// Where the next HTTP attempt goes when that is not the document's URL: the same path and
    /// query on the next replica's origin, after the last one failed (see `signal::route`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) target_url: Option<String>,
}

/// Everything the agent records about one derived deployment id.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Entry {
    pub(crate) id: String,
    pub(crate) name: Option<String>,
    pub(crate) group: String,
    pub(crate) state: State,
    /// The deployment as received: a resend and a rerun need it after a restart.
    pub(crate) deployment: Deployment,
    pub(crate) seen_at: u64,
    /// Why the entry is not running: waiting (missing hook, dependencies) or skipped.
    #[serde(default)]
    pub(crate) waiting_reason: Option<String>,
    #[serde(default)]
    pub(crate) run: Option<RunRecord>,
    #[serde(default)]
    pub(crate) result: Option<HookResult>,
    /// `"COMPLETE"` or `"FAILED: <reason>"`, Heat's reading of the result.
    #[serde(default)]
    pub(crate) outcome: Option<String>,
    #[serde(default)]
    pub(crate) signal: Option<SignalRecord>,
}

impl SignalRecord {
    /// A fresh record for `deployment`'s transport, due at once.
    pub(crate) fn for_deployment(deployment: &Deployment, result: Option<&HookResult>) -> SignalRecord {
        let transport = deployment.signal_transport();
        let signal_id = match (&transport, result) {
            (SignalTransport::Http { .. }, Some(result)) => {
                Some(signal_id(&deployment.id, &signal_body(result, MAX_SIGNAL_CHARS)))
            }
            _ => None,
        };
        SignalRecord {
            transport: transport_name(&transport).to_string(),
            attempts: 0,
            next_attempt_at: None,
            last_error: None,
            delivered_at: None,
            permanent_failure: None,
            signal_id,
            document_url: None,
            target_url: None,
        }
    }
}

/// The journal's name for a transport.
pub(crate) fn transport_name(transport: &SignalTransport) -> &'static str {
    match transport {
        SignalTransport::Http { .. } => "http",
        SignalTransport::Zaqar { .. } => "zaqar",
        SignalTransport::HeatApi { .. } => "heat",
        SignalTransport::None => "none",
    }
}

impl Entry {
    /// A new entry for a deployment seen for the first time.
    pub(crate) fn seen(deployment: &Deployment, now: u64) -> Entry {
        Entry {
            id: deployment.id.clone(),
            name: deployment.name.clone(),
            group: deployment.group.clone(),
            state: State::Seen,
            deployment: deployment.clone(),
            seen_at: now,
            waiting_reason: None,
            run: None,
            result: None,
            outcome: None,
            signal: None,
        }
    }

    /// Seen/Waiting -> Waiting with the reason `status` shows; ignored (with a warning) in any
    /// other state, since a running or finished deployment is past waiting.
    pub(crate) fn waiting(&mut self, reason: String) {
        if self.refuse_unless(&[State::Seen, State::Waiting], State::Waiting) {
            return;
        }
        self.state = State::Waiting;
        self.waiting_reason = Some(reason);
    }

    /// Seen/Waiting -> Started, or Started -> Started for a rerun of an interrupted run; each
    /// start is a new attempt.
    pub(crate) fn started(&mut self, now: u64) -> Result<(), JournalError> {
        self.check(&[State::Seen, State::Waiting, State::Started], State::Started)?;
        let attempt = self.run.as_ref().map_or(0, |run| run.attempt) + 1;
        self.state = State::Started;
        self.waiting_reason = None;
        self.run = Some(RunRecord {
            attempt,
            pid: None,
            process_start_time: None,
            started_at: now,
            finished_at: None,
            duration_ms: None,
        });
        Ok(())
    }

    /// Records the hook's process once it exists; ignored unless Started.
    pub(crate) fn spawned(&mut self, pid: u32, process_start_time: Option<u64>) {
        if self.refuse_unless(&[State::Started], State::Started) {
            return;
        }
        if let Some(run) = &mut self.run {
            run.pid = Some(pid);
            run.process_start_time = process_start_time;
        }
    }

    /// Started -> Finished with the hook's result; also Seen/Waiting -> Finished for results made
    /// without a run ("interrupted", "dependency failed"). Heat's outcome is computed now, and a
    /// deployment without a signal transport goes straight to Signalled.
    pub(crate) fn finished(&mut self, result: HookResult, now: u64) -> Result<(), JournalError> {
        self.check(&[State::Seen, State::Waiting, State::Started], State::Finished)?;
        let was_running = self.state == State::Started;
        if let Some(run) = self.run.as_mut().filter(|_| was_running) {
            run.finished_at = Some(now);
            run.duration_ms = Some(now.saturating_sub(run.started_at));
        }
        self.outcome = Some(match evaluate(&result, &self.deployment.outputs).outcome {
            Outcome::Complete => "COMPLETE".to_string(),
            Outcome::Failed { reason } => format!("FAILED: {reason}"),
        });
        let signal = SignalRecord::for_deployment(&self.deployment, Some(&result));
        self.state = if signal.transport == "none" { State::Signalled } else { State::Finished };
        self.waiting_reason = None;
        self.signal = Some(signal);
        self.result = Some(result);
        Ok(())
    }

    /// Seen/Waiting -> Skipped (e.g. the `os-apply-config` group); ignored in any other state.
    pub(crate) fn skipped(&mut self, reason: String) {
        if self.refuse_unless(&[State::Seen, State::Waiting], State::Skipped) {
            return;
        }
        self.state = State::Skipped;
        self.waiting_reason = Some(reason);
    }

    /// Records one delivery attempt: Finished -> Signalled when delivered; a transient failure
    /// schedules the next attempt (1 s doubling to 5 min, jittered); a permanent one is kept and
    /// stops automatic retries. Ignored unless Finished.
    pub(crate) fn delivery_attempted(&mut self, outcome: DeliveryOutcome, now: u64) {
        self.delivery_attempted_with(outcome, now, &mut rand::rngs::StdRng::from_os_rng());
    }

    /// [`Entry::delivery_attempted`] with a chosen random source for the jitter.
    pub(crate) fn delivery_attempted_with(&mut self, outcome: DeliveryOutcome, now: u64, rng: &mut impl Rng) {
        if self.refuse_unless(&[State::Finished], State::Signalled) {
            return;
        }
        let deployment = &self.deployment;
        let result = self.result.as_ref();
        let signal = self.signal.get_or_insert_with(|| SignalRecord::for_deployment(deployment, result));
        signal.attempts = signal.attempts.saturating_add(1);
        match outcome {
            DeliveryOutcome::Delivered { .. } => {
                signal.delivered_at = Some(now);
                signal.next_attempt_at = None;
                signal.last_error = None;
                self.state = State::Signalled;
            }
            DeliveryOutcome::Transient { error } => {
                let delay = SIGNAL_RETRY.delay(signal.attempts, rng);
                signal.next_attempt_at = Some(now.saturating_add(millis(delay)));
                signal.last_error = Some(error);
            }
            DeliveryOutcome::Permanent { error } => {
                signal.next_attempt_at = None;
                signal.last_error = Some(error.clone());
                signal.permanent_failure = Some(error);
            }
        }
    }

    /// Whether the outbox should still try to deliver this entry (at some time).
    pub(crate) fn awaits_delivery(&self) -> bool {
        self.state == State::Finished && self.signal.as_ref().is_none_or(|signal| signal.permanent_failure.is_none())
    }

    /// Whether a delivery attempt is due at `now`.
    pub(crate) fn delivery_due(&self, now: u64) -> bool {
        self.awaits_delivery() && self.next_attempt_at().is_none_or(|at| at <= now)
    }

    /// When the next delivery attempt is scheduled, if it is scheduled at all.
    pub(crate) fn next_attempt_at(&self) -> Option<u64> {
        self.signal.as_ref().and_then(|signal| signal.next_attempt_at)
    }

    /// Whether Heat's failure rule marked the result FAILED (see `outcome`).
    pub(crate) fn failed(&self) -> bool {
        self.outcome.as_deref().is_some_and(|outcome| outcome.starts_with("FAILED"))
    }

    /// Whether the signal was refused for good.
    pub(crate) fn permanently_failed(&self) -> bool {
        self.state == State::Finished && self.signal.as_ref().is_some_and(|signal| signal.permanent_failure.is_some())
    }

    fn check(&self, allowed: &[State], to: State) -> Result<(), JournalError> {
        if allowed.contains(&self.state) {
            Ok(())
        } else {
            Err(JournalError::IllegalTransition { id: self.id.clone(), from: self.state, to })
        }
    }

    /// True (after logging) when the transition is not allowed, for the infallible transitions.
    fn refuse_unless(&self, allowed: &[State], to: State) -> bool {
        match self.check(allowed, to) {
            Ok(()) => false,
            Err(error) => {
                tracing::warn!(deployment_id = %self.id, "{error}; ignored");
                true
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn deployment(inputs: serde_json::Value) -> Deployment {
        serde_json::from_value(json!({
            "id": "d1", "name": "web", "group": "script", "config": "#!/bin/sh\n",
            "inputs": inputs, "outputs": [{"name": "err", "error_output": true}]
        }))
        .unwrap()
    }

    fn http_deployment() -> Deployment {
        deployment(json!([{"name": "deploy_signal_id", "value": "http://127.0.0.1:1/signal?sig=x"}]))
    }

    fn ok_result() -> HookResult {
        HookResult::from_process("out", "", 0)
    }

    #[test]
    fn happy_path_through_every_state() {
        let mut entry = Entry::seen(&http_deployment(), 1_000);
        assert_eq!((entry.state, entry.seen_at, entry.group.as_str()), (State::Seen, 1_000, "script"));
        entry.waiting("hook missing".into());
        assert_eq!(entry.state, State::Waiting);
        entry.started(2_000).unwrap();
        assert_eq!(entry.waiting_reason, None);
        entry.spawned(42, Some(7));
        entry.finished(ok_result(), 2_500).unwrap();
        let run = entry.run.clone().unwrap();
        assert_eq!((run.attempt, run.pid, run.process_start_time), (1, Some(42), Some(7)));
        assert_eq!((run.finished_at, run.duration_ms), (Some(2_500), Some(500)));
        assert_eq!(entry.state, State::Finished);
        assert_eq!(entry.outcome.as_deref(), Some("COMPLETE"));
        let signal = entry.signal.clone().unwrap();
        assert_eq!(signal.transport, "http");
        let body = signal_body(&ok_result(), MAX_SIGNAL_CHARS);
        assert_eq!(signal.signal_id, Some(signal_id("d1", &body)));
        assert!(entry.delivery_due(2_500));
        entry.delivery_attempted(DeliveryOutcome::Delivered { status: 200 }, 3_000);
        assert_eq!(entry.state, State::Signalled);
        let signal = entry.signal.unwrap();
        assert_eq!((signal.attempts, signal.delivered_at), (1, Some(3_000)));
    }

    #[test]
    fn failure_outcome_uses_heats_rule() {
        let mut entry = Entry::seen(&http_deployment(), 0);
        entry.started(1).unwrap();
        let mut result = HookResult::from_process("", "boom", 2);
        result.0.insert("err".into(), json!("bad"));
        entry.finished(result, 2).unwrap();
        let outcome = entry.outcome.unwrap();
        assert!(outcome.starts_with("FAILED: err : bad"), "{outcome}");
        assert!(outcome.contains("non-zero status code: 2"), "{outcome}");
    }

    #[test]
    fn no_transport_goes_straight_to_signalled() {
        let mut entry = Entry::seen(&deployment(json!([])), 0);
        entry.started(1).unwrap();
        entry.finished(ok_result(), 2).unwrap();
        assert_eq!(entry.state, State::Signalled);
        assert_eq!(entry.signal.as_ref().unwrap().transport, "none");
        assert!(!entry.awaits_delivery());
    }

    #[test]
    fn transport_names() {
        let zaqar = deployment(json!([{"name": "deploy_queue_id", "value": "q"}]));
        let heat = deployment(json!([{"name": "deploy_auth_url", "value": "http://k"}]));
        assert_eq!(SignalRecord::for_deployment(&zaqar, None).transport, "zaqar");
        assert_eq!(SignalRecord::for_deployment(&heat, None).transport, "heat");
    }

    #[test]
    fn result_without_a_run_from_seen_or_waiting() {
        let mut entry = Entry::seen(&http_deployment(), 0);
        entry.finished(HookResult::from_process("", "interrupted", 1), 5).unwrap();
        assert_eq!(entry.state, State::Finished);
        assert!(entry.run.is_none());
        let mut waiting = Entry::seen(&http_deployment(), 0);
        waiting.waiting("dependency".into());
        waiting.finished(HookResult::from_process("", "dependency failed", 1), 5).unwrap();
        assert_eq!(waiting.state, State::Finished);
    }

    #[test]
    fn rerun_is_a_new_attempt() {
        let mut entry = Entry::seen(&http_deployment(), 0);
        entry.started(1).unwrap();
        entry.spawned(10, None);
        entry.started(9).unwrap();
        let run = entry.run.unwrap();
        assert_eq!((run.attempt, run.pid, run.started_at), (2, None, 9));
    }

    #[test]
    fn illegal_transitions_are_rejected() {
        let mut entry = Entry::seen(&http_deployment(), 0);
        entry.started(1).unwrap();
        entry.finished(ok_result(), 2).unwrap();
        let error = entry.started(3).unwrap_err();
        assert!(matches!(error, JournalError::IllegalTransition { from: State::Finished, to: State::Started, .. }));
        assert!(error.to_string().contains("d1"), "{error}");
        assert!(entry.finished(ok_result(), 3).is_err());
        let before = entry.clone();
        entry.waiting("late".into());
        entry.skipped("late".into());
        entry.spawned(1, None);
        assert_eq!(entry, before, "infallible transitions leave a finished entry alone");

        let mut fresh = Entry::seen(&http_deployment(), 0);
        fresh.delivery_attempted(DeliveryOutcome::Delivered { status: 200 }, 1);
        assert_eq!(fresh.state, State::Seen, "nothing to deliver before Finished");
        fresh.spawned(5, None);
        assert!(fresh.run.is_none());

        let mut skipped = Entry::seen(&http_deployment(), 0);
        skipped.skipped("os-apply-config".into());
        assert_eq!((skipped.state, skipped.waiting_reason.as_deref()), (State::Skipped, Some("os-apply-config")));
        assert!(skipped.started(1).is_err());
    }

    #[test]
    fn transient_failures_back_off_and_permanent_ones_stop() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(1);
        let mut entry = Entry::seen(&http_deployment(), 0);
        entry.finished(ok_result(), 0).unwrap();
        let mut previous = 0;
        for attempt in 1..=3u64 {
            entry.delivery_attempted_with(DeliveryOutcome::Transient { error: "HTTP 503".into() }, 10_000, &mut rng);
            let next = entry.next_attempt_at().unwrap();
            let base = 1_000 * (1 << (attempt - 1));
            assert!((10_000 + base * 8 / 10..=10_000 + base * 12 / 10).contains(&next), "attempt {attempt}: {next}");
            assert!(next > previous);
            previous = next;
        }
        assert!(!entry.delivery_due(10_000));
        assert!(entry.delivery_due(previous));
        entry.delivery_attempted(DeliveryOutcome::Permanent { error: "HTTP 403 Forbidden".into() }, 20_000);
        let signal = entry.signal.clone().unwrap();
        assert_eq!(signal.attempts, 4);
        assert_eq!(signal.permanent_failure.as_deref(), Some("HTTP 403 Forbidden"));
        assert_eq!(entry.state, State::Finished);
        assert!(entry.permanently_failed());
        assert!(!entry.awaits_delivery() && !entry.delivery_due(u64::MAX));
    }

    #[test]
    fn serialises_state_in_lowercase() {
        let entry = Entry::seen(&http_deployment(), 0);
        let value = serde_json::to_value(&entry).unwrap();
        assert_eq!(value["state"], "seen");
        let back: Entry = serde_json::from_value(value).unwrap();
        assert_eq!(back, entry);
    }
}
