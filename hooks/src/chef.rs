//! heat-agents' `chef` hook: chef-client in local mode (`chef-client -z --config client.rb -j
//! node/<fqdn>.json`), the config being the run list (JSON text), the inputs node attributes
//! (but `environment`, which selects the chef environment, and the `deploy_*` inputs), and an
//! optional kitchen (`options.kitchen`, a git URL cloned into `options.kitchen_path`, afresh on
//! UPDATE). Settings: `HEAT_CHEF_WORKING`, `HEAT_CHEF_OUTPUTS`. Where heat-agents' hook crashes on
//! Python 3 (chef-client or git missing, `hostname -f` failing: it calls `.decode` on a text
//! message), the failure it means to report is reported.

use std::io;
use std::path::{Path, PathBuf};

use anneal_protocol::deployment::DERIVED_INPUTS;
use anneal_protocol::pyjson::{self, python_str};
use serde_json::{Map, Value};

use crate::files::{prepare_dir, write_file};
use crate::{HookError, Invocation, Response, Run, ToolError, ToolOutput, Tools};

pub(crate) async fn run<T: Tools>(run: &mut Run<'_, T>) -> Result<Response, HookError> {
    let working = PathBuf::from(run.env.get_or("HEAT_CHEF_WORKING", "/var/lib/heat-config/heat-config-chef"));
    let outputs = PathBuf::from(run.env.get_or("HEAT_CHEF_OUTPUTS", "/var/run/heat-config/heat-config-chef"));
    prepare_dir(&outputs, 0o700)?;
    prepare_dir(&working, 0o700)?;
    let mut client = String::from("log_level :debug\nlog_location STDOUT\nlocal_mode true\nchef_zero.enabled true");
    let kitchen = run.string_option("kitchen")?;
    // As given (the tools run in the working dir, where a relative one resolves).
    let kitchen_path = match run.string_option("kitchen_path")? {
        Some(path) => PathBuf::from(path),
        None => working.join("kitchen"),
    };
    for (key, dir) in [("cookbook_path", "cookbooks"), ("role_path", "roles"), ("environment_path", "environments")] {
        client.push_str(&format!("\n{key} '{}'", kitchen_path.join(dir).display()));
    }
    if let Some(kitchen) = kitchen {
        if run.deployment.input_str("deploy_action") == Some("UPDATE") {
            // ignore_errors=True: a kitchen that is not there (or cannot go) is cloned over.
            let _ = std::fs::remove_dir_all(working.join(&kitchen_path));
        }
        let args = vec!["clone".into(), kitchen, kitchen_path.to_string_lossy().into_owned()];
        let clone = run_tool(run, "git", args, &working, &[]).await?;
        if clone.status_code != 0 {
            return Ok(Response::Printed(process_response(&clone)));
        }
    }
    let hostname = run_tool(run, "hostname", vec!["-f".into()], &working, &[]).await?;
    if hostname.status_code != 0 {
        let mut response = Map::new();
        response.insert("deploy_status_code".into(), Value::from(hostname.status_code));
        response.insert("deploy_stdout".into(), Value::String(String::new()));
        response.insert("deploy_stderr".into(), "Could not determine hostname with hostname -f".into());
        return Ok(Response::Printed(response));
    }
    let fqdn = String::from_utf8_lossy(&hostname.stdout).trim().to_string();
    let mut node = Map::new();
    // Every input but the deployment's own (`DERIVED_INPUTS`) is a node attribute.
    for (name, value) in run.input_values() {
        if name == "environment" {
            client.push_str(&format!("\nenvironment '{}'", python_str(&value)));
        } else if !DERIVED_INPUTS.contains(&name) {
            node.insert(name.to_string(), value);
        }
    }
    let run_list = match run.config_text().map(serde_json::from_str::<Value>) {
        Some(Ok(run_list)) => run_list,
        _ => return Err(HookError::BadDeployment { reason: "config must be a run list as JSON text".into() }),
    };
    node.insert("run_list".into(), run_list);
    let node_dir = working.join("node");
    prepare_dir(&node_dir, 0o700)?;
    let node_file = node_dir.join(format!("{fqdn}.json"));
    write_file(&node_file, pyjson::dumps_indented(&Value::Object(node), 4, false).as_bytes(), 0o600)?;
    client.push_str(&format!("\nnode_path '{}'", node_dir.display()));
    let client_file = working.join("client.rb");
    write_file(&client_file, client.as_bytes(), 0o600)?;
    let outputs_path = outputs.join(&run.deployment.id);
    let args = ["-z", "--config"].map(String::from).into_iter().chain([
        path_text(&client_file),
        "-j".into(),
        path_text(&node_file),
    ]);
    let extra = [("heat_outputs_path".to_string(), path_text(&outputs_path))];
    let output = run_tool(run, "chef-client", args.collect(), &working, &extra).await?;
    let mut response = process_response(&output);
    response.extend(run.read_outputs(&outputs_path));
    Ok(Response::Printed(response))
}

/// heat-agents' `run_subproc`: a tool that cannot start is status -1 with Python's text of the
/// error on stderr.
async fn run_tool<T: Tools>(
    run: &mut Run<'_, T>,
    program: &str,
    args: Vec<String>,
    cwd: &Path,
    extra: &[(String, String)],
) -> Result<ToolOutput, HookError> {
    let invocation = Invocation { program: program.into(), args, env: run.env.with(extra), cwd: cwd.to_path_buf() };
    match run.tools.run(invocation).await {
        Ok(output) => Ok(output),
        Err(ToolError::Spawn { program, source }) => Ok(ToolOutput {
            stdout: Vec::new(),
            stderr: python_os_error(&program, &source).into_bytes(),
            status_code: -1,
        }),
        Err(error) => Err(error.into()),
    }
}

/// `{deploy_status_code, deploy_stdout, deploy_stderr}`, in the chef hook's order.
fn process_response(output: &ToolOutput) -> Map<String, Value> {
    let mut response = Map::new();
    response.insert("deploy_status_code".into(), Value::from(output.status_code));
    response.insert("deploy_stdout".into(), Value::String(output.stdout_text()));
    response.insert("deploy_stderr".into(), Value::String(output.stderr_text()));
    response
}

/// `str(OSError)` as Python prints a failed `Popen`: `[Errno 2] No such file or directory: 'git'`.
fn python_os_error(program: &str, error: &io::Error) -> String {
    match error.raw_os_error() {
        Some(code) => {
            let text = error.to_string();
            let description = text.strip_suffix(&format!(" (os error {code})")).unwrap_or(&text);
            format!("[Errno {code}] {description}: '{program}'")
        }
        None => error.to_string(),
    }
}

fn path_text(path: &Path) -> String {
    path.to_string_lossy().into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spawn_errors_read_as_python_prints_them() {
        let error = io::Error::from_raw_os_error(2);
        assert_eq!(python_os_error("chef-client", &error), "[Errno 2] No such file or directory: 'chef-client'");
    }
}
