//! An agent whose http source lists several URLs, replicas of one service (docs/configuration.md,
//! "`kind = "http"`"). Two in-process `SwitchableServer`s play the replicas, each serving the same
//! document and taking signals: with the first down from the start, the agent reads the second,
//! runs its deployment once, and delivers the signal the document addresses to the first replica
//! on the second one, same path (a token) and all; once the first is back, the agent returns to it
//! within its retry interval (`PRIMARY_RETRY`, 30 s) and runs what is new there. A queued signal
//! whose receiver no source lists keeps its URL until a newer document gives the deployment
//! another one. Last, a real shim behind a dead first URL: the agent fails over to it and the
//! stack converges.

use std::path::Path;
use std::time::{Duration, Instant};

use anneal_tests::metadata::{document, journal_entries, script_deployment};
use anneal_tests::{Agent, AgentSettings, Shim, SwitchableServer, toml_string, wait_until};
use serde_json::Value;

/// The agent's `PRIMARY_RETRY` (agent/src/source/http/rotation.rs), and the slack a loaded
/// machine needs on top of it and of a poll.
const PRIMARY_RETRY: Duration = Duration::from_secs(30);
const SLACK: Duration = Duration::from_secs(10);
/// A shim signal token is 64 hex digits, in the path; it must arrive exactly as rendered.
const TOKEN: &str = "5f0c9a1b2d3e4f5061728394a5b6c7d8e9f00112233445566778899aabbccddee";
const METADATA_PATH: &str = "/v1/servers/vm/metadata";

fn signal_path(id: &str) -> String {
    format!("/v1/signals/{TOKEN}-{id}")
}

/// A standalone agent reading `urls` (a TOML list under `key`), polling every second.
fn start_agent(dir: &Path, key: &str, urls: &[String]) -> Agent {
    let list: Vec<String> = urls.iter().map(|url| toml_string(url)).collect();
    let sources = format!("[[source]]\nkind = \"http\"\n{key} = [{}]\n", list.join(", "));
    let mut agent = Agent::standalone(dir, "vm", &AgentSettings::default(), &sources);
    agent.start();
    agent
}

fn entry(agent: &Agent, id: &str) -> Option<Value> {
    journal_entries(&agent.state_dir()).into_iter().find(|entry| entry["id"] == id)
}

async fn wait_signalled(agent: &Agent, id: &str, limit: Duration) -> Value {
    let what = format!("{id} is signalled (log: {})", agent.log_path().display());
    wait_until(limit, &what, || async { entry(agent, id).filter(|entry| entry["state"] == "signalled") }).await
}

/// The POSTs to `path` a replica answered.
fn posts(server: &SwitchableServer, path: &str) -> usize {
    server.answered("POST", path).iter().filter(|request| request.target == path).count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_first_replica_is_skipped_for_documents_and_signals_and_rejoined() {
    let (first, second) = (SwitchableServer::start().await, SwitchableServer::start().await);
    first.set_up(false);
    // The document says what the first replica would render: signals to its origin.
    let mut deployments =
        vec![script_deployment("one", "#!/bin/sh\necho one\n", &format!("{}{}", first.url(), signal_path("one")))];
    for replica in [&first, &second] {
        replica.set_document(document(&deployments));
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let urls = [format!("{}{METADATA_PATH}", first.url()), format!("{}{METADATA_PATH}", second.url())];
    let mut agent = start_agent(dir.path(), "url", &urls);

    let one = wait_signalled(&agent, "one", Duration::from_secs(30)).await;
    assert_eq!(one["run"]["attempt"], 1, "ran once: {one}");
    assert!(!second.answered("GET", METADATA_PATH).is_empty(), "the document came from the second replica");
    assert_eq!(posts(&second, &signal_path("one")), 1, "the signal reached the second replica, same path");
    let tried_first =
        first.requests().iter().any(|request| request.method == "POST" && request.target == signal_path("one"));
    assert!(tried_first, "the signal went to its own URL first: {:?}", first.requests());
    assert_eq!(posts(&first, &signal_path("one")), 0);

    // The first replica comes back: the agent returns to it within its retry interval.
    first.set_up(true);
    let back_at = Instant::now();
    wait_until(PRIMARY_RETRY + SLACK, "the agent reads the first replica again", || async {
        (!first.answered("GET", METADATA_PATH).is_empty()).then_some(())
    })
    .await;
    eprintln!("back on the first replica {:?} after it recovered", back_at.elapsed());
    tokio::time::sleep(Duration::from_secs(1)).await;
    let (on_first, on_second) = (first.answered("GET", "/").len(), second.answered("GET", "/").len());
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert!(first.answered("GET", "/").len() > on_first, "the agent polls the first replica");
    assert_eq!(second.answered("GET", "/").len(), on_second, "and no longer the second");

    deployments.push(script_deployment(
        "two",
        "#!/bin/sh\necho two\n",
        &format!("{}{}", first.url(), signal_path("two")),
    ));
    for replica in [&first, &second] {
        replica.set_document(document(&deployments));
    }
    let two = wait_signalled(&agent, "two", Duration::from_secs(30)).await;
    assert_eq!(two["run"]["attempt"], 1, "{two}");
    assert_eq!(posts(&first, &signal_path("two")), 1, "a live first replica takes its own signals");
    let one = entry(&agent, "one").expect("one's entry");
    assert_eq!((one["state"].as_str(), one["run"]["attempt"].as_u64()), (Some("signalled"), Some(1)), "never rerun");
    assert_eq!(posts(&first, &signal_path("one")) + posts(&second, &signal_path("one")), 1, "delivered once");

    assert!(agent.is_alive(), "{}", agent.log_text());
    let log = agent.log_text();
    assert!(log.contains("metadata URL failing; the next attempt uses the next one"), "{log}");
    assert!(log.contains("the first metadata URL answers again"), "{log}");
    assert!(log.contains("signal receiver failing; the next attempt goes to the next replica"), "{log}");
    assert!(!log.contains(TOKEN), "the signal token never reaches the log");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queued_signal_follows_a_newer_documents_url() {
    let source = SwitchableServer::start().await;
    let (gone, receiver) = (SwitchableServer::start().await, SwitchableServer::start().await);
    gone.set_up(false);
    let path = signal_path("one");
    let script = "#!/bin/sh\necho one\n";
    source.set_document(document(&[script_deployment("one", script, &format!("{}{path}", gone.url()))]));
    let dir = tempfile::tempdir().expect("temp dir");
    let agent = start_agent(dir.path(), "urls", &[format!("{}{METADATA_PATH}", source.url())]);

    // No source lists the dead receiver's origin: the signal is retried there, as it always was.
    wait_until(Duration::from_secs(30), "two attempts at the dead receiver", || async {
        (gone.requests().iter().filter(|request| request.target == path).count() >= 2).then_some(())
    })
    .await;
    assert!(receiver.requests().is_empty());

    // The same deployment (id and action) in a newer document, its signal addressed elsewhere.
    source.set_document(document(&[script_deployment("one", script, &format!("{}{path}", receiver.url()))]));
    let one = wait_signalled(&agent, "one", Duration::from_secs(20)).await;
    assert_eq!(posts(&receiver, &path), 1, "the queued signal went to the newer URL");
    assert_eq!(one["run"]["attempt"], 1, "not rerun: {one}");
    assert_eq!(one["signal"]["document_url"], format!("{}{path}", receiver.url()));
    assert!(gone.answered("POST", "/").is_empty());
}

const TEMPLATE: &str = r##"
heat_template_version: 2018-08-31
resources:
  config:
    type: OS::Heat::SoftwareConfig
    properties:
      group: script
      outputs: [{name: word}]
      config: "#!/bin/sh\nprintf replicated > $heat_outputs_path.word\n"
  deployment:
    type: OS::Heat::SoftwareDeployment
    properties:
      config: {get_resource: config}
      server: vm1
outputs:
  word: {value: {get_attr: [deployment, word]}}
"##;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shim_behind_a_dead_first_url_is_reached_and_its_stack_converges() {
    let shim = Shim::start().await;
    let dir = tempfile::tempdir().expect("temp dir");
    let mut agent = Agent::register(&shim, dir.path(), "vm1", &AgentSettings::default()).await;
    let dead = SwitchableServer::start().await;
    dead.set_up(false);
    let path = agent.metadata_url().split_once("/v1/").map(|(_, path)| format!("/v1/{path}")).expect("a shim URL");
    let urls = [toml_string(&format!("{}{path}", dead.url())), toml_string(agent.metadata_url())];
    let sources = format!(
        "[[source]]\nkind = \"http\"\nurl = [{}]\ntoken_file = {}\n",
        urls.join(", "),
        toml_string(&agent.token_file().display().to_string())
    );
    agent.write_config_with_sources(&AgentSettings::default(), &sources);
    agent.start();

    let template = shim.write_template("stack.yaml", TEMPLATE);
    let template = template.to_str().expect("utf-8 path");
    let create = shim.cli(&["stack", "create", "one", "--template", template, "--wait", "--timeout", "60"]).await;
    assert_eq!(create.code, 0, "{create:?}\n{}", agent.log_text());
    assert_eq!(shim.stack_outputs("one").await["word"], "replicated");
    let entries = journal_entries(&agent.state_dir());
    assert_eq!(entries.len(), 1, "{entries:#?}");
    assert_eq!((entries[0]["state"].as_str(), entries[0]["run"]["attempt"].as_u64()), (Some("signalled"), Some(1)));
    assert!(!dead.requests().is_empty(), "the first URL was tried");
    assert!(dead.requests().iter().all(|request| request.method == "GET"), "signals go to the shim's own URL");
    let log = agent.log_text();
    assert!(log.contains("metadata URL failing; the next attempt uses the next one"), "{log}");
    let token = std::fs::read_to_string(agent.token_file()).expect("token");
    assert!(!log.contains(token.trim()), "the bearer token never reaches the log");
}
