use anneal_protocol::Deployment;
use serde_json::json;

use super::*;
use crate::journal::entry::{RunRecord, SignalRecord};

fn entry(id: &str, state: State, duration_ms: Option<u64>) -> Entry {
    let deployment: Deployment =
        serde_json::from_value(json!({"id": id, "group": "script", "config": ""})).expect("a deployment");
    let mut entry = Entry::seen(&deployment, 0);
    entry.state = state;
    entry.run = duration_ms.map(|duration_ms| RunRecord {
        attempt: 1,
        pid: None,
        process_start_time: None,
        started_at: 0,
        finished_at: Some(duration_ms),
        duration_ms: Some(duration_ms),
    });
    entry
}

fn value(text: &str, sample: &str) -> String {
    text.lines()
        .find_map(|line| line.strip_prefix(sample).and_then(|rest| rest.strip_prefix(' ')))
        .unwrap_or_else(|| panic!("no {sample} in\n{text}"))
        .to_string()
}

#[test]
fn the_textfile_counts_states_runs_and_signals() {
    let mut failed = entry("c", State::Signalled, Some(40_000));
    failed.outcome = Some("FAILED: deploy_status_code : 1".into());
    let mut pending = entry("d", State::Finished, Some(200));
    pending.signal = Some(SignalRecord::for_deployment(&pending.deployment, None));
    let mut refused = entry("e", State::Finished, Some(700));
    let mut record = SignalRecord::for_deployment(&refused.deployment, None);
    record.transport = "http".into();
    record.permanent_failure = Some("403".into());
    refused.signal = Some(record);
    let entries =
        vec![entry("a", State::Waiting, None), entry("b", State::Signalled, Some(1_500)), failed, pending, refused];
    let text = render(&entries, 1_700_000_000_123);
    assert_eq!(value(&text, "anneal_agent_deployments{state=\"waiting\"}"), "1");
    assert_eq!(value(&text, "anneal_agent_deployments{state=\"signalled\"}"), "2");
    assert_eq!(value(&text, "anneal_agent_deployments{state=\"finished\"}"), "2");
    assert_eq!(value(&text, "anneal_agent_deployments{state=\"started\"}"), "0");
    assert_eq!(value(&text, "anneal_agent_deployments_failed"), "1");
    assert_eq!(value(&text, "anneal_agent_hook_duration_seconds_bucket{le=\"0.5\"}"), "1");
    assert_eq!(value(&text, "anneal_agent_hook_duration_seconds_bucket{le=\"1\"}"), "2");
    assert_eq!(value(&text, "anneal_agent_hook_duration_seconds_bucket{le=\"2.5\"}"), "3");
    assert_eq!(value(&text, "anneal_agent_hook_duration_seconds_bucket{le=\"60\"}"), "4");
    assert_eq!(value(&text, "anneal_agent_hook_duration_seconds_bucket{le=\"+Inf\"}"), "4");
    assert_eq!(value(&text, "anneal_agent_hook_duration_seconds_count"), "4");
    assert_eq!(value(&text, "anneal_agent_hook_duration_seconds_sum"), "42.400");
    assert_eq!(value(&text, "anneal_agent_signals_failed"), "1");
    assert_eq!(value(&text, "anneal_agent_last_successful_poll_timestamp_seconds"), "1700000000.123");
}

#[test]
fn a_write_replaces_the_file_and_never_follows_a_planted_link() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("anneal.prom");
    write(&path, "first\n").expect("write");
    write(&path, "second\n").expect("rewrite");
    assert_eq!(std::fs::read_to_string(&path).expect("read"), "second\n");
    let victim = dir.path().join("victim");
    std::fs::write(&victim, "keep me").expect("victim");
    std::os::unix::fs::symlink(&victim, dir.path().join(".anneal.prom.tmp")).expect("plant a link");
    write(&path, "third\n").expect("write past the link");
    assert_eq!(std::fs::read_to_string(&victim).expect("read"), "keep me");
    assert_eq!(std::fs::read_to_string(&path).expect("read"), "third\n");
    let names: Vec<String> = std::fs::read_dir(dir.path())
        .expect("list")
        .map(|entry| entry.expect("entry").file_name().to_string_lossy().into())
        .collect();
    assert!(!names.iter().any(|name| name.ends_with(".tmp")), "{names:?}");
}
