//! Child processes of the benchmarks: each runs in its own process group with a deadline (the
//! group is killed when it passes); long-running ones are `anneal_tests::Daemon`s, stopped as a
//! group when they drop. Also reads a process's resident set size.

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use tokio::process::Command;

use crate::error::{BenchError, BenchResult, file_error};

/// What a finished command left behind, and how long it took from spawn to exit.
#[derive(Debug)]
pub struct Finished {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
    pub wall: Duration,
}

/// Runs `command` in its own process group with stdin closed; kills the group and fails when it
/// has not finished within `limit`.
pub async fn run_timed(what: &str, mut command: Command, limit: Duration) -> BenchResult<Finished> {
    command.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).process_group(0).kill_on_drop(true);
    let started = Instant::now();
    let child =
        command.spawn().map_err(|source| BenchError::Process { what: format!("cannot start {what}"), source })?;
    let group = child.id().map(|pid| Pid::from_raw(pid as i32));
    match tokio::time::timeout(limit, child.wait_with_output()).await {
        Ok(output) => {
            let wall = started.elapsed();
            let output =
                output.map_err(|source| BenchError::Process { what: format!("waiting for {what}"), source })?;
            if let Some(group) = group {
                let _ = killpg(group, Signal::SIGKILL);
            }
            Ok(Finished {
                code: output.status.code().unwrap_or(-1),
                stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
                stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
                wall,
            })
        }
        Err(_) => {
            if let Some(group) = group {
                let _ = killpg(group, Signal::SIGKILL);
            }
            Err(BenchError::Failed(format!("{what} did not finish within {limit:?}")))
        }
    }
}

/// `run_timed` that must exit 0.
pub async fn run_ok(what: &str, command: Command, limit: Duration) -> BenchResult<Finished> {
    let finished = run_timed(what, command, limit).await?;
    if finished.code != 0 {
        return Err(BenchError::Failed(format!(
            "{what} exited {}:\n{}\n{}",
            finished.code,
            tail(&finished.stderr),
            tail(&finished.stdout)
        )));
    }
    Ok(finished)
}

/// The last 2,000 characters of `text` (for error messages).
pub fn tail(text: &str) -> &str {
    let start = text.len().saturating_sub(2000);
    let start = (start..=text.len()).find(|index| text.is_char_boundary(*index)).unwrap_or(text.len());
    &text[start..]
}

/// VmRSS of process `pid`, in KiB.
pub fn resident_kib(pid: i32) -> BenchResult<u64> {
    let path = format!("/proc/{pid}/status");
    let status = std::fs::read_to_string(&path).map_err(file_error(Path::new(&path)))?;
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|value| value.trim().trim_end_matches("kB").trim().parse().ok())
        .ok_or_else(|| BenchError::Failed(format!("no VmRSS in {path}")))
}

/// Samples VmRSS of `pid` `samples` times, `every` apart, after `settle`; returns the largest.
pub async fn idle_resident_kib(pid: i32, settle: Duration, samples: usize, every: Duration) -> BenchResult<u64> {
    tokio::time::sleep(settle).await;
    let mut largest = 0;
    for sample in 0..samples.max(1) {
        if sample > 0 {
            tokio::time::sleep(every).await;
        }
        largest = largest.max(resident_kib(pid)?);
    }
    Ok(largest)
}

/// Polls `check` every `every` until it yields a value; fails naming `what` after `limit`.
pub async fn poll_until<T>(
    what: &str,
    limit: Duration,
    every: Duration,
    mut check: impl FnMut() -> Option<T>,
) -> BenchResult<T> {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(value) = check() {
            return Ok(value);
        }
        if Instant::now() >= deadline {
            return Err(BenchError::Failed(format!("timed out after {limit:?} waiting for {what}")));
        }
        tokio::time::sleep(every).await;
    }
}
