//! Start-up recovery: what a restarted agent does with the runs its predecessor left `started`
//! (see docs/journal.md). The hook of such a run may still be alive; it is found by its run marker,
//! its environment or the pid the journal recorded, and stopped before the run is decided, so two
//! copies of one deployment never run at once.

use std::time::{Duration, UNIX_EPOCH};

use anneal_protocol::{HookResult, OnInterrupt};
use tracing::{info, warn};

use super::{Executor, ExecutorError, INTERRUPTED_REASON};
use crate::journal::State;
use crate::orphan;

impl Executor {
    /// Settles every run the journal holds as started: its hook (if still alive) is stopped,
    /// then the run is failed or, with `on_interrupt: rerun`, queued to run again.
    pub(super) fn recover(&mut self) -> Result<(), ExecutorError> {
        let interrupted: Vec<String> =
            self.entries.values().filter(|entry| entry.state == State::Started).map(|entry| entry.id.clone()).collect();
        self.remove_stale_markers();
        for id in interrupted {
            self.stop_orphan(&id);
            let Some(entry) = self.entries.get(&id) else { continue };
            if entry.deployment.options.on_interrupt == Some(OnInterrupt::Rerun) {
                info!(deployment_id = %id, "interrupted run will be rerun (on_interrupt: rerun)");
                self.rerun.insert(id);
                continue;
            }
            warn!(deployment_id = %id, "run was interrupted by an agent restart; signalling failure");
            let result = HookResult::from_process("", INTERRUPTED_REASON, 1);
            self.finish(&id, result)?;
        }
        Ok(())
    }

    /// Stops the hook a previous agent left running for `id` (found by its run marker, its
    /// environment, or the pid an older journal recorded), so the interrupted run is decided with
    /// nothing of it alive.
    fn stop_orphan(&mut self, id: &str) {
        let path = orphan::marker_path(self.journal.dir(), id);
        let recorded = self.entries.get(id).and_then(|entry| entry.run.as_ref()).and_then(|run| {
            let started = UNIX_EPOCH + Duration::from_millis(run.started_at);
            run.pid.map(|pid| orphan::RunMarker {
                pid,
                process_start_time: run.process_start_time,
                written_at: started,
            })
        });
        let found = orphan::read_marker(&path).or(recorded).or_else(|| orphan::find_by_environment(&path));
        if let Some(marker) = found {
            if let (orphan::Settled::Stopped { .. }, Some(entry)) =
                (orphan::settle(id, &marker, self.runner.settings().kill_grace), self.entries.get_mut(id))
            {
                entry.spawned(marker.pid, marker.process_start_time);
            }
        }
        if let Err(error) = orphan::remove_marker(&path) {
            warn!(deployment_id = %id, %error, "cannot remove the hook's run marker");
        }
    }

    /// Pid files of runs that finished (the agent died before removing them).
    fn remove_stale_markers(&self) {
        let Ok(items) = std::fs::read_dir(self.journal.dir()) else { return };
        for item in items.flatten() {
            let name = item.file_name();
            let Some(id) = name.to_str().and_then(|name| name.strip_suffix(".run")) else { continue };
            if self.entries.get(id).is_none_or(|entry| entry.state != State::Started) {
                let _ = orphan::remove_marker(&item.path());
            }
        }
    }
}
