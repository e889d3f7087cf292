//! The forward traversal: create stores one node per resource with its definition and its
//! counter of unfinished predecessors, plus the edges, then activates the roots. Update starts a
//! new generation over the same nodes (unchanged deployments complete at once, changed ones
//! publish an UPDATE, removed ones publish DELETE when their config asks for it: see `reverse`).
//! One settle loop activates whatever becomes ready, from an operation or from a signal.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value, json};

use super::reverse;
use crate::engine::context::Context;
use crate::engine::deadlines::Deadline;
use crate::engine::error::EngineError;
use crate::engine::node::{self, Released, status};
use crate::engine::resources::{self, Activation, group};
use crate::model::StackRequest;
use crate::store::{Action, NodeRecord, NodeRow, NodeState, Rollback, StackRow, State};
use crate::template::{Plan, Policies, Resource, Template, resolve_deletion_policy};

/// A template that parsed and validated, with its resolved parameters.
pub struct Checked {
    pub template: Template,
    pub parameters: BTreeMap<String, Value>,
    pub plan: Plan,
    /// The resources counted (`template::Checked::resources`) and the budget the nested
    /// stacks' copies spent (`template::Checked::expansion_bytes`).
    pub resources: usize,
    pub expansion_bytes: usize,
    /// The template text to store: the request's, or the resolved JSON when an environment or
    /// files changed it (`template::parse_template_in`).
    pub stored_template: String,
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
        action: Action::Create,
        state: State::InProgress,
        status_reason: "Stack CREATE started".into(),
        parameters: json!(checked.parameters),
        hidden_parameters: checked.template.hidden_parameters(),
        generation: 1,
        // One count more than the nodes, held until every root was activated (see `start`).
        pending: checked.plan.nodes.len() as i64 + 1,
        // Without a timeout of its own, Heat's default (`Stack.timeout_secs`).
        deadline: Some(ctx.limits.stack_action_timeout.due_at(ctx.now, request.timeout_secs)),
        created_at: ctx.now,
        updated_at: ctx.now,
        evaluated_bytes: checked.expansion_bytes as u64,
        resource_count: checked.resources as u64,
        // Heat's default: a failed create stays failed.
        rollback: Rollback::from_disable(request.disable_rollback.unwrap_or(true)),
    };
    if !ctx.tx.insert_stack(&stack, &checked.stored_template)? {
        return Err(EngineError::Conflict { what: format!("stack {name}") });
    }
    ctx.event(name, name, &status(Action::Create, State::InProgress), "Stack CREATE started")?;
    let ready = write_plan(ctx, &stack, checked, &BTreeMap::new())?;
    start(ctx, &stack, ready)
}

/// Starts a new traversal toward `checked`: an update (`action` UPDATE) or a rollback
/// (ROLLBACK, see `rollback`). `request.disable_rollback` is the stack's setting from now on
/// (absent: unchanged).
pub fn update(
    ctx: &mut Context<'_>,
    name: &str,
    request: &StackRequest,
    checked: &Checked,
    action: Action,
) -> Result<StackRow, EngineError> {
    let Some(mut stack) = ctx.tx.stack(name)? else {
        return Err(EngineError::NotFound { what: format!("stack {name}") });
    };
    if stack.action == Action::Delete {
        return Err(EngineError::Invalid { message: format!("stack {name} is being deleted") });
    }
    stack.generation += 1;
    stack.action = action;
    stack.state = State::InProgress;
    stack.status_reason = format!("Stack {action} started");
    // A rollback that was due is superseded by this traversal.
    stack.rollback = Rollback::from_disable(request.disable_rollback.unwrap_or(stack.rollback == Rollback::Disabled));
    stack.parameters = json!(checked.parameters);
    stack.hidden_parameters = checked.template.hidden_parameters();
    stack.pending = checked.plan.nodes.len() as i64 + 1;
    stack.deadline = Some(ctx.limits.stack_action_timeout.due_at(ctx.now, request.timeout_secs));
    stack.updated_at = ctx.now;
    // A new traversal: the budget spent again from the nested stacks' copies, the resources
    // counted again (groups add their members when they expand).
    stack.evaluated_bytes = checked.expansion_bytes as u64;
    stack.resource_count = checked.resources as u64;
    ctx.tx.update_stack(&stack)?;
    ctx.tx.set_stack_template(name, &checked.stored_template)?;
    ctx.event(name, name, &status(action, State::InProgress), &stack.status_reason)?;
    let existing: BTreeMap<String, NodeRow> =
        ctx.tx.nodes(name)?.into_iter().map(|node| (node.name.clone(), node)).collect();
    let kept: BTreeSet<&str> = checked.plan.nodes.iter().map(|node| node.name.as_str()).collect();
    // Members of a group that stays are the group's to keep or remove when it expands again.
    let mut removed: Vec<NodeRow> = existing
        .values()
        .filter(|node| !kept.contains(node.name.as_str()))
        .filter(|node| group::group_of(node).is_none_or(|group| !kept.contains(group)))
        .cloned()
        .collect();
    // Deployments first: their DELETE action needs the config, which may be going too.
    removed.sort_by_key(|node| !node::is_deployment(node));
    ctx.tx.delete_edges(name)?;
    let ready = write_plan(ctx, &stack, checked, &existing)?;
    for node in removed {
        if reverse::retained(&node, true) {
            reverse::forget_node(ctx, &stack, &node)?;
        } else {
            reverse::remove_node(ctx, &stack, node)?;
        }
    }
    start(ctx, &stack, ready)
}

/// Stores the plan's nodes (reusing `existing` rows, whose attributes an update compares
/// against) and edges; returns the nodes with no unfinished predecessor.
fn write_plan(
    ctx: &mut Context<'_>,
    stack: &StackRow,
    checked: &Checked,
    existing: &BTreeMap<String, NodeRow>,
) -> Result<Vec<String>, EngineError> {
    let resources: BTreeMap<&str, &Resource> =
        checked.template.resources.iter().map(|(name, resource)| (name.as_str(), resource)).collect();
    let mut ready = Vec::new();
    for planned in &checked.plan.nodes {
        let Some(resource) = resources.get(planned.name.as_str()) else { continue };
        let properties: Map<String, Value> =
            resource.properties.iter().map(|(key, expression)| (key.clone(), expression.to_json())).collect();
        let mut definition = json!({"type": resource.kind.name(), "properties": properties,
            "depends_on": resource.depends_on, "requires": planned.depends_on});
        let policies = resolved_policies(ctx, stack, &planned.name, resource)?;
        if let (Some(policies), Some(fields)) = (policies.to_json(), definition.as_object_mut()) {
            fields.insert("policies".into(), policies);
        }
        // A resource of a flattened nested stack: that stack's `<name>/<id>` (deploy_stack_id).
        if let Some(stack) = &resource.stack {
            definition["stack"] = stack.to_json();
        }
        let previous = match existing.get(&planned.name) {
            // A resource whose type changed is a new resource: the old one goes entirely, a
            // group with its members (the new group's own take their names).
            Some(previous) if previous.resource_type != resource.kind.name() => {
                for member in existing.values().filter(|node| group::group_of(node) == Some(planned.name.as_str())) {
                    reverse::forget_node(ctx, stack, member)?;
                }
                reverse::forget_node(ctx, stack, previous)?;
                None
            }
            other => other,
        };
        let reused = previous.is_some();
        let mut node = match previous {
            Some(previous) => node::reset_for_update(previous),
            None => new_node(stack, &planned.name, ctx.now),
        };
        node.resource_type = resource.kind.name().to_string();
        node.generation = stack.generation;
        node.state = NodeState::Init;
        node.status_reason = String::new();
        node.remaining = planned.depends_on.len() as i64;
        node.definition = definition.into();
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

/// The resource's policies with a `deletion_policy` given by a function resolved (Heat resolves
/// it when it parses the template; functions of parameters are what it can use then). A value
/// Heat refuses refuses the stack.
fn resolved_policies(
    ctx: &mut Context<'_>,
    stack: &StackRow,
    name: &str,
    resource: &Resource,
) -> Result<Policies, EngineError> {
    let mut policies = resource.policies.clone();
    let Some(function) = policies.deletion_function.take() else { return Ok(policies) };
    let kind = Some(resource.kind);
    let refused = |message: String| EngineError::Invalid { message: format!("resource {name}: {message}") };
    let value = ctx.evaluate(stack, &function).map_err(|error| refused(format!("deletion_policy: {error}")))?;
    policies.retain = resolve_deletion_policy(name, kind, &value, policies.lower_case_names).map_err(refused)?;
    Ok(policies)
}

fn new_node(stack: &StackRow, name: &str, now: u64) -> NodeRow {
    NodeRow {
        stack: stack.name.clone(),
        name: name.to_string(),
        resource_type: String::new(),
        generation: 0,
        action: Action::Create,
        state: NodeState::Init,
        status_reason: String::new(),
        remaining: 0,
        definition: Value::Null.into(),
        attributes: json!({}).into(),
        record: NodeRecord::default(),
        derived_config_id: None,
        signal_token_hash: None,
        server: None,
        updated_at: now,
    }
}

/// Activates the roots, then releases the count `create`/`update` held while doing so.
fn start(ctx: &mut Context<'_>, stack: &StackRow, mut ready: Vec<String>) -> Result<StackRow, EngineError> {
    if let Some(due_at) = stack.deadline {
        Deadline::of_stack(stack).set(ctx, due_at)?;
    }
    // Activate in declaration order (settle pops from the end).
    ready.reverse();
    settle(ctx, &stack.name, ready)?;
    reverse::node_done(ctx, stack)?;
    Ok(ctx.tx.stack(&stack.name)?.unwrap_or_else(|| stack.clone()))
}

/// Activates `names` and everything their completion makes ready.
pub fn settle(ctx: &mut Context<'_>, stack: &str, mut ready: Vec<String>) -> Result<(), EngineError> {
    while let Some(name) = ready.pop() {
        let Some((stack, activation)) = resources::activate(ctx, stack, &name)? else { continue };
        match activation {
            Activation::Released(released) => follow(ctx, &stack, released, &mut ready)?,
            Activation::Expanded { members, removed } => {
                ready.extend(members);
                for node in removed {
                    reverse::remove_node(ctx, &stack, node)?;
                }
            }
        }
    }
    Ok(())
}

/// Follows what a completion outside an activation (a signal) released, then settles.
pub fn proceed(ctx: &mut Context<'_>, stack: &StackRow, released: Released) -> Result<(), EngineError> {
    let mut ready = Vec::new();
    follow(ctx, stack, released, &mut ready)?;
    settle(ctx, &stack.name, ready)
}

/// Queues the successors a completion released and counts the node as done; a finished DELETE
/// action goes to the reverse traversal.
pub fn follow(
    ctx: &mut Context<'_>,
    stack: &StackRow,
    released: Released,
    ready: &mut Vec<String>,
) -> Result<(), EngineError> {
    match released {
        Released::Nothing => Ok(()),
        Released::Successors(successors) => {
            ready.extend(successors);
            reverse::node_done(ctx, stack)
        }
        Released::DeleteAction(node) => reverse::delete_action_done(ctx, stack, &node),
    }
}
