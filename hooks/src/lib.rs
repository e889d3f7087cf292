//! heat-agents' hooks, natively: one module per hook of heat-agents 13.0.0, each doing what that
//! hook's `hook-<name>.py` does for the same deployment (the same tool command line, files, modes,
//! environment and result), so an image needs no Python to run `group: ansible`, `puppet`,
//! `json-file`, ... deployments. This crate starts no process: every tool it runs goes through
//! the [`Tools`] the caller passes in (the agent's runner, with process groups and deadlines; a
//! recorder in tests). Its settings come from the hook's environment (`HEAT_ANSIBLE_CMD`, ...),
//! read from the variables the agent gives hooks, as heat-agents' hooks read their own.
//!
//! `script` is here too: it hands the config itself to [`Tools`] as the program to run.

mod ansible;
mod apply_config;
mod cfn_init;
mod chef;
mod docker_cmd;
mod docker_compose;
mod env;
mod files;
mod hiera;
mod json_file;
mod kubelet;
mod puppet;
mod pyliteral;
mod pyyaml;
mod salt;
mod script;
mod tools;

use std::path::{Path, PathBuf};

use anneal_protocol::Deployment;
use serde_json::{Map, Value};

pub use env::HookEnv;
pub use files::is_executable;
pub use script::run_files as script_run_files;
pub use tools::{Invocation, ToolError, ToolOutput, Tools};

/// The hooks built into the agent, by the `group` that selects each.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Builtin {
    Script,
    Ansible,
    ApplyConfig,
    CfnInit,
    Chef,
    DockerCmd,
    DockerCompose,
    Hiera,
    JsonFile,
    Kubelet,
    Puppet,
    Salt,
}

impl Builtin {
    /// Every built-in, in the order `anneal-agent hooks` lists them.
    pub const ALL: [Builtin; 12] = [
        Builtin::Script,
        Builtin::Ansible,
        Builtin::ApplyConfig,
        Builtin::CfnInit,
        Builtin::Chef,
        Builtin::DockerCmd,
        Builtin::DockerCompose,
        Builtin::Hiera,
        Builtin::JsonFile,
        Builtin::Kubelet,
        Builtin::Puppet,
        Builtin::Salt,
    ];

    /// The built-in for a deployment's `group` (exact, as heat-config's hook file names are).
    pub fn from_group(group: &str) -> Option<Builtin> {
        Builtin::ALL.into_iter().find(|builtin| builtin.group() == group)
    }

    /// The group, which is also the name of heat-agents' hook file.
    pub fn group(self) -> &'static str {
        match self {
            Builtin::Script => "script",
            Builtin::Ansible => "ansible",
            Builtin::ApplyConfig => "apply-config",
            Builtin::CfnInit => "cfn-init",
            Builtin::Chef => "chef",
            Builtin::DockerCmd => "docker-cmd",
            Builtin::DockerCompose => "docker-compose",
            Builtin::Hiera => "hiera",
            Builtin::JsonFile => "json-file",
            Builtin::Kubelet => "kubelet",
            Builtin::Puppet => "puppet",
            Builtin::Salt => "salt",
        }
    }

    /// What the hook runs, for `anneal-agent hooks`.
    pub fn summary(self) -> &'static str {
        match self {
            Builtin::Script => script::SUMMARY,
            Builtin::Ansible => "ansible-playbook on the config as a playbook ($HEAT_ANSIBLE_CMD)",
            Builtin::ApplyConfig => {
                "os-apply-config over the collected metadata ($HEAT_APPLY_CONFIG_CMD); rendered natively without it"
            }
            Builtin::CfnInit => "cfn-init on the config as AWS::CloudFormation::Init ($HEAT_CFN_INIT_CMD)",
            Builtin::Chef => "chef-client in local mode with the config as run list",
            Builtin::DockerCmd => docker_cmd::SUMMARY,
            Builtin::DockerCompose => "docker-compose up on the config as docker-compose.yml",
            Builtin::Hiera => "writes hiera.yaml and hiera data files",
            Builtin::JsonFile => "writes each path: data of the config as a JSON file",
            Builtin::Kubelet => kubelet::SUMMARY,
            Builtin::Puppet => "puppet apply on the config as a manifest ($HEAT_PUPPET_CMD)",
            Builtin::Salt => salt::SUMMARY,
        }
    }

    /// Runs `deployment` (component-resolved) the way heat-agents' hook of this name does.
    pub async fn run<T: Tools>(
        self,
        deployment: &Deployment,
        context: &Context<'_>,
        tools: &mut T,
    ) -> Result<Response, HookError> {
        let mut run = Run {
            deployment,
            env: context.env,
            cwd: context.cwd,
            outputs_dir: context.outputs_dir,
            max_output_bytes: context.max_output_bytes,
            metadata: context.metadata,
            tools,
        };
        match self {
            Builtin::Script => script::run(&mut run).await,
            Builtin::Ansible => ansible::run(&mut run).await,
            Builtin::ApplyConfig => apply_config::run(&mut run).await,
            Builtin::CfnInit => cfn_init::run(&mut run).await,
            Builtin::Chef => chef::run(&mut run).await,
            Builtin::DockerCmd => docker_cmd::run(&mut run).await,
            Builtin::DockerCompose => docker_compose::run(&mut run).await,
            Builtin::Hiera => hiera::run(&mut run).await,
            Builtin::JsonFile => json_file::run(&mut run),
            Builtin::Kubelet => kubelet::run(&mut run).await,
            Builtin::Puppet => puppet::run(&mut run).await,
            Builtin::Salt => salt::run(&mut run).await,
        }
    }
}

/// What every built-in run gets from the agent.
#[derive(Debug, Clone, Copy)]
pub struct Context<'a> {
    /// The hook's environment (heat-agents' hooks' `os.environ`).
    pub env: &'a HookEnv,
    /// The directory the hook runs in (an external hook's cwd); tools of hooks that do not
    /// change directory run here.
    pub cwd: &'a Path,
    /// Where `script` keeps its `heat_outputs_path` files (the caller made it, like `cwd`).
    pub outputs_dir: &'a Path,
    /// Per output file read back.
    pub max_output_bytes: usize,
    /// The server's metadata as os-collect-config would have left it for os-apply-config: every
    /// source's document deep-merged in config order (`None` where there is none, e.g. hook-test).
    pub metadata: Option<&'a serde_json::Value>,
}

/// What a hook answered: what heat-agents' hook prints on stdout, which the agent signals.
#[derive(Debug, Clone, PartialEq)]
pub enum Response {
    /// One JSON object (`deploy_stdout`, ..., declared outputs), in the hook's key order.
    Printed(Map<String, Value>),
    /// Nothing on stdout (heat-agents' hook returned early); heat-config signals `{}`, a success.
    /// `reason` is what the hook logged.
    Silent { reason: String },
    /// The config ran as the hook process itself (`script`): `result` as heat-config would
    /// record it, `status_code` the process's exit (negated signal number when killed).
    Executed { result: Map<String, Value>, status_code: i64 },
}

/// A run that could not finish the way heat-agents' hook does (where heat-agents' hook would
/// end in a traceback, exit 1, which heat-config signals as `deploy_status_code` 1).
#[derive(Debug, thiserror::Error)]
pub enum HookError {
    #[error("cannot {action} {path}")]
    Io { action: &'static str, path: PathBuf, source: std::io::Error },
    #[error("{reason}")]
    BadDeployment { reason: String },
    /// An id that cannot be a file name (the agent's journal refuses these before any run).
    #[error("deployment id {id:?} cannot be used as a file name")]
    UnsafeId { id: String },
    #[error(transparent)]
    Tool(#[from] ToolError),
}

/// One hook run: the deployment, the hook's environment and the tool runner.
pub(crate) struct Run<'a, T> {
    pub(crate) deployment: &'a Deployment,
    pub(crate) env: &'a HookEnv,
    pub(crate) cwd: &'a Path,
    pub(crate) outputs_dir: &'a Path,
    /// Per output file read back (the agent's `max_output_bytes`).
    pub(crate) max_output_bytes: usize,
    pub(crate) metadata: Option<&'a serde_json::Value>,
    pub(crate) tools: &'a mut T,
}

impl<T> Run<'_, T> {
    /// The declared outputs read from `<outputs_path>.<name>` files.
    pub(crate) fn read_outputs(&self, outputs_path: &Path) -> Map<String, Value> {
        files::read_outputs(outputs_path, &self.deployment.outputs, self.max_output_bytes)
    }

    /// `c['options'].get(name)`.
    pub(crate) fn option(&self, name: &str) -> Option<&Value> {
        self.deployment.options.extra.get(name)
    }

    /// A string option, `None` when absent or falsy (heat-agents tests `if tags:`); a truthy
    /// non-string (which heat-agents would pass to `Popen` and crash on) is an error naming it.
    pub(crate) fn string_option(&self, name: &str) -> Result<Option<String>, HookError> {
        match self.option(name) {
            Some(value) if !anneal_protocol::pyjson::is_truthy(value) => Ok(None),
            None => Ok(None),
            Some(Value::String(text)) => Ok(Some(text.clone())),
            Some(other) => Err(HookError::BadDeployment {
                reason: format!("option {name} must be a string, not {}", anneal_protocol::pyjson::dumps(other, false)),
            }),
        }
    }

    /// `input.get('value', '')` of each input, in order.
    pub(crate) fn input_values(&self) -> impl Iterator<Item = (&str, Value)> {
        self.deployment
            .inputs
            .iter()
            .map(|input| (input.name.as_str(), input.value.clone().unwrap_or_else(|| Value::String(String::new()))))
    }

    /// The config text (`c.get('config', '')`); `None` for a config that is not a string.
    pub(crate) fn config_text(&self) -> Option<&str> {
        match &self.deployment.config {
            Value::String(text) => Some(text),
            Value::Null => Some(""),
            _ => None,
        }
    }
}

/// `hostname -f`, as puppet and chef run it (in `cwd`, with the hook's environment).
pub(crate) async fn run_hostname_f<T: Tools>(run: &mut Run<'_, T>, cwd: &Path) -> Result<ToolOutput, ToolError> {
    let invocation = Invocation {
        program: "hostname".into(),
        args: vec!["-f".into()],
        env: run.env.variables().to_vec(),
        cwd: cwd.to_path_buf(),
    };
    run.tools.run(invocation).await
}

/// puppet's `get_hostname_f`: the trimmed name, `None` when `hostname -f` fails.
pub(crate) async fn hostname_f<T: Tools>(run: &mut Run<'_, T>, cwd: &Path) -> Result<Option<String>, HookError> {
    let output = run_hostname_f(run, cwd).await?;
    if output.status_code != 0 {
        return Ok(None);
    }
    Ok(Some(String::from_utf8_lossy(output.stdout.trim_ascii()).into_owned()))
}

/// `{deploy_stdout, deploy_stderr, deploy_status_code}` from a tool's output, after any outputs
/// already in `response` (heat-agents' `response.update(...)`).
pub(crate) fn with_process_result(mut response: Map<String, Value>, output: &ToolOutput) -> Map<String, Value> {
    response.insert("deploy_stdout".into(), Value::String(output.stdout_text()));
    response.insert("deploy_stderr".into(), Value::String(output.stderr_text()));
    response.insert("deploy_status_code".into(), Value::from(output.status_code));
    response
}

/// The response of a hook that only writes files: empty output, status 0.
pub(crate) fn success() -> Map<String, Value> {
    let mut response = Map::new();
    response.insert("deploy_stdout".into(), Value::String(String::new()));
    response.insert("deploy_stderr".into(), Value::String(String::new()));
    response.insert("deploy_status_code".into(), Value::from(0));
    response
}

#[cfg(test)]
pub(crate) mod testing;
#[cfg(test)]
mod tests;
