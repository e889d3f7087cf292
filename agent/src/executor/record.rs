//! The executor's half of recording results: a hook run's outcome becomes a durable `finished`
//! entry (or, when the journal refuses it, waits in `unrecorded` and is retried; the run itself is
//! never repeated), and the outbox is woken for it (or, for a NO_SIGNAL deployment, which owes
//! nothing, the polling tasks are told the engine may have moved).

use anneal_protocol::HookResult;
use tracing::{error, info, warn};

use super::{Executor, ExecutorError};
use crate::clock::now_millis;
use crate::failpoint::{self, Failpoint};
use crate::hook::{Ending, HookError, HookRun, Spawned};
use crate::journal::State;
use crate::orphan;

impl Executor {
    /// Journals how a run ended; the run marker goes once the result is recorded.
    pub(super) fn record_run(
        &mut self,
        id: &str,
        spawned: Option<Spawned>,
        outcome: Result<HookRun, HookError>,
    ) -> Result<(), ExecutorError> {
        // The process is reaped: its pid goes into the entry, which the finish makes durable.
        if let (Some(process), Some(entry)) = (spawned, self.entries.get_mut(id)) {
            entry.spawned(process.pid, process.process_start_time);
        }
        let recorded = match self.run_result(id, outcome) {
            Some(result) => self.record_result(id, result),
            // Stopped by shutdown: the run counts as interrupted, there is nothing to record.
            None => Ok(()),
        };
        if let Err(error) = orphan::remove_marker(&orphan::marker_path(self.journal.dir(), id)) {
            warn!(deployment_id = %id, %error, "cannot remove the hook's run marker");
        }
        recorded
    }

    /// The result to record for a run, `None` if shutdown stopped it.
    fn run_result(&self, id: &str, outcome: Result<HookRun, HookError>) -> Option<HookResult> {
        match outcome {
            Ok(run) => {
                let ending = match run.ending {
                    Ending::Exited(code) => format!("exited {code}"),
                    Ending::Signalled(signal) => format!("killed by signal {signal}"),
                    Ending::TimedOut { after } => format!("timed out after {} s", after.as_secs()),
                };
                info!(deployment_id = %id, %ending, duration_ms = run.duration.as_millis() as u64, "hook finished");
                Some(run.result)
            }
            Err(HookError::Cancelled { .. }) => {
                info!(deployment_id = %id, "hook stopped by shutdown; the run counts as interrupted");
                None
            }
            Err(error) => {
                let error = crate::error_chain(&error);
                error!(deployment_id = %id, %error, "hook could not run");
                Some(HookResult::from_process("", &format!("anneal: {error}"), 1))
            }
        }
    }

    fn record_result(&mut self, id: &str, result: HookResult) -> Result<(), ExecutorError> {
        self.counts.ran += 1;
        failpoint::hit(Failpoint::AfterHookExit);
        let recorded = self.finish(id, result.clone());
        if recorded.is_err() {
            // Kept until the journal takes it (a full disk): the run happened, so it must be
            // recorded, never repeated.
            self.unrecorded.insert(id.to_string(), result);
        }
        recorded
    }

    /// Retries journaling the results whose `finished` write failed.
    pub(super) fn record_unrecorded(&mut self) -> Result<(), ExecutorError> {
        let ids: Vec<String> = self.unrecorded.keys().cloned().collect();
        for id in ids {
            let Some(result) = self.unrecorded.get(&id).cloned() else { continue };
            self.finish(&id, result)?;
            self.unrecorded.remove(&id);
        }
        Ok(())
    }

    /// Writes `id`'s result durably, then tells the outbox, or the polling tasks when nothing is
    /// owed (NO_SIGNAL: the result is as good as delivered).
    pub(super) fn finish(&mut self, id: &str, result: HookResult) -> Result<(), ExecutorError> {
        let now = now_millis();
        self.update(id, |entry| entry.finished(result, now))?;
        failpoint::hit(Failpoint::AfterFinished);
        if let Some(entry) = self.entries.get(id) {
            if entry.failed() {
                self.counts.failed += 1;
                warn!(deployment_id = %id, outcome = entry.outcome.as_deref().unwrap_or(""), "deployment failed");
            }
            if entry.state == State::Signalled {
                self.moved.raise();
            }
        }
        self.wake_outbox.notify_one();
        Ok(())
    }
}

#[cfg(test)]
mod tests;
