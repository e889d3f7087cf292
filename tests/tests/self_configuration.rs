//! Self-configuration from Heat's `os-collect-config` key with the real binary
//! (docs/openstack.md): `anneal-agent bootstrap --from-metadata FILE` writes
//! `state/os-collect-config.toml` from a server's metadata, and `once` then polls the derived
//! `request` source (a Swift-style temp URL on a loopback `SwitchableServer`) and runs its
//! deployment; a running daemon follows a changed key in its boot metadata (a `heat-local`
//! cfn-init-data) to a new source without a restart and without losing its journal, and leaves
//! the file alone while the key stays the same. The key of a plain `http` source (the shim's
//! document) redirects nothing unless that source opts in with `self_configure = true`, and a
//! redirect ends when its source drops the key, across a restart too. The credentials in the key
//! (a temp URL signature, a Keystone password) reach neither a log line at debug level nor
//! `status --sources`, and the file holding them is 0600.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anneal_tests::metadata::{document, journal_entries, script_deployment};
use anneal_tests::process::{CommandOutput, run_command};
use anneal_tests::{Agent, AgentSettings, SwitchableServer, agent_binary, toml_string, wait_until};
use serde_json::{Value, json};
use tokio::process::Command;

/// The temp URL signature: a credential, so it must stay out of logs and `status`.
const SIGNATURE: &str = "5e1f0c0ffee5e1f0c0ffee5e1f0c0ffee5e1f0c0";
const PASSWORD: &str = "pl4nted-keystone-passw0rd";

/// A standalone agent whose only own source is a `heat-local` file, as an image's config has
/// (missing: an empty document); returns the file's path, Heat's cfn-init-data.
fn image_agent(parent: &Path) -> (Agent, PathBuf) {
    let boot = parent.join("cfn-init-data");
    let sources = format!("[[source]]\nkind = \"heat-local\"\npath = {}\n", toml_string(&boot.display().to_string()));
    (Agent::standalone(parent, "vm", &AgentSettings::default(), &sources), boot)
}

/// Replaces `path` with `document` in one rename, so that a read never sees half a file.
fn write_document(path: &Path, document: &Value) {
    let partial = path.with_extension("partial");
    std::fs::write(&partial, document.to_string()).expect("write the document");
    std::fs::rename(&partial, path).expect("rename the document into place");
}

fn request_key(server: &SwitchableServer, object: &str) -> Value {
    let url = format!("{}/v1/AUTH_t/c/{object}?temp_url_sig={SIGNATURE}&temp_url_expires=2147483647", server.url());
    json!({"collectors": ["ec2", "request", "local"], "request": {"metadata_url": url}, "polling_interval": 1})
}

/// `anneal-agent ARGS --config CONFIG` with `ANNEAL_LOG=debug`.
async fn agent_command(agent: &Agent, args: &[&str]) -> CommandOutput {
    let mut command = Command::new(agent_binary());
    command.args(args).arg("--config").arg(agent.config_path()).env("ANNEAL_LOG", "debug");
    run_command(command, Duration::from_secs(30)).await
}

fn write_metadata(dir: &Path, metadata: &Value) -> String {
    let path = dir.join("server-metadata.json");
    std::fs::write(&path, metadata.to_string()).expect("write metadata");
    path.display().to_string()
}

fn self_config_file(agent: &Agent) -> PathBuf {
    agent.state_dir().join("os-collect-config.toml")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bootstrap_from_metadata_then_once_runs_the_deployment() {
    let receiver = SwitchableServer::start().await;
    let swift = SwitchableServer::start().await;
    let signal_url = format!("{}/signal/d1", receiver.url());
    swift.set_document(document(&[script_deployment("d1", "#!/bin/sh\necho hello\n", &signal_url)]));
    let dir = tempfile::tempdir().expect("temp dir");
    let (agent, _) = image_agent(dir.path());

    // Heat's API answer for the server resource's metadata: wrapped in "metadata".
    let metadata = json!({"metadata": {"os-collect-config": request_key(&swift, "server"), "deployments": []}});
    let file = write_metadata(dir.path(), &metadata);
    let bootstrap = agent_command(&agent, &["bootstrap", "--from-metadata", &file]).await;
    assert_eq!(bootstrap.code, 0, "{bootstrap:?}");
    assert!(bootstrap.stdout.contains("os-collect-config request"), "{}", bootstrap.stdout);
    assert!(bootstrap.stdout.contains(&swift.url()[7..]), "the host is shown: {}", bootstrap.stdout);
    assert!(!bootstrap.stdout.contains(SIGNATURE), "the signature is redacted: {}", bootstrap.stdout);
    let written = std::fs::metadata(self_config_file(&agent)).expect("the file is written");
    assert_eq!(written.mode() & 0o777, 0o600);

    let once = agent_command(&agent, &["once"]).await;
    assert_eq!(once.code, 0, "{once:?}");
    assert_eq!(receiver.answered("POST", "/signal/d1").len(), 1, "the deployment ran and signalled");
    assert_eq!(swift.answered("GET", "/v1/AUTH_t/c/server").len(), 1, "from the derived source");
    assert!(!once.stderr.contains(SIGNATURE), "no log line holds the signature:\n{}", once.stderr);

    let sources = agent_command(&agent, &["status", "--sources", "--json"]).await;
    assert_eq!(sources.code, 0, "{sources:?}");
    let rows: Value = serde_json::from_str(&sources.stdout).expect("JSON");
    let origins: Vec<_> = rows.as_array().unwrap().iter().map(|row| row["origin"].as_str().unwrap()).collect();
    assert_eq!(origins, ["config", "os-collect-config"]);
    assert_eq!(rows[1]["kind"], "http");
    assert_eq!(rows[1]["poll_interval_secs"], 1);
    assert!(!sources.stdout.contains(SIGNATURE), "{}", sources.stdout);
    // The deployments view is unchanged: one row per deployment.
    assert_eq!(agent.status().await.len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bootstrap_refuses_a_file_without_a_usable_key() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (agent, _) = image_agent(dir.path());
    let cases = [
        ("not json {", "is not a JSON document"),
        ("{\"deployments\": []}", "has no os-collect-config key"),
        ("{\"os-collect-config\": {\"collectors\": [\"ec2\", \"local\"]}}", "names no collector"),
        ("{\"os-collect-config\": {\"collectors\": [\"heat\", \"bogus\"]}}", "unknown collector \"bogus\""),
    ];
    for (text, expected) in cases {
        let path = dir.path().join("metadata.json");
        std::fs::write(&path, text).expect("write");
        let finished = agent_command(&agent, &["bootstrap", "--from-metadata", path.to_str().unwrap()]).await;
        assert_eq!(finished.code, 2, "{text}: {finished:?}");
        assert!(finished.stderr.contains(expected), "{text}: {}", finished.stderr);
        assert!(!self_config_file(&agent).exists(), "nothing is written");
    }
    let missing = agent_command(&agent, &["bootstrap", "--from-metadata", "/nonexistent/metadata.json"]).await;
    assert_eq!(missing.code, 2, "{missing:?}");
    assert!(missing.stderr.contains("cannot read /nonexistent/metadata.json"), "{}", missing.stderr);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keystone_credentials_from_metadata_are_never_shown() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (mut agent, _) = image_agent(dir.path());
    // Both point at a closed loopback port: every fetch fails, and its error is logged.
    let metadata = json!({"os-collect-config": {
        "collectors": ["ec2", "heat", "cfn", "local"],
        "heat": {"user_id": "u-42", "password": PASSWORD, "auth_url": "http://127.0.0.1:9/v3",
                 "project_id": "p-1", "stack_id": "s/1", "resource_name": "server", "region_name": ""},
        "cfn": {"metadata_url": "http://127.0.0.1:9/v1/", "access_key_id": "AK-7", "secret_access_key": PASSWORD,
                "stack_name": "s", "path": "server.Metadata"}}});
    let file = write_metadata(dir.path(), &metadata);
    let bootstrap = agent_command(&agent, &["bootstrap", "--from-metadata", &file]).await;
    assert_eq!(bootstrap.code, 0, "{bootstrap:?}");
    assert!(bootstrap.stdout.contains("u-42") && bootstrap.stdout.contains("***"), "{}", bootstrap.stdout);
    let stored = std::fs::read_to_string(self_config_file(&agent)).expect("read");
    assert!(stored.contains(PASSWORD), "the file keeps the password (0600) for the next start");

    for args in [&["status", "--sources"][..], &["status", "--sources", "--json"], &["once"]] {
        let finished = agent_command(&agent, args).await;
        let output = format!("{}{}", finished.stdout, finished.stderr);
        assert!(!output.contains(PASSWORD), "{args:?} shows the password:\n{output}");
        if args[0] == "status" {
            assert_eq!(finished.code, 0, "{finished:?}");
            assert!(finished.stdout.contains("os-collect-config heat"), "{}", finished.stdout);
        }
    }
    let json = agent_command(&agent, &["status", "--sources", "--json"]).await;
    let rows: Value = serde_json::from_str(&json.stdout).expect("JSON");
    assert_eq!(rows[1]["user"], "u-42");
    assert_eq!(rows[1]["secret"], "***");
    assert_eq!(rows[2]["user"], "AK-7");
    assert_eq!(rows[2]["secret"], "***");

    // The daemon at debug level for a few polls (the harness's interval is 1 s).
    agent.start();
    tokio::time::sleep(Duration::from_secs(4)).await;
    agent.stop().await;
    let log = agent.log_text();
    assert!(log.contains("os-collect-config heat"), "the derived sources are named in the log:\n{log}");
    assert!(!log.contains(PASSWORD), "no log line holds the password:\n{log}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_daemon_follows_a_changed_key_without_a_restart() {
    let receiver = SwitchableServer::start().await;
    let first = SwitchableServer::start().await;
    let second = SwitchableServer::start().await;
    let signal = |id: &str| format!("{}/signal/{id}", receiver.url());
    let a1 = script_deployment("a1", "#!/bin/sh\necho a1\n", &signal("a1"));
    first.set_document(document(std::slice::from_ref(&a1)));
    second.set_document(document(&[a1, script_deployment("b1", "#!/bin/sh\necho b1\n", &signal("b1"))]));
    let dir = tempfile::tempdir().expect("temp dir");
    let (mut agent, boot) = image_agent(dir.path());
    // What Heat writes to cfn-init-data at boot, read by the image's own heat-local source.
    write_document(&boot, &json!({"os-collect-config": request_key(&first, "one")}));
    agent.start();

    wait_until(Duration::from_secs(30), "a1 ran from the first derived source", || async {
        (receiver.answered("POST", "/signal/a1").len() == 1).then_some(())
    })
    .await;
    let file = self_config_file(&agent);
    let written = std::fs::metadata(&file).expect("persisted").modified().unwrap();
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(std::fs::metadata(&file).unwrap().modified().unwrap(), written, "an unchanged key is not rewritten");

    write_document(&boot, &json!({"os-collect-config": request_key(&second, "two")}));
    wait_until(Duration::from_secs(30), "b1 ran from the new source", || async {
        (receiver.answered("POST", "/signal/b1").len() == 1).then_some(())
    })
    .await;
    assert!(std::fs::read_to_string(&file).unwrap().contains("/c/two"), "the file follows the key");
    assert!(agent.is_alive(), "no restart");
    // A hostile key (an injected table, an unknown collector) is refused with a warning.
    let mut hostile = request_key(&first, "one\n[[source]]\nkind = \"local\"");
    hostile["collectors"] = json!(["request", "nova"]);
    write_document(&boot, &json!({"os-collect-config": hostile}));
    wait_until(Duration::from_secs(30), "the hostile key is refused", || async {
        agent.log_text().contains("ignoring the os-collect-config key").then_some(())
    })
    .await;
    assert!(agent.log_text().contains("unknown collector \"nova\""), "{}", agent.log_text());
    assert!(std::fs::read_to_string(&file).unwrap().contains("/c/two"), "the sources in use stay");
    // A source that is failing keeps its cached document, and the sources with it.
    std::fs::write(&boot, "{ not json").expect("write");
    let polled = second.answered("GET", "/v1/AUTH_t/c/two").len();
    wait_until(Duration::from_secs(30), "the derived source is polled on", || async {
        (second.answered("GET", "/v1/AUTH_t/c/two").len() >= polled + 2).then_some(())
    })
    .await;
    assert!(std::fs::read_to_string(&file).unwrap().contains("/c/two"), "the cached document still has the key");
    // A boot document without the key (its supplier repaired) ends the redirect.
    write_document(&boot, &json!({"deployments": []}));
    wait_until(Duration::from_secs(30), "the self-configured file is removed", || async {
        (!file.exists()).then_some(())
    })
    .await;
    let log = agent.log_text();
    let dropped = log.find("no longer carries the os-collect-config key").expect("the drop is logged");
    assert!(log[dropped..].contains("switching the polled sources"), "polling switches back:\n{log}");
    agent.stop().await;

    assert_eq!(receiver.answered("POST", "/signal/a1").len(), 1, "a1 is not rerun after the switch");
    let mut ids: Vec<String> =
        journal_entries(&agent.state_dir()).iter().map(|entry| entry["id"].as_str().unwrap().to_string()).collect();
    ids.sort();
    assert_eq!(ids, ["a1", "b1"], "the journal is kept");
    let log = agent.log_text();
    assert!(log.contains("switching the polled sources"), "{log}");
    assert!(!log.contains(SIGNATURE), "no log line holds the signature:\n{log}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn once_configures_itself_from_the_boot_metadata_in_the_same_cycle() {
    let receiver = SwitchableServer::start().await;
    let swift = SwitchableServer::start().await;
    let signal_url = format!("{}/signal/d1", receiver.url());
    swift.set_document(document(&[script_deployment("d1", "#!/bin/sh\necho hello\n", &signal_url)]));
    let dir = tempfile::tempdir().expect("temp dir");
    let (agent, boot) = image_agent(dir.path());
    write_document(&boot, &json!({"os-collect-config": request_key(&swift, "server"), "deployments": []}));

    let once = agent_command(&agent, &["once"]).await;
    assert_eq!(once.code, 0, "{once:?}");
    assert_eq!(receiver.answered("POST", "/signal/d1").len(), 1, "the derived source's deployment ran");
    assert!(self_config_file(&agent).exists());
    let again = agent_command(&agent, &["once"]).await;
    assert_eq!(again.code, 0, "{again:?}");
    assert_eq!(receiver.answered("POST", "/signal/d1").len(), 1, "and only once");
    assert_eq!(swift.answered("GET", "/v1/AUTH_t/c/server").len(), 2, "the second cycle polls it from the file");
    assert!(!again.stderr.contains("switching"), "an unchanged key switches nothing:\n{}", again.stderr);
}

/// A standalone agent whose only source is the http URL of `shim` (a plain source unless
/// `opted_in`: `self_configure = true`).
fn shim_agent(parent: &Path, shim: &SwitchableServer, opted_in: bool) -> Agent {
    let agent = Agent::standalone(parent, "vm", &AgentSettings::default(), "");
    write_shim_config(&agent, shim, opted_in);
    agent
}

fn write_shim_config(agent: &Agent, shim: &SwitchableServer, opted_in: bool) {
    let url = toml_string(&format!("{}/v1/servers/vm/metadata", shim.url()));
    let sources = format!("[[source]]\nkind = \"http\"\nurl = {url}\nself_configure = {opted_in}\n");
    agent.write_config_with_sources(&AgentSettings::default(), &sources);
}

/// The shim's document: no deployment, and an `os-collect-config` key pointing at `elsewhere`.
fn redirecting(elsewhere: &SwitchableServer) -> Value {
    json!({"deployments": [], "os-collect-config": request_key(elsewhere, "evil")})
}

/// Waits until `shim` answered `more` GETs beyond those it had answered when called: time
/// passing for the agent, measured in its own polls (every second).
async fn wait_for_polls(shim: &SwitchableServer, more: usize) {
    let target = shim.answered("GET", "/").len() + more;
    wait_until(Duration::from_secs(30), "the agent polls the shim", || async {
        (shim.answered("GET", "/").len() >= target).then_some(())
    })
    .await;
}

/// The log's first line holding `text`.
fn log_line(agent: &Agent, text: &str) -> String {
    let log = agent.log_text();
    log.lines()
        .find(|line| line.contains(text))
        .unwrap_or_else(|| panic!("no log line with {text:?}:\n{log}"))
        .to_string()
}

/// The finding: a document of the shim (a plain http source) with an `os-collect-config` key
/// redirected the agent's polling elsewhere. It is ignored with a warning naming the source; the
/// same source with `self_configure = true` redirects, and the new host is warned about.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plain_http_source_redirects_nothing_unless_it_opts_in() {
    let receiver = SwitchableServer::start().await;
    let shim = SwitchableServer::start().await;
    let elsewhere = SwitchableServer::start().await;
    let signal_url = format!("{}/signal/e1", receiver.url());
    elsewhere.set_document(document(&[script_deployment("e1", "#!/bin/sh\necho elsewhere\n", &signal_url)]));
    shim.set_document(redirecting(&elsewhere));
    let dir = tempfile::tempdir().expect("temp dir");
    let mut agent = shim_agent(dir.path(), &shim, false);
    agent.start();

    wait_until(Duration::from_secs(30), "the ignored key is warned about", || async {
        agent.log_text().contains("ignoring the os-collect-config key").then_some(())
    })
    .await;
    wait_for_polls(&shim, 3).await;
    assert!(elsewhere.requests().is_empty(), "the other server got no request: {:?}", elsewhere.requests());
    assert!(!self_config_file(&agent).exists(), "nothing is persisted");
    let warning = log_line(&agent, "ignoring the os-collect-config key");
    assert!(warning.contains(" WARN ") && warning.contains("source[0] http"), "names the source: {warning}");
    assert!(!warning.contains(&elsewhere.url()[7..]), "never the key's values: {warning}");
    agent.stop().await;

    write_shim_config(&agent, &shim, true);
    agent.start();
    wait_until(Duration::from_secs(30), "e1 ran from the other server", || async {
        (receiver.answered("POST", "/signal/e1").len() == 1).then_some(())
    })
    .await;
    let stored = std::fs::read_to_string(self_config_file(&agent)).expect("persisted");
    assert!(stored.contains("supplied_by = \"source[0] http\""), "{stored}");
    let redirect = log_line(&agent, "points a source at a new host");
    assert!(redirect.contains(" WARN ") && redirect.contains("kind=\"http\""), "{redirect}");
    assert!(redirect.contains(&format!("host={}", &elsewhere.url()[7..])), "{redirect}");
    assert!(!redirect.contains("/v1/AUTH_t") && !redirect.contains(SIGNATURE), "no path or query: {redirect}");
    agent.stop().await;
    assert!(!agent.log_text().contains(SIGNATURE), "no log line holds the signature");
}

/// The redirect does not outlive the repair: when the source that supplied the key drops it,
/// the self-configured source is no longer polled and the file is removed, and a restart does
/// not bring it back; a repair made while the agent was down ends it at the next start.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redirect_ends_when_its_source_drops_the_key_also_across_restarts() {
    let shim = SwitchableServer::start().await;
    let elsewhere = SwitchableServer::start().await;
    shim.set_document(redirecting(&elsewhere));
    let dir = tempfile::tempdir().expect("temp dir");
    let mut agent = shim_agent(dir.path(), &shim, true);
    let file = self_config_file(&agent);
    let redirected = || async { (!elsewhere.answered("GET", "/").is_empty() && file.exists()).then_some(()) };
    agent.start();
    wait_until(Duration::from_secs(30), "polling is redirected", redirected).await;

    // Repaired while the agent runs.
    shim.set_document(json!({"deployments": []}));
    wait_until(Duration::from_secs(30), "the file is removed", || async { (!file.exists()).then_some(()) }).await;
    wait_for_polls(&shim, 2).await;
    let after_repair = elsewhere.requests().len();
    wait_for_polls(&shim, 3).await;
    assert_eq!(elsewhere.requests().len(), after_repair, "the other server is no longer polled");
    let dropped = log_line(&agent, "no longer carries the os-collect-config key");
    assert!(dropped.contains(" WARN ") && dropped.contains("source[0] http"), "{dropped}");
    agent.stop().await;
    agent.start();
    wait_for_polls(&shim, 3).await;
    assert_eq!(elsewhere.requests().len(), after_repair, "nor after a restart");
    assert!(!file.exists());

    // The key back redirects again (the source still opts in); repaired while the agent is down.
    shim.set_document(redirecting(&elsewhere));
    wait_until(Duration::from_secs(30), "polling is redirected again", || async {
        (elsewhere.requests().len() > after_repair && file.exists()).then_some(())
    })
    .await;
    agent.stop().await;
    shim.set_document(json!({"deployments": []}));
    agent.start();
    wait_until(Duration::from_secs(30), "the file is removed at the start", || async {
        (!file.exists()).then_some(())
    })
    .await;
    wait_for_polls(&shim, 2).await;
    let after_restart = elsewhere.requests().len();
    wait_for_polls(&shim, 3).await;
    assert_eq!(elsewhere.requests().len(), after_restart, "the other server is no longer polled");
    agent.stop().await;
}

/// A deployed-server stack whose servers are not registered: the stack registers a named
/// server, a nameless one and a ResourceGroup's nameless members (Heat's generated names),
/// each one's `os_collect_config` (`stack outputs`, the admin's) bootstraps a real agent, the
/// stack converges, no token reaches the shim's debug log, and deleting the stack revokes them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stack_created_servers_bootstrap_agents_from_their_os_collect_config() {
    let shim = anneal_tests::Shim::start_logging("debug").await;
    let template = "heat_template_version: 2018-08-31
resources:
  named: {type: OS::Heat::DeployedServer, properties: {name: vm-named}}
  server: {type: OS::Heat::DeployedServer}
  configured_group:
    type: OS::Heat::ResourceGroup
    properties: {count: 2, resource_def: {type: OS::Heat::DeployedServer}}
  config:
    type: OS::Heat::SoftwareConfig
    properties: {group: script, outputs: [{name: result}], config: \"#!/bin/sh\\necho -n done > $heat_outputs_path.result\\n\"}
  deploy_named: {type: OS::Heat::SoftwareDeployment, properties: {config: {get_resource: config}, server: {get_resource: named}}}
  deploy_server: {type: OS::Heat::SoftwareDeployment, properties: {config: {get_resource: config}, server: {get_resource: server}}}
  deploy_group:
    type: OS::Heat::SoftwareDeploymentGroup
    properties: {config: {get_resource: config}, servers: {get_attr: [configured_group, refs_map]}}
outputs:
  named: {value: {get_attr: [named, os_collect_config]}}
  server: {value: {get_attr: [server, os_collect_config]}}
  group: {value: {get_attr: [configured_group, os_collect_config]}}
";
    let path = shim.write_template("ds.yaml", template);
    let created = shim.cli(&["stack", "create", "ds", "--template", path.to_str().expect("utf-8")]).await;
    assert_eq!(created.code, 0, "{created:?}");
    let outputs = shim.stack_outputs("ds").await;
    let mut settings = vec![outputs["named"].clone(), outputs["server"].clone()];
    settings.extend(outputs["group"].as_array().expect("one per member").iter().cloned());
    assert_eq!(settings.len(), 4, "{outputs:?}");
    let servers = shim.cli_json(&["server", "list", "--json"]).await;
    let names: Vec<&str> = servers.as_array().unwrap().iter().map(|row| row["name"].as_str().unwrap()).collect();
    assert_eq!(names.len(), 4, "{names:?}");
    assert!(names.contains(&"vm-named") && names.iter().any(|name| name.starts_with("ds-server-")), "{names:?}");
    assert_eq!(names.iter().filter(|name| name.starts_with("ds-configured_group-")).count(), 2, "{names:?}");

    let dir = tempfile::tempdir().expect("temp dir");
    let mut urls = Vec::new();
    for (index, key) in settings.iter().enumerate() {
        let url = key["request"]["metadata_url"].as_str().expect("a metadata URL").to_owned();
        assert!(url.starts_with(&format!("{}/v1/metadata/", shim.url())), "{url}");
        let (agent, _) = image_agent(&dir.path().join(format!("vm{index}")));
        let file = write_metadata(&dir.path().join(format!("vm{index}")), &json!({"os-collect-config": key}));
        let bootstrap = agent_command(&agent, &["bootstrap", "--from-metadata", &file]).await;
        assert_eq!(bootstrap.code, 0, "{bootstrap:?}");
        let once = agent_command(&agent, &["once"]).await;
        assert_eq!(once.code, 0, "{once:?}");
        assert_eq!(agent.status().await.len(), 1, "its deployment ran");
        urls.push(url);
    }
    let show = shim.settled("ds", Duration::from_secs(30)).await;
    assert_eq!(show["status"], "CREATE_COMPLETE", "{show}");
    let log = shim.log_text();
    let client = anneal_tests::http_client();
    for url in &urls {
        let token = url.rsplit('/').next().unwrap();
        assert!(!log.contains(token), "a created server's token is in the shim's log");
        let answer = client.get(url).send().await.expect("GET the metadata URL");
        assert_eq!(answer.status(), 200);
    }

    shim.cli_ok(&["stack", "delete", "ds", "--wait"]).await;
    for url in &urls {
        let answer = client.get(url).send().await.expect("GET the metadata URL");
        assert_eq!(answer.status(), 404, "revoked with the stack");
    }
    let servers = shim.cli_json(&["server", "list", "--json"]).await;
    assert_eq!(servers, json!([]));
}
