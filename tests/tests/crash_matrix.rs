//! Crash safety (see docs/journal.md): the agent killed at every journal transition. The agent
//! binary is the debug (test) build, which has crash points: with `ANNEAL_FAILPOINT=<point>` it
//! aborts (SIGABRT, no cleanup) the first time it passes the point. Each case runs `anneal-agent
//! once` against a real shim until the crash, then again without the failpoint, and asserts: a
//! finished hook never reruns (each script counts its runs in a file), every deployment is
//! signalled and acknowledged, the shim records each deployment's result exactly once (one
//! completion event per deployment), and an interrupted run follows `options.on_interrupt` (FAILED
//! with the interrupted reason, or rerun once).

use std::path::{Path, PathBuf};
use std::time::Duration;

use anneal_tests::metadata::journal_entries;
use anneal_tests::{Agent, AgentSettings, CommandOutput, Shim, agent_binary, run_command};
use serde_json::Value;
use tokio::process::Command;

const DEPLOYMENTS: [&str; 3] = ["deploy_1", "deploy_2", "deploy_3"];

/// Three independent deployments on one server; each script counts its runs in `$COUNTS/<name>`.
fn template(counts: &Path, on_interrupt: Option<&str>) -> String {
    let options = on_interrupt.map_or(String::new(), |policy| format!("\n      options: {{on_interrupt: {policy}}}"));
    let mut text = String::from("heat_template_version: 2018-08-31\nresources:\n");
    for name in DEPLOYMENTS {
        let script = format!(
            "#!/bin/sh\necho run >> {counts}/{name}\necho -n done > $heat_outputs_path.result\n",
            counts = counts.display()
        );
        text.push_str(&format!(
            "  config_{name}:\n    type: OS::Heat::SoftwareConfig\n    properties:\n      group: script{options}\n      \
             outputs: [{{name: result}}]\n      config: {script}\n  {name}:\n    type: OS::Heat::SoftwareDeployment\n    \
             properties: {{config: {{get_resource: config_{name}}}, server: vm1}}\n",
            script = serde_json::to_string(&script).expect("json string"),
        ));
    }
    text
}

struct Case {
    shim: Shim,
    agent: Agent,
    counts: PathBuf,
    _dir: tempfile::TempDir,
}

impl Case {
    async fn start(on_interrupt: Option<&str>) -> Case {
        let shim = Shim::start().await;
        let dir = tempfile::tempdir().expect("temp dir");
        let counts = dir.path().join("counts");
        std::fs::create_dir_all(&counts).expect("counts dir");
        let agent = Agent::register(&shim, dir.path(), "vm1", &AgentSettings::default()).await;
        let path = shim.write_template("crash.yaml", &template(&counts, on_interrupt));
        let created = shim.cli(&["stack", "create", "crash", "--template", path.to_str().expect("utf-8")]).await;
        assert_eq!(created.code, 0, "stack create: {created:?}");
        Case { shim, agent, counts, _dir: dir }
    }

    async fn once(&self, failpoint: Option<&str>) -> CommandOutput {
        let mut command = Command::new(agent_binary());
        command.arg("once").arg("--config").arg(self.agent.config_path()).env("ANNEAL_LOG", "debug");
        if let Some(point) = failpoint {
            command.env("ANNEAL_FAILPOINT", point);
        }
        run_command(command, Duration::from_secs(60)).await
    }

    fn runs(&self, name: &str) -> usize {
        std::fs::read_to_string(self.counts.join(name)).map_or(0, |text| text.lines().count())
    }

    async fn stack_status(&self) -> String {
        self.shim.stack_status("crash").await
    }

    /// The completion events (`CREATE_COMPLETE`/`CREATE_FAILED`) of each deployment.
    async fn results_recorded(&self) -> Vec<(String, String)> {
        let events = self.shim.cli_json(&["stack", "events", "crash", "--json"]).await;
        let mut recorded: Vec<(String, String)> = events
            .as_array()
            .expect("events are a list")
            .iter()
            .filter(|event| DEPLOYMENTS.contains(&event["resource"].as_str().unwrap_or_default()))
            .filter(|event| matches!(event["status"].as_str(), Some("CREATE_COMPLETE" | "CREATE_FAILED")))
            .map(|event| (text(&event["resource"]), text(&event["status"])))
            .collect();
        recorded.sort();
        recorded
    }

    /// Crashes `once` at `point`, runs it again cleanly, and checks what every case must hold.
    async fn crash_and_recover(&self, point: &str) {
        let crashed = self.once(Some(point)).await;
        // run_command reports a death by signal (here SIGABRT) as -1.
        assert_eq!(crashed.code, -1, "the debug build aborts at {point}: {crashed:?}");
        assert!(crashed.stderr.contains(&format!("failpoint {point} reached")), "{crashed:?}");
        let recovered = self.once(None).await;
        assert!(matches!(recovered.code, 0 | 1), "the second run completes: {recovered:?}");
        let rows = self.agent.status().await;
        assert_eq!(rows.len(), DEPLOYMENTS.len(), "{rows:#?}");
        for row in &rows {
            assert_eq!(row["signal"], "delivered", "every deployment is signalled and acknowledged: {rows:#?}");
        }
        let recorded = self.results_recorded().await;
        let names: Vec<&str> = recorded.iter().map(|(name, _)| name.as_str()).collect();
        assert_eq!(names, DEPLOYMENTS, "the shim records each result exactly once: {recorded:?}");
    }
}

/// The `deploy_stderr` the agent journaled (and signalled) for the deployment named `name`.
fn journaled_stderr(agent: &Agent, name: &str) -> String {
    journal_entries(&agent.state_dir())
        .into_iter()
        .find(|entry| entry["name"] == name)
        .map(|entry| text(&entry["result"]["deploy_stderr"]))
        .unwrap_or_default()
}

fn text(value: &Value) -> String {
    value.as_str().unwrap_or_default().to_string()
}

/// Crash points after which nothing was lost: every hook ran exactly once and the stack completes.
async fn assert_clean_recovery(point: &str) {
    let case = Case::start(None).await;
    case.crash_and_recover(point).await;
    for name in DEPLOYMENTS {
        assert_eq!(case.runs(name), 1, "{name} ran exactly once after a crash at {point}");
    }
    assert_eq!(case.stack_status().await, "CREATE_COMPLETE");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crash_after_seen_loses_nothing() {
    assert_clean_recovery("after_seen").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crash_after_finished_resends_without_rerunning() {
    assert_clean_recovery("after_finished").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crash_mid_signal_resends_and_the_torn_request_counts_for_nothing() {
    assert_clean_recovery("mid_signal").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crash_after_the_ack_resends_once_and_the_shim_deduplicates() {
    assert_clean_recovery("after_signal_ack").await;
}

/// An interrupted run with the default policy: signalled FAILED with the interrupted reason, never
/// rerun; the other deployments run once.
async fn assert_interrupted_fails(point: &str, runs_before_crash: usize) {
    let case = Case::start(None).await;
    case.crash_and_recover(point).await;
    assert_eq!(case.runs("deploy_1"), runs_before_crash, "the interrupted run is not rerun");
    for name in ["deploy_2", "deploy_3"] {
        assert_eq!(case.runs(name), 1, "{name} ran once");
    }
    let recorded = case.results_recorded().await;
    assert_eq!(recorded[0], ("deploy_1".to_string(), "CREATE_FAILED".to_string()), "{recorded:?}");
    let signalled = journaled_stderr(&case.agent, "deploy_1");
    assert!(signalled.contains("interrupted"), "the signalled deploy_stderr says why: {signalled:?}");
    assert_eq!(case.stack_status().await, "CREATE_FAILED");
}

/// The same with `on_interrupt: rerun`: the run happens again, once.
async fn assert_interrupted_reruns(point: &str, runs_before_crash: usize) {
    let case = Case::start(Some("rerun")).await;
    case.crash_and_recover(point).await;
    assert_eq!(case.runs("deploy_1"), runs_before_crash + 1, "the interrupted run ran once more");
    for name in ["deploy_2", "deploy_3"] {
        assert_eq!(case.runs(name), 1, "{name} ran once");
    }
    assert_eq!(case.stack_status().await, "CREATE_COMPLETE");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crash_after_started_fails_the_run_by_default() {
    assert_interrupted_fails("after_started", 0).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crash_after_started_reruns_with_on_interrupt_rerun() {
    assert_interrupted_reruns("after_started", 0).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crash_after_the_hook_exited_fails_the_run_by_default() {
    assert_interrupted_fails("after_hook_exit", 1).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crash_after_the_hook_exited_reruns_with_on_interrupt_rerun() {
    assert_interrupted_reruns("after_hook_exit", 1).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_failpoint_name_is_refused_clearly() {
    let case = Case::start(None).await;
    let refused = case.once(Some("after_lunch")).await;
    assert_eq!(refused.code, 2, "{refused:?}");
    assert!(refused.stderr.contains("unknown failpoint") && refused.stderr.contains("after_seen"), "{refused:?}");
}
