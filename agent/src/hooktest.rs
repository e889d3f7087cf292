//! `anneal-agent hook-test GROUP < deployment.json`: runs one deployment through the hook for
//! GROUP exactly as the agent would (component resolution, lookup, environment, deadline) and
//! returns the signal payload, without touching the journal or sending anything. For hook authors
//! working without a cloud.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anneal_protocol::signal::{MAX_SIGNAL_CHARS, signal_body};
use anneal_protocol::{Deployment, Outcome, evaluate};
use tokio_util::sync::CancellationToken;

use crate::config::{Config, DEFAULT_HOOKS_DIRS};
use crate::daemon;
use crate::hook::{DEFAULT_MAX_OUTPUT_BYTES, HookChoice, HookError, HookRunner, HookSettings};

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
    let mut deployment: Deployment = serde_json::from_str(deployment_json).map_err(HookTestError::BadDeployment)?;
    deployment.group = group.to_string();
    let Some(resolved) = deployment.resolve_component()? else {
        let action = deployment.input_str("deploy_action").unwrap_or("(none)").to_string();
        return Err(HookTestError::NoConfigForAction { action });
    };
    let runner = HookRunner::new(settings);
    let choice = runner.choose(&resolved);
    match &choice {
        HookChoice::Skip { reason } => return Err(HookTestError::NotRunnable { reason: reason.clone() }),
        HookChoice::Missing { group, searched } => {
            let dirs: Vec<String> = searched.iter().map(|dir| dir.display().to_string()).collect();
            let reason = format!("no hook for group {group} in {}", dirs.join(", "));
            return Err(HookTestError::NotRunnable { reason });
        }
        HookChoice::Unsafe { group, problem } => {
            let reason = format!("cannot run the hook for group {group}: {problem}");
            return Err(HookTestError::NotRunnable { reason });
        }
        HookChoice::BuiltinScript | HookChoice::Builtin(_) | HookChoice::External(_) => {}
    }
    let timeout = resolved.options.timeout.map_or(default_timeout, Duration::from_secs);
    let run = runner.run(&resolved, &choice, timeout, shutdown, |_| {}).await?;
    let outcome = evaluate(&run.result, &resolved.outputs).outcome;
    Ok(HookTestReport { signal_body: signal_body(&run.result, MAX_SIGNAL_CHARS), outcome })
}
