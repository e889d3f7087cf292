//! Environments and files: parsing and refusing sections as heat.common.environment_format,
//! heatclient's deep_update merge, registry aliases (global, per resource, wildcards, loops),
//! parameter_defaults and parameters precedence, get_file substitution and the files limits.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use super::super::environment::{MAX_FILES, MAX_FILES_BYTES};
use super::super::{
    Environment, EnvironmentError, NestedKind, ResourceType, check_files, deep_update, parameter_texts,
    parse_environment, parse_template_in, resolve_parameters,
};

const TEMPLATE: &str = "heat_template_version: 2018-08-31
parameters:
  greeting: {type: string, default: hello}
  port: {type: number}
  names: {type: comma_delimited_list}
resources:
  config:
    type: My::Config
    properties:
      config: {get_file: scripts/run.sh}
  other:
    type: OS::Heat::SoftwareConfig
    properties:
      config: {get_param: greeting}
outputs:
  text:
    value: {get_file: notes.txt}
";

fn environment(value: Value) -> Environment {
    Environment::from_value(&value).unwrap_or_else(|problems| panic!("environment should be accepted: {problems:?}"))
}

fn files(entries: &[(&str, &str)]) -> Map<String, Value> {
    entries.iter().map(|(key, content)| ((*key).to_owned(), json!(content))).collect()
}

fn standard_files() -> Map<String, Value> {
    files(&[("scripts/run.sh", "#!/bin/sh\necho run\n"), ("notes.txt", "notes")])
}

fn problems_of(text: &str, environment: &Environment, files: &Map<String, Value>) -> Vec<String> {
    match parse_template_in(text, environment, files) {
        Ok(_) => panic!("the template should be rejected"),
        Err(error) => error.problems(),
    }
}

#[test]
fn sections_are_checked_as_heat_checks_them() {
    assert_eq!(parse_environment("").unwrap(), Map::new());
    assert_eq!(parse_environment("# only a comment\n").unwrap(), Map::new());
    assert_eq!(
        parse_environment("parameter_default: {a: 1}").unwrap_err().to_string(),
        "environment has wrong section \"parameter_default\" (one of parameters, resource_registry, \
         parameter_defaults, encrypted_param_names, event_sinks, parameter_merge_strategies)"
    );
    // heatclient keeps a null section for the merge; the server refuses one left null.
    assert_eq!(parse_environment("parameters:\n").unwrap()["parameters"], Value::Null);
    let problems = Environment::from_value(&json!({"parameters": null})).unwrap_err();
    assert_eq!(problems, ["environment has empty section \"parameters\""]);
    assert_eq!(parse_environment("[1, 2]").unwrap_err(), EnvironmentError::NotMapping);
    assert!(matches!(parse_environment("a: [").unwrap_err(), EnvironmentError::Yaml(_)));
    let parsed = parse_environment("\u{feff}parameters: {timeout: 1:30, flag: yes}").unwrap();
    assert_eq!(parsed["parameters"], json!({"timeout": 90, "flag": true}));
    // heatclient reads a JSON environment as YAML too: `1e3` stays a string.
    let parsed = parse_environment("{\"parameters\": {\"n\": 1e3, \"m\": 1.5}}").unwrap();
    assert_eq!(parsed["parameters"], json!({"n": "1e3", "m": 1.5}));
}

#[test]
fn deep_update_merges_mappings_and_keeps_them_over_null() {
    let mut merged = Map::new();
    let first = json!({"parameters": {"a": 1, "b": 2}, "resource_registry": {"resources": {"x": {"A::B": "C::D"}}}});
    let second = json!({"parameters": {"b": 3, "c": [1]}, "resource_registry": {"resources": null}});
    deep_update(&mut merged, first.as_object().unwrap().clone());
    deep_update(&mut merged, second.as_object().unwrap().clone());
    assert_eq!(
        Value::Object(merged),
        json!({"parameters": {"a": 1, "b": 3, "c": [1]}, "resource_registry": {"resources": {"x": {"A::B": "C::D"}}}})
    );
}

#[test]
fn registry_aliases_resolve_globally_per_resource_and_by_wildcard() {
    let registry = environment(json!({"resource_registry": {
        "My::Config": "My::Middle",
        "My::Middle": "OS::Heat::SoftwareConfig",
        "Legacy::*": "OS::Heat::*",
        "OS::Old::*": "OS::Heat::None",
        "resources": {"special": {"OS::Nova::Server": "OS::Heat::DeployedServer"}}
    }}));
    assert_eq!(registry.resolve_type("a", "My::Config").unwrap(), "OS::Heat::SoftwareConfig");
    assert_eq!(registry.resolve_type("a", "Legacy::StructuredConfig").unwrap(), "OS::Heat::StructuredConfig");
    assert_eq!(registry.resolve_type("special", "OS::Nova::Server").unwrap(), "OS::Heat::DeployedServer");
    assert_eq!(registry.resolve_type("special_1", "OS::Nova::Server").unwrap(), "OS::Nova::Server", "exact names");
    assert_eq!(registry.resolve_type("a", "OS::Old::Thing").unwrap(), "OS::Heat::None", "many to one");
    assert_eq!(registry.resolve_type("plain", "OS::Nova::Server").unwrap(), "OS::Nova::Server");
    let looping = environment(json!({"resource_registry": {"A::B": "C::D", "C::D": "A::B"}}));
    assert!(looping.resolve_type("x", "A::B").unwrap_err().contains("form a loop"));
}

#[test]
fn bad_targets_hooks_and_bad_sections_are_refused_with_every_problem() {
    let problems = Environment::from_value(&json!({
        "resource_registry": {"My::Server": "server", "resources": {"r": {"hooks": "pre-create"}}},
        "parameters": [1],
        "parameter_merge_strategies": {"a": "append"},
    }))
    .unwrap_err();
    assert_eq!(problems.len(), 4, "{problems:?}");
    assert!(problems.iter().any(|problem| problem.contains(
        "\"My::Server\" maps to \"server\", neither a resource type nor a template file (.yaml, .template)"
    )));
    assert!(problems.iter().any(|problem| problem.contains("\"hooks\" is not supported")));
    assert!(
        problems.iter().any(|problem| problem.contains("the strategy must be one of overwrite, merge, deep_merge"))
    );
    assert!(Environment::from_value(&json!({"resources": {}})).unwrap_err()[0].contains("wrong section"));
}

#[test]
fn a_template_parses_with_its_registry_and_files() {
    let env = environment(json!({"resource_registry": {"My::Config": "OS::Heat::SoftwareConfig"}}));
    let (template, resolved) = parse_template_in(TEMPLATE, &env, &standard_files()).unwrap();
    let config = template.resource("config").unwrap();
    assert_eq!(config.kind, ResourceType::SoftwareConfig);
    assert_eq!(config.property("config").unwrap().to_json(), json!("#!/bin/sh\necho run\n"));
    assert_eq!(template.outputs[0].1.value.to_json(), json!("notes"));
    let mut stored = super::super::parse_stored_template(&resolved.expect("the resolved text is stored")).unwrap();
    // The stored text is JSON on one line: only the resources' lines differ.
    for ((_, resource), (_, original)) in stored.resources.iter_mut().zip(&template.resources) {
        resource.line = original.line;
    }
    assert_eq!(stored, template, "the stored text parses to the same template");
}

#[test]
fn a_template_file_as_a_type_is_a_nested_stack() {
    let text = "heat_template_version: 2018-08-31\nresources:\n  web: {type: server.yaml}\n";
    let (template, _) = parse_template_in(text, &Environment::default(), &Map::new()).unwrap();
    let web = template.resource("web").unwrap();
    assert_eq!(web.nested.as_ref().unwrap().kind, NestedKind::Provider("server.yaml".into()));
    let env = environment(json!({"resource_registry": {"My::Server": "server.yaml"}}));
    let text = "heat_template_version: 2018-08-31\nresources:\n  web: {type: My::Server}\n";
    let (template, _) = parse_template_in(text, &env, &Map::new()).unwrap();
    assert_eq!(
        template.resource("web").unwrap().nested.as_ref().unwrap().kind,
        NestedKind::Provider("server.yaml".into())
    );
}

#[test]
fn missing_files_and_unknown_types_are_reported_together() {
    let problems = problems_of(TEMPLATE, &Environment::default(), &files(&[("scripts/run.sh", "x")]));
    assert_eq!(problems.len(), 2, "{problems:?}");
    assert_eq!(
        problems[0],
        "output text: get_file: no file \"notes.txt\" in the request's files (the client reads it relative to the \
         template) (line 17)"
    );
    assert!(problems[1].contains("unknown resource type \"My::Config\""), "{problems:?}");
}

#[test]
fn one_file_named_many_times_cannot_multiply_the_template() {
    let big = "x".repeat(MAX_FILES_BYTES / 2 + 1);
    let text = "heat_template_version: 2018-08-31
resources:
  a:
    type: OS::Heat::SoftwareConfig
    properties:
      config: {get_file: big}
      options: {one: {get_file: big}}
";
    let problems = problems_of(text, &Environment::default(), &files(&[("big", &big)]));
    assert!(problems[0].contains("add up to more than"), "{problems:?}");
}

#[test]
fn files_maps_are_bounded_in_count_size_and_keys() {
    let many: Map<String, Value> = (0..=MAX_FILES).map(|index| (format!("f{index}"), json!(""))).collect();
    assert!(check_files(&many).unwrap_err()[0].contains("entries, over the limit"));
    let huge = files(&[("a", &"x".repeat(MAX_FILES_BYTES)), ("b", "y")]);
    assert!(check_files(&huge).unwrap_err()[0].contains("bytes in all"));
    let mut odd = files(&[("", "x"), ("a\nb", "y")]);
    odd.insert("n".into(), json!(1));
    assert_eq!(check_files(&odd).unwrap_err().len(), 3);
    // `..` in a key is only a name here: the shim never opens files by key.
    assert!(check_files(&files(&[("../../etc/passwd", "x")])).is_ok());
}

#[test]
fn parameters_come_from_the_request_then_the_environment_then_parameter_defaults() {
    let env = environment(json!({
        "parameters": {"port": 8080, "names": ["a", "b"], "greeting": "from parameters"},
        "parameter_defaults": {"greeting": "from defaults", "port": 1, "undeclared": "ignored"},
        "resource_registry": {"My::Config": "OS::Heat::SoftwareConfig"}
    }));
    let (template, _) = parse_template_in(TEMPLATE, &env, &standard_files()).unwrap();
    assert_eq!(template.parameter("greeting").unwrap().default, Some(json!("from defaults")));
    let given = BTreeMap::from([("port".to_owned(), "9090".to_owned())]);
    let texts = parameter_texts(&template, &env, &given);
    let values = resolve_parameters(&template, &texts).unwrap();
    assert_eq!(values["port"], json!(9090), "the request wins");
    assert_eq!(values["names"], json!(["a", "b"]));
    assert_eq!(values["greeting"], json!("from parameters"));
}

#[test]
fn parameter_defaults_give_a_value_to_a_parameter_without_one() {
    let env = environment(json!({
        "parameter_defaults": {"port": 22, "names": "x,y"},
        "resource_registry": {"My::Config": "OS::Heat::SoftwareConfig"}
    }));
    let (template, _) = parse_template_in(TEMPLATE, &env, &standard_files()).unwrap();
    let values = resolve_parameters(&template, &parameter_texts(&template, &env, &BTreeMap::new())).unwrap();
    assert_eq!((values["port"].clone(), values["names"].clone()), (json!(22), json!(["x", "y"])));
    let null = environment(json!({
        "parameter_defaults": {"greeting": null},
        "resource_registry": {"My::Config": "OS::Heat::SoftwareConfig"}
    }));
    let (template, _) = parse_template_in(TEMPLATE, &null, &standard_files()).unwrap();
    assert_eq!(template.parameter("greeting").unwrap().default, Some(json!("hello")), "null keeps the template's");
}

#[test]
fn environment_files_are_bounded_and_must_be_in_files() {
    use crate::template::{MAX_ENVIRONMENT_FILES, merge_environment_files};
    let files: Map<String, Value> = [("e.yaml".to_owned(), json!("parameters: {a: 1}\n"))].into_iter().collect();
    let names = vec!["e.yaml".to_owned(); MAX_ENVIRONMENT_FILES + 1];
    let error = merge_environment_files(&names, &files, &BTreeMap::new(), &BTreeMap::new()).unwrap_err();
    assert!(error.contains("over the limit of 100"), "{error}");
    let error =
        merge_environment_files(&["/etc/passwd".to_owned()], &files, &BTreeMap::new(), &BTreeMap::new()).unwrap_err();
    assert!(error.contains("\"/etc/passwd\" is not in the request's files"), "{error}");
    let binary: Map<String, Value> = [("e.yaml".to_owned(), json!({"not": "text"}))].into_iter().collect();
    let error =
        merge_environment_files(&["e.yaml".to_owned()], &binary, &BTreeMap::new(), &BTreeMap::new()).unwrap_err();
    assert!(error.contains("must be text"), "{error}");
}

#[test]
fn environment_files_named_again_share_one_alias_budget() {
    use crate::template::merge_environment_files;
    // Within its own budget (the anchor's copy and two aliases' of 100 KB), but the merge keeps
    // what every reading expanded to: a name repeated must not read under a new budget.
    let text = format!("parameter_defaults: {{a: &a \"{}\", b: *a, c: *a}}\n", "v".repeat(100_000));
    let files: Map<String, Value> = [("e.yaml".to_owned(), json!(text))].into_iter().collect();
    let once = merge_environment_files(&["e.yaml".to_owned()], &files, &BTreeMap::new(), &BTreeMap::new());
    assert_eq!(once.map(|merged| merged["parameter_defaults"]["c"].as_str().map(str::len)), Ok(Some(100_000)));
    let names = vec!["e.yaml".to_owned(); 3];
    let error = merge_environment_files(&names, &files, &BTreeMap::new(), &BTreeMap::new()).unwrap_err();
    assert!(error.starts_with("environment file \"e.yaml\": line 1 column "), "{error}");
    let limit = anneal_protocol::alias_budget::AliasBudget::for_text(text.len()).limit();
    assert!(error.contains(&format!("aliases expand to more than {limit} bytes")), "{error}");
}
