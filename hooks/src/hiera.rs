//! heat-agents' `hiera` hook: the config's `hierarchy` becomes hiera.yaml (JSON backend over the
//! data dir) and each of its `datafiles` a `<datadir>/<name>.json`. It refuses to run while
//! os-apply-config still holds legacy `hiera.datafiles` (its check command answers anything but
//! `empty`); heat-agents' hook means to report that as a failure but crashes on Python 3 while
//! building the message, so here the failure is reported as intended. Settings:
//! `HEAT_PUPPET_HIERA_DATADIR`, `HEAT_HIERA_CONFIG`, `HEAT_HIERA_ELEMENT_CHECK_CMD`.

use std::path::PathBuf;

use anneal_protocol::pyjson::{self, python_str};
use serde_json::{Map, Value};

use crate::files::{prepare_dir, write_file};
use crate::{HookError, Invocation, Response, Run, ToolError, Tools, success};

const CHECK_COMMAND: &str = "os-apply-config --key hiera.datafiles --type raw --key-default empty";

pub(crate) async fn run<T: Tools>(run: &mut Run<'_, T>) -> Result<Response, HookError> {
    let datadir = run.env.get_or("HEAT_PUPPET_HIERA_DATADIR", "/etc/puppet/hieradata").to_string();
    let hiera_config = PathBuf::from(run.env.get_or("HEAT_HIERA_CONFIG", "/etc/puppet/hiera.yaml"));
    if let Some(legacy) = legacy_hiera(run).await? {
        return Ok(Response::Printed(legacy));
    }
    let Value::Object(config) = &run.deployment.config else {
        return Err(HookError::BadDeployment { reason: "config must be a map (hierarchy, datafiles)".into() });
    };
    let datadir_path = PathBuf::from(&datadir);
    prepare_dir(&datadir_path, 0o700)?;
    if let Some(hierarchy) = config.get("hierarchy") {
        let Value::Array(items) = hierarchy else {
            return Err(HookError::BadDeployment { reason: "config hierarchy must be a list".into() });
        };
        let mut text = format!("\n---\n:backends:\n  - json\n:json:\n  :datadir: {datadir}\n:hierarchy:\n");
        for item in items {
            text.push_str(&format!("  - {}\n", python_str(item)));
        }
        write_file(&hiera_config, text.as_bytes(), 0o600)?;
    }
    if let Some(datafiles) = config.get("datafiles") {
        let Value::Object(datafiles) = datafiles else {
            return Err(HookError::BadDeployment { reason: "config datafiles must be a map".into() });
        };
        for (name, data) in datafiles {
            let path = datadir_path.join(format!("{name}.json"));
            write_file(&path, pyjson::dumps_indented(data, 4, true).as_bytes(), 0o600)?;
        }
    }
    Ok(Response::Printed(success()))
}

/// The failure to report when os-apply-config still has legacy hiera data; `None` when it has
/// none or is not installed.
async fn legacy_hiera<T: Tools>(run: &mut Run<'_, T>) -> Result<Option<Map<String, Value>>, HookError> {
    let command = run.env.get_or("HEAT_HIERA_ELEMENT_CHECK_CMD", CHECK_COMMAND).to_string();
    // Python's `str.split(" ")`: every single space separates, so two give an empty argument.
    let mut words = command.split(' ').map(str::to_string);
    let program = words.next().unwrap_or_default();
    let invocation =
        Invocation { program, args: words.collect(), env: run.env.variables().to_vec(), cwd: run.cwd.to_path_buf() };
    let output = match run.tools.run(invocation).await {
        Ok(output) => output,
        Err(ToolError::Spawn { .. }) => return Ok(None),
        Err(error) => return Err(error.into()),
    };
    let answer = String::from_utf8_lossy(output.stdout.trim_ascii_end()).into_owned();
    if answer == "empty" {
        return Ok(None);
    }
    let message = format!(
        "Legacy hieradata from os-apply-config has been detected - {answer}. Please update all of your \
         interfaces to use the new heat-agents hiera hook before proceeding"
    );
    let mut response = Map::new();
    response.insert("deploy_stdout".into(), Value::String(output.stdout_text()));
    response.insert("deploy_stderr".into(), Value::String(message));
    response.insert("deploy_status_code".into(), Value::from(1));
    Ok(Some(response))
}
