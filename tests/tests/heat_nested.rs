//! Differential: provider templates (nested stacks, by file name and through an environment's
//! `resource_registry`) in a real Heat engine and in the real shim binary (heat_nested_support):
//! the same template, files and environment give the same outputs, the same mistakes are
//! refused by both, a value known only at run time reaches the nested parameter converted as
//! Heat converts it, and a nested attribute that is not there fails when read in both.
//! ResourceGroups are heat_nested_groups.rs.

mod heat_nested_support;

use anneal_tests::{RealHeat, Shim};
use heat_nested_support::{
    Case, MEMBER, assert_same_outputs, heat_create, heat_settled, shim_create, shim_outputs_with_errors, shim_settled,
};
use reqwest::{Method, StatusCode};
use serde_json::json;

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

/// A parameter of each type, each with a default, and what the nested stack sees.
const TYPED: &str = r#"
heat_template_version: 2018-08-31
parameters:
  number_p: {type: number, default: 0}
  list_p: {type: comma_delimited_list, default: ""}
  json_p: {type: json, default: {}}
  bool_p: {type: boolean, default: false}
  string_p: {type: string, default: ""}
resources:
  echo:
    type: OS::Heat::Value
    properties:
      value: {number: {get_param: number_p}, list: {get_param: list_p}, json: {get_param: json_p}, bool: {get_param: bool_p}, string: {get_param: string_p}}
outputs:
  seen: {value: {get_attr: [echo, value]}}
"#;

/// Every property reads `source`, whose value both engines know only once it has run.
const TYPED_PARENT: &str = r#"
heat_template_version: 2018-08-31
resources:
  source:
    type: OS::Heat::Value
    properties:
      value: {n: "42", l: "a, b,c", j: "{\"k\": 2}", b: "TRUE", s: 5, f: "2.5", ml: [{a: 1}], nl: [x, null], jl: [1, 2], je: "", t: true}
  texts:
    type: typed.yaml
    properties:
      number_p: {get_attr: [source, value, n]}
      list_p: {get_attr: [source, value, l]}
      json_p: {get_attr: [source, value, j]}
      bool_p: {get_attr: [source, value, b]}
      string_p: {get_attr: [source, value, s]}
  structures:
    type: typed.yaml
    properties:
      number_p: {get_attr: [source, value, f]}
      list_p: {get_attr: [source, value, ml]}
      json_p: {get_attr: [source, value, jl]}
      bool_p: {get_attr: [source, value, t]}
      string_p: {get_attr: [source, value, t]}
  edges:
    type: typed.yaml
    properties:
      number_p: {get_attr: [source, value, absent]}
      list_p: {get_attr: [source, value, nl]}
      json_p: {get_attr: [source, value, je]}
outputs:
  texts: {value: {get_attr: [texts, seen]}}
  structures: {value: {get_attr: [structures, seen]}}
  edges: {value: {get_attr: [edges, seen]}}
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_time_values_reach_nested_parameters_converted_as_in_heat() {
    // Not "typed": the shim's CLI writes the parent as <name>.yaml next to typed.yaml.
    let case = Case {
        name: "conversions",
        template: TYPED_PARENT.to_string(),
        files: &[("typed.yaml", TYPED)],
        environment: None,
        parameters: &[],
    };
    assert_same_outputs(&case).await;
}

/// A run-time value a nested parameter refuses: `(what, parameter type, constraints, value)`.
const REFUSED_AT_RUN_TIME: &[(&str, &str, &str, &str)] = &[
    ("text for a number", "number", "[]", "abc"),
    ("a map for a list", "comma_delimited_list", "[]", "{k: v}"),
    ("a list of numbers for a list", "comma_delimited_list", "[]", "[1, 2]"),
    // Quoted: an unquoted yes is YAML 1.1's true, for Heat as for the shim.
    ("yes for a boolean", "boolean", "[]", "'yes'"),
    ("a number over its range", "number", "[{range: {max: 10}}]", "50"),
    ("a text under its length", "string", "[{length: {min: 2}}]", "x"),
    ("a value not allowed", "string", "[{allowed_values: [a, b]}]", "c"),
    ("a list item not allowed", "comma_delimited_list", "[{allowed_values: [a, b]}]", "'a,c'"),
    ("a text off its pattern", "string", "[{allowed_pattern: '[a-z]+'}]", "A1"),
    ("a range with a description", "number", "[{range: {min: 1}, description: at least one}]", "0"),
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_run_time_value_fails_the_reading_resource_with_heats_text() {
    let heat = RealHeat::shared().await;
    let api = heat.admin().await;
    let shim = Shim::start().await;
    let mut mismatches = Vec::new();
    for (index, (what, kind, constraints, value)) in REFUSED_AT_RUN_TIME.iter().enumerate() {
        let nested = format!(
            "heat_template_version: 2018-08-31\nparameters:\n  p: {{type: {kind}, constraints: {constraints}}}\nresources:\n  echo: {{type: OS::Heat::Value, properties: {{value: {{get_param: p}}}}}}\n"
        );
        let template = format!(
            "heat_template_version: 2018-08-31\nresources:\n  source: {{type: OS::Heat::Value, properties: {{value: {value}}}}}\n  reader: {{type: refusing.yaml, properties: {{p: {{get_attr: [source, value]}}}}}}\n"
        );
        let name = format!("runtime{index}");
        let files = [("refusing.yaml", nested.as_str())];
        let case = Case { name: &name, template, files: &files, environment: None, parameters: &[] };
        let (stack, settled) = heat_settled(&api, &case).await;
        api.delete_stack(&stack).await;
        let heat_reason = settled["stack_status_reason"].as_str().unwrap_or_default().to_string();
        assert_eq!(settled["stack_status"], "CREATE_FAILED", "{what}: Heat: {settled}");
        // Heat's reason is "Resource CREATE failed: <exception class>: <text>".
        let text = heat_reason.splitn(3, ": ").nth(2).unwrap_or_default().to_string();
        let shown = shim_settled(&shim, &case).await;
        let echo = &shown["resources"]
            .as_array()
            .expect("resources")
            .iter()
            .find(|resource| resource["name"] == "reader/echo")
            .cloned();
        let shim_reason = echo.as_ref().and_then(|echo| echo["status_reason"].as_str()).unwrap_or_default();
        if shown["status"] != "CREATE_FAILED" || text.is_empty() || !shim_reason.contains(&text) {
            mismatches.push(format!("{what}: Heat {heat_reason:?}; the shim {} {shim_reason:?}", shown["status"]));
        }
    }
    assert!(mismatches.is_empty(), "the shim's failures differ from Heat's:\n{}", mismatches.join("\n"));
}

const MISSING_ATTRIBUTES: &str = r#"
heat_template_version: 2018-08-31
resources:
  single: {type: member.yaml}
  group: {type: OS::Heat::ResourceGroup, properties: {count: 2, resource_def: {type: member.yaml}}}
outputs:
  missing_output: {value: {get_attr: [single, nope]}}
  missing_member: {value: {get_attr: [group, resource.5.out]}}
  missing_member_path: {value: {get_attr: [group, resource.5, out]}}
  missing_member_id: {value: {get_attr: [group, resource.5]}}
  missing_member_output: {value: {get_attr: [group, resource.1.nope]}}
  missing_group_output: {value: {get_attr: [group, nope]}}
  present: {value: {get_attr: [group, resource.1.out]}}
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nested_attributes_that_are_not_there_are_output_errors_in_both() {
    let case = Case {
        name: "missing",
        template: MISSING_ATTRIBUTES.to_string(),
        files: &[("member.yaml", MEMBER)],
        environment: None,
        parameters: &[],
    };
    let heat = RealHeat::shared().await;
    let api = heat.admin().await;
    let stack = heat_create(&api, &case).await;
    let heat_outputs = api.outputs(&stack).await;
    api.delete_stack(&stack).await;
    let shim = Shim::start().await;
    shim_create(&shim, &case).await;
    let shim_outputs = shim_outputs_with_errors(&shim, case.name).await;
    assert_eq!(heat_outputs["missing_member"], json!({"error": "Member '5' not found in group resource 'group'."}));
    assert_eq!(shim_outputs, heat_outputs, "the same values and the same errors");
}
