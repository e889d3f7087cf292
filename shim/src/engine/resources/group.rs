//! OS::Heat::SoftwareDeploymentGroup and StructuredDeploymentGroup: one deployment (a
//! SoftwareDeployment or a StructuredDeployment) per entry of `servers`. When the group
//! activates it expands into member nodes (`<group>/<member>`, ordinary deployments with a literal
//! `server`), each with an edge back to the group, whose counter becomes the number of members.
//! When the last member completes the group activates again and completes with map attributes
//! (`deploy_stdouts`, ..., and each declared output as `{member: value}`), as Heat's group does.

use serde_json::{Map, Value, json};

use super::deployment::deployment_actions;
use crate::engine::context::Context;
use crate::engine::error::EngineError;
use crate::engine::node::{self, Released, status};
use crate::store::{Action, NodeRecord, NodeRow, NodeState, StackRow, State};
use crate::template::ResourceType;

/// What an activation did, for the traversal to follow. Only a group's activation expands.
#[derive(Debug)]
pub enum Activation {
    /// The node completed, failed or started running; what its completion released.
    Released(Released),
    /// A group expanded: its members are ready, and the members it had before but not now must
    /// be removed (their DELETE actions run).
    Expanded { members: Vec<String>, removed: Vec<NodeRow> },
}

impl From<Released> for Activation {
    fn from(released: Released) -> Activation {
        Activation::Released(released)
    }
}

/// The name of a group's member node.
pub fn member_name(group: &str, member: &str) -> String {
    format!("{group}/{member}")
}

pub use crate::engine::node::group_of;

pub fn activate(
    ctx: &mut Context<'_>,
    stack: &StackRow,
    node: NodeRow,
    properties: &Map<String, Value>,
) -> Result<Activation, EngineError> {
    if node.record.expanded == Some(stack.generation) {
        return finish_group(ctx, stack, node, properties).map(Activation::from);
    }
    let Some(servers) = properties.get("servers").and_then(Value::as_object).cloned() else {
        node::fail(ctx, stack, node, "property servers: must be a map of member name to server")?;
        return Ok(Activation::Released(Released::Nothing));
    };
    if servers.is_empty() {
        return finish_group(ctx, stack, node, properties).map(Activation::from);
    }
    expand(ctx, stack, node, &servers)
}

/// Writes the members (ready to activate) and returns them, with the previous members that
/// are not members any more, for the traversal to remove.
fn expand(
    ctx: &mut Context<'_>,
    stack: &StackRow,
    mut group: NodeRow,
    servers: &Map<String, Value>,
) -> Result<Activation, EngineError> {
    let mut member_properties =
        group.definition.get("properties").and_then(Value::as_object).cloned().unwrap_or_default();
    member_properties.remove("servers");
    // As build_resource_definition of SoftwareDeploymentGroup and StructuredDeploymentGroup.
    let kind =
        node::resource_type(&group).and_then(|kind| kind.group_member()).unwrap_or(ResourceType::SoftwareDeployment);
    let mut members = Vec::new();
    for (member, server) in servers {
        let name = member_name(&group.name, member);
        let mut properties = member_properties.clone();
        properties.insert("server".into(), server.clone());
        let definition =
            json!({"type": kind.name(), "properties": properties, "depends_on": [], "member_of": group.name});
        write_member(ctx, stack, &name, kind, definition)?;
        ctx.tx.insert_edge(&stack.name, &name, &group.name)?;
        members.push(name);
    }
    let mut removed = Vec::new();
    for gone in group.record.members.iter().filter(|name| !members.contains(name)) {
        if let Some(node) = ctx.tx.node(&stack.name, gone)? {
            removed.push(node);
        }
    }
    ctx.tx.add_pending(&stack.name, members.len() as i64)?;
    group.remaining = members.len() as i64;
    group.record.expanded = Some(stack.generation);
    group.record.members = members.clone();
    group.status_reason = format!("deploying to {} server(s)", members.len());
    group.state = NodeState::Init;
    group.updated_at = ctx.now;
    ctx.tx.update_node(&group)?;
    ctx.event(&stack.name, &group.name, &status(group.action, State::InProgress), &group.status_reason)?;
    Ok(Activation::Expanded { members, removed })
}

fn write_member(
    ctx: &mut Context<'_>,
    stack: &StackRow,
    name: &str,
    kind: ResourceType,
    definition: Value,
) -> Result<(), EngineError> {
    match ctx.tx.node(&stack.name, name)? {
        Some(existing) => {
            let mut existing = node::reset_for_update(&existing);
            existing.definition = definition;
            existing.resource_type = kind.name().into();
            existing.generation = stack.generation;
            existing.state = NodeState::Init;
            existing.remaining = 0;
            existing.updated_at = ctx.now;
            ctx.tx.update_node(&existing)?;
        }
        None => {
            let node = NodeRow {
                stack: stack.name.clone(),
                name: name.to_string(),
                resource_type: kind.name().into(),
                generation: stack.generation,
                // A member new to the group is created, whatever the group's own action.
                action: Action::Create,
                state: NodeState::Init,
                status_reason: String::new(),
                remaining: 0,
                definition,
                attributes: json!({}),
                record: NodeRecord::default(),
                derived_config_id: None,
                signal_token_hash: None,
                server: None,
                updated_at: ctx.now,
            };
            ctx.tx.insert_node(&node)?;
        }
    }
    Ok(())
}

/// Every member completed: the group's attributes are maps keyed by member name.
fn finish_group(
    ctx: &mut Context<'_>,
    stack: &StackRow,
    mut group: NodeRow,
    properties: &Map<String, Value>,
) -> Result<Released, EngineError> {
    let prefix = format!("{}/", group.name);
    let members = std::mem::take(&mut group.record.members);
    let mut by_member: Vec<(String, Map<String, Value>)> = Vec::new();
    for name in &members {
        let Some(member) = ctx.tx.node(&stack.name, name)? else { continue };
        let key = name.strip_prefix(&prefix).unwrap_or(name).to_string();
        let mut attributes = member.attributes.as_object().cloned().unwrap_or_default();
        // A declared output without a value (NO_SIGNAL) is still an attribute, null.
        for output in member.record.outputs.iter().filter_map(|output| output.get("name")?.as_str()) {
            attributes.entry(output.to_owned()).or_insert(Value::Null);
        }
        by_member.push((key, attributes));
    }
    group.attributes = Value::Object(member_maps(&by_member));
    group.record = NodeRecord {
        id: Some(node::stable_id(&group)),
        expanded: Some(stack.generation),
        members,
        actions: deployment_actions(properties),
        ..NodeRecord::default()
    };
    node::complete(ctx, stack, group, "all members complete")
}

/// The group's attributes, as SoftwareDeploymentGroup.get_attribute: each member attribute
/// (`deploy_stdout`, ..., any output) as a map keyed by member name, with every member present
/// (null where a member has no value, e.g. a NO_SIGNAL one), under its own name and, for the
/// three `deploy_*` ones, also under the group's plural (`deploy_stdouts`, ...).
fn member_maps(members: &[(String, Map<String, Value>)]) -> Map<String, Value> {
    let mut names: Vec<&str> = vec!["deploy_stdout", "deploy_stderr", "deploy_status_code"];
    for (_, attributes) in members {
        // `_` names stay hidden, as `get_attr` hides them.
        for attribute in attributes.keys().filter(|attribute| !attribute.starts_with('_')) {
            if !names.contains(&attribute.as_str()) {
                names.push(attribute);
            }
        }
    }
    let mut maps = Map::new();
    for attribute in names {
        let map: Map<String, Value> = members
            .iter()
            .map(|(member, attributes)| (member.clone(), attributes.get(attribute).cloned().unwrap_or(Value::Null)))
            .collect();
        let plural = match attribute {
            "deploy_stdout" => Some("deploy_stdouts"),
            "deploy_stderr" => Some("deploy_stderrs"),
            "deploy_status_code" => Some("deploy_status_codes"),
            _ => None,
        };
        if let Some(plural) = plural {
            maps.insert(plural.to_owned(), Value::Object(map.clone()));
        }
        maps.insert(attribute.to_owned(), Value::Object(map));
    }
    maps
}
