//! `check_template`: every problem of a template in one pass, each once, located and sorted by
//! line, whatever stage found it; a broken part does not hide the rest nor cause more problems.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use crate::template::{
    CheckRequest, EVALUATION_BUDGET, Environment, MAX_PROBLEMS, MaxResources, ServerAddresses, Servers, Template,
    check_template,
};

/// The problems of `text` with `given` parameters, against a registry holding `web1`.
fn problems(text: &str, given: &[(&str, &str)], files: &Map<String, Value>) -> Vec<String> {
    problems_with(text, given, files, &Value::Null)
}

/// `problems` with an environment (its problems reported with the template's).
fn problems_with(text: &str, given: &[(&str, &str)], files: &Map<String, Value>, environment: &Value) -> Vec<String> {
    let (environment, environment_problems) = Environment::from_value_collecting(environment);
    let given: BTreeMap<String, String> =
        given.iter().map(|(name, value)| ((*name).to_owned(), (*value).to_owned())).collect();
    let texts = |_: &Template| given.clone();
    let lookup = |server: &str| (server == "web1").then(ServerAddresses::default);
    let request = CheckRequest {
        text,
        environment: &environment,
        environment_problems,
        files,
        texts: &texts,
        pseudo: &[("OS::stack_name", json!("s"))],
        servers: Servers::Registered(&lookup),
        max_resources: MaxResources::default(),
        evaluation_budget: EVALUATION_BUDGET,
    };
    match check_template(request) {
        Ok(_) => panic!("template should be refused"),
        Err(problems) => problems,
    }
}

/// tests/fixtures/one_pass/every_kind.yaml (also what tests/tests/one_pass_errors.rs sends):
/// one problem of each kind: a missing parameter value (line 3), an unknown type (7), a
/// get_param of an undeclared parameter (9), a property of the wrong type (15), a get_attr of
/// an unknown resource (19) and a get_resource of one (21). The deployment's config and the
/// outputs read the resource of unknown type: nothing more may be reported for them.
const EVERY_KIND: &str = include_str!("../../../../tests/fixtures/one_pass/every_kind.yaml");

#[test]
fn every_kind_of_problem_is_reported_once_by_line() {
    let found = problems(EVERY_KIND, &[], &Map::new());
    let lines: Vec<&str> =
        found.iter().map(|problem| problem.rsplit_once("(line ").map_or("", |(_, line)| line)).collect();
    assert_eq!(lines, ["3)", "7)", "9)", "15)", "17)", "17)"], "{found:#?}");
    assert_eq!(found[0], "parameter \"message\": no value (line 3)");
    assert!(found[1].starts_with("resource config: unknown resource type \"OS::Heat::SoftwareConfg\""), "{found:#?}");
    assert!(found[1].contains("did you mean OS::Heat::SoftwareConfig"), "{found:#?}");
    assert_eq!(
        found[2],
        "resource config: property \"config\": get_param names an unknown parameter \"undeclared\" (line 9)"
    );
    assert!(found[3].starts_with("resource deploy: property \"input_values\""), "{found:#?}");
    assert_eq!(found[4], "output result: get_attr names an unknown resource \"ghost\" (line 17)");
    assert_eq!(found[5], "output result: get_resource names an unknown resource \"nowhere\" (line 17)");
}

#[test]
fn an_unknown_type_lists_at_most_a_few_near_matches() {
    let found = problems(EVERY_KIND, &[("message", "hello")], &Map::new());
    let suggestions = found[0].split("did you mean ").nth(1).unwrap_or("");
    assert!(suggestions.split(", ").count() <= 3, "{found:#?}");
    assert_eq!(found.len(), 5, "the value given, one problem fewer: {found:#?}");
}

#[test]
fn only_a_syntax_error_stops_the_checks() {
    let found = problems("heat_template_version: [\n", &[], &Map::new());
    assert_eq!(found.len(), 1, "{found:#?}");
    // Structural problems of every section come with the reference checks.
    let text = "heat_template_version: 2018-08-31
parameters:
  broken:
    type: strin
  count:
    type: number
    default: two
resources:
  value:
    type: OS::Heat::Value
    properties:
      value: {list_join: [',', [{get_param: broken}, {get_param: count}, {get_param: other}]]}
    surprise: 1
";
    let found = problems(text, &[], &Map::new());
    assert_eq!(found.len(), 4, "{found:#?}");
    assert!(found[0].starts_with("parameter \"broken\": unknown type \"strin\""), "{found:#?}");
    assert!(found[1].starts_with("parameter \"count\": "), "{found:#?}");
    assert!(found[2].ends_with("get_param names an unknown parameter \"other\" (line 12)"), "{found:#?}");
    assert_eq!(found[3], "resource value: unknown key \"surprise\" (line 13)");
}

#[test]
fn an_unexpandable_nested_stack_does_not_hide_the_rest() {
    let text = "heat_template_version: 2018-08-31
resources:
  inner:
    type: missing.yaml
  value:
    type: OS::Heat::Value
    properties:
      value: {get_attr: [inner, anything]}
  other:
    type: OS::Heat::Value
    properties:
      value: {get_resource: absent}
";
    let found = problems(text, &[], &Map::new());
    assert_eq!(found.len(), 2, "{found:#?}");
    assert!(found[0].starts_with("resource inner: the provider template \"missing.yaml\" is not in"), "{found:#?}");
    assert_eq!(
        found[1],
        "resource other: property \"value\": get_resource names an unknown resource \"absent\" (line 12)"
    );
}

#[test]
fn the_problems_reported_are_bounded() {
    let mut text = String::from("heat_template_version: 2018-08-31\nresources:\n");
    for index in 0..300 {
        text.push_str(&format!("  r{index}:\n    type: OS::Heat::Valu\n"));
    }
    let found = problems(&text, &[], &Map::new());
    assert_eq!(found.len(), MAX_PROBLEMS + 1);
    assert_eq!(found[MAX_PROBLEMS], "... and 200 more problems");
    assert!(found[0].starts_with("resource r0: unknown resource type"), "{found:#?}");
}

#[test]
fn a_refused_registry_entry_is_reported_once() {
    let text = "heat_template_version: 2018-08-31
resources:
  config:
    type: My::Config
  value:
    type: OS::Heat::Value
    properties:
      value: {get_attr: [config, config]}
";
    let environment = json!({"resource_registry": {"My::Config": "Config"}});
    let found = problems_with(text, &[], &Map::new(), &environment);
    assert_eq!(found.len(), 1, "not the unmapped type again, nor the get_attr of it: {found:#?}");
    assert!(found[0].starts_with("resource_registry: \"My::Config\" maps to \"Config\""), "{found:#?}");
    // Without the environment the type is what is wrong.
    let found = problems(text, &[], &Map::new());
    assert_eq!(found.len(), 1, "{found:#?}");
    assert!(found[0].contains("unknown resource type \"My::Config\""), "{found:#?}");
}

/// Heat's Stack.validate refuses a resource named like a parameter ("Duplicate names {'x'}");
/// one a false condition leaves out is not there to clash.
#[test]
fn a_resource_named_like_a_parameter_is_refused_as_heat_does() {
    let text = "heat_template_version: 2018-08-31
parameters:
  web: {type: string, default: a}
  db: {type: string, default: b}
  spare: {type: boolean, default: false}
conditions:
  never: {get_param: spare}
resources:
  web: {type: OS::Heat::None}
  db: {type: OS::Heat::None}
  spare: {type: OS::Heat::None, condition: never}
";
    let problems = problems(text, &[], &Map::new());
    assert_eq!(problems, ["Duplicate names {'db', 'web'}"]);
}
