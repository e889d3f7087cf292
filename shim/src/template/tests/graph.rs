//! Validation tests about the graph: plan order, references, cycles.

use serde_json::json;

use super::validate::{CONFIG, plan, problems};
use super::{template, values};
use crate::template::{ResourceType, validate};

#[test]
fn plan_is_topological_with_ties_in_declaration_order() {
    let resources = format!(
        "  web:
    type: OS::Heat::SoftwareDeployment
    properties:
      config: {{get_resource: config}}
      server: {{get_param: server}}
      input_values: {{db: {{get_attr: [db, url]}}, cache: {{get_attr: [cache, result]}}}}
  db:
    type: OS::Heat::SoftwareDeployment
    properties: {{config: {{get_resource: config}}, server: web2}}
  handle: {{type: OS::Heat::WaitConditionHandle}}
  cache:
    type: OS::Heat::SoftwareDeployment
    depends_on: [handle]
    properties: {{config: {{get_resource: config}}, server: web1}}
{CONFIG}  wait:
    type: OS::Heat::WaitCondition
    depends_on: web
    properties: {{handle: {{get_resource: handle}}, timeout: 60}}
"
    );
    let plan = plan(&resources);
    let order: Vec<&str> = plan.nodes.iter().map(|node| node.name.as_str()).collect();
    assert_eq!(order, ["handle", "config", "db", "cache", "web", "wait"]);
    let web = &plan.nodes[4];
    assert_eq!(web.kind, ResourceType::SoftwareDeployment);
    assert_eq!(web.depends_on, ["cache", "config", "db"]);
    assert_eq!(plan.nodes[5].depends_on, ["handle", "web"]);
    assert!(plan.nodes[0].depends_on.is_empty());
}

#[test]
fn references_must_exist() {
    let problems = problems(
        "  a:
    type: OS::Heat::SoftwareDeployment
    depends_on: [ghost]
    properties:
      config: {get_resource: phantom}
      server: {get_param: nope}
      input_values: {x: {get_attr: [spectre, url]}}
outputs:
  o:
    value: [{get_attr: [wraith, data]}, {get_param: missing}, {get_resource: a}]
",
    );
    assert_eq!(
        problems,
        [
            "resource a: property \"config\": get_resource names an unknown resource \"phantom\"",
            "resource a: property \"server\": get_param names an unknown parameter \"nope\"",
            "resource a: property \"input_values\": get_attr names an unknown resource \"spectre\"",
            "resource a: depends_on names an unknown resource \"ghost\"",
            "output o: get_attr names an unknown resource \"wraith\"",
            "output o: get_param names an unknown parameter \"missing\"",
        ]
    );
}

#[test]
fn pseudo_parameters_are_known() {
    let parsed = template(
        "heat_template_version: 2018-08-31
resources:
  a:
    type: OS::Heat::SoftwareConfig
    properties: {config: {list_join: ['/', [{get_param: OS::stack_name}, {get_param: OS::stack_id}]]}}
",
    );
    let with_values = values(&[("OS::stack_name", json!("s")), ("OS::stack_id", json!("1"))]);
    assert!(validate(&parsed, &with_values, &|_| true).is_ok());
    assert!(validate(&parsed, &values(&[]), &|_| true).is_ok());
}

#[test]
fn cycles_are_listed_once_each() {
    let problems = problems(
        "  a:
    type: OS::Heat::SoftwareConfig
    properties: {config: {get_attr: [b, config]}}
  b:
    type: OS::Heat::SoftwareConfig
    depends_on: c
  c:
    type: OS::Heat::SoftwareConfig
    properties: {options: {x: {get_resource: a}}}
  self:
    type: OS::Heat::SoftwareConfig
    depends_on: self
  d:
    type: OS::Heat::SoftwareConfig
    depends_on: [e, a]
  e:
    type: OS::Heat::SoftwareConfig
    depends_on: d
  downstream:
    type: OS::Heat::SoftwareConfig
    depends_on: a
",
    );
    assert_eq!(
        problems,
        ["dependency cycle: a -> b -> c -> a", "dependency cycle: self -> self", "dependency cycle: d -> e -> d",]
    );
}

#[test]
fn overlapping_cycles_are_each_reported() {
    let problems = problems(
        "  hub:
    type: OS::Heat::SoftwareConfig
    depends_on: [x, y]
  x:
    type: OS::Heat::SoftwareConfig
    depends_on: hub
  y:
    type: OS::Heat::SoftwareConfig
    depends_on: hub
",
    );
    assert_eq!(problems, ["dependency cycle: hub -> x -> hub", "dependency cycle: y -> hub -> y"]);
}

#[test]
fn long_chains_do_not_overflow() {
    let mut resources = String::from("  r0: {type: OS::Heat::SoftwareConfig}\n");
    for index in 1..5000 {
        resources.push_str(&format!("  r{index}: {{type: OS::Heat::SoftwareConfig, depends_on: r{}}}\n", index - 1));
    }
    let plan = plan(&resources);
    assert_eq!(plan.nodes.len(), 5000);
    assert_eq!(plan.nodes[4999].name, "r4999");
    resources.push_str("  r5000: {type: OS::Heat::SoftwareConfig, depends_on: r4999}\n");
    let cyclic = resources.replacen(
        "r0: {type: OS::Heat::SoftwareConfig}",
        "r0: {type: OS::Heat::SoftwareConfig, depends_on: r5000}",
        1,
    );
    let problems = problems(&cyclic);
    assert_eq!(problems.len(), 1);
    assert!(problems[0].starts_with("dependency cycle: r0 -> r5000 -> r4999"), "{}", &problems[0][..80]);
}
