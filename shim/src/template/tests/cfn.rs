//! 2013-05-23's cfn functions in whole templates (`Ref` read as `get_resource` or `get_param`,
//! its unknown names reported with the resource and property) and `get_attr: [resource]`: its
//! version gate, stored form, dependency, and value over stored attributes, provider
//! templates and groups. Heat's values are compared in tests/tests/heat_cfn.rs.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::nested::accepted;
use super::{parse_problems, template};
use crate::template::expr::functions::Version;
use crate::template::expr::{ALL_ATTRIBUTES, Dialect, Names};
use crate::template::{EvalError, Expr, Reference, ResourceType, Scope, validate};

const OLD: &str = "heat_template_version: 2013-05-23
parameters:
  name: {type: string, default: web}
resources:
  config: {type: OS::Heat::SoftwareConfig, properties: {config: {Ref: name}}}
  deploy:
    type: OS::Heat::SoftwareDeployment
    properties:
      config: {Ref: config}
      server: {Ref: OS::stack_name}
      input_values: {zones: {Fn::GetAZs: ''}}
";

#[test]
fn ref_reads_as_get_resource_or_get_param() {
    let parsed = template(OLD);
    let deploy = parsed.resource("deploy").expect("deploy");
    assert_eq!(deploy.property("config"), Some(&Expr::GetResource("config".into())));
    assert_eq!(deploy.property("server"), Some(&Expr::GetParam { name: "OS::stack_name".into(), path: vec![] }));
    let config = parsed.resource("config").expect("config");
    assert_eq!(config.property("config"), Some(&Expr::GetParam { name: "name".into(), path: vec![] }));
    // A Ref to a resource is a dependency, as get_resource is.
    let parameters = BTreeMap::from([("name".to_owned(), json!("web")), ("OS::stack_name".to_owned(), json!("s"))]);
    let plan = validate(&parsed, &parameters, &|_| true).expect("valid");
    assert_eq!(plan.nodes.iter().map(|node| node.name.as_str()).collect::<Vec<_>>(), ["config", "deploy"]);
}

#[test]
fn an_unknown_ref_is_heats_error_with_its_place() {
    let problems = parse_problems(&OLD.replace("{Ref: config}", "{Ref: nothing}"));
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(
        problems[0].starts_with(
            "resource deploy: property \"config\": The specified reference \"nothing\" (in unknown) is incorrect."
        ),
        "{problems:?}"
    );
    let later = parse_problems(&OLD.replace("2013-05-23", "2014-10-16"));
    assert!(later.iter().all(|problem| problem.contains("is not supported in this version of HOT")), "{later:?}");
    assert_eq!(later.len(), 4, "{later:?}");
}

#[test]
fn ref_needs_the_template_names_and_is_never_stored() {
    let names = Names { resources: ["r".to_owned()].into(), parameters: ["p".to_owned()].into() };
    let dialect = Dialect { version: Version::V2013_05_23, conditions: None, stored: false, names: Some(&names) };
    assert_eq!(Expr::parse(&json!({"Ref": "r"}), &dialect), Ok(Expr::GetResource("r".into())));
    assert_eq!(Expr::parse(&json!({"Ref": ["p"]}), &dialect), Err("Ref: expected a resource or parameter name".into()));
    let stored = Expr::from_json(&json!({"Ref": "r"})).unwrap_err();
    assert!(stored.contains("not supported in the stored form"), "{stored}");
}

const ALL: &str = "heat_template_version: 2015-10-15
resources:
  value: {type: OS::Heat::Value, properties: {value: 1}}
  copy: {type: OS::Heat::Value, properties: {value: {get_attr: [value]}}}
outputs:
  all: {value: {get_attr: [copy]}}
";

#[test]
fn get_attr_of_a_resource_alone_is_a_dependency_and_stored_as_written() {
    let parsed = template(ALL);
    let copy = parsed.resource("copy").expect("copy").property("value").expect("value");
    assert_eq!(copy.references(), [Reference { resource: "value".into(), attribute: Some(ALL_ATTRIBUTES.into()) }]);
    assert_eq!(copy.to_json(), json!({"get_attr": ["value"]}));
    assert_eq!(Expr::from_json(&copy.to_json()).as_ref(), Ok(copy));
    let plan = validate(&parsed, &BTreeMap::new(), &|_| true).expect("valid");
    assert_eq!(plan.nodes.iter().map(|node| node.name.as_str()).collect::<Vec<_>>(), ["value", "copy"]);
    let unknown = validate(&template(&ALL.replace("[value]}", "[nothing]}")), &BTreeMap::new(), &|_| true);
    let problems = unknown.expect_err("an unknown resource");
    assert!(problems.iter().any(|problem| problem.contains("unknown resource \"nothing\"")), "{problems:?}");
    let old = parse_problems(&ALL.replace("2015-10-15", "2015-04-30"));
    assert!(old[0].contains("Arguments to \"get_attr\" must be of the form [resource_name, attribute"), "{old:?}");
}

/// Created resources: `value` an OS::Heat::Value, `deploy` a SoftwareDeployment with an output.
struct Created;

impl Scope for Created {
    fn parameter(&self, _name: &str) -> Option<Value> {
        None
    }

    fn resource_id(&self, resource: &str) -> Option<Value> {
        Some(json!(resource))
    }

    fn attribute(&self, resource: &str, attribute: &str) -> Option<Value> {
        match (resource, attribute) {
            ("value", "value") => Some(json!([1])),
            ("deploy", "deploy_stdout") => Some(json!("out")),
            ("deploy", "result") => Some(json!("an output")),
            _ => Some(Value::Null),
        }
    }

    fn resource_type(&self, resource: &str) -> Option<ResourceType> {
        match resource {
            "value" => Some(ResourceType::Value),
            "deploy" => Some(ResourceType::SoftwareDeployment),
            _ => None,
        }
    }
}

#[test]
fn get_attr_of_a_resource_alone_maps_the_attributes_its_type_shows() {
    let all = |resource: &str| Expr::from_json(&json!({"get_attr": [resource]})).unwrap().evaluate(&Created);
    assert_eq!(all("value"), Ok(json!({"value": [1]})));
    // Heat's FnGetAtts: a deployment's outputs are not among its attributes.
    assert_eq!(all("deploy"), Ok(json!({"deploy_stdout": "out", "deploy_stderr": null, "deploy_status_code": null})));
    assert_eq!(all("later"), Err(EvalError::NotReady { resource: "later".into(), attribute: None }));
}

#[test]
fn get_attr_of_a_provider_template_or_group_alone() {
    let parent = "heat_template_version: 2021-04-16
resources:
  inner: {type: inner.yaml}
  group:
    type: OS::Heat::ResourceGroup
    properties: {count: 2, resource_def: {type: OS::Heat::Value, properties: {value: v}}}
outputs:
  inner: {value: {get_attr: [inner]}}
  group: {value: {get_attr: [group]}}
";
    let inner = "heat_template_version: 2021-04-16
resources:
  v: {type: OS::Heat::Value, properties: {value: 7}}
outputs:
  seven: {value: {get_attr: [v, value]}}
  text: {value: text}
";
    let flat = accepted(parent, &[("inner.yaml", inner)], &[]);
    assert_eq!(flat.output("inner"), json!({"seven": 7, "text": "text"}));
    // ResourceGroup's `attributes` needs a path, so Heat's node data leaves it out.
    assert_eq!(
        flat.output("group"),
        json!({"refs": ["id:group/0", "id:group/1"], "refs_map": {"0": "id:group/0", "1": "id:group/1"},
               "removed_rsrc_list": []})
    );
}

#[test]
fn a_2013_provider_template_reads_its_facade_with_fn_resource_facade() {
    let parent = "heat_template_version: 2021-04-16
resources:
  outer: {type: inner.yaml, metadata: {role: db}, deletion_policy: Retain}
outputs:
  meta: {value: {get_attr: [outer, meta]}}
  policy: {value: {get_attr: [outer, policy]}}
  own: {value: {get_attr: [outer, own]}}
";
    let inner = "heat_template_version: 2013-05-23
resources:
  held: {type: OS::Heat::Value, properties: {value: {Fn::ResourceFacade: Metadata}}}
outputs:
  meta: {value: {get_attr: [held, value, role]}}
  policy: {value: {Fn::ResourceFacade: DeletionPolicy}}
  own: {value: {Ref: held}}
";
    let flat = accepted(parent, &[("inner.yaml", inner)], &[]);
    assert_eq!(flat.output("meta"), json!("db"));
    assert_eq!(flat.output("policy"), json!("Retain"));
    assert_eq!(flat.output("own"), json!("id:outer/held"));
    let problems = super::nested::rejected(parent, &[("inner.yaml", &inner.replace("DeletionPolicy", "deletion"))]);
    assert!(
        problems.iter().any(|problem| problem.contains(
            "Incorrect arguments to \"Fn::ResourceFacade\" should be one of: Metadata, DeletionPolicy, UpdatePolicy"
        )),
        "{problems:?}"
    );
    let later = super::nested::rejected(parent, &[("inner.yaml", &inner.replace("2013-05-23", "2014-10-16"))]);
    assert!(
        later.iter().any(|problem| problem.contains("The function Fn::ResourceFacade is not supported")),
        "{later:?}"
    );
}

#[test]
fn member_list_to_map_and_get_azs_edge_cases() {
    let run = |snippet: Value| {
        crate::template::evaluate_snippet("2013-05-23", &serde_json::Map::new(), &BTreeMap::new(), &snippet)
    };
    let map = |members: Value| run(json!({"Fn::MemberListToMap": ["Name", "Value", members]}));
    // Groups in numeric index order, a later group winning; leading zeros name the same index.
    let members = json!([".member.10.Name=k", ".member.10.Value=ten", ".member.9.Name=k", ".member.09.Value=nine"]);
    assert_eq!(map(members), Ok(json!({"k": "ten"})));
    // A field ends at the first newline; a value keeps everything after the first `=`.
    assert_eq!(map(json!([".member.0.Name\nx=k", ".member.0.Value=a=b\nc"])), Ok(json!({"k": "a=b\nc"})));
    // Not `.member.<digits>.`: ignored. A group without both fields: ignored.
    assert_eq!(map(json!(["member.0.Name=a", ".member.x.Name=b", ".member.1.Name=c"])), Ok(json!({})));
    assert_eq!(
        map(json!(["no-equals"])),
        Err("dictionary update sequence element #0 has length 1; 2 is required".into())
    );
    assert_eq!(map(json!({".member.0.Name=k": 1, ".member.0.Value=v": 2})), Ok(json!({"k": "v"})), "a map's keys");
    assert_eq!(run(json!({"Fn::GetAZs": {"Fn::Join": ["", ["Region", "One"]]}})), Ok(json!(["nova"])));
}

#[test]
fn a_long_member_list_maps_in_linear_time() {
    let members: Vec<String> = (0..60_000)
        .flat_map(|index| [format!(".member.{index}.Name=k{index}"), format!(".member.{index}.Value=v")])
        .collect();
    let started = std::time::Instant::now();
    let snippet = json!({"Fn::MemberListToMap": ["Name", "Value", members]});
    let map = crate::template::evaluate_snippet("2013-05-23", &serde_json::Map::new(), &BTreeMap::new(), &snippet);
    assert_eq!(map.map(|map| map.as_object().map(serde_json::Map::len)), Ok(Some(60_000)));
    assert!(started.elapsed() < std::time::Duration::from_secs(10), "{:?}", started.elapsed());
}

#[test]
fn a_member_group_with_many_fields_maps_in_linear_time() {
    let mut members: Vec<String> = (0..60_000).map(|field| format!(".member.0.f{field}=x")).collect();
    members.extend([".member.0.Name=k".to_owned(), ".member.0.Value=v".to_owned()]);
    let started = std::time::Instant::now();
    let snippet = json!({"Fn::MemberListToMap": ["Name", "Value", members]});
    let map = crate::template::evaluate_snippet("2013-05-23", &serde_json::Map::new(), &BTreeMap::new(), &snippet);
    assert_eq!(map, Ok(json!({"k": "v"})));
    assert!(started.elapsed() < std::time::Duration::from_secs(10), "{:?}", started.elapsed());
}
