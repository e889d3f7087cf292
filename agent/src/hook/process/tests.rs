//! Tests of process spawning, killing and capture with small `#!/bin/sh` scripts.

use super::*;
use crate::hook::testing::{environment, shell_script};
use std::sync::{Arc, Mutex};

fn spec<'a>(program: &'a Path, env: &'a [(String, String)], cwd: &'a Path) -> ProcessSpec<'a> {
    ProcessSpec {
        program,
        args: &[],
        env,
        cwd,
        stdin: None,
        timeout: Duration::from_secs(10),
        kill_grace: Duration::from_millis(300),
        max_output_bytes: 1024 * 1024,
        run_marker: None,
        drain_after_exit: Duration::from_millis(300),
    }
}

async fn run(spec: ProcessSpec<'_>) -> Result<ProcessOutput, ProcessError> {
    run_process(spec, &CancellationToken::new(), |_| {}).await
}

#[tokio::test]
async fn captures_streams_exit_code_and_stdin() {
    let dir = tempfile::tempdir().unwrap();
    let script = shell_script(dir.path(), "hook", "cat; echo oops >&2; exit 3");
    let env = environment();
    let mut spec = spec(&script, &env, dir.path());
    spec.stdin = Some(b"from stdin".to_vec());
    let output = run(spec).await.unwrap();
    assert_eq!(output.stdout.text(), "from stdin");
    assert_eq!(output.stderr.text(), "oops\n");
    assert_eq!(output.status_code, 3);
    assert_eq!(output.ending, Ending::Exited(3));
}

#[tokio::test]
async fn stdin_is_null_when_not_given_and_cwd_is_set() {
    let dir = tempfile::tempdir().unwrap();
    let script = shell_script(dir.path(), "hook", "cat; pwd");
    let env = environment();
    let output = run(spec(&script, &env, dir.path())).await.unwrap();
    let expected = dir.path().canonicalize().unwrap();
    assert_eq!(output.stdout.text(), format!("{}\n", expected.display()));
}

#[tokio::test]
async fn a_hook_that_ignores_its_large_stdin_does_not_block() {
    let dir = tempfile::tempdir().unwrap();
    let script = shell_script(dir.path(), "hook", "echo done");
    let env = environment();
    let mut spec = spec(&script, &env, dir.path());
    spec.stdin = Some(vec![b'x'; 4 * 1024 * 1024]);
    let output = run(spec).await.unwrap();
    assert_eq!(output.stdout.text(), "done\n");
    assert_eq!(output.status_code, 0);
}

#[tokio::test]
async fn signal_death_is_a_negative_status() {
    let dir = tempfile::tempdir().unwrap();
    let script = shell_script(dir.path(), "hook", "kill -9 $$");
    let env = environment();
    let output = run(spec(&script, &env, dir.path())).await.unwrap();
    assert_eq!(output.ending, Ending::Signalled(9));
    assert_eq!(output.status_code, -9);
}

#[tokio::test]
async fn environment_is_exactly_the_given_one() {
    let dir = tempfile::tempdir().unwrap();
    let script = shell_script(dir.path(), "hook", "env");
    let mut env = environment();
    env.push(("ONLY_THIS".into(), "value with spaces".into()));
    let output = run(spec(&script, &env, dir.path())).await.unwrap();
    let text = output.stdout.text();
    assert!(text.contains("ONLY_THIS=value with spaces\n"), "{text}");
    assert!(!text.contains("CARGO"), "the agent's environment leaked: {text}");
}

#[tokio::test]
async fn spawn_failure_names_the_program() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing");
    let env = environment();
    let error = run(spec(&missing, &env, dir.path())).await.unwrap_err();
    assert!(matches!(&error, ProcessError::Spawn { path, .. } if path == &missing), "{error}");
}

/// A grandchild that ignores SIGTERM and would create a marker after one second: it must be
/// killed with the group, and the deadline must not wait for it (it holds the stdout pipe).
fn stubborn_grandchild(dir: &Path) -> (PathBuf, PathBuf) {
    let marker = dir.join("marker");
    let body = format!("(trap '' TERM; sleep 1; touch '{}') &\necho started\nwait", marker.display());
    (shell_script(dir, "hook", &body), marker)
}

async fn assert_marker_never_appears(marker: &Path) {
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(!marker.exists(), "the grandchild survived the group kill");
}

#[tokio::test]
async fn deadline_kills_the_whole_group() {
    let dir = tempfile::tempdir().unwrap();
    let (script, marker) = stubborn_grandchild(dir.path());
    let env = environment();
    let mut spec = spec(&script, &env, dir.path());
    spec.timeout = Duration::from_millis(300);
    spec.kill_grace = Duration::from_millis(200);
    let started = Instant::now();
    let output = run(spec).await.unwrap();
    assert!(started.elapsed() < Duration::from_secs(2), "took {:?}", started.elapsed());
    assert_eq!(output.ending, Ending::TimedOut { after: Duration::from_millis(300) });
    assert_eq!(output.stdout.text(), "started\n");
    assert_marker_never_appears(&marker).await;
}

#[tokio::test]
async fn shutdown_kills_the_whole_group_and_reports_cancelled() {
    let dir = tempfile::tempdir().unwrap();
    let (script, marker) = stubborn_grandchild(dir.path());
    let env = environment();
    let shutdown = CancellationToken::new();
    let canceller = shutdown.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(200)).await;
        canceller.cancel();
    });
    let started = Instant::now();
    let error = run_process(spec(&script, &env, dir.path()), &shutdown, |_| {}).await.unwrap_err();
    assert!(matches!(error, ProcessError::Cancelled { .. }), "{error}");
    assert!(started.elapsed() < Duration::from_secs(2), "took {:?}", started.elapsed());
    assert_marker_never_appears(&marker).await;
}

#[tokio::test]
async fn term_is_enough_for_a_cooperative_hook() {
    let dir = tempfile::tempdir().unwrap();
    let script = shell_script(dir.path(), "hook", "trap 'echo bye; exit 7' TERM\nsleep 5 &\nwait");
    let env = environment();
    let mut spec = spec(&script, &env, dir.path());
    spec.timeout = Duration::from_millis(200);
    spec.kill_grace = Duration::from_secs(5);
    let started = Instant::now();
    let output = run(spec).await.unwrap();
    assert!(started.elapsed() < Duration::from_secs(2), "took {:?}", started.elapsed());
    assert_eq!(output.stdout.text(), "bye\n");
    assert_eq!(output.status_code, 7);
}

#[tokio::test]
async fn output_is_bounded_to_its_tail() {
    let dir = tempfile::tempdir().unwrap();
    let script = shell_script(dir.path(), "hook", "head -c 20000000 /dev/zero | tr '\\0' a; echo END");
    let env = environment();
    let mut spec = spec(&script, &env, dir.path());
    spec.max_output_bytes = 1024 * 1024;
    let output = run(spec).await.unwrap();
    assert_eq!(output.stdout.bytes.len(), 1024 * 1024);
    assert_eq!(output.stdout.dropped, 20_000_004 - 1024 * 1024);
    assert!(output.stdout.bytes.ends_with(b"aaaEND\n"));
}

#[tokio::test]
async fn a_daemon_left_holding_the_pipes_is_not_waited_for_nor_killed() {
    let dir = tempfile::tempdir().unwrap();
    let script = shell_script(dir.path(), "hook", "sleep 30 &\necho $! > daemon.pid\necho done");
    let env = environment();
    let started = Instant::now();
    let output = run(spec(&script, &env, dir.path())).await.unwrap();
    assert!(started.elapsed() < Duration::from_secs(2), "took {:?}", started.elapsed());
    assert_eq!(output.stdout.text(), "done\n");
    let daemon: i32 = std::fs::read_to_string(dir.path().join("daemon.pid")).unwrap().trim().parse().unwrap();
    let alive = nix::sys::signal::kill(Pid::from_raw(daemon), None).is_ok();
    let _ = nix::sys::signal::kill(Pid::from_raw(daemon), Signal::SIGKILL);
    assert!(alive, "a process started by a hook that exited normally must keep running");
}

#[tokio::test]
async fn on_spawn_sees_the_live_process() {
    let dir = tempfile::tempdir().unwrap();
    let script = shell_script(dir.path(), "hook", "exit 0");
    let env = environment();
    let seen = Arc::new(Mutex::new(None));
    let sink = Arc::clone(&seen);
    let on_spawn = move |spawned: Spawned| *sink.lock().unwrap() = Some(spawned);
    run_process(spec(&script, &env, dir.path()), &CancellationToken::new(), on_spawn).await.unwrap();
    let spawned = seen.lock().unwrap().unwrap();
    assert!(spawned.pid > 1);
    assert!(spawned.process_start_time.is_some_and(|ticks| ticks > 0));
}

#[test]
fn start_time_survives_odd_command_names() {
    let stat = "1234 (we (ird) name) S 1 1234 1234 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 1000 10";
    assert_eq!(parse_start_time(stat), Some(987654));
    assert_eq!(parse_start_time("garbage"), None);
    assert!(process_start_time(std::process::id()).is_some());
}

#[tokio::test]
async fn abandoning_the_run_kills_the_whole_group() {
    let dir = tempfile::tempdir().unwrap();
    let (script, marker) = stubborn_grandchild(dir.path());
    let task = tokio::spawn(async move {
        let env = environment();
        let cwd = script.parent().unwrap().to_path_buf();
        run(spec(&script, &env, &cwd)).await
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    task.abort();
    assert!(task.await.unwrap_err().is_cancelled());
    assert_marker_never_appears(&marker).await;
}
