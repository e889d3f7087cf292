//! Test harness for running the real `anneal-agent` binary: a temp dir with a config, state dir
//! and hooks dir; `once` with a deadline; `run` as a child in its own process group that is
//! killed (as a group) when the handle drops; helpers for loopback metadata and signal servers.

#![allow(dead_code)]

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio::process::{Child, Command};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, Request, ResponseTemplate};

pub const BINARY: &str = env!("CARGO_BIN_EXE_anneal-agent");

/// A sandbox for one agent: `root/agent.toml`, `root/state`, `root/hooks`, `root/local.d`.
pub struct Sandbox {
    pub dir: tempfile::TempDir,
}

pub struct Finished {
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
}

impl Sandbox {
    pub fn new() -> Sandbox {
        let dir = tempfile::tempdir().expect("temp dir");
        for sub in ["hooks", "local.d"] {
            std::fs::create_dir_all(dir.path().join(sub)).expect("mkdir");
        }
        Sandbox { dir }
    }

    pub fn root(&self) -> &Path {
        self.dir.path()
    }
    pub fn state(&self) -> PathBuf {
        self.root().join("state")
    }
    pub fn hooks(&self) -> PathBuf {
        self.root().join("hooks")
    }
    pub fn local(&self) -> PathBuf {
        self.root().join("local.d")
    }
    pub fn config_path(&self) -> PathBuf {
        self.root().join("agent.toml")
    }

    /// Writes a config with `[agent]` pointing into the sandbox, `extra_agent` lines appended to
    /// `[agent]`, and `sources` (TOML `[[source]]` blocks) after it.
    pub fn write_config(&self, extra_agent: &str, sources: &str) {
        let text = format!(
            "[agent]\nstate_dir = \"{}\"\nhooks_dirs = [\"{}\"]\npoll_interval_secs = 1\nhook_kill_grace_secs = 1\n{extra_agent}\n\n{sources}\n",
            self.state().display(),
            self.hooks().display()
        );
        std::fs::write(self.config_path(), text).expect("write config");
    }

    /// A config whose only source is the sandbox's local.d directory.
    pub fn write_local_config(&self, extra_agent: &str) {
        self.write_config(
            extra_agent,
            &format!("[[source]]\nkind = \"local\"\npath = \"{}\"\n", self.local().display()),
        );
    }

    /// A config whose only source is an http URL.
    pub fn write_http_config(&self, extra_agent: &str, url: &str) {
        self.write_config(extra_agent, &format!("[[source]]\nkind = \"http\"\nurl = \"{url}\"\n"));
    }

    /// Puts `document` into local.d as `name`.
    pub fn write_local_document(&self, name: &str, document: &Value) {
        std::fs::write(self.local().join(name), serde_json::to_vec_pretty(document).expect("json")).expect("write doc");
    }

    /// Installs an executable hook `group` with `body`.
    pub fn install_hook(&self, group: &str, body: &str) {
        install_executable(&self.hooks().join(group), body);
    }

    /// Runs `anneal-agent <args> --config <sandbox config>` to completion (killed after `limit`).
    pub async fn agent(&self, args: &[&str], limit: Duration) -> Finished {
        let mut command = Command::new(BINARY);
        command.args(args).arg("--config").arg(self.config_path());
        run_to_end(command, None, limit).await
    }

    pub async fn once(&self) -> Finished {
        self.agent(&["once"], Duration::from_secs(60)).await
    }

    /// `status --json` parsed.
    pub async fn status(&self) -> Vec<Value> {
        let finished = self.agent(&["status", "--json"], Duration::from_secs(20)).await;
        assert!(finished.status.success(), "status failed: {}", finished.stderr);
        serde_json::from_str(&finished.stdout).expect("status json")
    }

    pub fn status_of<'a>(rows: &'a [Value], id: &str) -> &'a Value {
        rows.iter().find(|row| row["id"] == id).unwrap_or_else(|| panic!("no status row for {id}: {rows:?}"))
    }

    /// Starts `anneal-agent run` in its own process group.
    pub fn spawn_run(&self) -> Daemon {
        self.spawn_run_with_env(&[])
    }

    /// Starts `anneal-agent run` with extra environment variables.
    pub fn spawn_run_with_env(&self, env: &[(&str, &str)]) -> Daemon {
        let child = Command::new(BINARY)
            .envs(env.iter().copied())
            .arg("run")
            .arg("--config")
            .arg(self.config_path())
            .env("ANNEAL_LOG", "debug")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::from(std::fs::File::create(self.root().join("agent.log")).expect("log file")))
            .process_group(0)
            .kill_on_drop(true)
            .spawn()
            .expect("spawn agent");
        Daemon { child, log: self.root().join("agent.log") }
    }
}

pub fn install_executable(path: &Path, body: &str) {
    std::fs::write(path, body).expect("write executable");
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
}

/// Runs `command` with `stdin`, in its own process group, killing the group after `limit`.
pub async fn run_to_end(mut command: Command, stdin: Option<&str>, limit: Duration) -> Finished {
    use tokio::io::AsyncWriteExt;
    command
        .stdin(if stdin.is_some() { Stdio::piped() } else { Stdio::null() })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    let mut child = command.spawn().expect("spawn");
    if let (Some(text), Some(mut pipe)) = (stdin, child.stdin.take()) {
        pipe.write_all(text.as_bytes()).await.expect("stdin");
    }
    let pid = child.id().expect("pid") as i32;
    match tokio::time::timeout(limit, child.wait_with_output()).await {
        Ok(output) => {
            let output = output.expect("wait");
            Finished {
                status: output.status,
                stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
                stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
            }
        }
        Err(_) => {
            let _ = nix::sys::signal::killpg(nix::unistd::Pid::from_raw(pid), nix::sys::signal::Signal::SIGKILL);
            panic!("command did not finish within {limit:?}");
        }
    }
}

/// A running `anneal-agent run`; its process group is killed when dropped.
pub struct Daemon {
    pub child: Child,
    pub log: PathBuf,
}

impl Daemon {
    pub fn pid(&self) -> i32 {
        self.child.id().map_or(0, |pid| pid as i32)
    }

    pub fn terminate(&self) {
        let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(self.pid()), nix::sys::signal::Signal::SIGTERM);
    }

    /// SIGKILL of the agent alone (a crash): its hooks' groups live on.
    pub fn crash(&self) {
        let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(self.pid()), nix::sys::signal::Signal::SIGKILL);
    }

    pub async fn wait(&mut self, limit: Duration) -> ExitStatus {
        tokio::time::timeout(limit, self.child.wait()).await.expect("agent did not exit in time").expect("wait")
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Some(pid) = self.child.id() {
            let _ = nix::sys::signal::killpg(nix::unistd::Pid::from_raw(pid as i32), nix::sys::signal::Signal::SIGKILL);
        }
    }
}

/// Polls `condition` every 50 ms until it holds or `limit` passes.
pub async fn eventually(limit: Duration, what: &str, mut condition: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !condition() {
        assert!(Instant::now() < deadline, "timed out waiting for: {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A loopback server that answers 200 to any POST/PUT under /signal/ and records them.
pub async fn signal_receiver() -> MockServer {
    let server = MockServer::start().await;
    Mock::given(wiremock::matchers::path_regex("^/signal/.*"))
        .respond_with(ResponseTemplate::new(200))
        .mount(&server)
        .await;
    server
}

/// The signals a receiver got, in arrival order.
pub async fn signals(server: &MockServer) -> Vec<Request> {
    server
        .received_requests()
        .await
        .unwrap_or_default()
        .into_iter()
        .filter(|request| request.url.path().starts_with("/signal/"))
        .collect()
}

pub fn body_json(request: &Request) -> Value {
    serde_json::from_slice(&request.body).expect("signal body is JSON")
}

/// Serves `document` at `/metadata`.
pub async fn serve_metadata(server: &MockServer, document: &Value) {
    Mock::given(method("GET"))
        .and(path("/metadata"))
        .respond_with(ResponseTemplate::new(200).set_body_json(document))
        .mount(server)
        .await;
}

/// A script deployment with NO_SIGNAL unless `signal_url` is given.
pub fn script_deployment(id: &str, name: &str, script: &str, signal_url: Option<&str>) -> Value {
    let mut inputs = vec![serde_json::json!({"name": "deploy_action", "type": "String", "value": "CREATE"})];
    if let Some(url) = signal_url {
        inputs.push(serde_json::json!({"name": "deploy_signal_id", "type": "String", "value": url}));
        inputs.push(serde_json::json!({"name": "deploy_signal_verb", "type": "String", "value": "POST"}));
    }
    serde_json::json!({
        "id": id, "name": name, "group": "script", "creation_time": "2024-05-01T10:00:00Z",
        "config": script, "options": null, "inputs": inputs,
        "outputs": [{"name": "result", "type": "String", "error_output": false}]
    })
}
