//! What heat-agents' os-refresh-config script `50-heat-config-docker-cmd` did before each hook
//! run, for the deployment at hand. The script listed the `config_id` label of every container
//! docker-cmd started, removed (`docker rm -f`) the containers of every config id that was no
//! longer a docker-cmd deployment in the metadata, then renamed each container whose name is not
//! its `container_name` label to that label, unless a container already has that name.
//!
//! A hook sees one deployment, not the metadata, so removal is narrowed to what that deployment
//! says is gone: Heat gives every action of a deployment resource a new config id, so containers
//! labelled with this deployment's `deploy_stack_id` and `deploy_resource_name` but another
//! config id belong to a config the metadata no longer holds. Renaming is the script's, whole.
//! As in the script, a docker that cannot be started or a failing `docker` call skips the step;
//! only the deadline or shutdown stops the run.

use std::collections::{BTreeMap, BTreeSet};

use anneal_protocol::pyjson::python_str;

use super::{Docker, bytes_words};
use crate::{HookError, Run, ToolError, ToolOutput, Tools};

pub(super) async fn before_hook<T: Tools>(run: &mut Run<'_, T>, docker: &Docker) -> Result<(), HookError> {
    if let Some((stack_id, resource_name)) = resource_of(run) {
        remove_replaced_configs(run, docker, &stack_id, &resource_name).await?;
    }
    rename_containers(run, docker).await
}

/// The deployment resource a Heat deployment's containers are labelled with.
fn resource_of<T>(run: &Run<'_, T>) -> Option<(String, String)> {
    let label = |name: &str| run.deployment.input(name).filter(|value| !value.is_null()).map(python_str);
    Some((label("deploy_stack_id")?, label("deploy_resource_name")?))
}

/// The script's `delete_missing_configs` for the configs of this deployment resource other than
/// the current one.
async fn remove_replaced_configs<T: Tools>(
    run: &mut Run<'_, T>,
    docker: &Docker,
    stack_id: &str,
    resource_name: &str,
) -> Result<(), HookError> {
    let args = [
        "ps",
        "-a",
        "--filter",
        "label=managed_by=docker-cmd",
        "--filter",
        &format!("label=deploy_stack_id={stack_id}"),
        "--filter",
        &format!("label=deploy_resource_name={resource_name}"),
        "--format",
        "{{.Label \"config_id\"}}",
    ];
    let Some(listed) = succeeded(docker_run(run, docker, &args).await)? else { return Ok(()) };
    let replaced: BTreeSet<String> = bytes_words(&listed.stdout)
        .map(|id| String::from_utf8_lossy(id).into_owned())
        .filter(|id| *id != run.deployment.id)
        .collect();
    for config_id in replaced {
        remove_containers(run, docker, &config_id).await?;
    }
    Ok(())
}

/// The script's `remove_containers`: `docker rm -f` each container of the config id.
async fn remove_containers<T: Tools>(run: &mut Run<'_, T>, docker: &Docker, config_id: &str) -> Result<(), HookError> {
    let filter = format!("label=config_id={config_id}");
    let args = ["ps", "-q", "-a", "--filter", "label=managed_by=docker-cmd", "--filter", &filter];
    let Some(listed) = succeeded(docker_run(run, docker, &args).await)? else { return Ok(()) };
    for container in bytes_words(&listed.stdout) {
        let container = String::from_utf8_lossy(container);
        // The script logs a failed removal and goes on.
        tolerated(docker_run(run, docker, &["rm", "-f", &container]).await)?;
    }
    Ok(())
}

/// The script's `rename_containers`.
async fn rename_containers<T: Tools>(run: &mut Run<'_, T>, docker: &Docker) -> Result<(), HookError> {
    let args = ["ps", "-a", "--format", "{{.Names}} {{.Label \"container_name\"}}"];
    let Some(listed) = succeeded(docker_run(run, docker, &args).await)? else { return Ok(()) };
    let mut names = Vec::new();
    let mut wanted: BTreeMap<&[u8], &[u8]> = BTreeMap::new();
    for line in listed.stdout.split(|byte| *byte == b'\n') {
        let words: Vec<&[u8]> = bytes_words(line).collect();
        let (Some(name), Some(label)) = (words.first(), words.last()) else { continue };
        names.push(*name);
        if words.len() >= 2 && name != label {
            wanted.insert(name, label);
        }
    }
    for (current, desired) in wanted {
        if names.contains(&desired) {
            continue;
        }
        let text = |bytes: &[u8]| String::from_utf8_lossy(bytes).into_owned();
        tolerated(docker_run(run, docker, &["rename", &text(current), &text(desired)]).await)?;
    }
    Ok(())
}

async fn docker_run<T: Tools>(run: &mut Run<'_, T>, docker: &Docker, args: &[&str]) -> Result<ToolOutput, ToolError> {
    docker.run(run, args.iter().map(|arg| arg.to_string()).collect()).await
}

/// The output of a docker call that exited 0; `None` for one that failed or could not run.
fn succeeded(result: Result<ToolOutput, ToolError>) -> Result<Option<ToolOutput>, HookError> {
    Ok(tolerated(result)?.filter(|output| output.status_code == 0))
}

/// The output of a docker call, `None` when docker could not be started or waited for (the
/// script logs those and goes on); a deadline or shutdown ends the run.
fn tolerated(result: Result<ToolOutput, ToolError>) -> Result<Option<ToolOutput>, HookError> {
    match result {
        Ok(output) => Ok(Some(output)),
        Err(ToolError::Spawn { .. } | ToolError::Wait { .. }) => Ok(None),
        Err(error) => Err(error.into()),
    }
}
