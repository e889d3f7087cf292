//! Security regression tests of the engine, each reproducing an attack from a review: a
//! placeholder smuggled into supplied text must never make the shim reveal a token, and wait
//! condition signals are bounded (late ones change nothing; ids, sizes and token lookups are
//! capped; counting does not read earlier signals). Helpers come from `tests.rs`.

use serde_json::{Value, json};

use super::signals::{MAX_SIGNAL_IDS_PER_HANDLE, MAX_TOKEN_LOOKUPS_PER_BODY, MAX_WAIT_SIGNAL_FIELD_BYTES};
use super::tests::{deployments, engine_at, input, register, request, signal_token};
use super::{Engine, TokenKey};
use crate::model::{Service, ServiceError, SignalAck, WaitConditionSignal};
use crate::store::SqliteStore;

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

/// A handle read by a deployment on vm1 (so its token can be taken from vm1's document) and a
/// wait condition on it that waits for `count` signals.
fn waiting(count: u64) -> String {
    format!(
        r##"
heat_template_version: 2018-08-31
resources:
  config:
    type: OS::Heat::SoftwareConfig
    properties: {{group: script, config: "#!/bin/sh\n"}}
  handle:
    type: OS::Heat::WaitConditionHandle
  notifier:
    type: OS::Heat::SoftwareDeployment
    properties:
      config: {{get_resource: config}}
      server: vm1
      input_values: {{wc_notify: {{get_attr: [handle, curl_cli]}}}}
  wait:
    type: OS::Heat::WaitCondition
    properties: {{handle: {{get_resource: handle}}, count: {count}, timeout: 600}}
"##
    )
}

/// An engine with the `waiting(count)` stack created; returns it with the handle's token.
async fn with_wait(dir: &std::path::Path, count: u64) -> (Engine<SqliteStore>, String) {
    let engine = engine_at(&dir.join("shim.db"));
    register(&engine, &["vm1"]).await;
    engine.create_stack(request("s", &waiting(count), &[])).await.unwrap();
    let notifier = deployments(&engine, "vm1").await.remove(0);
    let curl = input(&notifier, "wc_notify").as_str().unwrap().to_string();
    (engine, curl.rsplit('/').next().unwrap().to_string())
}

fn signal(id: &str, data: Value) -> WaitConditionSignal {
    WaitConditionSignal { success: true, reason: None, data: Some(data), id: Some(id.to_string()) }
}

async fn stored_signals(engine: &Engine<SqliteStore>) -> usize {
    engine.transact(|ctx| Ok(ctx.tx.wait_signals("s", "handle")?.len())).await.unwrap()
}

async fn resource_status(engine: &Engine<SqliteStore>, name: &str) -> String {
    let detail = engine.show_stack("s").await.unwrap();
    detail.resources.into_iter().find(|resource| resource.name == name).unwrap().status
}

/// After its wait condition completed, a handle took every signal with a new id (`applied`),
/// each stored: the database grew without bound. A new id is now answered `stale` and stored
/// nowhere; an id the handle holds still replaces its signal in place, as Heat's handle does (see
/// wait_update_tests.rs).
#[tokio::test]
async fn new_ids_after_the_wait_condition_completed_change_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (engine, token) = with_wait(dir.path(), 1).await;
    assert_eq!(engine.wait_condition_signal(&token, signal("a", json!(1))).await.unwrap(), Some(SignalAck::Applied));
    assert_eq!(resource_status(&engine, "wait").await, "CREATE_COMPLETE");
    let events = engine.stack_events("s").await.unwrap().len();
    for id in ["b", "c"] {
        let late = engine.wait_condition_signal(&token, signal(id, json!("x".repeat(1000)))).await.unwrap();
        assert_eq!(
            late,
            Some(SignalAck::Stale),
            "a late signal with a new id ({id}) is answered 2xx and changes nothing"
        );
    }
    assert_eq!(stored_signals(&engine).await, 1, "late signals with new ids are not stored");
    assert_eq!(engine.stack_events("s").await.unwrap().len(), events, "late signals with new ids add no event");
    let known = engine.wait_condition_signal(&token, signal("a", json!(2))).await.unwrap();
    assert_eq!(known, Some(SignalAck::Duplicate), "a known id replaces its signal, as in Heat");
    assert_eq!(stored_signals(&engine).await, 1, "in place: the handle holds no more rows");
}

/// A handle stored any number of distinct ids.
#[tokio::test]
async fn distinct_ids_per_handle_are_capped() {
    let dir = tempfile::tempdir().unwrap();
    let (engine, token) = with_wait(dir.path(), MAX_SIGNAL_IDS_PER_HANDLE).await;
    // Say the handle already holds all but one id the cap allows (sending them costs seconds).
    engine
        .transact(|ctx| {
            let mut handle = ctx.tx.node("s", "handle")?.unwrap();
            handle.record.signals = Some(MAX_SIGNAL_IDS_PER_HANDLE - 1);
            Ok(ctx.tx.update_node(&handle)?)
        })
        .await
        .unwrap();
    let cap = MAX_SIGNAL_IDS_PER_HANDLE;
    assert_eq!(engine.wait_condition_signal(&token, signal("last", json!(1))).await.unwrap(), Some(SignalAck::Applied));
    let over = engine.wait_condition_signal(&token, signal("one-more", json!(1))).await;
    match over {
        Err(ServiceError::Invalid { message }) => assert!(message.contains(&format!("{cap} signal ids")), "{message}"),
        other => panic!("a new id beyond the cap must be refused, got {other:?}"),
    }
    let repeated = engine.wait_condition_signal(&token, signal("last", json!(2))).await.unwrap();
    assert_eq!(repeated, Some(SignalAck::Duplicate), "a repeated id still replaces its signal");
    assert_eq!(resource_status(&engine, "wait").await, "CREATE_IN_PROGRESS");
}

/// A handle signal's reason and data were stored whatever their size (up to the 1 MiB body).
#[tokio::test]
async fn reason_and_data_sizes_are_capped() {
    let dir = tempfile::tempdir().unwrap();
    let (engine, token) = with_wait(dir.path(), 3).await;
    let largest = "x".repeat(MAX_WAIT_SIGNAL_FIELD_BYTES - 2);
    assert_eq!(
        engine.wait_condition_signal(&token, signal("fits", json!(largest))).await.unwrap(),
        Some(SignalAck::Applied)
    );
    let too_long = "x".repeat(MAX_WAIT_SIGNAL_FIELD_BYTES + 1);
    let with_reason = WaitConditionSignal { reason: Some(too_long.clone()), ..signal("reason", Value::Null) };
    for (what, refused) in [("data", signal("data", json!(too_long))), ("reason", with_reason)] {
        match engine.wait_condition_signal(&token, refused).await {
            Err(ServiceError::Invalid { message }) => {
                assert!(message.contains(what) && message.contains("65536 bytes"), "{message}")
            }
            other => panic!("an oversized {what} must be refused with 400, got {other:?}"),
        }
    }
    assert_eq!(stored_signals(&engine).await, 1);
}

/// Each handle signal read every earlier signal of its handle (data included) to count them: a
/// signal cost grew with the data stored before it. Here an earlier row is made unreadable: a
/// signal that does not read it still goes through.
#[tokio::test]
async fn a_signal_does_not_read_the_earlier_signals() {
    let dir = tempfile::tempdir().unwrap();
    let (engine, token) = with_wait(dir.path(), 5).await;
    engine.wait_condition_signal(&token, signal("first", json!(1))).await.unwrap();
    let raw = rusqlite::Connection::open(dir.path().join("shim.db")).unwrap();
    raw.execute("UPDATE wait_signals SET data = 'not json' WHERE signal_id = 'first'", []).unwrap();
    drop(raw);
    let second = engine.wait_condition_signal(&token, signal("second", json!(2))).await;
    assert_eq!(second.unwrap(), Some(SignalAck::Applied), "the second signal read the first one");
    let default_id = WaitConditionSignal { id: None, ..signal("", json!(3)) };
    engine.wait_condition_signal(&token, default_id).await.unwrap();
    let ids = engine
        .transact(|ctx| {
            let handle = ctx.tx.node("s", "handle")?.unwrap();
            Ok(handle.record.signals)
        })
        .await
        .unwrap();
    assert_eq!(ids, Some(3), "the handle counts its distinct ids");
}

/// The scrubber looked up every token-shaped run of a body: a body of thousands of them cost
/// thousands of lookups. Past the budget, runs are masked without one.
#[tokio::test]
async fn token_lookups_per_body_are_bounded() {
    let dir = tempfile::tempdir().unwrap();
    let (engine, _) = with_wait(dir.path(), 1).await;
    let notifier = deployments(&engine, "vm1").await.remove(0);
    let key = TokenKey::from_secret(b"unrelated");
    let runs: Vec<String> =
        (0..200).map(|index| key.token(super::secrets::Purpose::Signal, &index.to_string())).collect();
    let body = json!({"deploy_stdout": runs.join(" "), "deploy_status_code": 0});
    engine.deployment_signal(&signal_token(&notifier), body, None).await.unwrap();
    let stdout = engine
        .transact(|ctx| Ok(ctx.tx.node("s", "notifier")?.unwrap().attributes["deploy_stdout"].clone()))
        .await
        .unwrap();
    let stdout = stdout.as_str().unwrap();
    let kept = runs.iter().filter(|run| stdout.contains(run.as_str())).count();
    assert_eq!(kept, MAX_TOKEN_LOOKUPS_PER_BODY, "runs looked up (and found unknown) are kept, the rest masked");
    assert_eq!(stdout.matches("***").count(), 200 - MAX_TOKEN_LOOKUPS_PER_BODY);
}
