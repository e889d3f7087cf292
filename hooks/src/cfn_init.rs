//! heat-agents' `cfn-init` hook: the config (a map, or JSON text of one) is written as
//! `{"AWS::CloudFormation::Init": config}` to `<dir>/last_metadata`, where cfn-init finds it
//! without credentials, then `cfn-init` runs with no arguments. Settings:
//! `HEAT_CFN_INIT_LAST_METADATA_DIR`, `HEAT_CFN_INIT_CMD`.

use std::path::PathBuf;

use anneal_protocol::pyjson;
use serde_json::{Map, Value};

use crate::files::{prepare_dir, write_file};
use crate::{HookError, Invocation, Response, Run, Tools, with_process_result};

pub(crate) async fn run<T: Tools>(run: &mut Run<'_, T>) -> Result<Response, HookError> {
    let dir = PathBuf::from(run.env.get_or("HEAT_CFN_INIT_LAST_METADATA_DIR", "/var/cache/heat-cfntools"));
    let program = run.env.get_or("HEAT_CFN_INIT_CMD", "cfn-init").to_string();
    let config = match &run.deployment.config {
        Value::Object(config) => Value::Object(config.clone()),
        Value::String(text) => serde_json::from_str(text)
            .map_err(|error| HookError::BadDeployment { reason: format!("config is not JSON: {error}") })?,
        _ => return Err(HookError::BadDeployment { reason: "config must be a map or its JSON text".into() }),
    };
    let mut metadata = Map::new();
    metadata.insert("AWS::CloudFormation::Init".into(), config);
    prepare_dir(&dir, 0o700)?;
    write_file(&dir.join("last_metadata"), pyjson::dumps(&Value::Object(metadata), true).as_bytes(), 0o700)?;
    let invocation =
        Invocation { program, args: Vec::new(), env: run.env.variables().to_vec(), cwd: run.cwd.to_path_buf() };
    let output = run.tools.run(invocation).await?;
    Ok(Response::Printed(with_process_result(Map::new(), &output)))
}
