//! heat-agents' `salt` hook: the config is a Salt state, written to `<working>/<id>.sls` (a map
//! config as PyYAML's `safe_dump` writes it) and applied by `salt-call --local state.sls <id>` with
//! the working dir as the only file root, as heat-agents applies it through salt's Python API
//! (`salt.cli.caller.Caller` with `file_roots={'base': [working]}`, `file_client=local`). The
//! return is reported as heat-agents reports it: its YAML in `deploy_stdout` (in `deploy_stderr`
//! when a state failed, `deploy_stdout` then null), `deploy_status_code` the run's retcode, 0 when
//! every state's result is true; each declared output is `ret.get(name)`.
//!
//! Where the command line differs from the Python API:
//! - heat-agents sets every input as a minion option (`opts[name] = value`, read by states as
//!   `{{ opts['name'] }}`). salt-call has no flag for arbitrary options, and inputs on its command
//!   line would show in `ps`, so salt-call runs with `--config-dir=<working>/<id>.minion`, whose
//!   `minion` file includes the real minion config (`SALT_MINION_CONFIG`, default
//!   `/etc/salt/minion`), its `minion.d/*.conf`, then `inputs.conf` (the inputs, mode 0600):
//!   salt applies later includes over earlier ones, so inputs win as in heat-agents. Unlike
//!   heat-agents, inputs go through salt's option processing (an input named like a path option,
//!   e.g. `cachedir`, is joined to `root_dir`). The real config dir's `grains` and `minion_id`
//!   are linked in, since salt reads them next to the config file.
//! - `ret` holds only what salt-call prints: an output named `return` is the return and
//!   `retcode` the retcode; any other name (heat-agents' `jid`, ...) is null.
//! - A return that is not a map of states (salt's list of render errors) is a failure reported
//!   in `deploy_stderr` with its retcode; heat-agents crashes on it (`list` has no `items`).
//! - A null config writes an empty state file (heat-agents crashes writing `None`).
//!
//! Settings: `HEAT_SALT_WORKING`, `SALT_MINION_CONFIG` as heat-agents; `HEAT_SALT_CMD` (anneal's:
//! the salt-call to run, default `salt-call`).

use std::path::{Path, PathBuf};

use anneal_protocol::pyjson::{self, is_truthy};
use serde_json::{Map, Value};

use crate::files::{prepare_dir, write_file};
use crate::pyyaml;
use crate::{HookError, Invocation, Response, Run, ToolOutput, Tools};

pub(crate) const SUMMARY: &str = "salt-call --local state.sls on the config as a Salt state ($HEAT_SALT_CMD)";

pub(crate) async fn run<T: Tools>(run: &mut Run<'_, T>) -> Result<Response, HookError> {
    let working = PathBuf::from(run.env.get_or("HEAT_SALT_WORKING", "/var/lib/heat-config/heat-config-salt"));
    let minion_config = PathBuf::from(run.env.get_or("SALT_MINION_CONFIG", "/etc/salt/minion"));
    prepare_dir(&working, 0o700)?;
    let id = run.deployment.id.clone();
    let state = match &run.deployment.config {
        Value::Object(_) => pyyaml::safe_dump(&run.deployment.config),
        Value::String(text) => text.clone(),
        Value::Null => String::new(),
        other => {
            let reason =
                format!("config must be a Salt state (a string or a map), not {}", pyjson::dumps(other, false));
            return Err(HookError::BadDeployment { reason });
        }
    };
    write_file(&working.join(format!("{id}.sls")), state.as_bytes(), 0o700)?;
    let config_dir = working.join(format!("{id}.minion"));
    write_config_dir(run, &config_dir, &minion_config)?;
    let invocation = Invocation {
        program: run.env.get_or("HEAT_SALT_CMD", "salt-call").to_string(),
        args: vec![
            "--local".into(),
            format!("--config-dir={}", config_dir.display()),
            format!("--file-root={}", working.display()),
            "--out=json".into(),
            "--retcode-passthrough".into(),
            "state.sls".into(),
            id,
        ],
        env: run.env.variables().to_vec(),
        cwd: working,
    };
    let output = run.tools.run(invocation).await?;
    let ret = salt_return(&output)?;
    Ok(Response::Printed(respond(run, ret, output.status_code)))
}

/// The config dir salt-call reads: `minion` including the real config, its `minion.d`, then the
/// inputs as options; the real config dir's `grains` and `minion_id` linked in.
fn write_config_dir<T>(run: &Run<'_, T>, dir: &Path, minion_config: &Path) -> Result<(), HookError> {
    prepare_dir(dir, 0o700)?;
    let real_dir = minion_config.parent().unwrap_or(Path::new("/"));
    let inputs_file = dir.join("inputs.conf");
    let include = [minion_config.to_path_buf(), real_dir.join("minion.d").join("*.conf"), inputs_file.clone()];
    let include: Vec<Value> = include.iter().map(|path| Value::String(path.to_string_lossy().into_owned())).collect();
    let mut minion = Map::new();
    minion.insert("include".into(), Value::Array(include));
    write_file(&dir.join("minion"), pyyaml::safe_dump(&Value::Object(minion)).as_bytes(), 0o600)?;
    let inputs: Map<String, Value> = run.input_values().map(|(name, value)| (name.to_string(), value)).collect();
    write_file(&inputs_file, pyyaml::safe_dump(&Value::Object(inputs)).as_bytes(), 0o600)?;
    for name in ["grains", "minion_id"] {
        link(&real_dir.join(name), &dir.join(name))?;
    }
    Ok(())
}

/// `link` → `target` when the target exists; a stale link from an earlier run goes either way.
fn link(target: &Path, link: &Path) -> Result<(), HookError> {
    let io_error = |action, source| HookError::Io { action, path: link.to_path_buf(), source };
    if link.symlink_metadata().is_ok() {
        std::fs::remove_file(link).map_err(|source| io_error("remove", source))?;
    }
    if target.exists() {
        std::os::unix::fs::symlink(target, link).map_err(|source| io_error("link", source))?;
    }
    Ok(())
}

/// The `local` value of salt-call's JSON (heat-agents' `ret['return']`). Without one, salt-call
/// failed before running the state (where heat-agents' `caller.call()` raises).
fn salt_return(output: &ToolOutput) -> Result<Value, HookError> {
    let parsed: Option<Value> = serde_json::from_slice(&output.stdout).ok();
    match parsed {
        Some(Value::Object(mut document)) if document.contains_key("local") => {
            Ok(document.remove("local").unwrap_or(Value::Null))
        }
        _ => Err(HookError::BadDeployment {
            reason: format!(
                "salt-call exited {} without a JSON result: {}",
                output.status_code,
                output.stderr_text().trim_end()
            ),
        }),
    }
}

/// heat-agents' response: the outputs (`ret.get(name)`), then stdout, stderr and the retcode.
fn respond<T>(run: &Run<'_, T>, ret: Value, retcode: i64) -> Map<String, Value> {
    let text = Value::String(pyyaml::safe_dump(&ret));
    // Salt's retcode is not always sane (heat-agents' comment): a run whose every state
    // succeeded is a success whatever the retcode.
    let succeeded = match &ret {
        Value::Object(states) => states.values().all(|data| data.get("result").is_some_and(is_truthy)),
        _ => false,
    };
    let (stdout, stderr, retcode) = match (retcode, succeeded) {
        (0, _) => (text, Value::Null, 0),
        (_, true) => (text, Value::Null, 0),
        (code, false) => (Value::Null, text, code),
    };
    let mut response = Map::new();
    for output in &run.deployment.outputs {
        let value = match output.name.as_str() {
            "return" => ret.clone(),
            "retcode" => Value::from(retcode),
            _ => Value::Null,
        };
        response.insert(output.name.clone(), value);
    }
    response.insert("deploy_stdout".into(), stdout);
    response.insert("deploy_stderr".into(), stderr);
    response.insert("deploy_status_code".into(), Value::from(retcode));
    response
}

#[cfg(test)]
mod tests;
