//! heat-agents' `puppet` hook: the config is a manifest run by `puppet apply --color false
//! --detailed-exitcodes --logdest console [--modulepath M] [--tags T] [--debug --logdest ..]
//! [--verbose --logdest ..] <id>.pp`, inputs passed as facts (`FACTER_<name>`) and, with
//! `enable_hiera`, as a hiera data file. Its output goes to `<logdir>/<time>-<id>-std{out,err}.log`
//! and is read back; exit 2 (changes applied) counts as 0. Settings: `HEAT_PUPPET_WORKING`,
//! `HEAT_PUPPET_OUTPUTS`, `HEAT_PUPPET_CMD`, `HEAT_PUPPET_LOGDIR`, `HEAT_PUPPET_HIERA_DATADIR`.

use std::path::{Path, PathBuf};

use anneal_protocol::env::input_env_value;
use anneal_protocol::pyjson::{self, is_truthy};
use serde_json::{Map, Value};

use crate::files::{prepare_dir, read_text, write_file};
use crate::{HookError, Invocation, Response, Run, ToolError, Tools};

pub(crate) async fn run<T: Tools>(run: &mut Run<'_, T>) -> Result<Response, HookError> {
    let working = PathBuf::from(run.env.get_or("HEAT_PUPPET_WORKING", "/var/lib/heat-config/heat-config-puppet"));
    let outputs = PathBuf::from(run.env.get_or("HEAT_PUPPET_OUTPUTS", "/var/run/heat-config/heat-config-puppet"));
    let logdir = PathBuf::from(run.env.get_or("HEAT_PUPPET_LOGDIR", "/var/run/heat-config/deployed"));
    let hiera_datadir = PathBuf::from(run.env.get_or("HEAT_PUPPET_HIERA_DATADIR", "/etc/puppet/hieradata"));
    prepare_dir(&outputs, 0o700)?;
    prepare_dir(&working, 0o700)?;
    let use_hiera = run.option("enable_hiera").is_some_and(is_truthy);
    let use_facter = run.option("enable_facter").is_none_or(is_truthy);
    let modulepath = run.string_option("modulepath")?;
    let tags = run.string_option("tags")?;
    let debug = run.option("enable_debug").is_some_and(is_truthy);
    let verbose = run.option("enable_verbose").is_some_and(is_truthy);

    let mut facts: Vec<(String, String)> = Vec::new();
    if let Some(fqdn) = super::hostname_f(run, &working).await? {
        facts.push(("FACTER_fqdn".into(), fqdn));
    }
    let mut hiera = Map::new();
    for (name, value) in run.input_values() {
        if use_facter {
            facts.push((format!("FACTER_{name}"), fact_value(name, &value)?));
        }
        if use_hiera {
            hiera.insert(name.to_string(), value);
        }
    }
    let name = run.deployment.name.clone().unwrap_or_default();
    if use_hiera {
        prepare_dir(&hiera_datadir, 0o700)?;
        let data = hiera_datadir.join(format!("heat_config_{name}.json"));
        write_file(&data, pyjson::dumps(&Value::Object(hiera), true).as_bytes(), 0o600)?;
        facts.push(("FACTER_deploy_config_name".into(), name));
    }
    let id = &run.deployment.id;
    let manifest = working.join(format!("{id}.pp"));
    let outputs_path = outputs.join(id);
    facts.push(("FACTER_heat_outputs_path".into(), outputs_path.to_string_lossy().into_owned()));
    let Some(config) = run.config_text() else {
        return Err(HookError::BadDeployment { reason: "config must be a manifest (a string)".into() });
    };
    write_file(&manifest, config.as_bytes(), 0o700)?;
    let args = arguments(&manifest, modulepath, tags, debug, verbose);
    prepare_dir(&logdir, 0o700)?;
    let Some(creation_time) = run.deployment.creation_time.as_deref() else {
        return Err(HookError::BadDeployment {
            reason: "the deployment has no creation_time (puppet's log files are named by it)".into(),
        });
    };
    let base = logdir.join(format!("{}-{id}", creation_time.replace([':', 'T'], "-")));
    let (stdout_log, stderr_log) = (log_file(&base, "stdout"), log_file(&base, "stderr"));
    write_file(&stdout_log, b"", 0o666)?;
    write_file(&stderr_log, b"", 0o666)?;
    let program = run.env.get_or("HEAT_PUPPET_CMD", "puppet").to_string();
    let invocation = Invocation { program, args, env: run.env.with(&facts), cwd: working.clone() };
    let output = match run.tools.run(invocation).await {
        Ok(output) => output,
        Err(ToolError::Spawn { .. }) => return Ok(Response::Silent { reason: "puppet not installed yet".into() }),
        Err(error) => return Err(error.into()),
    };
    write_file(&stdout_log, &output.stdout, 0o666)?;
    write_file(&stderr_log, &output.stderr, 0o666)?;
    let mut response = Map::new();
    for (key, path) in [("deploy_stdout", &stdout_log), ("deploy_stderr", &stderr_log)] {
        let text = read_text(path, run.max_output_bytes).map_err(|source| HookError::Io {
            action: "read",
            path: path.clone(),
            source,
        })?;
        response.insert(key.into(), Value::String(text.unwrap_or_default()));
    }
    response.extend(run.read_outputs(&outputs_path));
    let status = if matches!(output.status_code, 0 | 2) { 0 } else { output.status_code };
    response.insert("deploy_status_code".into(), Value::from(status));
    Ok(Response::Printed(response))
}

/// A fact's value. heat-agents passes an input's value as is and crashes on a non-string; the
/// script hook's conversion applies instead (JSON text for maps and lists).
fn fact_value(name: &str, value: &Value) -> Result<String, HookError> {
    let text = input_env_value(Some(value));
    if text.contains('\0') {
        return Err(HookError::BadDeployment {
            reason: format!("input {name} contains a NUL byte, which a fact cannot hold"),
        });
    }
    Ok(text)
}

fn log_file(base: &Path, stream: &str) -> PathBuf {
    let mut name = base.as_os_str().to_owned();
    name.push(format!("-{stream}.log"));
    PathBuf::from(name)
}

/// `puppet`'s arguments, each option inserted before the manifest in heat-agents' order.
fn arguments(
    manifest: &Path,
    modulepath: Option<String>,
    tags: Option<String>,
    debug: bool,
    verbose: bool,
) -> Vec<String> {
    let mut args: Vec<String> =
        ["apply", "--color", "false", "--detailed-exitcodes", "--logdest", "console"].map(String::from).to_vec();
    if let Some(modulepath) = modulepath {
        args.extend(["--modulepath".into(), modulepath]);
    }
    if let Some(tags) = tags {
        args.extend(["--tags".into(), tags]);
    }
    if debug {
        args.extend(["--debug", "--logdest", "/var/log/puppet/heat-debug.log"].map(String::from));
    }
    if verbose {
        args.extend(["--verbose", "--logdest", "/var/log/puppet/heat-verbose.log"].map(String::from));
    }
    args.push(manifest.to_string_lossy().into_owned());
    args
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_option_goes_before_the_manifest() {
        let args = arguments(Path::new("/w/1.pp"), Some("/m".into()), Some("t".into()), true, true);
        assert_eq!(
            args.join(" "),
            "apply --color false --detailed-exitcodes --logdest console --modulepath /m --tags t --debug --logdest \
             /var/log/puppet/heat-debug.log --verbose --logdest /var/log/puppet/heat-verbose.log /w/1.pp"
        );
    }

    #[test]
    fn log_files_are_named_after_the_base() {
        assert_eq!(log_file(Path::new("/l/2015-12-12-0-1"), "stdout"), Path::new("/l/2015-12-12-0-1-stdout.log"));
    }
}
