//! `anneal-agent once` end to end: the real binary against a loopback metadata server and
//! signal receiver, with hooks in a temp dir. Covers ordering, outputs, signals and their
//! headers, the failure rule's exit code, retry and permanent failure of signals, the journal's
//! "never rerun" promise, and hook deadlines.

mod common;

use std::time::{Duration, Instant};

use common::*;
use serde_json::{Value, json};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

#[tokio::test]
async fn runs_in_order_publishes_outputs_and_never_reruns() {
    let sandbox = Sandbox::new();
    let receiver = signal_receiver().await;
    let order = sandbox.root().join("order.log");
    let signal = |n: u32| format!("{}/signal/{n}", receiver.uri());
    let first = format!(
        "#!/bin/sh\necho first >> {}\necho -n \"hello $foo\" > $heat_outputs_path.result\necho out; echo err >&2\n",
        order.display()
    );
    let second = format!(
        "#!/bin/sh\necho second >> {}\necho \"$a_dict|$a_number|$a_bool\" > $heat_outputs_path.result\n",
        order.display()
    );
    let mut d1 = script_deployment("id-10", "10_first", &first, Some(&signal(1)));
    d1["inputs"].as_array_mut().unwrap().push(json!({"name": "foo", "type": "String", "value": "world"}));
    let mut d2 = script_deployment("id-20", "20_second", &second, Some(&signal(2)));
    let inputs = d2["inputs"].as_array_mut().unwrap();
    inputs.push(json!({"name": "a_dict", "type": "Json", "value": {"key": "value"}}));
    inputs.push(json!({"name": "a_number", "type": "Number", "value": 5}));
    inputs.push(json!({"name": "a_bool", "type": "Boolean", "value": true}));
    let metadata = MockServer::start().await;
    // Heat lists deployments sorted by name; give them out of order to prove list order is used.
    serve_metadata(&metadata, &json!({"deployments": [d1, d2]})).await;
    sandbox.write_http_config("", &format!("{}/metadata", metadata.uri()));

    let finished = sandbox.once().await;
    assert!(finished.status.success(), "once failed: {}", finished.stderr);
    assert_eq!(std::fs::read_to_string(&order).unwrap(), "first\nsecond\n");

    let received = signals(&receiver).await;
    assert_eq!(received.len(), 2);
    let body = body_json(&received[0]);
    assert_eq!(received[0].url.path(), "/signal/1");
    assert_eq!(received[0].method.as_str(), "POST");
    assert_eq!(received[0].headers.get("content-type").unwrap(), "application/json");
    let signal_id = received[0].headers.get("x-anneal-signal-id").unwrap().to_str().unwrap();
    assert!(signal_id.starts_with("id-10-"), "{signal_id}");
    assert_eq!(
        body,
        json!({"result": "hello world", "deploy_stdout": "out\n", "deploy_stderr": "err\n", "deploy_status_code": 0})
    );
    assert_eq!(body_json(&received[1])["result"], "{\"key\": \"value\"}|5|true\n");

    let again = sandbox.once().await;
    assert!(again.status.success(), "{}", again.stderr);
    assert_eq!(std::fs::read_to_string(&order).unwrap(), "first\nsecond\n", "a finished deployment never reruns");
    assert_eq!(signals(&receiver).await.len(), 2, "a delivered signal is not sent again");

    let rows = sandbox.status().await;
    let row = Sandbox::status_of(&rows, "id-10");
    assert_eq!(row["state"], "signalled");
    assert_eq!(row["exit_code"], 0);
    assert_eq!(row["signal"], "delivered");
}

#[tokio::test]
async fn failing_script_signals_its_code_and_once_exits_1() {
    let sandbox = Sandbox::new();
    let receiver = signal_receiver().await;
    let url = format!("{}/signal/9", receiver.uri());
    let deployment = script_deployment("id-fail", "fail", "#!/bin/sh\necho broken >&2\nexit 3\n", Some(&url));
    sandbox.write_local_document("a.json", &json!({"deployments": [deployment]}));
    sandbox.write_local_config("");

    let finished = sandbox.once().await;
    assert_eq!(finished.status.code(), Some(1), "{}", finished.stderr);
    let received = signals(&receiver).await;
    assert_eq!(received.len(), 1);
    assert_eq!(body_json(&received[0])["deploy_status_code"], 3);
    assert_eq!(body_json(&received[0])["deploy_stderr"], "broken\n");
    let rows = sandbox.status().await;
    let outcome = Sandbox::status_of(&rows, "id-fail")["outcome"].as_str().unwrap().to_string();
    assert_eq!(outcome, "FAILED: deploy_status_code : Deployment exited with non-zero status code: 3");
}

#[tokio::test]
async fn signal_is_retried_until_acknowledged_and_put_is_honoured() {
    let sandbox = Sandbox::new();
    let receiver = MockServer::start().await;
    Mock::given(method("PUT"))
        .and(path("/signal/put"))
        .respond_with(ResponseTemplate::new(503))
        .up_to_n_times(2)
        .mount(&receiver)
        .await;
    Mock::given(method("PUT")).and(path("/signal/put")).respond_with(ResponseTemplate::new(201)).mount(&receiver).await;
    let mut deployment =
        script_deployment("id-put", "put", "#!/bin/sh\ntrue\n", Some(&format!("{}/signal/put", receiver.uri())));
    deployment["inputs"][2]["value"] = json!("PUT");
    sandbox.write_local_document("a.json", &json!({"deployments": [deployment]}));
    sandbox.write_local_config("");

    let finished = sandbox.once().await;
    assert!(finished.status.success(), "{}", finished.stderr);
    let received = signals(&receiver).await;
    assert_eq!(received.len(), 3, "two 503s then a 201");
    let ids: Vec<&str> =
        received.iter().map(|request| request.headers.get("x-anneal-signal-id").unwrap().to_str().unwrap()).collect();
    assert!(ids.windows(2).all(|pair| pair[0] == pair[1]), "the idempotency key is stable across retries: {ids:?}");
}

#[tokio::test]
async fn permanent_signal_failure_is_kept_and_shown() {
    let sandbox = Sandbox::new();
    let receiver = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(403).set_body_string("Signature expired"))
        .mount(&receiver)
        .await;
    let url = format!("{}/signal/x?Signature=secret-signature", receiver.uri());
    let deployment = script_deployment("id-403", "expired", "#!/bin/sh\ntrue\n", Some(&url));
    sandbox.write_local_document("a.json", &json!({"deployments": [deployment]}));
    sandbox.write_local_config("");

    let finished = sandbox.once().await;
    assert_eq!(finished.status.code(), Some(1), "an undelivered signal fails `once`");
    assert!(!finished.stderr.contains("secret-signature"), "signal URL query strings are never logged");
    let received = receiver.received_requests().await.unwrap();
    assert_eq!(received.len(), 1, "4xx is permanent: not retried");
    assert_eq!(received[0].url.query(), Some("Signature=secret-signature"), "URL sent unchanged");
    let rows = sandbox.status().await;
    let signal = Sandbox::status_of(&rows, "id-403")["signal"].as_str().unwrap().to_string();
    assert!(signal.starts_with("failed permanently") && signal.contains("403"), "{signal}");
}

#[tokio::test]
async fn hook_deadline_kills_the_group_and_reports_124() {
    let sandbox = Sandbox::new();
    let receiver = signal_receiver().await;
    let marker = sandbox.root().join("grandchild-survived");
    let script = format!("#!/bin/sh\n(sleep 3; touch {}) &\nsleep 30\n", marker.display());
    let mut deployment =
        script_deployment("id-slow", "slow", &script, Some(&format!("{}/signal/slow", receiver.uri())));
    deployment["options"] = json!({"timeout": 1});
    sandbox.write_local_document("a.json", &json!({"deployments": [deployment]}));
    sandbox.write_local_config("");

    let started = Instant::now();
    let finished = sandbox.once().await;
    assert_eq!(finished.status.code(), Some(1));
    assert!(started.elapsed() < Duration::from_secs(10), "deadline enforced: {:?}", started.elapsed());
    let received = signals(&receiver).await;
    let body = body_json(&received[0]);
    assert_eq!(body["deploy_status_code"], 124);
    assert!(body["deploy_stderr"].as_str().unwrap().contains("timed out"), "{body}");
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert!(!marker.exists(), "the hook's whole process group was killed");
}

#[tokio::test]
async fn missing_hook_waits_and_status_says_why() {
    let sandbox = Sandbox::new();
    let deployment =
        json!({"id": "id-puppet", "name": "p", "group": "no-such-tool", "config": "x", "inputs": [], "outputs": []});
    let apply = json!({"id": "id-oac", "name": "o", "group": "os-apply-config", "config": {"a": 1}, "inputs": []});
    sandbox.write_local_document("a.json", &json!({"deployments": [deployment, apply]}));
    sandbox.write_local_config("");

    let finished = sandbox.once().await;
    assert!(finished.status.success(), "{}", finished.stderr);
    let rows = sandbox.status().await;
    let row = Sandbox::status_of(&rows, "id-puppet");
    assert_eq!(row["state"], "waiting");
    assert!(row["reason"].as_str().unwrap().contains("no hook for group no-such-tool"), "{row}");
    assert_eq!(Sandbox::status_of(&rows, "id-oac")["state"], "skipped");

    // Installing the hook later lets the deployment run.
    sandbox.install_hook("no-such-tool", "#!/bin/sh\ncat >/dev/null\necho '{\"deploy_status_code\": 0}'\n");
    let finished = sandbox.once().await;
    assert!(finished.status.success(), "{}", finished.stderr);
    let rows = sandbox.status().await;
    assert_eq!(Sandbox::status_of(&rows, "id-puppet")["state"], "signalled");
}

#[tokio::test]
async fn unusable_heat_signal_is_reported_not_dropped() {
    let sandbox = Sandbox::new();
    let text =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/fixtures/heat/heat-signal-inputs.json"))
            .unwrap();
    let mut deployment: Value = serde_json::from_str(&text).unwrap();
    deployment["config"] = json!("#!/bin/sh\ntrue\n");
    for input in deployment["inputs"].as_array_mut().unwrap() {
        if input["name"] == "deploy_password" {
            input["value"] = json!("planted-s3cret-value");
        }
    }
    sandbox.write_local_document("a.json", &json!({"deployments": [deployment]}));
    sandbox.write_local_config("");

    let mut command = tokio::process::Command::new(BINARY);
    command.args(["once", "--config"]).arg(sandbox.config_path()).env("ANNEAL_LOG", "trace");
    let finished = run_to_end(command, None, Duration::from_secs(60)).await;
    assert_eq!(finished.status.code(), Some(1));
    assert!(finished.stderr.contains("DEBUG"), "debug logging was on");
    assert!(!finished.stderr.contains("planted-s3cret-value"), "secrets are not logged, even at trace level");
    let rows = sandbox.status().await;
    let signal = Sandbox::status_of(&rows, "5555")["signal"].as_str().unwrap().to_string();
    // The fixture's deploy_auth_url is `mock://`: refused for good, the result kept.
    assert!(signal.contains("HEAT_SIGNAL: invalid keystone auth_url mock://192.0.2.3/auth"), "{signal}");
    assert!(!signal.contains("planted-s3cret-value"), "{signal}");
}

#[tokio::test]
async fn parallel_runs_independent_deployments_together_and_honours_depends_on() {
    let sandbox = Sandbox::new();
    let log = sandbox.root().join("events.log");
    let step = |name: &str| {
        format!(
            "#!/bin/sh\necho \"start {name}\" >> {log}\nsleep 1\necho \"end {name}\" >> {log}\n",
            log = log.display()
        )
    };
    let a = script_deployment("p-a", "10_a", &step("a"), None);
    let b = script_deployment("p-b", "20_b", &step("b"), None);
    let mut c = script_deployment("p-c", "30_c", &step("c"), None);
    c["options"] = json!({"depends_on": ["10_a", "20_b"]});
    sandbox.write_local_document("a.json", &json!({"deployments": [c, a, b]}));
    sandbox.write_local_config("parallel = 2");

    let finished = sandbox.once().await;
    assert!(finished.status.success(), "{}", finished.stderr);
    let events: Vec<String> = std::fs::read_to_string(&log).unwrap().lines().map(str::to_string).collect();
    assert_eq!(events.len(), 6, "{events:?}");
    assert!(
        events[..2].contains(&"start a".to_string()) && events[..2].contains(&"start b".to_string()),
        "a and b overlap: {events:?}"
    );
    assert_eq!(events[4], "start c", "c waits for both of its dependencies: {events:?}");
}

#[tokio::test]
async fn unacknowledged_signal_is_resent_after_restart_without_rerunning_the_hook() {
    let sandbox = Sandbox::new();
    let receiver = MockServer::start().await;
    let runs = sandbox.root().join("runs");
    let script = format!("#!/bin/sh\necho run >> {}\necho -n v > $heat_outputs_path.result\n", runs.display());
    let deployment = script_deployment("r-1", "resend", &script, Some(&format!("{}/signal/r", receiver.uri())));
    sandbox.write_local_document("a.json", &json!({"deployments": [deployment]}));
    sandbox.write_local_config("");
    // The engine is unreachable for the whole first cycle.
    Mock::given(method("POST")).respond_with(ResponseTemplate::new(503)).mount(&receiver).await;
    let first = sandbox.once().await;
    assert_eq!(first.status.code(), Some(1), "an undelivered signal fails once: {}", first.stderr);
    let rows = sandbox.status().await;
    let row = Sandbox::status_of(&rows, "r-1");
    assert_eq!(row["state"], "finished");
    assert!(row["signal"].as_str().unwrap().starts_with("pending"), "{row}");

    receiver.reset().await;
    Mock::given(method("POST")).respond_with(ResponseTemplate::new(200)).mount(&receiver).await;
    let second = sandbox.once().await;
    assert!(second.status.success(), "{}", second.stderr);
    assert_eq!(std::fs::read_to_string(&runs).unwrap(), "run\n", "the hook ran once");
    let received = signals(&receiver).await;
    assert_eq!(received.len(), 1);
    assert_eq!(body_json(&received[0])["result"], "v", "the stored result is what is resent");
}

#[tokio::test]
async fn json_log_format_writes_json_lines() {
    let sandbox = Sandbox::new();
    sandbox.write_local_document(
        "a.json",
        &json!({"deployments": [script_deployment("j-1", "j", "#!/bin/sh\ntrue\n", None)]}),
    );
    sandbox.write_local_config("");
    let finished = sandbox.agent(&["--log-format", "json", "once"], Duration::from_secs(60)).await;
    assert!(finished.status.success(), "{}", finished.stderr);
    let lines: Vec<&str> = finished.stderr.lines().collect();
    assert!(!lines.is_empty());
    for line in lines {
        let parsed: Value = serde_json::from_str(line).unwrap_or_else(|error| panic!("not JSON ({error}): {line}"));
        assert!(parsed.get("level").is_some() && parsed.get("fields").is_some(), "{line}");
    }
}

#[tokio::test]
async fn heat_local_source_runs_heat_published_metadata() {
    let sandbox = Sandbox::new();
    let receiver = MockServer::start().await;
    Mock::given(method("POST")).respond_with(ResponseTemplate::new(200)).mount(&receiver).await;
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../tests/fixtures/heat/server-metadata-cfn.json"
    ))
    .unwrap();
    let mut document: Value = serde_json::from_str(&text).unwrap();
    // Keep Heat's pre-signed URL shape, but on loopback: tests never contact another address.
    let signed = "/v1/signal/arn%3Aopenstack%3Aheat%3A%3A8a3f%3Astacks/mystack/2f0c/resources/deployment?SignatureMethod=HmacSHA256&SignatureVersion=2&AWSAccessKeyId=4e3f2a1b&Timestamp=2024-05-01T10%3A00%3A00Z&Signature=abc%2Bdef%3D";
    for input in document["deployments"][0]["inputs"].as_array_mut().unwrap() {
        if input["name"] == "deploy_signal_id" {
            input["value"] = json!(format!("{}{signed}", receiver.uri()));
        }
    }
    let cfn_init_data = sandbox.root().join("cfn-init-data");
    std::fs::write(&cfn_init_data, serde_json::to_vec(&document).unwrap()).unwrap();
    sandbox.write_config("", &format!("[[source]]\nkind = \"heat-local\"\npath = \"{}\"\n", cfn_init_data.display()));

    let finished = sandbox.once().await;
    assert!(finished.status.success(), "{}", finished.stderr);
    let received = receiver.received_requests().await.unwrap();
    assert_eq!(received.len(), 1);
    assert_eq!(received[0].method.as_str(), "POST");
    let sent = format!("{}?{}", received[0].url.path(), received[0].url.query().unwrap());
    assert_eq!(sent, signed, "the pre-signed URL is sent byte for byte");
    assert_eq!(
        body_json(&received[0]),
        json!({"result": "hello fooooo", "deploy_stdout": "", "deploy_stderr": "", "deploy_status_code": 0})
    );
}

#[tokio::test]
async fn retention_removes_a_departed_deployment_after_its_period_and_never_a_listed_one() {
    let sandbox = Sandbox::new();
    sandbox.write_local_config("journal_retention_secs = 1");
    let ran = sandbox.root().join("ran.log");
    let script = format!("#!/bin/sh\necho ran >> {}\necho -n 1 > $heat_outputs_path.result\n", ran.display());
    let listed = json!({"deployments": [script_deployment("id-old", "10_old", &script, None)]});
    sandbox.write_local_document("doc.json", &listed);
    assert!(sandbox.once().await.status.success());
    let (entry, script_file) = (sandbox.state().join("journal/id-old.json"), sandbox.state().join("script/id-old"));
    let output = sandbox.state().join("outputs/id-old.result");
    assert!(entry.exists() && script_file.exists() && output.exists());

    tokio::time::sleep(Duration::from_millis(1_100)).await;
    let again = sandbox.once().await;
    assert!(again.status.success(), "{}", again.stderr);
    assert!(entry.exists(), "still listed: kept past the retention period");
    assert_eq!(std::fs::read_to_string(&ran).unwrap(), "ran\n", "and never rerun");

    sandbox.write_local_document("doc.json", &json!({"deployments": []}));
    let departed = sandbox.once().await;
    assert!(departed.status.success(), "{}", departed.stderr);
    assert!(!entry.exists() && !script_file.exists() && !output.exists(), "entry, script and output removed");
    assert!(sandbox.status().await.is_empty(), "status no longer lists it");
}
