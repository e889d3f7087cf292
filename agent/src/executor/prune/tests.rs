//! Tests of journal retention through the executor, against a temp state directory.

use std::path::Path;
use std::sync::Arc;

use anneal_protocol::HookResult;
use serde_json::{Value, json};
use tokio::sync::Notify;

use super::*;
use crate::hook::{HookRunner, HookSettings};
use crate::journal::{Entry, Journal, State};
use crate::signal::outcome::DeliveryOutcome;
use crate::source::pace::EngineMoved;

const DAY: Duration = Duration::from_secs(86_400);
const DAY_MS: u64 = 86_400_000;
/// "Now" in these tests: ten days after the epoch.
const NOW: u64 = 10 * DAY_MS;

fn settings(state: &Path) -> HookSettings {
    HookSettings {
        hooks_dirs: Vec::new(),
        work_dir: state.join("script"),
        outputs_dir: state.join("outputs"),
        base_env: Vec::new(),
        kill_grace: Duration::from_millis(100),
        max_output_bytes: 1024,
        run_markers_dir: None,
    }
}

fn deployment(id: &str, inputs: Value) -> Deployment {
    serde_json::from_value(json!({
        "id": id, "group": "script", "config": "#!/bin/sh\n", "inputs": inputs,
        "outputs": [{"name": "result"}],
    }))
    .unwrap()
}

fn http_inputs() -> Value {
    json!([{"name": "deploy_signal_id", "value": "http://127.0.0.1:1/signal"}])
}

/// An entry that ran and finished at `finished_at`; with no signal transport it is `signalled`.
fn finished(id: &str, inputs: Value, finished_at: u64) -> Entry {
    let mut entry = Entry::seen(&deployment(id, inputs), 1_000);
    entry.started(finished_at - 10).unwrap();
    entry.finished(HookResult::from_process("", "", 0), finished_at).unwrap();
    entry
}

/// Writes `entry` and the script and output files a run of it leaves.
fn record(journal: &Journal, state: &Path, entry: &Entry) {
    journal.write(entry).unwrap();
    for dir in ["script", "outputs"] {
        std::fs::create_dir_all(state.join(dir)).unwrap();
    }
    std::fs::write(state.join("script").join(&entry.id), "#!/bin/sh\n").unwrap();
    std::fs::write(state.join("outputs").join(format!("{}.result", entry.id)), "42").unwrap();
}

#[test]
fn prune_removes_only_old_entries_of_departed_deployments_that_owe_nothing() {
    let state = tempfile::tempdir().unwrap();
    let state = state.path();
    let journal = Arc::new(Journal::open(state).unwrap());
    let old = NOW - 2 * DAY_MS;
    let gone = finished("gone", json!([]), old);
    assert_eq!(gone.state, State::Signalled);
    let listed = finished("listed", json!([]), old);
    let recent = finished("recent", json!([]), NOW - DAY_MS / 2);
    let undelivered = finished("undelivered", http_inputs(), old);
    let mut refused = finished("refused", http_inputs(), old);
    refused.delivery_attempted(DeliveryOutcome::Permanent { error: "410".into() }, old);
    let mut delivered = finished("delivered", http_inputs(), old);
    delivered.delivery_attempted(DeliveryOutcome::Delivered { status: 200 }, old + 1);
    let mut skipped = Entry::seen(&deployment("skipped", json!([])), old);
    skipped.skipped("os-apply-config".into());
    for entry in [&gone, &listed, &recent, &undelivered, &refused, &delivered, &skipped] {
        record(&journal, state, entry);
    }

    let runner = Arc::new(HookRunner::new(settings(state)));
    let mut executor = Executor::new(
        Arc::clone(&journal),
        runner,
        Duration::from_secs(5),
        1,
        Arc::new(Notify::new()),
        EngineMoved::new(),
    )
    .unwrap();
    let metadata = [deployment("listed", json!([]))];
    assert_eq!(executor.prune(&metadata, None, NOW), 0, "no retention keeps everything");
    assert_eq!(executor.prune(&metadata, Some(DAY), NOW), 3);

    let kept: Vec<String> = Journal::open(state).unwrap().load_all().unwrap().into_iter().map(|e| e.id).collect();
    assert_eq!(kept, ["listed", "recent", "refused", "undelivered"], "the journal as a restarted agent reads it");
    for id in ["gone", "delivered", "skipped"] {
        assert!(!state.join("script").join(id).exists(), "{id}'s script is removed");
        assert!(!state.join("outputs").join(format!("{id}.result")).exists(), "{id}'s output is removed");
    }
    for id in ["listed", "recent", "refused", "undelivered"] {
        assert!(state.join("script").join(id).exists(), "{id}'s script is kept");
        assert!(state.join("outputs").join(format!("{id}.result")).exists(), "{id}'s output is kept");
    }
    // A listed id is never removed, however old: removing it would run it again.
    assert_eq!(executor.prune(&metadata, Some(DAY), NOW + 1000 * DAY_MS), 1, "only `recent` ages out");
    assert!(journal.load("listed").unwrap().is_some());
}
