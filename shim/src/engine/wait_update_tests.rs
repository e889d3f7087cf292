//! A completed wait condition's `data` after stack updates, as Heat shows it: a deployment that
//! signals its handle again with the same id and new data (each update changes the data) makes
//! the condition's `data` and the outputs built from it show the latest value, without the
//! condition running again; a new id after completion is still answered `stale` and stored
//! nowhere, and the size limits still hold. A late FAILURE for a known id fails only an update
//! that changes the condition, as in Heat. Helpers come from `tests.rs`.

use serde_json::{Value, json};

use super::Engine;
use super::signals::MAX_WAIT_SIGNAL_FIELD_BYTES;
use super::tests::{deployments, engine_at, input, register, request, signal_token, status};
use crate::model::{Service, ServiceError, SignalAck, WaitConditionSignal};
use crate::store::SqliteStore;

/// The deployment on vm1 runs the handle's `curl_cli` with the `value` parameter as the data of
/// signal id "1"; the wait condition completes on that signal; two outputs read its data.
const TEMPLATE: &str = r##"
heat_template_version: 2018-08-31
parameters:
  value: {type: string, default: v1}
  count: {type: number, default: 1}
resources:
  config:
    type: OS::Heat::SoftwareConfig
    properties: {group: script, inputs: [{name: wc_notify}, {name: value}], config: "#!/bin/sh\n"}
  handle:
    type: OS::Heat::WaitConditionHandle
  notifier:
    type: OS::Heat::SoftwareDeployment
    properties:
      config: {get_resource: config}
      server: vm1
      input_values: {wc_notify: {get_attr: [handle, curl_cli]}, value: {get_param: value}}
  wait:
    type: OS::Heat::WaitCondition
    properties: {handle: {get_resource: handle}, count: {get_param: count}, timeout: 600}
outputs:
  wait_data: {value: {get_attr: [wait, data]}}
  summary:
    value: {str_replace: {template: "data=DATA", params: {DATA: {get_attr: [wait, data]}}}}
"##;

fn signal(id: &str, data: Value) -> WaitConditionSignal {
    WaitConditionSignal { success: true, reason: None, data: Some(data), id: Some(id.to_string()) }
}

/// What the agent and the script on vm1 do with the deployment as published now: the script
/// signals the handle (id "1", the deployment's `value` input as data), then the hook's result is
/// signalled. Returns the engine's answer to the handle signal. To a wait condition that had
/// completed already, the handle signal changes nothing: no status, no event.
async fn run_notifier(engine: &Engine<SqliteStore>) -> Option<SignalAck> {
    let notifier = deployments(engine, "vm1").await.remove(0);
    let value = input(&notifier, "value").clone();
    let before = wait_condition(engine).await;
    let ack = engine.wait_condition_signal(&handle_token(engine).await, signal("1", value)).await.unwrap();
    if before.0.ends_with("_COMPLETE") {
        assert_eq!(wait_condition(engine).await, before, "the handle signal left the completed wait condition alone");
    }
    let result = engine.deployment_signal(&signal_token(&notifier), json!({"deploy_status_code": 0}), None).await;
    assert_eq!(result.unwrap(), Some(SignalAck::Applied));
    ack
}

async fn handle_token(engine: &Engine<SqliteStore>) -> String {
    let notifier = deployments(engine, "vm1").await.remove(0);
    input(&notifier, "wc_notify").as_str().unwrap().rsplit('/').next().unwrap().to_string()
}

/// The outputs `wait_data` and `summary`.
async fn outputs(engine: &Engine<SqliteStore>) -> (Value, Value) {
    let detail = engine.show_stack("s").await.unwrap();
    let output = |name: &str| detail.outputs.iter().find(|output| output.name == name).unwrap().value.clone();
    (output("wait_data"), output("summary"))
}

/// What `get_attr: [wait, data]` shows with id "1" holding `value`.
fn shown(value: &str) -> (Value, Value) {
    let data = format!("{{\"1\": \"{value}\"}}");
    (json!(data), json!(format!("data={data}")))
}

async fn wait_condition(engine: &Engine<SqliteStore>) -> (String, usize) {
    let detail = engine.show_stack("s").await.unwrap();
    let status = detail.resources.into_iter().find(|resource| resource.name == "wait").unwrap().status;
    let events = engine.stack_events("s").await.unwrap();
    (status, events.iter().filter(|event| event.resource == "wait").count())
}

async fn stored_signals(engine: &Engine<SqliteStore>) -> Vec<(String, Value)> {
    let rows = engine.transact(|ctx| Ok(ctx.tx.wait_signals("s", "handle")?)).await.unwrap();
    rows.into_iter().map(|row| (row.signal_id, row.data)).collect()
}

/// Heat's handle overwrites an id's signal whenever it arrives and its wait condition's `data`
/// reads the handle at each read; the shim answered `stale` once the condition had completed and
/// kept the first value: v1 after updates to v2 and v3.
#[tokio::test]
async fn data_shows_the_latest_value_of_an_id_after_each_update() {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine_at(&dir.path().join("shim.db"));
    register(&engine, &["vm1"]).await;
    engine.create_stack(request("s", TEMPLATE, &[])).await.unwrap();
    assert_eq!(run_notifier(&engine).await, Some(SignalAck::Applied));
    assert_eq!(status(&engine, "s").await, "CREATE_COMPLETE");
    assert_eq!(outputs(&engine).await, shown("v1"));

    for value in ["v2", "v3"] {
        engine.update_stack("s", request("s", TEMPLATE, &[("value", value)])).await.unwrap();
        assert_eq!(status(&engine, "s").await, "UPDATE_IN_PROGRESS");
        let ack = run_notifier(&engine).await;
        assert_eq!(ack, Some(SignalAck::Duplicate), "{value}: a known id replaces its signal");
        assert_eq!(status(&engine, "s").await, "UPDATE_COMPLETE");
        assert_eq!(outputs(&engine).await, shown(value), "the wait condition's data after the update to {value}");
    }
    assert_eq!(wait_condition(&engine).await.0, "UPDATE_COMPLETE");

    // A new id after completion is still answered `stale` and stored nowhere.
    let token = handle_token(&engine).await;
    let late = engine.wait_condition_signal(&token, signal("2", json!("late"))).await.unwrap();
    assert_eq!(late, Some(SignalAck::Stale));
    let without_id = WaitConditionSignal { id: None, ..signal("", json!("late")) };
    assert_eq!(engine.wait_condition_signal(&token, without_id).await.unwrap(), Some(SignalAck::Stale));
    assert_eq!(stored_signals(&engine).await, [("1".to_string(), json!("v3"))]);

    // The size limits hold for a known id too.
    let oversized = signal("1", json!("x".repeat(MAX_WAIT_SIGNAL_FIELD_BYTES + 1)));
    match engine.wait_condition_signal(&token, oversized).await {
        Err(ServiceError::Invalid { message }) => assert!(message.contains("65536 bytes"), "{message}"),
        other => panic!("oversized data for a known id must be refused with 400, got {other:?}"),
    }
    assert_eq!(outputs(&engine).await, shown("v3"));
    assert_eq!(stored_signals(&engine).await, [("1".to_string(), json!("v3"))]);
}

/// A FAILURE for a known id after completion is stored and shown (as in Heat's handle) but fails
/// nothing: not the completed condition, and not an update that leaves the condition unchanged
/// (Heat checks an unchanged resource no more than a completed one). An update that changes its
/// `count` checks it again, and then the FAILURE fails it, as Heat's `handle_update` does.
#[tokio::test]
async fn a_late_failure_for_a_known_id_fails_only_a_changed_condition() {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine_at(&dir.path().join("shim.db"));
    register(&engine, &["vm1"]).await;
    engine.create_stack(request("s", TEMPLATE, &[])).await.unwrap();
    run_notifier(&engine).await;
    let token = handle_token(&engine).await;
    let before = wait_condition(&engine).await;
    let failure = WaitConditionSignal { success: false, reason: Some("broke".into()), ..signal("1", json!("v9")) };
    assert_eq!(engine.wait_condition_signal(&token, failure).await.unwrap(), Some(SignalAck::Duplicate));
    assert_eq!(outputs(&engine).await, shown("v9"));
    assert_eq!(status(&engine, "s").await, "CREATE_COMPLETE");
    assert_eq!(wait_condition(&engine).await, before, "the wait condition neither ran again nor failed");
    let events = engine.stack_events("s").await.unwrap();
    assert!(events.iter().any(|event| event.status == "SIGNAL_FAILURE" && event.reason == "1: broke"), "{events:?}");

    // The deployment runs again but this time does not signal the handle: the FAILURE stays.
    engine.update_stack("s", request("s", TEMPLATE, &[("value", "v2")])).await.unwrap();
    assert_eq!(wait_condition(&engine).await.0, "UPDATE_COMPLETE", "an unchanged condition is not failed");
    let notifier = deployments(&engine, "vm1").await.remove(0);
    engine.deployment_signal(&signal_token(&notifier), json!({"deploy_status_code": 0}), None).await.unwrap();
    assert_eq!(status(&engine, "s").await, "UPDATE_COMPLETE");
    assert_eq!(outputs(&engine).await, shown("v9"));

    engine.update_stack("s", request("s", TEMPLATE, &[("value", "v2"), ("count", "2")])).await.unwrap();
    let detail = engine.show_stack("s").await.unwrap();
    assert_eq!(detail.summary.status, "UPDATE_FAILED");
    assert!(detail.summary.status_reason.contains("WaitConditionFailure: broke"), "{}", detail.summary.status_reason);
}
