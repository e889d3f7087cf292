//! Validation of the computing and binding resource types (None, Value, RandomString,
//! DeployedServer), Heat's deprecated aliases, the accepted resource keys and the parameter
//! keys `custom_constraint`, `immutable` and `parameter_groups`.

use serde_json::json;

use super::validate::{plan, problems};
use super::{assert_problem, parse_problems, strings, template};
use crate::template::{Constraint, ResourceType, resolve_parameters, validate};

#[test]
fn none_takes_any_property_and_answers_any_attribute() {
    let plan = plan(
        "  stub:
    type: OS::Heat::None
    properties: {anything: {nested: [1]}, flavor: m1.small}
  value:
    type: OS::Heat::Value
    properties: {value: {get_attr: [stub, first_address]}}
",
    );
    assert_eq!(plan.nodes[0].kind, ResourceType::None);
    assert_eq!(plan.nodes[1].depends_on, ["stub"]);
}

#[test]
fn value_and_random_string_schemas() {
    let problems = problems("  v1: {type: OS::Heat::Value, properties: {type: integer, value: 1}}
  v2: {type: OS::Heat::Value}
  v3: {type: OS::Heat::Value, properties: {value: 1, type: number}}
  r1: {type: OS::Heat::RandomString, properties: {length: 513}}
  r2: {type: OS::Heat::RandomString, properties: {character_classes: [{class: symbols}, {min: 0}]}}
  r3: {type: OS::Heat::RandomString, properties: {character_sequences: [{min: 2}, {sequence: ''}]}}
  r4:
    type: OS::Heat::RandomString
    properties: {length: 4, character_classes: [{class: digits, min: 3}], character_sequences: [{sequence: '!'}, {sequence: '#'}]}
  r5: {type: OS::Heat::RandomString, properties: {length: 8, sequence: hexdigits, salt: 1}}
  out: {type: OS::Heat::Value, properties: {value: {get_attr: [r5, length]}}}
");
    for expected in [
        "resource v1: property \"type\": \"integer\" is not one of string, number, comma_delimited_list, json, boolean",
        "resource v2: missing required property \"value\"",
        "resource r1: property \"length\": must be between 1 and 512",
        "resource r2: property \"character_classes[0]\" key \"class\": \"symbols\" is not one of lettersdigits",
        "resource r2: property \"character_classes[1]\" key \"min\": must be between 1 and 512",
        "resource r3: property \"character_sequences[0]\": missing required key \"sequence\"",
        "resource r3: property \"character_sequences[1]\" key \"sequence\": must not be empty",
        "resource r4: Length property cannot be smaller than combined character class and character sequence minimums",
        "resource out: property \"value\": get_attr: resource \"r5\" (OS::Heat::RandomString) has no attribute \"length\"",
    ] {
        assert_problem(&problems, expected);
    }
    assert_eq!(problems.len(), 9, "{problems:#?}");
}

#[test]
fn the_deprecated_group_alias_is_a_deployment_group() {
    let plan = plan(&format!(
        "{}  group:
    type: OS::Heat::SoftwareDeployments
    properties: {{config: {{get_resource: config}}, servers: {{a: web1}}}}
",
        super::validate::CONFIG
    ));
    assert_eq!(plan.nodes[1].kind, ResourceType::SoftwareDeploymentGroup);
}

#[test]
fn deployed_servers_bind_registered_servers() {
    let plan = plan(&format!(
        "{}  web1: {{type: OS::Heat::DeployedServer}}
  db:
    type: OS::Heat::DeployedServer
    properties: {{name: web2, software_config_transport: POLL_SERVER_HEAT, image: fedora, flavor: m1.small,
                 networks: [{{network: private}}], user_data_format: SOFTWARE_CONFIG, user_data: {{get_resource: config}}}}
  deploy:
    type: OS::Heat::SoftwareDeployment
    properties: {{config: {{get_resource: config}}, server: {{get_resource: db}}}}
  group:
    type: OS::Heat::SoftwareDeploymentGroup
    properties: {{config: {{get_resource: config}}, servers: {{a: {{get_resource: web1}}}}}}
  name: {{type: OS::Heat::Value, properties: {{value: {{get_attr: [db, name]}}}}}}
",
        super::validate::CONFIG
    ));
    let deploy = plan.nodes.iter().find(|node| node.name == "deploy").unwrap();
    assert_eq!(deploy.depends_on, ["config", "db"]);
    // Unregistered names are the servers the stack creates; only a name no server can have is refused.
    let problems = problems(
        "  web7: {type: OS::Heat::DeployedServer}
  named: {type: OS::Heat::DeployedServer, properties: {name: db3, metadata: {a: 1}}}
  bad: {type: OS::Heat::DeployedServer, properties: {name: \"no/slash\"}}
  address: {type: OS::Heat::Value, properties: {value: {get_attr: [named, console_urls]}}}
",
    );
    assert_eq!(
        problems,
        [
            "resource bad: server name \"no/slash\" must be 1-64 characters of [A-Za-z0-9._-] not starting with '.'",
            "resource address: property \"value\": get_attr: resource \"named\" (OS::Heat::DeployedServer) has no \
             attribute \"console_urls\"",
        ]
    );
}

#[test]
fn resource_keys_heat_accepts() {
    let parsed = template(
        "heat_template_version: 2018-08-31
resources:
  a:
    type: OS::Heat::None
    metadata: {role: web}
    deletion_policy: retain
    update_policy: {}
",
    );
    assert_eq!(parsed.resources.len(), 1);
}

#[test]
fn custom_constraints_check_registered_servers() {
    let parsed = template(
        "heat_template_version: 2018-08-31
parameters:
  server: {type: string, constraints: [{custom_constraint: nova.server}]}
  servers: {type: comma_delimited_list, default: 'web1,web5', constraints: [{custom_constraint: nova.server}]}
  secret: {type: string, default: db9, hidden: true, constraints: [{custom_constraint: nova.server}]}
  flavor: {type: string, default: m1.tiny, constraints: [{custom_constraint: nova.flavor, description: a flavor}]}
",
    );
    assert_eq!(
        parsed.parameters[3].1.constraints,
        [Constraint::Custom { name: "nova.flavor".into(), description: Some("a flavor".into()) }]
    );
    let parameters = resolve_parameters(&parsed, &strings(&[("server", "web1")])).unwrap();
    let problems = validate(&parsed, &parameters, &|name| name == "web1").unwrap_err();
    assert_eq!(
        problems,
        [
            "parameter \"servers\": custom_constraint nova.server: server \"web5\" is not registered (anneal-shim \
             server add)",
            "parameter \"secret\": custom_constraint nova.server: the server it names is not registered (anneal-shim \
             server add)",
        ]
    );
}

#[test]
fn immutable_parameters_and_their_changes() {
    let parsed = template(
        "heat_template_version: 2018-08-31
parameters:
  fixed: {type: string, immutable: true, default: a}
  free: {type: string, default: a, tags: [x]}
  added: {type: string, immutable: true, default: a}
",
    );
    let old = json!({"fixed": "a", "free": "a"});
    let changed = super::values(&[("fixed", json!("b")), ("free", json!("b")), ("added", json!("b"))]);
    assert_eq!(parsed.immutable_changes(old.as_object().unwrap(), &changed), ["fixed"]);
    let same = super::values(&[("fixed", json!("a")), ("free", json!("c"))]);
    assert!(parsed.immutable_changes(old.as_object().unwrap(), &same).is_empty());
    assert_problem(
        &parse_problems("heat_template_version: 2018-08-31\nparameters:\n  p: {type: string, immutable: often}\n"),
        "parameter \"p\": immutable (line 3) must be true or false",
    );
}

#[test]
fn parameter_groups_name_declared_parameters_once() {
    let problems = parse_problems(
        "heat_template_version: 2018-08-31
parameters:
  a: {type: string}
  b: {type: string}
parameter_groups:
- label: one
  parameters: [a, missing]
- label: two
  parameters: [a]
- label: three
- {parameters: b}
",
    );
    assert_eq!(
        problems,
        [
            "Parameter Groups error: The grouped parameter missing does not reference a valid parameter. (line 6)",
            "Parameter Groups error: The a parameter must be assigned to one parameter group only. (line 8)",
            "Parameter Groups error: The parameters must be provided for each parameter group. (line 10)",
            "Parameter Groups error: The parameters of parameter group should be a list. (line 11)",
        ]
    );
    template(
        "heat_template_version: 2018-08-31\nparameters:\n  a: {type: string}\nparameter_groups: [{parameters: [a]}]\n",
    );
}

#[test]
fn a_cloud_config_is_a_config_a_deployment_can_use() {
    let plan = plan(
        "  cc:
    type: OS::Heat::CloudConfig
    properties: {cloud_config: {packages: [nginx]}}
  deploy:
    type: OS::Heat::SoftwareDeployment
    properties: {config: {get_resource: cc}, server: web1}
  text: {type: OS::Heat::Value, properties: {value: {get_attr: [cc, config]}}}
",
    );
    assert_eq!(plan.nodes[0].kind, ResourceType::CloudConfig);
    let problems = problems("  cc: {type: OS::Heat::CloudConfig, properties: {cloud_config: [1], group: script}}\n");
    assert_eq!(
        problems,
        [
            "resource cc: property \"cloud_config\": must be a map",
            "resource cc: unknown property \"group\" for OS::Heat::CloudConfig",
        ]
    );
}

#[test]
fn multipart_mime_parts() {
    plan("  cc: {type: OS::Heat::CloudConfig, properties: {cloud_config: {}}}
  mime:
    type: OS::Heat::MultipartMime
    properties: {group: ungrouped, parts: [{config: {get_resource: cc}}, {config: '#!/bin/sh', filename: a.sh, subtype: x-shellscript, type: text}]}
  deploy:
    type: OS::Heat::SoftwareDeployment
    properties: {config: {get_resource: mime}, server: web1}
");
    let problems = problems(
        "  mime:
    type: OS::Heat::MultipartMime
    properties: {parts: [{filename: a.sh}, {config: x, type: mime}, {config: x, other: 1}]}
",
    );
    assert_eq!(
        problems,
        [
            "resource mime: property \"parts[0]\": missing required key \"config\"",
            "resource mime: property \"parts[1]\" key \"type\": \"mime\" is not one of text, multipart",
            "resource mime: property \"parts[2]\": unknown key \"other\"",
        ]
    );
}
