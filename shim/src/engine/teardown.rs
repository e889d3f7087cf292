//! Stack delete as a reverse traversal, as Heat deletes: a resource's DELETE action runs only
//! once every resource that depends on it is gone. Each node's counter becomes the number of its
//! dependents (its out-edges); a node whose counter is zero publishes its DELETE action (or, with
//! nothing to run, is gone at once) and, when done, decrements the counters of what it depends on.

use serde_json::Value;

use super::EngineError;
use super::context::Context;
use super::graph;
use crate::store::{NodeRow, StackRow};

/// Counts every node into the stack's pending work and starts with the nodes nothing depends on.
pub fn start(ctx: &mut Context<'_>, stack: &StackRow) -> Result<(), EngineError> {
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

/// A node's DELETE action finished: what it depends on may go now.
pub fn deleted(ctx: &mut Context<'_>, stack: &StackRow, node: &NodeRow) -> Result<(), EngineError> {
    let mut ready = Vec::new();
    release_dependencies(ctx, stack, node, &mut ready)?;
    drain(ctx, stack, ready)
}

fn drain(ctx: &mut Context<'_>, stack: &StackRow, mut ready: Vec<String>) -> Result<(), EngineError> {
    while let Some(name) = ready.pop() {
        let Some(node) = ctx.tx.node(&stack.name, &name)? else { continue };
        if super::lifecycle::publish_delete(ctx, stack, node.clone(), false)? {
            // Its signal continues the traversal (`deleted`).
            continue;
        }
        release_dependencies(ctx, stack, &node, &mut ready)?;
    }
    Ok(())
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
    graph::node_done(ctx, stack)
}

/// The nodes `node` has an edge from: the plan's dependencies it was stored with, and for a
/// deployment group its members.
fn dependencies(node: &NodeRow) -> Vec<String> {
    let names = |value: Option<&Value>| -> Vec<String> {
        value
            .and_then(Value::as_array)
            .map(|items| items.iter().filter_map(Value::as_str).map(str::to_string).collect())
            .unwrap_or_default()
    };
    let mut all = names(node.definition.get("requires"));
    all.extend(names(node.attributes.get("_members")));
    all.sort();
    all.dedup();
    all
}
