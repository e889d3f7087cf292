//! A deployment's attributes beyond the outputs its config declares, on the real engine, as
//! Heat 27 resolves them (tests/tests/real_heat_anneal.rs compares with the real Heat): the
//! template is accepted, the signal keeps only the declared outputs, and reading any other name
//! once the deployment exists is an error with Heat's text, in a stack output (null, with the
//! error) or in a resource that reads it (which fails). A declared output the hook never
//! returned is null; a group refuses what its members refuse, and an empty group answers `{}`.
//! Helpers: `tests.rs`.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::tests::{deployments, engine_at, register, request, signal_token, status};
use crate::model::{Service, StackOutput};

const SINGLE: &str = r##"
heat_template_version: 2018-08-31
resources:
  config:
    type: OS::Heat::SoftwareConfig
    properties: {group: script, outputs: [{name: declared}, {name: missing}], config: "echo"}
  deploy:
    type: OS::Heat::SoftwareDeployment
    properties: {config: {get_resource: config}, server: web1}
  skipped:
    type: OS::Heat::SoftwareDeployment
    properties: {config: {get_resource: config}, server: web1, actions: [DELETE]}
outputs:
  result: {value: {get_attr: [deploy, result]}}
  result_path: {value: {get_attr: [deploy, result, "it's", 0]}}
  declared: {value: {get_attr: [deploy, declared]}}
  missing: {value: {get_attr: [deploy, missing]}}
  stdout: {value: {get_attr: [deploy, deploy_stdout]}}
  show: {value: {get_attr: [deploy, show]}}
  skipped_declared: {value: {get_attr: [skipped, declared]}}
  skipped_result: {value: {get_attr: [skipped, result]}}
"##;

async fn outputs(engine: &impl Service, stack: &str) -> BTreeMap<String, StackOutput> {
    let detail = engine.show_stack(stack).await.unwrap();
    detail.outputs.into_iter().map(|output| (output.name.clone(), output)).collect()
}

/// An output as `(value, error)`.
fn shown(outputs: &BTreeMap<String, StackOutput>, name: &str) -> (Value, Option<String>) {
    let output = &outputs[name];
    (output.value.clone(), output.error.clone())
}

fn refused(key: &str) -> (Value, Option<String>) {
    (Value::Null, Some(format!("The Referenced Attribute ({key}) is incorrect.")))
}

#[tokio::test]
async fn an_output_the_config_does_not_declare_is_refused_when_read_even_if_the_hook_returned_it() {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine_at(&dir.path().join("shim.db"));
    register(&engine, &["web1"]).await;
    engine.create_stack(request("s", SINGLE, &[])).await.expect("Heat accepts an undeclared name at validation");
    let published = deployments(&engine, "web1").await;
    assert_eq!(published.len(), 1, "only deploy runs on CREATE");
    let body = json!({"deploy_stdout": "out", "deploy_status_code": 0, "result": "R", "declared": "D"});
    engine.deployment_signal(&signal_token(&published[0]), body, None).await.unwrap();
    assert_eq!(status(&engine, "s").await, "CREATE_COMPLETE", "an output error does not fail the stack");

    let outputs = outputs(&engine, "s").await;
    assert_eq!(shown(&outputs, "result"), refused("deploy result"), "the signal's undeclared key is not kept");
    // Python quotes a text holding a single quote (and no double quote) with double quotes.
    assert_eq!(shown(&outputs, "result_path"), refused("deploy ('result', \"it's\", 0)"));
    assert_eq!(shown(&outputs, "declared"), (json!("D"), None));
    assert_eq!(shown(&outputs, "missing"), (Value::Null, None), "declared, never returned: null");
    assert_eq!(shown(&outputs, "stdout"), (json!("out"), None));
    assert_eq!(shown(&outputs, "show"), refused("deploy show"), "SoftwareDeployment.ATTRIBUTES has no show");
    assert_eq!(shown(&outputs, "skipped_declared"), (Value::Null, None), "not run: its outputs are null");
    assert_eq!(shown(&outputs, "skipped_result"), refused("skipped result"));
}

const READER: &str = r##"
heat_template_version: 2018-08-31
resources:
  config:
    type: OS::Heat::SoftwareConfig
    properties: {group: script, config: "echo"}
  deploy:
    type: OS::Heat::SoftwareDeployment
    properties: {config: {get_resource: config}, server: web1}
  reader:
    type: OS::Heat::Value
    properties: {value: {get_attr: [deploy, result]}}
"##;

#[tokio::test]
async fn a_resource_reading_an_undeclared_output_fails_with_heats_text() {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine_at(&dir.path().join("shim.db"));
    register(&engine, &["web1"]).await;
    engine.create_stack(request("s", READER, &[])).await.unwrap();
    let published = deployments(&engine, "web1").await;
    engine.deployment_signal(&signal_token(&published[0]), json!({"result": "R"}), None).await.unwrap();
    assert_eq!(status(&engine, "s").await, "CREATE_FAILED");
    let detail = engine.show_stack("s").await.unwrap();
    let reader = detail.resources.iter().find(|resource| resource.name == "reader").unwrap();
    assert_eq!(reader.status, "CREATE_FAILED");
    assert!(
        reader.status_reason.contains("The Referenced Attribute (deploy result) is incorrect."),
        "{}",
        reader.status_reason
    );
}

const GROUPS: &str = r##"
heat_template_version: 2018-08-31
resources:
  config:
    type: OS::Heat::SoftwareConfig
    properties: {group: script, outputs: [{name: declared}], config: "echo"}
  group:
    type: OS::Heat::SoftwareDeploymentGroup
    properties: {config: {get_resource: config}, servers: {a: web1, b: web2}}
  empty:
    type: OS::Heat::SoftwareDeploymentGroup
    properties: {config: {get_resource: config}, servers: {}}
outputs:
  result: {value: {get_attr: [group, result]}}
  result_path: {value: {get_attr: [group, result, a]}}
  declared: {value: {get_attr: [group, declared]}}
  stdouts: {value: {get_attr: [group, deploy_stdouts]}}
  empty_result: {value: {get_attr: [empty, result]}}
  empty_declared: {value: {get_attr: [empty, declared]}}
"##;

#[tokio::test]
async fn a_group_refuses_what_its_members_refuse_and_an_empty_group_answers_an_empty_map() {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine_at(&dir.path().join("shim.db"));
    register(&engine, &["web1", "web2"]).await;
    engine.create_stack(request("s", GROUPS, &[])).await.unwrap();
    for (server, declared) in [("web1", json!({"declared": "D1", "result": "R1"})), ("web2", json!({"result": "R2"}))] {
        let published = deployments(&engine, server).await;
        engine.deployment_signal(&signal_token(&published[0]), declared, None).await.unwrap();
    }
    assert_eq!(status(&engine, "s").await, "CREATE_COMPLETE");
    let outputs = outputs(&engine, "s").await;
    assert_eq!(shown(&outputs, "result"), refused("group result"));
    assert_eq!(shown(&outputs, "result_path"), refused("group ('result', 'a')"));
    assert_eq!(shown(&outputs, "declared"), (json!({"a": "D1", "b": null}), None));
    assert_eq!(shown(&outputs, "stdouts"), (json!({"a": null, "b": null}), None));
    assert_eq!(shown(&outputs, "empty_result"), (json!({}), None), "no member to refuse it");
    assert_eq!(shown(&outputs, "empty_declared"), (json!({}), None));
}
