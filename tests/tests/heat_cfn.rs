//! Differential tests of what Heat's template functions read from a stack: 2013-05-23's cfn
//! functions (`Ref`, `Fn::GetAZs`, `Fn::MemberListToMap`) and `get_attr: [resource]`, each
//! snippet evaluated by Heat's own classes against created resources
//! (tests/peers/real-heat/hot_stack_eval.py: Heat's Resource.node_data decides which
//! attributes a resource holds; the values are the case's) and by the shim against the same
//! resources; and parameter values as Heat's parameter classes parse them (hot_eval.py).

use std::collections::BTreeMap;

use anneal_shim::template::{
    Environment, Scope, SnippetResource, evaluate_snippet_with_resources, expand_nested, parse_template,
    parse_template_in, resolve_parameters,
};
use anneal_tests::peers;
use serde_json::{Map, Value, json};

struct Case {
    version: &'static str,
    snippet: Value,
    /// The text both refusals contain, when they must agree on it.
    needle: Option<&'static str>,
}

fn case(version: &'static str, snippet: Value) -> Case {
    Case { version, snippet, needle: None }
}

fn refused(version: &'static str, snippet: Value, needle: &'static str) -> Case {
    Case { version, snippet, needle: Some(needle) }
}

fn parameters() -> Value {
    json!({
        "name": {"type": "string", "value": "web"},
        "port": {"type": "number", "value": 8080},
        "zones": {"type": "comma_delimited_list", "value": "a,b"},
        "members": {"type": "comma_delimited_list", "value": ".member.0.Name=k,.member.0.Value=v"},
    })
}

/// Created resources of every type the shim has, with stored attribute values (some the
/// type does not show, which `get_attr: [name]` must leave out).
fn resources() -> Value {
    let server = json!({"server": "s", "config": "c"});
    let group = json!({"servers": {"a": "s"}, "config": "c"});
    json!({
        "config": {"type": "OS::Heat::SoftwareConfig", "properties": {"config": "x"},
                   "reference_id": "config-id", "attributes": {"config": "x"}},
        "structured": {"type": "OS::Heat::StructuredConfig", "properties": {"config": {}},
                       "reference_id": "structured-id", "attributes": {"config": {"a": 1}}},
        "cloud": {"type": "OS::Heat::CloudConfig", "properties": {"cloud_config": {}},
                  "reference_id": "cloud-id", "attributes": {"config": "#cloud-config\n{}\n"}},
        "mime": {"type": "OS::Heat::MultipartMime", "properties": {"parts": []},
                 "reference_id": "mime-id", "attributes": {"config": "mime"}},
        "deploy": {"type": "OS::Heat::SoftwareDeployment", "properties": server,
                   "reference_id": "deploy-id",
                   "attributes": {"deploy_stdout": "out", "deploy_stderr": "", "deploy_status_code": 0,
                                  "result": "an output"}},
        "sdeploy": {"type": "OS::Heat::StructuredDeployment", "properties": server,
                    "reference_id": "sdeploy-id", "attributes": {"deploy_stdout": "o"}},
        "group": {"type": "OS::Heat::SoftwareDeploymentGroup", "properties": group,
                  "reference_id": "group-id",
                  "attributes": {"deploy_stdouts": {"a": "out"}, "deploy_stderrs": {"a": ""},
                                 "deploy_status_codes": {"a": 0}, "deploy_stdout": {"a": "out"},
                                 "result": {"a": 1}}},
        "sgroup": {"type": "OS::Heat::StructuredDeploymentGroup", "properties": group,
                   "reference_id": "sgroup-id", "attributes": {"deploy_stdouts": {"a": "o"}}},
        "handle": {"type": "OS::Heat::WaitConditionHandle", "reference_id": "handle-id",
                   "attributes": {"endpoint": "http://e", "curl_cli": "curl", "token": "t", "signal": "s"}},
        "wait": {"type": "OS::Heat::WaitCondition", "properties": {"handle": "h", "timeout": 10},
                 "reference_id": "wait-id", "attributes": {"data": "{}"}},
        "none": {"type": "OS::Heat::None", "reference_id": "none-id", "attributes": {}},
        "value": {"type": "OS::Heat::Value", "properties": {"value": [1, 2]}, "reference_id": "value-id",
                  "attributes": {"value": [1, {"k": "v"}]}},
        "random": {"type": "OS::Heat::RandomString", "reference_id": "secret", "attributes": {"value": "secret"}},
        "server": {"type": "OS::Heat::DeployedServer", "reference_id": "server",
                   "attributes": {"name": "server", "os_collect_config": {"collectors": ["request"]},
                                  "first_address": "192.0.2.1"}},
    })
}

fn cases() -> Vec<Case> {
    let old = "2013-05-23";
    let latest = "2021-04-16";
    let mut cases = vec![
        // Ref: a resource's reference id, a parameter's value (pseudo parameters too)
        case(old, json!({"Ref": "deploy"})),
        case(old, json!({"Ref": "random"})),
        case(old, json!({"Ref": "name"})),
        case(old, json!({"Ref": "port"})),
        case(old, json!({"Ref": "zones"})),
        case(old, json!({"Ref": "OS::stack_name"})),
        case(old, json!({"l": [{"Ref": "server"}, {"Fn::Join": ["-", [{"Ref": "name"}, "x"]]}]})),
        refused(old, json!({"Ref": "nothing"}), "The specified reference \"nothing\" (in unknown) is incorrect."),
        refused(old, json!({"Ref": ["name"]}), ""),
        refused(old, json!({"Ref": ""}), "The specified reference \"\" (in unknown) is incorrect."),
        case(old, json!({"Fn::GetAZs": null})),
        case(old, json!({"Fn::Join": [",", {"Fn::GetAZs": {"Ref": "name"}}]})),
        refused("2014-10-16", json!({"Ref": "name"}), "The function Ref is not supported in this version of HOT"),
        refused(latest, json!({"Ref": "deploy"}), "The function Ref is not supported in this version of HOT"),
        // Fn::GetAZs: a single-zone cloud's answer, whatever the region
        case(old, json!({"Fn::GetAZs": ""})),
        case(old, json!({"Fn::GetAZs": "RegionOne"})),
        case(old, json!({"Fn::Select": [0, {"Fn::GetAZs": ""}]})),
        refused("2015-04-30", json!({"Fn::GetAZs": ""}), "The function Fn::GetAZs is not supported"),
        // Fn::MemberListToMap
        case(old, json!({"Fn::MemberListToMap": ["Name", "Value", [".member.0.Name=key", ".member.0.Value=door"]]})),
        case(
            old,
            json!({"Fn::MemberListToMap": ["Name", "Value", [
                ".member.2.Name=b", ".member.2.Value=2", ".member.10.Name=c", ".member.10.Value=10",
                ".member.1.Name=a", ".member.1.Value=1", ".member.01.Value=one"]]}),
        ),
        case(
            old,
            json!({"Fn::MemberListToMap": ["Name", "Value", [".member.0.Name=k", ".member.1.Name=k", ".member.1.Value=x=y"]]}),
        ),
        case(
            old,
            json!({"Fn::MemberListToMap": ["Name", "Value", [".member.0.Name=k", ".member.0.Value=a", ".member.0.Value=b"]]}),
        ),
        case(
            old,
            json!({"Fn::MemberListToMap": ["Key", "Val", [".member.0.Key=k", ".member.0.Val=v", "other=1", ".member.x.Key=q", "member.1.Key=z"]]}),
        ),
        case(
            old,
            json!({"Fn::MemberListToMap": ["Name", "Value", [".member.3.Name=same", ".member.3.Value=1", ".member.4.Name=same", ".member.4.Value=2"]]}),
        ),
        case(old, json!({"Fn::MemberListToMap": ["Name", "Value", []]})),
        case(old, json!({"Fn::MemberListToMap": ["Name", "Value", {"get_param": "members"}]})),
        case(old, json!({"Fn::MemberListToMap": ["Name", "Value", ".="]})),
        case(
            old,
            json!({"Fn::MemberListToMap": ["Name", "Value", [".member.0.Name=k\nnext", ".member.0.Value=v\nw"]]}),
        ),
        case(old, json!({"Fn::MemberListToMap": ["Name", "Value", [".member.0.Name\nx=k", ".member.0.Value=v"]]})),
        case(
            old,
            json!({"Fn::MemberListToMap": ["Name", "Value", [".member.007.Name=k", ".member.7.Value=v", ".member.٣.Name=z"]]}),
        ),
        case(old, json!({"Fn::MemberListToMap": ["Name", "Value", [".member.0.Name=", ".member.0.Value="]]})),
        case(old, json!({"Fn::MemberListToMap": ["Name", "Value", [".member.0..Name=k", ".member.0.Value=v"]]})),
        refused(old, json!({"Fn::MemberListToMap": ["Name", "Value", ["novalue"]]}), "has length 1; 2 is required"),
        refused(old, json!({"Fn::MemberListToMap": ["Name", "Value", [1]]}), "Member list items must be strings"),
        refused(old, json!({"Fn::MemberListToMap": ["Name", "Value", 5]}), "Member list must be a list"),
        refused(old, json!({"Fn::MemberListToMap": ["Name", "Value", null]}), "Member list must be a list"),
        refused(old, json!({"Fn::MemberListToMap": [1, "Value", []]}), "Fn::MemberListToMap Key Name must be a string"),
        refused(
            old,
            json!({"Fn::MemberListToMap": ["Name", 2, []]}),
            "Fn::MemberListToMap Value Name must be a string",
        ),
        refused(old, json!({"Fn::MemberListToMap": ["Name", "Value"]}), "Wrong Arguments try"),
        refused(
            "2014-10-16",
            json!({"Fn::MemberListToMap": ["N", "V", []]}),
            "The function Fn::MemberListToMap is not supported",
        ),
        // get_attr with a resource name only, and its version gate
        refused(
            "2015-04-30",
            json!({"get_attr": ["deploy"]}),
            "Arguments to \"get_attr\" must be of the form [resource_name, attribute, (path), ...]",
        ),
        refused(old, json!({"get_attr": ["deploy"]}), "must be of the form"),
        refused(latest, json!({"get_attr": []}), "Arguments to \"get_attr\" can be of the next forms"),
        refused(latest, json!({"get_attr": ["nothing"]}), "nothing"),
        refused(latest, json!({"get_attr": ["deploy", "*"]}), "The Referenced Attribute (deploy *) is incorrect."),
        case("2015-10-15", json!({"get_attr": ["deploy"]})),
        case(latest, json!({"map_merge": [{"get_attr": ["value"]}, {"x": [1]}]})),
        case(latest, json!({"get_attr": ["group", "deploy_stdouts", "a"]})),
        case(latest, json!({"get_attr": ["deploy", "result"]})),
        case(latest, json!({"get_attr": ["value", "value", 1, "k"]})),
        case("2014-10-16", json!({"get_attr": ["value", "value", 1]})),
    ];
    let Value::Object(all) = resources() else { unreachable!("resources are a map") };
    cases.extend(all.keys().map(|name| case(latest, json!({"get_attr": [name]}))));
    cases
}

fn heat_answers(cases: &[Case]) -> Vec<Value> {
    let Value::Object(all) = resources() else { unreachable!("resources are a map") };
    let input: Vec<Value> = cases
        .iter()
        .map(|case| {
            // Only the resources a snippet names, so Heat computes no attribute it does not read.
            let text = case.snippet.to_string();
            let named: Map<String, Value> = all
                .iter()
                .filter(|(name, _)| text.contains(&format!("\"{name}\"")))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            json!({"version": case.version, "parameters": parameters(), "resources": named, "snippet": case.snippet})
        })
        .collect();
    peers::heat_answers("hot_stack_eval.py", input)
}

fn shim_answer(case: &Case) -> Result<Value, String> {
    let Value::Object(specs) = parameters() else { unreachable!("parameters are a map") };
    let mut values: BTreeMap<String, Value> =
        specs.iter().map(|(name, spec)| (name.clone(), peers::typed_parameter(spec))).collect();
    // The pseudo parameters as the engine supplies them for a stack named as Heat's is.
    values.insert("OS::stack_name".into(), json!("hot-eval"));
    let Value::Object(all) = resources() else { unreachable!("resources are a map") };
    let resources = all
        .into_iter()
        .map(|(name, spec)| {
            let attributes = spec["attributes"].as_object().cloned().unwrap_or_default();
            let kind = spec["type"].as_str().unwrap_or_default().to_owned();
            (name, SnippetResource { kind, reference_id: spec["reference_id"].clone(), attributes })
        })
        .collect();
    evaluate_snippet_with_resources(case.version, &Map::new(), &values, &resources, &case.snippet)
}

#[test]
fn cfn_functions_and_all_attributes_agree_with_heat() {
    let cases = cases();
    let answers = heat_answers(&cases);
    let mut disagreements = Vec::new();
    for (case, heat) in cases.iter().zip(answers) {
        let shim = shim_answer(case);
        if !peers::same_answer(&shim, &heat, case.needle) {
            disagreements.push(format!("{} {}: heat {heat}, shim {shim:?}", case.version, case.snippet));
        }
    }
    assert!(disagreements.is_empty(), "{} disagreements:\n{}", disagreements.len(), disagreements.join("\n"));
}

/// Parameter values as Heat's parameter classes parse a user's text (`--param K=V`).
fn parameter_cases() -> Vec<(&'static str, &'static str)> {
    vec![
        ("comma_delimited_list", "a, b"),
        ("comma_delimited_list", " a ,b "),
        ("comma_delimited_list", ""),
        ("comma_delimited_list", "a,,b"),
        ("comma_delimited_list", ","),
        ("comma_delimited_list", "one"),
        ("boolean", "t"),
        ("boolean", "F"),
        ("boolean", "y"),
        ("boolean", "n"),
        ("boolean", " Yes "),
        ("boolean", "TRUE"),
        ("boolean", "off"),
        ("boolean", "1"),
        ("boolean", "2"),
        ("boolean", ""),
        ("boolean", "truthy"),
        ("json", "{\"a\": [1, 2]}"),
        ("json", "[1, \"x\"]"),
        ("json", " {\"a\": 1} "),
        ("json", ""),
        ("json", "  "),
        ("json", "5"),
        ("json", "\"text\""),
        ("json", "null"),
        ("json", "{bad"),
        ("number", "1"),
        ("number", " 2 "),
        ("number", "1.5"),
        ("number", "-3"),
        ("number", "1e3"),
        ("number", "+5"),
        ("number", "abc"),
        ("number", "0x10"),
        ("number", ""),
        ("string", " as is "),
    ]
}

/// Template defaults (YAML-typed values) as Heat's parameter classes parse them.
fn default_cases() -> Vec<(&'static str, Value)> {
    vec![
        ("comma_delimited_list", json!(["a", 1, 1.5, true, false, null])),
        ("comma_delimited_list", json!([])),
        ("comma_delimited_list", json!("x, y")),
        ("json", json!({"a": [1, null]})),
        ("json", json!([1, "two"])),
        ("json", json!(5)),
        ("json", json!(true)),
        ("boolean", json!(true)),
        ("boolean", json!(0)),
        ("boolean", json!(1)),
        ("boolean", json!(2)),
        ("boolean", json!("no")),
        ("number", json!(5)),
        ("number", json!(2.5)),
        ("number", json!("7")),
        ("string", json!(5)),
        ("string", json!(true)),
    ]
}

/// The shim's value for parameter `p` of type `kind`, given as `--param` text (a string) or as
/// the template's default (any other value, or a string with `as_default`).
fn shim_parameter(kind: &str, value: &Value, as_default: bool) -> Result<Value, String> {
    let default = if as_default { format!(", default: {value}") } else { String::new() };
    let text = format!("heat_template_version: 2021-04-16\nparameters:\n  p: {{type: {kind}{default}}}\n");
    let template = parse_template(&text).map_err(|error| error.to_string())?;
    let given = match (as_default, value) {
        (false, Value::String(text)) => BTreeMap::from([("p".to_owned(), text.clone())]),
        _ => BTreeMap::new(),
    };
    let mut values = resolve_parameters(&template, &given).map_err(|problems| problems.join("; "))?;
    Ok(values.remove("p").unwrap_or(Value::Null))
}

#[test]
fn parameter_values_parse_as_heat_parses_them() {
    let given = parameter_cases().into_iter().map(|(kind, text)| (kind, json!(text), false));
    let cases: Vec<(&str, Value, bool)> =
        given.chain(default_cases().into_iter().map(|(kind, value)| (kind, value, true))).collect();
    // Heat parses a user's value and a default alike (Parameter.parsed).
    let input: Vec<Value> = cases
        .iter()
        .map(|(kind, value, _)| {
            json!({"version": "2021-04-16", "parameters": {"p": {"type": kind, "value": value}},
                   "snippet": {"get_param": "p"}})
        })
        .collect();
    let answers = peers::heat_answers("hot_eval.py", input);
    let mut disagreements = Vec::new();
    for ((kind, value, as_default), heat) in cases.iter().zip(answers) {
        let shim = shim_parameter(kind, value, *as_default);
        if !peers::same_answer(&shim, &heat, None) {
            disagreements.push(format!("{kind} {value} (default: {as_default}): heat {heat}, shim {shim:?}"));
        }
    }
    assert!(disagreements.is_empty(), "{} disagreements:\n{}", disagreements.len(), disagreements.join("\n"));
}

const INNER: &str = "heat_template_version: 2021-04-16
resources:
  v: {type: OS::Heat::Value, properties: {value: 7}}
outputs:
  seven: {value: {get_attr: [v, value]}}
  text: {value: text}
  OS::stack_id: {value: {get_resource: v}}
";

/// Reads every attribute as null and every id as the resource's name: only the keys of a
/// `get_attr: [resource]` of a nested resource are compared.
struct Blank;

impl Scope for Blank {
    fn parameter(&self, _name: &str) -> Option<Value> {
        Some(Value::Null)
    }

    fn resource_id(&self, resource: &str) -> Option<Value> {
        Some(json!(resource))
    }

    fn attribute(&self, _resource: &str, _attribute: &str) -> Option<Value> {
        Some(Value::Null)
    }
}

#[test]
fn get_attr_of_a_nested_resource_alone_names_what_heat_names() {
    let resources = json!({
        "inner": {"type": "inner.yaml", "reference_id": "inner-id"},
        "group": {"type": "OS::Heat::ResourceGroup", "reference_id": "group-id",
                  "properties": {"count": 2, "resource_def": {"type": "OS::Heat::Value", "properties": {"value": 1}}}},
    });
    let input: Vec<Value> = ["inner", "group"]
        .iter()
        .map(|name| {
            json!({"version": "2021-04-16", "resources": {*name: resources[*name].clone()},
                   "files": {"inner.yaml": INNER}, "snippet": {"get_attr": [name]}})
        })
        .collect();
    let answers = peers::heat_answers("hot_stack_eval.py", input);
    let text = "heat_template_version: 2021-04-16
resources:
  inner: {type: inner.yaml}
  group:
    type: OS::Heat::ResourceGroup
    properties: {count: 2, resource_def: {type: OS::Heat::Value, properties: {value: 1}}}
outputs:
  inner: {value: {get_attr: [inner]}}
  group: {value: {get_attr: [group]}}
";
    let files: Map<String, Value> = [("inner.yaml".to_owned(), json!(INNER))].into_iter().collect();
    let environment = Environment::default();
    let (template, _) = parse_template_in(text, &environment, &files).expect("the template parses");
    let parameters =
        BTreeMap::from([("OS::stack_name".to_owned(), json!("s")), ("OS::stack_id".to_owned(), json!("i"))]);
    let flat = expand_nested(&template, &environment, &files, &parameters).expect("expands").expect("nested");
    for (index, name) in ["inner", "group"].into_iter().enumerate() {
        let heat: Vec<&str> = answers[index]["attributes"][name]
            .as_array()
            .unwrap_or_else(|| panic!("Heat answered {}", answers[index]))
            .iter()
            .filter_map(Value::as_str)
            .collect();
        let (_, output) = flat.outputs.iter().find(|(output, _)| output == name).expect("the output");
        let shim = output.value.evaluate(&Blank).expect("evaluates");
        let shim: Vec<&str> = shim.as_object().expect("a map").keys().map(String::as_str).collect();
        assert_eq!(shim, heat, "{name}");
    }
}
