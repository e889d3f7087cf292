//! The sweeper: every deadline (stack timeout, wait-condition timeout) is a stored row, and this
//! loop fails whatever is still in progress when its row falls due. Because the deadlines live in
//! the store, a restarted shim enforces them all the same.

use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::context::{Context, STATE_IN_PROGRESS};
use super::{Engine, EngineError, graph};
use crate::store::{DeadlineRow, StackRow, Store};

/// How often the sweeper looks for due deadlines.
pub const SWEEP_INTERVAL: Duration = Duration::from_millis(500);
const BATCH: usize = 200;

pub fn stack_deadline_key(stack: &StackRow) -> String {
    format!("stack/{}/{}", stack.name, stack.generation)
}

pub fn wait_deadline_key(stack: &StackRow, node: &str) -> String {
    format!("wait/{}/{}/{}", stack.name, node, stack.generation)
}

/// Runs until `shutdown`.
pub async fn run<S: Store>(engine: Engine<S>, shutdown: CancellationToken) {
    loop {
        tokio::select! {
            () = shutdown.cancelled() => return,
            () = tokio::time::sleep(SWEEP_INTERVAL) => {}
        }
        match engine.transact(sweep).await {
            Ok(0) => {}
            Ok(fired) => tracing::info!(fired, "deadlines enforced"),
            Err(error) => tracing::error!(error = %crate::engine::error_chain(&error), "sweeper pass failed"),
        }
    }
}

/// Fails everything whose deadline passed; returns how many deadlines fired.
pub fn sweep(ctx: &mut Context<'_>) -> Result<usize, EngineError> {
    let due = ctx.tx.due_deadlines(ctx.now, BATCH)?;
    for deadline in &due {
        ctx.tx.delete_deadline(&deadline.key)?;
        fire(ctx, deadline)?;
    }
    Ok(due.len())
}

fn fire(ctx: &mut Context<'_>, deadline: &DeadlineRow) -> Result<(), EngineError> {
    let Some(stack) = ctx.tx.stack(&deadline.stack)? else { return Ok(()) };
    let generation = deadline.key.rsplit('/').next().and_then(|text| text.parse::<u64>().ok());
    if generation != Some(stack.generation) {
        return Ok(());
    }
    match &deadline.node {
        None => {
            let reason = format!("Timed out: stack {} did not complete in time", stack.action);
            graph::fail_stack(ctx, &stack.name, stack.generation, &reason)
        }
        Some(name) => {
            let Some(node) = ctx.tx.node(&stack.name, name)? else { return Ok(()) };
            if node.state != STATE_IN_PROGRESS {
                return Ok(());
            }
            let handle =
                node.attributes.get("_handle").and_then(serde_json::Value::as_str).unwrap_or_default().to_string();
            let count = node.attributes.get("_count").and_then(serde_json::Value::as_u64).unwrap_or(1);
            let received = ctx.tx.wait_signals(&stack.name, &handle)?;
            let reasons: Vec<&str> = received.iter().map(|signal| signal.reason.as_str()).collect();
            let reason =
                format!("WaitConditionTimeout: {} of {count} received - {}", received.len(), reasons.join(";"));
            graph::fail(ctx, &stack, node, &reason)
        }
    }
}
