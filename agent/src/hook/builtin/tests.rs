//! The agent's tool runner for built-ins: tools found through the hook's PATH, run in their own
//! group with the hook's deadline, the run recorded at each start; a missing tool, a deadline and
//! a failing built-in each become the result heat-config would have signalled.

use std::fs;
use std::time::Duration;

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::resolve;
use crate::hook::testing::{deployment, settings, shell_script};
use crate::hook::{Ending, HookChoice, HookRunner, TIMED_OUT_STATUS};

/// Settings whose PATH has `bin` first and whose ansible dirs live under `root`.
fn runner(root: &std::path::Path) -> HookRunner {
    let mut settings = settings(root);
    let bin = root.join("bin");
    fs::create_dir_all(&bin).unwrap();
    settings.base_env = vec![
        ("PATH".into(), format!("{}:/usr/bin:/bin", bin.display())),
        ("LANG".into(), "C.UTF-8".into()),
        ("HEAT_ANSIBLE_WORKING".into(), root.join("ansible/work").display().to_string()),
        ("HEAT_ANSIBLE_OUTPUTS".into(), root.join("ansible/out").display().to_string()),
    ];
    HookRunner::new(settings)
}

fn ansible(id: &str, options: Value) -> anneal_protocol::Deployment {
    deployment(json!({"id": id, "group": "ansible", "config": "- hosts: localhost", "options": options,
        "outputs": [{"name": "result"}]}))
}

#[tokio::test]
async fn a_built_in_runs_its_tool_from_the_hooks_path_and_reads_its_outputs() {
    let root = tempfile::tempdir().unwrap();
    let runner = runner(root.path());
    shell_script(
        &root.path().join("bin"),
        "ansible-playbook",
        r#"echo "args: $*"; echo "cwd: $(pwd)"; echo "marker: ${ANNEAL_RUN_MARKER:-none}"; printf done > "$(dirname "$PWD")/out/a1.result"; echo oops >&2; exit 3"#,
    );
    let target = ansible("a1", json!({"tags": "web"}));
    let choice = runner.choose(&target);
    assert_eq!(choice, HookChoice::Builtin(anneal_hooks::Builtin::Ansible));
    let mut spawned = Vec::new();
    let shutdown = CancellationToken::new();
    let run = runner
        .run(&target, &choice, Duration::from_secs(10), &shutdown, |process| spawned.push(process.pid))
        .await
        .unwrap();
    let work = root.path().join("ansible/work");
    let stdout = run.result.0["deploy_stdout"].as_str().unwrap().to_string();
    assert!(
        stdout.contains(&format!("args: -i localhost, --tags web {}/a1_playbook.yaml", work.display())),
        "{stdout}"
    );
    assert!(stdout.contains(&format!("cwd: {}", work.display())), "{stdout}");
    assert_eq!(run.result.0["result"], "done");
    assert_eq!(run.result.0["deploy_stderr"], "oops\n");
    assert_eq!(run.result.0["deploy_status_code"], 3);
    assert_eq!(spawned.len(), 1);
}

#[tokio::test]
async fn a_missing_tool_is_what_heat_agents_answers_and_a_bad_deployment_fails() {
    let root = tempfile::tempdir().unwrap();
    let runner = runner(root.path());
    let shutdown = CancellationToken::new();
    let target = ansible("a2", json!({}));
    let run = runner.run(&target, &runner.choose(&target), Duration::from_secs(10), &shutdown, |_| {}).await.unwrap();
    // heat-agents' ansible hook prints nothing when ansible is not installed; heat-config signals {}.
    assert_eq!(Value::Object(run.result.0), json!({}));
    let target = ansible("a3", json!({"tags": 5}));
    let run = runner.run(&target, &runner.choose(&target), Duration::from_secs(10), &shutdown, |_| {}).await.unwrap();
    assert_eq!(
        Value::Object(run.result.0),
        json!({"deploy_stdout": "", "deploy_stderr": "anneal: hook ansible: option tags must be a string, not 5",
               "deploy_status_code": 1})
    );
    assert_eq!(run.ending, Ending::Exited(1));
}

#[tokio::test]
async fn a_tool_past_the_hook_deadline_is_killed_and_reported_as_timed_out() {
    let root = tempfile::tempdir().unwrap();
    let runner = runner(root.path());
    shell_script(&root.path().join("bin"), "ansible-playbook", "echo started; exec sleep 30");
    let target = ansible("a4", json!({}));
    let shutdown = CancellationToken::new();
    let started = std::time::Instant::now();
    let run =
        runner.run(&target, &runner.choose(&target), Duration::from_millis(500), &shutdown, |_| {}).await.unwrap();
    assert!(started.elapsed() < Duration::from_secs(10));
    assert!(matches!(run.ending, Ending::TimedOut { .. }));
    assert_eq!(run.result.0["deploy_status_code"], TIMED_OUT_STATUS);
    assert_eq!(run.result.0["deploy_stdout"], "started\n");
    assert!(run.result.0["deploy_stderr"].as_str().unwrap().contains("anneal: hook ansible timed out after 500 ms"));
}

#[tokio::test]
async fn an_installed_hook_file_overrides_the_built_in() {
    let root = tempfile::tempdir().unwrap();
    let runner = runner(root.path());
    let hook = shell_script(&root.path().join("hooks2"), "puppet", "exit 0");
    let target = deployment(json!({"id": "p1", "group": "puppet", "config": ""}));
    assert_eq!(runner.choose(&target), HookChoice::External(hook));
    let target = deployment(json!({"id": "p2", "group": "hiera", "config": {}}));
    assert_eq!(runner.choose(&target), HookChoice::Builtin(anneal_hooks::Builtin::Hiera));
}

#[test]
fn programs_are_found_as_popen_finds_them() {
    let root = tempfile::tempdir().unwrap();
    let bin = root.path().join("bin");
    fs::create_dir_all(&bin).unwrap();
    let tool = shell_script(&bin, "tool", "exit 0");
    fs::write(bin.join("plain"), "not executable").unwrap();
    let env = vec![("PATH".to_string(), format!("/nonexistent:{}", bin.display()))];
    assert_eq!(resolve("tool", &env, root.path()), Some(tool));
    assert_eq!(resolve("plain", &env, root.path()), None);
    assert_eq!(resolve("absent", &env, root.path()), None);
    assert_eq!(resolve("bin/tool", &env, root.path()), Some(root.path().join("bin/tool")));
    assert_eq!(resolve("/bin/sh", &env, root.path()), Some(std::path::PathBuf::from("/bin/sh")));
}

#[tokio::test]
async fn a_timeout_beyond_the_clock_runs_the_tool_without_a_deadline() {
    let root = tempfile::tempdir().unwrap();
    let runner = runner(root.path());
    shell_script(&root.path().join("bin"), "ansible-playbook", "echo ran");
    let target = ansible("a1", json!({}));
    let choice = runner.choose(&target);
    let shutdown = CancellationToken::new();
    // Metadata may ask for any number of seconds; Instant + Duration::MAX would overflow.
    let run = runner.run(&target, &choice, Duration::MAX, &shutdown, |_| {}).await.unwrap();
    assert_eq!(run.result.0["deploy_stdout"], "ran\n");
    assert_eq!(run.ending, Ending::Exited(0));
}
