//! One "deployed server" run by anneal-agent against a real Heat, configured only from the
//! server's metadata, as an operator of a deployed server would: a minimal `agent.toml`
//! (state and hooks dirs, `poll_interval_secs = 1`, one `local` source on an empty dir), then
//! `anneal-agent bootstrap --from-metadata MD.json --config agent.toml` with the JSON Heat
//! answers for `GET .../resources/server/metadata`, then `anneal-agent run` in its own process
//! group until the value drops.
//!
//! The `script` hook is heat-agents' own hook-script.py (copied from the peers cache), the one the
//! stock chain runs, so a difference between the two chains' `deploy_stdout` or outputs is a
//! difference of the agents, not of the hooks.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;
use tokio::process::Command;

use crate::binaries::agent_binary;
use crate::fleet::{Agent, AgentSettings, toml_string};
use crate::process::{CommandOutput, run_command};
use crate::{peers, private_temp_dir};

/// A deployed server run by anneal-agent.
pub struct AnnealServer {
    agent: Agent,
    dir: tempfile::TempDir,
    bootstrap: CommandOutput,
}

impl AnnealServer {
    /// Writes the agent's config, bootstraps it from `metadata` and starts `anneal-agent run`.
    /// Panics when bootstrap fails.
    pub async fn start(metadata: &Value, settings: AgentSettings) -> AnnealServer {
        let mut server = AnnealServer::prepare(settings);
        server.bootstrap = server.bootstrap_from(metadata).await;
        let bootstrap = &server.bootstrap;
        assert_eq!(bootstrap.code, 0, "anneal-agent bootstrap --from-metadata failed: {bootstrap:?}");
        server.agent.start();
        server
    }

    /// The config and hooks, not yet bootstrapped nor started.
    pub fn prepare(settings: AgentSettings) -> AnnealServer {
        let cache = peers::cache(&["heat-agents/heat-config-script/install.d/hook-script.py"]);
        let dir = private_temp_dir("anneal-real-heat-agent-");
        let empty = dir.path().join("local-empty");
        std::fs::create_dir_all(&empty).expect("the local source's dir");
        let settings = settings
            .hook_env("HEAT_SCRIPT_WORKING", &dir.path().join("script-working").display().to_string())
            .hook_env("HEAT_SCRIPT_OUTPUTS", &dir.path().join("script-outputs").display().to_string());
        let source = format!("[[source]]\nkind = \"local\"\npath = {}\n", toml_string(&empty.display().to_string()));
        let agent = Agent::standalone(dir.path(), "server", &settings, &source);
        let hook = agent.hooks_dir().join("script");
        std::fs::copy(cache.join("heat-agents/heat-config-script/install.d/hook-script.py"), &hook)
            .expect("copy heat-agents' hook-script.py");
        std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).expect("chmod the hook");
        let bootstrap = CommandOutput { code: -1, stdout: String::new(), stderr: String::new() };
        AnnealServer { agent, dir, bootstrap }
    }

    /// `anneal-agent bootstrap --from-metadata MD.json --config agent.toml`, MD.json holding
    /// `metadata` as given.
    pub async fn bootstrap_from(&self, metadata: &Value) -> CommandOutput {
        let file = self.dir.path().join("server-metadata.json");
        std::fs::write(&file, metadata.to_string()).expect("write the server's metadata");
        let mut command = Command::new(agent_binary());
        command.arg("bootstrap").arg("--from-metadata").arg(&file).arg("--config").arg(self.agent.config_path());
        run_command(command, Duration::from_secs(30)).await
    }

    pub fn agent(&self) -> &Agent {
        &self.agent
    }

    pub fn agent_mut(&mut self) -> &mut Agent {
        &mut self.agent
    }

    /// The server's temp dir (0700).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// What bootstrap wrote: `{state_dir}/os-collect-config.toml`.
    pub fn derived_sources_file(&self) -> PathBuf {
        self.agent.state_dir().join("os-collect-config.toml")
    }

    /// The agent's log, headed for a failure message.
    pub fn logs(&self) -> String {
        format!("--- anneal-agent (bootstrap: {:?}) ---\n{}", self.bootstrap, self.agent.log_text())
    }
}
