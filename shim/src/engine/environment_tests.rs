//! Stacks created with a Heat environment and a `files` map on the real engine: the registry
//! alias and get_file reach the published deployment, parameter_defaults and parameters give
//! values (the request's own winning), the resolved template is what outputs read later (also
//! after an update), and a bad environment is refused with every problem. Helpers: `tests.rs`.

use serde_json::json;

use super::tests::{deployments, engine_at, input, register, request};
use crate::model::{Service, ServiceError};

const TEMPLATE: &str = "heat_template_version: 2018-08-31
parameters:
  message: {type: string}
  server: {type: string, default: nowhere}
resources:
  config:
    type: My::Config
    properties:
      group: script
      inputs: [{name: message}]
      config: {get_file: scripts/run.sh}
  deploy:
    type: OS::Heat::SoftwareDeployment
    properties:
      config: {get_resource: config}
      server: {get_param: server}
      input_values: {message: {get_param: message}}
outputs:
  readme: {value: {get_file: README}}
";

fn environment() -> serde_json::Value {
    json!({
        "parameters": {"message": "from the environment"},
        "parameter_defaults": {"server": "web1"},
        "resource_registry": {"My::Config": "OS::Heat::SoftwareConfig"},
    })
}

fn files() -> serde_json::Map<String, serde_json::Value> {
    json!({"scripts/run.sh": "#!/bin/sh\necho $message\n", "README": "read me"}).as_object().unwrap().clone()
}

#[tokio::test]
async fn an_environment_and_files_reach_the_deployment_and_the_outputs() {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine_at(&dir.path().join("shim.db"));
    register(&engine, &["web1"]).await;
    let mut create = request("s", TEMPLATE, &[]);
    create.environment = environment();
    create.files = files();
    engine.create_stack(create).await.unwrap();
    let published = deployments(&engine, "web1").await;
    assert_eq!(published.len(), 1, "parameter_defaults chose the server");
    assert_eq!(published[0]["config"], "#!/bin/sh\necho $message\n");
    assert_eq!(input(&published[0], "message"), "from the environment");
    let detail = engine.show_stack("s").await.unwrap();
    assert_eq!(detail.outputs[0].value, json!("read me"), "outputs read the stored, resolved template");
    let resources: Vec<_> = detail.resources.iter().map(|resource| resource.resource_type.as_str()).collect();
    assert!(resources.contains(&"OS::Heat::SoftwareConfig"), "{resources:?}");

    let mut update = request("s", TEMPLATE, &[("message", "from the request")]);
    update.environment = environment();
    update.files = files();
    engine.update_stack("s", update).await.unwrap();
    let published = deployments(&engine, "web1").await;
    assert_eq!(input(&published[0], "message"), "from the request", "the request's parameters win");
    assert_eq!(engine.show_stack("s").await.unwrap().outputs[0].value, json!("read me"));
}

#[tokio::test]
async fn a_bad_environment_or_a_missing_file_is_refused_with_every_problem() {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine_at(&dir.path().join("shim.db"));
    register(&engine, &["web1"]).await;
    let mut create = request("s", TEMPLATE, &[]);
    create.environment = json!({"resource_registry": {"My::Config": "Config"}, "parameters": []});
    let Err(ServiceError::Template { problems }) = engine.create_stack(create).await else { panic!("accepted") };
    // The environment's problems first, then the template's, each once, by line.
    assert!(problems[0].contains("neither a resource type nor a template file"), "{problems:?}");
    assert!(problems[1].contains("environment section \"parameters\" must be a mapping"), "{problems:?}");
    let lines: Vec<&str> = problems[2..].iter().map(|problem| problem.rsplit_once("(line ").unwrap().1).collect();
    assert_eq!(lines, ["3)", "11)", "12)", "19)"], "{problems:?}");
    assert!(problems[2].starts_with("parameter \"message\": no value"), "{problems:?}");
    // The refused mapping is the problem; the type it left unmapped is not reported again.
    assert!(!problems.iter().any(|problem| problem.contains("unknown resource type")), "{problems:?}");
    let mut create = request("s", TEMPLATE, &[("message", "m")]);
    create.environment = json!({"resource_registry": {"My::Config": "OS::Heat::SoftwareConfig"}});
    let Err(ServiceError::Template { problems }) = engine.create_stack(create).await else { panic!("accepted") };
    assert_eq!(problems.len(), 3, "{problems:?}");
    assert_eq!(problems.iter().filter(|problem| problem.contains("get_file: no file")).count(), 2, "{problems:?}");
    assert!(problems[1].contains("server \"nowhere\" is not registered"), "{problems:?}");
}
