//! heat-agents' `apply-config` hook: runs os-apply-config (`HEAT_APPLY_CONFIG_CMD`, no
//! arguments) over the metadata os-collect-config keeps, and reports its output and status. The
//! hook never reads its stdin, so os-apply-config inherits it: the deployment's JSON. When
//! `HEAT_APPLY_CONFIG_CMD` is not set and `os-apply-config` cannot be started (an image without
//! Python), the built-in does what os-apply-config would have done itself (`native`).

mod control;
mod native;
mod render;
#[cfg(test)]
mod tests;

use serde_json::Map;

use crate::{HookError, Invocation, Response, Run, ToolError, Tools, with_process_result};

pub(crate) async fn run<T: Tools>(run: &mut Run<'_, T>) -> Result<Response, HookError> {
    let configured = run.env.get("HEAT_APPLY_CONFIG_CMD").is_some();
    let program = run.env.get_or("HEAT_APPLY_CONFIG_CMD", "os-apply-config").to_string();
    let invocation =
        Invocation { program, args: Vec::new(), env: run.env.variables().to_vec(), cwd: run.cwd.to_path_buf() };
    let stdin = serde_json::to_vec(run.deployment)
        .map_err(|error| HookError::BadDeployment { reason: format!("cannot encode the deployment: {error}") })?;
    match run.tools.run_with_stdin(invocation, stdin).await {
        Ok(output) => Ok(Response::Printed(with_process_result(Map::new(), &output))),
        Err(ToolError::Spawn { .. }) if !configured => Ok(Response::Printed(native::run(run).await?)),
        Err(error) => Err(error.into()),
    }
}
