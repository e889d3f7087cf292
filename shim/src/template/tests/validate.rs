//! Validation tests about resource properties: schemas, kinds, references to configs and handles, servers.

use super::{assert_problem, strings, template};
use crate::template::{Plan, resolve_parameters, validate};

const HEADER: &str = "heat_template_version: 2018-08-31
parameters:
  server: {type: string, default: web1}
  other: {type: string, default: web9}
  secret_server: {type: string, default: db7, hidden: true}
  servers: {type: json, default: {a: web1, b: web2}}
  transport: {type: string, default: NO_SIGNAL}
  timeout: {type: number, default: 600}
  outputs: {type: json, default: [{name: result}]}
  zones: {type: comma_delimited_list, default: 'a,b'}
resources:
";

/// Validates `HEADER` + `resources`; servers web1 and web2 are registered.
pub(super) fn check(resources: &str) -> Result<Plan, Vec<String>> {
    let parsed = template(&format!("{HEADER}{resources}"));
    let parameters = match resolve_parameters(&parsed, &strings(&[])) {
        Ok(parameters) => parameters,
        Err(problems) => panic!("parameters should resolve: {problems:#?}"),
    };
    validate(&parsed, &parameters, &|name| ["web1", "web2"].contains(&name))
}

pub(super) fn problems(resources: &str) -> Vec<String> {
    match check(resources) {
        Ok(plan) => panic!("expected problems, got {plan:#?}"),
        Err(problems) => problems,
    }
}

pub(super) fn plan(resources: &str) -> Plan {
    match check(resources) {
        Ok(plan) => plan,
        Err(problems) => panic!("expected a plan: {problems:#?}"),
    }
}

pub(super) const CONFIG: &str = "  config:
    type: OS::Heat::SoftwareConfig
    properties:
      group: script
      config: echo
      outputs: [{name: result}, {name: url, error_output: false}]
";

#[test]
fn every_type_validates_with_its_properties() {
    let resources = format!(
        "{CONFIG}  structured:
    type: OS::Heat::StructuredConfig
    properties:
      group: os-apply-config
      config: {{port: {{get_input: port}}, nested: [{{get_input: other}}]}}
      inputs: [{{name: port, type: Number, default: 80, replace_on_change: true, description: d}}]
      options: {{}}
  component:
    type: OS::Heat::SoftwareComponent
    properties:
      configs:
        - {{actions: [CREATE], config: a, tool: script}}
        - {{actions: [UPDATE, DELETE], config: b, tool: script}}
      outputs: {{get_param: outputs}}
  deploy:
    type: OS::Heat::StructuredDeployment
    properties:
      config: {{get_resource: structured}}
      server: {{get_param: server}}
      input_values: {{port: 8080}}
      actions: [CREATE, UPDATE, DELETE, SUSPEND, RESUME]
      name: 10_deploy
      signal_transport: {{get_param: transport}}
      input_key: get_input
      input_values_validate: STRICT
  group:
    type: OS::Heat::SoftwareDeploymentGroup
    properties:
      config: {{get_resource: component}}
      servers: {{get_param: servers}}
      input_values: {{from_group: {{get_attr: [deploy, deploy_stdout]}}}}
  handle:
    type: OS::Heat::WaitConditionHandle
    properties: {{signal_transport: TOKEN_SIGNAL}}
  wait:
    type: OS::Heat::WaitCondition
    properties: {{handle: {{get_resource: handle}}, timeout: {{get_param: timeout}}, count: '2'}}
"
    );
    let plan = plan(&resources);
    assert_eq!(plan.nodes.len(), 7);
}

#[test]
fn unknown_and_missing_properties() {
    let problems = problems(
        "  a:
    type: OS::Heat::SoftwareDeployment
    properties: {config_id: x, input_values: {}}
  b:
    type: OS::Heat::WaitCondition
    properties: {handle: null}
  c:
    type: OS::Heat::SoftwareComponent
  d:
    type: OS::Heat::SoftwareDeploymentGroup
    properties: {server: web1}
",
    );
    assert_eq!(
        problems,
        [
            "resource a: unknown property \"config_id\" for OS::Heat::SoftwareDeployment",
            "resource a: missing required property \"server\"",
            "resource b: missing required property \"handle\"",
            "resource b: missing required property \"timeout\"",
            "resource c: missing required property \"configs\"",
            "resource d: unknown property \"server\" for OS::Heat::SoftwareDeploymentGroup",
            "resource d: missing required property \"servers\"",
        ]
    );
}

#[test]
fn value_kinds_and_allowed_values() {
    let problems = problems(
        "  a:
    type: OS::Heat::SoftwareConfig
    properties: {group: [x], config: {a: 1}, options: text, inputs: {name: x}, outputs: 1}
  b:
    type: OS::Heat::SoftwareDeployment
    properties:
      server: web1
      input_values: [1]
      actions: [CREATE, RESTART]
      signal_transport: CARRIER_PIGEON
      name: {get_param: zones}
  c:
    type: OS::Heat::StructuredDeployment
    properties: {server: web1, input_values_validate: SLOPPY, signal_transport: {get_param: server}}
  d:
    type: OS::Heat::WaitConditionHandle
    properties: {signal_transport: SMOKE}
  e:
    type: OS::Heat::StructuredConfig
    properties: {config: script}
",
    );
    for expected in [
        "resource a: property \"group\": must be a string",
        "resource a: property \"config\": must be a string",
        "resource a: property \"options\": must be a map",
        "resource a: property \"inputs\": must be a list",
        "resource a: property \"outputs\": must be a list",
        "resource b: property \"input_values\": must be a map",
        "resource b: property \"actions\": \"RESTART\" is not one of CREATE, UPDATE, DELETE, SUSPEND, RESUME",
        "resource b: property \"signal_transport\": \"CARRIER_PIGEON\" is not one of CFN_SIGNAL",
        "resource b: property \"name\": must be a string",
        "resource c: property \"input_values_validate\": \"SLOPPY\" is not one of LAX, STRICT",
        "resource c: property \"signal_transport\": \"web1\" is not one of",
        "resource d: property \"signal_transport\": \"SMOKE\" is not one of TOKEN_SIGNAL",
        "resource e: property \"config\": must be a map",
    ] {
        assert_problem(&problems, expected);
    }
    assert_eq!(problems.len(), 13, "{problems:#?}");
}

#[test]
fn config_must_be_get_resource_of_a_config() {
    let problems = problems(&format!(
        "{CONFIG}  handle: {{type: OS::Heat::WaitConditionHandle}}
  a:
    type: OS::Heat::SoftwareDeployment
    properties: {{config: 3f2a-literal-id, server: web1}}
  b:
    type: OS::Heat::SoftwareDeployment
    properties: {{config: {{get_resource: handle}}, server: web1}}
  c:
    type: OS::Heat::SoftwareDeploymentGroup
    properties: {{config: {{get_attr: [config, config]}}, servers: {{x: web1}}}}
  d:
    type: OS::Heat::SoftwareDeployment
    properties: {{config: {{get_resource: config}}, server: web1}}
"
    ));
    assert_eq!(
        problems,
        [
            "resource a: property \"config\": config must be {get_resource: <a config resource (OS::Heat::SoftwareConfig, \
             OS::Heat::StructuredConfig or OS::Heat::SoftwareComponent)>}",
            "resource b: property \"config\": \"handle\" is an OS::Heat::WaitConditionHandle, not a config resource \
             (OS::Heat::SoftwareConfig, OS::Heat::StructuredConfig or OS::Heat::SoftwareComponent)",
            "resource c: property \"config\": config must be {get_resource: <a config resource (OS::Heat::SoftwareConfig, \
             OS::Heat::StructuredConfig or OS::Heat::SoftwareComponent)>}",
        ]
    );
}

#[test]
fn servers_must_be_registered() {
    let problems = problems(&format!(
        "{CONFIG}  a:
    type: OS::Heat::SoftwareDeployment
    properties: {{config: {{get_resource: config}}, server: {{get_param: other}}}}
  b:
    type: OS::Heat::SoftwareDeployment
    properties: {{server: web3}}
  c:
    type: OS::Heat::SoftwareDeployment
    properties: {{server: {{get_attr: [a, deploy_stdout]}}}}
  d:
    type: OS::Heat::SoftwareDeployment
    properties: {{server: {{get_resource: config}}}}
  e:
    type: OS::Heat::SoftwareDeploymentGroup
    properties: {{servers: {{x: web1, y: web8, z: {{get_attr: [a, deploy_stdout]}}}}}}
  f:
    type: OS::Heat::SoftwareDeployment
    properties: {{server: {{get_param: secret_server}}}}
  g:
    type: OS::Heat::SoftwareDeployment
    properties: {{server: {{str_replace: {{template: web$n, params: {{$n: 2}}}}}}}}
  h:
    type: OS::Heat::SoftwareDeployment
    properties: {{server: ''}}
"
    ));
    assert_eq!(
        problems,
        [
            "resource a: server \"web9\" is not registered (anneal-shim server add web9)",
            "resource b: server \"web3\" is not registered (anneal-shim server add web3)",
            "resource d: property \"server\": must be the name of a registered server or an \
             OS::Heat::DeployedServer, not \"config\"",
            "resource e: server \"web8\" is not registered (anneal-shim server add web8)",
            "resource f: the server named by a hidden parameter is not registered",
            "resource h: the server name is empty",
        ]
    );
    assert!(!problems.iter().any(|problem| problem.contains("db7")));
}

#[test]
fn config_inputs_outputs_and_component_entries() {
    let problems = problems(
        "  a:
    type: OS::Heat::SoftwareConfig
    properties:
      inputs:
        - {name: ok}
        - {description: no name}
        - {name: t, type: Integer, replace_on_change: sometimes}
        - {name: u, colour: red}
        - just a string
      outputs:
        - {name: out, error_output: maybe}
        - {type: String}
  b:
    type: OS::Heat::SoftwareComponent
    properties:
      configs:
        - {config: a}
        - {actions: [CREATE], tool: script}
        - {actions: [DELETE, DELETE], tool: script, extra: 1}
  c:
    type: OS::Heat::SoftwareComponent
    properties: {configs: []}
",
    );
    assert_eq!(
        problems,
        [
            "resource a: property \"inputs[1]\": missing required key \"name\"",
            "resource a: property \"inputs[2]\" key \"type\": \"Integer\" is not one of String, Number, \
             CommaDelimitedList, Json, Boolean",
            "resource a: property \"inputs[2]\" key \"replace_on_change\": must be a boolean",
            "resource a: property \"inputs[3]\": unknown key \"colour\"",
            "resource a: property \"inputs[4]\": must be a map, not a string",
            "resource a: property \"outputs[0]\" key \"error_output\": must be a boolean",
            "resource a: property \"outputs[1]\": missing required key \"name\"",
            "resource b: property \"configs[0]\": missing required key \"tool\"",
            "resource b: property \"configs[2]\": unknown key \"extra\"",
            "resource b: property \"configs\": action \"CREATE\" appears in more than one entry",
            "resource b: property \"configs\": action \"DELETE\" appears in more than one entry",
            "resource c: property \"configs\": needs at least one entry",
        ]
    );
}

#[test]
fn wait_condition_rules() {
    let problems = problems(
        "  handle: {type: OS::Heat::WaitConditionHandle}
  config: {type: OS::Heat::SoftwareConfig}
  a:
    type: OS::Heat::WaitCondition
    properties: {handle: {get_resource: config}, timeout: 0}
  b:
    type: OS::Heat::WaitCondition
    properties: {handle: some-handle-id, timeout: 43201, count: 0}
  c:
    type: OS::Heat::WaitCondition
    properties: {handle: {get_resource: handle}, timeout: ten, count: -1}
  d:
    type: OS::Heat::WaitCondition
    properties: {handle: {get_resource: handle}, timeout: 43200, count: 1}
",
    );
    assert_eq!(
        problems,
        [
            "resource a: property \"handle\": \"config\" is an OS::Heat::SoftwareConfig, not an OS::Heat::WaitConditionHandle",
            "resource a: property \"timeout\": must be between 1 and 43200",
            "resource b: property \"handle\": handle must be {get_resource: <an OS::Heat::WaitConditionHandle>}",
            "resource b: property \"timeout\": must be between 1 and 43200",
            "resource b: property \"count\": must be at least 1",
            "resource c: property \"timeout\": must be an integer",
            "resource c: property \"count\": must be at least 1",
        ]
    );
}

/// As Heat's validate: a type that resolves its attributes itself (the deployments and
/// deployment groups, whatever their config declares, with or without a config) accepts any
/// name, which is refused when it is read if the config does not declare it (the engine's
/// `deployment_output_tests`); every other type refuses a name outside its schema.
#[test]
fn attributes_must_exist_for_the_type() {
    let resources = format!(
        "{CONFIG}  handle: {{type: OS::Heat::WaitConditionHandle}}
  wait:
    type: OS::Heat::WaitCondition
    properties: {{handle: {{get_resource: handle}}, timeout: 10}}
  deploy:
    type: OS::Heat::SoftwareDeployment
    properties: {{config: {{get_resource: config}}, server: web1}}
  bare:
    type: OS::Heat::SoftwareDeployment
    properties: {{server: web1}}
  group:
    type: OS::Heat::SoftwareDeploymentGroup
    properties: {{config: {{get_resource: config}}, servers: {{a: web1}}}}
  structured_group:
    type: OS::Heat::StructuredDeployments
    properties: {{config: {{get_resource: config}}, servers: {{a: web1}}}}
  component:
    type: OS::Heat::SoftwareComponent
    properties: {{configs: [{{tool: script}}], outputs: {{get_param: outputs}}}}
  by_component:
    type: OS::Heat::SoftwareDeployment
    properties: {{config: {{get_resource: component}}, server: web1}}
  user:
    type: OS::Heat::SoftwareConfig
    properties:
      options:
        good: [{{get_attr: [config, config]}}, {{get_attr: [handle, curl_cli]}}, {{get_attr: [handle, endpoint]}},
               {{get_attr: [handle, token]}}, {{get_attr: [handle, signal]}}, {{get_attr: [wait, data]}},
               {{get_attr: [deploy, deploy_stdout]}}, {{get_attr: [deploy, deploy_stderr]}},
               {{get_attr: [deploy, deploy_status_code]}}, {{get_attr: [deploy, result]}}, {{get_attr: [deploy, url]}},
               {{get_attr: [group, deploy_stdouts]}}, {{get_attr: [group, deploy_stderrs]}},
               {{get_attr: [group, deploy_status_codes]}}, {{get_attr: [group, result]}},
               {{get_attr: [group, deploy_stdout]}}, {{get_attr: [group, deploy_status_code]}},
               {{get_attr: [by_component, result]}}]
        undeclared: [{{get_attr: [deploy, nothing]}}, {{get_attr: [bare, result]}}, {{get_attr: [group, nothing]}},
                     {{get_attr: [by_component, other]}}, {{get_attr: [structured_group, nothing, a]}},
                     {{get_attr: [deploy, show]}}]
        bad: [{{get_attr: [config, outputs]}}, {{get_attr: [handle, data]}}, {{get_attr: [wait, token]}}]
"
    );
    let problems = problems(&resources);
    let prefix = "resource user: property \"options\": get_attr: resource";
    assert_eq!(
        problems,
        [
            format!("{prefix} \"config\" (OS::Heat::SoftwareConfig) has no attribute \"outputs\""),
            format!("{prefix} \"handle\" (OS::Heat::WaitConditionHandle) has no attribute \"data\""),
            format!("{prefix} \"wait\" (OS::Heat::WaitCondition) has no attribute \"token\""),
        ]
    );
}

/// `template validate` asks for no parameter values, as Heat's validate: a parameter without
/// one is `unvalued` (its placeholder stands in), and no check of a value computed from it is
/// made (heat.engine.service.validate_template validates with `strict_validate=False`); the
/// checks that need no value still are.
#[test]
fn a_parameter_without_a_value_is_not_checked_as_its_placeholder() {
    use crate::template::checks::Incomplete;
    use crate::template::expr::budget::{Budget, EVALUATION_BUDGET};
    use crate::template::validate::validate_incomplete;
    let text = "heat_template_version: 2016-10-14
parameters:
  servers: {type: json}
  length: {type: number}
resources:
  config:
    type: OS::Heat::SoftwareConfig
    properties: {config: echo}
  deploy:
    type: OS::Heat::SoftwareDeploymentGroup
    properties:
      config: {get_resource: config}
      servers: {get_param: [servers, Controller]}
      signal_transport: SMOKE_SIGNAL
  word:
    type: OS::Heat::RandomString
    properties: {length: {get_param: [length]}, colour: red}
";
    let parsed = template(text);
    // What `template validate` checks with: a placeholder for each parameter without a value.
    let parameters = [("servers", serde_json::json!({})), ("length", serde_json::json!(1))];
    let parameters = parameters.into_iter().map(|(name, value)| (name.to_owned(), value)).collect();
    let check = |unvalued: &[&str]| {
        let incomplete =
            Incomplete { unvalued: unvalued.iter().map(|name| (*name).to_owned()).collect(), ..Incomplete::default() };
        let budget = Budget::new(EVALUATION_BUDGET);
        validate_incomplete(&parsed, &parameters, &|_| true, &incomplete, &budget).unwrap_err()
    };
    let value_independent = [
        "resource deploy: property \"signal_transport\": \"SMOKE_SIGNAL\" is not one of CFN_SIGNAL, TEMP_URL_SIGNAL, \
         HEAT_SIGNAL, ZAQAR_SIGNAL, NO_SIGNAL",
        "resource word: unknown property \"colour\" for OS::Heat::RandomString",
    ];
    assert_eq!(check(&["servers", "length"]), value_independent);
    let mut placeholder_checked = check(&[]);
    placeholder_checked.sort();
    assert!(placeholder_checked.contains(&"resource deploy: property \"servers\": must be a map".to_owned()));
}

#[test]
fn get_input_only_in_a_structured_config() {
    let problems = problems(
        "  a:
    type: OS::Heat::SoftwareDeployment
    properties: {server: web1, input_values: {v: {get_input: x}}}
  b:
    type: OS::Heat::StructuredConfig
    properties: {config: {x: {get_input: x}}, options: {y: {get_input: y}}}
outputs:
  o:
    value: {get_input: z}
",
    );
    assert_eq!(
        problems,
        [
            "resource a: property \"input_values\": get_input is only allowed in the config of an OS::Heat::StructuredConfig",
            "resource b: property \"options\": get_input is only allowed in the config of an OS::Heat::StructuredConfig",
            "output o: get_input is only allowed in the config of an OS::Heat::StructuredConfig",
        ]
    );
}

#[test]
fn evaluation_problems_are_reported() {
    let problems = problems(
        "  a:
    type: OS::Heat::SoftwareConfig
    properties:
      config: {str_replace: {template: {get_param: zones}, params: {}}}
      group: {list_join: [',', {get_param: server}]}
outputs:
  o:
    value: {str_replace: {template: x, params: {get_param: zones}}}
",
    );
    assert_eq!(
        problems,
        [
            "resource a: property \"config\": str_replace: template must be a string, not a list",
            "resource a: property \"group\": list_join: expected lists, got a string",
            "output o: str_replace: params must be a map, not a list",
        ]
    );
}
