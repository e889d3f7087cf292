//! External hooks (heat-config's `invoke_hook`, see docs/hook-protocol.md): the executable gets the
//! resolved deployment as JSON on stdin and prints its result as one JSON object on stdout;
//! anything else is wrapped as `{deploy_stdout, deploy_stderr, deploy_status_code}`.

use std::io;
use std::path::Path;
use std::time::Duration;

use anneal_protocol::{Deployment, HookResult};
use tokio_util::sync::CancellationToken;

use super::process::{ProcessOutput, run_process};
use super::{Ending, HookError, HookRun, HookSettings, Spawned, hook_error, timed_out_result};
use crate::fsutil::ensure_private_dir;

pub(super) async fn run(
    settings: &HookSettings,
    hook: &Path,
    deployment: &Deployment,
    timeout: Duration,
    shutdown: &CancellationToken,
    on_spawn: impl FnOnce(Spawned) + Send,
) -> Result<HookRun, HookError> {
    ensure_private_dir(&settings.work_dir).map_err(|source| HookError::Io {
        action: "create directory",
        path: settings.work_dir.clone(),
        source,
    })?;
    let input = serde_json::to_string(deployment).map_err(|source| HookError::Io {
        action: "encode the deployment for hook",
        path: hook.to_path_buf(),
        source: io::Error::other(source),
    })?;
    let mut spec = settings.process_spec(&deployment.id, hook, &settings.base_env, timeout);
    spec.stdin = Some(input.into_bytes());
    let output = run_process(spec, shutdown, on_spawn).await.map_err(|error| hook_error(error, &deployment.group))?;
    let (result, wrapped) = match output.ending {
        Ending::TimedOut { after } => (timed_out_result(&deployment.group, &output, after), false),
        Ending::Exited(_) | Ending::Signalled(_) => (external_result(&output), !answered(&output)),
    };
    Ok(HookRun { result, ending: output.ending, duration: output.duration, wrapped })
}

/// Whether the hook answered as the protocol asks: one JSON object on stdout (whole), or nothing
/// with exit 0.
fn answered(output: &ProcessOutput) -> bool {
    let stdout = output.stdout.text();
    if stdout.trim().is_empty() {
        return output.status_code == 0;
    }
    !output.stdout.is_truncated()
        && matches!(serde_json::from_str::<serde_json::Value>(&stdout), Ok(serde_json::Value::Object(_)))
}

/// heat-config's reading of a hook's output; a truncated stdout is never parsed (its tail could
/// happen to be a JSON object that is not the hook's result).
fn external_result(output: &ProcessOutput) -> HookResult {
    let stdout = output.stdout.text();
    let stderr = output.stderr.text();
    if output.stdout.is_truncated() {
        return HookResult::from_process(&stdout, &stderr, output.status_code);
    }
    HookResult::from_hook_output(&stdout, &stderr, output.status_code)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hook::testing::{deployment, settings, shell_script};
    use crate::hook::{HookChoice, HookRunner, TIMED_OUT_STATUS};
    use serde_json::{Value, json};
    use std::time::Instant;

    struct Fixture {
        _root: tempfile::TempDir,
        runner: HookRunner,
        hook_dir: std::path::PathBuf,
    }

    fn fixture() -> Fixture {
        let root = tempfile::tempdir().unwrap();
        let settings = settings(root.path());
        let hook_dir = settings.hooks_dirs[0].clone();
        Fixture { runner: HookRunner::new(settings), hook_dir, _root: root }
    }

    impl Fixture {
        async fn run_hook(&self, body: &str, timeout: Duration) -> Result<HookRun, HookError> {
            shell_script(&self.hook_dir, "puppet", body);
            let target = deployment(json!({
                "id": "d1", "name": "deploy", "group": "puppet", "config": "x",
                "inputs": [{"name": "foo", "type": "String", "value": "bar"}],
                "outputs": [{"name": "result"}], "options": null,
            }));
            let choice = self.runner.choose(&target);
            assert!(matches!(choice, HookChoice::External(_)));
            self.runner.run(&target, &choice, timeout, &CancellationToken::new(), |_| {}).await
        }

        async fn result_of(&self, body: &str) -> Value {
            let run = self.run_hook(body, Duration::from_secs(10)).await.unwrap();
            serde_json::to_value(run.result).unwrap()
        }
    }

    #[tokio::test]
    async fn json_stdout_is_the_result_even_with_a_failing_exit() {
        let fixture = fixture();
        let result = fixture.result_of("echo '{\"deploy_status_code\": 0, \"result\": \"ok\"}'; exit 3").await;
        assert_eq!(result, json!({"deploy_status_code": 0, "result": "ok"}));
    }

    #[tokio::test]
    async fn non_json_stdout_is_wrapped_with_the_exit_code() {
        let fixture = fixture();
        let result = fixture.result_of("echo plain; echo problem >&2; exit 0").await;
        assert_eq!(result, json!({"deploy_stdout": "plain\n", "deploy_stderr": "problem\n", "deploy_status_code": 0}));
        let result = fixture.result_of("echo '[1, 2]'").await;
        assert_eq!(result["deploy_stdout"], json!("[1, 2]\n"));
    }

    #[tokio::test]
    async fn empty_stdout_is_success_only_with_exit_zero() {
        let fixture = fixture();
        assert_eq!(fixture.result_of("exit 0").await, json!({}));
        let result = fixture.result_of("echo broken >&2; exit 2").await;
        assert_eq!(result, json!({"deploy_stdout": "", "deploy_stderr": "broken\n", "deploy_status_code": 2}));
    }

    #[tokio::test]
    async fn signal_death_is_a_negative_status_code() {
        let fixture = fixture();
        let run = fixture.run_hook("kill -9 $$", Duration::from_secs(10)).await.unwrap();
        assert_eq!(run.ending, Ending::Signalled(9));
        assert_eq!(run.result.status_code(), Some(&json!(-9)));
    }

    #[tokio::test]
    async fn stdin_is_the_resolved_deployment_with_options_as_an_object() {
        let fixture = fixture();
        let result = fixture.result_of("cat").await;
        assert_eq!(
            result,
            json!({
                "id": "d1", "name": "deploy", "group": "puppet", "config": "x", "options": {},
                "inputs": [{"name": "foo", "type": "String", "value": "bar"}],
                "outputs": [{"name": "result", "error_output": false}],
            })
        );
    }

    #[tokio::test]
    async fn environment_is_clean_and_cwd_is_the_work_dir() {
        let fixture = fixture();
        let run = fixture.run_hook("cat >/dev/null; env; pwd", Duration::from_secs(10)).await.unwrap();
        let stdout = run.result.0["deploy_stdout"].as_str().unwrap().to_string();
        assert!(stdout.contains("PATH=/usr/local/bin:/usr/bin:/bin\n"), "{stdout}");
        assert!(!stdout.contains("CARGO"), "the agent's environment leaked: {stdout}");
        assert!(!stdout.contains("foo=bar"), "external hooks get inputs on stdin, not in env: {stdout}");
        let work_dir = fixture.runner.settings().work_dir.canonicalize().unwrap();
        assert!(stdout.ends_with(&format!("{}\n", work_dir.display())), "{stdout}");
    }

    #[tokio::test]
    async fn deadline_gives_status_124_and_says_why() {
        let fixture = fixture();
        let started = Instant::now();
        let run =
            fixture.run_hook("echo working; echo progress >&2; sleep 30 & wait", Duration::from_millis(300)).await;
        let run = run.unwrap();
        assert!(started.elapsed() < Duration::from_secs(2), "took {:?}", started.elapsed());
        assert_eq!(run.ending, Ending::TimedOut { after: Duration::from_millis(300) });
        assert_eq!(
            serde_json::to_value(run.result).unwrap(),
            json!({
                "deploy_stdout": "working\n",
                "deploy_stderr": "progress\nanneal: hook puppet timed out after 300 ms; process group killed",
                "deploy_status_code": TIMED_OUT_STATUS,
            })
        );
    }

    #[tokio::test]
    async fn truncated_stdout_is_wrapped_not_parsed() {
        let mut fixture = fixture();
        let mut settings = fixture.runner.settings().clone();
        settings.max_output_bytes = 16;
        fixture.runner = HookRunner::new(settings);
        let result = fixture.result_of("printf 'xxxxxxxxxxxxxxxxxxxx{\"a\": 1}'").await;
        assert_eq!(result["deploy_status_code"], json!(0));
        let stdout = result["deploy_stdout"].as_str().unwrap();
        assert!(stdout.starts_with("[anneal: output truncated, the first 12 bytes were dropped]\n"), "{stdout}");
        assert!(stdout.ends_with("xxxxxxxx{\"a\": 1}"), "{stdout}");
    }

    #[tokio::test]
    async fn a_hook_that_cannot_be_executed_is_a_spawn_error() {
        let fixture = fixture();
        let hook = fixture.hook_dir.join("salt");
        std::fs::write(&hook, "#!/bin/sh\necho hi\n").unwrap();
        let target = deployment(json!({"id": "d1", "group": "salt"}));
        let choice = fixture.runner.choose(&target);
        let error =
            fixture.runner.run(&target, &choice, Duration::from_secs(5), &CancellationToken::new(), |_| {}).await;
        assert!(matches!(error, Err(HookError::Spawn { path, .. }) if path == hook));
    }

    #[tokio::test]
    async fn shutdown_is_reported_as_cancelled() {
        let fixture = fixture();
        shell_script(&fixture.hook_dir, "puppet", "sleep 30");
        let target = deployment(json!({"id": "d1", "group": "puppet"}));
        let choice = fixture.runner.choose(&target);
        let shutdown = CancellationToken::new();
        shutdown.cancel();
        let error = fixture.runner.run(&target, &choice, Duration::from_secs(30), &shutdown, |_| {}).await;
        assert!(matches!(error, Err(HookError::Cancelled { group }) if group == "puppet"));
    }
}
