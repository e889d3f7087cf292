//! Test helpers shared by the hook module's tests: small `#!/bin/sh` scripts in temp dirs,
//! settings rooted in a temp dir, deployments from JSON.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anneal_protocol::Deployment;
use serde_json::Value;

use super::HookSettings;

/// The whole environment tests give a child.
pub(crate) fn environment() -> Vec<(String, String)> {
    vec![("PATH".into(), "/usr/local/bin:/usr/bin:/bin".into()), ("LANG".into(), "C.UTF-8".into())]
}

/// Writes an executable `#!/bin/sh` script `dir/name` with `body` and returns its path.
pub(crate) fn shell_script(dir: &Path, name: &str, body: &str) -> PathBuf {
    let path = dir.join(name);
    fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
    fs::set_permissions(&path, fs::Permissions::from_mode(0o755)).unwrap();
    path
}

/// Settings under `root`: hooks dirs `root/hooks1` and `root/hooks2` (created), work and outputs
/// dirs not yet created, short kill grace.
pub(crate) fn settings(root: &Path) -> HookSettings {
    let hooks_dirs = vec![root.join("hooks1"), root.join("hooks2")];
    for dir in &hooks_dirs {
        fs::create_dir_all(dir).unwrap();
    }
    HookSettings {
        hooks_dirs,
        work_dir: root.join("state/script"),
        outputs_dir: root.join("state/outputs"),
        base_env: environment(),
        kill_grace: Duration::from_millis(200),
        max_output_bytes: 1024 * 1024,
        run_markers_dir: None,
    }
}

pub(crate) fn deployment(document: Value) -> Deployment {
    serde_json::from_value(document).unwrap()
}
