//! Scenario: heat-cfntools' `cfn-signal` (from PyPI, unchanged) completes the shim's wait
//! conditions through a handle's URL: `PUT /v1/waitconditions/<token>` with the AWS body
//! `{Status, Reason, UniqueId, Data}`. It always gets `-i ID`: without one it would ask the
//! metadata service at 169.254.169.254 for the instance id. Its fixed log file
//! (/var/log/cfn-signal.log) goes to the test's temp dir through the venv's
//! `anneal_peer_sandbox` (see tests/peers/setup.sh), which also refuses non-loopback connections.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anneal_tests::{Shim, run_command};
use serde_json::Value;
use tokio::process::Command;

const TEMPLATE: &str = r##"
heat_template_version: 2018-08-31
parameters:
  count: {type: number, default: 1}
resources:
  handle:
    type: OS::Heat::WaitConditionHandle
  wait:
    type: OS::Heat::WaitCondition
    properties: {handle: {get_resource: handle}, count: {get_param: count}, timeout: 60}
outputs:
  endpoint: {value: {get_attr: [handle, endpoint]}}
  data: {value: {get_attr: [wait, data]}}
"##;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn peers_cfn_signal_completes_and_fails_wait_conditions() {
    let cache = peers_cache();
    let shim = Shim::start().await;
    let dir = tempfile::Builder::new().prefix("anneal-peers-cfn-").tempdir().expect("temp dir");
    let template = shim.write_template("wait.yaml", TEMPLATE);
    let template = template.to_str().expect("utf-8 path");
    shim.cli_ok(&["stack", "create", "two", "--template", template, "--param", "count=2"]).await;
    shim.cli_ok(&["stack", "create", "broken", "--template", template]).await;
    let two = endpoint(&shim, "two").await;
    let broken = endpoint(&shim, "broken").await;
    assert!(two.contains("/v1/waitconditions/"), "{two}");

    // Two signals with the same UniqueId count once (Heat keys them by id).
    cfn_signal(&cache, dir.path(), &["-i", "node-1", "-d", "early data"], &two).await;
    cfn_signal(&cache, dir.path(), &["-i", "node-1", "-d", "first data"], &two).await;
    let show = shim.cli_json(&["stack", "show", "two", "--json"]).await;
    assert_eq!(show["status"], "CREATE_IN_PROGRESS", "one distinct id of two: {show}");
    cfn_signal(&cache, dir.path(), &["-i", "node-2", "-r", "second reason", "-d", r#"{"k": 1}"#], &two).await;
    let show = shim.settled("two", Duration::from_secs(10)).await;
    assert_eq!(show["status"], "CREATE_COMPLETE", "{show}");
    let data = output(&show, "data");
    let data: Value = serde_json::from_str(data.as_str().expect("data is a JSON string")).expect("data parses");
    assert_eq!(data, serde_json::json!({"node-1": "first data", "node-2": "{\"k\": 1}"}));

    // A non-zero exit code (-e) is a FAILURE; its reason reaches the wait condition.
    cfn_signal(&cache, dir.path(), &["-i", "node-9", "-e", "3", "-r", "install failed"], &broken).await;
    let show = shim.settled("broken", Duration::from_secs(10)).await;
    assert_eq!(show["status"], "CREATE_FAILED", "{show}");
    let wait = show["resources"].as_array().expect("resources").iter().find(|r| r["name"] == "wait").expect("wait");
    assert_eq!(wait["status"], "CREATE_FAILED", "{wait}");
    assert!(wait["status_reason"].as_str().unwrap_or_default().contains("install failed"), "{wait}");

    let log = std::fs::read_to_string(dir.path().join("cfn-signal.log")).expect("cfn-signal's log, in the temp dir");
    assert!(log.contains(r#""Status": "FAILURE", "Reason": "install failed", "UniqueId": "node-9""#), "{log}");
}

/// Runs `cfn-signal ARGS URL` from the peers' venv; it exits with curl's status.
async fn cfn_signal(cache: &Path, dir: &Path, args: &[&str], url: &str) {
    assert!(args.contains(&"-i"), "cfn-signal without -i would ask 169.254.169.254 for an id");
    let venv = cache.join("venv/bin");
    let mut command = Command::new(venv.join("cfn-signal"));
    command
        .args(args)
        .arg(url)
        .current_dir(dir)
        .env_clear()
        .env("PATH", format!("{}:/usr/bin:/bin", venv.display()))
        .env("LC_ALL", "C")
        .env("HOME", dir)
        .env("ANNEAL_PEER_SANDBOX", dir);
    let output = run_command(command, Duration::from_secs(20)).await;
    output.expect_success("cfn-signal");
}

/// The handle's URL (its `endpoint` attribute) from the stack's outputs.
async fn endpoint(shim: &Shim, stack: &str) -> String {
    let show = shim.cli_json(&["stack", "show", stack, "--json"]).await;
    output(&show, "endpoint").as_str().expect("endpoint is a string").to_string()
}

fn output(show: &Value, name: &str) -> Value {
    let outputs = show["outputs"].as_array().expect("outputs is a list");
    let output =
        outputs.iter().find(|output| output["name"] == name).unwrap_or_else(|| panic!("no output {name}: {show}"));
    output["value"].clone()
}

/// tests/peers/.cache with the peers setup.sh installs; fails (never skips) when it is missing.
fn peers_cache() -> PathBuf {
    anneal_tests::peers::cache(&["venv/bin/cfn-signal"])
}
