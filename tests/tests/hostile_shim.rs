//! Hostile input against a real `anneal-shim serve`: every `tests/hostile/api_body` request
//! sent byte for byte, every `tests/hostile/template` case posted to `/v1/stacks` and given to
//! `anneal-shim stack create`, and the `tests/hostile/slow_client` requests that stall half
//! way. Each must get the expected 4xx with a JSON error naming the problem (or, for a stalled
//! client, a timeout), the shim must keep serving others, and what it stores (stacks, events,
//! servers, the server documents) must be unchanged.

mod hostile_support;

use std::time::{Duration, Instant};

use anneal_tests::{Shim, run_command, shim_binary, wait_until};
use hostile_support::{Case, cases, exchange, send};
use serde_json::{Value, json};
use tokio::io::AsyncReadExt;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio::process::Command;

/// A stack that stays in progress (its wait condition waits for a signal), so the cases have a
/// live deployment signal token and wait-condition handle token to aim at.
const BASE_TEMPLATE: &str = r##"
heat_template_version: 2018-08-31
resources:
  handle: {type: OS::Heat::WaitConditionHandle}
  wait:
    type: OS::Heat::WaitCondition
    properties: {handle: {get_resource: handle}, timeout: 3600, count: 1}
  config:
    type: OS::Heat::SoftwareConfig
    properties:
      group: script
      inputs: [{name: endpoint}]
      config: "#!/bin/sh\ntrue\n"
  deploy:
    type: OS::Heat::SoftwareDeployment
    properties:
      config: {get_resource: config}
      server: base-vm
      input_values: {endpoint: {get_attr: [handle, endpoint]}}
"##;

/// A shim with servers `vm1` and `base-vm`, the stack `base`, and the tokens the cases use.
struct Fixture {
    shim: Shim,
    address: String,
    admin: String,
    /// `vm1`'s token (for `auth: server` cases).
    server: String,
    base_server: String,
    signal: String,
    handle: String,
}

impl Fixture {
    async fn start() -> Fixture {
        let shim = Shim::start().await;
        let address = shim.url().trim_start_matches("http://").to_string();
        let admin = std::fs::read_to_string(shim.token_file()).expect("admin token").trim().to_string();
        let token = |credentials: Value| credentials["token"].as_str().expect("token").to_string();
        let server = token(shim.cli_json(&["server", "add", "vm1", "--format", "json"]).await);
        let base_server = token(shim.cli_json(&["server", "add", "base-vm", "--format", "json"]).await);
        let template = shim.write_template("base.yaml", BASE_TEMPLATE);
        shim.cli_ok(&["stack", "create", "base", "--template", &template.display().to_string()]).await;
        let mut fixture =
            Fixture { shim, address, admin, server, base_server, signal: String::new(), handle: String::new() };
        let deployment = wait_until(Duration::from_secs(30), "the base deployment is published", || async {
            let document = fixture.get("/v1/servers/base-vm/metadata", &fixture.base_server).await;
            document["deployments"].as_array().and_then(|list| list.first().cloned())
        })
        .await;
        let input = |name: &str| {
            let inputs = deployment["inputs"].as_array().expect("inputs");
            let input = inputs.iter().find(|input| input["name"] == name).expect("input");
            let url = input["value"].as_str().expect("a URL");
            url.rsplit('/').next().expect("token").to_string()
        };
        fixture.signal = input("deploy_signal_id");
        fixture.handle = input("endpoint");
        fixture
    }

    /// GET `path` with `token`; the JSON body.
    async fn get(&self, path: &str, token: &str) -> Value {
        let response = send(&self.address, "GET", path, &[bearer(token)], b"").await;
        assert_eq!(response.status, 200, "GET {path}: {}", response.body);
        serde_json::from_str(&response.body).unwrap_or_else(|error| panic!("GET {path}: {error}: {}", response.body))
    }

    /// Everything the shim stores that a case could touch. Servers' `last_seen` is left out:
    /// an authenticated metadata request legitimately updates it.
    async fn stored_state(&self) -> Value {
        let mut servers = self.get("/v1/servers", &self.admin).await;
        for server in servers.as_array_mut().expect("a server list") {
            server.as_object_mut().expect("a server").remove("last_seen");
        }
        json!({
            "stacks": self.get("/v1/stacks", &self.admin).await,
            "base": self.get("/v1/stacks/base", &self.admin).await,
            "events": self.get("/v1/stacks/base/events", &self.admin).await,
            "servers": servers,
            "document": self.get("/v1/servers/base-vm/metadata", &self.base_server).await,
        })
    }

    /// `text` with the fixture's tokens in place of `{admin}`, `{signal}` and `{handle}`.
    fn fill(&self, text: &str) -> String {
        text.replace("{admin}", &self.admin).replace("{signal}", &self.signal).replace("{handle}", &self.handle)
    }
}

fn bearer(token: &str) -> (String, String) {
    ("Authorization".to_string(), format!("Bearer {token}"))
}

/// Sends one api_body case; `Err` says how the answer differs from the manifest.
async fn check_api_case(fixture: &Fixture, case: &Case) -> Result<(), String> {
    let mut headers = Vec::new();
    match case.field("auth") {
        "none" => {}
        "server" => headers.push(bearer(&fixture.server)),
        _ => headers.push(bearer(&fixture.admin)),
    }
    if let Some(content_type) = case.expect.get("content_type").and_then(Value::as_str) {
        headers.push(("Content-Type".to_string(), content_type.to_string()));
    }
    for (name, value) in case.expect.get("headers").and_then(Value::as_object).into_iter().flatten() {
        headers.retain(|(existing, _)| !existing.eq_ignore_ascii_case(name));
        headers.push((name.clone(), fixture.fill(value.as_str().unwrap_or_default())));
    }
    let path = fixture.fill(case.field("path"));
    let response = send(&fixture.address, case.field("method"), &path, &headers, &case.bytes).await;
    let status = case.expect["status"].as_u64().unwrap_or(0);
    if u64::from(response.status) != status || !response.message().contains(case.error()) {
        let body: String = response.body.chars().take(300).collect();
        return Err(format!("got {} {body}, want {status} with {:?}", response.status, case.error()));
    }
    Ok(())
}

#[tokio::test]
async fn hostile_api_requests_get_a_4xx_naming_the_problem_and_change_nothing() {
    let fixture = Fixture::start().await;
    let before = fixture.stored_state().await;
    let cases = cases("api_body");
    let mut problems = Vec::new();
    for case in &cases {
        if let Err(problem) = check_api_case(&fixture, case).await {
            problems.push(format!("{}: {problem}", case.name));
        }
        if fixture.stored_state().await != before {
            problems.push(format!("{}: the stored state changed", case.name));
            break;
        }
    }
    assert!(
        problems.is_empty(),
        "{} of {} API cases failed:\n{}\nshim log:\n{}",
        problems.len(),
        cases.len(),
        problems.join("\n"),
        fixture.shim.log_text()
    );
}

/// The `parameters` of a template case (given as `--param K=V` and as the API's map).
fn parameters(case: &Case) -> serde_json::Map<String, Value> {
    case.expect.get("parameters").and_then(Value::as_object).cloned().unwrap_or_default()
}

/// How many `stack create` processes run at once.
const CLI_AT_ONCE: usize = 4;

#[tokio::test]
async fn hostile_templates_are_refused_by_the_api_and_the_cli_and_change_nothing() {
    let fixture = Fixture::start().await;
    let before = fixture.stored_state().await;
    let cases = cases("template");
    let mut problems = Vec::new();
    let mut commands = tokio::task::JoinSet::new();
    for (index, case) in cases.iter().enumerate() {
        if let Err(problem) = check_template_through_the_api(&fixture, index, case).await {
            problems.push(format!("{} (API): {problem}", case.name));
        }
        let file = fixture.shim.write_template(&format!("hostile-{index}.yaml"), "");
        std::fs::write(&file, &case.bytes).expect("write template");
        let mut command = Command::new(shim_binary());
        command.args(["stack", "create", &format!("hostile-cli-{index}"), "--template"]).arg(&file);
        for (name, value) in parameters(case) {
            command.arg("--param").arg(format!("{name}={}", value.as_str().unwrap_or_default()));
        }
        command.args(["--url", fixture.shim.url(), "--token-file"]).arg(fixture.shim.token_file());
        command.env_remove("ANNEAL_TOKEN").env_remove("ANNEAL_URL");
        let (name, error) = (case.name.clone(), case.error().to_string());
        commands.spawn(async move {
            let output = run_command(command, Duration::from_secs(60)).await;
            let stderr: String = output.stderr.chars().take(300).collect();
            let refused = output.code != 0 && output.stderr.contains(&error);
            (!refused).then(|| format!("{name} (CLI): exit {}, stderr {stderr}", output.code))
        });
        while commands.len() >= CLI_AT_ONCE {
            problems.extend(commands.join_next().await.and_then(Result::ok).flatten());
        }
    }
    while let Some(joined) = commands.join_next().await {
        problems.extend(joined.ok().flatten());
    }
    assert!(
        problems.is_empty(),
        "{} of {} template cases failed:\n{}",
        problems.len(),
        cases.len(),
        problems.join("\n")
    );
    assert_eq!(fixture.stored_state().await, before, "refused templates changed the stored state");
}

/// Posts template case `index` as a new stack; `Err` says how the answer differs.
async fn check_template_through_the_api(fixture: &Fixture, index: usize, case: &Case) -> Result<(), String> {
    let status = case.expect["status"].as_u64().unwrap_or(400);
    let body = json!({"name": format!("hostile-{index}"), "template": case.text(), "parameters": parameters(case)});
    let response =
        send(&fixture.address, "POST", "/v1/stacks", &[bearer(&fixture.admin)], body.to_string().as_bytes()).await;
    if u64::from(response.status) != status || !response.message().contains(case.error()) {
        let body: String = response.body.chars().take(300).collect();
        return Err(format!("got {} {body}, want {status} with {:?}", response.status, case.error()));
    }
    Ok(())
}

/// Stalled connections opened on top of the corpus cases (a slowloris).
const EXTRA_STALLED: usize = 100;

#[tokio::test]
async fn slow_clients_are_timed_out_while_others_are_served() {
    let fixture = Fixture::start().await;
    let before = fixture.stored_state().await;
    let cases = cases("slow_client");
    let mut stalled = Vec::new();
    for case in &cases {
        let mut stream = TcpStream::connect(&fixture.address).await.expect("connect");
        stream.write_all(fixture.fill(&case.text()).as_bytes()).await.expect("send the first half");
        stalled.push((case, stream));
    }
    let mut crowd = Vec::new();
    for _ in 0..EXTRA_STALLED {
        let mut stream = TcpStream::connect(&fixture.address).await.expect("connect");
        stream.write_all(b"GET /v1/stacks HTTP/1.1\r\nHost: x\r\n").await.expect("send half a head");
        crowd.push(stream);
    }
    // While all of those hang, other clients are served at once.
    let started = Instant::now();
    assert_eq!(fixture.stored_state().await, before, "the stalled requests changed the stored state");
    let served = started.elapsed();
    assert!(served < Duration::from_secs(5), "requests beside stalled ones took {served:?}");

    let mut problems = Vec::new();
    for (case, mut stream) in stalled {
        let mut received = Vec::new();
        let read = tokio::time::timeout(Duration::from_secs(45), stream.read_to_end(&mut received)).await;
        let response = hostile_support::parse_response(&received);
        let want = case.expect["status"].as_u64().unwrap_or(0);
        match read {
            Err(_) => problems.push(format!("{}: not timed out within 45 s", case.name)),
            Ok(_) if u64::from(response.status) != want => {
                problems.push(format!("{}: got {} {}, want {want}", case.name, response.status, response.body));
            }
            Ok(_) => {}
        }
    }
    for mut stream in crowd {
        let mut received = Vec::new();
        let read = tokio::time::timeout(Duration::from_secs(45), stream.read_to_end(&mut received)).await;
        assert!(read.is_ok(), "a stalled head was not timed out within 45 s");
    }
    assert!(problems.is_empty(), "slow clients not timed out as expected:\n{}", problems.join("\n"));
    let after = exchange(
        &fixture.address,
        format!(
            "GET /v1/stacks HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {}\r\nConnection: close\r\n\r\n",
            fixture.admin
        )
        .into_bytes(),
    )
    .await;
    assert_eq!(after.status, 200, "the shim still serves after the slow clients: {}", after.body);
    assert_eq!(fixture.stored_state().await, before, "the slow clients changed the stored state");
}
