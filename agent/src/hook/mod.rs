//! Running one deployment through its hook, the heat-agents way: choosing the hook (`lookup`),
//! the built-ins of anneal-hooks, `script` among them (`builtin`), external hooks fed the
//! deployment on stdin (`external`),
//! and the only code in the agent that spawns processes (`process`, with bounded output capture in
//! `capture`). Every child gets a clean environment, its own process group and a deadline.

mod builtin;
mod capture;
mod external;
pub(crate) mod lookup;
pub(crate) mod process;
#[cfg(test)]
mod testing;

use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anneal_protocol::{Deployment, HookResult};
use tokio_util::sync::CancellationToken;

use process::{ProcessError, ProcessOutput, ProcessSpec};

use crate::fsutil::UnsafePath;

/// Per-stream bound on the hook output the agent keeps unless configured otherwise.
pub(crate) const DEFAULT_MAX_OUTPUT_BYTES: usize = 8 * 1024 * 1024;
/// How long the output pipes are still read after a hook exited; a daemon the hook started may
/// keep them open forever (heat-config would hang on it).
pub(crate) const DRAIN_AFTER_EXIT: Duration = Duration::from_secs(2);
/// `deploy_status_code` of a run killed at its deadline (the status of coreutils `timeout`).
pub(crate) const TIMED_OUT_STATUS: i64 = 124;

/// Where hooks are found and what every run gets.
#[derive(Debug, Clone)]
pub struct HookSettings {
    pub(crate) hooks_dirs: Vec<PathBuf>,
    /// `<state_dir>/script`: the built-in script hook's files, and every hook's cwd.
    pub work_dir: PathBuf,
    /// `<state_dir>/outputs`: `heat_outputs_path` lives here.
    pub outputs_dir: PathBuf,
    /// The whole environment of a hook before inputs (PATH, LANG, HOME + `hook_env`).
    pub(crate) base_env: Vec<(String, String)>,
    /// Between SIGTERM and SIGKILL of a hook's process group.
    pub(crate) kill_grace: Duration,
    /// Per stream; the tail is kept.
    pub(crate) max_output_bytes: usize,
    /// Where the run markers `<deployment id>.run` live (the journal directory): each hook's
    /// environment names its marker (see `orphan`); `None` for runs outside the journal (`hook-test`).
    pub run_markers_dir: Option<PathBuf>,
}

/// How a deployment would be run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum HookChoice {
    /// One of anneal-hooks' built-ins (no file of its name in the hooks dirs).
    Builtin(anneal_hooks::Builtin),
    External(PathBuf),
    /// Not run and not waited for (the group is handled elsewhere).
    Skip {
        reason: String,
    },
    /// No hook yet; the deployment waits (another deployment may install it).
    Missing {
        group: String,
        searched: Vec<PathBuf>,
    },
    /// A hook was found, but someone other than root or the agent's user could change it: it is
    /// never run, and the deployment fails saying why.
    Unsafe {
        group: String,
        problem: UnsafePath,
    },
}

/// A hook process that has started, for the journal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Spawned {
    pub(crate) pid: u32,
    /// Field 22 of `/proc/<pid>/stat`, to recognise the process across pid reuse.
    pub(crate) process_start_time: Option<u64>,
}

/// How a hook process ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ending {
    Exited(i32),
    Signalled(i32),
    TimedOut { after: Duration },
}

/// A finished run: the result to signal and how the process ended.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct HookRun {
    pub(crate) result: HookResult,
    /// The result is heat-config's wrapping of an external hook's stdout that was not one JSON
    /// object (`{deploy_stdout, deploy_stderr, deploy_status_code}`), as `hook-test --check`
    /// reports; false for an answer, an empty stdout and every built-in.
    pub(crate) wrapped: bool,
    pub(crate) ending: Ending,
    pub(crate) duration: Duration,
}

#[derive(Debug, thiserror::Error)]
pub enum HookError {
    #[error("cannot start hook {path}")]
    Spawn { path: PathBuf, source: io::Error },
    #[error("cannot {action} {path}")]
    Io { action: &'static str, path: PathBuf, source: io::Error },
    /// Shutdown killed the hook's group; the run counts as interrupted.
    #[error("hook {group} was stopped by shutdown")]
    Cancelled { group: String },
    #[error("cannot run a hook for group {group}: {reason}")]
    NotRunnable { group: String, reason: String },
    #[error("deployment id {id:?} cannot be used as a file name")]
    UnsafeId { id: String },
    /// The task running the hook panicked or was aborted (reported by the caller).
    #[error("cannot finish the hook's task: {detail}")]
    Panicked { detail: String },
}

/// Runs deployments through their hooks.
#[derive(Debug)]
pub(crate) struct HookRunner {
    settings: HookSettings,
    /// The merged metadata of the latest collection, for the built-in apply-config hook.
    metadata: std::sync::RwLock<Option<std::sync::Arc<serde_json::Value>>>,
}

impl HookRunner {
    pub(crate) fn new(settings: HookSettings) -> HookRunner {
        HookRunner { settings, metadata: std::sync::RwLock::new(None) }
    }

    /// The metadata the built-ins see from now on (the collector's merged documents).
    pub(crate) fn set_metadata(&self, metadata: Option<std::sync::Arc<serde_json::Value>>) {
        if let Ok(mut current) = self.metadata.write() {
            *current = metadata;
        }
    }

    /// The script and output files a run of `deployment` may have left (see
    /// `anneal_hooks::script_run_files`).
    pub(crate) fn run_files(&self, deployment: &Deployment) -> Vec<PathBuf> {
        anneal_hooks::script_run_files(&self.settings.work_dir, &self.settings.outputs_dir, deployment)
    }

    pub(crate) fn settings(&self) -> &HookSettings {
        &self.settings
    }

    /// The hook for `deployment`, which is already component-resolved (group = the tool).
    pub(crate) fn choose(&self, deployment: &Deployment) -> HookChoice {
        lookup::choose(&self.settings.hooks_dirs, deployment)
    }

    /// Runs `deployment` with `choice` under `timeout`. A hook that fails or times out is an
    /// `Ok` run whose result says so; errors are for runs that could not happen (or shutdown).
    pub(crate) async fn run(
        &self,
        deployment: &Deployment,
        choice: &HookChoice,
        timeout: Duration,
        shutdown: &CancellationToken,
        on_spawn: impl FnMut(Spawned) + Send,
    ) -> Result<HookRun, HookError> {
        let run = match choice {
            HookChoice::Builtin(builtin) => {
                let metadata = self.metadata.read().ok().and_then(|metadata| metadata.clone());
                let call = builtin::Call { builtin: *builtin, deployment, metadata: metadata.as_deref(), timeout };
                builtin::run(&self.settings, call, shutdown, on_spawn).await?
            }
            HookChoice::External(path) => {
                external::run(&self.settings, path, deployment, timeout, shutdown, on_spawn).await?
            }
            HookChoice::Skip { reason } => {
                return Err(HookError::NotRunnable { group: deployment.group.clone(), reason: reason.clone() });
            }
            HookChoice::Missing { group, searched } => {
                let dirs: Vec<String> = searched.iter().map(|dir| dir.display().to_string()).collect();
                let reason = format!("no hook in {}", dirs.join(", "));
                return Err(HookError::NotRunnable { group: group.clone(), reason });
            }
            HookChoice::Unsafe { group, problem } => {
                return Err(HookError::NotRunnable { group: group.clone(), reason: problem.to_string() });
            }
        };
        tracing::debug!(
            deployment_id = %deployment.id,
            hook = %deployment.group,
            ending = ?run.ending,
            duration_ms = run.duration.as_millis() as u64,
            "hook run ended"
        );
        Ok(run)
    }
}

impl HookSettings {
    /// A process spec with this agent's limits; the caller fills in stdin.
    fn process_spec<'a>(
        &'a self,
        deployment_id: &str,
        program: &'a Path,
        env: &'a [(String, String)],
        timeout: Duration,
    ) -> ProcessSpec<'a> {
        ProcessSpec {
            program,
            args: &[],
            env,
            cwd: &self.work_dir,
            stdin: None,
            timeout,
            kill_grace: self.kill_grace,
            max_output_bytes: self.max_output_bytes,
            drain_after_exit: DRAIN_AFTER_EXIT,
            // The journal refuses unsafe ids before anything runs; checked again for the path.
            run_marker: self
                .run_markers_dir
                .as_ref()
                .filter(|_| anneal_protocol::deployment::is_safe_id(deployment_id))
                .map(|dir| dir.join(format!("{deployment_id}.run"))),
        }
    }
}

/// The result of a run killed at its deadline: what it printed, plus a line saying why it ended.
fn timed_out_result(group: &str, output: &ProcessOutput, after: Duration) -> HookResult {
    let stderr = timed_out_text(group, &output.stderr.text(), after);
    HookResult::from_process(&output.stdout.text(), &stderr, TIMED_OUT_STATUS)
}

/// A timed-out run's stderr: what it printed, then a line saying why it ended.
fn timed_out_text(group: &str, stderr: &str, after: Duration) -> String {
    let mut stderr = stderr.to_string();
    if !stderr.is_empty() && !stderr.ends_with('\n') {
        stderr.push('\n');
    }
    stderr.push_str(&format!("anneal: hook {group} timed out after {}; process group killed", describe(after)));
    stderr
}

/// `N s` for whole seconds (the configured unit), `N ms` otherwise.
fn describe(duration: Duration) -> String {
    if duration.subsec_nanos() == 0 {
        format!("{} s", duration.as_secs())
    } else {
        format!("{} ms", duration.as_millis())
    }
}

/// Maps a process failure to the hook's error.
fn hook_error(error: ProcessError, group: &str) -> HookError {
    match error {
        ProcessError::Spawn { path, source } => HookError::Spawn { path, source },
        ProcessError::Wait { path, source } => HookError::Io { action: "wait for hook", path, source },
        ProcessError::Cancelled { .. } => HookError::Cancelled { group: group.to_string() },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hook::capture::Captured;
    use crate::hook::testing::{deployment, settings};
    use serde_json::json;

    #[tokio::test]
    async fn skipped_and_missing_choices_do_not_run() {
        let root = tempfile::tempdir().unwrap();
        let runner = HookRunner::new(settings(root.path()));
        let target = deployment(json!({"id": "d1", "group": "no-such-tool"}));
        let shutdown = CancellationToken::new();
        let missing = runner.choose(&target);
        let error = runner.run(&target, &missing, Duration::from_secs(1), &shutdown, |_| {}).await.unwrap_err();
        assert!(
            matches!(&error, HookError::NotRunnable { group, reason } if group == "no-such-tool" && reason.contains("hooks1"))
        );
        let skip = HookChoice::Skip { reason: "handled elsewhere".into() };
        let error = runner.run(&target, &skip, Duration::from_secs(1), &shutdown, |_| {}).await.unwrap_err();
        assert!(matches!(error, HookError::NotRunnable { .. }));
    }

    #[test]
    fn run_future_can_be_spawned() {
        fn assert_send<T: Send>(_: &T) {}
        let root = tempfile::tempdir().unwrap();
        let runner = HookRunner::new(settings(root.path()));
        let target = deployment(json!({"id": "d1", "group": "script"}));
        let shutdown = CancellationToken::new();
        let choice = HookChoice::Builtin(anneal_hooks::Builtin::Script);
        let future = runner.run(&target, &choice, Duration::from_secs(1), &shutdown, |_| {});
        assert_send(&future);
    }

    #[test]
    fn durations_are_described_in_the_configured_unit() {
        assert_eq!(describe(Duration::from_secs(3600)), "3600 s");
        assert_eq!(describe(Duration::from_millis(300)), "300 ms");
    }

    #[test]
    fn timed_out_result_keeps_output_and_says_why() {
        let output = ProcessOutput {
            stdout: Captured { bytes: b"partial".to_vec(), dropped: 0 },
            stderr: Captured { bytes: b"working".to_vec(), dropped: 0 },
            status_code: -15,
            ending: Ending::TimedOut { after: Duration::from_secs(5) },
            duration: Duration::from_secs(5),
        };
        let result = timed_out_result("puppet", &output, Duration::from_secs(5));
        assert_eq!(
            serde_json::to_value(&result).unwrap(),
            json!({
                "deploy_stdout": "partial",
                "deploy_stderr": "working\nanneal: hook puppet timed out after 5 s; process group killed",
                "deploy_status_code": 124,
            })
        );
    }
}
