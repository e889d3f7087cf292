//! heat-agents' `apply-config` hook: runs os-apply-config (`HEAT_APPLY_CONFIG_CMD`, no
//! arguments) over the metadata os-collect-config keeps, and reports its output and status.

use serde_json::Map;

use crate::{HookError, Invocation, Response, Run, Tools, with_process_result};

pub(crate) async fn run<T: Tools>(run: &mut Run<'_, T>) -> Result<Response, HookError> {
    let program = run.env.get_or("HEAT_APPLY_CONFIG_CMD", "os-apply-config").to_string();
    let invocation =
        Invocation { program, args: Vec::new(), env: run.env.variables().to_vec(), cwd: run.cwd.to_path_buf() };
    let output = run.tools.run(invocation).await?;
    Ok(Response::Printed(with_process_result(Map::new(), &output)))
}
