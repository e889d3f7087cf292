//! `Fleet` and `Agent`: real `anneal-agent run` daemons registered with a `Shim`. Each agent has
//! its own dir inside the fleet's temp dir (`<name>/agent.toml`, `token`, `state/`, `hooks/`,
//! `agent.log`), polls its server's metadata URL (`poll_interval_secs = 1`,
//! `hook_kill_grace_secs = 1`) and runs in its own process group, stopped when it drops.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;
use tokio::process::Command;

use crate::binaries::agent_binary;
use crate::process::{CommandOutput, Daemon, run_command};
use crate::shim::Shim;

/// Extra configuration for agents, on top of the harness's defaults.
#[derive(Debug, Clone, Default)]
pub struct AgentSettings {
    /// Extra `key = value` lines for the `[agent]` table (e.g. `"parallel = 2"`); a line setting
    /// `poll_interval_secs` or `hook_kill_grace_secs` replaces the harness's default of 1.
    pub agent_lines: Vec<String>,
    /// The `[agent.hook_env]` table: extra environment variables for every hook.
    pub hook_env: BTreeMap<String, String>,
}

impl AgentSettings {
    /// Adds an `[agent]` line such as `"parallel = 2"`.
    pub fn line(mut self, line: &str) -> AgentSettings {
        self.agent_lines.push(line.to_string());
        self
    }

    /// Whether an `[agent]` line of these settings sets `key`.
    fn sets(&self, key: &str) -> bool {
        self.agent_lines.iter().any(|line| line.split('=').next().is_some_and(|name| name.trim() == key))
    }

    /// Adds a hook environment variable.
    pub fn hook_env(mut self, name: &str, value: &str) -> AgentSettings {
        self.hook_env.insert(name.to_string(), value.to_string());
        self
    }
}

/// One agent: its server's credentials, its files, and its daemon while it runs.
pub struct Agent {
    name: String,
    dir: PathBuf,
    credentials: Value,
    daemon: Option<Daemon>,
}

impl Agent {
    /// Registers `name` with `anneal-shim server add NAME --format json` and writes the agent's
    /// token and config under `parent/name`. Does not start it.
    pub async fn register(shim: &Shim, parent: &Path, name: &str, settings: &AgentSettings) -> Agent {
        let credentials = shim.cli_json(&["server", "add", name, "--format", "json"]).await;
        let dir = parent.join(name);
        std::fs::create_dir_all(dir.join("hooks")).expect("agent dir");
        let agent = Agent { name: name.to_string(), dir, credentials, daemon: None };
        let token = agent.credentials["token"].as_str().expect("server add prints a token");
        std::fs::write(agent.token_file(), token).expect("write token");
        std::fs::set_permissions(agent.token_file(), std::fs::Permissions::from_mode(0o600)).expect("chmod token");
        agent.write_config(settings);
        agent
    }

    pub fn name(&self) -> &str {
        &self.name
    }
    /// What `server add --format json` printed: `name`, `token`, `metadata_url`, `request_url`
    /// (`null` for a standalone agent).
    pub fn credentials(&self) -> &Value {
        &self.credentials
    }
    pub fn metadata_url(&self) -> &str {
        self.credentials["metadata_url"].as_str().expect("a registered agent has a metadata_url")
    }
    pub fn dir(&self) -> &Path {
        &self.dir
    }
    pub fn config_path(&self) -> PathBuf {
        self.dir.join("agent.toml")
    }
    pub fn token_file(&self) -> PathBuf {
        self.dir.join("token")
    }
    pub fn state_dir(&self) -> PathBuf {
        self.dir.join("state")
    }
    pub fn hooks_dir(&self) -> PathBuf {
        self.dir.join("hooks")
    }
    pub fn log_path(&self) -> PathBuf {
        self.dir.join("agent.log")
    }
    /// The daemon's stderr (`ANNEAL_LOG=debug`) so far.
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(self.log_path()).unwrap_or_default()
    }

    /// An agent that is not registered with a shim: its config's sources are `sources` (TOML
    /// `[[source]]` tables), e.g. a `local` dir or an `http` URL of a test server.
    pub fn standalone(parent: &Path, name: &str, settings: &AgentSettings, sources: &str) -> Agent {
        let dir = parent.join(name);
        std::fs::create_dir_all(dir.join("hooks")).expect("agent dir");
        let agent = Agent { name: name.to_string(), dir, credentials: Value::Null, daemon: None };
        agent.write_config_with_sources(settings, sources);
        agent
    }

    /// (Re)writes `agent.toml` of a registered agent: the harness's `[agent]` keys, `settings`,
    /// one http source (its metadata URL and token file).
    pub fn write_config(&self, settings: &AgentSettings) {
        // A shim that knows its replicas lists them all; the agent fails over between them.
        let replicas: Vec<String> = self.credentials["metadata_urls"]
            .as_array()
            .map(|urls| urls.iter().filter_map(Value::as_str).map(toml_string).collect())
            .unwrap_or_default();
        let url =
            if replicas.len() > 1 { format!("[{}]", replicas.join(", ")) } else { toml_string(self.metadata_url()) };
        let source = format!(
            "[[source]]\nkind = \"http\"\nurl = {url}\ntoken_file = {}\n",
            toml_string(&self.token_file().display().to_string()),
        );
        self.write_config_with_sources(settings, &source);
    }

    /// (Re)writes `agent.toml`: the harness's `[agent]` keys, `settings`, then `sources`.
    pub fn write_config_with_sources(&self, settings: &AgentSettings, sources: &str) {
        let mut text = format!(
            "[agent]\nstate_dir = {}\nhooks_dirs = [{}]\n",
            toml_string(&self.state_dir().display().to_string()),
            toml_string(&self.hooks_dir().display().to_string()),
        );
        // A default the settings set themselves is left out: TOML refuses a key given twice.
        for (key, default) in [("poll_interval_secs", "1"), ("hook_kill_grace_secs", "1")] {
            if !settings.sets(key) {
                text.push_str(&format!("{key} = {default}\n"));
            }
        }
        for line in &settings.agent_lines {
            text.push_str(line);
            text.push('\n');
        }
        if !settings.hook_env.is_empty() {
            text.push_str("\n[agent.hook_env]\n");
            for (name, value) in &settings.hook_env {
                text.push_str(&format!("{} = {}\n", toml_string(name), toml_string(value)));
            }
        }
        text.push('\n');
        text.push_str(sources);
        std::fs::write(self.config_path(), text).expect("write agent config");
    }

    /// Installs an executable hook for `group`.
    pub fn install_hook(&self, group: &str, body: &str) {
        let path = self.hooks_dir().join(group);
        std::fs::write(&path, body).expect("write hook");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod hook");
    }

    /// Starts `anneal-agent run` in its own process group (stderr to `agent.log`).
    pub fn start(&mut self) {
        self.start_logging("debug");
    }

    /// `start` with `ANNEAL_LOG=<log_filter>` (e.g. `trace`).
    pub fn start_logging(&mut self, log_filter: &str) {
        self.launch(&[], log_filter);
    }

    /// `start` through `wrapper`: a program and its first arguments (e.g. a shell that sets a
    /// limit and `exec`s the rest of its arguments), followed by the agent's command line.
    pub fn start_wrapped(&mut self, wrapper: &[&str]) {
        self.launch(wrapper, "debug");
    }

    fn launch(&mut self, wrapper: &[&str], log_filter: &str) {
        assert!(self.daemon.is_none(), "agent {} is already running", self.name);
        let mut command = match wrapper.split_first() {
            Some((program, arguments)) => {
                let mut command = Command::new(program);
                command.args(arguments).arg(agent_binary());
                command
            }
            None => Command::new(agent_binary()),
        };
        command.arg("run").arg("--config").arg(self.config_path()).env("ANNEAL_LOG", log_filter);
        self.daemon = Some(Daemon::spawn(command, &self.dir.join("agent.out"), &self.log_path()));
    }

    pub fn is_running(&self) -> bool {
        self.daemon.is_some()
    }

    /// Whether the daemon was started and has not exited since (a crash shows here).
    pub fn is_alive(&mut self) -> bool {
        self.daemon.as_mut().is_some_and(Daemon::is_alive)
    }

    /// The daemon's process id (= its process group id) while it runs.
    pub fn pid(&self) -> Option<i32> {
        self.daemon.as_ref().and_then(Daemon::pid)
    }

    /// SIGTERM and wait for a clean exit.
    pub async fn stop(&mut self) {
        let mut daemon = self.daemon.take().expect("the agent is running");
        let status = daemon.terminate(Duration::from_secs(15)).await;
        assert!(status.success(), "agent {} exits cleanly on SIGTERM: {status:?}\n{}", self.name, self.log_text());
    }

    /// SIGKILL of the agent's process group (a crash).
    pub async fn crash(&mut self) {
        self.daemon.take().expect("the agent is running").kill().await;
    }

    /// Runs `anneal-agent <args> --config <its config>` to completion.
    pub async fn command(&self, args: &[&str]) -> CommandOutput {
        let mut command = Command::new(agent_binary());
        command.args(args).arg("--config").arg(self.config_path());
        run_command(command, Duration::from_secs(30)).await
    }

    /// `anneal-agent status --json`, one row per deployment.
    pub async fn status(&self) -> Vec<Value> {
        let stdout = self.command(&["status", "--json"]).await.expect_success("anneal-agent status --json");
        serde_json::from_str(&stdout).unwrap_or_else(|error| panic!("status --json is not JSON ({error}): {stdout}"))
    }
}

/// Several agents in one temp dir, each registered with a shim and running.
pub struct Fleet {
    agents: Vec<Agent>,
    dir: tempfile::TempDir,
}

impl Fleet {
    /// Registers and starts one agent per name.
    pub async fn start(shim: &Shim, names: &[&str], settings: &AgentSettings) -> Fleet {
        let dir = tempfile::Builder::new().prefix("anneal-fleet-").tempdir().expect("temp dir");
        let mut agents = Vec::new();
        for name in names {
            let mut agent = Agent::register(shim, dir.path(), name, settings).await;
            agent.start();
            agents.push(agent);
        }
        Fleet { agents, dir }
    }

    /// Registers and starts one agent per name, each with the shim `shims[index % shims.len()]` (replicas
    /// of one database: each agent's first URL is the replica it was registered with).
    pub async fn start_across(shims: &[&Shim], names: &[&str], settings: &AgentSettings) -> Fleet {
        let dir = tempfile::Builder::new().prefix("anneal-fleet-").tempdir().expect("temp dir");
        let mut agents = Vec::new();
        for (index, name) in names.iter().enumerate() {
            let mut agent = Agent::register(shims[index % shims.len()], dir.path(), name, settings).await;
            agent.start();
            agents.push(agent);
        }
        Fleet { agents, dir }
    }

    /// The fleet's temp dir (a place for files shared by the agents' scripts).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    pub fn agents(&self) -> &[Agent] {
        &self.agents
    }

    /// The agent called `name` (panics if there is none).
    pub fn agent(&self, name: &str) -> &Agent {
        self.agents.iter().find(|agent| agent.name == name).unwrap_or_else(|| panic!("no agent {name}"))
    }

    pub fn agent_mut(&mut self, name: &str) -> &mut Agent {
        self.agents.iter_mut().find(|agent| agent.name == name).unwrap_or_else(|| panic!("no agent {name}"))
    }

    /// Every agent's log, headed by its name (for failure messages).
    pub fn logs(&self) -> String {
        self.agents.iter().map(|agent| format!("--- {} ---\n{}\n", agent.name, agent.log_text())).collect()
    }
}

/// A TOML basic string.
pub fn toml_string(text: &str) -> String {
    let mut quoted = String::from("\"");
    for character in text.chars() {
        match character {
            '"' => quoted.push_str("\\\""),
            '\\' => quoted.push_str("\\\\"),
            character if character.is_control() => quoted.push_str(&format!("\\u{:04X}", u32::from(character))),
            character => quoted.push(character),
        }
    }
    quoted.push('"');
    quoted
}
