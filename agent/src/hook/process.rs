//! The one place in the agent that starts processes. A child gets an explicit environment, its
//! own process group and a deadline; on the deadline or on shutdown the whole group gets SIGTERM,
//! then SIGKILL once the child has exited or the grace period is over, and the child is always
//! reaped. stdout and stderr are read concurrently into bounded buffers (see `capture`). A child
//! can carry the path of its run marker in its environment (`run_marker`), so an agent that dies
//! between the spawn and writing that file still leaves its successor a way to find the process.

use std::ffi::OsString;
use std::io;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::sys::signal::{Signal, killpg};
use nix::sys::wait::{Id, WaitPidFlag, WaitStatus, waitid};
use nix::unistd::Pid;
use tokio::io::AsyncWriteExt;
use tokio::process::{Child, ChildStdin, Command};
use tokio_util::sync::CancellationToken;
use tracing::{debug, warn};

use super::capture::{Captured, StreamCapture};
use super::{Ending, Spawned};
use crate::orphan::RUN_MARKER_VARIABLE;

/// How often a stopping child is checked for exit during the grace period.
const EXIT_POLL: Duration = Duration::from_millis(10);
/// Spawn attempts while the program is "text file busy": another thread of the agent may have
/// forked while it held the freshly written script open, and that fork keeps the descriptor until
/// it execs, which takes microseconds.
const BUSY_ATTEMPTS: u32 = 10;
const BUSY_PAUSE: Duration = Duration::from_millis(10);

/// What to run and under which limits.
#[derive(Debug)]
pub(crate) struct ProcessSpec<'a> {
    pub(crate) program: &'a Path,
    /// Arguments after the program name (hooks get none; the config drive's blkid and mount do).
    pub(crate) args: &'a [OsString],
    /// The complete environment of the child; nothing of the agent's own is inherited.
    pub(crate) env: &'a [(String, String)],
    pub(crate) cwd: &'a Path,
    /// Bytes written to the child's stdin, which is then closed; `None` gives it /dev/null.
    pub(crate) stdin: Option<Vec<u8>>,
    pub(crate) timeout: Duration,
    /// Time between SIGTERM and SIGKILL of the group.
    pub(crate) kill_grace: Duration,
    /// Per stream; the tail is kept.
    pub(crate) max_output_bytes: usize,
    /// How long to keep reading the pipes after the child exited: a process it left behind may
    /// hold them open indefinitely.
    pub(crate) drain_after_exit: Duration,
    /// The run marker the caller writes once the child exists; its path goes into the child's
    /// environment (`ANNEAL_RUN_MARKER`) so the child can be found before the file is written.
    pub(crate) run_marker: Option<PathBuf>,
}

/// A child that ran to its end (by itself or killed at the deadline).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ProcessOutput {
    pub(crate) stdout: Captured,
    pub(crate) stderr: Captured,
    /// The exit code, or the negated signal number for a signal death (Python's `returncode`).
    pub(crate) status_code: i64,
    pub(crate) ending: Ending,
    /// From spawn to reaping.
    pub(crate) duration: Duration,
}

#[derive(Debug, thiserror::Error)]
pub(crate) enum ProcessError {
    #[error("cannot start {path}")]
    Spawn { path: PathBuf, source: io::Error },
    #[error("cannot wait for {path}")]
    Wait { path: PathBuf, source: io::Error },
    /// Shutdown was requested; the group was killed and the child reaped.
    #[error("{path} was stopped by shutdown")]
    Cancelled { path: PathBuf },
}

/// Runs `spec` to completion, its deadline or `shutdown`, whichever comes first. `on_spawn` is
/// called once the child exists (before it is waited for) so the caller can record its pid.
pub(crate) async fn run_process(
    mut spec: ProcessSpec<'_>,
    shutdown: &CancellationToken,
    on_spawn: impl FnOnce(Spawned),
) -> Result<ProcessOutput, ProcessError> {
    let path = spec.program.to_path_buf();
    if shutdown.is_cancelled() {
        return Err(ProcessError::Cancelled { path });
    }
    let mut child = spawn(&spec).await.map_err(|source| ProcessError::Spawn { path: path.clone(), source })?;
    let started = Instant::now();
    let (pid, group) = match child.id().map(|pid| (pid, i32::try_from(pid))) {
        Some((pid, Ok(raw))) => (pid, Pid::from_raw(raw)),
        // Neither happens on Linux (the child is not reaped yet; pids fit in an i32); the
        // dropped child is still killed by kill_on_drop.
        _ => {
            let source = io::Error::other("the child's pid is unknown or out of range");
            return Err(ProcessError::Wait { path, source });
        }
    };
    let mut guard = GroupGuard { group, armed: true };
    on_spawn(Spawned { pid, process_start_time: process_start_time(pid) });

    let mut stdout = StreamCapture::start(child.stdout.take(), spec.max_output_bytes);
    let mut stderr = StreamCapture::start(child.stderr.take(), spec.max_output_bytes);
    if let (Some(bytes), Some(pipe)) = (spec.stdin.take(), child.stdin.take()) {
        tokio::spawn(feed_stdin(pipe, bytes));
    }

    let waited = wait_or_stop(&mut child, group, &spec, shutdown).await;
    // Reaped (unless waiting itself failed): the pid may be reused from now on, so the group
    // must not be signalled again.
    guard.armed = matches!(waited, Waited::Failed(_));
    let (status, ending) = match waited {
        Waited::Ended(status, ending) => (status, ending),
        Waited::Failed(source) => return Err(ProcessError::Wait { path, source }),
        Waited::Cancelled => return Err(ProcessError::Cancelled { path }),
    };
    let duration = started.elapsed();
    drain(&mut stdout, &mut stderr, spec.drain_after_exit).await;
    Ok(ProcessOutput {
        stdout: stdout.take(),
        stderr: stderr.take(),
        status_code: status_code(status),
        ending,
        duration,
    })
}

/// How waiting for a child ended; in every case but `Failed` the child has been reaped.
enum Waited {
    Ended(ExitStatus, Ending),
    Cancelled,
    Failed(io::Error),
}

/// Waits for the child's own exit, or stops its group at the deadline or on shutdown.
async fn wait_or_stop(child: &mut Child, group: Pid, spec: &ProcessSpec<'_>, shutdown: &CancellationToken) -> Waited {
    let stopped_by_shutdown = tokio::select! {
        biased;
        status = child.wait() => {
            return match status {
                Ok(status) => Waited::Ended(status, ending_of(status)),
                Err(error) => Waited::Failed(error),
            };
        }
        () = shutdown.cancelled() => true,
        () = tokio::time::sleep(spec.timeout) => false,
    };
    if !stopped_by_shutdown {
        warn!(
            program = %spec.program.display(),
            timeout_ms = spec.timeout.as_millis() as u64,
            "deadline reached; killing the process group"
        );
    }
    match stop_group(child, group, spec.kill_grace).await {
        Err(error) => Waited::Failed(error),
        Ok(_) if stopped_by_shutdown => Waited::Cancelled,
        Ok(status) => Waited::Ended(status, Ending::TimedOut { after: spec.timeout }),
    }
}

/// Kills the group if the run is abandoned before the child was reaped (the caller's future
/// dropped, an error returned early). `kill_on_drop` alone would reach only the child itself.
struct GroupGuard {
    group: Pid,
    armed: bool,
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        if self.armed {
            let _ = killpg(self.group, Signal::SIGKILL);
        }
    }
}

async fn spawn(spec: &ProcessSpec<'_>) -> io::Result<Child> {
    let mut command = Command::new(spec.program);
    command
        .args(spec.args)
        .env_clear()
        .envs(spec.env.iter().map(|(name, value)| (name, value)))
        .current_dir(spec.cwd)
        .stdin(if spec.stdin.is_some() { Stdio::piped() } else { Stdio::null() })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    if let Some(run_marker) = &spec.run_marker {
        command.env(RUN_MARKER_VARIABLE, run_marker);
    }
    let mut attempt = 1;
    loop {
        match command.spawn() {
            Err(error) if error.raw_os_error() == Some(Errno::ETXTBSY as i32) && attempt < BUSY_ATTEMPTS => {
                debug!(program = %spec.program.display(), attempt, "program is busy; retrying the spawn");
                tokio::time::sleep(BUSY_PAUSE * attempt).await;
                attempt += 1;
            }
            other => return other,
        }
    }
}

async fn feed_stdin(mut pipe: ChildStdin, bytes: Vec<u8>) {
    // A hook may exit without reading its input; that is its business, not an error.
    if let Err(error) = pipe.write_all(&bytes).await
        && error.kind() != io::ErrorKind::BrokenPipe
    {
        debug!(%error, "writing a hook's stdin failed");
    }
}

/// SIGTERM to the group, up to `grace` for the child to exit, then SIGKILL to what is left of the
/// group (grandchildren that ignore SIGTERM or outlive the child), then reap.
async fn stop_group(child: &mut Child, group: Pid, grace: Duration) -> io::Result<ExitStatus> {
    let _ = killpg(group, Signal::SIGTERM);
    wait_for_exit_without_reaping(group, grace).await;
    // The child is not reaped yet (at worst a zombie), so its pid still names this group.
    let _ = killpg(group, Signal::SIGKILL);
    child.wait().await
}

/// Waits up to `grace` for the child `pid` to exit, leaving it unreaped (`WNOWAIT`).
async fn wait_for_exit_without_reaping(pid: Pid, grace: Duration) {
    let deadline = Instant::now() + grace;
    loop {
        match waitid(Id::Pid(pid), WaitPidFlag::WEXITED | WaitPidFlag::WNOWAIT | WaitPidFlag::WNOHANG) {
            Ok(WaitStatus::StillAlive) => {}
            // Exited, or no longer ours to wait for: either way nothing is gained by waiting.
            Ok(_) | Err(_) => return,
        }
        let now = Instant::now();
        if now >= deadline {
            return;
        }
        tokio::time::sleep(EXIT_POLL.min(deadline - now)).await;
    }
}

async fn drain(stdout: &mut StreamCapture, stderr: &mut StreamCapture, limit: Duration) {
    let both = async {
        stdout.finished().await;
        stderr.finished().await;
    };
    if tokio::time::timeout(limit, both).await.is_err() {
        debug!("a process the hook left running still holds its output pipes; not waiting for it");
    }
}

fn ending_of(status: ExitStatus) -> Ending {
    match (status.code(), status.signal()) {
        (Some(code), _) => Ending::Exited(code),
        (None, Some(signal)) => Ending::Signalled(signal),
        // wait() reports only exits and signal deaths; keep something non-zero regardless.
        (None, None) => Ending::Exited(-1),
    }
}

/// The exit code, or minus the signal number for a signal death, as Python's `returncode`.
pub(crate) fn status_code(status: ExitStatus) -> i64 {
    match (status.code(), status.signal()) {
        (Some(code), _) => i64::from(code),
        (None, Some(signal)) => -i64::from(signal),
        (None, None) => -1,
    }
}

/// Field 22 of `/proc/<pid>/stat` (start time in clock ticks since boot): with the pid it
/// identifies the process across pid reuse, so a restarted agent can tell whether a recorded run
/// is still alive.
pub(crate) fn process_start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    parse_start_time(&stat)
}

fn parse_start_time(stat: &str) -> Option<u64> {
    // The command name (field 2) is in parentheses and may itself contain spaces and ')'.
    let (_, after_name) = stat.rsplit_once(')')?;
    // after_name starts with field 3, so field 22 is the 20th one.
    after_name.split_whitespace().nth(19)?.parse().ok()
}

#[cfg(test)]
mod tests;
