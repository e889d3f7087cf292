//! Reliability: `kill -9` of the shim while agents are signalling. Four agents
//! (`parallel = 4`) run 100 no-op script deployments each; once a quarter of the signals are
//! acknowledged the shim's process group gets SIGKILL. What the agents journaled as delivered
//! (a 2xx came back) is the record of acknowledged signals: every one of them must be COMPLETE in
//! the restarted shim before any agent could resend it (they never resend an acknowledged
//! signal), the outboxes must deliver the rest, the stack must converge with each deployment
//! run once and completed once, and SQLite's `PRAGMA integrity_check` must say `ok` both on the
//! database the crash left behind and at the end.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::{Duration, Instant};

use anneal_tests::metadata::{delivered, journal_entries};
use anneal_tests::{AgentSettings, Fleet, Shim, run_command, wait_until};
use serde_json::Value;
use tokio::process::Command;

const SERVERS: [&str; 4] = ["vm1", "vm2", "vm3", "vm4"];
const PER_SERVER: usize = 100;
const STACK: &str = "load";
/// The crash comes once this many signals were acknowledged (a quarter of them).
const CRASH_AFTER: usize = SERVERS.len() * PER_SERVER / 4;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_signals_survive_a_shim_kill_and_the_stack_converges() {
    let mut shim = Shim::start().await;
    let fleet = Fleet::start(&shim, &SERVERS, &AgentSettings::default().line("parallel = 4")).await;
    let template = shim.write_template("load.yaml", &template());
    let started = Instant::now();
    shim.cli_ok(&["stack", "create", STACK, "--template", template.to_str().expect("utf-8 path")]).await;

    wait_until(Duration::from_secs(120), "a quarter of the signals are acknowledged", || async {
        (acknowledged(&fleet).len() >= CRASH_AFTER).then_some(())
    })
    .await;
    shim.crash().await;
    let crashed_at = started.elapsed();
    // The shim is dead: every signal journaled as delivered from now on got its 2xx before.
    let acked = acknowledged(&fleet);
    let total = SERVERS.len() * PER_SERVER;
    eprintln!("killed the shim after {crashed_at:?} with {} of {total} signals acknowledged", acked.len());
    assert!(acked.len() < total, "the kill came mid-way; make the load larger if the machine is this fast");
    assert_integrity(&shim.dir().join("shim.db")).await;
    wait_until(Duration::from_secs(30), "an agent's signal fails while the shim is down", || async {
        fleet.agents().iter().any(|agent| journal_entries(&agent.state_dir()).iter().any(failed_attempt)).then_some(())
    })
    .await;

    let queued: usize = fleet
        .agents()
        .iter()
        .map(|agent| journal_entries(&agent.state_dir()).iter().filter(|entry| entry["state"] == "finished").count())
        .sum();
    eprintln!("{queued} signals queued in the outboxes at the restart");
    shim.start_again().await;
    let statuses = resource_statuses(&shim).await;
    for (server, name) in &acked {
        assert_eq!(
            statuses.get(name).map(String::as_str),
            Some("CREATE_COMPLETE"),
            "{server} got a 2xx for {name}'s signal before the kill, so the restarted shim has it"
        );
    }
    wait_until(Duration::from_secs(180), "the stack converges after the restart", || async {
        let show = shim.cli_json(&["stack", "show", STACK, "--json"]).await;
        let status = show["status"].as_str().unwrap_or_default().to_string();
        assert_ne!(status, "CREATE_FAILED", "{show}\n{}", fleet.logs());
        (status == "CREATE_COMPLETE").then_some(())
    })
    .await;
    eprintln!("converged {:?} after the start", started.elapsed());
    check_each_ran_and_completed_once(&shim, &fleet).await;
    shim.crash().await;
    assert_integrity(&shim.dir().join("shim.db")).await;
}

/// One shared no-op script config and `PER_SERVER` deployments of it on each server.
fn template() -> String {
    let mut text = String::from(
        "heat_template_version: 2018-08-31\nresources:\n  noop:\n    type: OS::Heat::SoftwareConfig\n    \
         properties:\n      group: script\n      config: \"#!/bin/sh\\nexit 0\\n\"\n",
    );
    for server in SERVERS {
        for index in 0..PER_SERVER {
            text.push_str(&format!(
                "  {server}_{index}:\n    type: OS::Heat::SoftwareDeployment\n    properties:\n      \
                 config: {{get_resource: noop}}\n      server: {server}\n"
            ));
        }
    }
    text
}

/// (server, deployment name) of every signal an agent journaled as acknowledged.
fn acknowledged(fleet: &Fleet) -> BTreeSet<(String, String)> {
    let mut acked = BTreeSet::new();
    for agent in fleet.agents() {
        for entry in journal_entries(&agent.state_dir()).iter().filter(|entry| delivered(entry)) {
            let name = entry["name"].as_str().unwrap_or_else(|| panic!("a journaled name: {entry}"));
            acked.insert((agent.name().to_string(), name.to_string()));
        }
    }
    acked
}

fn failed_attempt(entry: &Value) -> bool {
    !delivered(entry) && entry["signal"]["last_error"].is_string()
}

/// Resource name → status from `stack show --json`.
async fn resource_statuses(shim: &Shim) -> BTreeMap<String, String> {
    let resources = shim.stack_resources(STACK).await;
    resources
        .into_iter()
        .map(|(name, resource)| (name, resource["status"].as_str().unwrap_or_default().to_string()))
        .collect()
}

/// Each agent ran each of its deployments once and had its signal delivered; the shim's events
/// complete each deployment exactly once (a resent signal changed nothing).
async fn check_each_ran_and_completed_once(shim: &Shim, fleet: &Fleet) {
    // The stack completes when the shim commits the last signal, just before its 2xx reaches
    // the agent's journal.
    wait_until(Duration::from_secs(30), "every agent journaled every delivery", || async {
        (acknowledged(fleet).len() == SERVERS.len() * PER_SERVER).then_some(())
    })
    .await;
    for agent in fleet.agents() {
        let entries = journal_entries(&agent.state_dir());
        assert_eq!(entries.len(), PER_SERVER, "{}: one entry per deployment", agent.name());
        for entry in &entries {
            assert!(delivered(entry), "{}: {entry}", agent.name());
            assert_eq!(entry["state"], "signalled", "{}: {entry}", agent.name());
            assert_eq!(entry["run"]["attempt"], 1, "{}: ran once: {entry}", agent.name());
            assert_eq!(entry["outcome"], "COMPLETE", "{}: {entry}", agent.name());
        }
    }
    let events = shim.cli_json(&["stack", "events", STACK, "--json"]).await;
    let mut completions: BTreeMap<String, usize> = BTreeMap::new();
    for event in events.as_array().unwrap_or_else(|| panic!("events are a list: {events}")) {
        if event["status"] == "CREATE_COMPLETE" {
            *completions.entry(event["resource"].as_str().unwrap_or_default().to_string()).or_default() += 1;
        }
    }
    for server in SERVERS {
        for index in 0..PER_SERVER {
            let name = format!("{server}_{index}");
            assert_eq!(completions.get(&name), Some(&1), "{name} completed exactly once: {completions:?}");
        }
    }
}

/// `PRAGMA integrity_check` through the sqlite3 CLI says `ok`. It runs on a copy of the
/// database and its WAL, so the restarted shim still recovers the files the crash left.
async fn assert_integrity(database: &Path) {
    let copy = tempfile::tempdir().expect("temp dir");
    let file_name = database.file_name().expect("a database file name").to_string_lossy().into_owned();
    for suffix in ["", "-wal", "-shm"] {
        let original = database.with_file_name(format!("{file_name}{suffix}"));
        if original.exists() {
            std::fs::copy(&original, copy.path().join(format!("{file_name}{suffix}"))).expect("copy the database");
        }
    }
    let mut command = Command::new("sqlite3");
    command.arg(copy.path().join(&file_name)).arg("PRAGMA integrity_check;");
    let output = run_command(command, Duration::from_secs(60)).await;
    let what = format!("sqlite3 {} 'PRAGMA integrity_check' (the sqlite3 CLI must be installed)", database.display());
    let stdout = output.expect_success(&what);
    assert_eq!(stdout.trim(), "ok", "{what}");
}
