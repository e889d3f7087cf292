//! Orphan recognition and stopping against real process groups.

use std::os::unix::process::CommandExt;
use std::process::{Child, Command};

use super::*;
use crate::hook::process::process_start_time;

fn spawn_group(script: &str) -> Child {
    Command::new("/bin/sh").arg("-c").arg(script).process_group(0).spawn().unwrap()
}

fn alive(pid: u32) -> bool {
    ProcessStat::read(pid).is_some_and(|process| process.state != 'Z')
}

#[test]
fn parses_stat_with_a_tricky_command_name() {
    let stat = "42 (a) b) S 1 42 42 0 -1 4194560 100 0 0 0 0 0 0 0 20 0 1 0 123456 1000 10";
    let parsed = ProcessStat::parse(stat).unwrap();
    assert_eq!(parsed, ProcessStat { state: 'S', process_group: 42, start_time: 123456 });
    assert_eq!(ProcessStat::parse("garbage"), None);
}

#[test]
fn marker_round_trips_and_tolerates_a_missing_start_time() {
    let dir = tempfile::tempdir().unwrap();
    let path = marker_path(dir.path(), "d1");
    fs::write(&path, "123\n").unwrap();
    assert_eq!(read_marker(&path).map(|marker| (marker.pid, marker.process_start_time)), Some((123, None)));
    write_marker(&path, 123, Some(99)).unwrap();
    assert_eq!(read_marker(&path).map(|marker| (marker.pid, marker.process_start_time)), Some((123, Some(99))));
    fs::write(&path, "").unwrap();
    assert_eq!(read_marker(&path), None);
    remove_marker(&path).unwrap();
    remove_marker(&path).unwrap();
}

#[test]
fn a_marker_never_writes_through_a_link() {
    let dir = tempfile::tempdir().unwrap();
    let victim = dir.path().join("victim");
    fs::write(&victim, "precious").unwrap();
    let path = dir.path().join("d1.run");
    std::os::unix::fs::symlink(&victim, &path).unwrap();
    write_marker(&path, 123, Some(99)).unwrap();
    assert_eq!(fs::read_to_string(&victim).unwrap(), "precious");
    assert!(!fs::symlink_metadata(&path).unwrap().file_type().is_symlink());
    assert_eq!(read_marker(&path).map(|marker| (marker.pid, marker.process_start_time)), Some((123, Some(99))));
}

#[test]
fn settle_stops_the_whole_group_of_a_recognised_run() {
    // The child leaves a grandchild in its group: both must go.
    let mut child = spawn_group("sleep 60 & wait");
    let pid = child.id();
    let start = process_start_time(pid);
    let marker = RunMarker { pid, process_start_time: start, written_at: SystemTime::now() };
    assert!(alive(pid));
    let settled = settle("d1", &marker, Duration::from_secs(5));
    assert_eq!(settled, Settled::Stopped { pid, killed: false });
    let _ = child.wait();
    let group_left = fs::read_dir("/proc")
        .unwrap()
        .filter_map(|item| item.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(ProcessStat::read)
        .any(|process| process.process_group == i64::from(pid) && process.state != 'Z');
    assert!(!group_left, "a process of the group survived");
}

#[test]
fn settle_kills_a_group_that_ignores_sigterm() {
    let mut child = spawn_group("trap '' TERM; while :; do sleep 0.05; done");
    let pid = child.id();
    // Let the shell install its trap before the TERM arrives.
    std::thread::sleep(Duration::from_millis(200));
    let marker = RunMarker { pid, process_start_time: process_start_time(pid), written_at: SystemTime::now() };
    assert_eq!(settle("d2", &marker, Duration::from_millis(300)), Settled::Stopped { pid, killed: true });
    let _ = child.wait();
}

#[test]
fn a_reused_pid_is_left_alone() {
    let mut child = spawn_group("sleep 60");
    let pid = child.id();
    let wrong = process_start_time(pid).unwrap() + 1;
    let marker = RunMarker { pid, process_start_time: Some(wrong), written_at: SystemTime::now() };
    assert_eq!(settle("d3", &marker, Duration::from_secs(1)), Settled::NotRunning);
    assert!(alive(pid));
    // Without a start time, a process written long before its marker is not the run either.
    let old = RunMarker { pid, process_start_time: None, written_at: UNIX_EPOCH };
    assert_eq!(settle("d3", &old, Duration::from_secs(1)), Settled::NotRunning);
    assert!(alive(pid));
    // Written at the moment the process started: it is the run.
    let fresh = RunMarker { pid, process_start_time: None, written_at: SystemTime::now() };
    assert_eq!(settle("d3", &fresh, Duration::from_secs(5)), Settled::Stopped { pid, killed: false });
    let _ = child.wait();
}

#[test]
fn a_dead_run_is_not_running() {
    let mut child = spawn_group("exit 0");
    let pid = child.id();
    child.wait().unwrap();
    let marker = RunMarker { pid, process_start_time: None, written_at: SystemTime::now() };
    assert_eq!(settle("d4", &marker, Duration::from_secs(1)), Settled::NotRunning);
}

#[test]
fn a_run_without_its_marker_file_is_found_by_its_environment() {
    let dir = tempfile::tempdir().unwrap();
    let path = marker_path(dir.path(), "d5");
    let mut child = Command::new("/bin/sh")
        .arg("-c")
        .arg("sleep 60")
        .env(RUN_MARKER_VARIABLE, &path)
        .process_group(0)
        .spawn()
        .unwrap();
    let pid = child.id();
    // Until the child has exec'd, /proc shows the environment it was forked with (the test's):
    // under load that takes a moment. (An agent looks long after its crash, not right away.)
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let found = loop {
        match find_by_environment(&path) {
            Some(found) => break found,
            None if std::time::Instant::now() < deadline => std::thread::sleep(Duration::from_millis(10)),
            None => panic!("the child names its marker"),
        }
    };
    assert_eq!((found.pid, found.process_start_time), (pid, process_start_time(pid)));
    assert_eq!(find_by_environment(&marker_path(dir.path(), "other")), None, "another run's marker");
    assert_eq!(settle("d5", &found, Duration::from_secs(5)), Settled::Stopped { pid, killed: false });
    let _ = child.wait();
    assert_eq!(find_by_environment(&path), None, "gone once stopped");
}
