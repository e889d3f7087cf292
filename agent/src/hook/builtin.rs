//! Built-in hooks (anneal-hooks: script, ansible, puppet, json-file, ...): the agent's side of
//! the [`Tools`] seam. Each tool a built-in asks for runs through `process` like
//! any hook (its own process group, the hook's remaining deadline, the run marker in its
//! environment, recorded as the run's process when it starts), so a built-in obeys the same
//! contracts as an external hook. What the built-in answers becomes the result heat-config would
//! have made of the same hook's stdout.

use std::ffi::OsString;
use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anneal_hooks::{Builtin, Context, HookEnv, Invocation, Response, ToolError, ToolOutput, Tools};
use anneal_protocol::{Deployment, HookResult};
use tokio_util::sync::CancellationToken;
use tracing::warn;

use super::process::{ProcessError, run_process};
use super::{Ending, HookError, HookRun, HookSettings, Spawned, timed_out_text};
use crate::fsutil::ensure_private_dir;

/// One run of a built-in: which, on what, with which metadata, under which deadline.
pub(super) struct Call<'a> {
    pub(super) builtin: Builtin,
    pub(super) deployment: &'a Deployment,
    pub(super) metadata: Option<&'a serde_json::Value>,
    pub(super) timeout: Duration,
}

pub(super) async fn run(
    settings: &HookSettings,
    call: Call<'_>,
    shutdown: &CancellationToken,
    mut on_spawn: impl FnMut(Spawned) + Send,
) -> Result<HookRun, HookError> {
    let Call { builtin, deployment, metadata, timeout } = call;
    // Only script keeps files in outputs_dir (the others' are in their HEAT_*_OUTPUTS dirs).
    let outputs_dir = (builtin == Builtin::Script).then_some(&settings.outputs_dir);
    for dir in std::iter::once(&settings.work_dir).chain(outputs_dir) {
        ensure_private_dir(dir).map_err(|source| HookError::Io {
            action: "create directory",
            path: dir.clone(),
            source,
        })?;
    }
    let started = Instant::now();
    let env = HookEnv::new(settings.base_env.clone());
    let context = Context {
        env: &env,
        cwd: &settings.work_dir,
        outputs_dir: &settings.outputs_dir,
        max_output_bytes: settings.max_output_bytes,
        metadata,
    };
    let mut tools = AgentTools {
        settings,
        deployment_id: &deployment.id,
        deadline: started.checked_add(timeout),
        timeout,
        shutdown,
        on_spawn: &mut on_spawn,
    };
    let answer = builtin.run(deployment, &context, &mut tools).await;
    let (result, ending) = match answer {
        Ok(Response::Printed(map)) => (HookResult(map), Ending::Exited(0)),
        Ok(Response::Executed { result, status_code }) => (HookResult(result), ending_of(status_code)),
        Ok(Response::Silent { reason }) => {
            // heat-config signals an empty stdout as `{}`, a success; say why in the log.
            warn!(deployment_id = %deployment.id, hook = builtin.group(), %reason, "hook answered nothing");
            (HookResult::default(), Ending::Exited(0))
        }
        Err(anneal_hooks::HookError::Tool(ToolError::TimedOut { output, after, .. })) => {
            let stderr = timed_out_text(&deployment.group, &output.stderr_text(), after);
            (
                HookResult::from_process(&output.stdout_text(), &stderr, super::TIMED_OUT_STATUS),
                Ending::TimedOut { after },
            )
        }
        Err(anneal_hooks::HookError::Tool(ToolError::Cancelled { .. })) => {
            return Err(HookError::Cancelled { group: deployment.group.clone() });
        }
        Err(anneal_hooks::HookError::UnsafeId { id }) => return Err(HookError::UnsafeId { id }),
        // The script hook's own files (its script, stale outputs): the run could not happen,
        // which the executor reports as such rather than as the script failing.
        Err(anneal_hooks::HookError::Io { action, path, source }) if builtin == Builtin::Script => {
            return Err(HookError::Io { action, path, source });
        }
        Err(error) => {
            // Where heat-agents' hook would end in a traceback (exit 1, signalled as status 1).
            let stderr = format!("anneal: hook {}: {}", deployment.group, crate::error_chain(&error));
            (HookResult::from_process("", &stderr, 1), Ending::Exited(1))
        }
    };
    Ok(HookRun { result, ending, duration: started.elapsed(), wrapped: false })
}

/// How a process that ran as the hook itself ended, from its `returncode`.
fn ending_of(status_code: i64) -> Ending {
    match i32::try_from(status_code) {
        Ok(code) if code < 0 => Ending::Signalled(-code),
        Ok(code) => Ending::Exited(code),
        Err(_) => Ending::Exited(1),
    }
}

/// Runs a built-in's tools under the hook's deadline.
/// `on_spawn` is a trait object so that every hook's code is compiled once, not once per caller's
/// closure type (the executor's and hook-test's): the built-ins are most of the agent's code.
struct AgentTools<'a> {
    settings: &'a HookSettings,
    deployment_id: &'a str,
    /// `None` when the timeout is beyond what the clock can add (metadata may say `u64::MAX`).
    deadline: Option<Instant>,
    timeout: Duration,
    shutdown: &'a CancellationToken,
    on_spawn: &'a mut (dyn FnMut(Spawned) + Send),
}

impl Tools for AgentTools<'_> {
    async fn run(&mut self, invocation: Invocation) -> Result<ToolOutput, ToolError> {
        self.run_tool(invocation, None).await
    }

    async fn run_with_stdin(&mut self, invocation: Invocation, stdin: Vec<u8>) -> Result<ToolOutput, ToolError> {
        self.run_tool(invocation, Some(stdin)).await
    }
}

impl AgentTools<'_> {
    async fn run_tool(&mut self, invocation: Invocation, stdin: Option<Vec<u8>>) -> Result<ToolOutput, ToolError> {
        let program_name = invocation.program.clone();
        let Some(program) = resolve(&invocation.program, &invocation.env, &invocation.cwd) else {
            return Err(ToolError::Spawn { program: program_name, source: io::Error::from_raw_os_error(2) });
        };
        let remaining = match self.deadline {
            Some(deadline) => deadline.saturating_duration_since(Instant::now()),
            None => self.timeout,
        };
        if remaining.is_zero() {
            return Err(ToolError::TimedOut {
                program: program_name,
                output: ToolOutput::default(),
                after: self.timeout,
            });
        }
        let args: Vec<OsString> = invocation.args.iter().map(OsString::from).collect();
        let mut spec = self.settings.process_spec(self.deployment_id, &program, &invocation.env, remaining);
        spec.args = &args;
        spec.cwd = &invocation.cwd;
        spec.stdin = stdin;
        match run_process(spec, self.shutdown, &mut *self.on_spawn).await {
            Ok(output) => {
                let tool_output = ToolOutput {
                    stdout: output.stdout.bytes,
                    stderr: output.stderr.bytes,
                    status_code: output.status_code,
                };
                match output.ending {
                    Ending::TimedOut { .. } => {
                        Err(ToolError::TimedOut { program: program_name, output: tool_output, after: self.timeout })
                    }
                    Ending::Exited(_) | Ending::Signalled(_) => Ok(tool_output),
                }
            }
            Err(ProcessError::Spawn { source, .. }) => Err(ToolError::Spawn { program: program_name, source }),
            Err(ProcessError::Cancelled { .. }) => Err(ToolError::Cancelled { program: program_name }),
            Err(ProcessError::Wait { source, .. }) => Err(ToolError::Wait { program: program_name, source }),
        }
    }
}

/// The file `program` names, as Python's `Popen` finds it: a name with a `/` is a path (relative
/// to the tool's directory), a bare name the first executable file of that name in the tool's
/// `PATH`.
fn resolve(program: &str, env: &[(String, String)], cwd: &Path) -> Option<PathBuf> {
    if program.is_empty() {
        return None;
    }
    if program.contains('/') {
        return Some(cwd.join(program));
    }
    let path = env.iter().rev().find(|(key, _)| key == "PATH").map_or("/usr/bin:/bin", |(_, value)| value.as_str());
    path.split(':')
        .map(|dir| Path::new(if dir.is_empty() { "." } else { dir }).join(program))
        .find(|candidate| anneal_hooks::is_executable(candidate))
}

#[cfg(test)]
mod script_tests;
#[cfg(test)]
mod tests;
