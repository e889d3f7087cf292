use anneal_protocol::Deployment;
use serde_json::json;

use super::*;
use crate::journal::entry::RunRecord;

fn entry(id: &str, name: &str, state: State, started_at: Option<u64>) -> Entry {
    let deployment: Deployment =
        serde_json::from_value(json!({"id": id, "name": name, "group": "script", "config": ""})).expect("a deployment");
    let mut entry = Entry::seen(&deployment, 0);
    entry.state = state;
    entry.run = started_at.map(|started_at| RunRecord {
        attempt: 1,
        pid: None,
        process_start_time: None,
        started_at,
        finished_at: None,
        duration_ms: None,
    });
    entry
}

#[test]
fn the_once_line_counts_states_and_names_what_runs() {
    let mut failed = entry("c", "broken", State::Signalled, Some(0));
    failed.outcome = Some("FAILED: deploy_status_code : 2".into());
    let entries = vec![
        entry("a", "done", State::Signalled, Some(0)),
        failed,
        entry("b", "install\x1b[2Jdb", State::Started, Some(10_000)),
        entry("d", "next", State::Waiting, None),
    ];
    assert_eq!(once_line(&entries, 22_500), "once: 2 done, 1 running (install?[2Jdb 12s), 1 waiting, 1 failed");
    assert_eq!(once_line(&[], 0), "once: 0 done, 0 running, 0 waiting, 0 failed");
}

#[test]
fn each_watch_round_is_a_table_a_redrawn_screen_or_a_json_line() {
    assert_eq!(round(&[], WatchFormat::Text, 0), "no deployments seen yet\n\n");
    assert_eq!(round(&[], WatchFormat::Json, 0), "[]\n");
    let screen = round(&[], WatchFormat::Terminal, 0);
    assert!(screen.starts_with("\x1b[H\x1b[2Janneal-agent status at 1970-01-01T00:00:00"), "{screen:?}");
    assert!(screen.ends_with("no deployments seen yet\n"));
}

#[tokio::test]
async fn the_watch_ends_with_shutdown() {
    let dir = tempfile::tempdir().expect("temp dir");
    let shutdown = CancellationToken::new();
    let mut out = Vec::new();
    let stop = shutdown.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(150)).await;
        stop.cancel();
    });
    watch_status(dir.path(), WatchFormat::Json, Duration::from_millis(40), shutdown, &mut out).await.expect("reads");
    let rounds = String::from_utf8(out).expect("text");
    assert!(rounds.lines().count() >= 2 && rounds.lines().all(|line| line == "[]"), "{rounds}");
}
