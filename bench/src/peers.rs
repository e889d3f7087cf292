//! The OpenStack peers, as `tests/peers/setup.sh` installs them in `tests/peers/.cache` (never
//! copied into this repo): the venv with os-collect-config / os-refresh-config /
//! os-apply-config, and heat-agents' `55-heat-config`, `hook-script.py` and
//! `heat-config-notify`. Every path they use is redirected into a temp dir, and the venv's
//! `anneal_peer_sandbox` (enabled by `ANNEAL_PEER_SANDBOX`) keeps them on loopback.

use std::path::{Path, PathBuf};

use tokio::process::Command;

use crate::error::{BenchError, BenchResult, create_dir, file_error, write_file};

const NEEDED: [&str; 6] = [
    "heat-agents/heat-config/os-refresh-config/configure.d/55-heat-config",
    "heat-agents/heat-config/bin/heat-config-notify",
    "heat-agents/heat-config-script/install.d/hook-script.py",
    "venv/bin/os-collect-config",
    "venv/bin/os-refresh-config",
    "venv/bin/os-apply-config",
];

/// The installed peers.
#[derive(Debug, Clone)]
pub struct Peers {
    cache: PathBuf,
}

impl Peers {
    /// The cache, or why it cannot be used (names the setup command).
    pub fn locate() -> Result<Peers, String> {
        let cache = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/peers/.cache");
        for needed in NEEDED {
            if !cache.join(needed).exists() {
                return Err(format!(
                    "{} is missing: install the OpenStack peers with tests/peers/setup.sh",
                    cache.join(needed).display()
                ));
            }
        }
        Ok(Peers { cache })
    }

    /// heat-agents' `hook-<group>.py` (the file its element installs as `hooks/<group>`).
    pub fn hook(&self, group: &str) -> PathBuf {
        self.heat_agents().join(format!("heat-config-{group}/install.d/hook-{group}.py"))
    }

    fn heat_agents(&self) -> PathBuf {
        self.cache.join("heat-agents")
    }

    pub fn venv_bin(&self, name: &str) -> PathBuf {
        self.cache.join("venv/bin").join(name)
    }

    /// heat-agents' `55-heat-config`.
    pub fn heat_config(&self) -> PathBuf {
        self.heat_agents().join("heat-config/os-refresh-config/configure.d/55-heat-config")
    }

    /// The environment of every peer process run in `root`: the venv first on PATH, the sandbox,
    /// and heat-config's paths inside `root`.
    pub fn environment(&self, root: &Path) -> Vec<(String, String)> {
        let at = |relative: &str| root.join(relative).display().to_string();
        let notify = self.heat_agents().join("heat-config/bin/heat-config-notify");
        vec![
            ("PATH".into(), format!("{}:/usr/bin:/bin", self.cache.join("venv/bin").display())),
            // os-collect-config breaks under C.UTF-8.
            ("LC_ALL".into(), "C".into()),
            ("HOME".into(), root.display().to_string()),
            ("ANNEAL_PEER_SANDBOX".into(), at("peer-logs")),
            ("OS_REFRESH_CONFIG_BASE_DIR".into(), at("orc")),
            ("OS_CONFIG_APPLIER_TEMPLATES".into(), at("templates")),
            ("HEAT_SHELL_CONFIG".into(), at("run/heat-config")),
            ("HEAT_CONFIG_DEPLOYED".into(), at("deployed")),
            ("HEAT_CONFIG_DEPLOYED_OLD".into(), at("deployed-old")),
            ("HEAT_CONFIG_HOOKS".into(), at("hooks")),
            ("HEAT_CONFIG_NOTIFY".into(), notify.display().to_string()),
            ("HEAT_SCRIPT_WORKING".into(), at("script-working")),
            ("HEAT_SCRIPT_OUTPUTS".into(), at("script-outputs")),
        ]
    }

    /// `root/hooks/script` → heat-agents' hook-script.py, and the sandbox's log dir.
    pub fn prepare_heat_config(&self, root: &Path) -> BenchResult<()> {
        create_dir(&root.join("hooks"))?;
        create_dir(&root.join("peer-logs"))?;
        create_dir(&root.join("run"))?;
        symlink(&self.heat_agents().join("heat-config-script/install.d/hook-script.py"), &root.join("hooks/script"))
    }

    /// The whole stock chain under `root`: os-refresh-config's configure.d with heat-agents'
    /// `20-os-apply-config` and `55-heat-config`, and os-apply-config's template tree mirroring
    /// `root` (its output root is `/`) so that `{{deployments}}` lands in `root/run/heat-config`.
    pub fn prepare_refresh_chain(&self, root: &Path) -> BenchResult<()> {
        self.prepare_heat_config(root)?;
        let configure = root.join("orc/configure.d");
        create_dir(&configure)?;
        for part in ["20-os-apply-config", "55-heat-config"] {
            let target = self.heat_agents().join("heat-config/os-refresh-config/configure.d").join(part);
            symlink(&target, &configure.join(part))?;
        }
        let relative = root.strip_prefix("/").map_err(|_| BenchError::Failed("temp dir is not absolute".into()))?;
        let template_dir = root.join("templates").join(relative).join("run");
        create_dir(&template_dir)?;
        let template = self.heat_agents().join("heat-config/os-apply-config/var/run/heat-config/heat-config");
        std::fs::copy(&template, template_dir.join("heat-config")).map_err(file_error(&template))?;
        Ok(())
    }

    /// `os-collect-config --config-file root/os-collect-config.conf` with `[DEFAULT]` `settings`
    /// lines plus cache dirs inside `root`, and `sections` appended; a clean environment.
    pub fn os_collect_config(&self, root: &Path, settings: &str, sections: &str) -> BenchResult<Command> {
        let config = root.join("os-collect-config.conf");
        let text = format!(
            "[DEFAULT]\n{settings}\ncachedir = {root}/occ\nbackup_cachedir = {root}/occ-backup\n\n{sections}\n",
            root = root.display()
        );
        write_file(&config, &text)?;
        let mut command = Command::new(self.venv_bin("os-collect-config"));
        command.arg("--config-file").arg(&config).current_dir(root).env_clear();
        command.envs(self.environment(root));
        Ok(command)
    }
}

fn symlink(target: &Path, link: &Path) -> BenchResult<()> {
    std::os::unix::fs::symlink(target, link).map_err(file_error(link))
}
