//! Child processes of the tests: every one runs in its own process group. `Daemon` is a
//! long-running one whose group is stopped when it drops (TERM, a short grace, KILL);
//! `run_command` runs one to completion with a deadline and kills its group when it passes.

use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill, killpg};
use nix::unistd::Pid;
use tokio::process::{Child, Command};

/// How long a dropped `Daemon` gets between TERM and KILL.
const DROP_GRACE: Duration = Duration::from_millis(1500);

/// What a finished command left behind.
#[derive(Debug)]
pub struct CommandOutput {
    /// The exit code; -1 when it was killed by a signal.
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl CommandOutput {
    /// Panics with the command's stderr unless it exited 0; returns stdout.
    pub fn expect_success(self, what: &str) -> String {
        assert_eq!(self.code, 0, "{what} failed (exit {}): {}{}", self.code, self.stderr, self.stdout);
        self.stdout
    }
}

/// Runs `command` in its own process group with stdin closed; kills the group and panics when
/// it has not finished within `limit`.
pub async fn run_command(mut command: Command, limit: Duration) -> CommandOutput {
    command.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).process_group(0).kill_on_drop(true);
    let child = command.spawn().unwrap_or_else(|error| panic!("cannot start {command:?}: {error}"));
    let group = child.id().map(|pid| Pid::from_raw(pid as i32));
    match tokio::time::timeout(limit, child.wait_with_output()).await {
        Ok(output) => {
            let output = output.expect("waiting for a command");
            CommandOutput {
                code: output.status.code().unwrap_or(-1),
                stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
                stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
            }
        }
        Err(_) => {
            if let Some(group) = group {
                let _ = killpg(group, Signal::SIGKILL);
            }
            panic!("{command:?} did not finish within {limit:?}");
        }
    }
}

/// A long-running child in its own process group, stderr (and stdout) to files; the group is
/// stopped when the value drops.
pub struct Daemon {
    child: Child,
    log: PathBuf,
}

impl Daemon {
    /// Starts `command` in a new process group, stdin closed, stdout to `stdout`, stderr to `log`.
    pub fn spawn(mut command: Command, stdout: &Path, log: &Path) -> Daemon {
        let open =
            |path: &Path| std::fs::File::create(path).unwrap_or_else(|error| panic!("{}: {error}", path.display()));
        command
            .stdin(Stdio::null())
            .stdout(Stdio::from(open(stdout)))
            .stderr(Stdio::from(open(log)))
            .process_group(0)
            .kill_on_drop(true);
        let child = command.spawn().unwrap_or_else(|error| panic!("cannot start {command:?}: {error}"));
        Daemon { child, log: log.to_path_buf() }
    }

    /// The process id (also its process group id); `None` once it was reaped.
    pub fn pid(&self) -> Option<i32> {
        self.child.id().map(|pid| pid as i32)
    }

    /// Whether the process still runs (it has not exited, even as an unreaped zombie).
    pub fn is_alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// The stderr log so far.
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Sends `signal` to the process alone (not its group).
    pub fn signal(&self, signal: Signal) {
        if let Some(pid) = self.pid() {
            let _ = kill(Pid::from_raw(pid), signal);
        }
    }

    /// SIGTERM, then waits for the exit (panics after `limit`).
    pub async fn terminate(&mut self, limit: Duration) -> ExitStatus {
        self.signal(Signal::SIGTERM);
        self.wait(limit).await
    }

    /// Waits for the exit (panics after `limit`).
    pub async fn wait(&mut self, limit: Duration) -> ExitStatus {
        match tokio::time::timeout(limit, self.child.wait()).await {
            Ok(status) => status.expect("waiting for a daemon"),
            Err(_) => panic!("process did not exit within {limit:?}; log:\n{}", self.log_text()),
        }
    }

    /// SIGKILL of the whole group, no grace (a crash), and reaps it.
    pub async fn kill(&mut self) {
        if let Some(pid) = self.pid() {
            let _ = killpg(Pid::from_raw(pid), Signal::SIGKILL);
        }
        let _ = self.child.wait().await;
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let Some(pid) = self.pid() else { return };
        let group = Pid::from_raw(pid);
        let _ = killpg(group, Signal::SIGTERM);
        let deadline = Instant::now() + DROP_GRACE;
        while Instant::now() < deadline {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = killpg(group, Signal::SIGKILL);
        let _ = self.child.start_kill();
        let _ = self.child.try_wait();
    }
}

/// A field of `/proc/<pid>/status` in KiB (`VmHWM`: the peak resident set; `VmRSS`: now).
pub fn status_kib(pid: i32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("the process's /proc status");
    let line = status.lines().find(|line| line.starts_with(field)).unwrap_or_else(|| panic!("no {field} line"));
    line.split_whitespace().nth(1).and_then(|value| value.parse().ok()).expect("a number of kB")
}
