//! Hooks left running by an agent that died. Right after spawning a hook the agent writes
//! `<id>.run` (pid and process start time) in the journal directory, and the hook's environment
//! names that file (`ANNEAL_RUN_MARKER`), which covers an agent that died in between. A restarted
//! agent reads the file (or, without one, looks for a group leader whose environment names it)
//! for each run the journal holds as started, recognises the process (same pid *and* same start
//! time, so a reused pid is never taken for the hook), and stops its whole process group (TERM,
//! grace, KILL) before deciding what the interrupted run becomes: two copies of one deployment
//! never run at once.

use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use tracing::{info, warn};

use crate::fsutil::create_new_file;

/// How far the start time of a process may lie from the moment its run marker was written when the
/// file holds no start time (the agent died between the child's exec and its own write).
const START_TIME_TOLERANCE_SECS: f64 = 5.0;
/// How often a stopping group is checked.
const POLL: Duration = Duration::from_millis(20);
/// How long to wait for a group to vanish after SIGKILL.
const KILL_WAIT: Duration = Duration::from_secs(5);

/// The variable that carries a hook's run marker path in its environment.
pub(crate) const RUN_MARKER_VARIABLE: &str = "ANNEAL_RUN_MARKER";

/// What `<id>.run` says about a hook process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RunMarker {
    pub(crate) pid: u32,
    /// Field 22 of `/proc/<pid>/stat`, when the agent lived long enough to add it.
    pub(crate) process_start_time: Option<u64>,
    /// When the file was last written (its mtime).
    pub(crate) written_at: SystemTime,
}

/// What became of an orphan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Settled {
    /// No process of that run is alive (or the pid now names another process).
    NotRunning,
    /// The group was stopped; `killed` says whether SIGKILL was needed.
    Stopped { pid: u32, killed: bool },
}

/// The marker file of `id` in `journal_dir`.
pub(crate) fn marker_path(journal_dir: &Path, id: &str) -> PathBuf {
    journal_dir.join(format!("{id}.run"))
}

/// Reads a marker; `None` when there is none or it is unreadable (a child that died mid-write).
pub(crate) fn read_marker(path: &Path) -> Option<RunMarker> {
    let text = fs::read_to_string(path).ok()?;
    let written_at = fs::metadata(path).and_then(|metadata| metadata.modified()).ok()?;
    let mut fields = text.split_whitespace();
    let pid = fields.next()?.parse().ok()?;
    let process_start_time = fields.next().and_then(|field| field.parse().ok());
    Some(RunMarker { pid, process_start_time, written_at })
}

/// The run whose environment names `path` as its marker: a process leading its own group (as
/// every hook does) that the agent spawned but died before recording. Scans `/proc`; only used
/// on start-up for a started run without a marker file.
pub(crate) fn find_by_environment(path: &Path) -> Option<RunMarker> {
    let wanted = format!("{RUN_MARKER_VARIABLE}={}", path.display());
    let processes = fs::read_dir("/proc").ok()?;
    for item in processes.flatten() {
        let Some(pid) = item.file_name().to_str().and_then(|name| name.parse::<u32>().ok()) else { continue };
        let Ok(environment) = fs::read(item.path().join("environ")) else { continue };
        if !environment.split(|byte| *byte == 0).any(|variable| variable == wanted.as_bytes()) {
            continue;
        }
        let Some(process) = ProcessStat::read(pid) else { continue };
        if process.process_group == i64::from(pid) {
            let process_start_time = Some(process.start_time);
            return Some(RunMarker { pid, process_start_time, written_at: SystemTime::now() });
        }
    }
    None
}

/// Writes a run marker (after the spawn returned). Not fsync'd: a power loss ends
/// every hook too, so only an agent crash, which the page cache survives, needs the file. Written
/// with one `write` into a new file, without a temp file: an agent that dies in between leaves an
/// empty file, which reads as no marker, and the hook is then found by its environment as when the
/// agent died before writing at all. Like every file the agent creates, it is created exclusively
/// and never through a symbolic link (an older marker of the id is removed first).
pub(crate) fn write_marker(path: &Path, pid: u32, process_start_time: Option<u64>) -> io::Result<()> {
    let text = match process_start_time {
        Some(start) => format!("{pid} {start}\n"),
        None => format!("{pid}\n"),
    };
    let mut file = match create_new_file(path, 0o600) {
        Err(error) if error.kind() == io::ErrorKind::AlreadyExists => {
            remove_marker(path)?;
            create_new_file(path, 0o600)?
        }
        created => created?,
    };
    file.write_all(text.as_bytes())
}

/// Removes a marker; a missing one is fine.
pub(crate) fn remove_marker(path: &Path) -> io::Result<()> {
    match fs::remove_file(path) {
        Err(error) if error.kind() != io::ErrorKind::NotFound => Err(error),
        _ => Ok(()),
    }
}

/// Stops the process group of the run `marker` describes, if that process still lives, waiting
/// up to `grace` after SIGTERM before SIGKILL; blocks until the group leader is gone.
pub(crate) fn settle(id: &str, marker: &RunMarker, grace: Duration) -> Settled {
    let Some(process) = ProcessStat::read(marker.pid) else { return Settled::NotRunning };
    if !process.is_the_run_of(marker) {
        info!(deployment_id = id, pid = marker.pid, "the recorded hook pid now names another process; left alone");
        return Settled::NotRunning;
    }
    let Ok(raw) = i32::try_from(marker.pid) else { return Settled::NotRunning };
    let group = Pid::from_raw(raw);
    warn!(deployment_id = id, pid = marker.pid, "a hook of the previous agent is still running; stopping its group");
    let _ = killpg(group, Signal::SIGTERM);
    if wait_until_gone(marker.pid, grace) {
        return Settled::Stopped { pid: marker.pid, killed: false };
    }
    let _ = killpg(group, Signal::SIGKILL);
    if !wait_until_gone(marker.pid, KILL_WAIT) {
        warn!(deployment_id = id, pid = marker.pid, "the old hook survived SIGKILL; deciding anyway");
    }
    Settled::Stopped { pid: marker.pid, killed: true }
}

/// Waits until `pid` no longer runs (gone or a zombie); true if it went within `limit`.
fn wait_until_gone(pid: u32, limit: Duration) -> bool {
    let deadline = Instant::now() + limit;
    loop {
        if ProcessStat::read(pid).is_none_or(|process| process.state == 'Z') {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        thread::sleep(POLL);
    }
}

/// The fields of `/proc/<pid>/stat` this module needs.
#[derive(Debug, Clone, PartialEq, Eq)]
struct ProcessStat {
    state: char,
    process_group: i64,
    start_time: u64,
}

impl ProcessStat {
    fn read(pid: u32) -> Option<ProcessStat> {
        ProcessStat::parse(&fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
    }

    fn parse(stat: &str) -> Option<ProcessStat> {
        // The command name (field 2) is in parentheses and may itself contain spaces and ')'.
        let (_, after_name) = stat.rsplit_once(')')?;
        let fields: Vec<&str> = after_name.split_whitespace().collect();
        // after_name starts with field 3 (state); field 5 is the group, field 22 the start time.
        Some(ProcessStat {
            state: fields.first()?.chars().next()?,
            process_group: fields.get(2)?.parse().ok()?,
            start_time: fields.get(19)?.parse().ok()?,
        })
    }

    /// Whether this process is the hook the marker names: the recorded start time matches, or,
    /// without one, the process leads its own group (as every hook does) and started when the
    /// marker was written.
    fn is_the_run_of(&self, marker: &RunMarker) -> bool {
        if self.state == 'Z' {
            return false;
        }
        if let Some(recorded) = marker.process_start_time {
            return recorded == self.start_time;
        }
        if self.process_group != i64::from(marker.pid) {
            return false;
        }
        match (started_at_unix_secs(self.start_time), marker.written_at.duration_since(UNIX_EPOCH)) {
            (Some(started), Ok(written)) => (started - written.as_secs_f64()).abs() <= START_TIME_TOLERANCE_SECS,
            _ => false,
        }
    }
}

/// A process start time (clock ticks since boot) as seconds since the Unix epoch.
fn started_at_unix_secs(start_ticks: u64) -> Option<f64> {
    let stat = fs::read_to_string("/proc/stat").ok()?;
    let boot: f64 = stat.lines().find_map(|line| line.strip_prefix("btime "))?.trim().parse().ok()?;
    let ticks_per_second = nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK).ok()??;
    Some(boot + start_ticks as f64 / ticks_per_second as f64)
}

#[cfg(test)]
mod tests;
