//! Nested stacks and ResourceGroup, flattened: names, parameter binding and conversion, outputs
//! as attributes, `resource.<inner>`, reference ids, pseudo parameters, `resource_facade`, each
//! template's own dialect and conditions, parameter_defaults, group members and attributes, the
//! stored form, and each rejection (depth, recursion, size, properties, attributes, counts).

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use crate::template::{
    Environment, MaxResources, Scope, Template, apply_conditions, expand_nested, flattened_text, parameter_texts,
    parse_stored_template, parse_template_in, resolve_parameters, validate,
};

/// Evaluates the flat template as the engine would once everything ran: a resource's id is
/// `id:<name>`, an OS::Heat::Value's `value` its property, other attributes `<name>.<attr>`.
struct Ran<'a> {
    template: &'a Template,
    parameters: &'a BTreeMap<String, Value>,
}

impl Scope for Ran<'_> {
    fn parameter(&self, name: &str) -> Option<Value> {
        self.parameters.get(name).cloned()
    }

    fn resource_id(&self, resource: &str) -> Option<Value> {
        self.template.resource(resource).map(|_| json!(format!("id:{resource}")))
    }

    fn attribute(&self, resource: &str, attribute: &str) -> Option<Value> {
        let found = self.template.resource(resource)?;
        match (attribute, found.property("value")) {
            ("value", Some(value)) => value.evaluate(self).ok(),
            _ => Some(json!(format!("{resource}.{attribute}"))),
        }
    }
}

pub(super) struct Flat {
    template: Template,
    parameters: BTreeMap<String, Value>,
}

impl Flat {
    fn names(&self) -> Vec<&str> {
        self.template.resources.iter().map(|(name, _)| name.as_str()).collect()
    }

    pub(super) fn output(&self, name: &str) -> Value {
        self.output_or_error(name).unwrap()
    }

    fn output_or_error(&self, name: &str) -> Result<Value, String> {
        let (_, output) = self.template.outputs.iter().find(|(declared, _)| declared == name).expect("an output");
        let value = output.value.evaluate(&Ran { template: &self.template, parameters: &self.parameters });
        value.map_err(|error| error.to_string())
    }

    fn depends_on(&self, name: &str) -> Vec<String> {
        self.template.resource(name).unwrap().depends_on.clone()
    }
}

fn expand_with(
    text: &str,
    environment: &Environment,
    files: &[(&str, &str)],
    given: &[(&str, &str)],
) -> Result<Flat, Vec<String>> {
    let files: Map<String, Value> = files.iter().map(|(key, text)| ((*key).to_owned(), json!(text))).collect();
    let (template, _) = parse_template_in(text, environment, &files).map_err(|error| error.problems())?;
    let given: BTreeMap<String, String> =
        given.iter().map(|(name, value)| ((*name).to_owned(), (*value).to_owned())).collect();
    let texts = parameter_texts(&template, environment, &given);
    let mut parameters = resolve_parameters(&template, &texts)?;
    parameters.insert("OS::stack_name".into(), json!("s"));
    parameters.insert("OS::stack_id".into(), json!("sid"));
    parameters.insert("OS::project_id".into(), json!("p"));
    let flat = expand_nested(&template, environment, &files, &parameters)?.expect("something to expand");
    let flat = apply_conditions(&flat, &parameters)?;
    validate(&flat, &parameters, &|_| true)?;
    Ok(Flat { template: flat, parameters })
}

fn expand(text: &str, files: &[(&str, &str)], given: &[(&str, &str)]) -> Result<Flat, Vec<String>> {
    expand_with(text, &Environment::default(), files, given)
}

pub(super) fn accepted(text: &str, files: &[(&str, &str)], given: &[(&str, &str)]) -> Flat {
    expand(text, files, given).unwrap_or_else(|problems| panic!("should expand: {problems:?}"))
}

pub(super) fn rejected(text: &str, files: &[(&str, &str)]) -> Vec<String> {
    match expand(text, files, &[]) {
        Ok(flat) => panic!("should be rejected: {:?}", flat.names()),
        Err(problems) => problems,
    }
}

const INNER: &str = "heat_template_version: 2016-10-14
parameters:
  port: {type: number}
  names: {type: comma_delimited_list, default: [x]}
  label: {type: string, default: plain}
resources:
  first:
    type: OS::Heat::Value
    properties:
      value: {list_join: ['-', [{get_param: OS::stack_name}, {get_param: label}]]}
  second:
    type: OS::Heat::Value
    depends_on: first
    properties:
      value: {get_attr: [first, value]}
outputs:
  port_plus: {value: {str_replace: {template: 'p=P', params: {P: {get_param: port}}}}}
  names: {value: {get_param: names}}
  doubled: {value: {get_param: [names, 1]}}
  nested_id: {value: {get_param: OS::stack_id}}
  second: {value: {get_attr: [second, value]}}
  map: {value: {a: {b: [10, 20]}}}
";

const OUTER: &str = "heat_template_version: 2021-04-16
parameters:
  port: {type: string, default: '8080'}
resources:
  before: {type: OS::Heat::None}
  outer:
    type: inner.yaml
    depends_on: before
    properties:
      port: {get_param: port}
      names: 'a,b'
  after:
    type: OS::Heat::Value
    depends_on: outer
    properties:
      value: {get_attr: [outer, names]}
outputs:
  port_plus: {value: {get_attr: [outer, port_plus]}}
  names: {value: {get_attr: [outer, names]}}
  doubled: {value: {get_attr: [outer, doubled]}}
  path: {value: {get_attr: [outer, map, a, b, 1]}}
  inner_attr: {value: {get_attr: [outer, resource.first, value]}}
  inner_dotted: {value: {get_attr: [outer, resource.second.value]}}
  inner_id: {value: {get_attr: [outer, resource.first]}}
  id: {value: {get_resource: outer}}
  nested_id: {value: {get_attr: [outer, nested_id]}}
  second: {value: {get_attr: [outer, second]}}
";

#[test]
fn a_provider_template_becomes_its_resources_under_the_outer_name() {
    let flat = accepted(OUTER, &[("inner.yaml", INNER)], &[]);
    assert_eq!(flat.names(), ["before", "outer/first", "outer/second", "after"]);
    assert_eq!(flat.depends_on("outer/first"), ["before"], "the outer resource's depends_on");
    assert_eq!(flat.depends_on("outer/second"), ["outer/first", "before"], "renamed inside");
    assert_eq!(flat.depends_on("after"), ["outer/first", "outer/second"], "depending on every leaf");
    assert_eq!(flat.output("port_plus"), json!("p=8080"), "the string property became a number parameter");
    assert_eq!(flat.output("names"), json!(["a", "b"]), "comma_delimited_list from a string");
    assert_eq!(flat.output("doubled"), json!("b"));
    assert_eq!(flat.output("path"), json!(20), "get_attr paths walk the output");
    // The short id is derived from the root's id ("sid") and the path ("outer"): always this.
    let name = "s-outer-id2wmsbmqngn";
    assert_eq!(
        flat.output("inner_attr"),
        json!(format!("{name}-plain")),
        "OS::stack_name: <parent>-<resource>-<short id>"
    );
    assert_eq!(flat.output("inner_dotted"), json!(format!("{name}-plain")));
    assert_eq!(flat.output("inner_id"), json!("id:outer/first"));
    assert_eq!(flat.output("id"), json!("sid-outer"), "no OS::stack_id output: the nested stack id");
    assert_eq!(flat.output("nested_id"), json!("sid-outer"));
    assert_eq!(flat.output("second"), json!(format!("{name}-plain")));
}

#[test]
fn an_os_stack_id_output_is_the_reference_id_and_runtime_values_pass_through() {
    let inner = "heat_template_version: 2018-08-31
parameters:
  server: {type: string}
outputs:
  OS::stack_id: {value: {get_param: server}}
";
    let outer = "heat_template_version: 2018-08-31
resources:
  source: {type: OS::Heat::Value, properties: {value: from-source}}
  outer: {type: inner.yaml, properties: {server: {get_attr: [source, value]}}}
  reader: {type: OS::Heat::Value, properties: {value: {get_resource: outer}}}
outputs:
  id: {value: {get_attr: [reader, value]}}
";
    let flat = accepted(outer, &[("inner.yaml", inner)], &[]);
    assert_eq!(flat.output("id"), json!("from-source"));
    assert_eq!(flat.depends_on("reader"), Vec::<String>::new(), "the reference is in the property itself");
}

#[test]
fn each_template_keeps_its_version_and_conditions() {
    // 2013-05-23 has Fn::Select and no conditions; 2016-10-14 has conditions and no Fn::Select.
    let old = "heat_template_version: 2013-05-23
parameters:
  items: {type: comma_delimited_list, default: 'p,q'}
outputs:
  picked: {value: {'Fn::Select': [1, {get_param: items}]}}
";
    let conditional = "heat_template_version: 2016-10-14
parameters:
  mode: {type: string}
conditions:
  loud: {equals: [{get_param: mode}, loud]}
resources:
  shout: {type: OS::Heat::Value, condition: loud, properties: {value: LOUD}}
  quiet: {type: OS::Heat::Value, properties: {value: quiet}}
outputs:
  said: {value: {if: [loud, {get_attr: [shout, value]}, {get_attr: [quiet, value]}]}}
";
    let outer = "heat_template_version: 2021-04-16
parameters:
  mode: {type: string, default: loud}
resources:
  old: {type: old.yaml}
  loud: {type: cond.yaml, properties: {mode: {get_param: mode}}}
  soft: {type: cond.yaml, properties: {mode: soft}}
outputs:
  picked: {value: {get_attr: [old, picked]}}
  loud: {value: {get_attr: [loud, said]}}
  soft: {value: {get_attr: [soft, said]}}
";
    let files = [("old.yaml", old), ("cond.yaml", conditional)];
    let flat = accepted(outer, &files, &[]);
    assert_eq!(flat.names(), ["loud/shout", "loud/quiet", "soft/quiet"], "a false condition leaves soft/shout out");
    let said = (flat.output("picked"), flat.output("loud"), flat.output("soft"));
    assert_eq!(said, (json!("q"), json!("LOUD"), json!("quiet")));
    let old_in_new = "heat_template_version: 2016-10-14\noutputs:\n  x: {value: {'Fn::Select': [0, [a]]}}\n";
    let problems =
        rejected("heat_template_version: 2013-05-23\nresources:\n  n: {type: n.yaml}\n", &[("n.yaml", old_in_new)]);
    assert!(problems[0].starts_with("resource n: provider template \"n.yaml\": output x:"), "{problems:?}");
}

#[test]
fn the_registry_parameter_defaults_and_resource_facade_reach_nested_templates() {
    let inner = "heat_template_version: 2018-08-31
parameters:
  colour: {type: string, default: red}
resources:
  held: {type: My::Thing, properties: {value: {resource_facade: metadata}}}
outputs:
  colour: {value: {get_param: colour}}
  meta: {value: {get_attr: [held, value, role]}}
  policy: {value: {resource_facade: deletion_policy}}
";
    let outer = "heat_template_version: 2018-08-31
parameters:
  colour: {type: string, default: green}
resources:
  outer: {type: My::Nested, metadata: {role: {get_param: colour}}, deletion_policy: Retain}
outputs:
  colour: {value: {get_attr: [outer, colour]}}
  meta: {value: {get_attr: [outer, meta]}}
  policy: {value: {get_attr: [outer, policy]}}
";
    let environment = Environment::from_value(&json!({
        "resource_registry": {"My::Nested": "inner.yaml", "My::Thing": "OS::Heat::Value"},
        "parameter_defaults": {"colour": "blue"},
    }))
    .unwrap();
    let flat = expand_with(outer, &environment, &[("inner.yaml", inner)], &[]).unwrap();
    assert_eq!(flat.output("colour"), json!("blue"), "parameter_defaults apply to nested templates");
    assert_eq!(flat.output("meta"), json!("blue"), "the facade's metadata, evaluated in the parent");
    assert_eq!(flat.output("policy"), json!("Retain"));
}

#[test]
fn bad_properties_parameters_attributes_and_files_are_reported_naming_the_resource() {
    let outer = "heat_template_version: 2018-08-31
resources:
  a: {type: inner.yaml, properties: {port: 'not a number', extra: 1}}
  b: {type: inner.yaml}
  c: {type: missing.yaml}
";
    let problems = rejected(outer, &[("inner.yaml", INNER)]);
    let expected = [
        "resource a: Unknown Property extra (the provider template \"inner.yaml\" has no such parameter)",
        "resource b: Property error: Property port not assigned",
        "resource c: the provider template \"missing.yaml\" is not in the request's files",
    ];
    for text in expected {
        assert!(problems.iter().any(|problem| problem.starts_with(text)), "{text}: {problems:?}");
    }
    assert!(problems.iter().any(|problem| problem.starts_with("resource a: parameter \"port\"")), "{problems:?}");
    let unknown = "heat_template_version: 2018-08-31\noutputs:\n  x: {value: {get_param: nope}}\n";
    let problems =
        rejected("heat_template_version: 2018-08-31\nresources:\n  n: {type: u.yaml}\n", &[("u.yaml", unknown)]);
    assert_eq!(problems, ["resource n: get_param: the nested template has no parameter \"nope\""]);
}

#[test]
fn an_attribute_the_nested_stack_lacks_fails_when_read_as_in_heat() {
    // Heat 27 accepts these; reading them is an output error, or fails the reading resource
    // (found with tests/tests/heat_nested.rs against the real engine).
    let outer = "heat_template_version: 2018-08-31
resources:
  d: {type: inner.yaml, properties: {port: 1}}
  reads: {type: OS::Heat::Value, properties: {value: {get_attr: [d, nope]}}}
outputs:
  x: {value: {get_attr: [d, nope]}}
";
    let flat = accepted(outer, &[("inner.yaml", INNER)], &[]);
    let refused = Err("The Referenced Attribute (d nope) is incorrect.".to_owned());
    assert_eq!(flat.output_or_error("x"), refused);
    assert_eq!(flat.depends_on("reads"), Vec::<String>::new());
    let reads = flat.template.resource("reads").unwrap().property("value").unwrap();
    let references: Vec<String> = reads.references().into_iter().map(|reference| reference.resource).collect();
    assert_eq!(references, ["d/first", "d/second"], "it fails once the nested stack exists");
}

#[test]
fn recursion_depth_and_size_are_limited() {
    let looping = |next: &str| format!("heat_template_version: 2018-08-31\nresources:\n  r: {{type: {next}}}\n");
    let (a, b) = (looping("b.yaml"), looping("a.yaml"));
    let problems = rejected(&looping("a.yaml"), &[("a.yaml", &a), ("b.yaml", &b)]);
    assert_eq!(problems, ["resource r/r/r: provider templates use themselves: a.yaml -> b.yaml -> a.yaml"]);
    let chain: Vec<String> = (0..7).map(|level| looping(&format!("l{}.yaml", level + 1))).collect();
    let names: Vec<String> = (0..7).map(|level| format!("l{level}.yaml")).collect();
    let files: Vec<(&str, &str)> =
        names.iter().zip(&chain).map(|(name, text)| (name.as_str(), text.as_str())).collect();
    let problems = rejected(&looping("l0.yaml"), &files);
    assert_eq!(
        problems,
        ["resource r/r/r/r/r/r: Recursion depth exceeds 5 (nested stacks deeper than Heat's max_nested_stack_depth)"]
    );
    let wide = "heat_template_version: 2018-08-31
resources:
  g: {type: OS::Heat::ResourceGroup, properties: {count: 600, resource_def: {type: two.yaml}}}
";
    let two = "heat_template_version: 2018-08-31\nresources:\n  x: {type: OS::Heat::None}\n";
    let problems = rejected(wide, &[("two.yaml", two)]);
    assert_eq!(problems, [MaxResources::default().exceeded(None)]);
    assert!(problems[0].starts_with("Request limit exceeded: Maximum resources per stack exceeded."), "{problems:?}");
    // Each level reads the one below 40 times: 40^5 copies without the node budget.
    let fan = |next: &str| {
        let reads: Vec<String> = (0..40).map(|_| "{get_attr: [r, o]}".to_owned()).collect();
        format!(
            "heat_template_version: 2018-08-31\nresources:\n  r: {{type: {next}}}\noutputs:\n  o: {{value: [{}]}}\n",
            reads.join(", ")
        )
    };
    let leaf = "heat_template_version: 2018-08-31\noutputs:\n  o: {value: [1, 2, 3]}\n";
    let levels: Vec<String> = (1..5).map(|level| fan(&format!("f{}.yaml", level + 1))).collect();
    let mut files: Vec<(String, String)> =
        levels.iter().enumerate().map(|(at, text)| (format!("f{}.yaml", at + 1), text.clone())).collect();
    files.push(("f5.yaml".into(), leaf.into()));
    let files: Vec<(&str, &str)> = files.iter().map(|(name, text)| (name.as_str(), text.as_str())).collect();
    let problems = rejected(&fan("f1.yaml"), &files);
    assert_eq!(problems, ["the nested stacks' expressions expand to more than 1000000 nodes"]);
}

const GROUP: &str = "heat_template_version: 2018-08-31
parameters:
  count: {type: number, default: 3}
  removed: {type: json, default: []}
resources:
  group:
    type: OS::Heat::ResourceGroup
    properties:
      count: {get_param: count}
      removal_policies: [{resource_list: {get_param: removed}}]
      resource_def:
        type: OS::Heat::Value
        properties:
          value: {list_join: ['', ['member-%index%', {get_param: OS::stack_name}]]}
outputs:
  values: {value: {get_attr: [group, value]}}
  refs: {value: {get_attr: [group, refs]}}
  first_ref: {value: {get_attr: [group, refs, 0]}}
  refs_map: {value: {get_attr: [group, refs_map]}}
  attributes: {value: {get_attr: [group, attributes, value]}}
  one: {value: {get_attr: [group, resource.1, value]}}
  one_ref: {value: {get_attr: [group, resource.1]}}
  removed: {value: {get_attr: [group, removed_rsrc_list]}}
  id: {value: {get_resource: group}}
";

#[test]
fn a_resource_group_has_count_members_with_their_index() {
    let flat = accepted(GROUP, &[], &[]);
    assert_eq!(flat.names(), ["group/0", "group/1", "group/2"]);
    assert_eq!(flat.output("values"), json!(["member-0s", "member-1s", "member-2s"]));
    assert_eq!(flat.output("refs"), json!(["id:group/0", "id:group/1", "id:group/2"]));
    assert_eq!(flat.output("first_ref"), json!("id:group/0"));
    assert_eq!(flat.output("refs_map"), json!({"0": "id:group/0", "1": "id:group/1", "2": "id:group/2"}));
    assert_eq!(flat.output("attributes"), json!({"0": "member-0s", "1": "member-1s", "2": "member-2s"}));
    assert_eq!(flat.output("one"), json!("member-1s"));
    assert_eq!(flat.output("one_ref"), json!("id:group/1"));
    assert_eq!(flat.output("removed"), json!([]));
    assert_eq!(flat.output("id"), json!("sid-group"));
    let flat = accepted(GROUP, &[], &[("count", "2"), ("removed", "[\"3\", 0]")]);
    assert_eq!(flat.names(), ["group/1", "group/2"], "removal_policies skip names");
    assert_eq!(flat.output("removed"), json!(["0", "3"]));
    let flat = accepted(GROUP, &[], &[("removed", "[1]")]);
    let missing = Err("Member '1' not found in group resource 'group'.".to_owned());
    assert_eq!(
        (flat.output_or_error("one"), flat.output_or_error("one_ref")),
        (missing.clone(), missing),
        "a removed member"
    );
    let problems = expand(GROUP, &[], &[("count", "0")]).err().unwrap();
    assert_eq!(problems, ["Member '1' not found in group resource 'group'."], "no members to wait for: refused now");
}

#[test]
fn the_index_is_replaced_in_a_parameter_value_too() {
    // Heat replaces index_var in the resolved definition, so also in what get_param gives
    // (found by tests/tests/heat_nested.rs against the real engine).
    let outer = "heat_template_version: 2018-08-31
parameters:
  pattern: {type: string, default: 'p-%index%'}
  plain: {type: json, default: {k: [v]}}
resources:
  group:
    type: OS::Heat::ResourceGroup
    properties:
      count: 2
      resource_def:
        type: OS::Heat::Value
        properties: {value: [{get_param: pattern}, {get_param: [plain, k, 0]}, {'k%index%': '%index%'}]}
outputs:
  values: {value: {get_attr: [group, value]}}
";
    let flat = accepted(outer, &[], &[]);
    assert_eq!(flat.output("values"), json!([["p-0", "v", {"k%index%": "0"}], ["p-1", "v", {"k%index%": "1"}]]));
    let flat = accepted(outer, &[], &[("pattern", "given-%index%")]);
    assert_eq!(
        flat.output("values"),
        json!([["given-0", "v", {"k%index%": "0"}], ["given-1", "v", {"k%index%": "1"}]])
    );
}

#[test]
fn group_members_may_be_provider_templates_and_counts_must_be_known() {
    let inner = "heat_template_version: 2018-08-31
parameters:
  index: {type: string}
resources:
  v: {type: OS::Heat::Value, properties: {value: {get_param: index}}}
outputs:
  doubled: {value: {list_join: ['', [{get_attr: [v, value]}, {get_attr: [v, value]}]]}}
";
    let outer = "heat_template_version: 2018-08-31
resources:
  group:
    type: OS::Heat::ResourceGroup
    properties:
      count: 2
      index_var: '__n__'
      resource_def: {type: inner.yaml, properties: {index: 'i__n__'}}
outputs:
  doubled: {value: {get_attr: [group, doubled]}}
  inner: {value: {get_attr: [group, resource.0, resource.v, value]}}
";
    let flat = accepted(outer, &[("inner.yaml", inner)], &[]);
    assert_eq!(flat.names(), ["group/0/v", "group/1/v"]);
    assert_eq!(flat.output("doubled"), json!(["i0i0", "i1i1"]));
    assert_eq!(flat.output("inner"), json!("i0"));
    let runtime = "heat_template_version: 2018-08-31
resources:
  n: {type: OS::Heat::Value, properties: {value: 2}}
  group:
    type: OS::Heat::ResourceGroup
    properties: {count: {get_attr: [n, value]}, resource_def: {type: OS::Heat::None}, size: 1}
  bad: {type: OS::Heat::ResourceGroup, properties: {resource_def: {type: OS::Nova::Nothing}}}
";
    let problems = rejected(runtime, &[]);
    assert!(problems.contains(&"resource group: Unknown Property size".to_owned()), "{problems:?}");
    assert!(
        problems.contains(
            &"resource group: count: must be known when the stack is validated (from parameters), but it reads \
              resource \"n\""
                .to_owned()
        ),
        "{problems:?}"
    );
    assert!(
        problems.iter().any(|problem| problem.starts_with("resource bad: ") && problem.contains("OS::Nova::Nothing")),
        "{problems:?}"
    );
    let problems = rejected(
        "heat_template_version: 2018-08-31\nresources:\n  g: {type: OS::Heat::ResourceGroup, properties: {count: 1001, resource_def: {type: OS::Heat::None}}}\n",
        &[],
    );
    let expected =
        format!("resource g: count: 1001 is over the limit. {}", MaxResources::default().exceeded(Some(1001)));
    assert_eq!(problems, [expected]);
    assert!(problems[0].contains("The stack would have 1001 resources"), "{problems:?}");
}

#[test]
fn the_stored_form_reads_back_the_flattened_outputs() {
    let flat = accepted(OUTER, &[("inner.yaml", INNER)], &[]);
    let stored = parse_stored_template(&flattened_text(&flat.template)).unwrap();
    assert_eq!(stored.outputs, flat.template.outputs);
}
