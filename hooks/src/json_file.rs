//! heat-agents' `json-file` hook: the config maps file paths to data; each file is written as
//! `json.dump(data, indent=4, sort_keys=True, separators=(',', ': '))`, its directory made 0700
//! when missing. A relative path is refused (heat-agents' hook crashes on a bare file name and
//! writes others relative to wherever it was started).

use std::path::Path;

use anneal_protocol::pyjson;
use serde_json::Value;

use crate::files::{prepare_dir, write_file};
use crate::{HookError, Response, Run, success};

pub(crate) fn run<T>(run: &mut Run<'_, T>) -> Result<Response, HookError> {
    let Value::Object(files) = &run.deployment.config else {
        return Err(HookError::BadDeployment { reason: "config must map file paths to their data".into() });
    };
    for (name, data) in files {
        let path = Path::new(name);
        if !path.is_absolute() {
            return Err(HookError::BadDeployment { reason: format!("file path {name:?} is not absolute") });
        }
        prepare_dir(path.parent().unwrap_or(Path::new("/")), 0o700)?;
        write_file(path, pyjson::dumps_indented(data, 4, true).as_bytes(), 0o666)?;
    }
    Ok(Response::Printed(success()))
}
