//! A plan's `resource_changes`: Heat's five preview categories (added, deleted, replaced,
//! updated, unchanged), from the stack's resources before the update and after the plan's
//! traversal. Deployment group members are listed too, each under its group
//! (`parent_resource`), as Heat's preview-update lists the resources of nested stacks with
//! `show_nested` (heat.engine.service.EngineService.preview_update_stack); the API leaves them
//! out without it. Where Heat's preview answers otherwise, docs/day-two.md "Differences from
//! Heat's preview" says why.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use serde_json::Value;

use super::node;
use crate::model::{PlannedResource, PlannedRun, ResourceChanges};
use crate::store::{Action, NodeRow, Shared};
use crate::template::ResourceType;

/// What a resource was before the update, as far as a plan compares it.
pub struct Before {
    resource_type: String,
    definition: Shared,
    config: Option<Value>,
    applied: Option<Value>,
    attributes: Shared,
    /// A deployment's last published entry (its fingerprint) and its `actions`.
    fingerprint: Option<String>,
    actions: Vec<String>,
}

pub fn snapshot(nodes: Vec<NodeRow>) -> BTreeMap<String, Before> {
    nodes
        .into_iter()
        .map(|node| {
            let before = Before {
                resource_type: node.resource_type,
                definition: node.definition,
                config: node.record.definition,
                applied: node.record.applied,
                attributes: node.attributes,
                fingerprint: node.record.fingerprint,
                actions: node.record.actions,
            };
            (node.name, before)
        })
        .collect()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Category {
    Added,
    Replaced,
    Updated,
    Unchanged,
}

/// Heat's preview categories from the resources before and after, and the runs: the resources
/// in the order of the stack, then the deleted ones.
pub fn changes(before: &BTreeMap<String, Before>, after: &[Arc<NodeRow>], runs: &[PlannedRun]) -> ResourceChanges {
    let ran: HashMap<&str, &str> = runs.iter().map(|run| (run.resource.as_str(), run.action.as_str())).collect();
    let categories: Vec<Category> = after
        .iter()
        .map(|node| match before.get(&node.name) {
            None => Category::Added,
            Some(old) => category(old, node, ran.get(node.name.as_str()).copied()),
        })
        .collect();
    // Heat replaces a group by deleting its nested stack and creating another one: its old
    // members are deleted and the new ones added, whatever each of them would have done.
    let replaced_groups: HashSet<&str> = after
        .iter()
        .zip(&categories)
        .filter(|(node, category)| **category == Category::Replaced && is_group(node))
        .map(|(node, _)| node.name.as_str())
        .collect();
    let mut changes = ResourceChanges::default();
    for (node, category) in after.iter().zip(categories) {
        let parent = node::group_of(node);
        let category =
            if parent.is_some_and(|group| replaced_groups.contains(group)) { Category::Added } else { category };
        let resource = planned(&node.name, &node.resource_type, parent);
        match category {
            Category::Added => changes.added.push(resource),
            Category::Replaced => changes.replaced.push(resource),
            Category::Updated => changes.updated.push(resource),
            Category::Unchanged => changes.unchanged.push(resource),
        }
    }
    let present: HashSet<&str> = after.iter().map(|node| node.name.as_str()).collect();
    for (name, old) in before {
        let parent = old.definition.get("member_of").and_then(Value::as_str);
        if !present.contains(name.as_str()) || parent.is_some_and(|group| replaced_groups.contains(group)) {
            changes.deleted.push(planned(name, &old.resource_type, parent));
        }
    }
    changes
}

/// A resource as Heat's preview names it: a member by its key in its group's nested stack.
fn planned(name: &str, resource_type: &str, parent: Option<&str>) -> PlannedResource {
    let resource_name =
        parent.and_then(|group| name.strip_prefix(group)).and_then(|rest| rest.strip_prefix('/')).unwrap_or(name);
    PlannedResource {
        resource_name: resource_name.to_string(),
        resource_type: resource_type.to_string(),
        parent_resource: parent.map(str::to_string),
    }
}

fn is_group(node: &NodeRow) -> bool {
    matches!(
        node::resource_type(node),
        Some(ResourceType::SoftwareDeploymentGroup | ResourceType::StructuredDeploymentGroup)
    )
}

/// The category of a resource present before and after. Another type under the same name is a
/// replacement, as in Heat (`StackUpdate.preview` compares the resource classes).
fn category(old: &Before, node: &NodeRow, ran: Option<&str>) -> Category {
    if old.resource_type != node.resource_type {
        return Category::Replaced;
    }
    match node::resource_type(node) {
        Some(ResourceType::SoftwareDeployment | ResourceType::StructuredDeployment) => deployment(old, node, ran),
        // Heat's NoneResource never needs an update, whatever its properties become.
        Some(ResourceType::None) => Category::Unchanged,
        _ => compare(old, node),
    }
}

/// A deployment (or a group's member) is replaced when it would run `CREATE` again (its server
/// changed, a `replace_on_change` input changed, or its last run failed), as Heat replaces it;
/// updated when it would publish a new entry (a new config or input values, NO_SIGNAL included,
/// whose entry is published without a run to answer), its `actions` change or its definition
/// does (Heat compares the whole resource definition), all of which Heat updates in place.
fn deployment(old: &Before, node: &NodeRow, ran: Option<&str>) -> Category {
    let republished = old.fingerprint != node.record.fingerprint;
    let redefined = old.definition != node.definition || old.actions != node.record.actions;
    if node.action == Action::Create || ran == Some("CREATE") {
        Category::Replaced
    } else if ran.is_some() || republished || redefined {
        Category::Updated
    } else {
        Category::Unchanged
    }
}

/// A resource that runs nothing: a config whose resolved definition changes is replaced (Heat's
/// configs are immutable); a group whose resolved properties change, or another resource whose
/// definition or values change, is updated.
fn compare(old: &Before, node: &NodeRow) -> Category {
    match node::resource_type(node) {
        Some(
            ResourceType::SoftwareConfig
            | ResourceType::StructuredConfig
            | ResourceType::SoftwareComponent
            | ResourceType::CloudConfig
            | ResourceType::MultipartMime,
        ) if old.config != node.record.definition => Category::Replaced,
        Some(ResourceType::SoftwareDeploymentGroup | ResourceType::StructuredDeploymentGroup) => {
            if old.applied != node.record.applied { Category::Updated } else { Category::Unchanged }
        }
        Some(_) if old.definition != node.definition || old.attributes != node.attributes => Category::Updated,
        _ => Category::Unchanged,
    }
}
