//! A node's transitions (in progress, complete, failed) and the stack's own end when its
//! traversal's last node is done. Nothing here decides what happens next: a completion returns
//! what it released (`Released`), `node_done` returns the stack whose traversal just finished,
//! and the traversal above acts on them. Also what a node is (its resource type, the resource a
//! property refers to) and how a node of an earlier traversal enters a new one.

use std::fmt::Display;

use serde_json::Value;

use super::context::{Context, new_uuid};
use super::deadlines::Deadline;
use super::error::EngineError;
use crate::store::{Action, NodeRow, NodeState, Rollback, RunOutcome, StackRow, State};
use crate::template::{Expr, Policies, ResourceType};

/// What a node's completion made possible.
#[derive(Debug)]
pub enum Released {
    /// Nothing moves: a late result of an earlier traversal (a run that was going on when an
    /// update or delete started), or one after the stack failed, is only recorded on the node.
    Nothing,
    /// A node of the current forward traversal: these successors had it as their last unfinished
    /// predecessor. The node is still counted in the stack's pending work (see `node_done`).
    Successors(Vec<String>),
    /// A DELETE action of the current traversal finished (the node as stored).
    DeleteAction(Box<NodeRow>),
}

/// A status as Heat spells it: `<ACTION>_<STATE>`.
pub fn status(action: Action, state: impl Display) -> String {
    format!("{action}_{state}")
}

/// The status a node shows: its own, or while a traversal has not reached it (INIT), the one it
/// completed with before (`NodeRecord::previous_status`), or INIT_COMPLETE for a new one; a
/// deployment group whose members are deploying shows IN_PROGRESS.
pub fn shown_status(node: &NodeRow) -> String {
    if node.state != NodeState::Init {
        return status(node.action, node.state);
    }
    if node.record.expanded == Some(node.generation) && is_group(node) {
        return status(node.action, NodeState::InProgress);
    }
    node.record.previous_status.clone().unwrap_or_else(|| "INIT_COMPLETE".to_string())
}

fn is_group(node: &NodeRow) -> bool {
    matches!(resource_type(node), Some(ResourceType::SoftwareDeploymentGroup | ResourceType::StructuredDeploymentGroup))
}

/// A deployment whose published run has not reported yet (of this or an earlier traversal).
pub fn is_running(node: &NodeRow) -> bool {
    node.state == NodeState::InProgress && node.record.outcome.is_none() && node.derived_config_id.is_some()
}

/// The node's resource type; `None` for a type this build does not know.
pub fn resource_type(node: &NodeRow) -> Option<ResourceType> {
    ResourceType::parse(&node.resource_type)
}

/// A deployment to one server (what publishes an entry and gets signals).
pub fn is_deployment(node: &NodeRow) -> bool {
    matches!(resource_type(node), Some(ResourceType::SoftwareDeployment | ResourceType::StructuredDeployment))
}

/// The resource's physical id, kept once given.
pub fn stable_id(node: &NodeRow) -> String {
    node.record.id.clone().unwrap_or_else(new_uuid)
}

/// The name a `{get_resource: X}` property refers to.
pub fn referenced_resource(node: &NodeRow, property: &str) -> Option<String> {
    let stored = node.definition.get("properties")?.get(property)?;
    match Expr::from_json(stored).ok()? {
        Expr::GetResource(name) => Some(name),
        _ => None,
    }
}

/// The action a resource of an earlier traversal takes in a new one: UPDATE once it completed;
/// CREATE when it never did, failed (Heat replaces a failed resource), or was being deleted.
pub fn next_action(previous: &NodeRow) -> Action {
    let failed = previous.record.outcome == Some(RunOutcome::Failed);
    if previous.action == Action::Delete || failed || !previous.record.completed_once {
        Action::Create
    } else {
        Action::Update
    }
}

/// A node row of an earlier traversal, ready to take part in a new one.
pub fn reset_for_update(previous: &NodeRow) -> NodeRow {
    let mut node = NodeRow { action: next_action(previous), ..previous.clone() };
    node.record.previous_status = match previous.state {
        NodeState::Complete if previous.action != Action::Delete => Some(status(previous.action, NodeState::Complete)),
        // Not reached by the traversal before this one either: still what it was before that.
        NodeState::Init => previous.record.previous_status.clone(),
        _ => None,
    };
    if previous.action == Action::Delete {
        // Re-added while its DELETE ran: publish afresh instead of waiting for that run.
        node.record.fingerprint = None;
        node.record.outcome = None;
    }
    node
}

pub fn mark_in_progress(
    ctx: &mut Context<'_>,
    stack: &StackRow,
    mut node: NodeRow,
    reason: &str,
) -> Result<(), EngineError> {
    node.state = NodeState::InProgress;
    node.status_reason = reason.to_string();
    node.updated_at = ctx.now;
    ctx.tx.update_node(&node)?;
    ctx.event(&stack.name, &node.name, &status(node.action, NodeState::InProgress), reason)
}

/// Marks `node` COMPLETE; returns what that released.
pub fn complete(
    ctx: &mut Context<'_>,
    stack: &StackRow,
    mut node: NodeRow,
    reason: &str,
) -> Result<Released, EngineError> {
    node.record.completed_once = true;
    node.state = NodeState::Complete;
    node.status_reason = reason.to_string();
    node.updated_at = ctx.now;
    ctx.tx.update_node(&node)?;
    ctx.event(&stack.name, &node.name, &status(node.action, NodeState::Complete), reason)?;
    release(ctx, stack, node)
}

/// What follows a node's completion (from activation or from a signal): a node of a forward
/// traversal decrements its successors' counters and returns those that reached zero.
pub fn release(ctx: &mut Context<'_>, stack: &StackRow, node: NodeRow) -> Result<Released, EngineError> {
    let current = ctx.tx.stack(&stack.name)?;
    if current.is_none_or(|current| current.state != State::InProgress || current.generation != node.generation) {
        return Ok(Released::Nothing);
    }
    if node.action == Action::Delete {
        return Ok(Released::DeleteAction(Box::new(node)));
    }
    let mut ready = Vec::new();
    for successor in ctx.tx.successors(&stack.name, &node.name)? {
        if ctx.tx.decrement_remaining(&stack.name, &successor)? == 0 {
            ready.push(successor);
        }
    }
    Ok(Released::Successors(ready))
}

/// One node of the traversal is done. Returns the stack when it was the last one of the
/// stack's current traversal (still in progress): the caller finishes the stack.
pub fn node_done(ctx: &mut Context<'_>, stack: &StackRow) -> Result<Option<StackRow>, EngineError> {
    if ctx.tx.add_pending(&stack.name, -1)? > 0 {
        return Ok(None);
    }
    let Some(current) = ctx.tx.stack(&stack.name)? else { return Ok(None) };
    if current.state != State::InProgress || current.generation != stack.generation {
        return Ok(None);
    }
    Ok(Some(current))
}

/// The stack's traversal completed.
pub fn complete_stack(ctx: &mut Context<'_>, mut stack: StackRow) -> Result<(), EngineError> {
    stack.state = State::Complete;
    stack.status_reason = format!("Stack {} completed successfully", stack.action);
    stack.updated_at = ctx.now;
    ctx.tx.update_stack(&stack)?;
    Deadline::of_stack(&stack).clear(ctx)?;
    ctx.event(&stack.name, &stack.name, &status(stack.action, State::Complete), &stack.status_reason)
}

/// Marks `node` FAILED; the stack fails with it (successors never activate), unless it is a
/// member of a group whose failure budget tolerates it (see `after_failure`).
pub fn fail(ctx: &mut Context<'_>, stack: &StackRow, mut node: NodeRow, reason: &str) -> Result<Released, EngineError> {
    node.state = NodeState::Failed;
    node.status_reason = reason.to_string();
    node.updated_at = ctx.now;
    ctx.tx.update_node(&node)?;
    ctx.event(&stack.name, &node.name, &status(node.action, NodeState::Failed), reason)?;
    let reason = format!("Resource {} failed: {}: {}", node.action, node.name, reason);
    after_failure(ctx, stack, node, &reason)
}

/// What follows a failure already recorded on `node`: the stack fails with `stack_reason`; a
/// group member fails its group first. A member within its group's failure budget counts as
/// done instead: what it releases (its group, once the batch is done) is returned.
pub fn after_failure(
    ctx: &mut Context<'_>,
    stack: &StackRow,
    node: NodeRow,
    stack_reason: &str,
) -> Result<Released, EngineError> {
    let current = ctx.tx.stack(&stack.name)?;
    let live =
        current.is_some_and(|current| current.state == State::InProgress && current.generation == node.generation);
    let group = match (live, group_of(&node)) {
        (true, Some(group)) => ctx.tx.node(&stack.name, group)?,
        _ => None,
    };
    let Some(mut group) = group.filter(|group| group.generation == node.generation) else {
        fail_stack(ctx, &stack.name, node.generation, stack_reason)?;
        return Ok(Released::Nothing);
    };
    let budget = Policies::from_json(group.definition.get("policies")).failure_budget;
    group.record.failed_members.push(node.name.clone());
    let failed = group.record.failed_members.len() as u64;
    let members = group.record.members.len() as u64;
    if let Some(budget) = budget.filter(|budget| budget.tolerates(failed, members)) {
        let reason =
            format!("{failed} of {members} member(s) failed, within the failure budget ({})", budget.describe());
        group.updated_at = ctx.now;
        ctx.tx.update_node(&group)?;
        ctx.event(&stack.name, &group.name, "WARNING", &format!("{reason}: {} failed", node.name))?;
        return release(ctx, stack, node);
    }
    let reason = match budget {
        Some(budget) => format!(
            "{failed} of {members} member(s) failed, over the failure budget ({}): {}",
            budget.describe(),
            group.record.failed_members.join(", ")
        ),
        None => format!("member {} failed", node.name),
    };
    group.state = NodeState::Failed;
    group.status_reason = reason.clone();
    group.updated_at = ctx.now;
    ctx.tx.update_node(&group)?;
    ctx.event(&stack.name, &group.name, &status(group.action, NodeState::Failed), &reason)?;
    let stack_reason = match budget {
        Some(_) => format!("Resource {} failed: {}: {reason}", group.action, group.name),
        None => stack_reason.to_string(),
    };
    fail_stack(ctx, &stack.name, node.generation, &stack_reason)?;
    Ok(Released::Nothing)
}

/// Fails `node` for going over one of the stack's limits; in a create or update, whose request
/// is still open, refuses the whole call instead (400, nothing stored).
pub fn fail_over_limit(
    ctx: &mut Context<'_>,
    stack: &StackRow,
    node: NodeRow,
    reason: &str,
) -> Result<Released, EngineError> {
    if ctx.refuse_over_budget {
        return Err(EngineError::Template { problems: vec![format!("resource {}: {reason}", node.name)] });
    }
    fail(ctx, stack, node, reason)
}

/// What follows a failed traversal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AfterFailure {
    /// A rollback when the stack has it enabled (a failure).
    AsConfigured,
    /// A rollback whatever the setting (a cancel).
    RollBack,
    /// None (a cancel without rollback).
    Stop,
}

/// Fails the stack's traversal `generation` if it is still the one in progress; a rollback
/// follows when the stack has it enabled (see `fail_stack_then`).
pub fn fail_stack(ctx: &mut Context<'_>, name: &str, generation: u64, reason: &str) -> Result<(), EngineError> {
    fail_stack_then(ctx, name, generation, reason, AfterFailure::AsConfigured)
}

/// Fails the stack's traversal `generation` if it is still the one in progress. A failed create
/// or update whose rollback `after` asks for is marked due: its deadline row, due now, makes
/// the sweeper start it (`rollback`), in this process or, after a crash, the next.
pub fn fail_stack_then(
    ctx: &mut Context<'_>,
    name: &str,
    generation: u64,
    reason: &str,
    after: AfterFailure,
) -> Result<(), EngineError> {
    let Some(mut stack) = ctx.tx.stack(name)? else { return Ok(()) };
    if stack.state != State::InProgress || stack.generation != generation {
        return Ok(());
    }
    let roll_back = matches!(stack.action, Action::Create | Action::Update)
        && match after {
            AfterFailure::AsConfigured => stack.rollback != Rollback::Disabled,
            AfterFailure::RollBack => true,
            AfterFailure::Stop => false,
        };
    stack.state = State::Failed;
    stack.status_reason = reason.to_string();
    stack.updated_at = ctx.now;
    if roll_back {
        stack.rollback = Rollback::Due;
    }
    ctx.tx.update_stack(&stack)?;
    Deadline::of_stack(&stack).clear(ctx)?;
    if roll_back {
        Deadline::of_stack(&stack).set(ctx, ctx.now)?;
        ctx.continued = true;
    }
    ctx.event(name, name, &status(stack.action, State::Failed), reason)
}

/// The names in a JSON array of strings (absent or malformed: none).
pub fn names(value: Option<&Value>) -> Vec<String> {
    value
        .and_then(Value::as_array)
        .map(|items| items.iter().filter_map(Value::as_str).map(str::to_string).collect())
        .unwrap_or_default()
}

/// Whether `node` is a member of a group (created by expansion, not by the template). Here,
/// below the resource types, because both `deployment` and `group` need it.
pub fn group_of(node: &NodeRow) -> Option<&str> {
    node.definition.get("member_of").and_then(Value::as_str)
}
