//! Rollback, as Heat's: a create or update that fails (or is cancelled) with rollback enabled
//! converges back to what the stack ran before, a new traversal with the stack action ROLLBACK.
//! An update rolls back to the previous request (template, environment, files, parameters):
//! deployments whose definition the update changed run again with their previous config
//! (action UPDATE), resources the update added go (their DELETE actions run), resources the
//! update never reached are unchanged and run nothing. A create rolls back to the empty
//! template: everything it created goes. The failure marks the rollback due (`node::fail_stack`,
//! a deadline row due at once, so it is durable); the sweeper starts it here.

use super::context::Context;
use super::error::EngineError;
use super::node::status;
use super::requests;
use super::traversal::forward;
use crate::model::StackRequest;
use crate::store::{Action, Rollback, StackRow, State};

/// The template a failed create converges to (Heat's empty template).
const EMPTY_TEMPLATE: &str = "heat_template_version: 2013-05-23\n";

/// Starts the rollback of `stack`, whose traversal failed with its rollback due; anything else
/// is left alone (a later update took over, or the stack is gone).
pub fn start_due(ctx: &mut Context<'_>, stack: &StackRow) -> Result<(), EngineError> {
    let due = stack.state == State::Failed && stack.rollback == Rollback::Due;
    if !due || !matches!(stack.action, Action::Create | Action::Update) {
        return Ok(());
    }
    let (current, previous) = requests::stored(ctx, &stack.name)?;
    // The setting the stack had when it failed (a cancel may have forced this rollback).
    let disable_rollback = current.and_then(|request| request.disable_rollback).unwrap_or(false);
    let target = match (stack.action, previous) {
        (Action::Create, _) => StackRequest { template: EMPTY_TEMPLATE.into(), ..StackRequest::default() },
        (_, Some(previous)) => previous,
        (_, None) => {
            let reason = "Rollback failed: no previous template is stored for this stack (it was last created or \
                          updated by anneal-shim 0.2.0 or earlier)";
            return give_up(ctx, stack, disable_rollback, reason);
        }
    };
    let target = StackRequest { name: None, disable_rollback: Some(disable_rollback), ..target };
    let checked = match requests::check(ctx, &target, &stack.name, &stack.id) {
        Ok(checked) => checked,
        Err(EngineError::Template { problems }) => {
            let reason = format!("Rollback failed: the previous template is not valid now: {}", problems.join("; "));
            return give_up(ctx, stack, disable_rollback, &reason);
        }
        Err(other) => return Err(other),
    };
    if !ctx.planning() {
        tracing::info!(stack = %stack.name, from = %stack.action, "rolling back");
    }
    forward::update(ctx, &stack.name, &target, &checked, Action::Rollback)?;
    requests::record(ctx, &stack.name, &target, false)
}

/// The rollback cannot start: the stack ends ROLLBACK_FAILED with `reason`.
fn give_up(ctx: &mut Context<'_>, stack: &StackRow, disable_rollback: bool, reason: &str) -> Result<(), EngineError> {
    let mut stack = stack.clone();
    stack.action = Action::Rollback;
    stack.state = State::Failed;
    stack.rollback = Rollback::from_disable(disable_rollback);
    stack.status_reason = reason.to_string();
    stack.updated_at = ctx.now;
    ctx.tx.update_stack(&stack)?;
    ctx.event(&stack.name, &stack.name, &status(Action::Rollback, State::Failed), reason)
}
