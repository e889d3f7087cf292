//! Update policies and deletion policies on the real engine: a SoftwareDeploymentGroup's
//! `batch_create` and `rolling_update` batches (order, sizes, the pause between batches kept as a
//! stored deadline that survives a restart, a failure stopping later batches) and
//! `deletion_policy: Retain` skipping the DELETE action. Time moves by running the sweeper with
//! a later `now`, never by sleeping. Helpers: `tests.rs`.

use serde_json::{Value, json};

use super::tests::{deployments, engine_at, input, register, request, signal_token, status, sweep_after};
use super::transact::Engine;
use crate::model::Service;
use crate::store::SqliteStore;

const GROUP: &str = r##"
heat_template_version: 2018-08-31
parameters:
  message: {type: string, default: one}
  servers: {type: json, default: {a: web1, b: web2, c: web3}}
resources:
  config:
    type: OS::Heat::SoftwareConfig
    properties:
      group: script
      config: {str_replace: {template: "#!/bin/sh\necho MESSAGE\n", params: {MESSAGE: {get_param: message}}}}
  group:
    type: OS::Heat::SoftwareDeploymentGroup
    update_policy: POLICY
    properties: {config: {get_resource: config}, servers: {get_param: servers}}
"##;

fn group_template(policy: &str) -> String {
    GROUP.replace("POLICY", policy)
}

/// The one deployment published to `server`, if any: (its action, its signal token).
async fn published(engine: &Engine<SqliteStore>, server: &str) -> Option<(String, String)> {
    let entries = deployments(engine, server).await;
    assert!(entries.len() <= 1, "{server}: {entries:?}");
    let entry = entries.first()?;
    Some((input(entry, "deploy_action").as_str().unwrap_or_default().to_string(), signal_token(entry)))
}

async fn signal(engine: &Engine<SqliteStore>, server: &str, code: i64) {
    let (_, token) = published(engine, server).await.unwrap_or_else(|| panic!("{server} has a deployment"));
    engine.deployment_signal(&token, json!({"deploy_status_code": code}), None).await.unwrap();
}

async fn actions(engine: &Engine<SqliteStore>) -> Vec<Option<String>> {
    let mut found = Vec::new();
    for server in ["web1", "web2", "web3"] {
        found.push(published(engine, server).await.map(|(action, _)| action));
    }
    found
}

fn some(action: &str) -> Option<String> {
    Some(action.to_string())
}

#[tokio::test]
async fn batch_create_releases_one_batch_at_a_time_after_its_pause() {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine_at(&dir.path().join("shim.db"));
    register(&engine, &["web1", "web2", "web3"]).await;
    let template = group_template("{batch_create: {max_batch_size: 2, pause_time: 30}}");
    engine.create_stack(request("s", &template, &[])).await.unwrap();
    assert_eq!(actions(&engine).await, vec![some("CREATE"), some("CREATE"), None], "the first batch: a and b");
    signal(&engine, "web1", 0).await;
    assert_eq!(actions(&engine).await[2], None, "the batch is not complete yet");
    signal(&engine, "web2", 0).await;
    assert_eq!(sweep_after(&engine, 0).await, 0, "the pause has not ended");
    assert_eq!(actions(&engine).await[2], None, "never before the pause ends");
    assert_eq!(status(&engine, "s").await, "CREATE_IN_PROGRESS");
    assert_eq!(sweep_after(&engine, 31).await, 1);
    assert_eq!(actions(&engine).await[2], some("CREATE"), "the second batch: c");
    assert_eq!(sweep_after(&engine, 100).await, 0, "released once");
    signal(&engine, "web3", 0).await;
    assert_eq!(status(&engine, "s").await, "CREATE_COMPLETE", "no pause after the last batch");
}

#[tokio::test]
async fn a_failed_member_stops_the_later_batches() {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine_at(&dir.path().join("shim.db"));
    register(&engine, &["web1", "web2", "web3"]).await;
    let template = group_template("{batch_create: {}}");
    engine.create_stack(request("s", &template, &[])).await.unwrap();
    assert_eq!(actions(&engine).await, vec![some("CREATE"), None, None], "the default batch size is 1");
    signal(&engine, "web1", 3).await;
    assert_eq!(status(&engine, "s").await, "CREATE_FAILED");
    sweep_after(&engine, 60).await;
    assert_eq!(actions(&engine).await, vec![some("CREATE"), None, None], "no later batch is released");
}

/// Creates the group (no policy on create: every member at once) and completes it.
async fn created(engine: &Engine<SqliteStore>, policy: &str) {
    register(engine, &["web1", "web2", "web3"]).await;
    engine.create_stack(request("s", &group_template(policy), &[])).await.unwrap();
    for server in ["web1", "web2", "web3"] {
        signal(engine, server, 0).await;
    }
    assert_eq!(status(engine, "s").await, "CREATE_COMPLETE");
}

#[tokio::test]
async fn rolling_update_goes_highest_index_first_and_survives_a_restart_mid_pause() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("shim.db");
    let policy = "{rolling_update: {max_batch_size: 1, pause_time: 20}}";
    let engine = engine_at(&path);
    created(&engine, policy).await;
    engine.update_stack("s", request("s", &group_template(policy), &[("message", "two")])).await.unwrap();
    let create = some("CREATE");
    assert_eq!(actions(&engine).await, vec![create.clone(), create.clone(), some("UPDATE")], "c first");
    signal(&engine, "web3", 0).await;
    drop(engine);
    // A restart during the pause: the batch state and the pause are in the store.
    let engine = engine_at(&path);
    assert_eq!(sweep_after(&engine, 5).await, 0);
    assert_eq!(actions(&engine).await[1], create, "b waits for the pause");
    assert_eq!(sweep_after(&engine, 21).await, 1);
    assert_eq!(actions(&engine).await, vec![create, some("UPDATE"), some("UPDATE")], "then b");
    signal(&engine, "web2", 0).await;
    sweep_after(&engine, 21).await;
    assert_eq!(actions(&engine).await[0], some("UPDATE"), "then a");
    signal(&engine, "web1", 0).await;
    assert_eq!(status(&engine, "s").await, "UPDATE_COMPLETE");

    // An update that changes no member's definition: nothing runs, no pause.
    engine.update_stack("s", request("s", &group_template(policy), &[("message", "two")])).await.unwrap();
    assert_eq!(status(&engine, "s").await, "UPDATE_COMPLETE");
}

#[tokio::test]
async fn rolling_update_creates_new_members_first_and_removes_the_leaving_ones_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine_at(&dir.path().join("shim.db"));
    let policy = "{rolling_update: {max_batch_size: 1, pause_time: 0}}";
    register(&engine, &["web4"]).await;
    created(&engine, policy).await;
    let servers = r#"{"a": "web1", "b": "web2", "d": "web4"}"#;
    let update = request("s", &group_template(policy), &[("message", "two"), ("servers", servers)]);
    engine.update_stack("s", update).await.unwrap();
    assert_eq!(published(&engine, "web3").await, None, "c left: removed in the first batch");
    assert_eq!(published(&engine, "web4").await.map(|(action, _)| action), some("CREATE"), "d is created first");
    assert_eq!(actions(&engine).await[..2], [some("CREATE"), some("CREATE")], "a and b wait");
    signal(&engine, "web4", 0).await;
    assert_eq!(actions(&engine).await[..2], [some("CREATE"), some("UPDATE")], "no pause: b at once");
    signal(&engine, "web2", 0).await;
    signal(&engine, "web1", 0).await;
    assert_eq!(status(&engine, "s").await, "UPDATE_COMPLETE");
}

#[tokio::test]
async fn pauses_that_reach_the_stack_timeout_fail_the_update_as_heat() {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine_at(&dir.path().join("shim.db"));
    let policy = "{rolling_update: {pause_time: 1800}}";
    created(&engine, policy).await;
    engine.update_stack("s", request("s", &group_template(policy), &[("message", "two")])).await.unwrap();
    let detail = engine.show_stack("s").await.unwrap();
    assert_eq!(detail.summary.status, "UPDATE_FAILED");
    let reason = &detail.summary.status_reason;
    assert!(reason.contains("The current update policy will result in stack update timeout."), "{reason}");
    assert_eq!(actions(&engine).await, vec![some("CREATE"); 3], "nothing ran");
}

const RETAINED: &str = r##"
heat_template_version: 2018-08-31
parameters:
  policy: {type: string, default: retain}
resources:
  config:
    type: OS::Heat::SoftwareConfig
    properties: {group: script, config: "#!/bin/sh\n"}
  kept:
    type: OS::Heat::SoftwareDeployment
    deletion_policy: POLICY
    properties: {config: {get_resource: config}, server: web1, actions: [CREATE, DELETE]}
  group:
    type: OS::Heat::SoftwareDeploymentGroup
    deletion_policy: POLICY
    properties: {config: {get_resource: config}, servers: {a: web2}, actions: [CREATE, DELETE]}
"##;

#[tokio::test]
async fn retain_runs_no_delete_action_on_removal_or_stack_delete() {
    for (policy, template) in [("Retain", "update"), ("retain", "delete"), ("{get_param: policy}", "delete")] {
        let dir = tempfile::tempdir().unwrap();
        let engine = engine_at(&dir.path().join("shim.db"));
        register(&engine, &["web1", "web2"]).await;
        engine.create_stack(request("s", &RETAINED.replace("POLICY", policy), &[])).await.unwrap();
        signal(&engine, "web1", 0).await;
        signal(&engine, "web2", 0).await;
        assert_eq!(status(&engine, "s").await, "CREATE_COMPLETE");
        if template == "update" {
            let only_config: String = RETAINED.lines().take(8).collect::<Vec<_>>().join("\n");
            engine.update_stack("s", request("s", &only_config, &[])).await.unwrap();
            assert_eq!(status(&engine, "s").await, "UPDATE_COMPLETE", "{policy}: nothing to wait for");
        } else {
            engine.delete_stack("s").await.unwrap();
            assert!(engine.show_stack("s").await.is_err(), "{policy}: the stack is gone at once");
        }
        for server in ["web1", "web2"] {
            let entries: Vec<Value> = deployments(&engine, server).await;
            assert!(entries.is_empty(), "{policy} {template}: no DELETE published on {server}: {entries:?}");
        }
    }
}

#[tokio::test]
async fn an_update_during_a_pause_supersedes_the_remaining_batches() {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine_at(&dir.path().join("shim.db"));
    register(&engine, &["web1", "web2", "web3"]).await;
    let template = group_template("{batch_create: {pause_time: 30}, rolling_update: {pause_time: 30}}");
    engine.create_stack(request("s", &template, &[])).await.unwrap();
    signal(&engine, "web1", 0).await;
    assert_eq!(actions(&engine).await, vec![some("CREATE"), None, None], "pausing after a");
    // The group never completed: the update creates it again, batch by batch, from a.
    engine.update_stack("s", request("s", &template, &[("message", "two")])).await.unwrap();
    assert_eq!(actions(&engine).await, vec![some("UPDATE"), None, None], "a runs the new config first");
    assert_eq!(sweep_after(&engine, 31).await, 1, "the old pause falls due");
    assert_eq!(actions(&engine).await, vec![some("UPDATE"), None, None], "and releases nothing");
    signal(&engine, "web1", 0).await;
    assert_eq!(sweep_after(&engine, 31).await, 1);
    assert_eq!(actions(&engine).await[1], some("CREATE"), "b after the new pause");
}

/// A member node written before `applied` kept the config's digest holds the whole config
/// there: it still counts as unchanged, so a rolling update completes it in the first batch
/// instead of giving it a batch (and a pause) of its own.
#[tokio::test]
async fn members_stored_with_the_whole_config_still_count_as_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine_at(&dir.path().join("shim.db"));
    let policy = "{rolling_update: {max_batch_size: 1, pause_time: 20}}";
    register(&engine, &["web4"]).await;
    created(&engine, policy).await;
    engine
        .transact(|ctx| {
            let config = ctx.tx.node("s", "config")?.and_then(|node| node.record.definition).expect("config");
            for member in ["group/a", "group/b", "group/c"] {
                let mut node = ctx.tx.node("s", member)?.expect("member");
                assert!(!node.definition.to_string().contains("echo one"), "{member} keeps no copy of the script");
                let applied = node.definition["applied"].as_object_mut().expect("applied");
                assert!(applied.remove("config_digest").is_some(), "{member}: {applied:?}");
                applied.insert("config".into(), config.clone());
                ctx.tx.update_node(&node)?;
            }
            Ok(())
        })
        .await
        .unwrap();
    // c moves to web4: it alone changes; a and b complete at once, unchanged.
    let servers = r#"{"a": "web1", "b": "web2", "c": "web4"}"#;
    engine.update_stack("s", request("s", &group_template(policy), &[("servers", servers)])).await.unwrap();
    let detail = engine.show_stack("s").await.unwrap();
    let member = |name: &str| {
        let resource = detail.resources.iter().find(|resource| resource.name == name).expect(name);
        (resource.status.clone(), resource.status_reason.clone())
    };
    for name in ["group/a", "group/b"] {
        assert_eq!(member(name), ("UPDATE_COMPLETE".to_string(), "unchanged".to_string()), "{name}");
    }
    assert_eq!(actions(&engine).await[..2], [some("CREATE"), some("CREATE")], "a and b run nothing");
    assert_eq!(published(&engine, "web4").await.map(|(action, _)| action), some("CREATE"), "c runs on web4");
}
