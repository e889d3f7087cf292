//! The built-in `script` hook, with heat-agents' `hook-script.py` semantics (see
//! docs/hook-protocol.md): the config is written to `<work_dir>/<id>` (0700) and executed directly,
//! each input becomes an environment variable, `heat_outputs_path=<outputs_dir>/<id>`, and each
//! declared output `X` is the whole file `${heat_outputs_path}.X`. Unlike heat-agents it truncates
//! the script file, removes stale output files first, accepts non-string input values, and turns an
//! exec failure into a failed result instead of a traceback.

use std::ffi::OsString;
use std::fs::{self, File};
use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::time::Duration;

use anneal_protocol::deployment::is_safe_id;
use anneal_protocol::env::{input_env_value, is_valid_env_name};
use anneal_protocol::{Deployment, HookResult, OutputDecl, pyjson};
use serde_json::Value;
use tokio_util::sync::CancellationToken;
use tracing::warn;

use super::process::{ProcessError, run_process};
use super::{Ending, HookError, HookRun, HookSettings, Spawned, hook_error, timed_out_result};
use crate::fsutil::{Durability, ensure_private_dir, replace_file};

const OUTPUTS_PATH_VARIABLE: &str = "heat_outputs_path";

pub(super) async fn run(
    settings: &HookSettings,
    deployment: &Deployment,
    timeout: Duration,
    shutdown: &CancellationToken,
    on_spawn: impl FnOnce(Spawned) + Send,
) -> Result<HookRun, HookError> {
    if !is_safe_id(&deployment.id) {
        return Err(HookError::UnsafeId { id: deployment.id.clone() });
    }
    let text = script_text(&deployment.config);
    let script = prepare(settings, deployment, &text)?;
    let outputs_path = settings.outputs_dir.join(&deployment.id);
    if !text.starts_with("#!") {
        let problem = format!("{} does not start with #! (an interpreter line such as #!/bin/sh)", script.display());
        return Ok(not_executable(&problem));
    }
    let env = script_env(settings, deployment, &outputs_path);
    let spec = settings.process_spec(&deployment.id, &script, &env, timeout);
    let output = match run_process(spec, shutdown, on_spawn).await {
        Ok(output) => output,
        Err(ProcessError::Spawn { path, source }) => {
            // The script hook passes inputs as environment variables; the kernel caps their size.
            let hint = if source.raw_os_error() == Some(nix::errno::Errno::E2BIG as i32) {
                "the inputs are too large to pass as environment variables (the kernel's limit)"
            } else {
                "does it start with #! naming an installed interpreter?"
            };
            let problem = format!("{}: {source}; {hint}", path.display());
            return Ok(not_executable(&problem));
        }
        Err(error) => return Err(hook_error(error, &deployment.group)),
    };
    let result = match output.ending {
        Ending::TimedOut { after } => timed_out_result(&deployment.group, &output, after),
        Ending::Exited(_) | Ending::Signalled(_) => {
            let mut result = read_outputs(&outputs_path, &deployment.outputs, settings.max_output_bytes);
            let process = HookResult::from_process(&output.stdout.text(), &output.stderr.text(), output.status_code);
            result.0.extend(process.0);
            result
        }
    };
    Ok(HookRun { result, ending: output.ending, duration: output.duration, wrapped: false })
}

/// Creates the directories, writes the script and removes output files left by an earlier run
/// of the same id (a rerun must not report outputs it did not write). Returns the script path.
fn prepare(settings: &HookSettings, deployment: &Deployment, text: &str) -> Result<PathBuf, HookError> {
    for dir in [&settings.work_dir, &settings.outputs_dir] {
        ensure_private_dir(dir).map_err(|source| HookError::Io {
            action: "create directory",
            path: dir.clone(),
            source,
        })?;
    }
    let script = settings.work_dir.join(&deployment.id);
    // Atomic replacement also truncates: heat-agents' O_CREAT without O_TRUNC leaves the tail of a
    // longer earlier script behind. Not fsync'd: it runs at once, and any rerun writes it anew.
    replace_file(&script, text.as_bytes(), 0o700, Durability::Volatile).map_err(|source| HookError::Io {
        action: "write script",
        path: script.clone(),
        source,
    })?;
    let outputs_path = settings.outputs_dir.join(&deployment.id);
    for output in deployment.outputs.iter().filter(|output| is_safe_output_name(&output.name)) {
        let stale = output_file(&outputs_path, &output.name);
        match fs::remove_file(&stale) {
            Ok(()) => {}
            Err(error) if error.kind() == io::ErrorKind::NotFound => {}
            Err(source) => {
                return Err(HookError::Io { action: "remove stale output", path: stale, source });
            }
        }
    }
    Ok(script)
}

/// heat-agents writes `c.get('config', '')`; a non-string config (which cannot be a script) is
/// written as its JSON text so the failure names what was received.
fn script_text(config: &Value) -> String {
    match config {
        Value::String(text) => text.clone(),
        other => pyjson::dumps(other, false),
    }
}

/// The result heat-agents' traceback would have produced, but readable.
fn not_executable(problem: &str) -> HookRun {
    let stderr = format!("anneal: cannot run the config: {problem}");
    HookRun {
        result: HookResult::from_process("", &stderr, 1),
        ending: Ending::Exited(1),
        duration: Duration::ZERO,
        wrapped: false,
    }
}

/// base_env, then one variable per input (inputs win, as in heat-agents' `env[name] = value`),
/// then `heat_outputs_path`.
fn script_env(settings: &HookSettings, deployment: &Deployment, outputs_path: &Path) -> Vec<(String, String)> {
    let mut env = settings.base_env.clone();
    for input in &deployment.inputs {
        if !is_valid_env_name(&input.name) {
            warn!(deployment_id = %deployment.id, input = %input.name, "input name cannot be an environment variable; not passed to the script");
            continue;
        }
        let value = input_env_value(input.value.as_ref());
        if value.contains('\0') {
            warn!(deployment_id = %deployment.id, input = %input.name, "input value contains a NUL byte; not passed to the script");
            continue;
        }
        env.push((input.name.clone(), value));
    }
    env.push((OUTPUTS_PATH_VARIABLE.to_string(), outputs_path.to_string_lossy().into_owned()));
    env
}

/// The files a run of `deployment` may have left in the state directory: its script and its
/// output files (journal retention removes them with the entry; see docs/journal.md).
pub(super) fn run_files(settings: &HookSettings, deployment: &Deployment) -> Vec<PathBuf> {
    if !is_safe_id(&deployment.id) {
        return Vec::new();
    }
    let outputs_path = settings.outputs_dir.join(&deployment.id);
    let resolved = deployment.resolve_component().ok().flatten();
    let outputs = deployment.outputs.iter().chain(resolved.iter().flat_map(|resolved| resolved.outputs.iter()));
    let mut files = vec![settings.work_dir.join(&deployment.id)];
    files.extend(
        outputs
            .filter(|output| is_safe_output_name(&output.name))
            .map(|output| output_file(&outputs_path, &output.name)),
    );
    files
}

/// Output names that address a file next to `heat_outputs_path`, not elsewhere.
fn is_safe_output_name(name: &str) -> bool {
    !name.contains('/') && !name.contains('\0') && name != "." && name != ".."
}

fn output_file(outputs_path: &Path, name: &str) -> PathBuf {
    let mut file = OsString::from(outputs_path.as_os_str());
    file.push(".");
    file.push(name);
    PathBuf::from(file)
}

/// Each declared output whose file exists, whole and unstripped, in declaration order.
fn read_outputs(outputs_path: &Path, outputs: &[OutputDecl], limit: usize) -> HookResult {
    let mut result = HookResult::default();
    for output in outputs.iter().filter(|output| is_safe_output_name(&output.name)) {
        let path = output_file(outputs_path, &output.name);
        match read_limited(&path, limit) {
            Ok(Some(text)) => {
                result.0.insert(output.name.clone(), Value::String(text));
            }
            Ok(None) => {}
            Err(error) => {
                warn!(output = %output.name, path = %path.display(), %error, "cannot read output file; output omitted")
            }
        }
    }
    result
}

/// The file's text (invalid UTF-8 replaced), `None` when it does not exist. Only the first
/// `limit` bytes are kept: an output is signalled, and a runaway file must not exhaust memory.
fn read_limited(path: &Path, limit: usize) -> io::Result<Option<String>> {
    let file = match File::open(path) {
        Ok(file) => file,
        Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(error) => return Err(error),
    };
    let mut bytes = Vec::new();
    let read = file.take(limit as u64 + 1).read_to_end(&mut bytes)?;
    if read > limit {
        bytes.truncate(limit);
        warn!(path = %path.display(), limit, "output file is larger than the limit; keeping its start");
    }
    Ok(Some(String::from_utf8_lossy(&bytes).into_owned()))
}

#[cfg(test)]
mod tests;
