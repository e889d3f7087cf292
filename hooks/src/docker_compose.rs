//! heat-agents' `docker-compose` hook, with the part its os-refresh-config script did: the
//! config (a docker-compose file) is written to `<working>/<deployment name>/docker-compose.yml`,
//! the `env_file`s it names are written from the `env_files` input (a Python literal list of
//! `{file_name, content}`, or a JSON list), and `docker-compose up -d --no-build` runs in that
//! directory. DELETE kills the project and removes its file (heat-agents' script did that at the
//! next run once the deployment had gone). A map config is written as that script wrote it
//! (`yaml.safe_dump`). Where heat-agents' hook crashes on Python 3 (DELETE,
//! an empty config, a file name without a directory, a compose file with `version:`), it does what
//! the hook means. Settings: `HEAT_DOCKER_COMPOSE_WORKING`, `HEAT_DOCKER_COMPOSE_CMD`.

use std::path::{Path, PathBuf};

use anneal_protocol::pyjson;
use serde_json::Value;
use yaml_rust2::{Yaml, YamlLoader};

use crate::files::{prepare_dir, write_file};
use crate::{HookError, Invocation, Response, Run, Tools, pyliteral, success, with_process_result};

const COMPOSE_FILE: &str = "docker-compose.yml";

pub(crate) async fn run<T: Tools>(run: &mut Run<'_, T>) -> Result<Response, HookError> {
    let working =
        PathBuf::from(run.env.get_or("HEAT_DOCKER_COMPOSE_WORKING", "/var/lib/heat-config/heat-config-docker-compose"));
    let program = run.env.get_or("HEAT_DOCKER_COMPOSE_CMD", "docker-compose").to_string();
    let name = run.deployment.name.clone().unwrap_or_default();
    if name.is_empty() || name.contains('/') || name == "." || name == ".." {
        let reason = format!("deployment name {name:?} cannot name a project directory");
        return Err(HookError::BadDeployment { reason });
    }
    let project = working.join(&name);
    // heat-agents' os-refresh-config script makes the working dir private before the hook runs.
    prepare_dir(&working, 0o700)?;
    prepare_dir(&project, 0o700)?;
    if run.deployment.input_str("deploy_action") == Some("DELETE") {
        return remove_project(run, &program, &project).await;
    }
    let text = match &run.deployment.config {
        Value::String(text) if text.is_empty() => return Ok(Response::Printed(success())),
        Value::Null => return Ok(Response::Printed(success())),
        Value::String(text) => text.clone(),
        // heat-agents' os-refresh-config script wrote a map config with yaml.safe_dump.
        other => crate::pyyaml::safe_dump(other),
    };
    write_file(&project.join(COMPOSE_FILE), text.as_bytes(), 0o600)?;
    let referenced = env_file_names(&text)?;
    for (file_name, content) in input_env_files(run)? {
        if referenced.contains(&file_name) {
            let path = project.join(&file_name);
            prepare_dir(path.parent().unwrap_or(&project), 0o700)?;
            write_file(&path, content.as_bytes(), 0o600)?;
        }
    }
    let args = ["up", "-d", "--no-build"].map(String::from).to_vec();
    let invocation = Invocation { program, args, env: run.env.variables().to_vec(), cwd: project };
    let output = run.tools.run(invocation).await?;
    Ok(Response::Printed(with_process_result(serde_json::Map::new(), &output)))
}

/// What heat-agents' os-refresh-config script does to a project whose deployment is gone:
/// `docker-compose kill` in its directory, then its compose file removed.
async fn remove_project<T: Tools>(run: &mut Run<'_, T>, program: &str, project: &Path) -> Result<Response, HookError> {
    let file = project.join(COMPOSE_FILE);
    if file.is_file() {
        let invocation = Invocation {
            program: program.to_string(),
            args: vec!["kill".into()],
            env: run.env.variables().to_vec(),
            cwd: project.to_path_buf(),
        };
        // As in heat-agents' script, the kill's result does not matter: the project goes.
        if let Err(crate::ToolError::TimedOut { program, output, after }) = run.tools.run(invocation).await {
            return Err(crate::ToolError::TimedOut { program, output, after }.into());
        }
        std::fs::remove_file(&file).map_err(|source| HookError::Io { action: "remove", path: file.clone(), source })?;
    }
    Ok(Response::Printed(success()))
}

/// Every `env_file` (a name or a list) of the file's services: under `services:` (version 2
/// and later), else the top-level entries that are maps (version 1).
fn env_file_names(text: &str) -> Result<Vec<String>, HookError> {
    let documents = YamlLoader::load_from_str(text)
        .map_err(|error| HookError::BadDeployment { reason: format!("config is not YAML: {error}") })?;
    let Some(Yaml::Hash(top)) = documents.into_iter().next() else { return Ok(Vec::new()) };
    let services = match top.get(&Yaml::String("services".into())) {
        Some(Yaml::Hash(services)) => services.clone(),
        _ => top,
    };
    let mut names = Vec::new();
    for service in services.values() {
        let Yaml::Hash(service) = service else { continue };
        match service.get(&Yaml::String("env_file".into())) {
            Some(Yaml::String(name)) => names.push(name.clone()),
            Some(Yaml::Array(items)) => names.extend(items.iter().filter_map(Yaml::as_str).map(str::to_string)),
            _ => {}
        }
    }
    Ok(names)
}

/// The `env_files` input as `(file_name, content)` pairs.
fn input_env_files<T>(run: &Run<'_, T>) -> Result<Vec<(String, String)>, HookError> {
    let bad = |reason: String| HookError::BadDeployment { reason: format!("input env_files: {reason}") };
    let list = match run.deployment.input("env_files") {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::String(text)) if text.is_empty() => return Ok(Vec::new()),
        Some(Value::String(text)) => pyliteral::parse(text).map_err(bad)?,
        Some(other) => other.clone(),
    };
    let Value::Array(items) = list else { return Err(bad("must be a list of {file_name, content}".into())) };
    items
        .iter()
        .map(|item| match (item.get("file_name"), item.get("content")) {
            (Some(Value::String(name)), Some(Value::String(content))) => Ok((name.clone(), content.clone())),
            _ => Err(bad(format!("{} is not {{file_name, content}}", pyjson::dumps(item, false)))),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn env_files_are_found_in_either_file_version() {
        let v1 = "web:\n  image: nginx\n  env_file: [a.env, env/b.env]\ndb:\n  env_file: c.env\n";
        assert_eq!(env_file_names(v1).unwrap(), ["a.env", "env/b.env", "c.env"]);
        let v3 = "version: '3'\nservices:\n  web:\n    image: nginx\n    env_file: a.env\n";
        assert_eq!(env_file_names(v3).unwrap(), ["a.env"]);
        assert!(env_file_names("web: [unclosed").is_err());
    }
}
