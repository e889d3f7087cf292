//! `anneal-agent hook-test GROUP < deployment.json`: runs one deployment through the hook for
//! GROUP exactly as the agent would (component resolution, lookup, environment, deadline) and
//! returns the signal payload, without touching the journal or sending anything. For hook authors
//! working without a cloud. `hook-test GROUP --check` (the `check` module) runs a built-in set of
//! deployments through the same path and reports protocol violations.

pub mod check;

mod cases;
mod render;

use std::path::{Path, PathBuf};
use std::time::Duration;

use anneal_protocol::signal::{MAX_SIGNAL_CHARS, signal_body};
use anneal_protocol::{Deployment, Outcome, evaluate};
use tokio_util::sync::CancellationToken;

use crate::config::{Config, DEFAULT_HOOKS_DIRS};
use crate::daemon;
use crate::hook::{DEFAULT_MAX_OUTPUT_BYTES, HookChoice, HookError, HookRun, HookRunner, HookSettings};

#[derive(Debug, thiserror::Error)]
pub enum HookTestError {
    #[error("cannot parse stdin: it is not a deployment JSON object")]
    BadDeployment(#[source] serde_json::Error),
    #[error("cannot resolve the component deployment")]
    Component(#[from] anneal_protocol::deployment::ComponentError),
    #[error("the component has no config for action {action}")]
    NoConfigForAction { action: String },
    #[error("{reason}")]
    NotRunnable { reason: String },
    #[error(transparent)]
    Hook(#[from] HookError),
    #[error("cannot create a private scratch directory in {parent}")]
    Scratch {
        parent: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// A new scratch directory in `parent` (the system's temp dir) for the script hook's files:
/// a fresh random name created exclusively, mode 0700, removed when dropped. Never a directory
/// that already exists, which someone else could have prepared (with symbolic links in it).
pub fn scratch_dir(parent: &Path) -> Result<tempfile::TempDir, HookTestError> {
    tempfile::Builder::new()
        .prefix("anneal-hook-test-")
        .permissions(std::os::unix::fs::PermissionsExt::from_mode(0o700))
        .tempdir_in(parent)
        .map_err(|source| HookTestError::Scratch { parent: parent.to_path_buf(), source })
}

/// What `hook-test` prints: the exact signal body, and Heat's verdict on it.
#[derive(Debug, Clone)]
pub struct HookTestReport {
    pub signal_body: String,
    pub outcome: Outcome,
}

/// How long a hook may run under `hook-test` without a config file (nor a timeout of its own).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(3600);

/// The hook settings and default deadline `hook-test` runs with: `config`'s hooks dirs, hook
/// environment and hook timeout when there is a config, else the defaults; scratch dirs under
/// `scratch` for the script hook's files either way, and no run markers (hook-test runs outside
/// the journal).
pub fn settings(config: Option<&Config>, scratch: &Path, base_env: Vec<(String, String)>) -> (HookSettings, Duration) {
    match config {
        Some(config) => {
            let settings = HookSettings {
                work_dir: scratch.join("script"),
                outputs_dir: scratch.join("outputs"),
                run_markers_dir: None,
                ..daemon::hook_settings(config, base_env)
            };
            (settings, config.agent.hook_timeout)
        }
        None => (default_settings(scratch, base_env), DEFAULT_TIMEOUT),
    }
}

/// Settings without a config file: the default hooks dirs, scratch dirs under `scratch`.
fn default_settings(scratch: &Path, base_env: Vec<(String, String)>) -> HookSettings {
    HookSettings {
        hooks_dirs: DEFAULT_HOOKS_DIRS.iter().map(PathBuf::from).collect(),
        work_dir: scratch.join("script"),
        outputs_dir: scratch.join("outputs"),
        base_env,
        kill_grace: Duration::from_secs(10),
        max_output_bytes: DEFAULT_MAX_OUTPUT_BYTES,
        run_markers_dir: None,
    }
}

/// Runs `deployment_json` with its group set to `group`.
pub async fn hook_test(
    group: &str,
    deployment_json: &str,
    settings: HookSettings,
    default_timeout: Duration,
    shutdown: &CancellationToken,
) -> Result<HookTestReport, HookTestError> {
    let deployment: Deployment = serde_json::from_str(deployment_json).map_err(HookTestError::BadDeployment)?;
    let runner = HookRunner::new(settings);
    let ran = run_as_agent(&runner, deployment, group, default_timeout, shutdown).await?;
    let outcome = evaluate(&ran.run.result, &ran.deployment.outputs).outcome;
    Ok(HookTestReport { signal_body: signal_body(&ran.run.result, MAX_SIGNAL_CHARS), outcome })
}

/// One deployment run the way the agent runs it.
#[derive(Debug, Clone)]
pub(crate) struct Ran {
    /// The deployment the hook got (component-resolved).
    pub(crate) deployment: Deployment,
    pub(crate) choice: HookChoice,
    pub(crate) run: HookRun,
}

/// Runs `deployment` with its group set to `group` through `runner`: component resolution, the
/// agent's hook choice, and its deadline (`options.timeout`, else `default_timeout`). Shared by
/// `hook-test` and `hook-test --check` so both show what the agent itself would do.
pub(crate) async fn run_as_agent(
    runner: &HookRunner,
    mut deployment: Deployment,
    group: &str,
    default_timeout: Duration,
    shutdown: &CancellationToken,
) -> Result<Ran, HookTestError> {
    deployment.group = group.to_string();
    let Some(resolved) = deployment.resolve_component()? else {
        let action = deployment.input_str("deploy_action").unwrap_or("(none)").to_string();
        return Err(HookTestError::NoConfigForAction { action });
    };
    let choice = runner.choose(&resolved);
    if let Some(reason) = not_runnable(&choice) {
        return Err(HookTestError::NotRunnable { reason });
    }
    let timeout = resolved.options.timeout.map_or(default_timeout, Duration::from_secs);
    let run = runner.run(&resolved, &choice, timeout, shutdown, |_| {}).await?;
    Ok(Ran { deployment: resolved, choice, run })
}

/// Why `choice` cannot be run, in the words `hook-test` prints; `None` when it can.
fn not_runnable(choice: &HookChoice) -> Option<String> {
    match choice {
        HookChoice::Skip { reason } => Some(reason.clone()),
        HookChoice::Missing { group, searched } => {
            let dirs: Vec<String> = searched.iter().map(|dir| dir.display().to_string()).collect();
            Some(format!("no hook for group {group} in {}", dirs.join(", ")))
        }
        HookChoice::Unsafe { group, problem } => Some(format!("cannot run the hook for group {group}: {problem}")),
        HookChoice::Builtin(_) | HookChoice::External(_) => None,
    }
}
