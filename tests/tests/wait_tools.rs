//! Scenario 6, part 1: the wait-condition tools against a real shim stack. `anneal-agent signal`
//! and the handle's `curl_cli` (pasted into `sh -c` with `--data-binary`) together complete a
//! wait condition of count 2 while `stack create --wait` waits; a repeated id counts once; an
//! AWS-style signal counts, and a FAILURE fails the stack with its reason.

use std::time::Duration;

use anneal_tests::{CommandOutput, Shim, agent_binary, run_command, wait_until};
use serde_json::{Value, json};
use tokio::process::Command;

const TEMPLATE: &str = r#"
heat_template_version: 2018-08-31
resources:
  handle: {type: OS::Heat::WaitConditionHandle}
  wait:
    type: OS::Heat::WaitCondition
    properties: {handle: {get_resource: handle}, count: 2, timeout: 60}
outputs:
  endpoint: {value: {get_attr: [handle, endpoint]}}
  curl_cli: {value: {get_attr: [handle, curl_cli]}}
  data: {value: {get_attr: [wait, data]}}
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn anneal_agent_signal_and_curl_cli_complete_a_wait_condition() {
    let shim = Shim::start().await;
    let template = shim.write_template("gate.yaml", TEMPLATE);
    let create =
        ["stack", "create", "gate", "--template", template.to_str().expect("utf-8"), "--wait", "--timeout", "30"];
    let (created, ()) = tokio::join!(shim.cli(&create), async {
        let endpoint = output_text(&shim, "gate", "endpoint").await;
        let curl_cli = output_text(&shim, "gate", "curl_cli").await;
        assert!(curl_cli.ends_with(&endpoint), "curl_cli posts to the endpoint: {curl_cli}");
        signal(&["--data", "from the agent", "--id", "vm1"], &endpoint).await.expect_success("anneal-agent signal");
        signal(&["--data", "again", "--id", "vm1"], &endpoint).await.expect_success("anneal-agent signal (repeat)");
        assert_eq!(shim.stack_status("gate").await, "CREATE_IN_PROGRESS", "one distinct id of two");
        let body = r#"{"status": "SUCCESS", "reason": "curl done", "data": "from curl", "id": "vm2"}"#;
        let shell = format!("{curl_cli} --silent --show-error --fail --data-binary '{body}'");
        let mut command = Command::new("sh");
        command.args(["-c", &shell]);
        let curl = run_command(command, Duration::from_secs(20)).await;
        assert_eq!(curl.code, 0, "curl_cli works pasted into a shell: {curl:?}");
        assert!(curl.stdout.starts_with("HTTP/1.1 2"), "curl -i shows a 2xx: {}", curl.stdout);
    });
    assert_eq!(created.code, 0, "stack create --wait ends with COMPLETE: {created:?}");
    assert_eq!(shim.stack_status("gate").await, "CREATE_COMPLETE");
    let data: Value = serde_json::from_str(&output_text(&shim, "gate", "data").await).expect("data is JSON");
    assert_eq!(data, json!({"vm1": "again", "vm2": "from curl"}), "a repeated id overwrites its data, as in Heat");
    let events = shim.cli_json(&["stack", "events", "gate", "--json"]).await;
    let handle_events: Vec<&Value> =
        events.as_array().expect("list").iter().filter(|event| event["resource"] == "handle").collect();
    let signals = handle_events.iter().filter(|event| event["status"] == "SIGNAL_SUCCESS").count();
    assert_eq!(signals, 3, "every signal is an event: {events:#}");
    assert!(handle_events.iter().any(|event| event["reason"] == "vm2: curl done"), "{events:#}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn aws_style_counts_and_a_failure_fails_the_stack_with_its_reason() {
    let shim = Shim::start().await;
    let template = shim.write_template("gate.yaml", TEMPLATE);
    let create =
        ["stack", "create", "gate", "--template", template.to_str().expect("utf-8"), "--wait", "--timeout", "30"];
    let (created, ()) = tokio::join!(shim.cli(&create), async {
        let endpoint = output_text(&shim, "gate", "endpoint").await;
        signal(&["--aws", "--id", "vm1", "--data", "aws data"], &endpoint).await.expect_success("signal --aws");
        assert_eq!(shim.stack_status("gate").await, "CREATE_IN_PROGRESS");
        let failure = ["--status", "FAILURE", "--reason", "disk full", "--id", "vm2"];
        signal(&failure, &endpoint).await.expect_success("signal --status FAILURE");
    });
    assert_eq!(created.code, 1, "stack create --wait ends with FAILED: {created:?}");
    let show = shim.cli_json(&["stack", "show", "gate", "--json"]).await;
    assert_eq!(show["status"], "CREATE_FAILED", "{show:#}");
    let wait =
        show["resources"].as_array().expect("resources").iter().find(|resource| resource["name"] == "wait").cloned();
    let wait = wait.expect("the wait condition is listed");
    assert_eq!(wait["status"], "CREATE_FAILED", "{wait}");
    assert!(wait["status_reason"].as_str().unwrap_or_default().contains("disk full"), "the reason: {wait}");
}

/// `anneal-agent signal <args> <url>`.
async fn signal(args: &[&str], url: &str) -> CommandOutput {
    let mut command = Command::new(agent_binary());
    command.arg("signal").arg(url).args(args);
    run_command(command, Duration::from_secs(20)).await
}

/// A stack output's string value, once it has one.
async fn output_text(shim: &Shim, stack: &str, name: &str) -> String {
    wait_until(Duration::from_secs(10), &format!("output {name} of {stack}"), || async {
        let outputs = shim.cli(&["stack", "outputs", stack, "--json"]).await;
        let outputs: Value = serde_json::from_str(&outputs.stdout).ok()?;
        let output = outputs.as_array()?.iter().find(|output| output["name"] == name)?;
        output["value"].as_str().map(str::to_string)
    })
    .await
}
