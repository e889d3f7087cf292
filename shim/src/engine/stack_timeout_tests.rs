//! The stack's deadline when the request gives no timeout: Heat's `stack_action_timeout`
//! (`EngineConfig::stack_action_timeout`, lowered here to two minutes) for a create, an update
//! and a delete, kept as a stored deadline row across a restart; an explicit timeout still wins;
//! a rolling update's pauses are checked against the same value. Time moves by running the
//! sweeper with a later `now`, never by sleeping. Helpers: `tests.rs`, `budget_tests.rs`.

use std::path::Path;

use serde_json::json;

use super::budget_tests::engine_with;
use super::limits::StackActionTimeout;
use super::tests::{deployments, register, request, signal_token, status, sweep_after};
use super::transact::Engine;
use crate::model::Service;
use crate::store::SqliteStore;

/// The lowered default, in seconds.
const DEFAULT_SECS: u64 = 120;

const TEMPLATE: &str = r##"
heat_template_version: 2018-08-31
parameters:
  message: {type: string, default: one}
resources:
  config:
    type: OS::Heat::SoftwareConfig
    properties:
      group: script
      config: {str_replace: {template: "#!/bin/sh\necho MESSAGE\n", params: {MESSAGE: {get_param: message}}}}
  deploy:
    type: OS::Heat::SoftwareDeployment
    properties: {config: {get_resource: config}, server: web1, actions: [CREATE, UPDATE, DELETE]}
"##;

fn timed_engine(path: &Path) -> Engine<SqliteStore> {
    engine_with(path, |config| {
        config.stack_action_timeout = StackActionTimeout::from_secs(DEFAULT_SECS).unwrap();
    })
}

async fn reason(engine: &Engine<SqliteStore>, stack: &str) -> String {
    engine.show_stack(stack).await.unwrap().summary.status_reason
}

/// Answers web1's one published deployment with success.
async fn succeed(engine: &Engine<SqliteStore>) {
    let published = deployments(engine, "web1").await;
    assert_eq!(published.len(), 1, "{published:?}");
    engine.deployment_signal(&signal_token(&published[0]), json!({"deploy_status_code": 0}), None).await.unwrap();
}

#[tokio::test]
async fn a_create_without_a_timeout_fails_after_the_default_even_across_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("shim.db");
    let engine = timed_engine(&path);
    register(&engine, &["web1"]).await;
    engine.create_stack(request("s", TEMPLATE, &[])).await.unwrap();
    assert_eq!(sweep_after(&engine, DEFAULT_SECS - 5).await, 0, "not due yet");
    drop(engine);
    // The deadline is a stored row: a restarted shim enforces it.
    let engine = timed_engine(&path);
    assert_eq!(status(&engine, "s").await, "CREATE_IN_PROGRESS");
    assert_eq!(sweep_after(&engine, DEFAULT_SECS + 1).await, 1);
    assert_eq!(status(&engine, "s").await, "CREATE_FAILED");
    assert_eq!(
        reason(&engine, "s").await,
        "Timed out: stack CREATE did not complete in time; still in progress: deploy on web1"
    );
}

#[tokio::test]
async fn an_update_without_a_timeout_fails_after_the_default() {
    let dir = tempfile::tempdir().unwrap();
    let engine = timed_engine(&dir.path().join("shim.db"));
    register(&engine, &["web1"]).await;
    engine.create_stack(request("s", TEMPLATE, &[])).await.unwrap();
    succeed(&engine).await;
    assert_eq!(status(&engine, "s").await, "CREATE_COMPLETE");
    assert_eq!(sweep_after(&engine, DEFAULT_SECS + 1).await, 0, "a completed create leaves no deadline");
    engine.update_stack("s", request("s", TEMPLATE, &[("message", "two")])).await.unwrap();
    assert_eq!(sweep_after(&engine, DEFAULT_SECS - 5).await, 0);
    assert_eq!(status(&engine, "s").await, "UPDATE_IN_PROGRESS");
    assert_eq!(sweep_after(&engine, DEFAULT_SECS + 1).await, 1);
    assert_eq!(status(&engine, "s").await, "UPDATE_FAILED");
    assert_eq!(
        reason(&engine, "s").await,
        "Timed out: stack UPDATE did not complete in time; still in progress: deploy on web1"
    );
}

#[tokio::test]
async fn an_explicit_timeout_wins_over_the_default() {
    let dir = tempfile::tempdir().unwrap();
    let engine = timed_engine(&dir.path().join("shim.db"));
    register(&engine, &["web1"]).await;
    let mut longer = request("s", TEMPLATE, &[]);
    longer.timeout_secs = Some(DEFAULT_SECS * 5);
    engine.create_stack(longer).await.unwrap();
    engine.create_stack(request("other", TEMPLATE, &[])).await.unwrap();
    assert_eq!(sweep_after(&engine, DEFAULT_SECS + 1).await, 1, "only the stack without a timeout of its own");
    assert_eq!(status(&engine, "other").await, "CREATE_FAILED");
    assert_eq!(status(&engine, "s").await, "CREATE_IN_PROGRESS", "its own timeout, not the default");
    assert_eq!(sweep_after(&engine, DEFAULT_SECS * 5 + 1).await, 1);
    assert_eq!(status(&engine, "s").await, "CREATE_FAILED");

    let mut shorter = request("s", TEMPLATE, &[("message", "two")]);
    shorter.timeout_secs = Some(10);
    engine.update_stack("s", shorter).await.unwrap();
    assert_eq!(sweep_after(&engine, 11).await, 1, "a shorter one too");
    assert_eq!(status(&engine, "s").await, "UPDATE_FAILED");
}

#[tokio::test]
async fn a_delete_gets_the_same_default() {
    let dir = tempfile::tempdir().unwrap();
    let engine = timed_engine(&dir.path().join("shim.db"));
    register(&engine, &["web1"]).await;
    engine.create_stack(request("s", TEMPLATE, &[])).await.unwrap();
    succeed(&engine).await;
    engine.delete_stack("s").await.unwrap();
    assert_eq!(status(&engine, "s").await, "DELETE_IN_PROGRESS", "its DELETE action is published");
    assert_eq!(sweep_after(&engine, DEFAULT_SECS - 5).await, 0);
    assert_eq!(sweep_after(&engine, DEFAULT_SECS + 1).await, 1);
    assert_eq!(status(&engine, "s").await, "DELETE_FAILED");
    assert_eq!(
        reason(&engine, "s").await,
        "Timed out: stack DELETE did not complete in time; still in progress: deploy on web1"
    );
}

const GROUP: &str = r##"
heat_template_version: 2018-08-31
parameters:
  message: {type: string, default: one}
resources:
  config:
    type: OS::Heat::SoftwareConfig
    properties:
      group: script
      config: {str_replace: {template: "#!/bin/sh\necho MESSAGE\n", params: {MESSAGE: {get_param: message}}}}
  group:
    type: OS::Heat::SoftwareDeploymentGroup
    update_policy: {rolling_update: {max_batch_size: 1, pause_time: 70}}
    properties: {config: {get_resource: config}, servers: {a: web1, b: web2}}
"##;

#[tokio::test]
async fn a_rolling_updates_pauses_are_held_to_the_default() {
    let dir = tempfile::tempdir().unwrap();
    let engine = timed_engine(&dir.path().join("shim.db"));
    register(&engine, &["web1", "web2"]).await;
    engine.create_stack(request("s", GROUP, &[])).await.unwrap();
    for server in ["web1", "web2"] {
        let published = deployments(&engine, server).await;
        engine.deployment_signal(&signal_token(&published[0]), json!({"deploy_status_code": 0}), None).await.unwrap();
    }
    assert_eq!(status(&engine, "s").await, "CREATE_COMPLETE");
    // One pause of 70 s fits in the default of 120 s; with 3 members, two would not.
    engine.update_stack("s", request("s", GROUP, &[("message", "two")])).await.unwrap();
    assert_eq!(status(&engine, "s").await, "UPDATE_IN_PROGRESS");
    let three = GROUP.replace("b: web2}", "b: web2, c: web3}");
    register(&engine, &["web3"]).await;
    engine.update_stack("s", request("s", &three, &[("message", "three")])).await.unwrap();
    assert_eq!(status(&engine, "s").await, "UPDATE_FAILED");
    assert!(
        reason(&engine, "s").await.contains("The current update policy will result in stack update timeout."),
        "{}",
        reason(&engine, "s").await
    );
}
