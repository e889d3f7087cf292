//! Scenario 4: anneal-agent against Heat-shaped metadata it did not produce. One document holds
//! every fixture of `tests/fixtures/heat/` (the POLL_SERVER_CFN server metadata, the
//! heat-config deployments list, the component deployment plus a TEMP_URL_SIGNAL copy of it,
//! os-collect-config's merger entries), every URL moved onto a loopback receiver. It is served
//! as a Swift temp URL would serve it (plain GET, no long-poll header) to a running agent, and
//! written as Heat's boot-time cfn-init-data for `once`. The captured signals are checked
//! against heat-config-notify's wire rules (docs/metadata.md "The HTTP signal") and Heat's
//! failure rule (docs/hook-protocol.md "The failure rule"); a third test
//! replays `signal-decision-table.json` and the status-code edge cases.

mod heat;

use std::time::Duration;

use anneal_tests::{Agent, AgentSettings, toml_string, wait_until};
use heat::{
    EMIT_HOOK, FAKE_HOOK, RAISING_HOOK, assert_notify_shape, fixture, heat_fails, path_and_query, received, receiver,
    request_to, to_loopback, urls,
};
use serde_json::{Value, json};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

const FAKE_GROUPS: [&str; 7] = ["cfn-init", "chef", "puppet", "salt", "apply-config", "hiera", "json-file"];
const SWIFT_OBJECT: &str = "/v1/AUTH_8a3f0c2e/heat-metadata/server-9e8d";
const SWIFT_QUERY: &str = "temp_url_sig=5f4e3d2c1b0a&temp_url_expires=2147483647";
const TEMP_URL_SIGNAL: &str =
    "http://192.0.2.20:8080/v1/AUTH_8a3f0c2e/heat-signals/component?temp_url_sig=0e1f&temp_url_expires=2147483647";
const CFN_ID: &str = "c4f1a2b3-0d9e-4f8a-b7c6-d5e4f3a2b1c0";
const COMPONENT_ID: &str = "7d1c0b2a-3e4f-4a5b-8c6d-9e0f1a2b3c4d";
const TEMP_URL_COMPONENT_ID: &str = "8e2d1c3b-4f5a-4b6c-9d7e-0f1a2b3c4d5e";

/// Every fixture in one document, URLs on `base`.
fn heat_document(base: &str) -> Value {
    let cfn = fixture("server-metadata-cfn.json");
    let merger = fixture("os-collect-config-merger.json");
    let component = fixture("component-deployment.json");
    let mut temp_url_component = component.clone();
    temp_url_component["id"] = json!(TEMP_URL_COMPONENT_ID);
    temp_url_component["inputs"] = json!([
        {"name": "deploy_action", "type": "String", "value": "UPDATE"},
        {"name": "deploy_signal_transport", "type": "String", "value": "TEMP_URL_SIGNAL"},
        {"name": "deploy_signal_id", "type": "String", "value": TEMP_URL_SIGNAL},
        {"name": "deploy_signal_verb", "type": "String", "value": "PUT"}
    ]);
    let mut deployments = cfn["deployments"].as_array().expect("list").clone();
    deployments.extend(fixture("heat-config-deployments.json").as_array().expect("list").iter().cloned());
    deployments.extend([component, temp_url_component]);
    deployments.extend(merger["deployments"].as_array().expect("list").iter().cloned());
    let mut document = json!({"os-collect-config": cfn["os-collect-config"], "old-style": merger["old-style"], "deployments": deployments});
    to_loopback(&mut document, base);
    for url in urls(&document) {
        assert!(url.starts_with(base), "every URL is on loopback: {url}");
    }
    document
}

/// A fixture URL as it arrives at the receiver: `/from/<authority>` + its path and query.
fn moved(url: &str) -> String {
    let mut value = Value::String(url.to_string());
    to_loopback(&mut value, "");
    value.as_str().expect("string").to_string()
}

fn install_hooks(agent: &Agent) {
    for group in FAKE_GROUPS {
        agent.install_hook(group, FAKE_HOOK);
    }
    agent.install_hook("hook-raises", RAISING_HOOK);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn swift_temp_url_document_runs_every_fixture() {
    let signals = receiver().await;
    let document = heat_document(&signals.uri());
    let swift = MockServer::start().await;
    let served = ResponseTemplate::new(200)
        .set_body_json(&document)
        .insert_header("ETag", "\"swift-etag-1\"")
        .insert_header("Last-Modified", "Wed, 01 May 2024 10:00:00 GMT");
    Mock::given(method("GET")).and(path(SWIFT_OBJECT)).respond_with(served).mount(&swift).await;
    let dir = tempfile::tempdir().expect("temp dir");
    let url = format!("{}{SWIFT_OBJECT}?{SWIFT_QUERY}", swift.uri());
    let source = format!("[[source]]\nkind = \"http\"\nurl = {}\n", toml_string(&url));
    let mut agent = Agent::standalone(dir.path(), "server", &AgentSettings::default(), &source);
    install_hooks(&agent);
    agent.start();

    wait_until(Duration::from_secs(30), "every runnable fixture deployment settled", || async {
        let rows = agent.status().await;
        (rows.len() == 13 && rows.iter().all(settled)).then_some(())
    })
    .await;
    check_results(&agent, &document, &signals).await;

    wait_until(Duration::from_secs(10), "a second poll after poll_interval_secs", || async {
        (received(&swift).await.len() >= 2).then_some(())
    })
    .await;
    let requests = received(&swift).await;
    for (index, request) in requests.iter().enumerate() {
        assert_eq!(request.method.as_str(), "GET");
        assert_eq!(path_and_query(request), format!("{SWIFT_OBJECT}?{SWIFT_QUERY}"), "the temp URL, unchanged");
        assert!(request.headers.get("authorization").is_none(), "no token for a temp URL");
        if index > 0 {
            let tag = request.headers.get("if-none-match").map(|value| value.to_str().unwrap_or_default());
            assert_eq!(tag, Some("\"swift-etag-1\""), "later polls are conditional GETs");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn heat_local_cfn_init_data_runs_every_fixture_once() {
    let signals = receiver().await;
    let document = heat_document(&signals.uri());
    let dir = tempfile::tempdir().expect("temp dir");
    let cfn_init_data = dir.path().join("cfn-init-data");
    std::fs::write(&cfn_init_data, serde_json::to_vec(&document).expect("json")).expect("write cfn-init-data");
    let source =
        format!("[[source]]\nkind = \"heat-local\"\npath = {}\n", toml_string(&cfn_init_data.to_string_lossy()));
    let agent = Agent::standalone(dir.path(), "server", &AgentSettings::default(), &source);
    install_hooks(&agent);

    let once = agent.command(&["once"]).await;
    assert_eq!(once.code, 1, "deployments failed, so once exits 1: {once:?}");
    check_results(&agent, &document, &signals).await;
    let again = agent.command(&["once"]).await;
    assert_eq!(again.code, 0, "a second cycle runs nothing and has nothing to deliver: {again:?}");
    assert_eq!(signals_received(&signals).await.len(), 4, "nothing was signalled twice");
}

/// Finished and signalled (or not needed), or waiting for a hook that does not exist.
fn settled(row: &Value) -> bool {
    let delivered = row["signal"] == "delivered" || row["signal"] == "not needed (NO_SIGNAL)";
    (row["state"] == "signalled" && delivered) || row["state"] == "waiting"
}

async fn check_results(agent: &Agent, document: &Value, signals: &MockServer) {
    let rows = agent.status().await;
    let row = |id: &str| rows.iter().find(|row| row["id"] == id).unwrap_or_else(|| panic!("no row {id}: {rows:#?}"));
    for id in [CFN_ID, "1111", TEMP_URL_COMPONENT_ID] {
        assert_eq!((&row(id)["outcome"], &row(id)["signal"]), (&json!("COMPLETE"), &json!("delivered")), "{id}");
    }
    for id in ["2222", "3333", "4444", "6666", "7777", "8888", COMPONENT_ID] {
        assert_eq!(row(id)["outcome"], "COMPLETE", "{id}: {:#}", row(id));
        assert_eq!(row(id)["signal"], "not needed (NO_SIGNAL)", "{id}: no deploy_signal_id");
    }
    assert!(row("5555")["outcome"].as_str().unwrap_or_default().starts_with("FAILED"), "{:#}", row("5555"));
    assert_eq!(row("5555")["signal"], "delivered");
    assert!(row("0123")["outcome"].as_str().unwrap_or_default().starts_with("FAILED"), "{:#}", row("0123"));
    assert_eq!(row("9999")["state"], "waiting");
    assert!(row("9999")["reason"].as_str().unwrap_or_default().contains("no-such-hook"), "{:#}", row("9999"));
    assert_eq!(rows.len(), 13, "the merger's entries without an id are rejected one by one: {rows:#?}");
    check_signals(document, signals, &rows).await;
}

/// The signals the receiver got. The document's `os-collect-config` key (moved onto the
/// receiver like every URL) also configures the agent's own cfn source when it comes from
/// cfn-init-data (a plain http source's key is ignored: docs/openstack.md), whose polls are
/// GETs: no signal is.
async fn signals_received(signals: &MockServer) -> Vec<wiremock::Request> {
    received(signals).await.into_iter().filter(|request| request.method.as_str() != "GET").collect()
}

async fn check_signals(document: &Value, signals: &MockServer, rows: &[Value]) {
    let requests = signals_received(signals).await;
    assert_eq!(requests.len(), 4, "{:?}", requests.iter().map(path_and_query).collect::<Vec<_>>());
    let cfn_url = fixture("server-metadata-cfn.json")["deployments"][0]["inputs"][6]["value"].clone();
    let cfn = request_to(&requests, &moved(cfn_url.as_str().expect("the CFN pre-signed URL")));
    assert_eq!(
        cfn.body,
        br#"{"result": "hello fooooo", "deploy_stdout": "", "deploy_stderr": "", "deploy_status_code": 0}"#
    );
    let chef = request_to(&requests, "/from/192.0.2.2/foo");
    assert_eq!(chef.body, br#"{"deploy_stdout": "stdout", "deploy_stderr": "stderr", "deploy_status_code": "0"}"#);
    let script = request_to(&requests, "/from/192.0.2.3/foo");
    let component = request_to(&requests, &moved(TEMP_URL_SIGNAL));
    assert_notify_shape(&[cfn, chef, script], "POST").await;
    assert_notify_shape(&[component], "PUT").await;
    assert_eq!(
        component.body,
        br#"{"phase": "updated\n", "deploy_stdout": "", "deploy_stderr": "", "deploy_status_code": 0}"#
    );
    for (request, id) in [(cfn, CFN_ID), (chef, "1111"), (script, "5555"), (component, TEMP_URL_COMPONENT_ID)] {
        let body: Value = serde_json::from_slice(&request.body).expect("JSON body");
        let deployment = document["deployments"]
            .as_array()
            .expect("list")
            .iter()
            .find(|deployment| deployment["id"] == id)
            .expect("id");
        let outputs = deployment["outputs"].as_array().cloned().unwrap_or_default();
        let row = rows.iter().find(|row| row["id"] == id).expect("row");
        let failed = row["outcome"].as_str().unwrap_or_default().starts_with("FAILED");
        assert_eq!(failed, heat_fails(&body, &outputs), "the agent judges {id} as Heat would: {body} / {row}");
    }
}

/// One deployment of the decision-table test: what its hook prints and what Heat would decide.
struct Case {
    id: String,
    stdout: String,
    outputs: Value,
    verb: Option<&'static str>,
    /// `None`: COMPLETE; `Some(reason)`: FAILED (an empty reason is not checked).
    failure: Option<String>,
}

/// The four rows of `signal-decision-table.json`, verbatim.
fn table_cases() -> Vec<Case> {
    let table = fixture("signal-decision-table.json");
    let rows = table["cases"].as_array().expect("cases").clone();
    rows.iter()
        .enumerate()
        .map(|(index, row)| {
            let error_output = row["error_output"].as_array().is_some_and(|names| names.contains(&json!("foo")));
            Case {
                id: format!("table-{index}"),
                stdout: row["signal"].to_string(),
                outputs: json!([{"name": "foo", "type": "String", "error_output": error_output}]),
                verb: None,
                failure: (row["status"] == "FAILED")
                    .then(|| row["status_reason"].as_str().expect("reason").to_string()),
            }
        })
        .collect()
}

/// Heat's failure rule: `deploy_status_code` values and whether Heat fails them; then encodings
/// and verbs.
fn edge_cases() -> Vec<Case> {
    let codes = [
        ("0", false),
        ("\"0\"", false),
        ("null", false),
        ("\"\"", false),
        ("false", false),
        ("0.0", false),
        ("[]", false),
        ("-1", true),
        ("1", true),
        ("\"2\"", true),
        ("true", true),
        ("\"0.0\"", true),
        ("\"abc\"", true),
    ];
    let mut cases: Vec<Case> = codes
        .iter()
        .enumerate()
        .map(|(index, (code, fails))| Case {
            id: format!("code-{index}"),
            stdout: format!("{{\"deploy_status_code\": {code}}}"),
            outputs: json!([]),
            verb: None,
            failure: fails.then(String::new),
        })
        .collect();
    let missing =
        Case { id: "code-missing".into(), stdout: "{\"x\": 1}".into(), outputs: json!([]), verb: None, failure: None };
    let encoded = concat!(
        "{\"text\":\"h\u{e9}llo \u{2603} \u{1F600} \\u0000 \\u2028 \\\"q\\\"\",\"n\":1.5,\"tenth\":0.1,",
        "\"huge\":1e100,\"tiny\":2.5e-7,\"negative_zero\":-0.0,\"whole\":1E5,",
        "\"nested\":{\"b\":[1,2],\"a\":null},\"deploy_status_code\":0}"
    );
    let encoding =
        Case { id: "encoding".into(), stdout: encoded.into(), outputs: json!([]), verb: None, failure: None };
    cases.extend([missing, encoding]);
    for (id, verb) in
        [("verb-put", Some("PUT")), ("verb-lower-put", Some("put")), ("verb-post", Some("POST")), ("verb-none", None)]
    {
        cases.push(Case { id: id.into(), stdout: "{}".into(), outputs: json!([]), verb, failure: None });
    }
    cases
}

fn case_deployment(case: &Case, base: &str) -> Value {
    let mut inputs = vec![
        json!({"name": "emit", "type": "String", "value": case.stdout}),
        json!({"name": "deploy_action", "type": "String", "value": "CREATE"}),
        json!({"name": "deploy_signal_id", "type": "String", "value": format!("{base}/signal/{}", case.id)}),
    ];
    if let Some(verb) = case.verb {
        inputs.push(json!({"name": "deploy_signal_verb", "type": "String", "value": verb}));
    }
    json!({"id": case.id, "name": case.id, "group": "emit", "creation_time": "2024-05-01T10:00:00Z", "config": "",
           "options": null, "inputs": inputs, "outputs": case.outputs})
}

/// Runs `cases` through `anneal-agent once` (local source, the `emit` hook); returns the status
/// rows and the captured signals, after checking each signal's verb, header and exact body.
async fn run_cases(cases: &[Case]) -> (Vec<Value>, Vec<wiremock::Request>) {
    let signals = receiver().await;
    let dir = tempfile::tempdir().expect("temp dir");
    let local = dir.path().join("local.d");
    std::fs::create_dir_all(&local).expect("local dir");
    let deployments: Vec<Value> = cases.iter().map(|case| case_deployment(case, &signals.uri())).collect();
    std::fs::write(local.join("cases.json"), json!({"deployments": deployments}).to_string()).expect("write");
    let source = format!("[[source]]\nkind = \"local\"\npath = {}\n", toml_string(&local.to_string_lossy()));
    let agent = Agent::standalone(dir.path(), "server", &AgentSettings::default().line("parallel = 4"), &source);
    agent.install_hook("emit", EMIT_HOOK);
    let once = agent.command(&["once"]).await;
    let any_failure = cases.iter().any(|case| case.failure.is_some());
    assert_eq!(once.code, i32::from(any_failure), "once exits 1 only when a case fails: {once:?}");
    let rows = agent.status().await;
    let requests = received(&signals).await;
    assert_eq!(requests.len(), cases.len(), "one signal per case");
    let stdouts: Vec<String> = cases.iter().map(|case| case.stdout.clone()).collect();
    let expected = heat::python_json_dumps(&stdouts).await;
    for (case, expected) in cases.iter().zip(&expected) {
        let request = request_to(&requests, &format!("/signal/{}", case.id));
        assert_eq!(String::from_utf8_lossy(&request.body), *expected, "{}: json.dumps of the hook's JSON", case.id);
    }
    for verb in ["POST", "PUT"] {
        let sent: Vec<&wiremock::Request> = cases
            .iter()
            .filter(|case| (case.verb == Some("PUT")) == (verb == "PUT"))
            .map(|case| request_to(&requests, &format!("/signal/{}", case.id)))
            .collect();
        assert_notify_shape(&sent, verb).await;
    }
    (rows, requests)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn signal_bodies_and_verdicts_follow_the_decision_table_and_failure_rule() {
    let cases: Vec<Case> = table_cases().into_iter().chain(edge_cases()).collect();
    let (rows, requests) = run_cases(&cases).await;
    for case in &cases {
        let request = request_to(&requests, &format!("/signal/{}", case.id));
        let body: Value = serde_json::from_slice(&request.body).expect("JSON");
        let outputs = case.outputs.as_array().cloned().unwrap_or_default();
        assert_eq!(heat_fails(&body, &outputs), case.failure.is_some(), "{}: Heat's failure rule", case.id);
        let row = rows.iter().find(|row| row["id"] == case.id.as_str()).expect("status row");
        let outcome = row["outcome"].as_str().unwrap_or_default();
        match &case.failure {
            None => assert_eq!(outcome, "COMPLETE", "{}: {row}", case.id),
            Some(reason) if reason.is_empty() => assert!(outcome.starts_with("FAILED"), "{}: {row}", case.id),
            Some(reason) => assert_eq!(outcome, format!("FAILED: {reason}"), "{}: Heat's reason", case.id),
        }
    }
}

/// Python's json round-trips integers of any size; heat-config-notify sends them digit for digit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn integers_beyond_64_bits_keep_their_digits() {
    let stdout = "{\"big\": 12345678901234567890123, \"small\": -9223372036854775809, \"deploy_status_code\": 0}";
    let case = Case { id: "big-integers".into(), stdout: stdout.into(), outputs: json!([]), verb: None, failure: None };
    run_cases(&[case]).await;
}
