//! A stack whose template uses conditions and the newer functions, through the engine: the
//! resource whose condition is false is not created, the deployment's config chosen by `if`
//! is the one published, and outputs evaluate with their conditions (docs/templates.md).

use serde_json::json;

use super::tests::{deployments, engine_at, input, register, request, status};
use crate::model::Service;

const TEMPLATE: &str = r##"
heat_template_version: 2021-04-16
parameters:
  env: {type: string, default: prod}
  zones: {type: comma_delimited_list, default: "a,b"}
conditions:
  prod: {equals: [{get_param: env}, prod]}
  dev: {not: prod}
resources:
  prod_config:
    type: OS::Heat::SoftwareConfig
    condition: prod
    properties: {group: script, config: "#!/bin/sh\necho prod\n"}
  dev_config:
    type: OS::Heat::SoftwareConfig
    condition: dev
    properties: {group: script, config: "#!/bin/sh\necho dev\n"}
  deploy:
    type: OS::Heat::SoftwareDeployment
    properties:
      server: vm1
      signal_transport: NO_SIGNAL
      config: {if: [prod, {get_resource: prod_config}, {get_resource: dev_config}]}
      input_values:
        zones: {repeat: {for_each: {"%z%": {get_param: zones}}, template: "zone-%z%"}}
        extra: {if: [dev, shown]}
        merged: {map_merge: [{a: 1}, {list_concat: [[1], [2]]}]}
outputs:
  dev_only:
    condition: dev
    value: {get_attr: [dev_config, config]}
  label:
    value: {str_replace_strict: {template: "env=$e", params: {$e: {get_param: env}}}}
"##;

#[tokio::test]
async fn conditions_choose_resources_branches_and_outputs() {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine_at(&dir.path().join("shim.db"));
    register(&engine, &["vm1"]).await;
    let problems = engine.create_stack(request("bad", TEMPLATE, &[])).await;
    assert!(problems.is_err(), "map_merge of a list is refused: {problems:?}");
    let template = TEMPLATE.replace("{list_concat: [[1], [2]]}", "{b: {list_concat: [[1], [2]]}}");
    engine.create_stack(request("s", &template, &[])).await.unwrap();
    let published = deployments(&engine, "vm1").await;
    assert_eq!(published.len(), 1, "{published:?}");
    assert_eq!(published[0]["config"], json!("#!/bin/sh\necho prod\n"));
    assert_eq!(input(&published[0], "zones"), &json!(["zone-a", "zone-b"]));
    assert_eq!(input(&published[0], "merged"), &json!({"a": 1, "b": [1, 2]}));
    let names: Vec<&str> =
        published[0]["inputs"].as_array().unwrap().iter().filter_map(|input| input["name"].as_str()).collect();
    assert!(!names.contains(&"extra"), "the omitted if branch leaves the input out: {names:?}");
    assert_eq!(status(&engine, "s").await, "CREATE_COMPLETE");
    let detail = engine.show_stack("s").await.unwrap();
    let resources: Vec<&str> = detail.resources.iter().map(|resource| resource.name.as_str()).collect();
    assert!(!resources.contains(&"dev_config"), "{resources:?}");
    let output = |name: &str| detail.outputs.iter().find(|output| output.name == name).unwrap().value.clone();
    assert_eq!(output("label"), json!("env=prod"));
    assert_eq!(output("dev_only"), json!(null));
}

#[tokio::test]
async fn an_update_that_turns_a_condition_false_removes_the_resource() {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine_at(&dir.path().join("shim.db"));
    register(&engine, &["vm1"]).await;
    let template = TEMPLATE.replace("{list_concat: [[1], [2]]}", "{b: 2}");
    engine.create_stack(request("s", &template, &[])).await.unwrap();
    assert_eq!(status(&engine, "s").await, "CREATE_COMPLETE");
    engine.update_stack("s", request("s", &template, &[("env", "dev")])).await.unwrap();
    assert_eq!(status(&engine, "s").await, "UPDATE_COMPLETE");
    let published = deployments(&engine, "vm1").await;
    assert_eq!(published.last().unwrap()["config"], json!("#!/bin/sh\necho dev\n"), "{published:?}");
    assert_eq!(input(published.last().unwrap(), "extra"), &json!("shown"));
    let detail = engine.show_stack("s").await.unwrap();
    let resources: Vec<&str> = detail.resources.iter().map(|resource| resource.name.as_str()).collect();
    assert!(resources.contains(&"dev_config") && !resources.contains(&"prod_config"), "{resources:?}");
    let output = detail.outputs.iter().find(|output| output.name == "dev_only").unwrap();
    assert_eq!(output.value, json!("#!/bin/sh\necho dev\n"));
}
