//! Engine scenarios of the computing and binding types: a RandomString's secret flows through
//! get_attr and get_resource into a deployment and an output, is never in `stack show`'s
//! resources or the events, and survives updates that leave its properties alone; Value and
//! None complete at once; a DeployedServer binds a deployment to its registered server; an
//! update that changes an immutable parameter is refused.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::tests::{deployments, engine_at, input, register, request, signal_token, status};
use crate::model::{Service, ServiceError};

const TEMPLATE: &str = r##"
heat_template_version: 2018-08-31
parameters:
  salt: {type: string, default: one}
  role: {type: string, default: web, immutable: true}
  server_name: {type: string, default: web1, constraints: [{custom_constraint: nova.server}]}
resources:
  password:
    type: OS::Heat::RandomString
    properties: {length: 20, character_classes: [{class: digits, min: 5}], salt: {get_param: salt}}
  stub:
    type: OS::Heat::None
    properties: {flavor: m1.small, image: {get_param: role}}
  label:
    type: OS::Heat::Value
    properties: {type: json, value: {role: {get_param: role}, stub: {get_attr: [stub, anything]}}}
  server:
    type: OS::Heat::DeployedServer
    properties: {name: {get_param: server_name}}
  config:
    type: OS::Heat::SoftwareConfig
    properties: {group: script, inputs: [{name: password}, {name: same}, {name: label}], config: "echo"}
  deploy:
    type: OS::Heat::SoftwareDeployment
    properties:
      config: {get_resource: config}
      server: {get_resource: server}
      input_values:
        password: {get_attr: [password, value]}
        same: {get_resource: password}
        label: {get_attr: [label, value]}
outputs:
  password: {value: {get_attr: [password, value]}}
  server_name: {value: {get_attr: [server, name]}}
"##;

async fn outputs(engine: &impl Service, stack: &str) -> BTreeMap<String, Value> {
    let detail = engine.show_stack(stack).await.unwrap();
    detail.outputs.into_iter().map(|output| (output.name, output.value)).collect()
}

#[tokio::test]
async fn a_random_string_is_a_secret_kept_until_its_properties_change() {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine_at(&dir.path().join("shim.db"));
    register(&engine, &["web1"]).await;
    engine.create_stack(request("s", TEMPLATE, &[])).await.unwrap();
    let published = deployments(&engine, "web1").await;
    let password = input(&published[0], "password").as_str().unwrap().to_owned();
    assert_eq!(password.len(), 20);
    assert!(password.chars().all(|c| c.is_ascii_alphanumeric()), "{password}");
    assert!(password.chars().filter(char::is_ascii_digit).count() >= 5, "{password}");
    assert_eq!(input(&published[0], "same"), password.as_str(), "get_resource is the value, as Heat");
    assert_eq!(input(&published[0], "label"), &json!({"role": "web", "stub": null}));
    engine.deployment_signal(&signal_token(&published[0]), json!({}), None).await.unwrap();
    assert_eq!(status(&engine, "s").await, "CREATE_COMPLETE");
    let shown = outputs(&engine, "s").await;
    assert_eq!(shown["password"], password.as_str());
    assert_eq!(shown["server_name"], "web1");
    let detail = serde_json::to_string(&engine.show_stack("s").await.unwrap().resources).unwrap();
    let events = serde_json::to_string(&engine.stack_events("s").await.unwrap()).unwrap();
    assert!(!detail.contains(&password) && !events.contains(&password), "only outputs show the secret");

    engine.update_stack("s", request("s", TEMPLATE, &[])).await.unwrap();
    assert_eq!(status(&engine, "s").await, "UPDATE_COMPLETE");
    assert_eq!(outputs(&engine, "s").await["password"], password.as_str(), "unchanged properties keep it");

    engine.update_stack("s", request("s", TEMPLATE, &[("salt", "two")])).await.unwrap();
    let republished = deployments(&engine, "web1").await;
    let renewed = input(&republished[0], "password").as_str().unwrap().to_owned();
    assert_ne!(renewed, password, "a new salt regenerates it");
    engine.deployment_signal(&signal_token(&republished[0]), json!({}), None).await.unwrap();
    assert_eq!(outputs(&engine, "s").await["password"], renewed.as_str());
}

#[tokio::test]
async fn immutable_parameters_and_unregistered_nova_server_parameters_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine_at(&dir.path().join("shim.db"));
    let refused = engine.create_stack(request("s", TEMPLATE, &[])).await.unwrap_err();
    let ServiceError::Template { problems } = refused else { panic!("{refused:?}") };
    assert_eq!(
        problems,
        [
            "parameter \"server_name\": custom_constraint nova.server: server \"web1\" is not registered \
             (anneal-shim server add) (line 6)",
            // The DeployedServer itself would be created by the stack (server_tests.rs).
        ]
    );

    register(&engine, &["web1"]).await;
    engine.create_stack(request("s", TEMPLATE, &[])).await.unwrap();
    let events = engine.stack_events("s").await.unwrap();
    assert!(!events.iter().any(|event| event.status == "WARNING"), "nova.server is checked, not warned about");
    let refused = engine.update_stack("s", request("s", TEMPLATE, &[("role", "db")])).await.unwrap_err();
    let ServiceError::Template { problems } = refused else { panic!("{refused:?}") };
    assert_eq!(problems, ["The following parameters are immutable and may not be updated: role"]);
    assert_eq!(status(&engine, "s").await, "CREATE_IN_PROGRESS", "the refused update changed nothing");
}

#[tokio::test]
async fn group_attributes_are_member_maps_also_without_signals() {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine_at(&dir.path().join("shim.db"));
    register(&engine, &["app1", "web1"]).await;
    let template = r##"
heat_template_version: 2018-08-31
resources:
  config:
    type: OS::Heat::SoftwareConfig
    properties: {group: script, outputs: [{name: result}], config: "#!/bin/sh\n"}
  group:
    type: OS::Heat::SoftwareDeployments
    properties:
      config: {get_resource: config}
      servers: {a: app1, b: web1}
      signal_transport: NO_SIGNAL
outputs:
  stdout: {value: {get_attr: [group, deploy_stdout]}}
  stdouts: {value: {get_attr: [group, deploy_stdouts]}}
  codes: {value: {get_attr: [group, deploy_status_code]}}
  results: {value: {get_attr: [group, result]}}
"##;
    engine.create_stack(request("g", template, &[])).await.unwrap();
    assert_eq!(status(&engine, "g").await, "CREATE_COMPLETE");
    let published = deployments(&engine, "app1").await;
    assert_eq!(input(&published[0], "deploy_resource_name"), "a", "a member is named by its servers key");
    // Heat puts a group's members in the group's own nested stack.
    let id = engine.show_stack("g").await.unwrap().summary.id;
    let path = input(&published[0], "deploy_stack_id").as_str().unwrap().to_owned();
    let (name, stack_id) = path.split_once('/').expect("<name>/<id>");
    assert!(is_nested_name(name, "g", "group"), "{path}");
    assert_eq!(stack_id, format!("{id}-group"));
    let shown = outputs(&engine, "g").await;
    for output in ["stdout", "stdouts", "codes", "results"] {
        assert_eq!(shown[output], json!({"a": null, "b": null}), "{output}");
    }
    let detail = engine.show_stack("g").await.unwrap();
    let group = detail.resources.iter().find(|resource| resource.name == "group").unwrap();
    assert_eq!(group.resource_type, "OS::Heat::SoftwareDeploymentGroup", "the alias is the group type");
}

#[tokio::test]
async fn an_unchecked_custom_constraint_is_a_warning_event() {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine_at(&dir.path().join("shim.db"));
    let template = "heat_template_version: 2018-08-31
parameters:
  flavor: {type: string, default: m1.small, constraints: [{custom_constraint: nova.flavor}]}
resources:
  stub: {type: OS::Heat::None, properties: {flavor: {get_param: flavor}}}
";
    engine.create_stack(request("w", template, &[])).await.unwrap();
    assert_eq!(status(&engine, "w").await, "CREATE_COMPLETE");
    let events = engine.stack_events("w").await.unwrap();
    let warning = events.iter().find(|event| event.status == "WARNING").expect("a warning event");
    assert_eq!(warning.reason, "parameter flavor: custom_constraint nova.flavor is not checked by anneal-shim");
    assert_eq!(warning.resource, "w");
}

const NESTED_DEPLOYMENT: &str = r##"
heat_template_version: 2018-08-31
parameters:
  server: {type: string}
  message: {type: string, default: first}
resources:
  config:
    type: OS::Heat::SoftwareConfig
    properties: {group: script, config: "#!/bin/sh\n"}
  deploy:
    type: OS::Heat::SoftwareDeployment
    properties:
      config: {get_resource: config}
      server: {get_param: server}
      signal_transport: NO_SIGNAL
      input_values: {message: {get_param: message}}
"##;

const NESTED_PARENT: &str = r##"
heat_template_version: 2018-08-31
parameters:
  message: {type: string, default: first}
resources:
  single: {type: nested.yaml, properties: {server: app1, message: {get_param: message}}}
  many:
    type: OS::Heat::ResourceGroup
    properties: {count: 2, resource_def: {type: nested.yaml, properties: {server: app1, message: {get_param: message}}}}
"##;

/// Each deployment's (deploy_resource_name, deploy_stack_id, message), sorted.
async fn nested_identities(engine: &crate::engine::Engine<crate::store::SqliteStore>) -> Vec<(String, String, String)> {
    let text = |deployment: &Value, name: &str| input(deployment, name).as_str().unwrap_or_default().to_owned();
    let mut found: Vec<(String, String, String)> = deployments(engine, "app1")
        .await
        .iter()
        .map(|deployment| {
            (text(deployment, "deploy_resource_name"), text(deployment, "deploy_stack_id"), text(deployment, "message"))
        })
        .collect();
    found.sort();
    found
}

/// Heat's `<parent>-<resource>-<12 base32 characters>` nested stack name.
fn is_nested_name(name: &str, parent: &str, resource: &str) -> bool {
    let Some(short) = name.strip_prefix(&format!("{parent}-{resource}-")) else { return false };
    short.len() == 12 && short.bytes().all(|byte| byte.is_ascii_lowercase() || (b'2'..=b'7').contains(&byte))
}

#[tokio::test]
async fn deployments_in_nested_stacks_get_the_nested_stacks_name_and_identity() {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine_at(&dir.path().join("shim.db"));
    register(&engine, &["app1"]).await;
    let mut create = request("n", NESTED_PARENT, &[]);
    create.files.insert("nested.yaml".into(), json!(NESTED_DEPLOYMENT));
    engine.create_stack(create).await.unwrap();
    assert_eq!(status(&engine, "n").await, "CREATE_COMPLETE");
    let id = engine.show_stack("n").await.unwrap().summary.id;
    let created = nested_identities(&engine).await;
    let names: Vec<&str> = created.iter().map(|(name, _, _)| name.as_str()).collect();
    assert_eq!(names, ["deploy", "deploy", "deploy"], "each is named as in its nested stack, as Heat names it");
    let paths: Vec<(&str, &str)> =
        created.iter().map(|(_, path, _)| path.split_once('/').expect("<name>/<id>")).collect();
    let mut ids: Vec<&str> = paths.iter().map(|(_, stack_id)| *stack_id).collect();
    ids.sort();
    assert_eq!(ids, [format!("{id}-many-0"), format!("{id}-many-1"), format!("{id}-single")]);
    let name_of = |stack_id: String| paths.iter().find(|(_, found)| *found == stack_id).unwrap().0;
    let single = name_of(format!("{id}-single"));
    assert!(is_nested_name(single, "n", "single"), "{single}");
    // A group member's stack is nested in the group's: `<root>-many-<short>-0-<short>`.
    let (first, second) = (name_of(format!("{id}-many-0")), name_of(format!("{id}-many-1")));
    let group_stack = &first[..first.len() - "-0-".len() - 12];
    assert!(is_nested_name(group_stack, "n", "many"), "{first}");
    assert!(is_nested_name(first, group_stack, "0") && is_nested_name(second, group_stack, "1"), "{second}");

    // An update that republishes every deployment keeps every identity.
    let mut update = request("n", NESTED_PARENT, &[("message", "second")]);
    update.files.insert("nested.yaml".into(), json!(NESTED_DEPLOYMENT));
    engine.update_stack("n", update).await.unwrap();
    assert_eq!(status(&engine, "n").await, "UPDATE_COMPLETE");
    let updated = nested_identities(&engine).await;
    assert!(updated.iter().all(|(_, _, message)| message == "second"), "republished: {updated:?}");
    let identities = |found: &[(String, String, String)]| -> Vec<(String, String)> {
        found.iter().map(|(name, path, _)| (name.clone(), path.clone())).collect()
    };
    assert_eq!(identities(&updated), identities(&created), "the same nested identities after the update");
}

const TYPED_NESTED: &str = r##"
heat_template_version: 2018-08-31
parameters:
  amount: {type: number}
  names: {type: comma_delimited_list}
resources:
  echo:
    type: OS::Heat::Value
    properties: {value: {amount: {get_param: amount}, first: {get_param: [names, 0]}, names: {get_param: names}}}
outputs:
  echoed: {value: {get_attr: [echo, value]}}
"##;

const TYPED_PARENT: &str = r##"
heat_template_version: 2018-08-31
resources:
  config:
    type: OS::Heat::SoftwareConfig
    properties: {group: script, config: "#!/bin/sh\n", outputs: [{name: count}, {name: items}]}
  source:
    type: OS::Heat::SoftwareDeployment
    properties: {config: {get_resource: config}, server: app1}
  consumer:
    type: typed.yaml
    properties: {amount: {get_attr: [source, count]}, names: {get_attr: [source, items]}}
outputs:
  echoed: {value: {get_attr: [consumer, echoed]}}
"##;

/// Creates the typed stack `name` and signals its source deployment with `outputs`.
async fn typed_stack_signalled(
    name: &str,
    outputs: Value,
) -> (tempfile::TempDir, crate::engine::Engine<crate::store::SqliteStore>) {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine_at(&dir.path().join("shim.db"));
    register(&engine, &["app1"]).await;
    let mut create = request(name, TYPED_PARENT, &[]);
    create.files.insert("typed.yaml".into(), json!(TYPED_NESTED));
    engine.create_stack(create).await.unwrap();
    let published = deployments(&engine, "app1").await;
    assert_eq!(published.len(), 1);
    let mut signal = outputs;
    signal["deploy_status_code"] = json!(0);
    engine.deployment_signal(&signal_token(&published[0]), signal, None).await.unwrap();
    (dir, engine)
}

#[tokio::test]
async fn a_deployment_output_reaches_nested_parameters_converted_to_their_types() {
    let (_dir, engine) = typed_stack_signalled("typed", json!({"count": "3", "items": "a,b"})).await;
    assert_eq!(status(&engine, "typed").await, "CREATE_COMPLETE");
    let shown = engine.show_stack("typed").await.unwrap();
    let echoed = shown.outputs.iter().find(|output| output.name == "echoed").unwrap();
    assert_eq!(
        echoed.value,
        json!({"amount": 3, "first": "a", "names": ["a", "b"]}),
        "as Heat's nested stack sees them"
    );
}

#[tokio::test]
async fn a_run_time_value_the_nested_parameter_refuses_fails_the_reading_resource() {
    let (_dir, engine) = typed_stack_signalled("refused", json!({"count": "many", "items": "a"})).await;
    assert_eq!(status(&engine, "refused").await, "CREATE_FAILED");
    let shown = engine.show_stack("refused").await.unwrap();
    let echo = shown.resources.iter().find(|resource| resource.name == "consumer/echo").unwrap();
    assert!(
        echo.status_reason.contains(
            "resources.consumer: Property error: consumer.Properties.amount: could not convert string to float: 'many'"
        ),
        "Heat's text, naming the provider resource: {echo:?}"
    );
}

const ALL_ATTRIBUTES: &str = r##"
heat_template_version: 2021-04-16
resources:
  label: {type: OS::Heat::Value, properties: {value: {role: web}}}
  server: {type: OS::Heat::DeployedServer, properties: {name: web1}}
  config:
    type: OS::Heat::SoftwareConfig
    properties: {group: script, inputs: [{name: label}], outputs: [{name: result}], config: "echo"}
  deploy:
    type: OS::Heat::SoftwareDeployment
    properties: {config: {get_resource: config}, server: {get_resource: server}, input_values: {label: {get_attr: [label]}}}
  after: {type: OS::Heat::Value, properties: {value: {get_attr: [deploy]}}}
outputs:
  deploy: {value: {get_attr: [after, value]}}
  server: {value: {get_attr: [server]}}
"##;

#[tokio::test]
async fn get_attr_of_a_resource_alone_reads_every_attribute_its_type_shows() {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine_at(&dir.path().join("shim.db"));
    register(&engine, &["web1"]).await;
    engine.create_stack(request("s", ALL_ATTRIBUTES, &[])).await.unwrap();
    let published = deployments(&engine, "web1").await;
    assert_eq!(input(&published[0], "label"), &json!({"value": {"role": "web"}}));
    let signal = json!({"deploy_stdout": "out", "deploy_stderr": "", "deploy_status_code": 0, "result": "r"});
    engine.deployment_signal(&signal_token(&published[0]), signal, None).await.unwrap();
    assert_eq!(status(&engine, "s").await, "CREATE_COMPLETE");
    let shown = outputs(&engine, "s").await;
    // As Heat's FnGetAtts: a deployment's outputs and the shim's extra server attributes are left out.
    assert_eq!(shown["deploy"], json!({"deploy_stdout": "out", "deploy_stderr": "", "deploy_status_code": 0}));
    let server = shown["server"].as_object().unwrap();
    assert_eq!(server.keys().collect::<Vec<_>>(), ["name", "os_collect_config"]);
    assert_eq!(server["name"], "web1");
}
