//! Tests of the checker: findings for results made by hand, and whole checks through the agent's
//! runner with the built-in script hook and small external hooks in temp dirs.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use serde_json::json;

use super::*;

fn result(value: Value) -> HookResult {
    serde_json::from_value(value).unwrap()
}

/// The `create` case (one declared output `result`) as run by `choice`.
fn ran(choice: HookChoice, result: HookResult, ending: Ending) -> (Case, Ran) {
    ran_as(choice, result, ending, false)
}

/// `ran` of a hook whose stdout was not one JSON object (heat-config wrapped it).
fn ran_wrapped(result: HookResult, ending: Ending) -> (Case, Ran) {
    ran_as(external(), result, ending, true)
}

fn ran_as(choice: HookChoice, result: HookResult, ending: Ending, wrapped: bool) -> (Case, Ran) {
    let group = if choice == HookChoice::Builtin(anneal_hooks::Builtin::Script) { "script" } else { "my-tool" };
    let case = cases::cases(group).remove(0);
    let run = HookRun { result, ending, duration: Duration::from_millis(5), wrapped };
    let ran = Ran { deployment: case.deployment.clone(), choice, run };
    (case, ran)
}

fn external() -> HookChoice {
    HookChoice::External(PathBuf::from("/hooks/my-tool"))
}

fn violations(found: &[Finding]) -> Vec<&str> {
    found.iter().filter(|finding| finding.severity == Severity::Violation).map(|f| f.message.as_str()).collect()
}

#[test]
fn a_proper_json_answer_has_no_violations() {
    let answer = result(json!({"deploy_stdout": "ok", "deploy_stderr": "", "deploy_status_code": 0, "result": "v"}));
    let (case, ran) = ran(external(), answer, Ending::Exited(0));
    assert_eq!(findings(&case, &ran), Vec::new());
}

#[test]
fn plain_text_with_a_failing_exit_is_wrapped_and_flagged() {
    let wrapped = HookResult::from_process("plain text\n", "", 3);
    let (case, ran) = ran_wrapped(wrapped, Ending::Exited(3));
    let found = findings(&case, &ran);
    let messages = violations(&found);
    assert!(messages.iter().any(|message| message.starts_with("stdout is not one JSON object")), "{found:?}");
    assert!(messages.iter().any(|message| message.contains("exited with status 3")), "{found:?}");
}

#[test]
fn plain_text_with_exit_zero_is_flagged_but_the_same_keys_printed_as_json_are_not() {
    // Both give Heat the same result; only the one whose stdout was not JSON broke the protocol.
    let printed = HookResult::from_process("done\n", "", 0);
    let (case, ran) = ran(external(), printed.clone(), Ending::Exited(0));
    assert!(violations(&findings(&case, &ran)).is_empty());
    let (case, ran) = ran_wrapped(printed, Ending::Exited(0));
    assert!(violations(&findings(&case, &ran))[0].starts_with("stdout is not one JSON object"));
}

#[test]
fn empty_stdout_missing_code_and_undeclared_keys_are_flagged() {
    let (case, ran) = ran(external(), HookResult::default(), Ending::Exited(0));
    assert!(violations(&findings(&case, &ran))[0].starts_with("printed nothing on stdout"));
    let answer = result(json!({"result": "v", "extra": 1, "other": 2}));
    let (case, ran) = self::ran(external(), answer, Ending::Exited(0));
    let found = findings(&case, &ran);
    assert_eq!(
        violations(&found),
        vec![
            "the JSON answer has no deploy_status_code (Heat reads that as success)",
            "keys that are not declared outputs (Heat drops them): extra, other",
        ]
    );
}

#[test]
fn a_json_answer_with_a_failing_exit_is_used_but_flagged() {
    let answer = result(json!({"deploy_status_code": 0, "result": "v"}));
    let (case, ran) = ran(external(), answer, Ending::Exited(2));
    assert_eq!(
        violations(&findings(&case, &ran)),
        vec!["the hook exited with status 2: exit 0 and report failure in deploy_status_code"]
    );
}

#[test]
fn missing_outputs_are_a_note_for_neutral_configs_and_a_violation_for_scripts() {
    let answer = result(json!({"deploy_stdout": "", "deploy_stderr": "", "deploy_status_code": 0}));
    let (case, ran) = ran(external(), answer.clone(), Ending::Exited(0));
    let found = findings(&case, &ran);
    assert!(violations(&found).is_empty());
    assert_eq!(found[0].message, "declared outputs not in the result (Heat stores null): result");
    let (case, ran) = self::ran(HookChoice::Builtin(anneal_hooks::Builtin::Script), answer, Ending::Exited(0));
    assert!(violations(&findings(&case, &ran))[0].contains("missing: result"));
}

#[test]
fn timeouts_are_violations_unless_the_case_intends_one() {
    let after = Duration::from_secs(2);
    let killed = HookResult::from_process("", "timed out", 124);
    let (case, ran) = ran(external(), killed.clone(), Ending::TimedOut { after });
    assert_eq!(
        violations(&findings(&case, &ran)),
        vec!["timed out after 2 s: the process group was killed and deploy_status_code is 124"]
    );
    let timeout_case = cases::cases("script").into_iter().find(|case| case.name == "timeout").unwrap();
    let (_, mut ran) =
        self::ran(HookChoice::Builtin(anneal_hooks::Builtin::Script), killed, Ending::TimedOut { after });
    ran.deployment = timeout_case.deployment.clone();
    let found = findings(&timeout_case, &ran);
    assert!(violations(&found).is_empty() && found[0].message.starts_with("killed at its 2 s deadline"), "{found:?}");
}

#[test]
fn a_built_in_that_fails_before_answering_is_flagged() {
    let failed = HookResult::from_process("", "anneal: hook puppet: cannot start puppet", 1);
    let (case, mut ran) = ran(external(), failed, Ending::Exited(1));
    ran.choice = HookChoice::Builtin(anneal_hooks::Builtin::Puppet);
    assert_eq!(
        violations(&findings(&case, &ran)),
        vec!["the hook failed before answering: anneal: hook puppet: cannot start puppet"]
    );
}

fn settings(root: &Path) -> HookSettings {
    let hooks = root.join("hooks");
    std::fs::create_dir_all(&hooks).unwrap();
    std::fs::set_permissions(&hooks, std::fs::Permissions::from_mode(0o755)).unwrap();
    HookSettings {
        hooks_dirs: vec![hooks],
        work_dir: root.join("scratch/script"),
        outputs_dir: root.join("scratch/outputs"),
        base_env: vec![("PATH".into(), "/usr/bin:/bin".into()), ("LANG".into(), "C.UTF-8".into())],
        kill_grace: Duration::from_millis(500),
        max_output_bytes: 1024 * 1024,
        run_markers_dir: None,
    }
}

#[tokio::test]
async fn the_built_in_script_hook_passes_every_case() {
    let root = tempfile::tempdir().unwrap();
    let report =
        check("script", settings(root.path()), Duration::from_secs(30), &CancellationToken::new()).await.unwrap();
    assert_eq!(report.hook, "the built-in script hook");
    assert!(!report.has_violations(), "{}", report.render());
    let outcome = |name: &str| {
        let case = report.cases.iter().find(|case| case.name == name).unwrap();
        case.evaluation.status_reason.clone()
    };
    assert_eq!(outcome("create"), "Outputs received");
    assert_eq!(outcome("error-output"), "failure : disk full");
    assert!(outcome("timeout").ends_with("non-zero status code: 124"));
    let types = report.cases.iter().find(|case| case.name == "input-types").unwrap();
    assert!(types.signal_body.contains("a_json={\\\"key\\\": \\\"value\\\""), "{}", types.signal_body);
}

#[tokio::test]
async fn a_missing_hook_cannot_be_checked() {
    let root = tempfile::tempdir().unwrap();
    let error = check("no-such-tool", settings(root.path()), Duration::from_secs(5), &CancellationToken::new())
        .await
        .unwrap_err();
    assert!(error.is_usage());
    assert!(error.to_string().starts_with("cannot check group no-such-tool: no hook for group no-such-tool in "));
}

#[tokio::test]
async fn an_external_hook_is_fed_every_case() {
    let root = tempfile::tempdir().unwrap();
    let settings = settings(root.path());
    let hook = settings.hooks_dirs[0].join("my-tool");
    let log = root.path().join("seen");
    let body = format!(
        "#!/bin/sh\ncat >> {}\necho >> {}\necho '{{\"deploy_stdout\": \"\", \"deploy_stderr\": \"\", \"deploy_status_code\": 0}}'\n",
        log.display(),
        log.display()
    );
    std::fs::write(&hook, body).unwrap();
    std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).unwrap();
    let report = check("my-tool", settings, Duration::from_secs(30), &CancellationToken::new()).await.unwrap();
    assert_eq!(report.hook, hook.display().to_string());
    assert!(!report.has_violations(), "{}", report.render());
    let seen: Vec<Value> =
        std::fs::read_to_string(&log).unwrap().lines().map(|line| serde_json::from_str(line).unwrap()).collect();
    assert_eq!(seen.len(), cases::cases("my-tool").len());
    assert!(seen.iter().all(|deployment| deployment["group"] == "my-tool" && deployment["config"] == ""));
    assert!(seen.iter().all(|deployment| deployment["options"].is_object()));
}
