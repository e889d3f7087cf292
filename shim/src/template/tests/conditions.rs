//! The `conditions` section and `condition` keys through parse and validate: disabled
//! resources out of the plan, references to them refused unless in an `if` branch not taken,
//! outputs without a value, and the version and definition errors.

use super::{assert_problem, parse_problems, strings, template};
use crate::template::{ParameterScope, Plan, resolve_parameters, validate};

const TEMPLATE: &str = "heat_template_version: 2021-04-16
parameters:
  env: {type: string, default: prod}
  server: {type: string, default: web1}
conditions:
  prod: {equals: [{get_param: env}, prod]}
  dev: {not: prod}
resources:
  always:
    type: OS::Heat::SoftwareConfig
    properties:
      config: {if: [prod, {get_resource: prod_only}, {get_resource: dev_only}]}
  prod_only:
    type: OS::Heat::SoftwareConfig
    condition: prod
  dev_only:
    type: OS::Heat::SoftwareConfig
    condition: dev
    properties:
      config: {get_param: env}
  deploy:
    type: OS::Heat::SoftwareDeployment
    properties:
      server: {get_param: server}
      config: {get_resource: always}
      input_values: {if: [dev, {x: 1}]}
outputs:
  dev_out:
    condition: dev
    value: {get_attr: [dev_only, config]}
  prod_out:
    condition: prod
    value: {if: [dev, a, b]}
";

fn check(text: &str, env: &str) -> Result<Plan, Vec<String>> {
    let parsed = template(text);
    let parameters = match resolve_parameters(&parsed, &strings(&[("env", env)])) {
        Ok(parameters) => parameters,
        Err(problems) => panic!("parameters should resolve: {problems:#?}"),
    };
    validate(&parsed, &parameters, &|name| name == "web1")
}

fn names(plan: &Plan) -> Vec<&str> {
    plan.nodes.iter().map(|node| node.name.as_str()).collect()
}

#[test]
fn a_false_condition_leaves_the_resource_out() {
    let plan = check(TEMPLATE, "prod").expect("valid in prod");
    assert_eq!(names(&plan), ["prod_only", "always", "deploy"]);
    assert_eq!(plan.nodes[1].depends_on, ["prod_only"]);
    let plan = check(TEMPLATE, "dev").expect("valid in dev");
    assert_eq!(names(&plan), ["dev_only", "always", "deploy"]);
    assert_eq!(plan.nodes[1].depends_on, ["dev_only"]);
}

#[test]
fn outputs_of_false_conditions_have_no_value() {
    let parsed = template(TEMPLATE);
    let parameters = resolve_parameters(&parsed, &strings(&[])).expect("defaults");
    let scope = ParameterScope::new(&parameters);
    let prod_out = &parsed.outputs[1].1.value;
    assert_eq!(prod_out.evaluate(&scope), Ok(serde_json::json!("b")));
    // dev_out reads a resource that prod leaves out; its condition keeps it from being read.
    let dev_out = &parsed.outputs[0].1.value;
    assert_eq!(dev_out.evaluate(&scope), Ok(serde_json::Value::Null));
}

#[test]
fn depending_on_a_left_out_resource_is_allowed() {
    let text = TEMPLATE.replace("  deploy:\n", "  deploy:\n    depends_on: [dev_only, prod_only]\n");
    let plan = check(&text, "prod").expect("depends_on a left-out resource is ignored");
    assert_eq!(
        plan.nodes.iter().find(|node| node.name == "deploy").map(|node| node.depends_on.clone()),
        Some(vec!["always".to_owned(), "prod_only".to_owned()])
    );
}

#[test]
fn a_reference_to_a_left_out_resource_is_refused() {
    let text = TEMPLATE.replace("config: {get_resource: always}", "config: {get_resource: dev_only}");
    let problems = check(&text, "prod").expect_err("dev_only is not in a prod stack");
    assert_problem(
        &problems,
        "resource deploy: property \"config\": get_resource names an unknown resource \"dev_only\"",
    );
}

#[test]
fn condition_errors() {
    let old = "heat_template_version: 2016-04-08\nconditions: {c: true}\nresources: {}\n";
    assert_eq!(parse_problems(old), ["The template section is invalid: conditions (line 2)"]);
    let old = "heat_template_version: 2016-04-08\nresources:\n  a: {type: OS::Heat::SoftwareConfig, condition: true}\n";
    assert_problem(&parse_problems(old), "needs heat_template_version 2016-10-14 or later");
    let text = "heat_template_version: 2016-10-14
conditions:
  a: {not: b}
  b: {and: [a, true]}
  c: yes_please
  d: {equals: [1]}
  e: {contains: [1, [1]]}
resources:
  r: {type: OS::Heat::SoftwareConfig, condition: missing}
";
    let problems = parse_problems(text);
    assert_problem(&problems, "condition \"a\": Circular definition for condition \"a\"");
    assert_problem(&problems, "The definition of condition \"c\" is invalid: \"yes_please\"");
    assert_problem(&problems, "resource r: condition: Invalid condition \"missing\" (line 9)");
    // contains is a condition function from 2017-09-01 only.
    assert_problem(&problems, "condition \"e\": The function \"contains\" is invalid in this context");
    let text = "heat_template_version: 2016-10-14
parameters:
  p: {type: string, default: x}
conditions:
  d: {equals: [{get_param: p}]}
resources:
  r: {type: OS::Heat::SoftwareConfig, condition: d}
";
    let parsed = template(text);
    let parameters = resolve_parameters(&parsed, &strings(&[])).expect("defaults");
    let problems = validate(&parsed, &parameters, &|_| true).expect_err("equals takes two values");
    assert_problem(&problems, "resource r: condition: Arguments to \"equals\" must be of the form: [value_1, value_2]");
}

#[test]
fn deep_condition_chains_are_refused() {
    // Each condition names the next, so resolving the first walks the whole chain.
    let mut text = String::from("heat_template_version: 2021-04-16\nconditions:\n  c199: true\n");
    for index in 0..199 {
        text.push_str(&format!("  c{index:03}: {{not: c{:03}}}\n", index + 1));
    }
    text.push_str("resources: {}\n");
    assert_problem(&parse_problems(&text), "conditions nest more than 64 names deep");
}

#[test]
fn conditions_cannot_grow_exponentially() {
    let mut text = String::from("heat_template_version: 2021-04-16\nconditions:\n  c00: true\n");
    for index in 1..40 {
        text.push_str(&format!("  c{index:02}: {{and: [c{0:02}, c{0:02}]}}\n", index - 1));
    }
    text.push_str("resources: {}\n");
    assert_problem(&parse_problems(&text), "a condition expands to more than 1000 nodes");
    let mut text = String::from("heat_template_version: 2021-04-16\nconditions:\n  c0: true\n");
    // c1 is 12 nodes, c2 (80 times c1) 962: within a condition's limit, not 1,100 times.
    text.push_str("  c1: {and: [c0, c0, c0, c0, c0, c0, c0, c0, c0, c0]}\n");
    text.push_str(&format!("  c2: {{and: [{}]}}\n", vec!["c1"; 80].join(", ")));
    text.push_str("resources:\n");
    for index in 0..1100 {
        text.push_str(&format!("  r{index}: {{type: OS::Heat::SoftwareConfig, condition: c2}}\n"));
    }
    assert_problem(&parse_problems(&text), "inline to more than 1000000 nodes");
}
