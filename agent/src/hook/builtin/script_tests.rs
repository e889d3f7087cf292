//! Tests of the built-in script hook against small `#!/bin/sh` configs.

use std::os::unix::fs::PermissionsExt;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use serde_json::json;

use std::fs;
use std::time::Duration;

use anneal_hooks::Builtin;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::hook::testing::{deployment, settings};
use crate::hook::{Ending, HookError, HookRun, HookSettings, Spawned};
use crate::hook::{HookChoice, HookRunner, TIMED_OUT_STATUS};

struct Fixture {
    _root: tempfile::TempDir,
    runner: HookRunner,
}

fn fixture() -> Fixture {
    let root = tempfile::tempdir().unwrap();
    Fixture { runner: HookRunner::new(settings(root.path())), _root: root }
}

impl Fixture {
    fn settings(&self) -> &HookSettings {
        self.runner.settings()
    }

    async fn run(&self, document: Value) -> HookRun {
        self.run_with_timeout(document, Duration::from_secs(10)).await.unwrap()
    }

    async fn run_with_timeout(&self, document: Value, timeout: Duration) -> Result<HookRun, HookError> {
        let target = deployment(document);
        let choice = self.runner.choose(&target);
        assert_eq!(choice, HookChoice::Builtin(Builtin::Script));
        self.runner.run(&target, &choice, timeout, &CancellationToken::new(), |_| {}).await
    }

    fn result(run: &HookRun) -> Value {
        serde_json::to_value(&run.result).unwrap()
    }
}

fn script(id: &str, config: &str) -> Value {
    json!({"id": id, "group": "script", "config": config})
}

#[tokio::test]
async fn success_with_outputs_in_heat_agents_order() {
    let fixture = fixture();
    let mut document = script(
        "d1",
        "#!/bin/sh\necho stdout\necho stderr >&2\nprintf 'line\\n' > $heat_outputs_path.result\nprintf x > $heat_outputs_path.other",
    );
    document["outputs"] = json!([{"name": "result"}, {"name": "absent"}, {"name": "other"}]);
    let run = fixture.run(document).await;
    assert_eq!(run.ending, Ending::Exited(0));
    let result = Fixture::result(&run);
    assert_eq!(
        result,
        json!({"result": "line\n", "other": "x", "deploy_stdout": "stdout\n", "deploy_stderr": "stderr\n", "deploy_status_code": 0})
    );
    let keys: Vec<&String> = run.result.0.keys().collect();
    assert_eq!(keys, ["result", "other", "deploy_stdout", "deploy_stderr", "deploy_status_code"]);
}

#[tokio::test]
async fn inputs_become_environment_variables() {
    let fixture = fixture();
    let mut document = script(
        "d1",
        "#!/bin/sh\nfor name in a_dict a_list a_number a_float a_bool a_null missing a_string json_text; do printf '%s=%s|' $name \"$(printenv $name || echo UNSET)\"; done",
    );
    document["inputs"] = json!([
        {"name": "a_dict", "value": {"key": "value", "n": [1, 2]}},
        {"name": "a_list", "value": ["v1", 12]},
        {"name": "a_number", "type": "Number", "value": 5},
        {"name": "a_float", "type": "Number", "value": 2.5},
        {"name": "a_bool", "type": "Boolean", "value": true},
        {"name": "a_null", "value": null},
        {"name": "missing", "type": "String"},
        {"name": "a_string", "value": "with spaces and 'quotes'"},
        {"name": "json_text", "value": "{\"key\": \"value\"}"},
    ]);
    let result = Fixture::result(&fixture.run(document).await);
    assert_eq!(
        result["deploy_stdout"],
        json!(
            "a_dict={\"key\": \"value\", \"n\": [1, 2]}|a_list=[\"v1\", 12]|a_number=5|a_float=2.5|a_bool=true|\
             a_null=|missing=|a_string=with spaces and 'quotes'|json_text={\"key\": \"value\"}|"
        )
    );
}

#[tokio::test]
async fn unusable_inputs_are_skipped_and_inputs_override_the_base_env() {
    let fixture = fixture();
    let mut document = script("d1", "#!/bin/sh\nenv | sort");
    document["inputs"] = json!([
        {"name": "bad=name", "value": "x"},
        {"name": "", "value": "x"},
        {"name": "has_nul", "value": "a\u{0}b"},
        {"name": "LANG", "value": "overridden"},
        {"name": "kept", "value": "yes"},
    ]);
    let result = Fixture::result(&fixture.run(document).await);
    let stdout = result["deploy_stdout"].as_str().unwrap();
    let outputs_path = fixture.settings().outputs_dir.join("d1");
    let mut expected: Vec<String> = vec![
        "LANG=overridden".into(),
        "PATH=/usr/local/bin:/usr/bin:/bin".into(),
        format!("heat_outputs_path={}", outputs_path.display()),
        "kept=yes".into(),
    ];
    expected.sort();
    // The shell adds its own bookkeeping variables (PWD, SHLVL); nothing of the agent's leaks.
    let lines: Vec<&str> =
        stdout.lines().filter(|line| !line.starts_with("PWD=") && !line.starts_with("SHLVL=")).collect();
    assert_eq!(lines, expected);
}

#[tokio::test]
async fn non_zero_exit_and_signal_death_are_status_codes() {
    let fixture = fixture();
    let run = fixture.run(script("d1", "#!/bin/sh\necho failing >&2\nexit 3")).await;
    assert_eq!(run.ending, Ending::Exited(3));
    assert_eq!(
        Fixture::result(&run),
        json!({"deploy_stdout": "", "deploy_stderr": "failing\n", "deploy_status_code": 3})
    );
    let run = fixture.run(script("d2", "#!/bin/sh\nkill -9 $$")).await;
    assert_eq!(run.ending, Ending::Signalled(9));
    assert_eq!(run.result.status_code(), Some(&json!(-9)));
}

#[tokio::test]
async fn a_config_without_shebang_fails_clearly_without_spawning() {
    let fixture = fixture();
    let target = deployment(json!({"id": "d1", "group": "script", "config": "echo hi"}));
    let spawned = Arc::new(Mutex::new(false));
    let flag = Arc::clone(&spawned);
    let on_spawn = move |_: Spawned| *flag.lock().unwrap() = true;
    let shutdown = CancellationToken::new();
    let run =
        fixture.runner.run(&target, &HookChoice::Builtin(Builtin::Script), Duration::from_secs(5), &shutdown, on_spawn);
    let run = run.await.unwrap();
    assert!(!*spawned.lock().unwrap());
    assert_eq!(run.ending, Ending::Exited(1));
    assert_eq!(run.result.status_code(), Some(&json!(1)));
    let stderr = run.result.0["deploy_stderr"].as_str().unwrap();
    assert!(stderr.contains("cannot run the config") && stderr.contains("#!"), "{stderr}");
}

#[tokio::test]
async fn inputs_too_large_for_the_environment_fail_clearly() {
    let fixture = fixture();
    let mut document = script("d1", "#!/bin/sh\necho hi");
    // One variable over the kernel's 128 KiB per-string limit (MAX_ARG_STRLEN).
    document["inputs"] = json!([{"name": "huge", "value": "x".repeat(200 * 1024)}]);
    let run = fixture.run(document).await;
    assert_eq!(run.result.status_code(), Some(&json!(1)));
    let stderr = run.result.0["deploy_stderr"].as_str().unwrap();
    assert!(stderr.contains("too large to pass as environment variables"), "{stderr}");
    assert!(!stderr.contains("#!"), "not the interpreter hint: {stderr}");
}

#[tokio::test]
async fn a_missing_interpreter_fails_clearly() {
    let fixture = fixture();
    let run = fixture.run(script("d1", "#!/nonexistent/interpreter\necho hi")).await;
    assert_eq!(run.result.status_code(), Some(&json!(1)));
    let stderr = run.result.0["deploy_stderr"].as_str().unwrap();
    assert!(stderr.contains("cannot run the config") && stderr.contains("#!"), "{stderr}");
}

#[tokio::test]
async fn a_non_string_config_fails_clearly() {
    let fixture = fixture();
    let target = deployment(json!({"id": "d1", "group": "script", "config": {"not": "a script"}}));
    let shutdown = CancellationToken::new();
    let run =
        fixture.runner.run(&target, &HookChoice::Builtin(Builtin::Script), Duration::from_secs(5), &shutdown, |_| {});
    let run = run.await.unwrap();
    assert_eq!(run.result.status_code(), Some(&json!(1)));
    let script = fs::read_to_string(fixture.settings().work_dir.join("d1")).unwrap();
    assert_eq!(script, "{\"not\": \"a script\"}");
}

#[tokio::test]
async fn script_file_is_private_truncated_and_run_from_the_work_dir() {
    let fixture = fixture();
    let long = format!("#!/bin/sh\npwd\n# {}\n", "x".repeat(200));
    fixture.run(script("d1", &long)).await;
    let run = fixture.run(script("d1", "#!/bin/sh\npwd")).await;
    let work_dir = &fixture.settings().work_dir;
    let path = work_dir.join("d1");
    assert_eq!(fs::read_to_string(&path).unwrap(), "#!/bin/sh\npwd");
    assert_eq!(fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o700);
    for dir in [work_dir, &fixture.settings().outputs_dir] {
        assert_eq!(fs::metadata(dir).unwrap().permissions().mode() & 0o777, 0o700);
    }
    let expected = format!("{}\n", work_dir.canonicalize().unwrap().display());
    assert_eq!(run.result.0["deploy_stdout"], json!(expected));
}

#[tokio::test]
async fn stale_outputs_of_an_earlier_run_are_not_reported() {
    let fixture = fixture();
    let mut document = script("d1", "#!/bin/sh\nprintf fresh > $heat_outputs_path.new");
    document["outputs"] = json!([{"name": "old"}, {"name": "new"}]);
    fs::create_dir_all(&fixture.settings().outputs_dir).unwrap();
    fs::write(fixture.settings().outputs_dir.join("d1.old"), "stale").unwrap();
    let result = Fixture::result(&fixture.run(document).await);
    assert_eq!(result.get("old"), None);
    assert_eq!(result["new"], json!("fresh"));
}

#[tokio::test]
async fn output_names_cannot_leave_the_outputs_dir() {
    let fixture = fixture();
    let mut document = script("d1", "#!/bin/sh\nmkdir -p $heat_outputs_path.x\nprintf secret > $heat_outputs_path.x/y");
    document["outputs"] = json!([{"name": "x/y"}, {"name": ".."}, {"name": "x"}]);
    let result = Fixture::result(&fixture.run(document).await);
    assert_eq!(result.get("x/y"), None);
    assert_eq!(result.get(".."), None);
    assert_eq!(result.get("x"), None, "a directory is not an output");
    assert_eq!(result["deploy_status_code"], json!(0));
}

#[tokio::test]
async fn deadline_kills_the_script_and_gives_124() {
    let fixture = fixture();
    let marker = fixture.settings().work_dir.join("marker");
    let config = format!("#!/bin/sh\necho begun\n(trap '' TERM; sleep 1; touch {}) &\nwait", marker.display());
    let started = Instant::now();
    let run = fixture.run_with_timeout(script("d1", &config), Duration::from_millis(300)).await.unwrap();
    assert!(started.elapsed() < Duration::from_secs(2), "took {:?}", started.elapsed());
    assert_eq!(run.ending, Ending::TimedOut { after: Duration::from_millis(300) });
    let result = Fixture::result(&run);
    assert_eq!(result["deploy_status_code"], json!(TIMED_OUT_STATUS));
    assert_eq!(result["deploy_stdout"], json!("begun\n"));
    assert_eq!(result["deploy_stderr"], json!("anneal: hook script timed out after 300 ms; process group killed"));
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(!marker.exists(), "the grandchild survived the deadline");
}

#[tokio::test]
async fn shutdown_is_reported_as_cancelled() {
    let fixture = fixture();
    let target = deployment(script("d1", "#!/bin/sh\nsleep 30"));
    let shutdown = CancellationToken::new();
    let canceller = shutdown.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(100)).await;
        canceller.cancel();
    });
    let run =
        fixture.runner.run(&target, &HookChoice::Builtin(Builtin::Script), Duration::from_secs(30), &shutdown, |_| {});
    assert!(matches!(run.await, Err(HookError::Cancelled { group }) if group == "script"));
}

#[tokio::test]
async fn unsafe_ids_are_refused() {
    let fixture = fixture();
    let target = deployment(script("../escape", "#!/bin/sh\necho hi"));
    let shutdown = CancellationToken::new();
    let run =
        fixture.runner.run(&target, &HookChoice::Builtin(Builtin::Script), Duration::from_secs(5), &shutdown, |_| {});
    assert!(matches!(run.await, Err(HookError::UnsafeId { id }) if id == "../escape"));
}

#[tokio::test]
async fn the_script_is_run_by_its_absolute_path_as_heat_agents_runs_it() {
    let fixture = fixture();
    let run = fixture.run(script("d1", "#!/bin/sh\necho \"$0\"")).await;
    let expected = format!("{}\n", fixture.settings().work_dir.join("d1").display());
    assert_eq!(run.result.0["deploy_stdout"], json!(expected));
}

#[tokio::test]
async fn a_script_that_cannot_be_written_is_a_run_that_could_not_happen() {
    let fixture = fixture();
    // A directory where the script goes: the rename over it fails.
    fs::create_dir_all(fixture.settings().work_dir.join("d1/inside")).unwrap();
    let error = fixture.run_with_timeout(script("d1", "#!/bin/sh\n"), Duration::from_secs(5)).await.unwrap_err();
    assert!(matches!(error, HookError::Io { action: "write script", .. }), "{error:?}");
    let leftovers: Vec<_> =
        fs::read_dir(&fixture.settings().work_dir).unwrap().map(|entry| entry.unwrap().file_name()).collect();
    assert_eq!(leftovers, ["d1"], "the temp file is removed");
}

#[tokio::test]
async fn an_ungrouped_script_is_named_by_its_group_when_it_times_out() {
    let fixture = fixture();
    let document = json!({"id": "d1", "group": "Heat::Ungrouped", "config": "#!/bin/sh\nsleep 5"});
    let run = fixture.run_with_timeout(document, Duration::from_millis(200)).await.unwrap();
    assert_eq!(
        run.result.0["deploy_stderr"],
        "anneal: hook Heat::Ungrouped timed out after 200 ms; process group killed"
    );
}
