//! The sweeper: every deadline (stack timeout, wait-condition timeout, a deployment group's
//! pause between batches, a large group's queued members) is a stored row (see `deadlines`),
//! and this loop fails whatever is still in progress when its row falls due, or releases the
//! group's next batch or next chunk of members. Because the deadlines live in the store, a
//! restarted shim enforces them all the same. A commit that queued members, or failed a
//! traversal whose rollback is due, wakes it at once; it starts that rollback (`rollback`).

use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::context::Context;
use super::deadlines::Deadline;
use super::error::EngineError;
use super::node;
use super::resources::{Activation, group};
use super::rollback;
use super::transact::Engine;
use super::traversal::forward;
use crate::store::{NodeState, Rollback, StackRow, Store};

/// How often the sweeper looks for due deadlines.
pub const SWEEP_INTERVAL: Duration = Duration::from_millis(500);

/// Runs until `shutdown`.
pub async fn run<S: Store>(engine: Engine<S>, shutdown: CancellationToken) {
    loop {
        tokio::select! {
            () = shutdown.cancelled() => return,
            () = tokio::time::sleep(SWEEP_INTERVAL) => {}
            // A transaction queued group members: release them now, not at the next tick.
            () = engine.inner.continuation.notified() => {}
        }
        match drain(&engine, &shutdown).await {
            Ok(0) => {}
            Ok(fired) => {
                engine.metrics().sweeper_fired(fired as u64);
                tracing::info!(fired, "deadlines acted on (timeouts, batch pauses, queued group members)");
            }
            Err(error) => tracing::error!(error = %crate::error_chain(&error), "sweeper pass failed"),
        }
    }
}

/// One sweep now, in its own transaction; returns how many deadlines fired (a deployment
/// group's queued members count as one, see `group::continue_release`).
pub async fn pass<S: Store>(engine: &Engine<S>) -> Result<usize, EngineError> {
    engine.transact(sweep).await
}

/// Sweeps, and goes on sweeping while a pass queued more group members, on one blocking thread:
/// each chunk's transaction starts as soon as the previous one committed, without waiting for
/// the runtime (busy answering the polls that commit woke) to schedule the next pass. Stops
/// between chunks at `shutdown`. Returns how many deadlines fired in all.
async fn drain<S: Store>(engine: &Engine<S>, shutdown: &CancellationToken) -> Result<usize, EngineError> {
    let engine = engine.clone();
    let shutdown = shutdown.clone();
    let worker = tokio::task::spawn_blocking(move || {
        let mut fired = 0;
        loop {
            let (count, continued) = engine.transact_blocking(|ctx| Ok((sweep(ctx)?, ctx.continued)))?;
            fired += count;
            if !continued || shutdown.is_cancelled() {
                return Ok(fired);
            }
        }
    });
    worker.await.map_err(|error| EngineError::Worker { detail: error.to_string() })?
}

/// Fails everything whose deadline passed; returns how many deadlines fired.
pub fn sweep(ctx: &mut Context<'_>) -> Result<usize, EngineError> {
    let due = Deadline::due(ctx)?;
    for deadline in &due {
        deadline.clear(ctx)?;
        fire(ctx, deadline)?;
    }
    Ok(due.len())
}

fn fire(ctx: &mut Context<'_>, deadline: &Deadline) -> Result<(), EngineError> {
    let Some(stack) = ctx.tx.stack(deadline.stack())? else { return Ok(()) };
    if deadline.generation() != stack.generation {
        return Ok(());
    }
    match deadline {
        // A failed traversal's row, due at once: its rollback starts.
        Deadline::Stack { .. } if stack.rollback == Rollback::Due => rollback::start_due(ctx, &stack),
        Deadline::Stack { .. } => {
            let reason =
                format!("Timed out: stack {} did not complete in time{}", stack.action, outstanding(ctx, &stack)?);
            node::fail_stack(ctx, &stack.name, stack.generation, &reason)
        }
        Deadline::Node { node: name, .. } => {
            let Some(node) = ctx.tx.node(&stack.name, name)? else { return Ok(()) };
            if node::resource_type(&node).is_some_and(|kind| kind.group_member().is_some()) {
                return batch_pause_ended(ctx, &stack, name);
            }
            if node.state != NodeState::InProgress {
                return Ok(());
            }
            let handle = node.record.handle.clone().unwrap_or_default();
            let count = node.record.count.unwrap_or(1);
            let received = ctx.tx.wait_signals(&stack.name, &handle)?;
            let reasons: Vec<&str> = received.iter().map(|signal| signal.reason.as_str()).collect();
            let reason =
                format!("WaitConditionTimeout: {} of {count} received - {}", received.len(), reasons.join(";"));
            let released = node::fail(ctx, &stack, node, &reason)?;
            forward::proceed(ctx, &stack, released)
        }
    }
}

/// What a timed-out traversal still waited for: `; still in progress: web on vm2, wait (and 3
/// more)`, the first ten of its nodes in progress (deployments with their servers); empty when
/// none is.
fn outstanding(ctx: &mut Context<'_>, stack: &StackRow) -> Result<String, EngineError> {
    const NAMED: usize = 10;
    let nodes = ctx.tx.nodes(&stack.name)?;
    let running: Vec<String> = nodes
        .iter()
        .filter(|node| node.state == NodeState::InProgress && node.generation == stack.generation)
        .map(|node| match &node.server {
            Some(server) => format!("{} on {server}", node.name),
            None => node.name.clone(),
        })
        .collect();
    if running.is_empty() {
        return Ok(String::new());
    }
    let more = match running.len().saturating_sub(NAMED) {
        0 => String::new(),
        more => format!(" (and {more} more)"),
    };
    Ok(format!("; still in progress: {}{more}", running[..running.len().min(NAMED)].join(", ")))
}

/// A deployment group's pause between batches ended: its next batch runs.
pub fn batch_pause_ended(ctx: &mut Context<'_>, stack: &StackRow, name: &str) -> Result<(), EngineError> {
    match group::pause_ended(ctx, stack, name)? {
        None => Ok(()),
        Some(Activation::Expanded { members, removed: _ }) => forward::settle(ctx, &stack.name, members),
        Some(Activation::Released(released)) => forward::proceed(ctx, stack, released),
    }
}
