//! `Shim`: a real `anneal-shim serve` on a loopback port with a SQLite database in its own temp
//! dir, plus its CLI (`anneal-shim <args> --url <url> --token-file <dir>/admin.token`). A restart
//! binds the same port again, so agents' configs and signal URLs stay valid. `Shim::start_replica`
//! starts one of several replicas of a PostgreSQL database instead (see `Replica`); its CLI reads
//! the shared admin token from a file the harness writes. Also the stack's
//! views tests read through the CLI (`stack_status`, `stack_outputs`, `settled`, ...) and
//! `capability_token`, the token a signal or handle URL ends with; `post_stack` for the API;
//! `alias_bomb_template`, the YAML alias bomb of issue 31.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Map, Value};
use tokio::process::Command;

use crate::binaries::shim_binary;
use crate::process::{CommandOutput, Daemon, run_command};
use crate::wait::wait_until;

/// How long a CLI command may take (`--wait` commands pass their own `--timeout` below this).
pub const CLI_LIMIT: Duration = Duration::from_secs(60);
const START_LIMIT: Duration = Duration::from_secs(20);
/// What every shim started here is given as its metrics token.
const METRICS_TOKEN: &str = "3e7a1c5b9d2f4e6a8c0b1d3f5a7c9e2b4d6f8a0c2e4b6d8f1a3c5e7b9d0f2a4c";

/// A running shim. Its process group is stopped when it drops; the temp dir is removed after.
pub struct Shim {
    daemon: Option<Daemon>,
    url: String,
    listen: String,
    /// `ANNEAL_LOG` of the server (`info` unless started with `start_logging`).
    log_filter: String,
    dir: tempfile::TempDir,
    /// A replica's database and the rest of its command line (`None`: SQLite in `dir`).
    replica: Option<Replica>,
    /// More `serve` flags (`start_with`), kept across restarts.
    serve_args: Vec<String>,
}

/// How a replica of a PostgreSQL database is started.
#[derive(Debug, Clone)]
pub struct Replica {
    /// `--db`.
    pub database_url: String,
    /// `ANNEAL_TOKEN`, the same for every replica (also written to the replica's token file
    /// for its CLI).
    pub admin_token: String,
    /// `--public-url`, repeated: this replica's own first (empty: the default).
    pub public_urls: Vec<String>,
}

impl Shim {
    /// Starts `anneal-shim serve --listen 127.0.0.1:0` on a fresh database; waits until it prints
    /// its URL.
    pub async fn start() -> Shim {
        Shim::start_logging("info").await
    }

    /// `start` with `ANNEAL_LOG=<log_filter>` (e.g. `trace`), kept across restarts.
    pub async fn start_logging(log_filter: &str) -> Shim {
        Shim::launched(log_filter, &[]).await
    }

    /// `start` with more `serve` flags (e.g. `--max-resources-per-stack -1`), kept across
    /// restarts.
    pub async fn start_with(serve_args: &[&str]) -> Shim {
        Shim::launched("info", serve_args).await
    }

    /// A shim listening on `listen`, on the SQLite database and secrets already in `dir`
    /// (`shim.db`, `admin.token`, `shim.key`: a fixture an earlier version wrote, say).
    pub async fn start_in(dir: tempfile::TempDir, listen: &str) -> Shim {
        Shim::launched_in(dir, listen, "info", &[]).await
    }

    async fn launched(log_filter: &str, serve_args: &[&str]) -> Shim {
        Shim::launched_in(crate::private_temp_dir("anneal-shim-"), "127.0.0.1:0", log_filter, serve_args).await
    }

    async fn launched_in(dir: tempfile::TempDir, listen: &str, log_filter: &str, serve_args: &[&str]) -> Shim {
        let serve_args: Vec<String> = serve_args.iter().map(|arg| (*arg).to_string()).collect();
        let (daemon, url) = launch(dir.path(), listen, log_filter, None, &serve_args).await;
        let listen = url.trim_start_matches("http://").to_string();
        let log_filter = log_filter.to_string();
        Shim { daemon: Some(daemon), url, listen, log_filter, dir, replica: None, serve_args }
    }

    /// A replica of a PostgreSQL database, listening on `listen` (`127.0.0.1:<port>`, or
    /// `127.0.0.1:0`), its own temp dir for its logs and its CLI's token file.
    pub async fn start_replica(listen: &str, replica: Replica) -> Shim {
        Shim::start_replica_with(listen, replica, &[]).await
    }

    /// `start_replica` with more `serve` flags, kept across restarts.
    pub async fn start_replica_with(listen: &str, replica: Replica, serve_args: &[&str]) -> Shim {
        let dir = crate::private_temp_dir("anneal-replica-");
        std::fs::write(dir.path().join("admin.token"), &replica.admin_token).expect("token file");
        let serve_args: Vec<String> = serve_args.iter().map(|arg| (*arg).to_string()).collect();
        let (daemon, url) = launch(dir.path(), listen, "info", Some(&replica), &serve_args).await;
        let listen = url.trim_start_matches("http://").to_string();
        let log_filter = "info".to_string();
        Shim { daemon: Some(daemon), url, listen, log_filter, dir, replica: Some(replica), serve_args }
    }

    /// The base URL, e.g. `http://127.0.0.1:41234`.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The server's process id (= its process group id) while it runs.
    pub fn pid(&self) -> Option<i32> {
        self.daemon.as_ref().and_then(Daemon::pid)
    }

    /// The shim's own temp dir (database, `admin.token`, `shim.log`).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The admin token file the CLI reads.
    pub fn token_file(&self) -> PathBuf {
        self.dir().join("admin.token")
    }

    /// The token `serve --metrics-token-file` was given: it opens `GET /metrics` only.
    pub fn metrics_token(&self) -> &'static str {
        METRICS_TOKEN
    }

    /// The shim's stderr so far (across restarts: the latest run).
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(self.dir().join("shim.log")).unwrap_or_default()
    }

    /// Runs `anneal-shim <args> --url .. --token-file ..` to completion.
    pub async fn cli(&self, args: &[&str]) -> CommandOutput {
        let mut command = Command::new(shim_binary());
        command
            .args(args)
            .args(["--url", &self.url, "--token-file"])
            .arg(self.token_file())
            .env_remove("ANNEAL_TOKEN")
            .env_remove("ANNEAL_URL");
        run_command(command, CLI_LIMIT).await
    }

    /// `cli` that must exit 0; returns stdout.
    pub async fn cli_ok(&self, args: &[&str]) -> String {
        let what = format!("anneal-shim {}", args.join(" "));
        self.cli(args).await.expect_success(&what)
    }

    /// `cli_ok` whose stdout is JSON (pass `--json` / `--format json` in `args`).
    pub async fn cli_json(&self, args: &[&str]) -> Value {
        let stdout = self.cli_ok(args).await;
        serde_json::from_str(&stdout)
            .unwrap_or_else(|error| panic!("anneal-shim {args:?}: not JSON ({error}): {stdout}"))
    }

    /// `stack show STACK --json`.
    pub async fn stack_show(&self, stack: &str) -> Value {
        self.cli_json(&["stack", "show", stack, "--json"]).await
    }

    /// The stack's status (`CREATE_COMPLETE`, ...).
    pub async fn stack_status(&self, stack: &str) -> String {
        self.stack_show(stack).await["status"].as_str().unwrap_or_default().to_string()
    }

    /// The stack's outputs by name.
    pub async fn stack_outputs(&self, stack: &str) -> Map<String, Value> {
        let outputs = self.cli_json(&["stack", "outputs", stack, "--json"]).await;
        let outputs = outputs.as_array().expect("outputs is a list");
        outputs
            .iter()
            .map(|output| (output["name"].as_str().expect("name").to_string(), output["value"].clone()))
            .collect()
    }

    /// The stack's resources by name.
    pub async fn stack_resources(&self, stack: &str) -> Map<String, Value> {
        let show = self.stack_show(stack).await;
        let resources = show["resources"].as_array().expect("resources is a list");
        resources
            .iter()
            .map(|resource| (resource["name"].as_str().expect("name").to_string(), resource.clone()))
            .collect()
    }

    /// Waits up to `limit` until the stack is no longer in progress; returns `stack show --json`.
    pub async fn settled(&self, stack: &str, limit: Duration) -> Value {
        wait_until(limit, &format!("stack {stack} settles"), || async {
            let show = self.stack_show(stack).await;
            (!show["status"].as_str().unwrap_or_default().ends_with("IN_PROGRESS")).then_some(show)
        })
        .await
    }

    /// `POST /v1/stacks` with `body` as JSON and the admin token, as an API client sends it.
    pub async fn post_stack(&self, body: &Value) -> reqwest::Response {
        let token = std::fs::read_to_string(self.token_file()).expect("the admin token");
        reqwest::Client::new()
            .post(format!("{}/v1/stacks", self.url))
            .bearer_auth(token.trim())
            .header("content-type", "application/json")
            .body(body.to_string())
            .send()
            .await
            .expect("POST /v1/stacks")
    }

    /// Writes `template` into the shim's dir as `name` and returns its path (for `--template`).
    pub fn write_template(&self, name: &str, template: &str) -> PathBuf {
        let path = self.dir().join(name);
        std::fs::write(&path, template).expect("write template");
        path
    }

    /// SIGTERM; asserts a clean exit. `start_again` brings it back.
    pub async fn stop(&mut self) {
        let mut daemon = self.daemon.take().expect("the shim is running");
        let status = daemon.terminate(Duration::from_secs(15)).await;
        assert!(status.success(), "the shim exits cleanly on SIGTERM: {status:?}\n{}", daemon.log_text());
    }

    /// SIGKILL (a crash).
    pub async fn crash(&mut self) {
        self.daemon.take().expect("the shim is running").kill().await;
    }

    /// Starts it again on the same database and port (after `stop` or `crash`).
    pub async fn start_again(&mut self) {
        assert!(self.daemon.is_none(), "the shim is still running");
        let (daemon, url) =
            launch(self.dir.path(), &self.listen, &self.log_filter, self.replica.as_ref(), &self.serve_args).await;
        assert_eq!(url, self.url, "the restarted shim listens where it did");
        self.daemon = Some(daemon);
    }

    /// `stop` then `start_again`.
    pub async fn restart(&mut self) {
        self.stop().await;
        self.start_again().await;
    }
}

/// Starts `serve` in `dir` (with `serve_args` after the harness's own flags) and waits for the
/// line that gives its URL.
async fn launch(
    dir: &Path,
    listen: &str,
    log_filter: &str,
    replica: Option<&Replica>,
    serve_args: &[String],
) -> (Daemon, String) {
    let stdout = dir.join("shim.out");
    let metrics_token_file = dir.join("metrics.token");
    write_private(&metrics_token_file, METRICS_TOKEN);
    let mut command = Command::new(shim_binary());
    command.arg("serve").arg("--metrics-token-file").arg(&metrics_token_file);
    command.args(["--listen", listen]).args(serve_args).arg("--db").env("ANNEAL_LOG", log_filter);
    match replica {
        None => {
            command.arg(format!("sqlite://{}", dir.join("shim.db").display())).env_remove("ANNEAL_TOKEN");
        }
        Some(replica) => {
            command.arg(&replica.database_url).env("ANNEAL_TOKEN", &replica.admin_token);
            for url in &replica.public_urls {
                command.args(["--public-url", url]);
            }
        }
    }
    let daemon = Daemon::spawn(command, &stdout, &dir.join("shim.log"));
    let what = format!("anneal-shim serve prints its URL (its log: {})", dir.join("shim.log").display());
    let url = wait_until(START_LIMIT, &what, || async {
        let text = std::fs::read_to_string(&stdout).unwrap_or_default();
        let line = text.lines().find(|line| line.contains("listening on"))?;
        line.split_whitespace().find(|word| word.starts_with("http://")).map(str::to_string)
    })
    .await;
    (daemon, url)
}

/// Writes `text` to a new file only its owner may read (as the shim requires of its secrets).
fn write_private(path: &Path, text: &str) {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .unwrap_or_else(|error| panic!("create {}: {error}", path.display()));
    file.write_all(text.as_bytes()).unwrap_or_else(|error| panic!("write {}: {error}", path.display()));
}

/// The token a capability URL (signal, wait condition handle, os-collect-config metadata) ends
/// with; panics unless it has a token's length.
pub fn capability_token(url: &str) -> String {
    let token = url.rsplit('/').next().unwrap_or_default().to_string();
    assert_eq!(token.len(), 64, "a capability URL ends with its token: {url}");
    token
}

/// The YAML alias bomb of issue 31: a HOT template whose 500 KB description is aliased 100,000
/// times, 0.8 MB of text that asked for 50 GB when an alias cost one node whatever it copied.
pub fn alias_bomb_template() -> String {
    format!(
        "heat_template_version: 2018-08-31\ndescription: &a \"{}\"\nparameters:\n  p: {{type: json, default: [{}]}}\nresources: {{}}\n",
        "x".repeat(500_000),
        ["*a"; 100_000].join(",")
    )
}
