//! DeployedServers the stack creates, as Heat's DeployedServer creates the server's identity: an
//! unregistered name is registered with a token its `os_collect_config` carries (rendered for
//! the admin only); nameless ResourceGroup members get Heat's generated names; a server
//! registered before is bound and left alone; deleting the stack, or an update removing the
//! server, revokes what the stack created and nothing else; a second stack sharing the server
//! takes it over. Helpers: `tests.rs`.

use std::collections::BTreeMap;

use serde_json::Value;

use super::tests::{deployments, engine_at, register, request, status};
use crate::engine::Engine;
use crate::model::{Service, ServiceError};
use crate::store::SqliteStore;

const TEMPLATE: &str = "heat_template_version: 2018-08-31
resources:
  created: {type: OS::Heat::DeployedServer, properties: {name: made1}}
  bound: {type: OS::Heat::DeployedServer, properties: {name: known1}}
  config:
    type: OS::Heat::SoftwareConfig
    properties: {group: script, config: echo}
  deploy:
    type: OS::Heat::SoftwareDeployment
    properties: {config: {get_resource: config}, server: {get_resource: created}, signal_transport: NO_SIGNAL}
outputs:
  made: {value: {get_attr: [created, os_collect_config]}}
  known: {value: {get_attr: [bound, os_collect_config]}}
";

const GROUP: &str = "heat_template_version: 2018-08-31
resources:
  configured_group:
    type: OS::Heat::ResourceGroup
    properties:
      count: 2
      resource_def: {type: OS::Heat::DeployedServer}
outputs:
  names: {value: {get_attr: [configured_group, name]}}
  settings: {value: {get_attr: [configured_group, os_collect_config]}}
";

async fn outputs(engine: &Engine<SqliteStore>, stack: &str) -> BTreeMap<String, Value> {
    let detail = engine.show_stack(stack).await.unwrap();
    detail.outputs.into_iter().map(|output| (output.name, output.value)).collect()
}

async fn server_names(engine: &Engine<SqliteStore>) -> Vec<String> {
    engine.list_servers().await.unwrap().into_iter().map(|server| server.name).collect()
}

/// The token in a created server's `os_collect_config` (`.../v1/metadata/<token>`).
fn token_of(settings: &Value) -> String {
    let url = settings["request"]["metadata_url"].as_str().unwrap();
    let token = url.strip_prefix("http://127.0.0.1:9/v1/metadata/").unwrap_or_else(|| panic!("{url}"));
    assert_eq!(token.len(), 64, "{url}");
    token.to_owned()
}

#[tokio::test]
async fn an_unregistered_deployed_server_is_registered_and_its_settings_carry_its_token() {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine_at(&dir.path().join("shim.db"));
    let known_token = register(&engine, &["known1"]).await.remove(0);
    engine.create_stack(request("s", TEMPLATE, &[])).await.unwrap();
    assert_eq!(status(&engine, "s").await, "CREATE_COMPLETE");
    assert_eq!(server_names(&engine).await, ["known1", "made1"]);
    let outputs = outputs(&engine, "s").await;
    let token = token_of(&outputs["made"]);
    assert_eq!(outputs["made"]["collectors"], serde_json::json!(["request", "local"]));
    assert_eq!(engine.server_for_token(&token).await.unwrap().as_deref(), Some("made1"));
    // The engine published to the new server's document, read with that token.
    assert_eq!(deployments(&engine, "made1").await.len(), 1);
    // The server registered before: bound, no credential, its token unchanged.
    assert_eq!(outputs["known"]["request"]["token_file"], "/etc/anneal/token");
    assert_eq!(engine.server_for_token(&known_token).await.unwrap().as_deref(), Some("known1"));
    // Nowhere else than the admin's output: the web view masks it, the stored row has a hash.
    let detail = engine.node_detail("s", "created").await.unwrap();
    assert_eq!(detail.attributes["os_collect_config"], "******");
    assert!(!serde_json::to_string(&detail).unwrap().contains(&token));
    // `server delete` of a server the stack uses is refused; the stack owns it.
    let refused = engine.remove_server("made1").await.unwrap_err();
    assert!(matches!(refused, ServiceError::Conflict { .. } | ServiceError::InUse { .. }), "{refused:?}");

    engine.delete_stack("s").await.unwrap();
    assert_eq!(server_names(&engine).await, ["known1"], "only what the stack created is revoked");
    assert_eq!(engine.server_for_token(&token).await.unwrap(), None);
    assert_eq!(engine.server_for_token(&known_token).await.unwrap().as_deref(), Some("known1"));
}

#[tokio::test]
async fn nameless_group_members_get_heats_generated_names() {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine_at(&dir.path().join("shim.db"));
    engine.create_stack(request("oc", GROUP, &[])).await.unwrap();
    assert_eq!(status(&engine, "oc").await, "CREATE_COMPLETE");
    let outputs = outputs(&engine, "oc").await;
    let names: Vec<String> = outputs["names"].as_array().unwrap().iter().map(|n| n.as_str().unwrap().into()).collect();
    assert_eq!(names.len(), 2);
    for (index, name) in names.iter().enumerate() {
        // <nested stack name>-<member>-<short id>, the nested stack `oc-configured_group-<id>`
        // (a longer one is reduced to 53 characters as Heat reduces it: template/servers.rs).
        let parts: Vec<&str> = name.split('-').collect();
        assert_eq!(parts.len(), 5, "{name}");
        assert_eq!(&parts[..2], ["oc", "configured_group"], "{name}");
        assert_eq!(parts[3], index.to_string(), "{name}");
        assert!(parts[2].len() == 12 && parts[4].len() == 12, "{name}");
        assert!(name.len() <= 53);
    }
    assert_eq!(server_names(&engine).await, names);
    for settings in outputs["settings"].as_array().unwrap() {
        let token = token_of(settings);
        assert!(names.contains(&engine.server_for_token(&token).await.unwrap().unwrap()));
    }
    // An update keeps the same servers (and tokens).
    engine.update_stack("oc", request("oc", GROUP, &[])).await.unwrap();
    assert_eq!(server_names(&engine).await, names);
    engine.delete_stack("oc").await.unwrap();
    assert!(server_names(&engine).await.is_empty());
}

#[tokio::test]
async fn an_update_removing_a_created_server_revokes_it() {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine_at(&dir.path().join("shim.db"));
    register(&engine, &["known1"]).await;
    engine.create_stack(request("s", TEMPLATE, &[])).await.unwrap();
    let token = token_of(&outputs(&engine, "s").await["made"]);
    let smaller = "heat_template_version: 2018-08-31
resources:
  bound: {type: OS::Heat::DeployedServer, properties: {name: known1}}
";
    engine.update_stack("s", request("s", smaller, &[])).await.unwrap();
    assert_eq!(status(&engine, "s").await, "UPDATE_COMPLETE");
    assert_eq!(server_names(&engine).await, ["known1"]);
    assert_eq!(engine.server_for_token(&token).await.unwrap(), None);
    // Renamed: the old one goes, a new one is made.
    let renamed = TEMPLATE.replace("name: made1", "name: made2");
    engine.update_stack("s", request("s", &renamed, &[])).await.unwrap();
    let renamed_again = TEMPLATE.replace("name: made1", "name: made3");
    engine.update_stack("s", request("s", &renamed_again, &[])).await.unwrap();
    assert_eq!(server_names(&engine).await, ["known1", "made3"]);
}

#[tokio::test]
async fn a_second_stack_binds_the_created_server_and_takes_it_over() {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine_at(&dir.path().join("shim.db"));
    register(&engine, &["known1"]).await;
    engine.create_stack(request("first", TEMPLATE, &[])).await.unwrap();
    let token = token_of(&outputs(&engine, "first").await["made"]);
    engine.create_stack(request("second", TEMPLATE, &[])).await.unwrap();
    assert_eq!(status(&engine, "second").await, "CREATE_COMPLETE");
    let published = deployments(&engine, "made1").await;
    assert_eq!(published.len(), 2, "both stacks publish to the one server");
    engine.delete_stack("first").await.unwrap();
    assert_eq!(engine.server_for_token(&token).await.unwrap().as_deref(), Some("made1"), "second still uses it");
    engine.delete_stack("second").await.unwrap();
    assert_eq!(server_names(&engine).await, ["known1"], "the last user revokes it");
    assert_eq!(engine.server_for_token(&token).await.unwrap(), None);
}
