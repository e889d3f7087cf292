//! anneal-agent's failure handling against a real Heat + Keystone (tests/peers/real-heat): a cfn
//! source whose secret key heat-api-cfn refuses is reported as an error (a configuration problem,
//! not a transient one) without showing the key, and an agent killed in the middle of a HEAT_SIGNAL (`ANNEAL_FAILPOINT`, the
//! debug build's crash points; see docs/journal.md) delivers the signal on its next start without
//! running the hook again, so the stack completes with the deployment run once.

mod real_heat_support;

use std::path::Path;
use std::time::Duration;

use anneal_tests::real_heat::{HeatApi, StackRef, fixture_template, unique_stack_name};
use anneal_tests::{AgentSettings, AnnealServer, CommandOutput, RealHeat, agent_binary, run_command, wait_until};
use real_heat_support::{SERVER_LIMIT, STACK_LIMIT, trace_lines};
use serde_json::{Value, json};
use tokio::process::Command;

/// Creates `one.yaml` with `parameters` and returns the stack and its server's metadata once the
/// deployment is in it.
async fn one_deployment(api: &HeatApi, prefix: &str, parameters: &[(&str, &str)]) -> (StackRef, Value) {
    let stack = api.create_stack(&unique_stack_name(prefix), &fixture_template("one.yaml"), parameters).await;
    api.wait_resource_status(&stack, "server", "CREATE_COMPLETE", SERVER_LIMIT).await;
    let metadata = wait_until(SERVER_LIMIT, "the deployment in the server's metadata", || async {
        let metadata = api.resource_metadata(&stack, "server").await;
        let deployments = metadata["metadata"]["deployments"].as_array().cloned().unwrap_or_default();
        (!deployments.is_empty()).then_some(metadata)
    })
    .await;
    (stack, metadata)
}

/// `anneal-agent once` on `server`'s config, with a crash point when `failpoint` is set.
async fn once(server: &AnnealServer, failpoint: Option<&str>) -> CommandOutput {
    let mut command = Command::new(agent_binary());
    command.arg("once").arg("--config").arg(server.agent().config_path()).env("ANNEAL_LOG", "debug");
    if let Some(point) = failpoint {
        command.env("ANNEAL_FAILPOINT", point);
    }
    run_command(command, Duration::from_secs(120)).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_heat_cfn_signature_refused_by_heat_api_cfn_is_a_clear_permanent_error() {
    let heat = RealHeat::shared().await;
    let api = heat.admin().await;
    let (stack, mut metadata) =
        one_deployment(&api, "badsig", &[("transport", "POLL_SERVER_CFN"), ("signal", "CFN_SIGNAL")]).await;
    let wrong_key = "a-wrong-secret-key-0123456789";
    let cfn = &mut metadata["metadata"]["os-collect-config"]["cfn"];
    assert!(cfn["secret_access_key"].is_string(), "Heat's metadata has cfn credentials: {metadata}");
    cfn["secret_access_key"] = json!(wrong_key);

    let server = AnnealServer::prepare(AgentSettings::default());
    let bootstrap = server.bootstrap_from(&metadata).await;
    assert_eq!(bootstrap.code, 0, "{bootstrap:?}");
    let run = once(&server, None).await;
    let context = format!("{run:?}\n{}", heat.log_tail());
    // heat-api-cfn 27 answers a signature Keystone's ec2tokens rejects with 403 AccessDenied.
    let refusal = "was refused with AccessDenied (HTTP 403)";
    let reported = run.stderr.lines().any(|line| line.contains(" ERROR ") && line.contains(refusal));
    assert!(reported, "the refusal is an error naming heat-api-cfn's code, not a transient warning: {context}");
    assert!(!run.stderr.contains(wrong_key) && !run.stdout.contains(wrong_key), "the key is never shown: {context}");
    assert!(!run.stderr.contains("Signature="), "the signed URL is shown without its query: {context}");
    // Nothing ran, so Heat still waits for the deployment.
    assert_eq!(api.resource(&stack, "deployment").await["resource_status"], "CREATE_IN_PROGRESS");
    api.delete_stack(&stack).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_heat_agent_killed_mid_heat_signal_signals_on_restart_without_rerunning() {
    let heat = RealHeat::shared().await;
    let api = heat.admin().await;
    let traces = tempfile::tempdir().expect("temp dir");
    let trace = traces.path().join("trace");
    let trace_text = trace.display().to_string();
    let parameters = [("transport", "POLL_SERVER_HEAT"), ("signal", "HEAT_SIGNAL"), ("trace", trace_text.as_str())];
    let (stack, metadata) = one_deployment(&api, "crash", &parameters).await;

    let server = AnnealServer::prepare(AgentSettings::default());
    let bootstrap = server.bootstrap_from(&metadata).await;
    assert_eq!(bootstrap.code, 0, "{bootstrap:?}");
    let crashed = once(&server, Some("mid_signal")).await;
    assert_ne!(crashed.code, 0, "the agent aborted at the crash point: {crashed:?}");
    assert!(crashed.stderr.contains("failpoint mid_signal reached"), "{crashed:?}");
    assert_eq!(runs(&trace), 1, "the hook ran before the crash: {crashed:?}");

    let again = once(&server, None).await;
    let shown = api.wait_stack_settled(&stack, None, STACK_LIMIT).await;
    let context = format!("crashed: {crashed:?}\nagain: {again:?}\nstack: {shown}\n{}", heat.log_tail());
    assert_eq!(again.code, 0, "{context}");
    assert_eq!(shown["stack_status"], "CREATE_COMPLETE", "{context}");
    assert_eq!(api.outputs(&stack).await["result"], json!("hello, world"), "{context}");
    assert_eq!(runs(&trace), 1, "the finished hook never reruns: {context}");
    api.delete_stack(&stack).await;
}

fn runs(trace: &Path) -> usize {
    trace_lines(trace).len()
}
