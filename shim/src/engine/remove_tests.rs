//! `Service::remove_server` on the real engine over a SQLite file: the token is dead at once
//! and after a restart, watchers of the server's document are released, the name can be
//! registered afresh, and a server that a stack deploys to (published, or not yet activated,
//! alone or in a group) is refused until the stack is gone. Helpers come from `tests.rs`.

use std::time::Duration;

use serde_json::json;

use super::tests::{deployments, engine_at, register, request, signal_token};
use crate::model::{AddServer, Service, ServiceError};

/// `early` is published to vm1 at once; `late` (vm2) and the group's member (vm3) wait for the
/// wait condition, so only their definitions name their servers.
const TEMPLATE: &str = r##"
heat_template_version: 2018-08-31
parameters:
  late_server: {type: string, default: vm2}
resources:
  handle: {type: OS::Heat::WaitConditionHandle}
  wait:
    type: OS::Heat::WaitCondition
    properties: {handle: {get_resource: handle}, count: 1, timeout: 600}
  config:
    type: OS::Heat::SoftwareConfig
    properties: {group: script, config: "#!/bin/sh\n"}
  early:
    type: OS::Heat::SoftwareDeployment
    properties: {config: {get_resource: config}, server: vm1, actions: [CREATE]}
  late:
    type: OS::Heat::SoftwareDeployment
    depends_on: wait
    properties: {config: {get_resource: config}, server: {get_param: late_server}, actions: [CREATE]}
  group:
    type: OS::Heat::SoftwareDeploymentGroup
    depends_on: wait
    properties: {config: {get_resource: config}, servers: {a: vm3}, actions: [CREATE]}
"##;

fn in_use_message(result: Result<(), ServiceError>) -> String {
    match result {
        Err(ServiceError::InUse { message }) => message,
        other => panic!("expected InUse, got {other:?}"),
    }
}

#[tokio::test]
async fn removed_server_token_is_dead_at_once_and_after_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("shim.db");
    let engine = engine_at(&path);
    let tokens = register(&engine, &["vm1", "vm2"]).await;
    assert_eq!(engine.server_for_token(&tokens[0]).await.unwrap().as_deref(), Some("vm1"));
    // An agent's held long-poll: a subscription to the cached document.
    let mut watcher = engine.watch_metadata("vm1").await.unwrap();

    engine.remove_server("vm1").await.unwrap();
    assert_eq!(engine.server_for_token(&tokens[0]).await.unwrap(), None, "the token is dead at once");
    let released = tokio::time::timeout(Duration::from_secs(10), watcher.changed()).await;
    assert!(released.expect("the watcher is released, not left hanging").is_err(), "no new version, a close");
    assert!(matches!(engine.metadata("vm1").await, Err(ServiceError::NotFound { .. })));
    assert!(matches!(engine.remove_server("vm1").await, Err(ServiceError::NotFound { .. })));
    assert!(matches!(engine.remove_server("never").await, Err(ServiceError::NotFound { .. })));
    let names: Vec<String> = engine.list_servers().await.unwrap().into_iter().map(|server| server.name).collect();
    assert_eq!(names, ["vm2"]);

    drop(engine);
    let engine = engine_at(&path);
    assert_eq!(engine.server_for_token(&tokens[0]).await.unwrap(), None, "still dead after a restart");
    assert_eq!(engine.server_for_token(&tokens[1]).await.unwrap().as_deref(), Some("vm2"));
    let again = engine.add_server(AddServer { name: "vm1".into(), ..AddServer::default() }).await.unwrap();
    assert_ne!(again.token, tokens[0]);
    assert_eq!(engine.server_for_token(&again.token).await.unwrap().as_deref(), Some("vm1"));
    assert_eq!(engine.server_for_token(&tokens[0]).await.unwrap(), None, "a new registration revives nothing");
    assert!(deployments(&engine, "vm1").await.is_empty());
}

#[tokio::test]
async fn server_a_stack_deploys_to_is_refused_until_the_stack_is_gone() {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine_at(&dir.path().join("shim.db"));
    let tokens = register(&engine, &["vm1", "vm2", "vm3", "spare"]).await;
    engine.create_stack(request("app", TEMPLATE, &[])).await.unwrap();
    let early = deployments(&engine, "vm1").await;
    assert_eq!(early.len(), 1);
    assert!(deployments(&engine, "vm2").await.is_empty() && deployments(&engine, "vm3").await.is_empty());

    let cases = [("vm1", "published"), ("vm2", "not yet activated"), ("vm3", "a group member to be")];
    for ((server, why), token) in cases.into_iter().zip(&tokens) {
        let message = in_use_message(engine.remove_server(server).await);
        assert!(message.contains(&format!("server {server} ")) && message.contains("app"), "{why}: {message}");
        assert!(engine.server_for_token(token).await.unwrap().is_some(), "{why}: nothing was removed");
    }
    engine.remove_server("spare").await.unwrap();

    engine.deployment_signal(&signal_token(&early[0]), json!({"deploy_status_code": 0}), None).await.unwrap();
    assert!(in_use_message(engine.remove_server("vm1").await).contains("app"), "a finished deployment counts");
    engine.delete_stack("app").await.unwrap();
    assert!(matches!(engine.show_stack("app").await, Err(ServiceError::NotFound { .. })), "no DELETE actions");
    for server in ["vm1", "vm2", "vm3"] {
        engine.remove_server(server).await.unwrap();
    }
    assert!(engine.list_servers().await.unwrap().is_empty());
}
