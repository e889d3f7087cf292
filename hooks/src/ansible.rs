//! heat-agents' `ansible` hook: the config is a playbook, written with the inputs as extra vars
//! and run by `ansible-playbook -i <inventory> [--module-path M] [--skip-tags S] [--tags T]
//! <playbook> --extra-vars @<vars>`. Settings: `HEAT_ANSIBLE_WORKING`, `HEAT_ANSIBLE_OUTPUTS`,
//! `HEAT_ANSIBLE_CMD`, `HEAT_ANSIBLE_INVENTORY`; options `tags`, `skip_tags`, `modulepath`,
//! `inventory` (relative to the working dir), `callback_plugins` (`ANSIBLE_CALLBACK_PLUGINS`).

use std::path::{Path, PathBuf};

use anneal_protocol::pyjson;
use serde_json::{Map, Value};

use crate::files::{prepare_dir, write_file};
use crate::{HookError, Invocation, Response, Run, ToolError, Tools, with_process_result};

pub(crate) async fn run<T: Tools>(run: &mut Run<'_, T>) -> Result<Response, HookError> {
    let working = PathBuf::from(run.env.get_or("HEAT_ANSIBLE_WORKING", "/var/lib/heat-config/heat-config-ansible"));
    let outputs = PathBuf::from(run.env.get_or("HEAT_ANSIBLE_OUTPUTS", "/var/run/heat-config/heat-config-ansible"));
    prepare_dir(&outputs, 0o700)?;
    prepare_dir(&working, 0o700)?;
    let id = &run.deployment.id;
    let mut variables = Map::new();
    variables.insert("heat_config_id".into(), Value::String(id.clone()));
    for (name, value) in run.input_values() {
        variables.insert(name.to_string(), value);
    }
    let tags = run.string_option("tags")?;
    let skip_tags = run.string_option("skip_tags")?;
    let modulepath = run.string_option("modulepath")?;
    let callback_plugins = run.string_option("callback_plugins")?;
    let inventory = match run.string_option("inventory")? {
        Some(inventory) => join(&working, &inventory),
        None => run.env.get_or("HEAT_ANSIBLE_INVENTORY", "localhost,").to_string(),
    };
    let playbook = working.join(format!("{id}_playbook.yaml"));
    let vars_file = working.join(format!("{id}_variables.json"));
    let outputs_path = outputs.join(id);
    variables.insert("heat_outputs_path".into(), Value::String(outputs_path.to_string_lossy().into_owned()));
    let Some(config) = run.config_text() else {
        return Err(HookError::BadDeployment { reason: "config must be a playbook (a string)".into() });
    };
    if config.is_empty() {
        return Ok(Response::Silent { reason: "No 'config' input found, nothing to do.".into() });
    }
    write_file(&vars_file, pyjson::dumps(&Value::Object(variables), true).as_bytes(), 0o600)?;
    write_file(&playbook, config.as_bytes(), 0o600)?;
    let invocation = Invocation {
        program: run.env.get_or("HEAT_ANSIBLE_CMD", "ansible-playbook").to_string(),
        args: arguments(&inventory, &playbook, &vars_file, tags, skip_tags, modulepath),
        env: run.env.with(
            &callback_plugins
                .map(|plugins| ("ANSIBLE_CALLBACK_PLUGINS".to_string(), plugins))
                .into_iter()
                .collect::<Vec<_>>(),
        ),
        cwd: working.clone(),
    };
    let output = match run.tools.run(invocation).await {
        Ok(output) => output,
        Err(ToolError::Spawn { .. }) => return Ok(Response::Silent { reason: "ansible not installed yet".into() }),
        Err(error) => return Err(error.into()),
    };
    Ok(Response::Printed(with_process_result(run.read_outputs(&outputs_path), &output)))
}

/// The command line after the program, in heat-agents' order: each option pair is inserted at
/// index 3 of `[cmd, -i, inventory, playbook, ...]`, tags first, so later ones come first.
fn arguments(
    inventory: &str,
    playbook: &Path,
    vars_file: &Path,
    tags: Option<String>,
    skip_tags: Option<String>,
    modulepath: Option<String>,
) -> Vec<String> {
    let mut args = vec!["-i".to_string(), inventory.to_string()];
    for (flag, value) in [("--module-path", modulepath), ("--skip-tags", skip_tags), ("--tags", tags)] {
        if let Some(value) = value {
            args.push(flag.to_string());
            args.push(value);
        }
    }
    args.push(playbook.to_string_lossy().into_owned());
    args.push("--extra-vars".into());
    args.push(format!("@{}", vars_file.to_string_lossy()));
    args
}

/// `os.path.join(working, inventory)`: an absolute inventory replaces the working dir.
fn join(working: &Path, inventory: &str) -> String {
    working.join(inventory).to_string_lossy().into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_come_in_heat_agents_order() {
        let args = arguments(
            "localhost,",
            Path::new("/w/1_playbook.yaml"),
            Path::new("/w/1_variables.json"),
            Some("abc,def".into()),
            Some("abc".into()),
            Some("/opt/ansible".into()),
        );
        assert_eq!(
            args,
            [
                "-i",
                "localhost,",
                "--module-path",
                "/opt/ansible",
                "--skip-tags",
                "abc",
                "--tags",
                "abc,def",
                "/w/1_playbook.yaml",
                "--extra-vars",
                "@/w/1_variables.json"
            ]
        );
    }

    #[test]
    fn an_absolute_inventory_is_kept() {
        assert_eq!(join(Path::new("/w"), "hosts"), "/w/hosts");
        assert_eq!(join(Path::new("/w"), "/etc/ansible/hosts"), "/etc/ansible/hosts");
    }
}
