//! Incremental document rendering: `render_changed` copies the entries it was not told about
//! from the previous body (it reads only the changed ones), and through a series of publishes,
//! updates, removals and a stack delete the engine's incrementally rendered documents stay
//! byte for byte what a full render of the store gives (a restarted engine's). Helpers:
//! `tests.rs`.

use serde_json::{Value, json};

use super::context::Changes;
use super::document::{render_changed, render_full};
use super::secrets::TokenKey;
use super::tests::{deployments, engine_at, input, register, request, signal_token};
use crate::model::Service;
use crate::store::{
    Action, EntryRow, EntryText, NodeRecord, NodeRow, NodeState, Rollback, ServerRow, SqliteStore, StackRow, State,
    Store,
};

fn entry(node: &str, sort_key: &str, text: &str) -> EntryRow {
    EntryRow {
        server: "web1".into(),
        stack: "app".into(),
        node: node.into(),
        sort_key: sort_key.into(),
        entry: json!({"name": node, "text": text}),
        tokens: Vec::new(),
    }
}

fn stack_row() -> StackRow {
    StackRow {
        id: "id".into(),
        name: "app".into(),
        action: Action::Create,
        state: State::InProgress,
        status_reason: String::new(),
        parameters: json!({}),
        hidden_parameters: Vec::new(),
        generation: 1,
        pending: 0,
        deadline: None,
        created_at: 1,
        updated_at: 1,
        evaluated_bytes: 0,
        resource_count: 0,
        rollback: Rollback::Disabled,
    }
}

fn server_row() -> ServerRow {
    ServerRow {
        name: "web1".into(),
        token_hash: "hash".into(),
        created_at: 1,
        metadata_version: 0,
        metadata_body: String::new(),
        published_at: 0,
        last_seen: None,
        addresses: json!([]),
    }
}

fn node_row(name: &str) -> NodeRow {
    NodeRow {
        stack: "app".into(),
        name: name.into(),
        resource_type: "OS::Heat::SoftwareDeployment".into(),
        generation: 1,
        action: Action::Create,
        state: NodeState::Init,
        status_reason: String::new(),
        remaining: 0,
        definition: json!({}).into(),
        attributes: json!({}).into(),
        record: NodeRecord::default(),
        derived_config_id: None,
        signal_token_hash: None,
        server: None,
        updated_at: 1,
    }
}

fn text(node: &str, sort_key: &str, text: &str) -> EntryText {
    EntryText {
        sort_key: sort_key.into(),
        stack: "app".into(),
        node: node.into(),
        entry: json!({"name": node, "text": text}).to_string(),
        tokens: Vec::new(),
    }
}

#[test]
fn only_the_changed_entries_are_rendered_the_rest_is_copied() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(&dir.path().join("shim.db")).unwrap();
    let key = TokenKey::from_secret(b"test key");
    let (before, after) = store
        .transaction(|tx| {
            tx.insert_server(&server_row())?;
            tx.insert_stack(&stack_row(), "{}")?;
            for (node, sort_key) in [("a", "2"), ("b", "4"), ("c", "6"), ("e", "8")] {
                tx.insert_node(&node_row(node))?;
                tx.put_entry(&entry(node, sort_key, "old"))?;
            }
            let row = tx.server("web1")?.unwrap();
            let before = render_full(tx, &key, "http://shim", &row).unwrap();
            // a's stored text changes unannounced: what is not among the changes is copied.
            tx.put_entry(&entry("a", "2", "unannounced"))?;
            // b moves before a, c gets new text, d is added, e is removed.
            let mut changes = Changes::new();
            for (node, sort_key) in [("b", "1"), ("c", "6"), ("d", "5")] {
                changes.insert(("app".into(), node.into()), Some(text(node, sort_key, "new")));
            }
            changes.insert(("app".into(), "e".into()), None);
            let after = render_changed(&key, "http://shim", &row, &before, &changes);
            Ok::<_, crate::store::StoreError>((before, after))
        })
        .unwrap();
    let names = |body: &str| -> Vec<(String, String)> {
        let parsed: Value = serde_json::from_str(body).unwrap();
        parsed["deployments"]
            .as_array()
            .unwrap()
            .iter()
            .map(|entry| (entry["name"].as_str().unwrap().into(), entry["text"].as_str().unwrap().into()))
            .collect()
    };
    let pair = |name: &str, text: &str| (name.to_string(), text.to_string());
    assert_eq!(names(&before.document.body), [pair("a", "old"), pair("b", "old"), pair("c", "old"), pair("e", "old")]);
    assert_eq!(
        names(&after.document.body),
        [pair("b", "new"), pair("a", "old"), pair("d", "new"), pair("c", "new")],
        "changed entries rendered and placed by sort key, e gone, a copied from the previous body"
    );
}

const STACK: &str = r##"
heat_template_version: 2018-08-31
parameters:
  message: {type: string, default: one}
  add_extra: {type: boolean, default: true}
conditions:
  with_extra: {get_param: add_extra}
resources:
  config:
    type: OS::Heat::SoftwareConfig
    properties:
      group: script
      config: {str_replace: {template: "#!/bin/sh\necho MESSAGE\n", params: {MESSAGE: {get_param: message}}}}
  first:
    type: OS::Heat::SoftwareDeployment
    properties: {config: {get_resource: config}, server: web1, name: "20_first"}
  second:
    type: OS::Heat::SoftwareDeployment
    depends_on: first
    properties: {config: {get_resource: config}, server: web1, name: "10_second"}
  extra:
    type: OS::Heat::SoftwareDeployment
    condition: with_extra
    properties: {config: {get_resource: config}, server: web1, name: "15_extra", actions: [CREATE, UPDATE, DELETE]}
"##;

/// The document `engine` serves for web1 equals what a restarted engine renders in full.
async fn assert_same_as_full_render(engine: &super::transact::Engine<SqliteStore>, path: &std::path::Path, step: &str) {
    let served = engine.metadata("web1").await.unwrap();
    let fresh = engine_at(path).metadata("web1").await.unwrap();
    assert_eq!(served.version, fresh.version, "{step}");
    assert_eq!(served.body, fresh.body, "{step}: the incremental document is the full render");
}

async fn signal_everything(engine: &super::transact::Engine<SqliteStore>) {
    for published in deployments(engine, "web1").await {
        engine.deployment_signal(&signal_token(&published), json!({"deploy_status_code": 0}), None).await.unwrap();
    }
}

#[tokio::test]
async fn incremental_documents_equal_full_renders_through_a_stacks_life() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("shim.db");
    let engine = engine_at(&path);
    register(&engine, &["web1"]).await;
    engine.create_stack(request("a", STACK, &[])).await.unwrap();
    assert_same_as_full_render(&engine, &path, "create a").await;
    engine.create_stack(request("b", STACK, &[("message", "bee")])).await.unwrap();
    assert_same_as_full_render(&engine, &path, "create b").await;
    signal_everything(&engine).await;
    assert_same_as_full_render(&engine, &path, "signals release second").await;
    signal_everything(&engine).await;
    engine.update_stack("a", request("a", STACK, &[("message", "two"), ("add_extra", "false")])).await.unwrap();
    assert_same_as_full_render(&engine, &path, "update a: new config, extra's DELETE").await;
    signal_everything(&engine).await;
    assert_same_as_full_render(&engine, &path, "update a done").await;
    // b's entries, by what only they hold (not "bee" anywhere: a random signal token's hex
    // may spell it).
    let of_b = |entry: &Value| {
        entry["config"].as_str().is_some_and(|config| config.contains("echo bee"))
            || input(entry, "deploy_stack_id").as_str().is_some_and(|stack| stack.starts_with("b/"))
    };
    assert!(deployments(&engine, "web1").await.iter().any(of_b), "b's entries, before the delete");
    engine.delete_stack("b").await.unwrap();
    assert_same_as_full_render(&engine, &path, "delete b").await;
    signal_everything(&engine).await;
    assert_same_as_full_render(&engine, &path, "delete b done").await;
    let left: Vec<Value> = deployments(&engine, "web1").await.into_iter().filter(of_b).collect();
    assert!(left.is_empty(), "b's entries are gone: {left:?}");
}

#[tokio::test]
async fn a_document_another_process_moved_on_is_rendered_in_full() {
    // Two engines on one database, as replicas are: this one's cached document is one version
    // behind once the other publishes, and must not be the base of its next render.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("shim.db");
    let engine = engine_at(&path);
    register(&engine, &["web1"]).await;
    engine.create_stack(request("a", STACK, &[])).await.unwrap();
    engine.create_stack(request("c", STACK, &[])).await.unwrap();
    let other = engine_at(&path);
    other.create_stack(request("b", STACK, &[("message", "bee")])).await.unwrap();
    // One change (a's second deployment, released by a's first) on a document of several
    // entries: what this engine holds in memory is the version before the other's create.
    let first = deployments(&other, "web1")
        .await
        .into_iter()
        .find(|entry| {
            entry["name"] == "20_first" && input(entry, "deploy_stack_id").as_str().unwrap().starts_with("a/")
        })
        .unwrap();
    engine.deployment_signal(&signal_token(&first), json!({"deploy_status_code": 0}), None).await.unwrap();
    assert_same_as_full_render(&engine, &path, "after the other engine's create").await;
    assert!(engine.metadata("web1").await.unwrap().body.contains("echo bee"), "the other engine's entries are served");
}

#[tokio::test]
async fn a_server_added_again_under_its_name_does_not_build_on_the_old_ones_document() {
    // Another engine (a replica) holds the old web1's document at the version the new web1
    // reaches later: same name, same version, other entries.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("shim.db");
    let engine = engine_at(&path);
    let replica = engine_at(&path);
    register(&engine, &["web1"]).await;
    for stack in ["old1", "old2", "old3", "old4"] {
        engine.create_stack(request(stack, STACK, &[("add_extra", "false")])).await.unwrap();
    }
    let old = replica.metadata("web1").await.unwrap();
    for stack in ["old1", "old2", "old3", "old4"] {
        engine.delete_stack(stack).await.unwrap();
    }
    engine.remove_server("web1").await.unwrap();
    register(&engine, &["web1"]).await;
    for stack in ["new1", "new2", "new3", "new4"] {
        engine.create_stack(request(stack, STACK, &[("add_extra", "false")])).await.unwrap();
    }
    let new = engine.metadata("web1").await.unwrap();
    assert_eq!(new.version, old.version, "the set-up: the new server is at the old one's version");
    let first = deployments(&engine, "web1").await.into_iter().find(|entry| entry["name"] == "20_first").unwrap();
    replica.deployment_signal(&signal_token(&first), json!({"deploy_status_code": 0}), None).await.unwrap();
    assert_same_as_full_render(&replica, &path, "a change made through the replica").await;
    assert!(!replica.metadata("web1").await.unwrap().body.contains("old1/"), "nothing of the old server's stacks");
}
