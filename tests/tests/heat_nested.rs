//! Differential: nested stacks (provider templates, by file name and through an environment's
//! `resource_registry`) and `OS::Heat::ResourceGroup` in a real Heat engine
//! (tests/peers/real-heat, openstack-heat from PyPI) and in the real shim binary. The same
//! template, files and environment give the same outputs, before and after an update that
//! shrinks a group, and the same mistakes are refused by both. Heat receives the nested
//! templates in the request's `files` map; the shim's CLI reads them from disk next to the
//! template, as a Heat user's `openstack stack create` does.

use std::collections::BTreeMap;
use std::time::Duration;

use anneal_tests::{RealHeat, Shim, real_heat::HeatApi, real_heat::StackRef, real_heat::unique_stack_name};
use reqwest::{Method, StatusCode};
use serde_json::{Map, Value, json};

/// A provider template older than its parent (2016-10-14 has `conditions` and `if`) with a
/// parameter of each type, two with defaults.
const INNER: &str = r#"
heat_template_version: 2016-10-14
parameters:
  text: {type: string}
  amount: {type: number}
  items: {type: comma_delimited_list}
  data: {type: json}
  flag: {type: boolean}
  fallback: {type: string, default: fell-back}
  fallback_items: {type: comma_delimited_list, default: "p,q"}
conditions:
  flagged: {get_param: flag}
  zero: {equals: [{get_param: amount}, 0]}
resources:
  echo:
    type: OS::Heat::Value
    properties:
      value:
        text: {get_param: text}
        amount: {get_param: amount}
        items: {get_param: items}
        data: {get_param: data}
        flag: {get_param: flag}
        fallback: {get_param: fallback}
        fallback_items: {get_param: fallback_items}
  only_flagged:
    type: OS::Heat::Value
    condition: flagged
    properties: {value: {str_replace: {template: flagged-T, params: {T: {get_param: text}}}}}
outputs:
  text: {value: {get_param: text}}
  all: {value: {get_attr: [echo, value]}}
  first_item: {value: {get_param: [items, 0]}}
  flagged: {value: {if: [flagged, "on", "off"]}}
  zero: {value: {if: [zero, zero, nonzero]}}
"#;

const PROVIDER_PARENT: &str = r#"
heat_template_version: 2021-04-16
parameters:
  size: {type: number, default: 7}
resources:
  full:
    type: inner.yaml
    properties:
      text: hello
      amount: {get_param: size}
      items: "a,b,c"
      data: {k: [1, 2], s: t}
      flag: true
      fallback: given
  sparse:
    type: inner.yaml
    properties:
      text: other
      amount: "2.5"
      items: [x]
      data: {}
      flag: "false"
outputs:
  full_all: {value: {get_attr: [full, all]}}
  full_text: {value: {get_attr: [full, text]}}
  full_path: {value: {get_attr: [full, all, data, k, 1]}}
  full_first: {value: {get_attr: [full, first_item]}}
  full_flagged: {value: {get_attr: [full, flagged]}}
  full_zero: {value: {get_attr: [full, zero]}}
  full_inner: {value: {get_attr: [full, resource.echo, value, items]}}
  full_inner_dotted: {value: {get_attr: [full, resource.echo.value, fallback_items]}}
  full_only_flagged: {value: {get_attr: [full, resource.only_flagged, value]}}
  sparse_all: {value: {get_attr: [sparse, all]}}
  sparse_first: {value: {get_attr: [sparse, first_item]}}
  sparse_flagged: {value: {get_attr: [sparse, flagged]}}
"#;

/// A small provider template, used through a `resource_registry` type and as group members.
const MEMBER: &str = r#"
heat_template_version: 2018-08-31
parameters:
  label: {type: string, default: unlabelled}
resources:
  inner: {type: OS::Heat::Value, properties: {value: {list_join: ["-", [member, {get_param: label}]]}}}
  stub: {type: OS::Heat::None}
outputs:
  out: {value: {get_attr: [inner, value]}}
"#;

/// JSON, which is YAML too: Heat takes it as the body's `environment`, the shim as `-e` file.
/// A type alias to a provider template, and one resource's own override (`resources:`).
const REGISTRY_ENVIRONMENT: &str = r#"{"resource_registry": {"My::Member": "member.yaml",
    "resources": {"overridden": {"OS::Heat::None": "member.yaml"}}}}"#;

const REGISTRY_PARENT: &str = r#"
heat_template_version: 2018-08-31
resources:
  mapped: {type: My::Member, properties: {label: mapped}}
  defaulted: {type: My::Member}
  overridden: {type: OS::Heat::None, properties: {label: overridden}}
  not_overridden: {type: OS::Heat::None}
outputs:
  overridden: {value: {get_attr: [overridden, out]}}
  not_overridden: {value: {get_attr: [not_overridden, anything]}}
  mapped: {value: {get_attr: [mapped, out]}}
  defaulted: {value: {get_attr: [defaulted, out]}}
  inner: {value: {get_attr: [mapped, resource.inner, value]}}
"#;

/// A group template; `REMOVAL` is replaced by the group's `removal_policies` (empty or a list).
const GROUP_PARENT: &str = r#"
heat_template_version: 2018-08-31
parameters:
  count: {type: number, default: 3}
  pattern: {type: string, default: "p-%index%"}
resources:
  patterned:
    type: OS::Heat::ResourceGroup
    properties:
      count: 2
      resource_def:
        type: OS::Heat::Value
        properties: {value: {from_parameter: {get_param: pattern}, keyed: {"k%index%": "v%index%"}}}
  group:
    type: OS::Heat::ResourceGroup
    properties:
      count: {get_param: count}
      REMOVAL
      resource_def:
        type: OS::Heat::Value
        properties: {value: "member-%index%"}
  custom:
    type: OS::Heat::ResourceGroup
    properties:
      count: 2
      index_var: __n__
      resource_def:
        type: member.yaml
        properties: {label: "m__n__"}
outputs:
  values: {value: {get_attr: [group, value]}}
  # Member 2 stays through every update: an output naming a removed member is an output
  # error in Heat, while the shim refuses the template (not yet the same).
  two: {value: {get_attr: [group, resource.2, value]}}
  attributes: {value: {get_attr: [group, attributes, value]}}
  removed: {value: {get_attr: [group, removed_rsrc_list]}}
  refs: {value: {get_attr: [group, refs]}}
  refs_map: {value: {get_attr: [group, refs_map]}}
  patterned: {value: {get_attr: [patterned, value]}}
  custom_values: {value: {get_attr: [custom, out]}}
  custom_one: {value: {get_attr: [custom, resource.1, out]}}
  custom_attributes: {value: {get_attr: [custom, attributes, out]}}
"#;

/// A provider template that names its own id (`OS::stack_id`), so that `get_resource` and a
/// group's `refs` are the same text in both.
const NAMED: &str = r#"
heat_template_version: 2018-08-31
parameters:
  label: {type: string, default: unlabelled}
resources:
  inner: {type: OS::Heat::Value, properties: {value: {list_join: ["-", [named, {get_param: label}]]}}}
outputs:
  OS::stack_id: {value: {get_attr: [inner, value]}}
  label: {value: {get_param: label}}
"#;

/// `parameter_defaults` reach the nested templates' parameters (the parent declares none).
const DEFAULTS_ENVIRONMENT: &str =
    r#"{"resource_registry": {"My::Named": "named.yaml"}, "parameter_defaults": {"label": "from-defaults"}}"#;

const IDS_PARENT: &str = r#"
heat_template_version: 2018-08-31
resources:
  single: {type: My::Named}
  given: {type: My::Named, properties: {label: given}}
  group:
    type: OS::Heat::ResourceGroup
    properties:
      count: 2
      resource_def: {type: My::Named, properties: {label: "g%index%"}}
  empty:
    type: OS::Heat::ResourceGroup
    properties: {count: 0, resource_def: {type: OS::Heat::Value, properties: {value: x}}}
outputs:
  single_id: {value: {get_resource: single}}
  single_label: {value: {get_attr: [single, label]}}
  given_id: {value: {get_resource: given}}
  group_refs: {value: {get_attr: [group, refs]}}
  group_ref_1: {value: {get_attr: [group, refs, 1]}}
  group_refs_map: {value: {get_attr: [group, refs_map]}}
  group_member_id: {value: {get_attr: [group, resource.0]}}
  group_labels: {value: {get_attr: [group, label]}}
  empty_values: {value: {get_attr: [empty, value]}}
  empty_refs: {value: {get_attr: [empty, refs]}}
  empty_attributes: {value: {get_attr: [empty, attributes, value]}}
"#;

/// Outputs whose values are the members' ids (Heat's are generated physical names such as
/// `<stack>-group-<random>-0-<random>`, the shim's its own): compared by shape only.
const ID_OUTPUTS: &[&str] = &["refs", "refs_map"];

/// Parents both must refuse, with `inner.yaml` (INNER) and `member.yaml` (MEMBER) given:
/// (what the case shows, resource definitions and outputs).
const REFUSED: &[(&str, &str)] = &[
    (
        "an unknown property on a provider resource",
        "resources:\n  m: {type: member.yaml, properties: {label: x, colour: red}}\n",
    ),
    (
        "a required nested parameter without a property",
        "resources:\n  i: {type: inner.yaml, properties: {text: t, amount: 1, items: a, data: {}}}\n",
    ),
    (
        "a property that is not the nested parameter's type",
        "resources:\n  i: {type: inner.yaml, properties: {text: t, amount: abc, items: a, data: {}, flag: true}}\n",
    ),
    (
        "an output reading a provider resource its condition leaves out",
        "conditions: {never: false}\nresources:\n  m: {type: member.yaml, condition: never}\noutputs:\n  o: {value: {get_attr: [m, out]}}\n",
    ),
    ("a resource name with a slash", "resources:\n  a/b: {type: OS::Heat::None}\n"),
    ("a provider template missing from the files", "resources:\n  m: {type: absent.yaml}\n"),
    (
        "a negative group count",
        "resources:\n  g: {type: OS::Heat::ResourceGroup, properties: {count: -1, resource_def: {type: OS::Heat::None}}}\n",
    ),
    (
        "an index_var shorter than 3 characters",
        "resources:\n  g: {type: OS::Heat::ResourceGroup, properties: {index_var: '%', resource_def: {type: OS::Heat::None}}}\n",
    ),
    (
        "a group member of an unknown type",
        "resources:\n  g: {type: OS::Heat::ResourceGroup, properties: {resource_def: {type: OS::No::Such}}}\n",
    ),
    (
        "an unknown property on a group member",
        "resources:\n  g: {type: OS::Heat::ResourceGroup, properties: {resource_def: {type: member.yaml, properties: {colour: red}}}}\n",
    ),
    ("a group without resource_def", "resources:\n  g: {type: OS::Heat::ResourceGroup, properties: {count: 2}}\n"),
];

/// One stack's inputs: the parent, the files beside it and an optional environment.
struct Case<'a> {
    name: &'a str,
    template: String,
    files: &'a [(&'a str, &'a str)],
    environment: Option<&'a str>,
    parameters: &'a [(&'a str, &'a str)],
}

impl Case<'_> {
    fn heat_body(&self) -> Value {
        let files: Map<String, Value> =
            self.files.iter().map(|(name, text)| (name.to_string(), Value::String(text.to_string()))).collect();
        let environment: Value = match self.environment {
            Some(text) => serde_json::from_str(text).expect("the environment is JSON"),
            None => json!({}),
        };
        let parameters: Map<String, Value> =
            self.parameters.iter().map(|(key, value)| (key.to_string(), Value::String(value.to_string()))).collect();
        json!({
            "stack_name": unique_stack_name(self.name),
            "template": self.template,
            "files": files,
            "environment": environment,
            "parameters": parameters,
        })
    }

    /// Writes the template, files and environment into the shim's dir; returns the CLI's
    /// `--template F [-e ENV] [--param K=V]...` arguments.
    fn shim_arguments(&self, shim: &Shim) -> Vec<String> {
        for (name, text) in self.files {
            shim.write_template(name, text);
        }
        let template = shim.write_template(&format!("{}.yaml", self.name), &self.template);
        let mut arguments = vec!["--template".to_string(), template.to_str().expect("utf-8").to_string()];
        if let Some(text) = self.environment {
            let environment = shim.write_template(&format!("{}-env.yaml", self.name), text);
            arguments.extend(["-e".to_string(), environment.to_str().expect("utf-8").to_string()]);
        }
        for (key, value) in self.parameters {
            arguments.extend(["--param".to_string(), format!("{key}={value}")]);
        }
        arguments
    }
}

/// Creates the case in Heat and waits; asserts CREATE_COMPLETE.
async fn heat_create(api: &HeatApi, case: &Case<'_>) -> StackRef {
    let body = case.heat_body();
    let (status, answer) = api.call(Method::POST, "stacks", Some(&body)).await;
    assert_eq!(status, StatusCode::CREATED, "Heat refused {}: {answer}", case.name);
    let id = answer["stack"]["id"].as_str().unwrap_or_else(|| panic!("no stack id in {answer}"));
    let stack = StackRef { name: body["stack_name"].as_str().expect("a name").to_string(), id: id.to_string() };
    let settled = api.wait_stack_settled(&stack, None, Duration::from_secs(180)).await;
    assert_eq!(settled["stack_status"], "CREATE_COMPLETE", "Heat created {}: {settled}", case.name);
    stack
}

/// Creates the case in the shim and waits; asserts CREATE_COMPLETE.
async fn shim_create(shim: &Shim, case: &Case<'_>) {
    let mut arguments = vec!["stack".to_string(), "create".to_string(), case.name.to_string()];
    arguments.extend(case.shim_arguments(shim));
    let arguments: Vec<&str> = arguments.iter().map(String::as_str).collect();
    let created = shim.cli(&arguments).await;
    assert_eq!(created.code, 0, "the shim refused {}: {created:?}", case.name);
    let shown = shim.settled(case.name, Duration::from_secs(60)).await;
    assert_eq!(shown["status"], "CREATE_COMPLETE", "the shim created {}: {shown}", case.name);
}

/// Ids are compared by shape: a list of as many strings, a map with the same keys.
fn id_shape(value: &Value) -> Value {
    match value {
        Value::Array(items) => Value::Array(items.iter().map(|item| json!(item.is_string())).collect()),
        Value::Object(map) => {
            Value::Object(map.iter().map(|(key, item)| (key.clone(), json!(item.is_string()))).collect())
        }
        other => other.clone(),
    }
}

/// Every output of either side that differs, each named.
fn differences(heat: &BTreeMap<String, Value>, shim: &Map<String, Value>) -> Vec<String> {
    let mut names: Vec<&String> = heat.keys().chain(shim.keys()).collect();
    names.sort();
    names.dedup();
    names
        .into_iter()
        .filter_map(|name| {
            let (heat_value, shim_value) = (heat.get(name).cloned(), shim.get(name).cloned());
            let (heat_value, shim_value) = if ID_OUTPUTS.contains(&name.as_str()) {
                (heat_value.as_ref().map(id_shape), shim_value.as_ref().map(id_shape))
            } else {
                (heat_value, shim_value)
            };
            (heat_value != shim_value).then(|| format!("output {name}: Heat {heat_value:?}, the shim {shim_value:?}"))
        })
        .collect()
}

/// Creates the case in both, compares every output, deletes Heat's stack.
async fn assert_same_outputs(case: &Case<'_>) {
    let heat = RealHeat::shared().await;
    let api = heat.admin().await;
    let stack = heat_create(&api, case).await;
    let heat_outputs = api.outputs(&stack).await;
    let unresolved: Vec<&String> =
        heat_outputs.iter().filter(|(_, value)| value.get("error").is_some()).map(|(name, _)| name).collect();
    assert!(unresolved.is_empty(), "{}: Heat could not resolve {unresolved:?}: {heat_outputs:?}", case.name);
    let shim = Shim::start().await;
    shim_create(&shim, case).await;
    let shim_outputs = shim.stack_outputs(case.name).await;
    api.delete_stack(&stack).await;
    let differing = differences(&heat_outputs, &shim_outputs);
    assert!(differing.is_empty(), "{}: the shim's outputs differ from Heat's:\n{}", case.name, differing.join("\n"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn provider_template_by_file_name_gives_heats_outputs() {
    let case = Case {
        name: "provider",
        template: PROVIDER_PARENT.to_string(),
        files: &[("inner.yaml", INNER)],
        environment: None,
        parameters: &[],
    };
    assert_same_outputs(&case).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn registry_mapped_provider_gives_heats_outputs() {
    let case = Case {
        name: "registry",
        template: REGISTRY_PARENT.to_string(),
        files: &[("member.yaml", MEMBER)],
        environment: Some(REGISTRY_ENVIRONMENT),
        parameters: &[],
    };
    assert_same_outputs(&case).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resource_group_gives_heats_outputs() {
    let case = Case {
        name: "group",
        template: GROUP_PARENT.replace("REMOVAL", ""),
        files: &[("member.yaml", MEMBER)],
        environment: None,
        parameters: &[("count", "3")],
    };
    assert_same_outputs(&case).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn provider_ids_and_parameter_defaults_give_heats_outputs() {
    let case = Case {
        name: "ids",
        template: IDS_PARENT.to_string(),
        files: &[("named.yaml", NAMED)],
        environment: Some(DEFAULTS_ENVIRONMENT),
        parameters: &[],
    };
    assert_same_outputs(&case).await;
}

/// The group template with `removal_policies` naming `removed`.
fn group_removing(removed: &str) -> String {
    GROUP_PARENT.replace("REMOVAL", &format!("removal_policies: [{{resource_list: [{removed}]}}]"))
}

/// `member.yaml` changed: its value gains a prefix.
const MEMBER_CHANGED: &str = r#"
heat_template_version: 2018-08-31
parameters:
  label: {type: string, default: unlabelled}
resources:
  inner: {type: OS::Heat::Value, properties: {value: {list_join: ["-", [changed, {get_param: label}]]}}}
outputs:
  out: {value: {get_attr: [inner, value]}}
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn updating_groups_with_removal_policies_gives_heats_outputs() {
    let created = Case {
        name: "shrink",
        template: GROUP_PARENT.replace("REMOVAL", ""),
        files: &[("member.yaml", MEMBER)],
        environment: None,
        parameters: &[("count", "3")],
    };
    // Shrink by removing member 0; again, with the whole list (as the docs ask) and a changed
    // nested template; then grow: new members take the next free indices.
    let first = group_removing("\"0\"");
    let whole = group_removing("\"0\", \"1\"");
    let updates = [
        ("shrink", first.clone(), &[("member.yaml", MEMBER)], &[("count", "2")]),
        ("shrink again, nested template changed", whole.clone(), &[("member.yaml", MEMBER_CHANGED)], &[("count", "1")]),
        ("grow", whole, &[("member.yaml", MEMBER_CHANGED)], &[("count", "3")]),
    ];
    let updates: Vec<(&str, Case)> = updates
        .into_iter()
        .map(|(what, template, files, parameters)| {
            (what, Case { name: "shrink", template, files, environment: None, parameters })
        })
        .collect();
    let heat = RealHeat::shared().await;
    let api = heat.admin().await;
    let stack = heat_create(&api, &created).await;
    let mut heat_outputs = Vec::new();
    for (what, update) in &updates {
        heat_update(&api, &stack, update, what).await;
        heat_outputs.push(api.outputs(&stack).await);
    }
    api.delete_stack(&stack).await;

    let shim = Shim::start().await;
    shim_create(&shim, &created).await;
    let mut differing = Vec::new();
    for ((what, update), heat_outputs) in updates.iter().zip(&heat_outputs) {
        let mut arguments = vec!["stack".to_string(), "update".to_string(), "shrink".to_string(), "--wait".to_string()];
        arguments.extend(update.shim_arguments(&shim));
        let arguments: Vec<&str> = arguments.iter().map(String::as_str).collect();
        let answer = shim.cli(&arguments).await;
        assert_eq!(answer.code, 0, "{what}: the shim refused the update: {answer:?}");
        let shown = shim.settled("shrink", Duration::from_secs(60)).await;
        assert_eq!(shown["status"], "UPDATE_COMPLETE", "{what}: the shim updated: {shown}");
        let shim_outputs = shim.stack_outputs("shrink").await;
        differing.extend(differences(heat_outputs, &shim_outputs).into_iter().map(|found| format!("{what}: {found}")));
    }
    assert!(differing.is_empty(), "after the updates the shim's outputs differ from Heat's:\n{}", differing.join("\n"));
}

/// PUTs the update (with its files) and waits until Heat has finished it: its `updated_time`
/// changed and its status is no longer in progress.
async fn heat_update(api: &HeatApi, stack: &StackRef, update: &Case<'_>, what: &str) {
    let before = api.stack(stack).await["updated_time"].clone();
    let mut body = update.heat_body();
    body.as_object_mut().expect("a map").remove("stack_name");
    let path = format!("stacks/{}/{}", stack.name, stack.id);
    let (status, answer) = api.call(Method::PUT, &path, Some(&body)).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{what}: Heat refused the update: {answer}");
    let deadline = std::time::Instant::now() + Duration::from_secs(180);
    loop {
        tokio::time::sleep(Duration::from_millis(300)).await;
        let shown = api.stack(stack).await;
        let status = shown["stack_status"].as_str().unwrap_or_default().to_string();
        if shown["updated_time"] != before && !status.ends_with("_IN_PROGRESS") {
            assert_eq!(status, "UPDATE_COMPLETE", "{what}: Heat updated: {shown}");
            return;
        }
        assert!(std::time::Instant::now() < deadline, "{what}: Heat's update did not finish: {shown}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nested_mistakes_are_refused_by_both() {
    let heat = RealHeat::shared().await;
    let api = heat.admin().await;
    let shim = Shim::start().await;
    let mut mismatches = Vec::new();
    for (index, (what, body)) in REFUSED.iter().enumerate() {
        let name = format!("refused{index}");
        let case = Case {
            name: &name,
            template: format!("heat_template_version: 2018-08-31\n{body}"),
            files: &[("inner.yaml", INNER), ("member.yaml", MEMBER)],
            environment: None,
            parameters: &[],
        };
        let (status, answer) = api.call(Method::POST, "stacks", Some(&case.heat_body())).await;
        let heat_refused = status == StatusCode::BAD_REQUEST;
        let mut arguments = vec!["stack".to_string(), "create".to_string(), name.clone()];
        arguments.extend(case.shim_arguments(&shim));
        let arguments: Vec<&str> = arguments.iter().map(String::as_str).collect();
        let created = shim.cli(&arguments).await;
        if heat_refused != (created.code != 0) {
            mismatches.push(format!("{what}: Heat {status} {answer}; the shim {created:?}"));
        }
        assert!(heat_refused, "{what}: Heat is expected to refuse it, answered {status} {answer}");
    }
    assert!(mismatches.is_empty(), "the shim and Heat disagree:\n{}", mismatches.join("\n"));
}

/// The group template without the output that reads member 2.
fn group_without_member_two(removal: &str) -> String {
    let template = GROUP_PARENT.replace("REMOVAL", removal);
    template.lines().filter(|line| !line.contains("resource.2")).collect::<Vec<_>>().join("\n")
}

/// A documented difference (docs/templates.md, ResourceGroup): in Heat's default `append` mode a
/// later update's `removal_policies` add to the names removed before; the shim keeps only the
/// current update's list, so a name left out of it may be used again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn append_mode_keeps_earlier_removals_only_in_heat() {
    let files: &[(&str, &str)] = &[("member.yaml", MEMBER)];
    let case = |template: String, parameters| Case { name: "append", template, files, environment: None, parameters };
    let created = case(group_without_member_two(""), &[("count", "3")]);
    let updates = [
        case(group_without_member_two("removal_policies: [{resource_list: [\"0\"]}]"), &[("count", "2")]),
        case(group_without_member_two("removal_policies: [{resource_list: [\"1\"]}]"), &[("count", "1")]),
    ];
    let heat = RealHeat::shared().await;
    let api = heat.admin().await;
    let stack = heat_create(&api, &created).await;
    for update in &updates {
        heat_update(&api, &stack, update, "append").await;
    }
    let heat_outputs = api.outputs(&stack).await;
    api.delete_stack(&stack).await;
    let shim = Shim::start().await;
    shim_create(&shim, &created).await;
    for update in &updates {
        let mut arguments = vec!["stack".to_string(), "update".to_string(), "append".to_string(), "--wait".to_string()];
        arguments.extend(update.shim_arguments(&shim));
        let arguments: Vec<&str> = arguments.iter().map(String::as_str).collect();
        let answer = shim.cli(&arguments).await;
        assert_eq!(answer.code, 0, "the shim refused the update: {answer:?}");
    }
    let shim_outputs = shim.stack_outputs("append").await;
    let heat_seen = (&heat_outputs["values"], &heat_outputs["removed"]);
    assert_eq!(heat_seen, (&json!(["member-2"]), &json!(["0", "1"])), "Heat appends the removals: {heat_outputs:?}");
    let shim_seen = (&shim_outputs["values"], &shim_outputs["removed"]);
    assert_eq!(shim_seen, (&json!(["member-0"]), &json!(["1"])), "the shim keeps the last list: {shim_outputs:?}");
}
