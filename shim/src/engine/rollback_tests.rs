//! Rollback and cancel, in-process: a failed update with rollback enabled converges back to the
//! previous template (changed deployments publish their previous config again, the stack ends
//! ROLLBACK_COMPLETE), a failed create rolls back to nothing, Heat's default keeps the failure,
//! a cancel stops a traversal (with or without rollback), a rollback due when the shim stops
//! starts after a restart, and the refusals (unknown stack, nothing to cancel) change nothing.
//! The sweeper is run by hand with the test's clock, never by sleeping. Helpers: `tests.rs`.

use serde_json::{Value, json};

use super::sweeper;
use super::tests::{deployments, engine_at, input, register, request, signal_token, status};
use super::transact::Engine;
use crate::model::{Service, ServiceError, StackRequest};
use crate::store::{SqliteStore, StoredRequests};

const TEMPLATE: &str = r##"
heat_template_version: 2018-08-31
parameters:
  message: {type: string}
resources:
  config:
    type: OS::Heat::SoftwareConfig
    properties:
      group: script
      config: {str_replace: {template: "#!/bin/sh\necho MESSAGE\n", params: {MESSAGE: {get_param: message}}}}
  web1_deploy:
    type: OS::Heat::SoftwareDeployment
    properties: {config: {get_resource: config}, server: web1, actions: [CREATE, UPDATE, DELETE]}
  web2_deploy:
    type: OS::Heat::SoftwareDeployment
    properties: {config: {get_resource: config}, server: web2, actions: [CREATE, UPDATE, DELETE]}
outputs:
  first: {value: {get_attr: [web1_deploy, deploy_stdout]}}
"##;

fn stack_request(message: &str, disable_rollback: Option<bool>) -> StackRequest {
    StackRequest { disable_rollback, ..request("s", TEMPLATE, &[("message", message)]) }
}

/// The one deployment `server`'s document lists.
async fn entry(engine: &Engine<SqliteStore>, server: &str) -> Value {
    let published = deployments(engine, server).await;
    assert_eq!(published.len(), 1, "{published:?}");
    published[0].clone()
}

async fn answer(engine: &Engine<SqliteStore>, server: &str, code: i64) {
    let published = entry(engine, server).await;
    let body = json!({"deploy_status_code": code, "deploy_stdout": format!("{server} ran")});
    engine.deployment_signal(&signal_token(&published), body, None).await.unwrap();
}

/// Whether `server`'s deployment prints `message` and runs `action`.
async fn runs(engine: &Engine<SqliteStore>, server: &str, message: &str, action: &str) -> bool {
    let published = entry(engine, server).await;
    let config = published["config"].as_str().unwrap_or_default();
    config.contains(&format!("echo {message}")) && input(&published, "deploy_action") == action
}

async fn sweep(engine: &Engine<SqliteStore>) -> usize {
    engine.transact(sweeper::sweep).await.unwrap()
}

async fn reason(engine: &Engine<SqliteStore>) -> String {
    engine.show_stack("s").await.unwrap().summary.status_reason
}

async fn stack_statuses(engine: &Engine<SqliteStore>) -> Vec<String> {
    let events = engine.stack_events("s").await.unwrap();
    events.into_iter().filter(|event| event.resource == "s").map(|event| event.status).collect()
}

/// Creates the stack with `message`, both deployments answered: CREATE_COMPLETE.
async fn created(engine: &Engine<SqliteStore>, disable_rollback: Option<bool>) {
    register(engine, &["web1", "web2"]).await;
    engine.create_stack(stack_request("one", disable_rollback)).await.unwrap();
    answer(engine, "web1", 0).await;
    answer(engine, "web2", 0).await;
    assert_eq!(status(engine, "s").await, "CREATE_COMPLETE");
}

#[tokio::test]
async fn a_failed_update_rolls_back_to_the_previous_config_and_completes() {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine_at(&dir.path().join("shim.db"));
    created(&engine, Some(false)).await;
    engine.update_stack("s", stack_request("two", None)).await.unwrap();
    answer(&engine, "web1", 0).await;
    answer(&engine, "web2", 1).await;
    let failed = engine.show_stack("s").await.unwrap().summary;
    assert_eq!((failed.status.as_str(), failed.rollback_due, failed.disable_rollback), ("UPDATE_FAILED", true, false));

    assert_eq!(sweep(&engine).await, 1, "the due rollback fires at once");
    assert_eq!(status(&engine, "s").await, "ROLLBACK_IN_PROGRESS");
    assert_eq!(reason(&engine).await, "Stack ROLLBACK started");
    // web1 completed the update: it runs the previous config again, as an UPDATE; web2's run
    // of the new config failed: it too gets the previous config back.
    assert!(runs(&engine, "web1", "one", "UPDATE").await);
    assert!(entry(&engine, "web2").await["config"].as_str().unwrap().contains("echo one"));
    answer(&engine, "web1", 0).await;
    answer(&engine, "web2", 0).await;
    let done = engine.show_stack("s").await.unwrap();
    assert_eq!(done.summary.status, "ROLLBACK_COMPLETE");
    assert_eq!(done.summary.status_reason, "Stack ROLLBACK completed successfully");
    assert!(!done.summary.rollback_due && !done.summary.disable_rollback, "the setting stays");
    assert_eq!(done.outputs[0].value, json!("web1 ran"), "outputs resolve after the rollback");
    assert_eq!(
        stack_statuses(&engine).await,
        [
            "CREATE_IN_PROGRESS",
            "CREATE_COMPLETE",
            "UPDATE_IN_PROGRESS",
            "UPDATE_FAILED",
            "ROLLBACK_IN_PROGRESS",
            "ROLLBACK_COMPLETE"
        ]
    );
    // The rollback is the stack's template now: the next failed update returns to "one" again.
    engine.update_stack("s", stack_request("three", None)).await.unwrap();
    answer(&engine, "web1", 1).await;
    sweep(&engine).await;
    assert_eq!(status(&engine, "s").await, "ROLLBACK_IN_PROGRESS");
    assert!(runs(&engine, "web1", "one", "CREATE").await, "the failed one is replaced, as Heat does");
    assert!(runs(&engine, "web2", "one", "UPDATE").await, "web2 was still running three: one again");
}

#[tokio::test]
async fn an_update_the_failure_never_reached_runs_nothing_in_the_rollback() {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine_at(&dir.path().join("shim.db"));
    created(&engine, Some(false)).await;
    let before_web2 = entry(&engine, "web2").await;
    engine.update_stack("s", stack_request("two", None)).await.unwrap();
    // Cancelled while both run: web1 answers after the cancel, web2 never does.
    let cancelled = engine.cancel_stack("s", true).await.unwrap();
    assert_eq!(
        (cancelled.status.as_str(), cancelled.status_reason.as_str()),
        ("UPDATE_FAILED", "Stack UPDATE cancelled")
    );
    answer(&engine, "web1", 0).await;
    assert_eq!(status(&engine, "s").await, "UPDATE_FAILED", "a late signal is taken, nothing moves");
    sweep(&engine).await;
    assert_eq!(status(&engine, "s").await, "ROLLBACK_IN_PROGRESS");
    assert!(runs(&engine, "web1", "one", "UPDATE").await);
    assert!(runs(&engine, "web2", "one", "UPDATE").await, "web2 was sent two: it gets one back");
    assert_ne!(entry(&engine, "web2").await["id"], before_web2["id"], "a new run, not the old entry");
    answer(&engine, "web1", 0).await;
    answer(&engine, "web2", 0).await;
    assert_eq!(status(&engine, "s").await, "ROLLBACK_COMPLETE");
}

#[tokio::test]
async fn heats_default_keeps_a_failed_update_failed() {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine_at(&dir.path().join("shim.db"));
    created(&engine, None).await;
    engine.update_stack("s", stack_request("two", None)).await.unwrap();
    answer(&engine, "web1", 1).await;
    let failed = engine.show_stack("s").await.unwrap().summary;
    assert_eq!((failed.status.as_str(), failed.rollback_due, failed.disable_rollback), ("UPDATE_FAILED", false, true));
    assert_eq!(sweep(&engine).await, 0);
    assert_eq!(status(&engine, "s").await, "UPDATE_FAILED");
    // `--rollback enabled` on the next update turns it on from then.
    engine.update_stack("s", stack_request("three", Some(false))).await.unwrap();
    answer(&engine, "web1", 1).await;
    sweep(&engine).await;
    assert_eq!(status(&engine, "s").await, "ROLLBACK_IN_PROGRESS");
    assert!(entry(&engine, "web1").await["config"].as_str().unwrap().contains("echo two"), "back to the previous");
}

#[tokio::test]
async fn a_failed_create_rolls_back_to_nothing_running_delete_actions() {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine_at(&dir.path().join("shim.db"));
    register(&engine, &["web1", "web2"]).await;
    engine.create_stack(stack_request("one", Some(false))).await.unwrap();
    answer(&engine, "web1", 0).await;
    answer(&engine, "web2", 2).await;
    sweep(&engine).await;
    assert_eq!(status(&engine, "s").await, "ROLLBACK_IN_PROGRESS");
    // web1 ran: its DELETE action runs; web2's create failed, it ran too (DELETE as Heat would).
    assert!(runs(&engine, "web1", "one", "DELETE").await);
    answer(&engine, "web1", 0).await;
    if !deployments(&engine, "web2").await.is_empty() {
        answer(&engine, "web2", 0).await;
    }
    let done = engine.show_stack("s").await.unwrap();
    assert_eq!(done.summary.status, "ROLLBACK_COMPLETE");
    assert!(done.resources.is_empty(), "{:?}", done.resources);
    assert!(deployments(&engine, "web1").await.is_empty());
    // The stack stays; an update from here starts afresh.
    engine.update_stack("s", stack_request("two", None)).await.unwrap();
    assert!(runs(&engine, "web1", "two", "CREATE").await);
}

#[tokio::test]
async fn a_cancel_without_rollback_stops_and_stays_failed() {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine_at(&dir.path().join("shim.db"));
    created(&engine, Some(false)).await;
    engine.update_stack("s", stack_request("two", None)).await.unwrap();
    let cancelled = engine.cancel_stack("s", false).await.unwrap();
    assert_eq!(cancelled.status, "UPDATE_FAILED");
    assert!(!cancelled.rollback_due);
    assert_eq!(sweep(&engine).await, 0, "nothing due");
    // Running deployments are never killed; their signals are taken.
    answer(&engine, "web1", 0).await;
    let detail = engine.show_stack("s").await.unwrap();
    assert_eq!(detail.summary.status, "UPDATE_FAILED");
    let web1 = detail.resources.iter().find(|resource| resource.name == "web1_deploy").unwrap();
    assert_eq!(web1.status, "UPDATE_COMPLETE");
}

#[tokio::test]
async fn a_cancel_with_nothing_in_progress_or_no_stack_is_refused_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine_at(&dir.path().join("shim.db"));
    created(&engine, Some(false)).await;
    let refused = engine.cancel_stack("s", true).await.unwrap_err();
    let ServiceError::InUse { message } = refused else { panic!("{refused:?}") };
    assert_eq!(message, "stack s is CREATE_COMPLETE: only a CREATE or UPDATE in progress can be cancelled");
    assert!(matches!(engine.cancel_stack("nothing", true).await, Err(ServiceError::NotFound { .. })));
    assert_eq!(status(&engine, "s").await, "CREATE_COMPLETE");
    assert_eq!(stack_statuses(&engine).await, ["CREATE_IN_PROGRESS", "CREATE_COMPLETE"]);
}

#[tokio::test]
async fn a_rollback_due_when_the_shim_stops_starts_after_the_restart() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("shim.db");
    let engine = engine_at(&path);
    created(&engine, Some(false)).await;
    engine.update_stack("s", stack_request("two", None)).await.unwrap();
    answer(&engine, "web1", 1).await;
    drop(engine);
    let engine = engine_at(&path);
    assert_eq!(status(&engine, "s").await, "UPDATE_FAILED");
    assert_eq!(sweep(&engine).await, 1);
    assert_eq!(status(&engine, "s").await, "ROLLBACK_IN_PROGRESS");
    // And mid-rollback: the traversal is stored, so the next shim finishes it.
    drop(engine);
    let engine = engine_at(&path);
    answer(&engine, "web1", 0).await;
    answer(&engine, "web2", 0).await;
    assert_eq!(status(&engine, "s").await, "ROLLBACK_COMPLETE");
}

#[tokio::test]
async fn a_failed_rollback_ends_rollback_failed_and_goes_no_further() {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine_at(&dir.path().join("shim.db"));
    created(&engine, Some(false)).await;
    engine.update_stack("s", stack_request("two", None)).await.unwrap();
    answer(&engine, "web1", 1).await;
    sweep(&engine).await;
    answer(&engine, "web1", 1).await;
    assert_eq!(status(&engine, "s").await, "ROLLBACK_FAILED");
    assert_eq!(sweep(&engine).await, 0, "no rollback of a rollback");
    assert!(reason(&engine).await.starts_with("Resource CREATE failed: web1_deploy"), "{}", reason(&engine).await);
}

#[tokio::test]
async fn a_stack_stored_without_its_previous_request_cannot_roll_back_and_says_why() {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine_at(&dir.path().join("shim.db"));
    created(&engine, Some(false)).await;
    engine.update_stack("s", stack_request("two", None)).await.unwrap();
    // As a stack last written by a shim before schema 11 has it.
    engine.transact(|ctx| Ok(ctx.tx.set_stack_requests("s", &StoredRequests::default())?)).await.unwrap();
    answer(&engine, "web1", 1).await;
    sweep(&engine).await;
    assert_eq!(status(&engine, "s").await, "ROLLBACK_FAILED");
    assert!(reason(&engine).await.contains("no previous template is stored"), "{}", reason(&engine).await);
    assert!(entry(&engine, "web2").await["config"].as_str().unwrap().contains("echo two"), "nothing was sent");
}
