//! A deployment group larger than one transaction's chunk (`EngineConfig::release_chunk`): the
//! create commits the first chunk of members, the rest wait in the group's record behind a
//! deadline due at once, and each sweep writes and publishes the next chunk. The group completes
//! only when every member did; a restart, an update or a delete in between neither loses nor
//! doubles a member. Helpers: `tests.rs`.

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};

use super::secrets::TokenKey;
use super::sweeper;
use super::tests::{deployments, register, request, signal_token, status};
use super::transact::{Engine, EngineConfig};
use crate::model::Service;
use crate::store::SqliteStore;

const SERVERS: [&str; 5] = ["web1", "web2", "web3", "web4", "web5"];

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
    properties:
      config: {get_resource: config}
      servers: {a: web1, b: web2, c: web3, d: web4, e: web5}
outputs:
  codes: {value: {get_attr: [group, deploy_status_codes]}}
"##;

/// An engine writing two members per transaction.
fn chunked_engine(path: &Path) -> Engine<SqliteStore> {
    let store = SqliteStore::open(path).unwrap();
    let config = EngineConfig { release_chunk: 2, ..EngineConfig::new("http://127.0.0.1:9") };
    Engine::new(store, TokenKey::from_secret(b"test key"), config)
}

async fn sweep(engine: &Engine<SqliteStore>) -> usize {
    engine.transact(sweeper::sweep).await.unwrap()
}

/// How many of the five servers have a deployment; every one has at most one.
async fn published(engine: &Engine<SqliteStore>) -> usize {
    let mut count = 0;
    for server in SERVERS {
        let entries = deployments(engine, server).await;
        assert!(entries.len() <= 1, "{server} got one deployment at most: {entries:?}");
        count += entries.len();
    }
    count
}

/// The signal tokens of every published deployment.
async fn tokens(engine: &Engine<SqliteStore>) -> Vec<String> {
    let mut found = Vec::new();
    for server in SERVERS {
        found.extend(deployments(engine, server).await.iter().map(signal_token));
    }
    found
}

async fn signal_all(engine: &Engine<SqliteStore>) {
    for server in SERVERS {
        for entry in deployments(engine, server).await {
            engine.deployment_signal(&signal_token(&entry), json!({"deploy_status_code": 0}), None).await.unwrap();
        }
    }
}

#[tokio::test]
async fn a_group_larger_than_a_chunk_is_published_a_chunk_per_transaction() {
    let dir = tempfile::tempdir().unwrap();
    let engine = chunked_engine(&dir.path().join("shim.db"));
    register(&engine, &SERVERS).await;
    engine.create_stack(request("s", GROUP, &[])).await.unwrap();
    assert_eq!(published(&engine).await, 2, "the create commits the first chunk only");
    let first_chunk = tokens(&engine).await;
    // Members of the first chunk finishing early must not complete the group.
    signal_all(&engine).await;
    assert_eq!(status(&engine, "s").await, "CREATE_IN_PROGRESS");
    assert_eq!(sweep(&engine).await, 1, "the group's continuation is a deadline due now");
    assert_eq!(published(&engine).await, 4);
    assert_eq!(sweep(&engine).await, 1);
    assert_eq!(published(&engine).await, 5);
    assert_eq!(sweep(&engine).await, 0, "nothing is queued any more");
    let all = tokens(&engine).await;
    assert!(first_chunk.iter().all(|token| all.contains(token)), "no member was published twice");
    signal_all(&engine).await;
    assert_eq!(status(&engine, "s").await, "CREATE_COMPLETE");
    let outputs = engine.show_stack("s").await.unwrap().outputs;
    let codes = outputs.iter().find(|output| output.name == "codes").map(|output| output.value.clone());
    assert_eq!(codes, Some(json!({"a": 0, "b": 0, "c": 0, "d": 0, "e": 0})), "every member is in the group's maps");
}

#[tokio::test]
async fn a_commit_that_queues_members_wakes_the_sweeper_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let engine = chunked_engine(&dir.path().join("shim.db"));
    register(&engine, &SERVERS).await;
    let woken = |engine: &Engine<SqliteStore>| {
        let inner = std::sync::Arc::clone(&engine.inner);
        async move { tokio::time::timeout(Duration::from_millis(50), inner.continuation.notified()).await.is_ok() }
    };
    let small = GROUP.replace("{a: web1, b: web2, c: web3, d: web4, e: web5}", "{a: web1}");
    engine.create_stack(request("small", &small, &[])).await.unwrap();
    assert!(!woken(&engine).await, "a group within one chunk queues nothing");
    engine.create_stack(request("s", GROUP, &[])).await.unwrap();
    assert!(woken(&engine).await, "queued members are released without waiting for the sweeper's tick");
}

#[tokio::test]
async fn queued_members_are_released_after_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("shim.db");
    let first = chunked_engine(&path);
    register(&first, &SERVERS).await;
    first.create_stack(request("s", GROUP, &[])).await.unwrap();
    let before: Vec<Value> = deployments(&first, "web1").await;
    drop(first);
    let engine = chunked_engine(&path);
    while sweep(&engine).await > 0 {}
    assert_eq!(published(&engine).await, 5, "the restarted shim released the queued members");
    assert_eq!(deployments(&engine, "web1").await, before, "a member published before the restart is not republished");
    signal_all(&engine).await;
    assert_eq!(status(&engine, "s").await, "CREATE_COMPLETE");
}

#[tokio::test]
async fn an_update_while_members_are_queued_publishes_each_member_once_with_the_new_definition() {
    let dir = tempfile::tempdir().unwrap();
    let engine = chunked_engine(&dir.path().join("shim.db"));
    register(&engine, &SERVERS).await;
    engine.create_stack(request("s", GROUP, &[])).await.unwrap();
    engine.update_stack("s", request("s", GROUP, &[("message", "two")])).await.unwrap();
    while sweep(&engine).await > 0 {}
    assert_eq!(published(&engine).await, 5);
    for server in SERVERS {
        let config = deployments(&engine, server).await[0]["config"].as_str().unwrap_or_default().to_string();
        assert!(config.contains("echo two"), "{server} runs the updated config: {config:?}");
    }
    signal_all(&engine).await;
    assert_eq!(status(&engine, "s").await, "UPDATE_COMPLETE");
}

#[tokio::test]
async fn a_delete_while_members_are_queued_never_publishes_them() {
    let dir = tempfile::tempdir().unwrap();
    let engine = chunked_engine(&dir.path().join("shim.db"));
    register(&engine, &SERVERS).await;
    engine.create_stack(request("s", GROUP, &[])).await.unwrap();
    engine.delete_stack("s").await.unwrap();
    while sweep(&engine).await > 0 {}
    assert_eq!(published(&engine).await, 0, "the written members went with the stack, the queued never came");
    assert!(engine.show_stack("s").await.is_err(), "the stack is gone");
}

#[tokio::test]
async fn one_transaction_writes_one_chunk_whatever_the_number_of_groups() {
    let dir = tempfile::tempdir().unwrap();
    let engine = chunked_engine(&dir.path().join("shim.db"));
    register(&engine, &SERVERS).await;
    let two_groups = GROUP.replace(
        "outputs:",
        "  other:\n    type: OS::Heat::SoftwareDeploymentGroup\n    properties:\n      config: {get_resource: config}\n      servers: {x: web1, y: web2, z: web3}\noutputs:",
    );
    engine.create_stack(request("s", &two_groups, &[])).await.unwrap();
    let count = |entries: Vec<Vec<Value>>| entries.iter().map(Vec::len).sum::<usize>();
    let mut documents = Vec::new();
    for server in SERVERS {
        documents.push(deployments(&engine, server).await);
    }
    assert_eq!(count(documents), 2, "the two groups share the create's chunk of two");
    while sweep(&engine).await > 0 {}
    let mut documents = Vec::new();
    for server in SERVERS {
        documents.push(deployments(&engine, server).await);
    }
    assert_eq!(count(documents), 8, "every member of both groups in the end");
    for server in SERVERS {
        for entry in deployments(&engine, server).await {
            engine.deployment_signal(&signal_token(&entry), json!({"deploy_status_code": 0}), None).await.unwrap();
        }
    }
    assert_eq!(status(&engine, "s").await, "CREATE_COMPLETE");
}

#[tokio::test]
async fn an_update_of_a_released_group_updates_its_queued_members_in_place() {
    let dir = tempfile::tempdir().unwrap();
    let engine = chunked_engine(&dir.path().join("shim.db"));
    register(&engine, &SERVERS).await;
    engine.create_stack(request("s", GROUP, &[])).await.unwrap();
    while sweep(&engine).await > 0 {}
    signal_all(&engine).await;
    assert_eq!(status(&engine, "s").await, "CREATE_COMPLETE");
    engine.update_stack("s", request("s", GROUP, &[("message", "two")])).await.unwrap();
    while sweep(&engine).await > 0 {}
    for server in SERVERS {
        let published = deployments(&engine, server).await;
        assert_eq!(published.len(), 1, "{server}");
        assert_eq!(super::tests::input(&published[0], "deploy_action"), "UPDATE", "{server}: the member existed");
    }
    signal_all(&engine).await;
    assert_eq!(status(&engine, "s").await, "UPDATE_COMPLETE");
}

#[tokio::test]
async fn the_running_sweeper_releases_every_queued_member() {
    let dir = tempfile::tempdir().unwrap();
    let engine = chunked_engine(&dir.path().join("shim.db"));
    register(&engine, &SERVERS).await;
    let shutdown = tokio_util::sync::CancellationToken::new();
    let sweeper = tokio::spawn(sweeper::run(engine.clone(), shutdown.clone()));
    engine.create_stack(request("s", GROUP, &[])).await.unwrap();
    let mut published_now = published(&engine).await;
    for _ in 0..200 {
        if published_now == SERVERS.len() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
        published_now = published(&engine).await;
    }
    shutdown.cancel();
    sweeper.await.unwrap();
    assert_eq!(published_now, SERVERS.len(), "the sweeper drained the queue");
    signal_all(&engine).await;
    assert_eq!(status(&engine, "s").await, "CREATE_COMPLETE");
}
