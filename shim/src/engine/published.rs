//! What a stack's deployments publish into servers' documents (each entry a copy of its
//! config and inputs) and the limit on it per stack (`--max-deployment-bytes-per-stack`).
//! Without the limit a small template stores its config once per deployment or group member:
//! 40 deployments of one 16 MiB config (a 1.5 MB request) stored 630 MB and took the shim to
//! 2.1 GB. Counting costs one query per stack and transaction: the stack's total is read once
//! (the store keeps each entry's size, so no text is read), then each entry written adds its
//! size; only when that count (which counts a replaced entry twice) passes the limit is the
//! total read again, exactly, before the entry is refused.

use crate::engine::context::{Context, Publication};
use crate::engine::error::EngineError;
use crate::store::{EntryRow, EntryText};

/// What `Context::put_entry` did.
#[derive(Debug, Clone, PartialEq)]
pub enum EntryWrite {
    Written,
    /// Not written: the stack's entries would pass its limit (the reason says so).
    OverLimit(String),
}

impl Context<'_> {
    /// Puts `row` in its server's entries, within its stack's limit, and keeps its text for
    /// the document rendered at the end of this transaction (which then reads nothing back).
    pub fn put_entry(&mut self, row: &EntryRow) -> Result<EntryWrite, EngineError> {
        let text = EntryText::of(row)?;
        if let Some(reason) = self.over_deployment_bytes(row, text.entry.len() as u64)? {
            return Ok(EntryWrite::OverLimit(reason));
        }
        let previous = match self.publications {
            Some(_) => {
                self.tx.entries(&row.server)?.into_iter().find(|old| old.stack == row.stack && old.node == row.node)
            }
            None => None,
        };
        self.tx.put_entry_text(&row.server, &text)?;
        self.changed(&row.server, &row.stack, &row.node, Some(text));
        if let Some(publications) = &mut self.publications {
            publications.push(Publication {
                stack: row.stack.clone(),
                node: row.node.clone(),
                server: row.server.clone(),
                entry: row.entry.clone(),
                previous: previous.map(|old| old.entry),
            });
        }
        Ok(EntryWrite::Written)
    }

    /// Takes `node`'s entry out of `server`'s document (the stack's count keeps it until it
    /// is read again: it may only overstate).
    pub fn remove_entry(&mut self, server: &str, stack: &str, node: &str) -> Result<(), EngineError> {
        self.tx.remove_entry(server, stack, node)?;
        self.changed(server, stack, node, None);
        Ok(())
    }

    /// Why `row`, of `bytes`, would take its stack past the limit; `None` counts it.
    fn over_deployment_bytes(&mut self, row: &EntryRow, bytes: u64) -> Result<Option<String>, EngineError> {
        let limit = self.limits.max_deployment_bytes;
        if limit.0.is_none() {
            return Ok(None);
        }
        let known = || self.known_entry_bytes?.lock().ok()?.get(&row.stack).copied();
        let counted = match self.published.get(&row.stack).copied().or_else(known) {
            Some(counted) => counted,
            None => self.tx.stack_entry_bytes(&row.stack)?,
        };
        let mut total = counted.saturating_add(bytes);
        if !limit.allows(total) {
            let stored = self.tx.stack_entry_bytes(&row.stack)?;
            let replaced = self.tx.entry_bytes(&row.server, &row.stack, &row.node)?.unwrap_or(0);
            total = stored.saturating_sub(replaced).saturating_add(bytes);
            if !limit.allows(total) {
                self.published.insert(row.stack.clone(), stored);
                return Ok(Some(limit.exceeded(total)));
            }
        }
        self.published.insert(row.stack.clone(), total);
        Ok(None)
    }
}
