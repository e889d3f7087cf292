//! Deadlines as typed rows: a stack's own timeout, a wait condition's, and the end of a
//! deployment group's pause between batches, each for one traversal (generation) of its stack.
//! Whoever starts something with a timeout or a pause sets its deadline here; the sweeper reads
//! the due ones back and acts on what is still in progress (see `sweeper`). A node's deadline is
//! one row keyed by the node, whose type says which of the two it is.

use super::context::Context;
use super::error::EngineError;
use crate::store::{DeadlineRow, StackRow};

/// How many due deadlines one sweep takes.
const BATCH: usize = 200;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Deadline {
    /// The stack's traversal `generation` must be COMPLETE by then.
    Stack { stack: String, generation: u64 },
    /// Node `node`'s deadline: a wait condition must have its signals by then; a deployment
    /// group's pause between batches ends then, or (due at once) its queued members are next.
    Node { stack: String, node: String, generation: u64 },
}

impl Deadline {
    /// The timeout of the stack's current traversal.
    pub fn of_stack(stack: &StackRow) -> Deadline {
        Deadline::Stack { stack: stack.name.clone(), generation: stack.generation }
    }

    /// The timeout of wait condition `node` in the stack's current traversal.
    pub fn of_wait_condition(stack: &StackRow, node: &str) -> Deadline {
        Deadline::Node { stack: stack.name.clone(), node: node.to_string(), generation: stack.generation }
    }

    /// The end of deployment group `node`'s pause between batches in the current traversal.
    pub fn of_batch_pause(stack: &StackRow, node: &str) -> Deadline {
        Deadline::Node { stack: stack.name.clone(), node: node.to_string(), generation: stack.generation }
    }

    pub fn stack(&self) -> &str {
        match self {
            Deadline::Stack { stack, .. } | Deadline::Node { stack, .. } => stack,
        }
    }

    pub fn generation(&self) -> u64 {
        match self {
            Deadline::Stack { generation, .. } | Deadline::Node { generation, .. } => *generation,
        }
    }

    fn node(&self) -> Option<&str> {
        match self {
            Deadline::Stack { .. } => None,
            Deadline::Node { node, .. } => Some(node),
        }
    }

    /// Sets (or moves) the deadline to `due_at` (unix milliseconds).
    pub fn set(&self, ctx: &mut Context<'_>, due_at: u64) -> Result<(), EngineError> {
        let row = DeadlineRow {
            stack: self.stack().to_string(),
            node: self.node().map(str::to_string),
            generation: self.generation(),
            due_at,
        };
        Ok(ctx.tx.put_deadline(&row)?)
    }

    /// The deadline no longer applies (what it guarded finished).
    pub fn clear(&self, ctx: &mut Context<'_>) -> Result<(), EngineError> {
        Ok(ctx.tx.delete_deadline(self.stack(), self.node(), self.generation())?)
    }

    /// Deadlines due by now, earliest first, at most one sweep's batch.
    pub fn due(ctx: &mut Context<'_>) -> Result<Vec<Deadline>, EngineError> {
        let rows = ctx.tx.due_deadlines(ctx.now, BATCH)?;
        Ok(rows.into_iter().map(Deadline::from_row).collect())
    }

    fn from_row(row: DeadlineRow) -> Deadline {
        match row.node {
            None => Deadline::Stack { stack: row.stack, generation: row.generation },
            Some(node) => Deadline::Node { stack: row.stack, node, generation: row.generation },
        }
    }
}
