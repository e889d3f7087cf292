//! Values derived from hidden parameters in what the web view and the admin API show: an
//! OS::Heat::Value and a SoftwareConfig computed from one (through `str_replace`), a deployment
//! input fed by `get_attr` of such a value, a provider template's parameter bound from a hidden
//! one or declared hidden itself, a ResourceGroup member's inlined parameter, and a failure
//! whose reason would quote the value. Each secret must be nowhere in a node's detail, the graph
//! or its drawing; what derives from no secret is still shown.

use serde_json::{Value, json};

use super::tests::{deployments, engine_at, input, register, request, signal_token, status};
use crate::engine::Engine;
use crate::model::Service;
use crate::store::SqliteStore;

const SECRET: &str = "Sup3r-Secret-Pw";

const TEMPLATE: &str = r##"
heat_template_version: 2018-08-31
parameters:
  db_password: {type: string, hidden: true, default: Sup3r-Secret-Pw}
  greeting: {type: string, default: hello-visible}
resources:
  server: {type: OS::Heat::DeployedServer, properties: {name: web1}}
  dsn:
    type: OS::Heat::Value
    properties:
      value:
        str_replace:
          template: "postgres://app:PASSWORD@db/app"
          params: {PASSWORD: {get_param: db_password}}
  config:
    type: OS::Heat::SoftwareConfig
    properties:
      group: script
      inputs:
        - {name: dsn}
        - {name: greeting}
        - {name: shout}
        - {name: token}
        - {name: fallback, default: {get_attr: [dsn, value]}}
      config:
        str_replace:
          template: "#!/bin/sh\necho PASSWORD > /etc/app.pw\n"
          params: {PASSWORD: {get_param: db_password}}
  deploy:
    type: OS::Heat::SoftwareDeployment
    properties:
      config: {get_resource: config}
      server: {get_resource: server}
      input_values:
        dsn: {get_attr: [dsn, value]}
        greeting: {get_param: greeting}
        shout: {yaql: {expression: $.data.toUpper(), data: {get_param: db_password}}}
        token: {get_resource: random}
  random: {type: OS::Heat::RandomString, properties: {length: 24}}
  group:
    type: OS::Heat::SoftwareDeploymentGroup
    properties:
      config: {get_resource: config}
      servers: {a: web2}
      input_values: {dsn: {get_attr: [dsn, value]}, greeting: {get_param: greeting}}
  visible:
    type: OS::Heat::Value
    properties: {value: {str_replace: {template: "say G", params: {G: {get_param: greeting}}}}}
outputs:
  dsn: {value: {get_attr: [dsn, value]}}
"##;

async fn detail_text(engine: &Engine<SqliteStore>, stack: &str, node: &str) -> (Value, String) {
    let detail = engine.node_detail(stack, node).await.unwrap();
    let value = serde_json::to_value(&detail).unwrap();
    let text = value.to_string();
    (value, text)
}

/// The graph as JSON and as its SVG drawing.
async fn graph_text(engine: &Engine<SqliteStore>, stack: &str) -> String {
    let graph = engine.stack_graph(stack).await.unwrap();
    format!("{}\n{}", serde_json::to_string(&graph).unwrap(), crate::graph::to_svg(&graph))
}

fn shown_input(detail: &Value, name: &str) -> Value {
    let inputs = detail["inputs"].as_array().unwrap();
    inputs.iter().find(|input| input["name"] == name).map(|input| input["value"].clone()).unwrap()
}

/// Asserts that none of `secrets` (nor its upper-case form) is in `text`.
fn assert_masked(text: &str, secrets: &[&str], what: &str) {
    for secret in secrets {
        assert!(
            !text.contains(secret) && !text.contains(&secret.to_uppercase()),
            "{what} shows the secret {secret}: {text}"
        );
    }
}

#[tokio::test]
async fn values_computed_from_a_hidden_parameter_are_masked_in_the_node_detail() {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine_at(&dir.path().join("shim.db"));
    register(&engine, &["web1", "web2"]).await;
    engine.create_stack(request("s", TEMPLATE, &[])).await.unwrap();
    let published = deployments(&engine, "web1").await;
    assert_eq!(input(&published[0], "dsn"), "postgres://app:Sup3r-Secret-Pw@db/app", "the server gets it");

    let (dsn, text) = detail_text(&engine, "s", "dsn").await;
    assert_masked(&text, &[SECRET], "the Value's detail");
    assert_eq!(dsn["attributes"], json!({"value": "******"}));
    let (config, text) = detail_text(&engine, "s", "config").await;
    assert_masked(&text, &[SECRET], "the config's detail");
    assert_eq!(config["attributes"], json!({"config": "******"}));
    let (deploy, text) = detail_text(&engine, "s", "deploy").await;
    assert_masked(&text, &[SECRET], "the deployment's detail");
    let random = input(&published[0], "token").as_str().unwrap().to_owned();
    assert_masked(&text, &[&random], "the deployment's detail (a random string)");
    for name in ["dsn", "shout", "token", "fallback", "deploy_signal_id"] {
        assert_eq!(shown_input(&deploy, name), "******", "input {name}");
    }
    let (member, text) = detail_text(&engine, "s", "group/a").await;
    assert_masked(&text, &[SECRET], "a group member's detail");
    assert_eq!(shown_input(&member, "dsn"), "******");
    assert_eq!(shown_input(&member, "greeting"), "hello-visible");

    // What derives from no hidden parameter is still shown.
    assert_eq!(shown_input(&deploy, "greeting"), "hello-visible");
    assert_eq!(shown_input(&deploy, "deploy_server_id"), "web1");
    let (visible, _) = detail_text(&engine, "s", "visible").await;
    assert_eq!(visible["attributes"], json!({"value": "say hello-visible"}));
    let (server, _) = detail_text(&engine, "s", "server").await;
    assert_eq!(server["attributes"]["name"], "web1");

    engine.deployment_signal(&signal_token(&published[0]), json!({"deploy_stdout": "done"}), None).await.unwrap();
    let member = deployments(&engine, "web2").await;
    engine.deployment_signal(&signal_token(&member[0]), json!({}), None).await.unwrap();
    assert_eq!(status(&engine, "s").await, "CREATE_COMPLETE");
    let (deploy, _) = detail_text(&engine, "s", "deploy").await;
    assert_eq!(deploy["attributes"]["deploy_stdout"], "done", "a hook's outputs are shown as signalled");
    assert_masked(&graph_text(&engine, "s").await, &[SECRET], "the graph");
    // The admin API keeps Heat's outputs: the template chose to output it.
    let shown = engine.show_stack("s").await.unwrap();
    assert_eq!(shown.outputs[0].value, "postgres://app:Sup3r-Secret-Pw@db/app");
    assert_masked(&serde_json::to_string(&shown.resources).unwrap(), &[SECRET], "stack show's resources");
}

const PROVIDER: &str = r##"
heat_template_version: 2018-08-31
parameters:
  password: {type: string}
  token: {type: string, hidden: true, default: Nested-Token-7}
  label: {type: string, default: plain-label}
resources:
  creds:
    type: OS::Heat::Value
    properties: {value: {list_join: [":", [{get_param: password}, {get_param: token}]]}}
  own:
    type: OS::Heat::Value
    properties: {value: {get_param: token}}
  named:
    type: OS::Heat::Value
    properties: {value: {get_param: label}}
outputs:
  creds: {value: {get_attr: [creds, value]}}
"##;

const NESTED: &str = r##"
heat_template_version: 2018-08-31
parameters:
  root_password: {type: string, hidden: true, default: Root-Secret-3}
  member_password: {type: string, hidden: true, default: Member-%index%-Secret-5}
resources:
  app:
    type: app.yaml
    properties: {password: {get_param: root_password}}
  digest:
    type: OS::Heat::Value
    properties: {value: {digest: [sha256, {get_attr: [app, creds]}]}}
  members:
    type: OS::Heat::ResourceGroup
    properties:
      count: 1
      resource_def:
        type: OS::Heat::Value
        properties: {value: {get_param: member_password}}
"##;

#[tokio::test]
async fn values_of_nested_stacks_from_hidden_parameters_are_masked() {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine_at(&dir.path().join("shim.db"));
    let mut create = request("n", NESTED, &[]);
    create.files.insert("app.yaml".into(), json!(PROVIDER));
    engine.create_stack(create).await.unwrap();
    assert_eq!(status(&engine, "n").await, "CREATE_COMPLETE");

    let secrets = ["Root-Secret-3", "Nested-Token-7", "Member-0-Secret-5", "Member-%index%-Secret-5"];
    let graph = engine.stack_graph("n").await.unwrap();
    let names: Vec<String> = graph.nodes.iter().map(|node| node.name.clone()).collect();
    for name in names.iter().filter(|name| name.as_str() != "app/named") {
        let (detail, text) = detail_text(&engine, "n", name).await;
        assert_masked(&text, &secrets, &format!("{name}'s detail"));
        assert_eq!(detail["attributes"], json!({"value": "******"}), "{name}");
    }
    let (digest, _) = detail_text(&engine, "n", "digest").await;
    assert_eq!(digest["attributes"]["value"], "******", "a digest of a hidden value is derived from it");
    let (named, _) = detail_text(&engine, "n", "app/named").await;
    assert_eq!(named["attributes"], json!({"value": "plain-label"}), "a nested default that is not hidden");
    assert_masked(&graph_text(&engine, "n").await, &secrets, "the graph");
}

const REFUSED: &str = r##"
heat_template_version: 2018-08-31
parameters:
  db_password: {type: string, hidden: true, default: Sup3r-Secret-Pw}
resources:
  source:
    type: OS::Heat::Value
    properties: {value: {get_param: db_password}}
  port:
    type: OS::Heat::Value
    properties: {type: number, value: {get_attr: [source, value]}}
  typed:
    type: typed.yaml
    properties: {amount: {get_attr: [source, value]}}
"##;

/// A nested parameter declared hidden, given a value that is not, refused at run time.
const DECLARED: &str = r##"
heat_template_version: 2018-08-31
resources:
  plain: {type: OS::Heat::Value, properties: {value: many}}
  declared:
    type: hidden.yaml
    properties: {amount: {get_attr: [plain, value]}}
"##;

const TYPED: &str = r##"
heat_template_version: 2018-08-31
parameters:
  amount: {type: number}
resources:
  echo: {type: OS::Heat::Value, properties: {value: {get_param: amount}}}
"##;

fn with_typed(name: &str, template: &str) -> crate::model::StackRequest {
    let mut create = request(name, template, &[]);
    create.files.insert("typed.yaml".into(), json!(TYPED));
    create.files.insert("hidden.yaml".into(), json!(TYPED.replace("{type: number}", "{type: number, hidden: true}")));
    create
}

#[tokio::test]
async fn a_refusal_never_quotes_a_value_derived_from_a_hidden_parameter() {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine_at(&dir.path().join("shim.db"));
    // Known from parameters: refused when the stack is checked.
    let known = REFUSED.replace("{get_attr: [source, value]}", "{get_param: db_password}");
    let refused = engine.create_stack(with_typed("v", &known)).await.unwrap_err();
    let crate::model::ServiceError::Template { problems } = refused else { panic!("{refused:?}") };
    assert_masked(&problems.join("\n"), &[SECRET], "the template's problems");
    assert_eq!(
        problems,
        [
            "resource port: property \"value\": a value derived from a hidden parameter is not a valid number \
             (line 11)",
            "resource typed/echo: property \"value\": resources.typed: Property error: typed.Properties.amount: \
             the hidden value is not a valid number",
        ]
    );

    let group = REFUSED.replace("type: typed.yaml", "type: OS::Heat::ResourceGroup").replace(
        "properties: {amount: {get_attr: [source, value]}}",
        "properties: {count: {get_param: db_password}, resource_def: {type: OS::Heat::None}}",
    );
    let refused = engine.create_stack(request("g", &group, &[])).await.unwrap_err();
    let crate::model::ServiceError::Template { problems } = refused else { panic!("{refused:?}") };
    assert_eq!(
        problems,
        ["resource typed: count: the hidden value is not a non-negative integer up to 1000 (line 12)"]
    );

    // Known only at run time: the resources that read it fail.
    engine.create_stack(with_typed("f", REFUSED)).await.unwrap();
    assert_eq!(status(&engine, "f").await, "CREATE_FAILED");
    let shown = engine.show_stack("f").await.unwrap();
    assert_masked(&serde_json::to_string(&shown).unwrap(), &[SECRET], "stack show");
    let reason =
        |name: &str| shown.resources.iter().find(|resource| resource.name == name).unwrap().status_reason.clone();
    assert_eq!(
        reason("port"),
        "property \"value\": a value derived from a hidden parameter or a random string is not a valid number",
        "the reason still says what is wrong"
    );
    assert!(reason("typed/echo").starts_with("property value: cannot be evaluated"), "{}", reason("typed/echo"));
    engine.create_stack(with_typed("d", DECLARED)).await.unwrap();
    let shown = engine.show_stack("d").await.unwrap();
    let reason =
        |name: &str| shown.resources.iter().find(|resource| resource.name == name).unwrap().status_reason.clone();
    assert_eq!(
        reason("declared/echo"),
        "property value: resources.declared: Property error: declared.Properties.amount: the hidden value is not a \
         valid number",
        "a nested hidden parameter's own refusal quotes nothing, so it is shown"
    );
    let events = serde_json::to_string(&engine.stack_events("f").await.unwrap()).unwrap();
    assert_masked(&events, &[SECRET], "the events");
    for name in ["port", "typed/echo"] {
        assert_masked(&detail_text(&engine, "f", name).await.1, &[SECRET], &format!("{name}'s detail"));
    }
    assert_masked(&graph_text(&engine, "f").await, &[SECRET], "the graph");
}
