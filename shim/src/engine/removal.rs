//! Removing a server (`Service::remove_server`): refused while a stack still deploys to it, a
//! published deployment, an entry in its document, or a deployment not yet activated whose
//! `server` (or a group's `servers`) names it; otherwise the row goes, and with it the token
//! hash, in one transaction. After the commit, `Engine::forget_server` (transact) drops what memory holds
//! for it: dropping the cached document's watch sender ends the long-polls its agent holds.

use std::collections::BTreeSet;

use serde_json::Value;

use super::context::Context;
use super::error::EngineError;
use crate::store::{NodeRow, StackRow};
use crate::template::{Expr, ResourceType};

/// The transaction of a removal: 404 for an unknown server, 409 naming the stacks that use it.
pub(super) fn remove(ctx: &mut Context<'_>, name: &str) -> Result<(), EngineError> {
    if ctx.tx.server(name)?.is_none() {
        return Err(EngineError::NotFound { what: format!("server {name}") });
    }
    let stacks = users(ctx, name)?;
    if !stacks.is_empty() {
        let message = format!(
            "server {name} is used by stack(s) {}: delete them, or update them to deploy elsewhere, first",
            stacks.join(", ")
        );
        return Err(EngineError::InUse { message });
    }
    ctx.tx.delete_server(name)?;
    Ok(())
}

/// The stacks that deploy to `server`, now or once their deployments activate, ordered by name.
/// It reads every node of every stack: fine for an operator's command, never on a hot path.
fn users(ctx: &mut Context<'_>, server: &str) -> Result<Vec<String>, EngineError> {
    let mut stacks: BTreeSet<String> = ctx.tx.stacks_using_server(server)?.into_iter().collect();
    for stack in ctx.tx.stacks()? {
        if stacks.contains(&stack.name) {
            continue;
        }
        let nodes = ctx.tx.nodes(&stack.name)?;
        if nodes.iter().any(|node| names_server(ctx, &stack, node, server)) {
            stacks.insert(stack.name);
        }
    }
    Ok(stacks.into_iter().collect())
}

/// Whether a deployment's `server` property (a group's `servers` map) evaluates to `server`.
/// One that cannot be evaluated yet (it waits for an attribute) does not count: when it
/// activates, it fails naming the server that is not registered.
fn names_server(ctx: &mut Context<'_>, stack: &StackRow, node: &NodeRow, server: &str) -> bool {
    if !ResourceType::parse(&node.resource_type).is_some_and(|kind| kind.is_deployment()) {
        return false;
    }
    let Some(properties) = node.definition.get("properties") else { return false };
    for key in ["server", "servers"] {
        let Some(stored) = properties.get(key) else { continue };
        let Ok(expression) = Expr::from_json(stored) else { continue };
        let Ok(value) = ctx.evaluate(stack, &expression) else { continue };
        let named = match &value {
            Value::String(name) => name == server,
            Value::Object(members) => members.values().any(|member| member.as_str() == Some(server)),
            _ => false,
        };
        if named {
            return true;
        }
    }
    false
}
