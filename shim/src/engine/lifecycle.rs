//! Stack operations as traversals. Create stores one node per resource with its definition and
//! its counter of unfinished predecessors, plus the edges, then activates the roots. Update starts
//! a new generation over the same nodes (unchanged deployments complete at once, changed ones
//! publish an UPDATE, removed ones publish DELETE when their config asks for it). Delete publishes
//! the DELETE actions and removes the stack when they are done.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value, json};

use super::context::{Context, STATE_COMPLETE, STATE_FAILED, STATE_IN_PROGRESS, STATE_INIT};
use super::graph::{self, config_of, deployment_actions, is_deployment};
use super::{EngineError, sweeper};
use crate::model::StackRequest;
use crate::store::{DeadlineRow, NodeRow, StackRow};
use crate::template::{Plan, Template};

/// A template that parsed and validated, with its resolved parameters.
pub struct Checked {
    pub template: Template,
    pub parameters: BTreeMap<String, Value>,
    pub plan: Plan,
}

pub fn create(
    ctx: &mut Context<'_>,
    name: &str,
    id: &str,
    request: &StackRequest,
    checked: &Checked,
) -> Result<StackRow, EngineError> {
    let stack = StackRow {
        id: id.to_string(),
        name: name.to_string(),
        action: "CREATE".into(),
        state: STATE_IN_PROGRESS.into(),
        status_reason: "Stack CREATE started".into(),
        parameters: json!(checked.parameters),
        hidden_parameters: hidden_parameters(&checked.template),
        generation: 1,
        // One count more than the nodes, held until every root was activated (see `start`).
        pending: checked.plan.nodes.len() as i64 + 1,
        deadline: request.timeout_secs.map(|secs| ctx.now.saturating_add(secs.saturating_mul(1000))),
        created_at: ctx.now,
        updated_at: ctx.now,
    };
    if !ctx.tx.insert_stack(&stack, &request.template)? {
        return Err(EngineError::Conflict { what: format!("stack {name}") });
    }
    ctx.event(name, name, "CREATE_IN_PROGRESS", "Stack CREATE started")?;
    let ready = write_plan(ctx, &stack, checked, &BTreeMap::new())?;
    start(ctx, &stack, ready)
}

pub fn update(
    ctx: &mut Context<'_>,
    name: &str,
    request: &StackRequest,
    checked: &Checked,
) -> Result<StackRow, EngineError> {
    let Some(mut stack) = ctx.tx.stack(name)? else {
        return Err(EngineError::NotFound { what: format!("stack {name}") });
    };
    if stack.action == "DELETE" {
        return Err(EngineError::Invalid { message: format!("stack {name} is being deleted") });
    }
    stack.generation += 1;
    stack.action = "UPDATE".into();
    stack.state = STATE_IN_PROGRESS.into();
    stack.status_reason = "Stack UPDATE started".into();
    stack.parameters = json!(checked.parameters);
    stack.hidden_parameters = hidden_parameters(&checked.template);
    stack.pending = checked.plan.nodes.len() as i64 + 1;
    stack.deadline = request.timeout_secs.map(|secs| ctx.now.saturating_add(secs.saturating_mul(1000)));
    stack.updated_at = ctx.now;
    ctx.tx.update_stack(&stack)?;
    ctx.tx.set_stack_template(name, &request.template)?;
    ctx.event(name, name, "UPDATE_IN_PROGRESS", "Stack UPDATE started")?;
    let existing: BTreeMap<String, NodeRow> =
        ctx.tx.nodes(name)?.into_iter().map(|node| (node.name.clone(), node)).collect();
    let kept: BTreeSet<&str> = checked.plan.nodes.iter().map(|node| node.name.as_str()).collect();
    // Members of a group that stays are the group's to keep or remove when it expands again.
    let mut removed: Vec<NodeRow> = existing
        .values()
        .filter(|node| !kept.contains(node.name.as_str()))
        .filter(|node| super::group::group_of(node).is_none_or(|group| !kept.contains(group)))
        .cloned()
        .collect();
    // Deployments first: their DELETE action needs the config, which may be going too.
    removed.sort_by_key(|node| !is_deployment(&node.resource_type));
    ctx.tx.delete_edges(name)?;
    let ready = write_plan(ctx, &stack, checked, &existing)?;
    for node in removed {
        remove_node(ctx, &stack, node)?;
    }
    start(ctx, &stack, ready)
}

/// How long a delete may wait for its DELETE actions (Heat's default stack action timeout).
const DELETE_TIMEOUT_MILLIS: u64 = 3_600_000;

pub fn delete(ctx: &mut Context<'_>, name: &str) -> Result<StackRow, EngineError> {
    let Some(mut stack) = ctx.tx.stack(name)? else {
        return Err(EngineError::NotFound { what: format!("stack {name}") });
    };
    if stack.action == "DELETE" && stack.state == STATE_IN_PROGRESS {
        return Ok(stack);
    }
    // After a failed or timed-out delete (a DELETE action failed, or its server is gone), a
    // second delete removes the stack without running DELETE actions again.
    let force = stack.action == "DELETE" && stack.state == STATE_FAILED;
    stack.generation += 1;
    stack.action = "DELETE".into();
    stack.state = STATE_IN_PROGRESS.into();
    stack.status_reason =
        if force { "Stack DELETE started (DELETE actions skipped)" } else { "Stack DELETE started" }.into();
    // One count held while publishing, so DELETE actions that finish at once (NO_SIGNAL)
    // cannot finish the stack before every one has been published.
    stack.pending = 1;
    stack.deadline = Some(ctx.now.saturating_add(DELETE_TIMEOUT_MILLIS));
    stack.updated_at = ctx.now;
    ctx.tx.update_stack(&stack)?;
    ctx.event(name, name, "DELETE_IN_PROGRESS", &stack.status_reason.clone())?;
    if let Some(due_at) = stack.deadline {
        let row = DeadlineRow { key: sweeper::stack_deadline_key(&stack), stack: name.to_string(), node: None, due_at };
        ctx.tx.put_deadline(&row)?;
    }
    if !force {
        super::teardown::start(ctx, &stack)?;
    }
    graph::node_done(ctx, &stack)?;
    Ok(ctx.tx.stack(name)?.unwrap_or(stack))
}

/// Stores the plan's nodes (reusing `existing` rows, whose attributes an update compares
/// against) and edges; returns the nodes with no unfinished predecessor.
fn write_plan(
    ctx: &mut Context<'_>,
    stack: &StackRow,
    checked: &Checked,
    existing: &BTreeMap<String, NodeRow>,
) -> Result<Vec<String>, EngineError> {
    let resources: BTreeMap<&str, &crate::template::Resource> =
        checked.template.resources.iter().map(|(name, resource)| (name.as_str(), resource)).collect();
    let mut ready = Vec::new();
    for planned in &checked.plan.nodes {
        let Some(resource) = resources.get(planned.name.as_str()) else { continue };
        let properties: Map<String, Value> =
            resource.properties.iter().map(|(key, expression)| (key.clone(), expression.to_json())).collect();
        let definition = json!({"type": resource.kind.name(), "properties": properties,
            "depends_on": resource.depends_on, "requires": planned.depends_on});
        let previous = match existing.get(&planned.name) {
            // A resource whose type changed is a new resource: the old one goes entirely.
            Some(previous) if previous.resource_type != resource.kind.name() => {
                forget_node(ctx, stack, previous)?;
                None
            }
            other => other,
        };
        let reused = previous.is_some();
        let mut node = match previous {
            Some(previous) => reset_for_update(previous),
            None => NodeRow {
                stack: stack.name.clone(),
                name: planned.name.clone(),
                resource_type: String::new(),
                generation: 0,
                action: "CREATE".into(),
                state: String::new(),
                status_reason: String::new(),
                remaining: 0,
                definition: Value::Null,
                attributes: json!({}),
                derived_config_id: None,
                signal_token_hash: None,
                server: None,
                updated_at: ctx.now,
            },
        };
        node.resource_type = resource.kind.name().to_string();
        node.generation = stack.generation;
        node.state = STATE_INIT.into();
        node.status_reason = String::new();
        node.remaining = planned.depends_on.len() as i64;
        node.definition = definition;
        node.updated_at = ctx.now;
        if reused {
            ctx.tx.update_node(&node)?;
        } else {
            ctx.tx.insert_node(&node)?;
        }
        for dependency in &planned.depends_on {
            ctx.tx.insert_edge(&stack.name, dependency, &planned.name)?;
        }
        if node.remaining == 0 {
            ready.push(node.name);
        }
    }
    Ok(ready)
}

/// The action a resource of an earlier traversal takes in a new one: UPDATE once it completed;
/// CREATE when it never did, failed (Heat replaces a failed resource), or was being deleted.
pub(super) fn next_action(previous: &NodeRow) -> &'static str {
    let failed = previous.attributes.get("_outcome").and_then(Value::as_str) == Some(STATE_FAILED);
    let completed = previous.attributes.get("_completed_once") == Some(&Value::Bool(true));
    if previous.action == "DELETE" || failed || !completed { "CREATE" } else { "UPDATE" }
}

/// A node row of an earlier traversal, ready to take part in a new one.
pub(super) fn reset_for_update(previous: &NodeRow) -> NodeRow {
    let mut node = NodeRow { action: next_action(previous).into(), ..previous.clone() };
    if previous.action == "DELETE" {
        // Re-added while its DELETE ran: publish afresh instead of waiting for that run.
        if let Some(attributes) = node.attributes.as_object_mut() {
            attributes.remove("_fingerprint");
            attributes.remove("_outcome");
        }
    }
    node
}

/// Activates the roots, then releases the count `create`/`update` held while doing so.
fn start(ctx: &mut Context<'_>, stack: &StackRow, mut ready: Vec<String>) -> Result<StackRow, EngineError> {
    if let Some(due_at) = stack.deadline {
        let row =
            DeadlineRow { key: sweeper::stack_deadline_key(stack), stack: stack.name.clone(), node: None, due_at };
        ctx.tx.put_deadline(&row)?;
    }
    // Activate in declaration order (settle pops from the end).
    ready.reverse();
    graph::settle(ctx, &stack.name, ready)?;
    graph::node_done(ctx, stack)?;
    Ok(ctx.tx.stack(&stack.name)?.unwrap_or_else(|| stack.clone()))
}

/// A resource an update removed: publish its DELETE action when its config asks for one,
/// otherwise forget it now.
pub(super) fn remove_node(ctx: &mut Context<'_>, stack: &StackRow, node: NodeRow) -> Result<(), EngineError> {
    if publish_delete(ctx, stack, node.clone(), true)? {
        return Ok(());
    }
    forget_node(ctx, stack, &node)
}

fn forget_node(ctx: &mut Context<'_>, stack: &StackRow, node: &NodeRow) -> Result<(), EngineError> {
    withdraw(ctx, stack, node)?;
    ctx.tx.delete_node(&stack.name, &node.name).map_err(EngineError::from)
}

/// Takes a deployment's entry out of its server's document; a late signal for it stays a
/// known, stale one (2xx) rather than an unknown token.
fn withdraw(ctx: &mut Context<'_>, stack: &StackRow, node: &NodeRow) -> Result<(), EngineError> {
    if let Some(server) = &node.server {
        ctx.tx.remove_entry(server, &stack.name, &node.name)?;
        ctx.touched_servers.insert(server.clone());
    }
    if let (true, Some(hash)) = (is_deployment(&node.resource_type), &node.signal_token_hash) {
        ctx.tx.retire_signal_hash(hash, &stack.name, &node.name)?;
    }
    Ok(())
}

/// Publishes the DELETE action of a deployment that ran and whose actions include DELETE
/// (counting it in the stack's pending work first when `count_pending`: a delete's traversal
/// counted every node already); false when there is nothing to run.
pub(super) fn publish_delete(
    ctx: &mut Context<'_>,
    stack: &StackRow,
    mut node: NodeRow,
    count_pending: bool,
) -> Result<bool, EngineError> {
    let ran = node.server.is_some() && node.state != STATE_INIT;
    let already_deleted = node.action == "DELETE" && node.state == STATE_COMPLETE;
    if !is_deployment(&node.resource_type) || !ran || already_deleted {
        return Ok(false);
    }
    let actions: Vec<String> = node
        .attributes
        .get("_actions")
        .cloned()
        .and_then(|value| serde_json::from_value(value).ok())
        .unwrap_or_default();
    if !actions.iter().any(|action| action == "DELETE") {
        return Ok(false);
    }
    let properties = match ctx.evaluate_properties(stack, &node) {
        Ok(properties) => properties,
        // The inputs no longer resolve (their producers are gone): run DELETE with none.
        Err(_) => Map::from_iter([("actions".to_string(), json!(deployment_actions(&Map::new())))]),
    };
    let (Some(server), Some(config)) = (node.server.clone(), config_of(ctx, stack, &node)?) else { return Ok(false) };
    node.action = "DELETE".into();
    node.generation = stack.generation;
    node.state = STATE_INIT.into();
    if count_pending {
        ctx.tx.add_pending(&stack.name, 1)?;
    }
    let mut ready = Vec::new();
    graph::publish(ctx, stack, node, &server, &config, &properties, &mut ready)?;
    Ok(true)
}

/// A DELETE action finished (a signal, or NO_SIGNAL at once).
pub fn delete_action_done(ctx: &mut Context<'_>, stack: &StackRow, node: &NodeRow) -> Result<(), EngineError> {
    let Some(current) = ctx.tx.stack(&stack.name)? else { return Ok(()) };
    if current.action == "DELETE" {
        return super::teardown::deleted(ctx, &current, node);
    }
    forget_node(ctx, &current, node)?;
    graph::node_done(ctx, &current)
}

/// Removes everything of a deleted stack but its events.
pub fn finish_delete(ctx: &mut Context<'_>, stack: &StackRow) -> Result<(), EngineError> {
    let failed = !stack.status_reason.contains("DELETE actions skipped")
        && ctx.tx.nodes(&stack.name)?.iter().any(|node| node.action == "DELETE" && node.state == STATE_FAILED);
    if failed {
        return graph::fail_stack(ctx, &stack.name, stack.generation, "a DELETE deployment failed");
    }
    for node in ctx.tx.nodes(&stack.name)? {
        withdraw(ctx, stack, &node)?;
    }
    ctx.tx.delete_stack(&stack.name)?;
    ctx.event(&stack.name, &stack.name, "DELETE_COMPLETE", "Stack DELETE completed successfully")
}

fn hidden_parameters(template: &Template) -> Vec<String> {
    template.parameters.iter().filter(|(_, parameter)| parameter.hidden).map(|(name, _)| name.clone()).collect()
}
