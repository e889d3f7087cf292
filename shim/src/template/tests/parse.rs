//! parse_template tests: HOT structure, accepted and rejected keys, parameter declarations, constraints.

use serde_json::json;

use super::{assert_problem, parse_problems, template};
use crate::template::{Constraint, Expr, ParameterType, ResourceType, TemplateError, parse_template};

const FULL: &str = r#"
heat_template_version: 2018-08-31
description: Two components
parameter_groups:
  - parameters: [server]
parameters:
  server:
    type: string
    description: where to deploy
  password:
    type: string
    hidden: true
    constraints:
      - length: {min: 8}
        description: at least eight characters
  port:
    type: number
    default: 8080
    label: Port
resources:
  db_config:
    type: OS::Heat::SoftwareConfig
    properties:
      group: script
      config: |
        #!/bin/sh
        echo hi
      outputs:
        - name: url
  db_deploy:
    type: OS::Heat::SoftwareDeployment
    depends_on: db_config
    properties:
      config: {get_resource: db_config}
      server: {get_param: server}
  web_deploy:
    type: OS::Heat::SoftwareDeployment
    description: ignored, as in Heat
    depends_on: [db_deploy, db_config, db_deploy]
    properties:
      config: {get_resource: db_config}
      server: {get_param: server}
      input_values:
        db_url: {get_attr: [db_deploy, url]}
outputs:
  url:
    description: the database
    value: {get_attr: [db_deploy, url]}
"#;

#[test]
fn parses_a_full_template_in_declaration_order() {
    let parsed = template(FULL);
    assert_eq!(parsed.version, "2018-08-31");
    assert_eq!(parsed.description.as_deref(), Some("Two components"));
    let names: Vec<&str> = parsed.parameters.iter().map(|(name, _)| name.as_str()).collect();
    assert_eq!(names, ["server", "password", "port"]);
    let password = &parsed.parameters[1].1;
    assert!(password.hidden);
    assert_eq!(password.kind, ParameterType::String);
    assert_eq!(
        password.constraints,
        [Constraint::Length { min: Some(8), max: None, description: Some("at least eight characters".into()) }]
    );
    assert_eq!(parsed.parameters[2].1.default, Some(json!(8080)));

    let names: Vec<&str> = parsed.resources.iter().map(|(name, _)| name.as_str()).collect();
    assert_eq!(names, ["db_config", "db_deploy", "web_deploy"]);
    let (_, db_deploy) = &parsed.resources[1];
    assert_eq!(db_deploy.kind, ResourceType::SoftwareDeployment);
    assert_eq!(db_deploy.line, 30);
    assert_eq!(db_deploy.depends_on, ["db_config"]);
    assert_eq!(db_deploy.properties[0], ("config".to_owned(), Expr::GetResource("db_config".into())));
    assert_eq!(parsed.resources[2].1.depends_on, ["db_deploy", "db_config"]);

    assert_eq!(parsed.outputs.len(), 1);
    let (name, output) = &parsed.outputs[0];
    assert_eq!(name, "url");
    assert_eq!(output.description.as_deref(), Some("the database"));
    assert_eq!(output.value, Expr::GetAttr { resource: "db_deploy".into(), attribute: "url".into(), path: vec![] });
}

#[test]
fn json_templates_parse_like_yaml() {
    let text = r#"{
  "heat_template_version": "2015-10-15",
  "parameters": {"server": {"type": "string", "default": "web1"}},
  "resources": {
    "config": {"type": "OS::Heat::SoftwareConfig", "properties": {"config": "echo"}},
    "deploy": {"type": "OS::Heat::SoftwareDeployment",
               "properties": {"config": {"get_resource": "config"}, "server": {"get_param": "server"}}}
  }
}"#;
    let parsed = template(text);
    assert_eq!(parsed.version, "2015-10-15");
    assert_eq!(parsed.resources.len(), 2);
    assert_eq!(parsed.resources[1].1.line, 6);
    assert_eq!(parsed.parameters[0].1.default, Some(json!("web1")));
}

#[test]
fn minimal_template_and_empty_sections() {
    let parsed = template("heat_template_version: rocky\nresources:\nparameters: {}\noutputs:\n");
    assert_eq!(parsed.version, "rocky");
    assert!(parsed.resources.is_empty() && parsed.parameters.is_empty() && parsed.outputs.is_empty());
}

#[test]
fn version_is_required_and_checked() {
    let problems = parse_problems("resources: {}\n");
    assert_eq!(problems, ["heat_template_version is required"]);
    assert_problem(&parse_problems("heat_template_version: 2012-01-01\n"), "heat_template_version must be one of");
    assert_problem(&parse_problems("heat_template_version: 2013\n"), "heat_template_version must be one of");
    assert_problem(&parse_problems("AWSTemplateFormatVersion: 2010-09-09\n"), "only HOT templates are supported");
}

#[test]
fn top_level_keys() {
    let problems = parse_problems("heat_template_version: 2018-08-31\nconditions: {}\nextra: 1\n");
    assert_eq!(problems, ["unknown top-level key \"extra\" (line 3)"]);
    assert_problem(&parse_problems("- a\n- b\n"), "must be a YAML mapping");
    assert_problem(
        &parse_problems("heat_template_version: 2018-08-31\nresources: [a]\n"),
        "resources must be a mapping",
    );
    assert_problem(
        &parse_problems("heat_template_version: 2018-08-31\ndescription: [a]\n"),
        "description must be a string",
    );
}

#[test]
fn resource_keys() {
    let text = "heat_template_version: 2018-08-31
resources:
  a:
    type: OS::Heat::SoftwareConfig
    metadata: [1]
    deletion_policy: Keep
    update_policy: 3
    condition: c
    external_id: x
    bogus: 1
  b:
    properties: {}
  c:
    type: OS::Nova::Server
  d: [1]
  e:
    type: OS::Heat::SoftwareConfig
    depends_on: {a: 1}
  f:
    type: OS::Heat::SoftwareConfig
    properties: [1]
";
    let problems = parse_problems(text);
    for expected in [
        "resource a: metadata must be a mapping (line 5)",
        "resource a: Invalid deletion policy \"Keep\" (line 6)",
        "resource a: Resource a update_policy type must be object (line 7)",
        "resource a: condition: Invalid condition \"c\" (line 8)",
        "resource a: \"external_id\" is not supported: anneal-shim creates no physical resources to adopt (line 9)",
        "resource a: unknown key \"bogus\" (line 10)",
        "resource b: type is required (line 11)",
        "resource c: OS::Nova::Server is an infrastructure type anneal-shim does not create",
        "resource \"d\": the definition must be a mapping (line 15)",
        "resource e: depends_on must be a resource name or a list of names (line 18)",
        "resource f: properties must be a mapping (line 21)",
    ] {
        assert_problem(&problems, expected);
    }
    assert_eq!(problems.len(), 11, "{problems:#?}");
}

#[test]
fn unsupported_functions_are_rejected_with_the_property() {
    let text = "heat_template_version: 2018-08-31
resources:
  a:
    type: OS::Heat::SoftwareConfig
    properties:
      config: {get_file: script.sh}
      options: {x: {yaql: {expression: $.data.orderBy($), data: {}}}}
outputs:
  o:
    value: {Fn::GetAtt: [a, config]}
";
    let problems = parse_problems(text);
    assert_eq!(
        problems,
        [
            "resource a: get_file: no file \"script.sh\" in the request's files (the client reads it relative \
             to the template) (line 6)",
            "resource a: property \"options\": Bad expression \"$.data.orderBy($)\": not in the supported yaql \
             subset (docs/templates.md, \"yaql\"): method .orderBy() (line 7)",
            "output o: unsupported function Fn::GetAtt (line 10)",
        ]
    );
}

#[test]
fn output_keys() {
    let text = "heat_template_version: 2018-08-31\noutputs:\n  a:\n    description: x\n  b:\n    value: 1\n    condition: c\n    other: 2\n";
    assert_eq!(
        parse_problems(text),
        [
            "output a: value is required (line 3)",
            "output b: condition: Invalid condition \"c\" (line 7)",
            "output b: unknown key \"other\" (line 8)",
        ]
    );
    let parsed = template("heat_template_version: 2018-08-31\noutputs:\n  a:\n    value:\n");
    assert_eq!(parsed.outputs[0].1.value, Expr::Literal(json!(null)));
}

#[test]
fn parameter_declarations() {
    let text = "heat_template_version: 2018-08-31
parameters:
  a: {type: integer}
  b: {default: 1}
  c: {type: string, hidden: maybe}
  d: {type: string, bogus: 1}
  e: {type: number, constraints: [{length: {min: 1}}]}
  f: {type: string, constraints: [{custom_constraint: ''}]}
  g: {type: string, constraints: [{allowed_pattern: '(unclosed'}]}
  h: {type: number, constraints: [{range: {min: 5, max: 1}}]}
  i: {type: string, constraints: [{length: {min: -1}}]}
  j: {type: string, constraints: [{allowed_values: []}]}
  k: {type: string, constraints: [{length: {min: 1}, allowed_values: [a]}]}
  l: {type: string, constraints: [{modulo: {step: 2, offset: 1}}]}
  m: {type: boolean, constraints: [{allowed_pattern: x}]}
  n: {type: string, constraints: {length: {min: 1}}}
  o: {type: string, constraints: [{description: only}]}
";
    let problems = parse_problems(text);
    for expected in [
        "parameter \"a\": unknown type \"integer\"",
        "parameter \"b\": type is required (line 4)",
        "parameter \"c\": hidden (line 5) must be true or false",
        "parameter \"d\": unknown key \"bogus\" (line 6)",
        "parameter \"e\": constraint length does not apply to a number parameter",
        "parameter \"f\": custom_constraint must be a constraint name",
        "parameter \"g\": allowed_pattern \"(unclosed\" is not a valid regular expression",
        "parameter \"h\": range min is greater than max",
        "parameter \"i\": length bounds must be non-negative integers",
        "parameter \"j\": allowed_values must be a non-empty list",
        "parameter \"k\": each constraint must have exactly one rule",
        "parameter \"l\": the modulo constraint is not supported",
        "parameter \"m\": constraint allowed_pattern does not apply to a boolean parameter",
        "parameter \"n\": constraints must be a list",
        "parameter \"o\": a constraint needs a rule",
    ] {
        assert_problem(&problems, expected);
    }
    assert_eq!(problems.len(), 15, "{problems:#?}");
}

#[test]
fn parameter_types_and_constraint_kinds() {
    let text = "heat_template_version: 2018-08-31
parameters:
  s: {type: string, constraints: [{allowed_pattern: '[a-z]+', description: lower case}]}
  n: {type: number, constraints: [{range: {min: 1, max: 10.5}}, {allowed_values: [1, 2]}]}
  j: {type: json, default: {a: 1}, constraints: [{length: {max: 3}}]}
  l: {type: comma_delimited_list, default: 'a, b'}
  b: {type: boolean, default: yes, hidden: 'true'}
";
    let parsed = template(text);
    let kinds: Vec<ParameterType> = parsed.parameters.iter().map(|(_, parameter)| parameter.kind).collect();
    use ParameterType::*;
    assert_eq!(kinds, [String, Number, Json, CommaDelimitedList, Boolean]);
    assert_eq!(
        parsed.parameters[1].1.constraints,
        [
            Constraint::Range { min: Some(1.0), max: Some(10.5), description: None },
            Constraint::AllowedValues { values: vec![json!(1), json!(2)], description: None },
        ]
    );
    assert_eq!(parsed.parameters[0].1.constraints[0].description(), Some("lower case"));
    assert!(parsed.parameters[4].1.hidden);
    assert_eq!(parsed.parameters[4].1.default, Some(json!(true)));
}

#[test]
fn all_problems_are_collected() {
    let Err(TemplateError::Invalid { problems }) =
        parse_template("heat_template_version: 2018-08-31\nbad1: 1\nbad2: 2\nresources:\n  a: {type: nope}\n")
    else {
        panic!("expected structural problems");
    };
    assert_eq!(problems.len(), 3, "{problems:#?}");
    let error = TemplateError::Invalid { problems: problems.clone() };
    assert_eq!(error.to_string(), problems.join("; "));
}

#[test]
fn resource_type_names_round_trip() {
    for kind in ResourceType::ALL {
        assert_eq!(ResourceType::parse(kind.name()), Some(kind));
        assert!(kind.name().starts_with("OS::Heat::"));
    }
    assert_eq!(ResourceType::parse("OS::Heat::StructuredDeployments"), Some(ResourceType::StructuredDeploymentGroup));
    assert_eq!(ResourceType::parse("OS::Heat::StructuredDeploymentGroups"), None);
    for kind in [ParameterType::String, ParameterType::CommaDelimitedList, ParameterType::Json] {
        assert_eq!(ParameterType::parse(kind.name()), Some(kind));
    }
}
