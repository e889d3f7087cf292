//! heat-agents' `kubelet` hook (deprecated upstream), with the part its os-refresh-config script
//! did: anneal has no os-refresh-config, so the hook itself writes the deployment's pod manifest
//! to `<manifests>/<id>.json` (the config as `json.dump(indent=2)`, mode 0600) for the kubelet to
//! run, then waits as heat-agents' hook does until docker has every image the pod names
//! (`docker images`) and a running container per pod container, named as that era's kubelet named
//! them (`/k8s_<name>.<8 chars>_<id without dashes, 15 chars>`, `docker ps`). Options
//! `images_timeout` (600 s), `containers_timeout` (120 s), `poll_period` (5 s). The answer is the
//! hook's log (`[time] (heat-config) [LEVEL] message` lines; errors also in `deploy_stderr`) and
//! status 0, or 1 when waiting failed (a timeout, a docker call failing, a malformed pod).
//!
//! Differences from heat-agents, each where its hook is broken or cannot apply:
//! - docker is asked through its CLI (`$HEAT_DOCKER_CMD`, default `docker`, with the hook's
//!   `DOCKER_HOST`), not docker-py (whose `docker.Client` is gone since docker-py 2).
//! - Sleeping between polls runs `sleep <poll_period>` through the tool runner, so the agent's
//!   deadline and shutdown stop it as any tool.
//! - heat-agents' script replaced every manifest at each run, keeping those of the kubelet
//!   deployments in the metadata. A hook sees one deployment, and Heat gives each of its actions
//!   a new id, so the hook remembers which manifest a deployment resource (`deploy_stack_id`,
//!   `deploy_resource_name`) last wrote, in a hidden file beside the manifests (the kubelet
//!   ignores dot files): a new action's manifest replaces the previous one, and DELETE removes it
//!   and answers success.
//! - What heat-agents' loops mean, not what they do on Python 3: an image found twice is not
//!   removed twice (a `ValueError`), no prefix is skipped by removing while iterating, a wait
//!   that found everything does not then time out or sleep once more, and the containers timeout
//!   names the patterns (heat-agents' `', '.join(dict.keys)` raises a `TypeError` instead).
//! - Images are waited for in the order the pod names them (heat-agents' set order is random),
//!   and container names are matched literally, not as regular expressions (the same for the
//!   DNS-label names Kubernetes allows). Log times are UTC; Python's are local; no traceback.

mod wait;

use std::path::PathBuf;

use anneal_protocol::pyjson;
use serde_json::{Map, Value};

use crate::files::{prepare_dir, remove_if_present, write_file};
use crate::{HookError, Response, Run, Tools, success};

pub(crate) const SUMMARY: &str =
    "writes the config as a kubelet pod manifest and waits for its docker images and containers";

pub(crate) async fn run<T: Tools>(run: &mut Run<'_, T>) -> Result<Response, HookError> {
    let manifests = PathBuf::from(
        run.env.get_or("HEAT_KUBELET_MANIFESTS", "/var/lib/heat-config/heat-config-kubelet/kubelet-manifests"),
    );
    prepare_dir(&manifests, 0o700)?;
    let manifest = manifests.join(format!("{}.json", run.deployment.id));
    let owner = owner_file(run, &manifests);
    let previous = owner.as_ref().and_then(|owner| std::fs::read_to_string(owner).ok());
    if let Some(previous) = previous.filter(|previous| *previous != run.deployment.id) {
        remove_if_present(&manifests.join(format!("{previous}.json")))?;
    }
    if run.deployment.input_str("deploy_action") == Some("DELETE") {
        remove_if_present(&manifest)?;
        if let Some(owner) = &owner {
            remove_if_present(owner)?;
        }
        return Ok(Response::Printed(success()));
    }
    let text = pyjson::dumps_indented(&run.deployment.config, 2, false);
    write_file(&manifest, text.as_bytes(), 0o600)?;
    if let Some(owner) = &owner {
        write_file(owner, run.deployment.id.as_bytes(), 0o600)?;
    }

    let mut log = wait::Log::default();
    let mut docker = wait::Docker::connect(run, &mut log).await?;
    let state = match docker.wait_for_pod(run, &mut log).await {
        Ok(()) => 0,
        Err(wait::Failure::Hook(error)) => return Err(error),
        Err(wait::Failure::Pod(message)) => {
            log.error(format!("An error occurred deploying pod {}", run.deployment.id));
            log.error(message);
            1
        }
    };
    let mut response = Map::new();
    response.insert("deploy_stdout".into(), Value::String(log.render(wait::Level::Debug)));
    response.insert("deploy_stderr".into(), Value::String(log.render(wait::Level::Warning)));
    response.insert("deploy_status_code".into(), Value::from(state));
    Ok(Response::Printed(response))
}

/// The hidden file naming the manifest the deployment resource last wrote; `None` without the
/// `deploy_stack_id` and `deploy_resource_name` inputs Heat always sends.
fn owner_file<T>(run: &Run<'_, T>, manifests: &std::path::Path) -> Option<PathBuf> {
    let stack = run.deployment.input_str("deploy_stack_id")?;
    let resource = run.deployment.input_str("deploy_resource_name")?;
    let safe = |text: &str| -> String {
        text.chars()
            .map(|ch| if ch.is_ascii_alphanumeric() || matches!(ch, '-' | '_' | '.') { ch } else { '_' })
            .collect()
    };
    Some(manifests.join(format!(".anneal-owner-{}-{}", safe(stack), safe(resource))))
}

#[cfg(test)]
mod tests;
