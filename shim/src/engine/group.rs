//! OS::Heat::SoftwareDeploymentGroup: one deployment per entry of `servers`. When the group
//! activates it expands into member nodes (`<group>/<member>`, ordinary deployments with a literal
//! `server`), each with an edge back to the group, whose counter becomes the number of members.
//! When the last member completes the group activates again and completes with map attributes
//! (`deploy_stdouts`, ..., and each declared output as `{member: value}`), as Heat's group does.

use serde_json::{Map, Value, json};

use super::EngineError;
use super::context::{Context, STATE_INIT};
use super::graph::{self, SOFTWARE_DEPLOYMENT};
use crate::store::{NodeRow, StackRow};

/// The name of a group's member node.
pub fn member_name(group: &str, member: &str) -> String {
    format!("{group}/{member}")
}

/// Whether `node` is a member of a group (created by expansion, not by the template).
pub fn group_of(node: &NodeRow) -> Option<&str> {
    node.definition.get("member_of").and_then(Value::as_str)
}

pub fn activate_group(
    ctx: &mut Context<'_>,
    stack: &StackRow,
    node: NodeRow,
    properties: &Map<String, Value>,
    ready: &mut Vec<String>,
) -> Result<(), EngineError> {
    if node.attributes.get("_expanded").and_then(Value::as_u64) == Some(stack.generation) {
        return finish_group(ctx, stack, node, properties, ready);
    }
    let Some(servers) = properties.get("servers").and_then(Value::as_object).cloned() else {
        return graph::fail(ctx, stack, node, "property servers: must be a map of member name to server");
    };
    if servers.is_empty() {
        return finish_group(ctx, stack, node, properties, ready);
    }
    expand(ctx, stack, node, &servers, ready)
}

fn expand(
    ctx: &mut Context<'_>,
    stack: &StackRow,
    mut group: NodeRow,
    servers: &Map<String, Value>,
    ready: &mut Vec<String>,
) -> Result<(), EngineError> {
    let mut member_properties =
        group.definition.get("properties").and_then(Value::as_object).cloned().unwrap_or_default();
    member_properties.remove("servers");
    let previous: Vec<String> = group
        .attributes
        .get("_members")
        .and_then(Value::as_array)
        .map(|members| members.iter().filter_map(Value::as_str).map(str::to_string).collect())
        .unwrap_or_default();
    let mut members = Vec::new();
    for (member, server) in servers {
        let name = member_name(&group.name, member);
        let mut properties = member_properties.clone();
        properties.insert("server".into(), server.clone());
        let definition =
            json!({"type": SOFTWARE_DEPLOYMENT, "properties": properties, "depends_on": [], "member_of": group.name});
        write_member(ctx, stack, &name, definition)?;
        ctx.tx.insert_edge(&stack.name, &name, &group.name)?;
        ready.push(name.clone());
        members.push(name);
    }
    for gone in previous.iter().filter(|name| !members.contains(name)) {
        if let Some(node) = ctx.tx.node(&stack.name, gone)? {
            super::lifecycle::remove_node(ctx, stack, node)?;
        }
    }
    ctx.tx.add_pending(&stack.name, members.len() as i64)?;
    group.remaining = members.len() as i64;
    group.attributes["_expanded"] = json!(stack.generation);
    group.attributes["_members"] = json!(members);
    group.status_reason = format!("deploying to {} server(s)", members.len());
    group.state = STATE_INIT.into();
    group.updated_at = ctx.now;
    ctx.tx.update_node(&group)?;
    ctx.event(&stack.name, &group.name, &format!("{}_IN_PROGRESS", group.action), &group.status_reason.clone())
}

fn write_member(ctx: &mut Context<'_>, stack: &StackRow, name: &str, definition: Value) -> Result<(), EngineError> {
    match ctx.tx.node(&stack.name, name)? {
        Some(existing) => {
            let mut existing = super::lifecycle::reset_for_update(&existing);
            existing.definition = definition;
            existing.generation = stack.generation;
            existing.state = STATE_INIT.into();
            existing.remaining = 0;
            existing.updated_at = ctx.now;
            ctx.tx.update_node(&existing)?;
        }
        None => {
            let node = NodeRow {
                stack: stack.name.clone(),
                name: name.to_string(),
                resource_type: SOFTWARE_DEPLOYMENT.into(),
                generation: stack.generation,
                // A member new to the group is created, whatever the group's own action.
                action: "CREATE".into(),
                state: STATE_INIT.into(),
                status_reason: String::new(),
                remaining: 0,
                definition,
                attributes: json!({}),
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
    ready: &mut Vec<String>,
) -> Result<(), EngineError> {
    let prefix = format!("{}/", group.name);
    let mut maps: Map<String, Value> = Map::new();
    for key in ["deploy_stdouts", "deploy_stderrs", "deploy_status_codes"] {
        maps.insert(key.into(), json!({}));
    }
    let members: Vec<String> = group
        .attributes
        .get("_members")
        .and_then(Value::as_array)
        .map(|members| members.iter().filter_map(Value::as_str).map(str::to_string).collect())
        .unwrap_or_default();
    for name in &members {
        let Some(member) = ctx.tx.node(&stack.name, name)? else { continue };
        let key = name.strip_prefix(&prefix).unwrap_or(name).to_string();
        let Some(attributes) = member.attributes.as_object() else { continue };
        for (attribute, value) in attributes.iter().filter(|(attribute, _)| !attribute.starts_with('_')) {
            let plural = match attribute.as_str() {
                "deploy_stdout" => "deploy_stdouts".to_string(),
                "deploy_stderr" => "deploy_stderrs".to_string(),
                "deploy_status_code" => "deploy_status_codes".to_string(),
                other => other.to_string(),
            };
            let entry = maps.entry(plural).or_insert_with(|| json!({}));
            entry[key.as_str()] = value.clone();
        }
    }
    let id = group.attributes.get("_id").cloned().unwrap_or_else(|| json!(super::context::new_uuid()));
    let mut attributes = maps;
    attributes.insert("_id".into(), id);
    attributes.insert("_expanded".into(), json!(stack.generation));
    attributes.insert("_members".into(), json!(members));
    attributes.insert("_actions".into(), json!(graph::deployment_actions(properties)));
    group.attributes = Value::Object(attributes);
    graph::complete(ctx, stack, group, "all members complete", ready)
}
