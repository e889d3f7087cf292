//! The stock OpenStack agents (os-collect-config, os-refresh-config, os-apply-config and
//! heat-agents' 55-heat-config, hook-script.py and heat-config-notify) converging
//! `OS::Heat::DeployedServer` stacks on a real Heat + Keystone (tests/peers/real-heat): the
//! reference the anneal-agent tests (real_heat_anneal.rs) are compared with, and a check that the
//! harness's Heat behaves as a cloud's does for each transport and signal.

mod real_heat_support;

use std::time::Duration;

use anneal_tests::{RealHeat, wait_until};
use real_heat_support::{Chain, cfn_signal, chain_result, converge, trace_lines};
use serde_json::{Value, json};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_heat_stock_poll_server_heat_with_heat_signal_completes_one_deployment() {
    let run = converge(Chain::Stock, "one.yaml", &[("transport", "POLL_SERVER_HEAT"), ("signal", "HEAT_SIGNAL")]).await;
    assert_eq!(run.status(), "CREATE_COMPLETE", "{}", run.context());
    assert_eq!(run.outputs["result"], json!("hello, world"), "{}", run.context());
    assert_eq!(run.outputs["stdout"], json!("greeting is hello\n"), "{}", run.context());
    assert_eq!(run.outputs["stderr"], json!("a line on stderr\n"), "{}", run.context());
    assert_eq!(run.outputs["status_code"], json!(0), "{}", run.context());
    let signalled = run.api.deployment_output_values(&run.stack, "deployment").await;
    let expected = json!({"result": "hello, world", "deploy_stdout": "greeting is hello\n",
                          "deploy_stderr": "a line on stderr\n", "deploy_status_code": 0});
    assert_eq!(signalled, expected, "the deployment's output_values as Heat reports them");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_heat_stock_poll_server_cfn_with_cfn_signal_runs_a_five_hop_chain() {
    let run =
        converge(Chain::Stock, "chain5.yaml", &[("transport", "POLL_SERVER_CFN"), ("signal", "CFN_SIGNAL")]).await;
    assert_eq!(run.status(), "CREATE_COMPLETE", "{}", run.context());
    assert_eq!(run.outputs["result"], json!(chain_result("v1")), "{}", run.context());
    assert_eq!(run.outputs["stdout1"], json!("hop1 got start\n"), "{}", run.context());
    assert_eq!(run.outputs["stdout5"], json!("hop5 got start+hop1+hop2+hop3+hop4\n"), "{}", run.context());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_heat_stock_poll_server_cfn_with_no_signal_runs_the_deployment() {
    let trace_dir = tempfile::tempdir().expect("temp dir");
    let trace = trace_dir.path().join("trace");
    let trace_text = trace.display().to_string();
    let parameters = [("transport", "POLL_SERVER_CFN"), ("signal", "NO_SIGNAL"), ("trace", trace_text.as_str())];
    let run = converge(Chain::Stock, "one.yaml", &parameters).await;
    // NO_SIGNAL: Heat completes the deployment without waiting, so its outputs stay unset.
    assert_eq!(run.status(), "CREATE_COMPLETE", "{}", run.context());
    assert_eq!(run.outputs["result"], json!(null), "{}", run.context());
    let ran = wait_until(Duration::from_secs(60), "the stock chain ran the NO_SIGNAL deployment", || async {
        let lines = trace_lines(&trace);
        (!lines.is_empty()).then_some(lines)
    })
    .await;
    assert_eq!(ran, ["deployment CREATE hello"], "{}", run.context());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_heat_stock_failing_deployment_fails_the_stack_with_heats_reason() {
    let run =
        converge(Chain::Stock, "failing.yaml", &[("transport", "POLL_SERVER_HEAT"), ("signal", "HEAT_SIGNAL")]).await;
    assert_eq!(run.status(), "CREATE_FAILED", "{}", run.context());
    assert!(
        run.reason().contains("deploy_status_code : Deployment exited with non-zero status code: 3"),
        "{}",
        run.context()
    );
    let deployment = run.api.resource(&run.stack, "deployment").await;
    assert_eq!(deployment["resource_status"], "CREATE_FAILED", "{deployment}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_heat_stock_wait_condition_is_signalled_by_cfn_signal() {
    let tool = cfn_signal();
    let parameters = [("transport", "POLL_SERVER_CFN"), ("signal", "CFN_SIGNAL"), ("signal_tool", tool.as_str())];
    let run = converge(Chain::Stock, "waitcondition.yaml", &parameters).await;
    assert_eq!(run.status(), "CREATE_COMPLETE", "{}", run.context());
    let data: Value = serde_json::from_str(run.outputs["wait_data"].as_str().unwrap_or_default()).unwrap_or_default();
    assert_eq!(data, json!({"server1": "ready from the server"}), "the wait condition's data\n{}", run.context());
    assert_eq!(run.outputs["stdout"], json!("signalled\n"), "{}", run.context());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_heat_stock_update_reruns_only_the_changed_deployment() {
    let trace_dir = tempfile::tempdir().expect("temp dir");
    let trace = trace_dir.path().join("trace");
    let trace_text = trace.display().to_string();
    let mut parameters =
        vec![("transport", "POLL_SERVER_HEAT"), ("signal", "HEAT_SIGNAL"), ("trace", trace_text.as_str())];
    let mut run = converge(Chain::Stock, "chain5.yaml", &parameters).await;
    assert_eq!(run.status(), "CREATE_COMPLETE", "{}", run.context());
    let created: Vec<String> = (1..=5).map(|hop| format!("hop{hop} CREATE")).collect();
    assert_eq!(trace_lines(&trace), created, "{}", run.context());

    parameters.push(("tag", "v2"));
    run.update("chain5.yaml", &parameters).await;
    assert_eq!(run.status(), "UPDATE_COMPLETE", "{}", run.context());
    assert_eq!(run.outputs["result"], json!(chain_result("v2")), "{}", run.context());
    let mut expected = created;
    expected.push("hop5 UPDATE".to_string());
    expected.sort();
    assert_eq!(trace_lines(&trace), expected, "only hop5 ran again\n{}", run.context());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_heat_harness_is_shared_by_the_tests_of_a_run() {
    let first = RealHeat::shared().await;
    let second = RealHeat::shared().await;
    assert_eq!(first.keystone_url(), second.keystone_url(), "the second call reuses the running instance");
    assert_eq!(first.heat_api_url(), second.heat_api_url());
    assert_eq!(first.heat_cfn_url(), second.heat_cfn_url());
    for url in [first.keystone_url(), first.heat_api_url(), first.heat_cfn_url()] {
        assert!(url.starts_with("http://127.0.0.1:"), "loopback only: {url}");
    }
    let api = first.admin().await;
    assert!(
        api.endpoint().starts_with(first.heat_api_url()),
        "the catalog's orchestration endpoint: {}",
        api.endpoint()
    );
    assert!(api.endpoint().ends_with(api.project_id()), "{}", api.endpoint());
}
