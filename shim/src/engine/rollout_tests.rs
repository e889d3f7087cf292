//! An update that arrives during a rolling update keeps every policy (the convergence seed
//! case): roleA rolls one member at a time with a pause; an update of roleB's input during
//! roleA's pause changes roleB at once, while roleA keeps one member per batch, what was left of
//! its pause, and runs each member's new config exactly once. A batch still running when the
//! second update arrives counts against the first new batch and is never interrupted. Time
//! moves by running the sweeper with a later clock. Helpers: `tests.rs`.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::tests::{deployments, engine_at, register, request, signal_token, status, sweep_after};
use super::transact::Engine;
use crate::model::Service;
use crate::store::SqliteStore;

const PAUSE_SECS: u64 = 10;

fn template(batch: u64) -> String {
    format!(
        r##"
heat_template_version: 2018-08-31
parameters:
  a: {{type: string}}
  b: {{type: string}}
resources:
  config:
    type: OS::Heat::SoftwareConfig
    properties: {{group: script, inputs: [{{name: message}}], config: "#!/bin/sh\necho $message\n"}}
  roleA:
    type: OS::Heat::SoftwareDeploymentGroup
    update_policy:
      rolling_update: {{max_batch_size: {batch}, pause_time: {PAUSE_SECS}}}
    properties:
      config: {{get_resource: config}}
      servers: {{a1: a1, a2: a2, a3: a3, a4: a4}}
      input_values: {{message: {{get_param: a}}}}
  roleB:
    type: OS::Heat::SoftwareDeploymentGroup
    properties:
      config: {{get_resource: config}}
      servers: {{b1: b1, b2: b2}}
      input_values: {{message: {{get_param: b}}}}
"##
    )
}

const SERVERS: [&str; 6] = ["a1", "a2", "a3", "a4", "b1", "b2"];

/// Each server's published entry: (message input, derived config id), if any.
async fn published(engine: &Engine<SqliteStore>) -> BTreeMap<&'static str, (Value, Value)> {
    let mut all = BTreeMap::new();
    for server in SERVERS {
        if let Some(entry) = deployments(engine, server).await.first() {
            let message = entry["inputs"].as_array().unwrap().iter().find(|input| input["name"] == "message");
            all.insert(server, (message.unwrap()["value"].clone(), entry["id"].clone()));
        }
    }
    all
}

/// The servers whose entry carries `message`.
async fn on(engine: &Engine<SqliteStore>, message: &str) -> Vec<&'static str> {
    let all = published(engine).await;
    all.into_iter().filter(|(_, (value, _))| value == message).map(|(server, _)| server).collect()
}

async fn answer(engine: &Engine<SqliteStore>, server: &str) {
    let entry = deployments(engine, server).await[0].clone();
    engine.deployment_signal(&signal_token(&entry), json!({"deploy_status_code": 0}), None).await.unwrap();
}

async fn created(batch: u64) -> (tempfile::TempDir, Engine<SqliteStore>) {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine_at(&dir.path().join("shim.db"));
    register(&engine, &SERVERS).await;
    engine.create_stack(request("s", &template(batch), &[("a", "1"), ("b", "1")])).await.unwrap();
    for server in SERVERS {
        answer(&engine, server).await;
    }
    assert_eq!(status(&engine, "s").await, "CREATE_COMPLETE");
    (dir, engine)
}

async fn update(engine: &Engine<SqliteStore>, batch: u64, a: &str, b: &str) {
    engine.update_stack("s", request("s", &template(batch), &[("a", a), ("b", b)])).await.unwrap();
}

#[tokio::test]
async fn an_update_during_a_pause_changes_the_other_role_at_once_and_keeps_the_rollout() {
    let (_dir, engine) = created(1).await;
    update(&engine, 1, "2", "1").await;
    assert_eq!(on(&engine, "2").await, ["a4"], "the highest index first");
    answer(&engine, "a4").await;
    let a4_run = published(&engine).await["a4"].1.clone();
    // roleA pauses 10 s; 4 s into the pause roleB's input changes.
    assert_eq!(sweep_after(&engine, 4).await, 0);
    update(&engine, 1, "2", "2").await;
    let now = published(&engine).await;
    assert_eq!((&now["b1"].0, &now["b2"].0), (&json!("2"), &json!("2")), "roleB changes at once");
    assert_eq!(on(&engine, "2").await, ["a4", "b1", "b2"], "roleA keeps its batches: a3 is not sent yet");
    assert_eq!(now["a4"].1, a4_run, "a4, already at the new definition, runs nothing again");
    answer(&engine, "b1").await;
    answer(&engine, "b2").await;
    // What was left of the pause holds (the sweeper runs at once; no second pause starts).
    sweep_after(&engine, 0).await;
    assert_eq!(on(&engine, "2").await, ["a4", "b1", "b2"]);
    // The pause ended 10 s after it started, not 10 s after the second update.
    assert!(sweep_after(&engine, PAUSE_SECS + 1).await >= 1);
    assert_eq!(on(&engine, "2").await, ["a3", "a4", "b1", "b2"], "then one member per batch");
    answer(&engine, "a3").await;
    sweep_after(&engine, PAUSE_SECS + 1).await;
    assert_eq!(on(&engine, "2").await, ["a2", "a3", "a4", "b1", "b2"]);
    answer(&engine, "a2").await;
    sweep_after(&engine, PAUSE_SECS + 1).await;
    answer(&engine, "a1").await;
    assert_eq!(status(&engine, "s").await, "UPDATE_COMPLETE");
    assert_eq!(published(&engine).await["a4"].1, a4_run, "every member ran the new config exactly once");
}

#[tokio::test]
async fn a_batch_still_running_counts_against_the_first_new_batch_and_is_not_interrupted() {
    let (_dir, engine) = created(2).await;
    update(&engine, 2, "2", "1").await;
    assert_eq!(on(&engine, "2").await, ["a3", "a4"]);
    let running = published(&engine).await;
    // A second update while a4 and a3 run: they keep their runs (same derived config, no new
    // entry), fill the first batch, and the rest waits for them and the pause.
    update(&engine, 2, "2", "2").await;
    let now = published(&engine).await;
    assert_eq!((&now["a3"].1, &now["a4"].1), (&running["a3"].1, &running["a4"].1));
    assert_eq!(on(&engine, "2").await, ["a3", "a4", "b1", "b2"]);
    answer(&engine, "b1").await;
    answer(&engine, "b2").await;
    answer(&engine, "a4").await;
    sweep_after(&engine, PAUSE_SECS + 1).await;
    assert_eq!(on(&engine, "2").await, ["a3", "a4", "b1", "b2"], "the batch is not done until a3 reports");
    answer(&engine, "a3").await;
    sweep_after(&engine, 1).await;
    assert_eq!(on(&engine, "2").await, ["a3", "a4", "b1", "b2"], "then the pause");
    sweep_after(&engine, PAUSE_SECS + 1).await;
    assert_eq!(on(&engine, "2").await, ["a1", "a2", "a3", "a4", "b1", "b2"], "then a2 and a1 together");
    answer(&engine, "a2").await;
    answer(&engine, "a1").await;
    assert_eq!(status(&engine, "s").await, "UPDATE_COMPLETE");
}
