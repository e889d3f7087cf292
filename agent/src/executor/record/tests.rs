//! Who hears of a finished deployment: the outbox always; the polling tasks (`EngineMoved`)
//! straight away only when nothing is owed (NO_SIGNAL), else once the outbox delivers.

use std::os::unix::fs::PermissionsExt;
use std::sync::Arc;
use std::time::Duration;

use anneal_protocol::Deployment;
use serde_json::{Value, json};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::*;
use crate::hook::{HookRunner, HookSettings};
use crate::journal::Journal;
use crate::source::pace::EngineMoved;

fn deployment(id: &str, inputs: Value) -> Deployment {
    serde_json::from_value(json!({"id": id, "group": "script", "config": "#!/bin/sh\n", "inputs": inputs})).unwrap()
}

/// Runs `deployment` to its end with a `script` hook that succeeds; returns whether the
/// polling tasks were told and whether the outbox was woken.
async fn finish(deployment: Deployment) -> (bool, bool) {
    let state = tempfile::tempdir().unwrap();
    let hooks = state.path().join("hooks");
    std::fs::create_dir_all(&hooks).unwrap();
    let hook = hooks.join("script");
    std::fs::write(&hook, "#!/bin/sh\ncat > /dev/null\necho '{\"deploy_status_code\": 0}'\n").unwrap();
    std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).unwrap();
    let runner = Arc::new(HookRunner::new(HookSettings {
        hooks_dirs: vec![hooks],
        work_dir: state.path().join("script"),
        outputs_dir: state.path().join("outputs"),
        base_env: Vec::new(),
        kill_grace: Duration::from_millis(100),
        max_output_bytes: 1024,
        run_markers_dir: None,
    }));
    let journal = Arc::new(Journal::open(state.path()).unwrap());
    let (wake_outbox, moved) = (Arc::new(Notify::new()), EngineMoved::new());
    let listener = moved.listen();
    let mut executor =
        Executor::new(journal, runner, Duration::from_secs(10), 1, Arc::clone(&wake_outbox), moved).unwrap();
    executor.converge(&[deployment], &CancellationToken::new()).await.unwrap();
    assert_eq!(executor.counts().ran, 1);
    let woken = tokio::time::timeout(Duration::from_millis(10), wake_outbox.notified()).await.is_ok();
    (listener.has_changed().unwrap(), woken)
}

#[tokio::test]
async fn a_no_signal_deployment_tells_the_polling_tasks_when_it_finishes() {
    assert_eq!(finish(deployment("quiet", json!([]))).await, (true, true));
}

#[tokio::test]
async fn a_deployment_that_owes_a_signal_leaves_that_to_the_outbox() {
    let inputs = json!([{"name": "deploy_signal_id", "value": "http://127.0.0.1:1/signal"}]);
    assert_eq!(finish(deployment("loud", inputs)).await, (false, true));
}
