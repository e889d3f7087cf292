//! heat-agents' `script` hook (`hook-script.py`): the config is written to `<work_dir>/<id>`
//! (0700) and executed directly, each input becomes an environment variable,
//! `heat_outputs_path=<outputs_dir>/<id>`, and each declared output `X` is the whole file
//! `${heat_outputs_path}.X`. Unlike heat-agents it replaces the script file atomically (a longer
//! earlier script leaves no tail), removes stale output files first, accepts non-string input
//! values, and turns an exec failure into a failed result instead of a traceback. The script
//! runs through the caller's [`Tools`] like any tool, so it gets the same process group,
//! deadline and run marker; unlike the other hooks, the script is the hook process itself, so
//! its exit is the run's exit ([`Response::Executed`]).

use std::fs::{self, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use anneal_protocol::deployment::is_safe_id;
use anneal_protocol::env::{input_env_value, is_valid_env_name};
use anneal_protocol::{Deployment, pyjson};
use serde_json::{Map, Value};
use tracing::warn;

use crate::files::{is_safe_output_name, output_file, remove_if_present};
use crate::{HookError, Invocation, Response, Run, ToolError, ToolOutput, Tools, with_process_result};

/// What `anneal-agent hooks` says the hook does.
pub(crate) const SUMMARY: &str = "runs the config as an executable, inputs as environment variables";

const OUTPUTS_PATH_VARIABLE: &str = "heat_outputs_path";

/// `E2BIG` from `execve`: the environment (the inputs) is larger than the kernel takes.
const ARGUMENT_LIST_TOO_LONG: i32 = 7;

/// Temp names tried before giving up (one is taken only by a dead process of this pid).
const TEMP_ATTEMPTS: u32 = 8;

pub(crate) async fn run<T: Tools>(run: &mut Run<'_, T>) -> Result<Response, HookError> {
    let deployment = run.deployment;
    if !is_safe_id(&deployment.id) {
        return Err(HookError::UnsafeId { id: deployment.id.clone() });
    }
    let text = script_text(&deployment.config);
    let script = prepare(run, &text)?;
    if !text.starts_with("#!") {
        let problem = format!("{} does not start with #! (an interpreter line such as #!/bin/sh)", script.display());
        return Ok(not_executable(&problem));
    }
    let outputs_path = run.outputs_dir.join(&deployment.id);
    // The absolute path, as heat-agents runs `[fn]`: it is the script's `$0`.
    let program = std::path::absolute(&script).unwrap_or_else(|_| script.clone());
    let invocation = Invocation {
        program: program.to_string_lossy().into_owned(),
        args: Vec::new(),
        env: script_env(run, &outputs_path),
        cwd: run.cwd.to_path_buf(),
    };
    let output = match run.tools.run(invocation).await {
        Ok(output) => output,
        Err(ToolError::Spawn { source, .. }) => {
            let hint = if source.raw_os_error() == Some(ARGUMENT_LIST_TOO_LONG) {
                "the inputs are too large to pass as environment variables (the kernel's limit)"
            } else {
                "does it start with #! naming an installed interpreter?"
            };
            return Ok(not_executable(&format!("{}: {source}; {hint}", script.display())));
        }
        Err(error) => return Err(error.into()),
    };
    let result = with_process_result(run.read_outputs(&outputs_path), &output);
    Ok(Response::Executed { result, status_code: output.status_code })
}

/// Writes the script and removes output files left by an earlier run of the same id (a rerun
/// must not report outputs it did not write). The caller made both directories. Returns the
/// script's path.
fn prepare<T>(run: &Run<'_, T>, text: &str) -> Result<PathBuf, HookError> {
    let script = run.cwd.join(&run.deployment.id);
    // Not fsync'd: it runs at once, and any rerun writes it anew.
    replace_file(&script, text.as_bytes(), 0o700).map_err(|source| HookError::Io {
        action: "write script",
        path: script.clone(),
        source,
    })?;
    let outputs_path = run.outputs_dir.join(&run.deployment.id);
    for output in run.deployment.outputs.iter().filter(|output| is_safe_output_name(&output.name)) {
        remove_if_present(&output_file(&outputs_path, &output.name))?;
    }
    Ok(script)
}

/// Writes a new file beside `path` and renames it over `path`: a file being executed is never
/// opened for writing, and nothing of an earlier, longer script remains. The temp name is new
/// to this write (pid and a counter) and created exclusively, so no other write's file is
/// touched; a name left by a dead process of the same pid is skipped.
fn replace_file(path: &Path, contents: &[u8], mode: u32) -> io::Result<()> {
    static NEXT_TEMP: AtomicU64 = AtomicU64::new(0);
    let file_name = path.file_name().ok_or_else(|| io::Error::other("path has no file name"))?;
    let mut attempt = 0;
    let (temp, mut file) = loop {
        let mut temp_name = std::ffi::OsString::from(".");
        temp_name.push(file_name);
        temp_name.push(format!(".tmp.{}.{}", std::process::id(), NEXT_TEMP.fetch_add(1, Ordering::Relaxed)));
        let temp = path.with_file_name(temp_name);
        match OpenOptions::new().write(true).create_new(true).mode(mode).open(&temp) {
            Ok(file) => break (temp, file),
            Err(error) if error.kind() == io::ErrorKind::AlreadyExists && attempt < TEMP_ATTEMPTS => attempt += 1,
            Err(error) => return Err(error),
        }
    };
    // The mode whatever the umask: the script must be executable by its owner.
    let written = file
        .set_permissions(fs::Permissions::from_mode(mode))
        .and_then(|()| file.write_all(contents))
        .and_then(|()| fs::rename(&temp, path));
    if written.is_err() {
        let _ = fs::remove_file(&temp);
    }
    written
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
fn not_executable(problem: &str) -> Response {
    let stderr = format!("anneal: cannot run the config: {problem}").into_bytes();
    let output = ToolOutput { stdout: Vec::new(), stderr, status_code: 1 };
    Response::Executed { result: with_process_result(Map::new(), &output), status_code: 1 }
}

/// The hook's environment, then one variable per input (inputs win, as in heat-agents'
/// `env[name] = value`), then `heat_outputs_path`.
fn script_env<T>(run: &Run<'_, T>, outputs_path: &Path) -> Vec<(String, String)> {
    let deployment = run.deployment;
    let mut env = run.env.variables().to_vec();
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

/// The files a run of `deployment` may have left: its script in `work_dir` and its output files
/// in `outputs_dir` (the agent's journal retention removes them with the entry).
pub fn run_files(work_dir: &Path, outputs_dir: &Path, deployment: &Deployment) -> Vec<PathBuf> {
    if !is_safe_id(&deployment.id) {
        return Vec::new();
    }
    let outputs_path = outputs_dir.join(&deployment.id);
    let resolved = deployment.resolve_component().ok().flatten();
    let outputs = deployment.outputs.iter().chain(resolved.iter().flat_map(|resolved| resolved.outputs.iter()));
    let mut files = vec![work_dir.join(&deployment.id)];
    for output in outputs.filter(|output| is_safe_output_name(&output.name)) {
        let file = output_file(&outputs_path, &output.name);
        // A component's outputs repeat the deployment's own.
        if !files.contains(&file) {
            files.push(file);
        }
    }
    files
}

#[cfg(test)]
mod tests;
