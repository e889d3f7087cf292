//! The reverse traversal: stack delete, and the DELETE actions of resources an update removes.
//! For a delete, each node's counter becomes the number of its dependents (its out-edges); a
//! node whose counter is zero publishes its DELETE action (or, with nothing to run, is gone at
//! once) and, when done, decrements the counters of what it depends on; a resource whose
//! `deletion_policy` is Retain runs nothing and is forgotten. Also where a traversal
//! of either direction ends: the stack completes, or a delete removes it.

use serde_json::Value;

use crate::engine::context::Context;
use crate::engine::deadlines::Deadline;
use crate::engine::error::EngineError;
use crate::engine::node::{self, Released, status};
use crate::engine::resources::deployment::{self, config_of};
use crate::engine::resources::server;
use crate::store::{Action, NodeRow, NodeState, StackRow, State};
use crate::template::Policies;

/// Whether a delete runs the DELETE actions of its deployments.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum DeleteActions {
    Run,
    /// A second delete after a failed one removes the stack without running them again.
    Skipped,
}

pub fn delete(ctx: &mut Context<'_>, name: &str) -> Result<StackRow, EngineError> {
    let Some(mut stack) = ctx.tx.stack(name)? else {
        return Err(EngineError::NotFound { what: format!("stack {name}") });
    };
    if stack.action == Action::Delete && stack.state == State::InProgress {
        return Ok(stack);
    }
    // After a failed or timed-out delete (a DELETE action failed, or its server is gone), a
    // second delete removes the stack without running DELETE actions again.
    let actions = if stack.action == Action::Delete && stack.state == State::Failed {
        DeleteActions::Skipped
    } else {
        DeleteActions::Run
    };
    stack.generation += 1;
    stack.action = Action::Delete;
    stack.state = State::InProgress;
    stack.status_reason = match actions {
        DeleteActions::Run => "Stack DELETE started",
        DeleteActions::Skipped => "Stack DELETE started (DELETE actions skipped)",
    }
    .into();
    // One count held while publishing, so DELETE actions that finish at once (NO_SIGNAL)
    // cannot finish the stack before every one has been published.
    stack.pending = 1;
    // The default (stack_action_timeout): Heat would use the stack's own timeout_mins, but a
    // stack keeps no timeout of its own past the traversal it was given for.
    stack.deadline = Some(ctx.limits.stack_action_timeout.due_at(ctx.now, None));
    stack.updated_at = ctx.now;
    // A new traversal: its evaluations (the DELETE actions' inputs) have the whole budget.
    stack.evaluated_bytes = 0;
    ctx.tx.update_stack(&stack)?;
    ctx.event(name, name, &status(Action::Delete, State::InProgress), &stack.status_reason)?;
    if let Some(due_at) = stack.deadline {
        Deadline::of_stack(&stack).set(ctx, due_at)?;
    }
    match actions {
        DeleteActions::Run => {
            start_teardown(ctx, &stack)?;
            node_done(ctx, &stack)?;
        }
        // Nothing was published: releasing the held count finishes the delete now.
        DeleteActions::Skipped => {
            if let Some(current) = node::node_done(ctx, &stack)? {
                finish_delete(ctx, &current, DeleteActions::Skipped)?;
            }
        }
    }
    Ok(ctx.tx.stack(name)?.unwrap_or(stack))
}

/// Counts every node into the stack's pending work and starts with the nodes nothing depends on.
fn start_teardown(ctx: &mut Context<'_>, stack: &StackRow) -> Result<(), EngineError> {
    let nodes = ctx.tx.nodes(&stack.name)?;
    ctx.tx.add_pending(&stack.name, nodes.len() as i64)?;
    let mut ready = Vec::new();
    for mut node in nodes {
        node.remaining = ctx.tx.successors(&stack.name, &node.name)?.len() as i64;
        ctx.tx.update_node(&node)?;
        if node.remaining == 0 {
            ready.push(node.name);
        }
    }
    drain(ctx, stack, ready)
}

fn drain(ctx: &mut Context<'_>, stack: &StackRow, mut ready: Vec<String>) -> Result<(), EngineError> {
    while let Some(name) = ready.pop() {
        let Some(node) = ctx.tx.node(&stack.name, &name)? else { continue };
        if !retained(&node, true) && publish_delete(ctx, stack, node.clone(), false)? {
            // Its signal continues the traversal (`deleted`).
            continue;
        }
        release_dependencies(ctx, stack, &node, &mut ready)?;
    }
    Ok(())
}

/// A node's DELETE action finished during a delete: what it depends on may go now.
fn deleted(ctx: &mut Context<'_>, stack: &StackRow, node: &NodeRow) -> Result<(), EngineError> {
    let mut ready = Vec::new();
    release_dependencies(ctx, stack, node, &mut ready)?;
    drain(ctx, stack, ready)
}

fn release_dependencies(
    ctx: &mut Context<'_>,
    stack: &StackRow,
    node: &NodeRow,
    ready: &mut Vec<String>,
) -> Result<(), EngineError> {
    for dependency in dependencies(node) {
        if ctx.tx.node(&stack.name, &dependency)?.is_some()
            && ctx.tx.decrement_remaining(&stack.name, &dependency)? == 0
        {
            ready.push(dependency);
        }
    }
    node_done(ctx, stack)
}

/// The nodes `node` has an edge from: the plan's dependencies it was stored with, and for a
/// deployment group its members.
fn dependencies(node: &NodeRow) -> Vec<String> {
    let mut all = node::names(node.definition.get("requires"));
    all.extend(node.record.members.iter().cloned());
    all.sort();
    all.dedup();
    all
}

/// Whether removing `node` runs nothing on its server (`deletion_policy: Retain`, Heat's
/// Resource.delete skipping handle_delete): its own policy, or, when `with_group` (its group goes
/// too), its group's, whose retained nested stack would keep the members.
pub fn retained(node: &NodeRow, with_group: bool) -> bool {
    let own = Policies::from_json(node.definition.get("policies")).retain;
    own || (with_group && node.definition.get("group_retain").and_then(Value::as_bool) == Some(true))
}

/// A resource an update removed: publish its DELETE action when its config asks for one (and
/// its deletion policy is not Retain), otherwise forget it now.
pub fn remove_node(ctx: &mut Context<'_>, stack: &StackRow, node: NodeRow) -> Result<(), EngineError> {
    if !retained(&node, false) && publish_delete(ctx, stack, node.clone(), true)? {
        return Ok(());
    }
    forget_node(ctx, stack, &node)
}

/// Removes a node without running anything.
pub fn forget_node(ctx: &mut Context<'_>, stack: &StackRow, node: &NodeRow) -> Result<(), EngineError> {
    withdraw(ctx, stack, node)?;
    ctx.tx.delete_node(&stack.name, &node.name).map_err(EngineError::from)
}

/// Takes a deployment's entry out of its server's document; a late signal for it stays a
/// known, stale one (2xx) rather than an unknown token.
fn withdraw(ctx: &mut Context<'_>, stack: &StackRow, node: &NodeRow) -> Result<(), EngineError> {
    if let Some(server) = &node.server {
        ctx.remove_entry(server, &stack.name, &node.name)?;
    }
    if let (true, Some(hash)) = (node::is_deployment(node), &node.signal_token_hash) {
        ctx.tx.retire_signal_hash(hash, &stack.name, &node.name)?;
    }
    // A server the stack created goes with the resource that created it (Heat's
    // DeployedServer deletes the credentials it made).
    server::revoke(ctx, stack, node)
}

/// Publishes the DELETE action of a deployment that ran and whose actions include DELETE
/// (counting it in the stack's pending work first when `count_pending`: a delete's traversal
/// counted every node already); false when there is nothing to run.
fn publish_delete(
    ctx: &mut Context<'_>,
    stack: &StackRow,
    mut node: NodeRow,
    count_pending: bool,
) -> Result<bool, EngineError> {
    let ran = node.server.is_some() && node.state != NodeState::Init;
    let already_deleted = node.action == Action::Delete && node.state == NodeState::Complete;
    if !node::is_deployment(&node) || !ran || already_deleted {
        return Ok(false);
    }
    if !node.record.actions.iter().any(|action| action == Action::Delete.as_str()) {
        return Ok(false);
    }
    let properties = match ctx.evaluate_properties(stack, &node) {
        Ok(properties) => properties,
        // The inputs no longer resolve (their producers are gone): run DELETE with none.
        Err(_) => deployment::delete_properties(),
    };
    let (Some(server), Some(config)) = (node.server.clone(), config_of(ctx, stack, &node)?) else { return Ok(false) };
    node.action = Action::Delete;
    node.generation = stack.generation;
    node.state = NodeState::Init;
    if count_pending {
        ctx.tx.add_pending(&stack.name, 1)?;
    }
    match deployment::publish(ctx, stack, node, &server, &config, &properties)? {
        Released::Nothing => {}
        Released::DeleteAction(node) => delete_action_done(ctx, stack, &node)?,
        // Not for a DELETE action; counted as done all the same.
        Released::Successors(_) => node_done(ctx, stack)?,
    }
    Ok(true)
}

/// A DELETE action finished (a signal, or NO_SIGNAL at once).
pub fn delete_action_done(ctx: &mut Context<'_>, stack: &StackRow, node: &NodeRow) -> Result<(), EngineError> {
    let Some(current) = ctx.tx.stack(&stack.name)? else { return Ok(()) };
    if current.action == Action::Delete {
        return deleted(ctx, &current, node);
    }
    forget_node(ctx, &current, node)?;
    node_done(ctx, &current)
}

/// One node of a traversal (either direction) is done; with the last one, the stack completes,
/// or a delete removes it.
pub fn node_done(ctx: &mut Context<'_>, stack: &StackRow) -> Result<(), EngineError> {
    match node::node_done(ctx, stack)? {
        Some(current) if current.action == Action::Delete => finish_delete(ctx, &current, DeleteActions::Run),
        Some(current) => node::complete_stack(ctx, current),
        None => Ok(()),
    }
}

/// Removes everything of a deleted stack but its events, unless a DELETE action failed.
fn finish_delete(ctx: &mut Context<'_>, stack: &StackRow, actions: DeleteActions) -> Result<(), EngineError> {
    let failed = actions == DeleteActions::Run
        && ctx
            .tx
            .nodes(&stack.name)?
            .iter()
            .any(|node| node.action == Action::Delete && node.state == NodeState::Failed);
    if failed {
        return node::fail_stack(ctx, &stack.name, stack.generation, "a DELETE deployment failed");
    }
    for node in ctx.tx.nodes(&stack.name)? {
        withdraw(ctx, stack, &node)?;
    }
    ctx.tx.delete_stack(&stack.name)?;
    let reason = "Stack DELETE completed successfully";
    ctx.event(&stack.name, &stack.name, &status(Action::Delete, State::Complete), reason)
}
