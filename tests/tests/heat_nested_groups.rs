//! Differential: `OS::Heat::ResourceGroup` in a real Heat engine and in the real shim binary
//! (heat_nested_support): the same outputs after create, after updates that shrink a group with
//! `removal_policies` and grow it again, and the documented difference of `append` mode.

mod heat_nested_support;

use std::time::Duration;

use anneal_tests::{RealHeat, Shim};
use heat_nested_support::{Case, MEMBER, assert_same_outputs, differences, heat_create, heat_update, shim_create};
use serde_json::json;

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
  # error in both (heat_nested.rs compares those errors), which `differences` does not read.
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
