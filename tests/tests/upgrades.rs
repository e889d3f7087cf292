//! Upgrades from real history (issue 32): each fixture under tests/fixtures/upgrade/ is the state
//! an earlier release's own binaries left (`scripts/upgrade-fixture` ran them: the shim's
//! database, SQLite or a PostgreSQL dump, and three agents' configs and state dirs; its
//! fixture.json says which release and commit). Each test opens one with the current
//! `anneal-shim` and `anneal-agent`, shim first then agents (docs/upgrading.md), and checks what
//! an operator upgrading in place relies on: every stack reads back as it was, with its outputs;
//! an undelivered signal in an agent's journal is delivered once and nothing re-runs; a rolling
//! update paused by the old shim resumes; a waiting wait condition completes when signalled; an
//! update that changes one input runs exactly the deployment it reaches; delete removes all.
//! The fixture's hook appends "<server> <deployment> <action>" to runs.log for every run.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anneal_tests::binaries::agent_binary;
use anneal_tests::postgres::Postgres;
use anneal_tests::process::run_command;
use anneal_tests::shim::Replica;
use anneal_tests::{Shim, private_temp_dir};
use serde_json::Value;
use tokio::process::Command;

const AGENT_LIMIT: Duration = Duration::from_secs(60);
/// Agent cycles a stack may take to settle (each agent once per cycle).
const CYCLES: usize = 20;

/// A fixture copied into a temp dir of its own, with its paths made the copy's.
struct Upgraded {
    dir: tempfile::TempDir,
    manifest: Value,
}

impl Upgraded {
    fn copy(name: &str) -> Upgraded {
        let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/upgrade").join(name);
        let dir = private_temp_dir("anneal-upgrade-");
        copy_tree(&source, dir.path());
        let upgraded = Upgraded { manifest: Value::Null, dir };
        upgraded.substitute("@FIXTURE@", &upgraded.dir.path().display().to_string());
        let manifest = std::fs::read_to_string(upgraded.path("fixture.json")).expect("fixture.json");
        Upgraded { manifest: serde_json::from_str(&manifest).expect("fixture.json is JSON"), ..upgraded }
    }

    fn path(&self, relative: &str) -> PathBuf {
        self.dir.path().join(relative)
    }

    /// Replaces `placeholder` in every text file but the database.
    fn substitute(&self, placeholder: &str, value: &str) {
        for path in files(self.dir.path()) {
            let Ok(text) = std::fs::read_to_string(&path) else { continue };
            if text.contains(placeholder) {
                std::fs::write(&path, text.replace(placeholder, value)).expect("rewrite a fixture file");
            }
        }
    }

    fn runs(&self) -> Vec<String> {
        let text = std::fs::read_to_string(self.path("runs.log")).unwrap_or_default();
        text.lines().map(str::to_string).collect()
    }

    /// One `anneal-agent once` of server `name` with the config the old version wrote.
    async fn agent_once(&self, name: &str) {
        let mut command = Command::new(agent_binary());
        command.args(["once", "--config"]).arg(self.path(&format!("agents/{name}/agent.toml")));
        command.env("ANNEAL_LOG", "info");
        let output = run_command(command, AGENT_LIMIT).await;
        assert!(output.code == 0 || output.code == 1, "anneal-agent once for {name}: {output:?}");
    }

    /// Runs `servers`' agents until `stack` shows `status`; panics with what it shows instead.
    async fn settle(&self, shim: &Shim, stack: &str, servers: &[&str], status: &str) {
        for _ in 0..CYCLES {
            if shim.stack_status(stack).await == status {
                return;
            }
            for server in servers {
                self.agent_once(server).await;
            }
        }
        panic!("{stack} did not reach {status}: {}", shim.stack_show(stack).await);
    }
}

fn files(root: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(root).expect("read a fixture dir").flatten() {
        let path = entry.path();
        if path.is_dir() {
            found.extend(files(&path));
        } else if path.extension().is_none_or(|extension| extension != "db") {
            found.push(path);
        }
    }
    found
}

fn copy_tree(from: &Path, to: &Path) {
    for entry in std::fs::read_dir(from).unwrap_or_else(|error| panic!("{}: {error}", from.display())).flatten() {
        let target = to.join(entry.file_name());
        if entry.path().is_dir() {
            std::fs::create_dir_all(&target).expect("create a fixture dir");
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).expect("copy a fixture file");
        }
    }
}

/// A loopback address no one listens on now, for a shim that must know its URL before it
/// starts (the fixture's stored URLs are made its own first).
fn free_address() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind a loopback port");
    let address = listener.local_addr().expect("its address");
    format!("127.0.0.1:{}", address.port())
}

/// The current shim on a SQLite fixture's own files, listening on `listen`: the URL the old
/// shim stored in rows (versions before 0.2.0 did) becomes its own, as when a shim is upgraded
/// in place.
async fn sqlite_shim(upgraded: &Upgraded, listen: &str) -> Shim {
    let dir = private_temp_dir("anneal-upgrade-shim-");
    for file in ["shim.db", "shim.key", "admin.token"] {
        let copy = dir.path().join(file);
        std::fs::copy(upgraded.path(file), &copy).expect("the fixture's shim files");
        // Git keeps no 0600: the shim refuses secrets others may read, as it should.
        std::fs::set_permissions(&copy, std::fs::Permissions::from_mode(0o600)).expect("chmod the copy");
    }
    let columns = upgraded.manifest["url_columns"].as_array().cloned().unwrap_or_default();
    for pair in columns {
        let (table, column) = (pair[0].as_str().expect("a table"), pair[1].as_str().expect("a column"));
        let sql = format!(
            "UPDATE \"{table}\" SET \"{column}\" = replace(\"{column}\", '@URL@', 'http://{listen}') \
             WHERE instr(\"{column}\", '@URL@') > 0"
        );
        let mut command = Command::new("sqlite3");
        command.arg(dir.path().join("shim.db")).arg(sql);
        run_command(command, AGENT_LIMIT).await.expect_success("sqlite3 puts the shim's URL in the fixture");
    }
    Shim::start_in(dir, listen).await
}

/// The current shim on a PostgreSQL database loaded from a fixture's dump (its URLs made
/// `listen`'s), listening on `listen`.
async fn postgres_shim(upgraded: &Upgraded, postgres: &Postgres, listen: &str) -> Shim {
    let database_url = postgres.create_database("upgraded");
    postgres.psql_file("upgraded", &upgraded.path("shim.sql"));
    let admin_token = std::fs::read_to_string(upgraded.path("admin.token")).expect("the fixture's admin token");
    let replica = Replica { database_url, admin_token: admin_token.trim().to_string(), public_urls: Vec::new() };
    Shim::start_replica(listen, replica).await
}

fn output(detail: &Value, name: &str) -> Value {
    let outputs = detail["outputs"].as_array().cloned().unwrap_or_default();
    outputs.into_iter().find(|output| output["name"] == name).map_or(Value::Null, |output| output["value"].clone())
}

/// What every fixture must show after the upgrade.
async fn check_upgrade(upgraded: &Upgraded, shim: &Shim) {
    let stacks = upgraded.manifest["stacks"].as_object().expect("fixture.json lists its stacks").clone();
    for (name, recorded) in &stacks {
        let detail = shim.stack_show(name).await;
        assert_eq!(detail["status"], recorded["status"], "{name} reads back as the old shim left it");
    }
    let complete = shim.stack_show("complete").await;
    for name in ["first_result", "second_result", "waited"] {
        let recorded = output(&Value::Object(stacks["complete"].as_object().cloned().unwrap_or_default()), name);
        assert_eq!(output(&complete, name), recorded, "complete's output {name} reads back");
    }
    let before = upgraded.runs();
    // The undelivered signal: delivered by the current agent from the old journal, once.
    upgraded.settle(shim, "undelivered", &["u3"], "CREATE_COMPLETE").await;
    assert_eq!(output(&shim.stack_show("undelivered").await, "late_result"), "late!");
    assert_eq!(upgraded.runs(), before, "delivering the signal re-ran nothing");
    let events = shim.cli_json(&["stack", "events", "undelivered", "--json"]).await;
    let completions = events.as_array().map(|events| {
        events.iter().filter(|event| event["resource"] == "late" && event["status"] == "CREATE_COMPLETE").count()
    });
    assert_eq!(completions, Some(1), "late completed once: {events}");
    if stacks.contains_key("rolling") {
        check_rolling_resumes(upgraded, shim).await;
    }
    check_waiting_completes(upgraded, shim, &stacks["waiting"]).await;
    check_one_input_update(upgraded, shim).await;
    for name in stacks.keys() {
        shim.cli_ok(&["stack", "delete", name]).await;
    }
    for _ in 0..CYCLES {
        if shim.cli_json(&["stack", "list", "--json"]).await == serde_json::json!([]) {
            return;
        }
        for server in ["u1", "u2", "u3"] {
            upgraded.agent_once(server).await;
        }
    }
    panic!("the stacks were not deleted: {}", shim.cli_json(&["stack", "list", "--json"]).await);
}

/// The old shim paused between the batches of `rolling`'s update, after one member ran; the
/// pause is long over, so the other member's batch runs (and nothing else) and the update
/// completes.
async fn check_rolling_resumes(upgraded: &Upgraded, shim: &Shim) {
    let before = upgraded.runs();
    let updated: Vec<&String> = before.iter().filter(|run| run.ends_with(" UPDATE")).collect();
    assert_eq!(updated.len(), 1, "the fixture paused after one member: {before:?}");
    let first_server = updated[0].split(' ').next().unwrap_or_default().to_string();
    upgraded.settle(shim, "rolling", &["u1", "u2"], "UPDATE_COMPLETE").await;
    let after = upgraded.runs()[before.len()..].to_vec();
    assert_eq!(after.len(), 1, "one batch of one member ran: {after:?}");
    assert!(after[0].ends_with(" UPDATE") && !after[0].starts_with(&first_server), "the other member: {after:?}");
    let results = output(&shim.stack_show("rolling").await, "results");
    assert_eq!(results, serde_json::json!({"m1": "v2!", "m2": "v2!"}));
}

/// The wait condition the old shim was waiting on completes with a signal to its handle.
async fn check_waiting_completes(upgraded: &Upgraded, shim: &Shim, recorded: &Value) {
    let endpoint = output(recorded, "endpoint").as_str().expect("the handle's endpoint").replace("@URL@", shim.url());
    assert!(endpoint.starts_with(shim.url()), "{endpoint}");
    let response = anneal_tests::http_client()
        .post(&endpoint)
        .header("content-type", "application/json")
        .body(serde_json::json!({"status": "SUCCESS", "id": "1", "data": "after the upgrade"}).to_string())
        .send()
        .await
        .expect("signal the handle");
    assert!(response.status().is_success(), "{}", response.status());
    upgraded.settle(shim, "waiting", &[], "CREATE_COMPLETE").await;
    let data = output(&shim.stack_show("waiting").await, "data");
    assert_eq!(data, r#"{"1": "after the upgrade"}"#);
}

/// Parameter b reaches u2's deployment only: the update runs that one and nothing else.
async fn check_one_input_update(upgraded: &Upgraded, shim: &Shim) {
    let before = upgraded.runs().len();
    let template = upgraded.path("templates/complete.yaml").display().to_string();
    let update = ["stack", "update", "complete", "--template", &template, "--param", "a=one", "--param", "b=three"];
    shim.cli_ok(&update).await;
    upgraded.settle(shim, "complete", &["u1", "u2"], "UPDATE_COMPLETE").await;
    assert_eq!(upgraded.runs()[before..], ["u2 second UPDATE".to_string()], "only the changed deployment ran");
    assert_eq!(output(&shim.stack_show("complete").await, "second_result"), "one!!");
}

/// Copies fixture `name` (written by release `version`) and picks the address its shim will
/// listen on, which the fixture's URLs become.
fn prepared(name: &str, version: &str) -> (Upgraded, String) {
    let upgraded = Upgraded::copy(name);
    assert_eq!(upgraded.manifest["version"], version, "{name}'s fixture.json");
    let listen = free_address();
    upgraded.substitute("@URL@", &format!("http://{listen}"));
    (upgraded, listen)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_first_releases_sqlite_state_opens_and_carries_on() {
    let (upgraded, listen) = prepared("v0.1.0-sqlite", "0.1.0");
    check_upgrade(&upgraded, &sqlite_shim(&upgraded, &listen).await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_second_releases_sqlite_state_opens_and_carries_on() {
    let (upgraded, listen) = prepared("v0.2.0-sqlite", "0.2.0");
    check_upgrade(&upgraded, &sqlite_shim(&upgraded, &listen).await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_second_releases_postgresql_state_opens_and_carries_on() {
    let (upgraded, listen) = prepared("v0.2.0-postgres", "0.2.0");
    let postgres = Postgres::start(false);
    check_upgrade(&upgraded, &postgres_shim(&upgraded, &postgres, &listen).await).await;
}
