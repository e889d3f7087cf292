//! Activation of a node once all its predecessors are complete, per resource type (a `match`
//! on `ResourceType`): configs and handles complete at once, deployments publish, wait
//! conditions start waiting, values compute, groups expand into member deployments. Work per activation is
//! proportional to the node's edges: nothing here reads the whole graph.

pub mod batches;
pub mod config;
pub mod deployment;
pub mod group;
pub mod server;
pub mod value;
pub mod wait;

pub use group::Activation;

use super::context::{Context, PropertiesError};
use super::error::EngineError;
use super::node;
use crate::store::{NodeRow, NodeState, StackRow};
use crate::template::ResourceType;

/// Activates node `name` if it is waiting in the stack's current traversal; `None` when there
/// was nothing to activate. Returns the stack as it was read, with what the activation did.
pub fn activate(
    ctx: &mut Context<'_>,
    stack_name: &str,
    name: &str,
) -> Result<Option<(StackRow, Activation)>, EngineError> {
    let Some(stack) = ctx.tx.stack(stack_name)? else { return Ok(None) };
    // Looked at before it is copied: a group's row (megabytes for thousands of members) is
    // offered here again as each of its members completes, and is not waiting then.
    let Some(node) = ctx.tx.node_shared(stack_name, name)? else { return Ok(None) };
    if node.state != NodeState::Init || node.generation != stack.generation {
        return Ok(None);
    }
    let activation = activate_node(ctx, &stack, std::sync::Arc::unwrap_or_clone(node))?;
    Ok(Some((stack, activation)))
}

fn activate_node(ctx: &mut Context<'_>, stack: &StackRow, node: NodeRow) -> Result<Activation, EngineError> {
    let properties = match ctx.evaluate_properties(stack, &node) {
        Ok(properties) => properties,
        Err(PropertiesError::OverBudget(reason)) => {
            return node::fail_over_limit(ctx, stack, node, &reason).map(Activation::from);
        }
        Err(PropertiesError::Failed(reason)) => return failed(ctx, stack, node, &reason),
    };
    let Some(kind) = node::resource_type(&node) else {
        let reason = format!("{} is not supported by this version of anneal-shim", node.resource_type);
        return failed(ctx, stack, node, &reason);
    };
    match kind {
        ResourceType::SoftwareConfig
        | ResourceType::StructuredConfig
        | ResourceType::SoftwareComponent
        | ResourceType::CloudConfig
        | ResourceType::MultipartMime => config::activate(ctx, stack, node, kind, &properties).map(Activation::from),
        ResourceType::WaitConditionHandle => wait::activate_handle(ctx, stack, node).map(Activation::from),
        ResourceType::WaitCondition => {
            wait::activate_wait_condition(ctx, stack, node, &properties).map(Activation::from)
        }
        ResourceType::SoftwareDeployment | ResourceType::StructuredDeployment => {
            deployment::activate(ctx, stack, node, &properties).map(Activation::from)
        }
        ResourceType::SoftwareDeploymentGroup | ResourceType::StructuredDeploymentGroup => {
            group::activate(ctx, stack, node, &properties)
        }
        ResourceType::None => value::activate_value(ctx, stack, node, &properties, false).map(Activation::from),
        ResourceType::Value => value::activate_value(ctx, stack, node, &properties, true).map(Activation::from),
        ResourceType::DeployedServer => server::activate(ctx, stack, node, &properties).map(Activation::from),
        ResourceType::RandomString => {
            value::activate_random_string(ctx, stack, node, &properties).map(Activation::from)
        }
    }
}

fn failed(ctx: &mut Context<'_>, stack: &StackRow, node: NodeRow, reason: &str) -> Result<Activation, EngineError> {
    node::fail(ctx, stack, node, reason).map(Activation::from)
}
