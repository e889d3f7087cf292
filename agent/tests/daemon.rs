//! `anneal-agent run` end to end: picking up metadata changes while running, SIGTERM stopping a
//! running hook's whole process group, and a restart settling the interrupted run per
//! `options.on_interrupt` (signal a failure by default, rerun when asked).

mod common;

use std::time::Duration;

use common::*;
use serde_json::json;
use wiremock::MockServer;

#[tokio::test]
async fn daemon_follows_metadata_changes() {
    let sandbox = Sandbox::new();
    let receiver = signal_receiver().await;
    let metadata = MockServer::start().await;
    let first = script_deployment(
        "d-1",
        "10_a",
        "#!/bin/sh\necho -n one > $heat_outputs_path.result\n",
        Some(&format!("{}/signal/1", receiver.uri())),
    );
    serve_metadata(&metadata, &json!({"deployments": [first.clone()]})).await;
    sandbox.write_http_config("", &format!("{}/metadata", metadata.uri()));
    let mut daemon = sandbox.spawn_run();

    wait_for_signals(&receiver, 1).await;
    let second = script_deployment(
        "d-2",
        "20_b",
        "#!/bin/sh\necho -n two > $heat_outputs_path.result\n",
        Some(&format!("{}/signal/2", receiver.uri())),
    );
    metadata.reset().await;
    serve_metadata(&metadata, &json!({"deployments": [first, second]})).await;
    wait_for_signals(&receiver, 2).await;
    let received = signals(&receiver).await;
    assert_eq!(body_json(&received[1])["result"], "two");
    assert_eq!(received.len(), 2, "the first deployment did not run again: {}", daemon.log_text());

    daemon.terminate();
    let status = daemon.wait(Duration::from_secs(15)).await;
    assert!(status.success(), "clean exit on SIGTERM: {status:?}\n{}", daemon.log_text());
}

#[tokio::test]
async fn sigterm_kills_the_hook_group_and_restart_signals_interruption() {
    let sandbox = Sandbox::new();
    let receiver = signal_receiver().await;
    let started = sandbox.root().join("started");
    let survived = sandbox.root().join("survived");
    let script =
        format!("#!/bin/sh\ntouch {}\n(sleep 3; touch {}) &\nsleep 60\n", started.display(), survived.display());
    let deployment = script_deployment("d-long", "long", &script, Some(&format!("{}/signal/long", receiver.uri())));
    sandbox.write_local_document("a.json", &json!({"deployments": [deployment]}));
    sandbox.write_local_config("");
    let mut daemon = sandbox.spawn_run();
    eventually(Duration::from_secs(20), "hook started", || started.exists()).await;

    daemon.terminate();
    let status = daemon.wait(Duration::from_secs(15)).await;
    assert!(status.success(), "{status:?}\n{}", daemon.log_text());
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert!(!survived.exists(), "the hook's process group was killed on shutdown");
    assert!(signals(&receiver).await.is_empty(), "an interrupted run is not signalled as if it finished");

    let finished = sandbox.once().await;
    assert_eq!(finished.status.code(), Some(1), "{}", finished.stderr);
    let received = signals(&receiver).await;
    assert_eq!(received.len(), 1);
    let body = body_json(&received[0]);
    assert_eq!(body["deploy_status_code"], 1);
    assert_eq!(body["deploy_stderr"], "interrupted: agent restarted during the run");
}

#[tokio::test]
async fn interrupted_run_with_rerun_policy_runs_again() {
    let sandbox = Sandbox::new();
    let receiver = signal_receiver().await;
    let runs = sandbox.root().join("runs");
    let script = format!(
        "#!/bin/sh\necho run >> {}\n[ \"$(wc -l < {})\" -ge 2 ] && exit 0\nsleep 60\n",
        runs.display(),
        runs.display()
    );
    let mut deployment = script_deployment("d-rerun", "rerun", &script, Some(&format!("{}/signal/r", receiver.uri())));
    deployment["options"] = json!({"on_interrupt": "rerun"});
    sandbox.write_local_document("a.json", &json!({"deployments": [deployment]}));
    sandbox.write_local_config("");
    let mut daemon = sandbox.spawn_run();
    eventually(Duration::from_secs(20), "first run started", || runs.exists()).await;
    daemon.terminate();
    daemon.wait(Duration::from_secs(15)).await;

    let finished = sandbox.once().await;
    assert!(finished.status.success(), "{}", finished.stderr);
    assert_eq!(std::fs::read_to_string(&runs).unwrap(), "run\nrun\n");
    let received = signals(&receiver).await;
    assert_eq!(received.len(), 1);
    assert_eq!(body_json(&received[0])["deploy_status_code"], 0);
}

#[tokio::test]
async fn run_notifies_systemd_when_ready() {
    let sandbox = Sandbox::new();
    sandbox.write_local_document("a.json", &json!({"deployments": []}));
    sandbox.write_local_config("");
    let socket_path = sandbox.root().join("notify.sock");
    let socket = tokio::net::UnixDatagram::bind(&socket_path).unwrap();
    let mut daemon = sandbox.spawn_run_with_env(&[("NOTIFY_SOCKET", socket_path.to_str().unwrap())]);
    let mut buffer = vec![0u8; 4096];
    let received =
        tokio::time::timeout(Duration::from_secs(20), socket.recv(&mut buffer)).await.expect("no READY").unwrap();
    assert!(String::from_utf8_lossy(&buffer[..received]).contains("READY=1"));
    daemon.terminate();
    let received =
        tokio::time::timeout(Duration::from_secs(20), socket.recv(&mut buffer)).await.expect("no STOPPING").unwrap();
    assert!(String::from_utf8_lossy(&buffer[..received]).contains("STOPPING=1"));
    assert!(daemon.wait(Duration::from_secs(15)).await.success());
}

async fn wait_for_signals(receiver: &MockServer, count: usize) {
    for _ in 0..400 {
        if signals(receiver).await.len() >= count {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("expected {count} signals, got {}", signals(receiver).await.len());
}

/// A run whose result the journal cannot take (here the journal directory vanished under it; a
/// full disk does the same) is kept and recorded once the journal works again: the hook never
/// runs a second time meanwhile, and its result is the one signalled.
#[tokio::test]
async fn a_result_the_journal_refused_is_recorded_later_and_never_rerun() {
    let sandbox = Sandbox::new();
    let receiver = signal_receiver().await;
    let journal = sandbox.state().join("journal");
    let away = sandbox.root().join("journal.away");
    let runs = sandbox.root().join("runs");
    let script = format!(
        "#!/bin/sh\necho run >> {runs}\nif [ ! -e {away} ]; then mv {journal} {away}; touch {journal}; fi\n\
         echo -n kept > $heat_outputs_path.result\n",
        runs = runs.display(),
        away = away.display(),
        journal = journal.display()
    );
    let deployment = script_deployment("d-refused", "refused", &script, Some(&format!("{}/signal/r", receiver.uri())));
    sandbox.write_local_document("a.json", &json!({"deployments": [deployment]}));
    sandbox.write_local_config("");
    let mut daemon = sandbox.spawn_run();
    eventually(Duration::from_secs(20), "the finished write fails", || {
        daemon.log_text().contains("cannot record deployment d-refused")
    })
    .await;
    // Several scheduling rounds pass while the journal is broken.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    std::fs::remove_file(&journal).expect("remove the file in the journal's place");
    std::fs::rename(&away, &journal).expect("restore the journal");
    wait_for_signals(&receiver, 1).await;
    let received = signals(&receiver).await;
    assert_eq!(body_json(&received[0])["result"], "kept", "the kept result is the one signalled");
    let count = std::fs::read_to_string(&runs).unwrap_or_default().lines().count();
    assert_eq!(count, 1, "the hook ran once: {}", daemon.log_text());
    daemon.terminate();
    let _ = daemon.wait(Duration::from_secs(15)).await;
}
