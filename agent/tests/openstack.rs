//! `anneal-agent run` against a Keystone and a heat-api that misbehave, both fakes on 127.0.0.1
//! speaking the HTTP of a real Heat (token in `X-Subject-Token`, the orchestration endpoint
//! `/v1/{project}` from the catalog, `GET .../resources/{name}/metadata` answering
//! `{"metadata": ...}`, `POST .../resources/{name}/signal`): a `kind = "heat"` source and
//! HEAT_SIGNAL deployments ride out Keystone being down, a token revoked mid-run and heat-api
//! answering 500, and refused credentials are reported as permanent, the password and the token
//! never in a log line or `status`. A `kind = "zaqar"` source with ZAQAR_SIGNAL runs against a
//! recorded-protocol Zaqar fake built from Zaqar's v2 API reference (claims, message delete and
//! post): Zaqar itself cannot run here.

mod common;

use std::collections::{HashMap, HashSet};
use std::os::unix::fs::PermissionsExt;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::*;
use serde_json::{Value, json};
use wiremock::matchers::any;
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

const USER_ID: &str = "0f9e8d7c6b5a";
const PROJECT_ID: &str = "5a4b3c2d1e0f";
const PASSWORD: &str = "Pl4nted-pa55word";
const STACK_ID: &str = "web/8c1d2e3f-0000-1111-2222-333344445555";
const METADATA_PATH: &str =
    "/v1/5a4b3c2d1e0f/stacks/web/8c1d2e3f-0000-1111-2222-333344445555/resources/server/metadata";

/// What the fake cloud knows: tokens issued and revoked, the server's metadata, the signals.
#[derive(Default)]
struct CloudState {
    heat_url: String,
    zaqar_url: String,
    /// Zaqar's queues: messages in posting order, `(id, body, claim id)`.
    queues: HashMap<String, Vec<(String, Value, Option<String>)>>,
    zaqar_requests: usize,
    issued: usize,
    revoked: HashSet<String>,
    metadata: Value,
    /// heat-api answers this many signals with 500 before it accepts one.
    signal_failures: usize,
    signal_attempts: usize,
    signals: Vec<(String, Value)>,
}

#[derive(Clone, Default)]
struct Cloud(Arc<Mutex<CloudState>>);

impl Cloud {
    fn state(&self) -> std::sync::MutexGuard<'_, CloudState> {
        self.0.lock().unwrap()
    }
}

/// Keystone: `POST /v3/auth/tokens` with the one good password gets `token-N`.
struct KeystoneResponder(Cloud);

impl Respond for KeystoneResponder {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        let body: Value = serde_json::from_slice(&request.body).unwrap_or(Value::Null);
        let user = &body["auth"]["identity"]["password"]["user"];
        if request.url.path() != "/v3/auth/tokens" || user["id"] != USER_ID || user["password"] != PASSWORD {
            return ResponseTemplate::new(401).set_body_string(r#"{"error": {"code": 401}}"#);
        }
        let mut state = self.0.state();
        state.issued += 1;
        let token = format!("token-{}-{}", state.issued, "t".repeat(40));
        let endpoint = format!("{}/v1/{PROJECT_ID}", state.heat_url);
        ResponseTemplate::new(201).insert_header("x-subject-token", token.as_str()).set_body_json(json!({"token": {
            "issued_at": "2026-11-24T10:00:00.000000Z",
            "expires_at": "2026-11-24T11:00:00.000000Z",
            "catalog": [
                {"type": "orchestration", "endpoints": [
                    {"interface": "public", "region_id": "RegionOne", "url": endpoint}]},
                {"type": "messaging", "endpoints": [
                    {"interface": "public", "region_id": "RegionOne", "url": state.zaqar_url}]},
            ],
        }}))
    }
}

/// heat-api: the metadata and the signals of one server, for any token Keystone issued and did
/// not revoke.
struct HeatResponder(Cloud);

impl Respond for HeatResponder {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        let mut state = self.0.state();
        let token = request.headers.get("x-auth-token").and_then(|value| value.to_str().ok()).unwrap_or_default();
        if !token.starts_with("token-") || state.revoked.contains(token) {
            return ResponseTemplate::new(401).set_body_string("Authentication required");
        }
        let path = request.url.path();
        if request.method.as_str() == "GET" && path == METADATA_PATH {
            return ResponseTemplate::new(200).set_body_json(json!({"metadata": state.metadata}));
        }
        if request.method.as_str() == "POST" && path.ends_with("/signal") {
            state.signal_attempts += 1;
            if state.signal_failures > 0 {
                state.signal_failures -= 1;
                return ResponseTemplate::new(500).set_body_string("Internal Server Error");
            }
            let resource = path.rsplit('/').nth(1).unwrap_or_default().to_string();
            state.signals.push((resource, serde_json::from_slice(&request.body).unwrap_or(Value::Null)));
            return ResponseTemplate::new(200).set_body_string("null");
        }
        ResponseTemplate::new(404)
    }
}

/// Zaqar's v2 queue API: claims (201 with the unclaimed messages oldest first, 204 when none),
/// message delete by claim, message post; a token, `Client-ID` and `X-Project-ID` required.
struct ZaqarResponder(Cloud);

impl Respond for ZaqarResponder {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        let mut state = self.0.state();
        state.zaqar_requests += 1;
        let token = request.headers.get("x-auth-token").and_then(|value| value.to_str().ok()).unwrap_or_default();
        if !token.starts_with("token-") || state.revoked.contains(token) {
            return ResponseTemplate::new(401);
        }
        if !request.headers.contains_key("client-id") || request.headers["x-project-id"] != PROJECT_ID {
            return ResponseTemplate::new(400);
        }
        let parts: Vec<String> = request.url.path().split('/').map(str::to_string).collect();
        let (queue, rest) = match parts.as_slice() {
            [_, version, queues, queue, rest @ ..] if version == "v2" && queues == "queues" => (queue.clone(), rest),
            _ => return ResponseTemplate::new(404),
        };
        let method = request.method.as_str();
        let messages = state.queues.entry(queue.clone()).or_default();
        match (method, rest) {
            ("POST", [claims]) if claims == "claims" => {
                let claim_id = format!("claim{}", messages.len() + 1);
                let claimed: Vec<Value> = messages
                    .iter_mut()
                    .filter(|message| message.2.is_none())
                    .take(20)
                    .map(|(id, body, claim)| {
                        *claim = Some(claim_id.clone());
                        json!({"body": body, "age": 1, "ttl": 3600,
                               "href": format!("/v2/queues/{queue}/messages/{id}?claim_id={claim_id}")})
                    })
                    .collect();
                if claimed.is_empty() {
                    return ResponseTemplate::new(204);
                }
                ResponseTemplate::new(201).set_body_json(json!({"messages": claimed}))
            }
            ("DELETE", [segment, id]) if segment == "messages" => {
                let claim = request.url.query_pairs().find(|(key, _)| key == "claim_id").map(|(_, v)| v.into_owned());
                match messages.iter().position(|message| message.0 == *id) {
                    Some(index) if messages[index].2 != claim => ResponseTemplate::new(403),
                    Some(index) => {
                        messages.remove(index);
                        ResponseTemplate::new(204)
                    }
                    None => ResponseTemplate::new(204),
                }
            }
            ("POST", [segment]) if segment == "messages" => {
                let body: Value = serde_json::from_slice(&request.body).unwrap_or(Value::Null);
                let Some(posted) = body["messages"].as_array() else { return ResponseTemplate::new(400) };
                let mut resources = Vec::new();
                for message in posted {
                    let id = format!("m{}x{}", messages.len(), resources.len());
                    resources.push(format!("/v2/queues/{queue}/messages/{id}"));
                    messages.push((id, message.clone(), None));
                }
                ResponseTemplate::new(201).set_body_json(json!({"resources": resources}))
            }
            _ => ResponseTemplate::new(404),
        }
    }
}

impl Cloud {
    /// Heat posting the server's metadata to its queue, as it does on every change.
    fn post_metadata(&self, queue: &str, metadata: Value) {
        let mut state = self.state();
        let messages = state.queues.entry(queue.to_string()).or_default();
        let id = format!("meta{}", messages.len());
        messages.push((id, metadata, None));
    }

    /// The messages of `queue` (their whole `{"body", "ttl"}` objects for posted signals).
    fn queued(&self, queue: &str) -> Vec<Value> {
        self.state()
            .queues
            .get(queue)
            .map(|messages| messages.iter().map(|m| m.1.clone()).collect())
            .unwrap_or_default()
    }
}

async fn start_zaqar(cloud: &Cloud) -> MockServer {
    let zaqar = MockServer::start().await;
    Mock::given(any()).respond_with(ZaqarResponder(cloud.clone())).mount(&zaqar).await;
    cloud.state().zaqar_url = zaqar.uri();
    zaqar
}

async fn start_heat(cloud: &Cloud) -> MockServer {
    let heat = MockServer::start().await;
    Mock::given(any()).respond_with(HeatResponder(cloud.clone())).mount(&heat).await;
    cloud.state().heat_url = heat.uri();
    heat
}

async fn start_keystone(cloud: &Cloud, listener: std::net::TcpListener) -> MockServer {
    let keystone = MockServer::builder().listener(listener).start().await;
    Mock::given(any()).respond_with(KeystoneResponder(cloud.clone())).mount(&keystone).await;
    keystone
}

/// A free loopback port, nothing listening on it (yet).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// A deployment signalling with HEAT_SIGNAL through `keystone_url` as `password`.
fn heat_signal_deployment(id: &str, resource: &str, keystone_url: &str, password: &str) -> Value {
    let mut deployment =
        script_deployment(id, resource, &format!("#!/bin/sh\necho -n {id} > $heat_outputs_path.result\n"), None);
    let inputs = deployment["inputs"].as_array_mut().unwrap();
    for (name, value) in [
        ("deploy_auth_url", format!("{keystone_url}/v3")),
        ("deploy_user_id", USER_ID.into()),
        ("deploy_password", password.into()),
        ("deploy_project_id", PROJECT_ID.into()),
        ("deploy_stack_id", STACK_ID.into()),
        ("deploy_resource_name", resource.into()),
        ("deploy_signal_transport", "HEAT_SIGNAL".into()),
    ] {
        inputs.push(json!({"name": name, "type": "String", "value": value}));
    }
    deployment
}

/// Writes a config with one heat source (0600: it holds a password).
fn write_heat_config(sandbox: &Sandbox, keystone_url: &str, password: &str) {
    let source = format!(
        "[[source]]\nkind = \"heat\"\nauth_url = \"{keystone_url}/v3\"\nuser_id = \"{USER_ID}\"\n\
         password = \"{password}\"\nproject_id = \"{PROJECT_ID}\"\nstack_id = \"{STACK_ID}\"\n\
         resource_name = \"server\"\nconnect_timeout_secs = 2\nread_timeout_secs = 5\n"
    );
    sandbox.write_config("", &source);
    std::fs::set_permissions(sandbox.config_path(), std::fs::Permissions::from_mode(0o600)).unwrap();
}

async fn wait_until(limit: Duration, what: &str, daemon: &Daemon, mut condition: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + limit;
    while !condition() {
        assert!(std::time::Instant::now() < deadline, "timed out waiting for: {what}\n{}", daemon.log_text());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// `status --json` once `ready` holds for it, or after 15 s (the caller's assertions then say why).
async fn status_when(sandbox: &Sandbox, ready: impl Fn(&[Value]) -> bool) -> Vec<Value> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    loop {
        let rows = sandbox.status().await;
        if ready(&rows) || tokio::time::Instant::now() > deadline {
            return rows;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Whether `rows` has a row for `id` that satisfies `check`.
fn row_where(rows: &[Value], id: &str, check: impl Fn(&Value) -> bool) -> bool {
    rows.iter().any(|row| row["id"] == id && check(row))
}

fn assert_no_secret(text: &str) {
    assert!(!text.contains(PASSWORD), "the password leaked:\n{text}");
    assert!(!text.contains("tttttttttttttttttttt"), "a token leaked:\n{text}");
}

#[tokio::test]
async fn keystone_down_then_back_and_heat_api_500s() {
    let sandbox = Sandbox::new();
    let cloud = Cloud::default();
    let heat = start_heat(&cloud).await;
    let keystone_port = free_port();
    let keystone_url = format!("http://127.0.0.1:{keystone_port}");
    {
        let mut state = cloud.state();
        state.metadata = json!({"deployments": [heat_signal_deployment("d-1", "dep_one", &keystone_url, PASSWORD)]});
        state.signal_failures = 2;
    }
    write_heat_config(&sandbox, &keystone_url, PASSWORD);
    let mut daemon = sandbox.spawn_run();

    // Keystone is down: the source reports it and keeps trying; heat-api sees nothing.
    wait_until(Duration::from_secs(20), "the outage reported", &daemon, || {
        daemon.log_text().contains("cannot reach keystone at")
    })
    .await;
    assert!(heat.received_requests().await.unwrap().is_empty());

    // Keystone comes back on its address: the source recovers, the deployment runs, and its signal
    // gets through heat-api's two 500s.
    let listener = std::net::TcpListener::bind(("127.0.0.1", keystone_port)).unwrap();
    let _keystone = start_keystone(&cloud, listener).await;
    wait_until(Duration::from_secs(40), "the signal delivered", &daemon, || !cloud.state().signals.is_empty()).await;
    let (resource, body) = cloud.state().signals[0].clone();
    assert_eq!(resource, "dep_one");
    assert_eq!(body["result"], "d-1");
    assert_eq!(body["deploy_status_code"], 0);
    assert_eq!(cloud.state().signal_attempts, 3, "two 500s retried, then delivered");
    // heat-api saw the signal before the agent journals its acknowledgement: wait for that.
    let rows = status_when(&sandbox, |rows| row_where(rows, "d-1", |row| row["state"] == "signalled")).await;
    assert_eq!(Sandbox::status_of(&rows, "d-1")["state"], "signalled", "{rows:?}");

    daemon.terminate();
    assert!(daemon.wait(Duration::from_secs(15)).await.success());
    assert_no_secret(&daemon.log_text());
    assert_no_secret(&serde_json::to_string(&rows).unwrap());
}

#[tokio::test]
async fn a_token_revoked_mid_run_is_renewed() {
    let sandbox = Sandbox::new();
    let cloud = Cloud::default();
    let _heat = start_heat(&cloud).await;
    let keystone = start_keystone(&cloud, std::net::TcpListener::bind("127.0.0.1:0").unwrap()).await;
    let first = heat_signal_deployment("d-1", "dep_one", &keystone.uri(), PASSWORD);
    cloud.state().metadata = json!({"deployments": [first.clone()]});
    write_heat_config(&sandbox, &keystone.uri(), PASSWORD);
    let mut daemon = sandbox.spawn_run();
    wait_until(Duration::from_secs(30), "the first signal", &daemon, || cloud.state().signals.len() == 1).await;

    // Every token issued so far expires (Keystone revokes them); the next deployment appears.
    {
        let mut state = cloud.state();
        let issued = state.issued;
        for number in 1..=issued {
            state.revoked.insert(format!("token-{number}-{}", "t".repeat(40)));
        }
        let second = heat_signal_deployment("d-2", "dep_two", &keystone.uri(), PASSWORD);
        state.metadata = json!({"deployments": [first, second]});
    }
    wait_until(Duration::from_secs(30), "the second signal", &daemon, || cloud.state().signals.len() == 2).await;
    let (resource, issued) = {
        let state = cloud.state();
        (state.signals[1].0.clone(), state.issued)
    };
    assert_eq!(resource, "dep_two");
    assert!(issued >= 3, "the source and the signal each authenticated again: {issued}");
    daemon.terminate();
    assert!(daemon.wait(Duration::from_secs(15)).await.success());
    assert_no_secret(&daemon.log_text());
}

#[tokio::test]
async fn refused_credentials_are_permanent_and_reported_clearly() {
    let sandbox = Sandbox::new();
    let cloud = Cloud::default();
    let _heat = start_heat(&cloud).await;
    let keystone = start_keystone(&cloud, std::net::TcpListener::bind("127.0.0.1:0").unwrap()).await;
    let wrong = "Wr0ng-pa55word-xyz";
    cloud.state().metadata = json!({"deployments": []});
    write_heat_config(&sandbox, &keystone.uri(), wrong);
    // The deployment comes from a local source; its HEAT_SIGNAL credentials are refused too.
    let config = std::fs::read_to_string(sandbox.config_path()).unwrap();
    let local = format!("[[source]]\nkind = \"local\"\npath = \"{}\"\n", sandbox.local().display());
    std::fs::write(sandbox.config_path(), format!("{config}\n{local}")).unwrap();
    let deployment = heat_signal_deployment("d-bad", "dep_bad", &keystone.uri(), wrong);
    sandbox.write_local_document("a.json", &json!({"deployments": [deployment]}));
    let mut daemon = sandbox.spawn_run();

    wait_until(Duration::from_secs(30), "the refusal reported", &daemon, || {
        let log = daemon.log_text();
        log.contains("refused the credentials of user") && log.contains("signal refused")
    })
    .await;
    // The log line can come before the journal records the refusal.
    let failed = |row: &Value| row["signal"].as_str().is_some_and(|signal| signal.contains("HEAT_SIGNAL"));
    let rows = status_when(&sandbox, |rows| row_where(rows, "d-bad", failed)).await;
    let signal = Sandbox::status_of(&rows, "d-bad")["signal"].as_str().unwrap().to_string();
    assert!(signal.contains("HEAT_SIGNAL: keystone at http://127.0.0.1:"), "{signal}");
    assert!(signal.contains(&format!("refused the credentials of user {USER_ID} for project {PROJECT_ID} (HTTP 401)")));
    daemon.terminate();
    assert!(daemon.wait(Duration::from_secs(15)).await.success());
    let log = daemon.log_text();
    let source_line = log.lines().find(|line| line.contains("source[0] heat") && line.contains("refused")).unwrap();
    assert!(source_line.contains("ERROR"), "a refused source is reported as an error, not a warning: {source_line}");
    for text in [log.as_str(), &serde_json::to_string(&rows).unwrap()] {
        assert!(!text.contains(wrong), "the password leaked:\n{text}");
    }
    assert!(cloud.state().signals.is_empty());
}

#[tokio::test]
async fn zaqar_source_and_zaqar_signal() {
    let sandbox = Sandbox::new();
    let cloud = Cloud::default();
    let _zaqar = start_zaqar(&cloud).await;
    let keystone = start_keystone(&cloud, std::net::TcpListener::bind("127.0.0.1:0").unwrap()).await;
    let source = format!(
        "[[source]]\nkind = \"zaqar\"\nauth_url = \"{}\"\nuser_id = \"{USER_ID}\"\npassword = \"{PASSWORD}\"\n\
         project_id = \"{PROJECT_ID}\"\nqueue_id = \"metadata-queue\"\nregion_name = \"RegionOne\"\n",
        keystone.uri()
    );
    sandbox.write_config("", &source);
    std::fs::set_permissions(sandbox.config_path(), std::fs::Permissions::from_mode(0o600)).unwrap();
    let mut deployment = heat_signal_deployment("z-1", "dep_z", &keystone.uri(), PASSWORD);
    deployment["inputs"].as_array_mut().unwrap().push(json!({"name": "deploy_queue_id", "value": "signal-queue"}));
    // Two versions queued before the agent starts: only the newest counts.
    cloud.post_metadata("metadata-queue", json!({"deployments": []}));
    cloud.post_metadata("metadata-queue", json!({"deployments": [deployment]}));
    let mut daemon = sandbox.spawn_run();

    wait_until(Duration::from_secs(30), "the zaqar signal", &daemon, || cloud.queued("signal-queue").len() == 1).await;
    let message = cloud.queued("signal-queue").remove(0);
    assert_eq!(message["ttl"], 600);
    assert_eq!(message["body"]["result"], "z-1");
    assert_eq!(message["body"]["deploy_status_code"], 0);
    assert!(cloud.queued("metadata-queue").is_empty(), "the metadata messages were deleted");

    // An empty queue keeps the last document: polls go on, nothing runs again.
    let polls = cloud.state().zaqar_requests;
    wait_until(Duration::from_secs(10), "more polls", &daemon, || cloud.state().zaqar_requests >= polls + 2).await;
    assert_eq!(cloud.queued("signal-queue").len(), 1);
    let rows = sandbox.status().await;
    assert_eq!(Sandbox::status_of(&rows, "z-1")["state"], "signalled", "{rows:?}");
    daemon.terminate();
    assert!(daemon.wait(Duration::from_secs(15)).await.success());
    let log = daemon.log_text();
    assert!(!log.contains("fetch failed") && !log.contains("no document yet"), "{log}");
    assert_no_secret(&log);
}

/// The agent killed at each journal transition around a HEAT_SIGNAL (`ANNEAL_FAILPOINT`, debug
/// builds), then run again: the hook never runs twice and Heat receives the signal, with the same
/// body each time it is sent again. Killed between the hook's exit and its result reaching the
/// journal, the run counts as interrupted and Heat gets its failure (`options.on_interrupt`'s
/// default), as with every transport.
#[tokio::test]
async fn crash_at_each_transition_of_a_heat_signal() {
    for failpoint in ["after_seen", "after_hook_exit", "after_finished", "mid_signal", "after_signal_ack"] {
        let sandbox = Sandbox::new();
        let cloud = Cloud::default();
        let _heat = start_heat(&cloud).await;
        let keystone = start_keystone(&cloud, std::net::TcpListener::bind("127.0.0.1:0").unwrap()).await;
        let counts = sandbox.root().join("runs");
        let mut deployment = heat_signal_deployment("c-1", "dep_c", &keystone.uri(), PASSWORD);
        deployment["config"] =
            json!(format!("#!/bin/sh\necho run >> {}\necho -n c-1 > $heat_outputs_path.result\n", counts.display()));
        cloud.state().metadata = json!({"deployments": [deployment]});
        write_heat_config(&sandbox, &keystone.uri(), PASSWORD);

        let mut crashing = tokio::process::Command::new(BINARY);
        crashing.args(["once", "--config"]).arg(sandbox.config_path()).env("ANNEAL_FAILPOINT", failpoint);
        let crashed = run_to_end(crashing, None, Duration::from_secs(60)).await;
        assert!(!crashed.status.success(), "{failpoint}: the agent crashed: {}", crashed.stderr);
        let finished = sandbox.once().await;
        let interrupted = failpoint == "after_hook_exit";
        assert_eq!(finished.status.success(), !interrupted, "{failpoint}: second run: {}", finished.stderr);

        let runs = std::fs::read_to_string(&counts).unwrap_or_default().lines().count();
        assert_eq!(runs, 1, "{failpoint}: the hook ran once");
        let signals = cloud.state().signals.clone();
        assert!(!signals.is_empty(), "{failpoint}: signalled");
        assert!(signals.iter().all(|signal| *signal == signals[0]), "{failpoint}: one body: {signals:?}");
        let expected = if failpoint == "after_signal_ack" { 2 } else { 1 };
        assert_eq!(signals.len(), expected, "{failpoint}: {signals:?}");
        assert_eq!(signals[0].1["deploy_status_code"], i32::from(interrupted), "{failpoint}: {signals:?}");
        let rows = sandbox.status().await;
        assert_eq!(Sandbox::status_of(&rows, "c-1")["state"], "signalled", "{failpoint}: {rows:?}");
        assert_no_secret(&format!("{}{}", crashed.stderr, finished.stderr));
    }
}
