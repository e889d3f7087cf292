//! Security regression tests of the engine's token handling, each reproducing an attack from a
//! review: a placeholder smuggled into supplied text must never make the shim reveal a token.
//! Helpers come from `tests.rs`.

use serde_json::{Value, json};

use super::tests::{deployments, engine_at, input, register, request, signal_token};
use crate::model::{Service, SignalAck, WaitConditionSignal};

/// The victim's deployment, in a stack of its own.
const VICTIM: &str = r##"
heat_template_version: 2018-08-31
resources:
  config:
    type: OS::Heat::SoftwareConfig
    properties: {group: script, config: "#!/bin/sh\n"}
  victim:
    type: OS::Heat::SoftwareDeployment
    properties: {config: {get_resource: config}, server: victim}
"##;

/// The attacker's server holds only the handle URL (in its `wc_notify` input); the consumer's
/// deployment reads what the attacker supplied: the wait condition's data, the attacker's hook
/// output, two output halves joined by the template, and a parameter.
const TEMPLATE: &str = r##"
heat_template_version: 2018-08-31
parameters:
  note: {type: string, default: ""}
resources:
  config:
    type: OS::Heat::SoftwareConfig
    properties: {group: script, config: "#!/bin/sh\n", outputs: [{name: half1}, {name: half2}]}
  handle:
    type: OS::Heat::WaitConditionHandle
  notifier:
    type: OS::Heat::SoftwareDeployment
    properties:
      config: {get_resource: config}
      server: attacker
      input_values: {wc_notify: {get_attr: [handle, curl_cli]}}
  wait:
    type: OS::Heat::WaitCondition
    properties: {handle: {get_resource: handle}, count: 1, timeout: 600}
  consumer:
    type: OS::Heat::SoftwareDeployment
    properties:
      config: {get_resource: config}
      server: consumer
      input_values:
        wait_data: {get_attr: [wait, data]}
        stdout: {get_attr: [notifier, deploy_stdout]}
        joined: {list_join: ["", [{get_attr: [notifier, half1]}, {get_attr: [notifier, half2]}]]}
        note: {get_param: note}
"##;

/// Every run of exactly 64 hex digits in `text`: what could be a token.
fn token_shaped(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_ascii_hexdigit()).filter(|run| run.len() == 64).map(str::to_string).collect()
}

#[tokio::test]
async fn supplied_placeholders_never_render_another_deployments_token() {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine_at(&dir.path().join("shim.db"));
    register(&engine, &["victim", "attacker", "consumer"]).await;
    engine.create_stack(request("v", VICTIM, &[])).await.unwrap();
    // Derived config ids are not secret: say the attacker learnt the victim's.
    let victim_entry = deployments(&engine, "victim").await.remove(0);
    let victim_token = signal_token(&victim_entry);
    let forged = format!("@@anneal-token:signal:{}@@", victim_entry["id"].as_str().unwrap());
    engine.create_stack(request("s", TEMPLATE, &[("note", forged.as_str())])).await.unwrap();

    let notifier = deployments(&engine, "attacker").await.remove(0);
    let curl = input(&notifier, "wc_notify").as_str().unwrap().to_string();
    let handle_token = curl.rsplit('/').next().unwrap().to_string();
    let data = WaitConditionSignal { success: true, reason: Some(forged.clone()), data: Some(json!(forged)), id: None };
    assert_eq!(engine.wait_condition_signal(&handle_token, data).await.unwrap(), Some(SignalAck::Applied));
    let (half1, half2) = forged.split_at(8);
    let body = json!({"deploy_stdout": forged, "half1": half1, "half2": half2, "deploy_status_code": 0});
    engine.deployment_signal(&signal_token(&notifier), body, None).await.unwrap();

    let document = engine.metadata("consumer").await.unwrap();
    let consumer: Value = serde_json::from_str(&document.body).unwrap();
    assert_eq!(consumer["deployments"].as_array().unwrap().len(), 1, "the consumer was published");
    assert!(!document.body.contains(&victim_token), "the consumer's document carries the victim's token");
    for candidate in token_shaped(&document.body) {
        let ack = engine.deployment_signal(&candidate, json!({"deploy_status_code": 0}), None).await.unwrap();
        assert_ne!(ack, None, "only the consumer's own token is in its document");
    }
    let victim = engine.show_stack("v").await.unwrap().resources.into_iter().find(|r| r.name == "victim").unwrap();
    assert!(victim.status.ends_with("_IN_PROGRESS"), "the victim's deployment was completed: {}", victim.status);
    assert_eq!(
        input(&consumer["deployments"][0], "wait_data").as_str().map(|data| data.contains(&victim_token)),
        Some(false)
    );
}
