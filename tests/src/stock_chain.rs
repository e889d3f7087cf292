//! One "deployed server" run by the stock OpenStack agents against a real Heat: the chain a Heat
//! image runs, unchanged, from PyPI and heat-agents' sdist (`tests/peers/setup.sh`):
//!
//! ```text
//! os-collect-config (collectors: heat or cfn only, polling interval 1)
//!   └─ command: os-refresh-config --lockfile <root>/orc.lock
//!        └─ configure.d/20-os-apply-config  renders heat-agents' templates: the deployments
//!        │                                    (run/heat-config) and os-collect-config.conf
//!        └─ configure.d/55-heat-config      └─ hooks/script = heat-agents' hook-script.py
//!                                            └─ heat-config-notify → HEAT_SIGNAL / CFN_SIGNAL
//! ```
//!
//! `StockServer::start` renders os-collect-config.conf from the server's metadata with
//! os-apply-config and heat-agents' template, as a Heat image's boot does, then starts
//! os-collect-config in its own process group (stopped when the value drops). Every path is
//! inside the server's temp dir: os-apply-config renders `<templates>/X` to `/X`, so the
//! template tree mirrors the temp dir's absolute path. The collectors are only those of the
//! metadata among `heat` and `cfn`: never os-collect-config's default list (its ec2 collector
//! would ask 169.254.169.254), never `local` (it fails under Python 3.11 with a C.UTF-8
//! locale). The venv's `anneal_peer_sandbox` (setup.sh) refuses any connection off loopback.

use std::path::{Path, PathBuf};

use serde_json::Value;
use tokio::process::Command;

use crate::peers;
use crate::process::{Daemon, run_command};

/// The collectors the stock chain may use here.
const ALLOWED_COLLECTORS: [&str; 2] = ["heat", "cfn"];

/// A running os-collect-config chain for one server.
pub struct StockServer {
    daemon: Daemon,
    dir: tempfile::TempDir,
}

impl StockServer {
    /// Lays out the agent root, renders os-collect-config.conf from `metadata` (what Heat
    /// answers for the server's metadata, `{"metadata": {...}}` or bare) and starts the chain.
    pub async fn start(metadata: &Value) -> StockServer {
        let cache = peers_cache();
        let dir = tempfile::Builder::new().prefix("anneal-real-heat-stock-").tempdir().expect("temp dir");
        let root = dir.path();
        lay_out(root, &cache);
        let metadata = metadata.get("metadata").unwrap_or(metadata);
        let collectors = collectors(metadata);
        let metadata_file = root.join("server-metadata.json");
        std::fs::write(&metadata_file, metadata.to_string()).expect("write the server's metadata");

        let mut render = Command::new(cache.join("venv/bin/os-apply-config"));
        render.arg("--templates").arg(root.join("templates")).arg("--metadata").arg(&metadata_file);
        environment(&mut render, root, &cache);
        run_command(render, std::time::Duration::from_secs(60))
            .await
            .expect_success("os-apply-config rendering os-collect-config.conf");
        let config = root.join("etc/os-collect-config.conf");
        assert!(config.is_file(), "os-apply-config rendered no {}", config.display());

        let mut command = Command::new(cache.join("venv/bin/os-collect-config"));
        command.arg("--config-file").arg(&config);
        command.arg("--command").arg(format!("os-refresh-config --lockfile {}", root.join("orc.lock").display()));
        command.arg("--cachedir").arg(root.join("occ")).arg("--backup-cachedir").arg(root.join("occ-backup"));
        command.args(["--polling-interval", "1", "--min-polling-interval", "1", "--debug"]);
        command.args(&collectors);
        environment(&mut command, root, &cache);
        let daemon = Daemon::spawn(command, &root.join("occ.out"), &root.join("occ.log"));
        StockServer { daemon, dir }
    }

    /// The server's temp dir.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// os-collect-config's log (everything the chain printed), headed for a failure message.
    pub fn logs(&self) -> String {
        format!("--- stock chain (os-collect-config log) ---\n{}", self.daemon.log_text())
    }

    /// Whether os-collect-config still runs.
    pub fn is_alive(&mut self) -> bool {
        self.daemon.is_alive()
    }

    /// The derived config ids 55-heat-config has deployed (`<root>/deployed/<id>.json`).
    pub fn deployed_ids(&self) -> Vec<String> {
        let Ok(entries) = std::fs::read_dir(self.dir().join("deployed")) else { return Vec::new() };
        let mut ids: Vec<String> = entries
            .filter_map(|entry| entry.ok())
            .filter_map(|entry| entry.file_name().to_str().map(str::to_string))
            .filter_map(|name| name.strip_suffix(".json").filter(|id| !id.ends_with(".notify")).map(str::to_string))
            .collect();
        ids.sort();
        ids
    }
}

/// tests/peers/.cache with what the chain needs; fails (never skips) when something is missing.
fn peers_cache() -> PathBuf {
    peers::cache(&[
        "heat-agents/heat-config/os-refresh-config/configure.d/55-heat-config",
        "heat-agents/heat-config/os-apply-config/etc/os-collect-config.conf",
        "heat-agents/heat-config/bin/heat-config-notify",
        "heat-agents/heat-config-script/install.d/hook-script.py",
        "venv/bin/os-collect-config",
        "venv/bin/os-refresh-config",
        "venv/bin/os-apply-config",
    ])
}

/// The metadata's collectors that may run here (at least one, else the metadata is not a
/// deployed server's).
fn collectors(metadata: &Value) -> Vec<String> {
    let listed = metadata["os-collect-config"]["collectors"].as_array().cloned().unwrap_or_default();
    let allowed: Vec<String> = listed
        .iter()
        .filter_map(Value::as_str)
        .filter(|name| ALLOWED_COLLECTORS.contains(name))
        .map(str::to_string)
        .collect();
    assert!(!allowed.is_empty(), "no heat or cfn collector in the server's metadata: {metadata}");
    allowed
}

/// heat-agents' files in the root: os-refresh-config's configure.d, the `script` hook, and the
/// os-apply-config templates, mirrored under the root's absolute path.
fn lay_out(root: &Path, cache: &Path) {
    let heat_agents = cache.join("heat-agents");
    let configure = root.join("orc/configure.d");
    std::fs::create_dir_all(&configure).expect("configure.d");
    for part in ["20-os-apply-config", "55-heat-config"] {
        symlink(&heat_agents.join("heat-config/os-refresh-config/configure.d").join(part), &configure.join(part));
    }
    for directory in ["hooks", "peer-logs", "etc"] {
        std::fs::create_dir_all(root.join(directory)).expect("agent root directory");
    }
    symlink(&heat_agents.join("heat-config-script/install.d/hook-script.py"), &root.join("hooks/script"));
    let mirrored = root.join("templates").join(root.strip_prefix("/").expect("an absolute temp dir"));
    let templates = heat_agents.join("heat-config/os-apply-config");
    for (template, rendered) in [
        ("var/run/heat-config/heat-config", "run/heat-config"),
        ("etc/os-collect-config.conf", "etc/os-collect-config.conf"),
    ] {
        let target = mirrored.join(rendered);
        std::fs::create_dir_all(target.parent().expect("a parent")).expect("template dir");
        std::fs::copy(templates.join(template), &target).expect("copy a heat-agents template");
    }
}

/// A clean environment pointing every heat-config variable into the root.
fn environment(command: &mut Command, root: &Path, cache: &Path) {
    let heat_agents = cache.join("heat-agents");
    let path = |relative: &str| root.join(relative).display().to_string();
    command.current_dir(root).env_clear();
    for (name, value) in [
        ("PATH", format!("{}:/usr/bin:/bin", cache.join("venv/bin").display())),
        // os-collect-config cannot set a C.UTF-8 locale under Python 3.11.
        ("LC_ALL", "C".to_string()),
        ("HOME", path("")),
        ("ANNEAL_PEER_SANDBOX", path("peer-logs")),
        ("OS_REFRESH_CONFIG_BASE_DIR", path("orc")),
        ("OS_CONFIG_APPLIER_TEMPLATES", path("templates")),
        ("HEAT_SHELL_CONFIG", path("run/heat-config")),
        ("HEAT_CONFIG_DEPLOYED", path("deployed")),
        ("HEAT_CONFIG_DEPLOYED_OLD", path("deployed-old")),
        ("HEAT_CONFIG_HOOKS", path("hooks")),
        ("HEAT_CONFIG_NOTIFY", heat_agents.join("heat-config/bin/heat-config-notify").display().to_string()),
        ("HEAT_SCRIPT_WORKING", path("script-working")),
        ("HEAT_SCRIPT_OUTPUTS", path("script-outputs")),
    ] {
        command.env(name, value);
    }
}

fn symlink(target: &Path, link: &Path) {
    std::os::unix::fs::symlink(target, link)
        .unwrap_or_else(|error| panic!("symlink {} -> {}: {error}", link.display(), target.display()));
}
