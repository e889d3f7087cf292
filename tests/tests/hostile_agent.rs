//! Hostile input against the real `anneal-agent`: every `tests/hostile/metadata` case served by
//! a `local` source and by an `http` source (all cases of a kind in one `once`, one source per
//! case), and every `tests/hostile/agent_config` case given to `once --config`. Each case must
//! be rejected with a log line or message that names the problem, the agent must exit normally,
//! and what it had stored (journal files, `status --json`) must be unchanged.

mod hostile_support;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anneal_tests::{Agent, AgentSettings, agent_binary, run_command, toml_string};
use hostile_support::{Case, cases, json_lines};
use serde_json::{Value, json};
use tokio::process::Command;
use wiremock::matchers::path;
use wiremock::{Mock, MockServer, ResponseTemplate};

/// One deployment the agent runs before the hostile cases; it must stay exactly as journaled.
fn baseline_document() -> Value {
    json!({"deployments": [{
        "id": "baseline-1",
        "name": "baseline",
        "group": "script",
        "config": "#!/bin/sh\necho baseline\n",
        "inputs": [],
        "outputs": [],
    }]})
}

/// The journal (file names and contents) and `status --json` of `agent`.
async fn stored_state(agent: &Agent) -> (Vec<(String, Vec<u8>)>, Vec<Value>) {
    let journal = agent.state_dir().join("journal");
    let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(&journal)
        .unwrap_or_else(|error| panic!("{}: {error}", journal.display()))
        .map(|entry| {
            let entry = entry.expect("journal entry");
            (entry.file_name().to_string_lossy().into_owned(), std::fs::read(entry.path()).expect("journal file"))
        })
        .collect();
    files.sort();
    (files, agent.status().await)
}

/// A `[[source]]` table.
fn source_table(kind_and_location: &str) -> String {
    format!("[[source]]\n{kind_and_location}\n")
}

/// Runs the baseline alone, then the baseline plus one source per case, and checks each case's
/// log line and the unchanged state. `source_for` writes or serves case `index` and returns its
/// `[[source]]` body.
async fn run_metadata_cases(kind: &str, source_for: impl Fn(usize, &Case) -> String) {
    let dir = tempfile::Builder::new().prefix("anneal-hostile-").tempdir().expect("temp dir");
    let baseline_dir = dir.path().join("baseline");
    std::fs::create_dir_all(&baseline_dir).expect("baseline dir");
    std::fs::write(baseline_dir.join("base.json"), baseline_document().to_string()).expect("baseline document");
    let baseline =
        source_table(&format!("kind = \"local\"\npath = {}", toml_string(&baseline_dir.display().to_string())));
    let agent = Agent::standalone(dir.path(), "agent", &AgentSettings::default(), &baseline);
    agent.command(&["once"]).await.expect_success("the baseline once");
    let before = stored_state(&agent).await;
    assert_eq!(before.0.len(), 1, "the baseline deployment is journaled");

    let cases = cases("metadata");
    let mut sources = baseline;
    for (index, case) in cases.iter().enumerate() {
        sources.push_str(&source_table(&source_for(index, case)));
    }
    agent.write_config_with_sources(&AgentSettings::default(), &sources);
    let mut command = Command::new(agent_binary());
    command.args(["--log-format", "json", "once", "--config"]).arg(agent.config_path()).env("ANNEAL_LOG", "info");
    let output = run_command(command, Duration::from_secs(120)).await;
    assert_eq!(
        output.code,
        0,
        "once over hostile {kind} sources exits 0 (nothing new to run):\n{}",
        tail(&output.stderr)
    );

    let lines = json_lines(&output.stderr);
    let mut problems = Vec::new();
    for (index, case) in cases.iter().enumerate() {
        if let Err(problem) = check_logged(&lines, kind, index + 1, case) {
            problems.push(format!("{}: {problem}", case.name));
        }
    }
    assert!(
        problems.is_empty(),
        "{} of {} {kind} cases not rejected as expected:\n{}",
        problems.len(),
        cases.len(),
        problems.join("\n")
    );
    assert_eq!(stored_state(&agent).await, before, "hostile {kind} sources changed the journal or status");
}

/// The case's rejection must be logged for its source (number `index`, of `kind`) with the
/// expected text. `by_kind` in the manifest overrides `expect` for one source kind.
fn check_logged(lines: &[Value], kind: &str, index: usize, case: &Case) -> Result<(), String> {
    let source = format!("source[{index}] {kind}");
    let expect = case.expect["by_kind"][kind].as_str().unwrap_or(case.field("expect"));
    let (message, field) = match expect {
        "document" => ("source failing; using its last good document", "error"),
        "entry" => ("deployment entry rejected", "reason"),
        other => return Err(format!("unknown expectation {other:?}")),
    };
    let mine: Vec<&Value> = lines.iter().filter(|line| line["fields"]["source"] == source).collect();
    if mine
        .iter()
        .any(|line| line["fields"]["message"] == message && text_of(&line["fields"][field]).contains(case.error()))
    {
        return Ok(());
    }
    let seen: Vec<String> = mine.iter().take(3).map(|line| line["fields"].to_string()).collect();
    Err(format!("expected {message:?} with {field} containing {:?}; logged for {source}: {seen:?}", case.error()))
}

fn text_of(value: &Value) -> String {
    value.as_str().map_or_else(|| value.to_string(), str::to_string)
}

/// The last lines of a long log, for failure messages.
fn tail(log: &str) -> String {
    let lines: Vec<&str> = log.lines().collect();
    lines[lines.len().saturating_sub(20)..].join("\n")
}

#[tokio::test]
async fn hostile_metadata_from_local_sources_is_rejected_and_changes_nothing() {
    let files = tempfile::Builder::new().prefix("anneal-hostile-local-").tempdir().expect("temp dir");
    let root = files.path().to_path_buf();
    run_metadata_cases("local", |index, case| {
        let dir = root.join(format!("case-{index}"));
        std::fs::create_dir_all(&dir).expect("case dir");
        std::fs::write(dir.join("metadata.json"), &case.bytes).expect("case file");
        format!("kind = \"local\"\npath = {}", toml_string(&dir.display().to_string()))
    })
    .await;
}

#[tokio::test]
async fn hostile_metadata_from_http_sources_is_rejected_and_changes_nothing() {
    let server = MockServer::start().await;
    for (index, case) in cases("metadata").iter().enumerate() {
        let response = ResponseTemplate::new(200)
            .insert_header("content-type", "application/json")
            .set_body_bytes(case.bytes.clone());
        Mock::given(path(format!("/case/{index}"))).respond_with(response).mount(&server).await;
    }
    let base = server.uri();
    run_metadata_cases("http", |index, _| {
        format!("kind = \"http\"\nurl = \"{base}/case/{index}\"\nlong_poll_secs = 0\nread_timeout_secs = 60")
    })
    .await;
}

/// Writes case `case` as the config file (with `{state_dir}` pointing into `dir`).
fn write_config(dir: &Path, case: &Case) -> (PathBuf, PathBuf) {
    let state_dir = dir.join("state");
    let config = dir.join("agent.toml");
    let bytes = if case.name.ends_with(".bin") {
        case.bytes.clone()
    } else {
        case.text().replace("{state_dir}", &state_dir.display().to_string()).into_bytes()
    };
    std::fs::write(&config, bytes).expect("write config");
    let mode = u32::from_str_radix(case.field("mode"), 8).unwrap_or(0o600);
    std::fs::set_permissions(&config, std::fs::Permissions::from_mode(mode)).expect("chmod config");
    (config, state_dir)
}

#[tokio::test]
async fn hostile_agent_configs_are_refused_with_a_message_naming_the_problem() {
    let mut problems = Vec::new();
    let cases = cases("agent_config");
    for case in &cases {
        let dir = tempfile::Builder::new().prefix("anneal-hostile-config-").tempdir().expect("temp dir");
        let (config, state_dir) = write_config(dir.path(), case);
        let mut command = Command::new(agent_binary());
        command.arg("once").arg("--config").arg(&config);
        let output = run_command(command, Duration::from_secs(30)).await;
        let expected_code = case.expect.get("exit").and_then(Value::as_i64).unwrap_or(2);
        if i64::from(output.code) != expected_code || !output.stderr.contains(case.error()) {
            let stderr: String = output.stderr.chars().take(400).collect();
            problems.push(format!("{}: exit {} (want {expected_code}), stderr: {stderr}", case.name, output.code));
        }
        if !case.expect.get("creates_state").and_then(Value::as_bool).unwrap_or(false) && state_dir.exists() {
            problems.push(format!("{}: the refused config still created its state dir", case.name));
        }
    }
    assert!(
        problems.is_empty(),
        "{} of {} config cases not refused as expected:\n{}",
        problems.len(),
        cases.len(),
        problems.join("\n")
    );
}

#[tokio::test]
async fn absurd_but_valid_metadata_runs_to_a_clear_outcome() {
    let mut problems = Vec::new();
    let cases = cases("metadata_accepted");
    for case in &cases {
        let dir = tempfile::Builder::new().prefix("anneal-hostile-accepted-").tempdir().expect("temp dir");
        let local = dir.path().join("local");
        std::fs::create_dir_all(&local).expect("local dir");
        std::fs::write(local.join("metadata.json"), &case.bytes).expect("case file");
        let source = source_table(&format!("kind = \"local\"\npath = {}", toml_string(&local.display().to_string())));
        let agent = Agent::standalone(dir.path(), "agent", &AgentSettings::default(), &source);
        let output = agent.command(&["once"]).await;
        let outcomes = case.expect["outcomes"].as_object().expect("outcomes");
        let all_complete = outcomes.values().all(|outcome| outcome == "COMPLETE");
        if (output.code == 0) != all_complete || !output.stderr.contains(case.field("log")) {
            problems.push(format!("{}: exit {}, log: {}", case.name, output.code, tail(&output.stderr)));
        }
        let rows = agent.status().await;
        for (id, want) in outcomes {
            let row = rows.iter().find(|row| row["id"] == id.as_str());
            let outcome = row.and_then(|row| row["outcome"].as_str()).unwrap_or("(none)");
            if !outcome.starts_with(want.as_str().unwrap_or_default()) {
                problems.push(format!("{}: {id} ended {outcome:?}, want {want}", case.name));
            }
        }
    }
    assert!(problems.is_empty(), "absurd metadata cases:\n{}", problems.join("\n"));
}
