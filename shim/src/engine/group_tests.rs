//! Deployment groups on the real engine: a StructuredDeploymentGroup (and its deprecated alias
//! StructuredDeployments) expands into StructuredDeployments whose configs have their inputs
//! substituted per member, with the group's `input_key` and `input_values_validate`. Helpers:
//! `tests.rs`.

use serde_json::json;

use super::tests::{deployments, engine_at, register, request, signal_token, status};
use crate::model::Service;

const STRUCTURED_GROUP: &str = r##"
heat_template_version: 2018-08-31
parameters:
  group_type: {type: string, default: OS::Heat::StructuredDeploymentGroup}
  validate: {type: string, default: LAX}
resources:
  config:
    type: OS::Heat::StructuredConfig
    properties:
      group: os-apply-config
      config: {member: {lookup: deploy_resource_name}, port: {lookup: port}, missing: {lookup: nothing}, kept: {get_input: port}}
  group:
    type: GROUP_TYPE
    properties:
      config: {get_resource: config}
      servers: {a: web1, b: web2}
      input_key: lookup
      input_values_validate: {get_param: validate}
      input_values: {port: 8080}
outputs:
  codes: {value: {get_attr: [group, deploy_status_codes]}}
"##;

#[tokio::test]
async fn a_structured_group_substitutes_each_members_inputs() {
    for group_type in ["OS::Heat::StructuredDeploymentGroup", "OS::Heat::StructuredDeployments"] {
        let dir = tempfile::tempdir().unwrap();
        let engine = engine_at(&dir.path().join("shim.db"));
        register(&engine, &["web1", "web2"]).await;
        let template = STRUCTURED_GROUP.replace("GROUP_TYPE", group_type);
        engine.create_stack(request("s", &template, &[])).await.unwrap();
        for (server, member) in [("web1", "a"), ("web2", "b")] {
            let published = deployments(&engine, server).await;
            assert_eq!(published.len(), 1, "{group_type} {server}");
            assert_eq!(
                published[0]["config"],
                json!({"member": member, "port": 8080, "missing": null, "kept": {"get_input": "port"}}),
                "{group_type}: inputs under input_key substituted (deploy_resource_name is the member key), LAX gives null for an unknown one"
            );
            engine.deployment_signal(&signal_token(&published[0]), json!({}), None).await.unwrap();
        }
        assert_eq!(status(&engine, "s").await, "CREATE_COMPLETE");
        let detail = engine.show_stack("s").await.unwrap();
        let group = detail.resources.iter().find(|resource| resource.name == "group").unwrap();
        assert_eq!(group.resource_type, "OS::Heat::StructuredDeploymentGroup", "the alias is the group type");
        let member = detail.resources.iter().find(|resource| resource.name == "group/a").unwrap();
        assert_eq!(member.resource_type, "OS::Heat::StructuredDeployment");
        assert_eq!(detail.outputs[0].value, json!({"a": null, "b": null}));
    }
}

#[tokio::test]
async fn a_strict_structured_group_fails_on_an_input_without_a_value() {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine_at(&dir.path().join("shim.db"));
    register(&engine, &["web1", "web2"]).await;
    let template = STRUCTURED_GROUP.replace("GROUP_TYPE", "OS::Heat::StructuredDeploymentGroup");
    engine.create_stack(request("s", &template, &[("validate", "STRICT")])).await.unwrap();
    assert_eq!(status(&engine, "s").await, "CREATE_FAILED");
    let reason = engine.show_stack("s").await.unwrap().summary.status_reason;
    assert!(reason.contains("input \"nothing\" has no value (input_values_validate: STRICT)"), "{reason}");
    assert!(deployments(&engine, "web1").await.is_empty());
}

/// A group of either type over two servers, a structured config (valid for both).
const RETYPED_GROUP: &str = r##"
heat_template_version: 2018-08-31
resources:
  config:
    type: OS::Heat::StructuredConfig
    properties: {group: os-apply-config, config: {port: 8080}}
  group:
    type: GROUP_TYPE
    properties:
      config: {get_resource: config}
      servers: {a: web1, b: web2}
"##;

/// A group whose type changes (SoftwareDeploymentGroup to StructuredDeploymentGroup) is a new
/// resource, as in Heat: the plan shows it replaced, its members deleted and added; the update
/// forgets the old members and creates the new ones under the same names.
#[tokio::test]
async fn a_group_whose_type_changes_is_replaced_with_its_members() {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine_at(&dir.path().join("shim.db"));
    register(&engine, &["web1", "web2"]).await;
    let before = RETYPED_GROUP.replace("GROUP_TYPE", "OS::Heat::SoftwareDeploymentGroup");
    engine.create_stack(request("s", &before, &[])).await.unwrap();
    for server in ["web1", "web2"] {
        let published = deployments(&engine, server).await;
        engine.deployment_signal(&signal_token(&published[0]), json!({}), None).await.unwrap();
    }
    assert_eq!(status(&engine, "s").await, "CREATE_COMPLETE");
    let after = RETYPED_GROUP.replace("GROUP_TYPE", "OS::Heat::StructuredDeploymentGroup");
    let plan = engine.preview_stack(Some("s"), request("s", &after, &[])).await.unwrap();
    let names = |list: &[crate::model::PlannedResource]| -> Vec<String> {
        list.iter().map(|resource| resource.resource_name.clone()).collect()
    };
    assert_eq!(names(&plan.resource_changes.replaced), ["group"], "{:#?}", plan.resource_changes);
    let mut runs: Vec<(&str, &str)> =
        plan.runs.iter().map(|run| (run.resource.as_str(), run.action.as_str())).collect();
    runs.sort();
    assert_eq!(runs, [("group/a", "CREATE"), ("group/b", "CREATE")], "{:#?}", plan.runs);

    engine.update_stack("s", request("s", &after, &[])).await.unwrap();
    for server in ["web1", "web2"] {
        let published = deployments(&engine, server).await;
        assert_eq!(published.len(), 1, "{server}: the new member only: {published:#?}");
        assert_eq!(published[0]["group"], "os-apply-config");
        engine.deployment_signal(&signal_token(&published[0]), json!({}), None).await.unwrap();
    }
    assert_eq!(status(&engine, "s").await, "UPDATE_COMPLETE");
    let detail = engine.show_stack("s").await.unwrap();
    let member = detail.resources.iter().find(|resource| resource.name == "group/a").unwrap();
    assert_eq!(member.resource_type, "OS::Heat::StructuredDeployment");
}
