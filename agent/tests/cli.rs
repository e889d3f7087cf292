//! The command line contract: exit code 2 with a message naming the file and key for bad
//! config, `hook-test` printing the signal payload, and `signal` for wait-condition handles in
//! both styles, retrying until acknowledged.

mod common;

use std::time::Duration;

use common::*;
use serde_json::{Value, json};
use tokio::process::Command;
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

#[tokio::test]
async fn bad_config_exits_2_naming_file_and_key() {
    let sandbox = Sandbox::new();
    let cases = [
        ("[agent]\npolll_interval_secs = 3\n", "polll_interval_secs"),
        ("[agent]\nparallel = 0\n[[source]]\nkind = \"local\"\npath = \"/tmp\"\n", "parallel"),
        ("[[source]]\nkind = \"ftp\"\n", "ftp"),
        ("[[source]]\nkind = \"http\"\nurl = \"not a url\"\n", "url"),
        ("[agent\n", "agent.toml"),
    ];
    for (text, key) in cases {
        std::fs::write(sandbox.config_path(), text).unwrap();
        for command in ["once", "run", "status"] {
            let finished = sandbox.agent(&[command], Duration::from_secs(20)).await;
            assert_eq!(finished.status.code(), Some(2), "{command} with {text:?}: {}", finished.stderr);
            assert!(finished.stderr.contains(key), "{command}: message should name {key}: {}", finished.stderr);
            assert!(finished.stderr.contains("agent.toml"), "message should name the file: {}", finished.stderr);
        }
    }
    std::fs::remove_file(sandbox.config_path()).unwrap();
    let finished = sandbox.agent(&["once"], Duration::from_secs(20)).await;
    assert_eq!(finished.status.code(), Some(2), "a missing config file is a config error");
    assert!(finished.stderr.contains("agent.toml"), "{}", finished.stderr);
}

#[tokio::test]
async fn usage_errors_exit_2() {
    let mut command = Command::new(BINARY);
    command.arg("no-such-command");
    let finished = run_to_end(command, None, Duration::from_secs(20)).await;
    assert_eq!(finished.status.code(), Some(2));
}

/// The same warning as the shim's (both binaries set logging up through anneal-runtime).
#[tokio::test]
async fn a_bad_log_filter_warns_and_logs_at_info() {
    let sandbox = Sandbox::new();
    let mut command = Command::new(BINARY);
    command.args(["status", "--config"]).arg(sandbox.config_path()).env("ANNEAL_LOG", "info,anneal_agent=loud");
    let finished = run_to_end(command, None, Duration::from_secs(20)).await;
    assert_eq!(finished.status.code(), Some(2), "the missing config is still the error: {}", finished.stderr);
    assert!(finished.stderr.contains("ANNEAL_LOG is not a valid filter; logging at info"), "{}", finished.stderr);
}

#[tokio::test]
async fn hook_test_prints_the_signal_payload() {
    let sandbox = Sandbox::new();
    sandbox.write_local_config("");
    let deployment = script_deployment("ht", "ht", "#!/bin/sh\necho -n \"v=$foo\" > $heat_outputs_path.result\n", None);
    let mut deployment = deployment;
    deployment["inputs"].as_array_mut().unwrap().push(json!({"name": "foo", "value": "bar"}));
    let mut command = Command::new(BINARY);
    command.args(["hook-test", "script", "--config"]).arg(sandbox.config_path());
    let finished = run_to_end(command, Some(&deployment.to_string()), Duration::from_secs(30)).await;
    assert!(finished.status.success(), "{}", finished.stderr);
    let payload: Value = serde_json::from_str(finished.stdout.trim()).unwrap();
    assert_eq!(payload, json!({"result": "v=bar", "deploy_stdout": "", "deploy_stderr": "", "deploy_status_code": 0}));
    assert!(!sandbox.state().join("journal").exists(), "hook-test does not journal");

    let failing = script_deployment("ht2", "ht2", "#!/bin/sh\nexit 4\n", None);
    let mut command = Command::new(BINARY);
    command.args(["hook-test", "script", "--config"]).arg(sandbox.config_path());
    let finished = run_to_end(command, Some(&failing.to_string()), Duration::from_secs(30)).await;
    assert_eq!(finished.status.code(), Some(1));
    assert!(finished.stderr.contains("non-zero status code: 4"), "{}", finished.stderr);

    let mut command = Command::new(BINARY);
    command.args(["hook-test", "script", "--config"]).arg(sandbox.config_path());
    let finished = run_to_end(command, Some("{not json"), Duration::from_secs(30)).await;
    assert_eq!(finished.status.code(), Some(1));
    assert!(finished.stderr.contains("not a deployment"), "{}", finished.stderr);
}

#[tokio::test]
async fn signal_command_heat_style_retries_until_acknowledged() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/handle"))
        .respond_with(ResponseTemplate::new(503))
        .up_to_n_times(1)
        .mount(&server)
        .await;
    Mock::given(method("POST")).and(path("/handle")).respond_with(ResponseTemplate::new(200)).mount(&server).await;
    let mut command = Command::new(BINARY);
    command.args([
        "signal",
        &format!("{}/handle", server.uri()),
        "--reason",
        "db ready",
        "--data",
        "10.0.0.5",
        "--id",
        "db1",
    ]);
    let finished = run_to_end(command, None, Duration::from_secs(30)).await;
    assert!(finished.status.success(), "{}", finished.stderr);
    let received = server.received_requests().await.unwrap();
    assert_eq!(received.len(), 2);
    let body: Value = serde_json::from_slice(&received[1].body).unwrap();
    assert_eq!(body, json!({"status": "SUCCESS", "reason": "db ready", "data": "10.0.0.5", "id": "db1"}));
}

#[tokio::test]
async fn signal_command_aws_style_and_permanent_failure() {
    let server = MockServer::start().await;
    Mock::given(method("PUT")).and(path("/wc")).respond_with(ResponseTemplate::new(200)).mount(&server).await;
    Mock::given(method("PUT")).and(path("/gone")).respond_with(ResponseTemplate::new(404)).mount(&server).await;
    let mut command = Command::new(BINARY);
    command.args([
        "signal",
        "--aws",
        "--status",
        "FAILURE",
        "--id",
        "web2",
        &format!("{}/wc?Signature=x", server.uri()),
    ]);
    let finished = run_to_end(command, None, Duration::from_secs(30)).await;
    assert!(finished.status.success(), "{}", finished.stderr);
    let received = server.received_requests().await.unwrap();
    let body: Value = serde_json::from_slice(&received[0].body).unwrap();
    assert_eq!(
        body,
        json!({"Status": "FAILURE", "Reason": "Configuration Complete", "UniqueId": "web2", "Data": "Application has completed configuration."})
    );

    let mut command = Command::new(BINARY);
    command.args(["signal", &format!("{}/gone", server.uri())]);
    let finished = run_to_end(command, None, Duration::from_secs(30)).await;
    assert_eq!(finished.status.code(), Some(1));
    assert!(finished.stderr.contains("404"), "{}", finished.stderr);
}
