//! `anneal-agent hook-test GROUP --check` end to end: the real binary with a temp config whose
//! hooks dir holds small sh hooks (one that follows the protocol, one that does not, a `script`
//! file overriding the built-in), and the built-in script hook. Everything is written under the
//! sandbox's temp dir (`TMPDIR` too, for the scratch dir); no built-in other than script runs.

mod common;

use std::time::Duration;

use common::*;
use tokio::process::Command;

const CASES: [&str; 9] =
    ["create", "input-types", "outputs", "error-output", "failure", "plain-stdout", "timeout", "update", "delete"];

const GOOD_HOOK: &str = "#!/bin/sh\ncat > /dev/null\n\
    echo '{\"deploy_stdout\": \"ok\", \"deploy_stderr\": \"\", \"deploy_status_code\": 0}'\n";

const BAD_HOOK: &str = "#!/bin/sh\necho plain text\nexit 3\n";

fn sandbox() -> Sandbox {
    let sandbox = Sandbox::new();
    std::fs::create_dir_all(sandbox.state()).unwrap();
    set_mode(&sandbox.state(), 0o700);
    set_mode(&sandbox.hooks(), 0o755);
    sandbox.write_local_config("");
    set_mode(&sandbox.config_path(), 0o600);
    sandbox
}

fn set_mode(path: &std::path::Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

async fn check(sandbox: &Sandbox, group: &str) -> Finished {
    let mut command = Command::new(BINARY);
    command.args(["hook-test", group, "--check", "--config"]).arg(sandbox.config_path()).env("TMPDIR", sandbox.root());
    run_to_end(command, None, Duration::from_secs(60)).await
}

fn assert_every_case_listed(stdout: &str) {
    for case in CASES {
        assert!(stdout.lines().any(|line| line.starts_with(&format!("{case}: "))), "case {case} missing:\n{stdout}");
    }
}

#[tokio::test]
async fn a_hook_that_follows_the_protocol_passes() {
    let sandbox = sandbox();
    sandbox.install_hook("good", GOOD_HOOK);
    let finished = check(&sandbox, "good").await;
    assert_eq!(finished.status.code(), Some(0), "{}\n{}", finished.stdout, finished.stderr);
    assert_every_case_listed(&finished.stdout);
    let hook = sandbox.hooks().join("good");
    assert!(finished.stdout.starts_with(&format!("group good: runs {}\n", hook.display())), "{}", finished.stdout);
    assert!(finished.stdout.contains("config: an empty string"), "{}", finished.stdout);
    assert!(finished.stdout.ends_with("9 cases: no protocol violations\n"), "{}", finished.stdout);
    assert!(!finished.stdout.contains("VIOLATION"), "{}", finished.stdout);
    assert!(!sandbox.state().join("journal").exists(), "--check does not journal");
}

#[tokio::test]
async fn a_hook_printing_plain_text_and_failing_is_reported() {
    let sandbox = sandbox();
    sandbox.install_hook("bad", BAD_HOOK);
    let finished = check(&sandbox, "bad").await;
    assert_eq!(finished.status.code(), Some(1), "{}\n{}", finished.stdout, finished.stderr);
    assert_every_case_listed(&finished.stdout);
    let stdout = &finished.stdout;
    assert!(stdout.contains("VIOLATION: stdout is not one JSON object: heat-config wrapped it"), "{stdout}");
    assert!(stdout.contains("VIOLATION: the hook exited with status 3"), "{stdout}");
    assert!(stdout.contains("heat:     FAILED (deploy_status_code : Deployment exited with non-zero status code: 3)"));
    assert!(
        stdout.contains(r#"signal:   {"deploy_stdout": "plain text\n", "deploy_stderr": "", "deploy_status_code": 3}"#)
    );
    assert!(stdout.ends_with(&format!("9 cases: 9 with protocol violations ({})\n", CASES.join(", "))), "{stdout}");
}

#[tokio::test]
async fn the_built_in_script_hook_passes_and_shows_the_timeout() {
    let sandbox = sandbox();
    let finished = check(&sandbox, "script").await;
    assert_eq!(finished.status.code(), Some(0), "{}\n{}", finished.stdout, finished.stderr);
    assert_every_case_listed(&finished.stdout);
    let stdout = &finished.stdout;
    assert!(stdout.starts_with("group script: runs the built-in script hook\n"), "{stdout}");
    let timeout = stdout.split("\n\n").find(|block| block.starts_with("timeout: ")).unwrap();
    assert!(timeout.contains("code:     deploy_status_code 124"), "{timeout}");
    assert!(timeout.contains("timed out after 2 s; process group killed"), "{timeout}");
    let error_output = stdout.split("\n\n").find(|block| block.starts_with("error-output: ")).unwrap();
    assert!(error_output.contains("heat:     FAILED (failure : disk full)"), "{error_output}");
    let leftovers: Vec<_> = std::fs::read_dir(sandbox.root())
        .unwrap()
        .filter_map(Result::ok)
        .filter(|entry| entry.file_name().to_string_lossy().starts_with("anneal-hook-test-"))
        .collect();
    assert!(leftovers.is_empty(), "the scratch dir is removed");
}

#[tokio::test]
async fn a_script_file_in_the_hooks_dir_overrides_the_built_in() {
    let sandbox = sandbox();
    sandbox.install_hook("script", GOOD_HOOK);
    let finished = check(&sandbox, "script").await;
    // It answers, but never runs the config: the script cases' outputs and codes are missing.
    assert_eq!(finished.status.code(), Some(1), "{}\n{}", finished.stdout, finished.stderr);
    let hook = sandbox.hooks().join("script");
    assert!(finished.stdout.starts_with(&format!("group script: runs {}\n", hook.display())), "{}", finished.stdout);
    assert!(finished.stdout.contains("are missing: result"), "{}", finished.stdout);
    assert!(finished.stdout.contains("deploy_status_code is 0, not 3"), "{}", finished.stdout);
}

#[tokio::test]
async fn a_group_without_a_hook_is_a_usage_error() {
    let sandbox = sandbox();
    let finished = check(&sandbox, "no-such-tool").await;
    assert_eq!(finished.status.code(), Some(2), "{}", finished.stderr);
    assert!(finished.stderr.contains("cannot check group no-such-tool: no hook for group no-such-tool in"));
    assert!(finished.stdout.is_empty());
    let mut command = Command::new(BINARY);
    command.args(["hook-test", "script", "--check", "--config"]).arg(sandbox.root().join("missing.toml"));
    let finished = run_to_end(command, None, Duration::from_secs(30)).await;
    assert_eq!(finished.status.code(), Some(2), "{}", finished.stderr);
    assert!(finished.stderr.contains("missing.toml"), "{}", finished.stderr);
}
