//! Heat's operator verbs on failures, in-process: the failures list (a failed deployment with
//! its run's output; a group's failed member instead of the group), mark-unhealthy (CHECK_FAILED,
//! then `--existing` runs exactly the marked and the failed deployments again; `reset` takes a
//! mark back; refusals change nothing), and a timed-out stack's reason naming what was still
//! running. Helpers: `tests.rs`.

use serde_json::{Value, json};

use super::sweeper;
use super::tests::{deployments, engine_at, input, register, request, signal_token, status};
use super::transact::Engine;
use crate::model::{Service, ServiceError, StackRequest};
use crate::store::SqliteStore;

const TEMPLATE: &str = r##"
heat_template_version: 2018-08-31
resources:
  config:
    type: OS::Heat::SoftwareConfig
    properties: {group: script, config: "#!/bin/sh\necho hi\n"}
  web1_deploy:
    type: OS::Heat::SoftwareDeployment
    properties: {config: {get_resource: config}, server: web1}
  web2_deploy:
    type: OS::Heat::SoftwareDeployment
    properties: {config: {get_resource: config}, server: web2}
  group:
    type: OS::Heat::SoftwareDeploymentGroup
    properties: {config: {get_resource: config}, servers: {a: web3, b: web4}}
"##;

async fn answer(engine: &Engine<SqliteStore>, server: &str, body: Value) -> String {
    let entry = deployments(engine, server).await[0].clone();
    engine.deployment_signal(&signal_token(&entry), body, None).await.unwrap();
    entry["id"].as_str().unwrap().to_string()
}

async fn reason_of(engine: &Engine<SqliteStore>, resource: &str) -> (String, String) {
    let detail = engine.show_stack("s").await.unwrap();
    let row = detail.resources.into_iter().find(|row| row.name == resource).unwrap();
    (row.status, row.status_reason)
}

/// The stack created with web2's and the group's member b's runs failing.
async fn created_with_failures() -> (tempfile::TempDir, Engine<SqliteStore>) {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine_at(&dir.path().join("shim.db"));
    register(&engine, &["web1", "web2", "web3", "web4"]).await;
    engine.create_stack(request("s", TEMPLATE, &[])).await.unwrap();
    let stdout: Vec<String> = (1..=12).map(|line| format!("step {line}")).collect();
    answer(&engine, "web1", json!({"deploy_status_code": 0})).await;
    let failed = json!({"deploy_status_code": 2, "deploy_stdout": stdout.join("\n"), "deploy_stderr": "disk full"});
    answer(&engine, "web2", failed).await;
    answer(&engine, "web3", json!({"deploy_status_code": 0})).await;
    answer(&engine, "web4", json!({"deploy_status_code": 1, "deploy_stderr": "no route"})).await;
    assert_eq!(status(&engine, "s").await, "CREATE_FAILED");
    (dir, engine)
}

#[tokio::test]
async fn the_failures_list_names_each_failed_deployment_with_its_output() {
    let (_dir, engine) = created_with_failures().await;
    let failures = engine.stack_failures("s").await.unwrap();
    let paths: Vec<&str> = failures.iter().map(|failure| failure.path.as_str()).collect();
    assert_eq!(paths, ["s.web2_deploy", "s.group.b"], "the member, not its group");
    let web2 = &failures[0];
    assert_eq!((web2.status.as_str(), web2.server.as_deref()), ("CREATE_FAILED", Some("web2")));
    assert!(web2.status_reason.contains("status code: 2"), "{}", web2.status_reason);
    assert_eq!(web2.deploy_stdout.as_deref().unwrap().lines().count(), 12, "the whole output");
    assert_eq!((web2.deploy_stderr.as_deref(), &web2.deploy_status_code), (Some("disk full"), &json!(2)));
    assert_eq!(failures[1].deploy_stderr.as_deref(), Some("no route"));
    assert!(matches!(engine.stack_failures("nosuch").await, Err(ServiceError::NotFound { .. })));
}

#[tokio::test]
async fn a_marked_deployment_runs_again_with_the_failed_ones_on_an_existing_update() {
    let (_dir, engine) = created_with_failures().await;
    let web1_before = deployments(&engine, "web1").await[0]["id"].clone();
    let web3_before = deployments(&engine, "web3").await[0]["id"].clone();
    engine.mark_unhealthy("s", "web1_deploy", Some("disk replaced".into()), false).await.unwrap();
    assert_eq!(reason_of(&engine, "web1_deploy").await, ("CHECK_FAILED".into(), "disk replaced".into()));
    let listed: Vec<String> = engine.stack_failures("s").await.unwrap().into_iter().map(|f| f.resource).collect();
    assert_eq!(listed, ["web1_deploy", "web2_deploy", "group/b"]);

    engine.update_stack("s", StackRequest { existing: true, ..StackRequest::default() }).await.unwrap();
    for server in ["web1", "web2", "web4"] {
        let entry = deployments(&engine, server).await[0].clone();
        assert_eq!(input(&entry, "deploy_action"), "CREATE", "{server} is replaced: {entry}");
        answer(&engine, server, json!({"deploy_status_code": 0})).await;
    }
    assert_ne!(deployments(&engine, "web1").await[0]["id"], web1_before, "a new run");
    assert_eq!(deployments(&engine, "web3").await[0]["id"], web3_before, "the healthy one ran nothing");
    assert_eq!(status(&engine, "s").await, "UPDATE_COMPLETE");
    assert!(engine.stack_failures("s").await.unwrap().is_empty());
}

#[tokio::test]
async fn a_mark_can_be_taken_back_and_bad_marks_are_refused_changing_nothing() {
    let (_dir, engine) = created_with_failures().await;
    engine.mark_unhealthy("s", "group/a", None, false).await.unwrap();
    let marked = reason_of(&engine, "group/a").await;
    assert_eq!(marked, ("CHECK_FAILED".into(), "state changed by resource mark unhealthy API".into()));
    engine.mark_unhealthy("s", "group/a", None, true).await.unwrap();
    assert_eq!(reason_of(&engine, "group/a").await.0, "CREATE_COMPLETE", "its status before the mark");

    let refused = engine.mark_unhealthy("s", "config", None, false).await.unwrap_err();
    assert!(refused.to_string().contains("only a deployment"), "{refused}");
    let missing = engine.mark_unhealthy("s", "nosuch", None, false).await.unwrap_err();
    assert!(matches!(missing, ServiceError::NotFound { .. }), "{missing:?}");
    engine.update_stack("s", StackRequest { existing: true, ..StackRequest::default() }).await.unwrap();
    let busy = engine.mark_unhealthy("s", "web1_deploy", None, false).await.unwrap_err();
    assert!(matches!(busy, ServiceError::InUse { .. }), "{busy:?}");
    assert_eq!(
        reason_of(&engine, "web1_deploy").await.0,
        "UPDATE_COMPLETE",
        "not marked: the update left it unchanged"
    );
}

#[tokio::test]
async fn a_timed_out_stack_names_the_deployments_still_running() {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine_at(&dir.path().join("shim.db"));
    register(&engine, &["web1", "web2", "web3", "web4"]).await;
    let timed = StackRequest { timeout_secs: Some(60), ..request("s", TEMPLATE, &[]) };
    engine.create_stack(timed).await.unwrap();
    answer(&engine, "web1", json!({"deploy_status_code": 0})).await;
    answer(&engine, "web3", json!({"deploy_status_code": 0})).await;
    engine
        .transact(|ctx| {
            ctx.now += 61_000;
            sweeper::sweep(ctx)
        })
        .await
        .unwrap();
    let summary = engine.show_stack("s").await.unwrap().summary;
    assert_eq!(summary.status, "CREATE_FAILED");
    assert_eq!(
        summary.status_reason,
        "Timed out: stack CREATE did not complete in time; still in progress: web2_deploy on web2, group/b on web4"
    );
}
