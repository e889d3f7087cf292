//! `RowCache`: the `Tx` every backend's transaction is seen through. It keeps the stack, node
//! and server rows read in one transaction call, kept up to date by that call's own writes, and
//! passes everything else to the backend's `Tx`. A signal reads its stack's row several times
//! (the signal, each release, each activation), an activation reads the config node twice and a
//! group's members each read it again, and a release reads its server's row to activate the
//! deployment and again to publish the document: once is enough. Sound because nothing else writes those
//! rows while the call runs (SQLite's write lock; PostgreSQL's write lock, see `postgres`).
//!
//! Node writes are held back until the call ends or something reads nodes from the backend: a
//! deployment is inserted, then marked IN_PROGRESS when it is published, and a group member
//! went through both for each of its thousands of members. Held back, the two are one INSERT.
//! A conditional write (`update_node_if`) of a row held is checked on it and held back too.
//!
//! A call that is rolled back anyway (a plan) asks to keep every row (`keep_every_row`): no
//! bound, and once it has listed a stack's nodes it lists them again from memory, with its own
//! inserts and deletes, sending no held write.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use indexmap::IndexMap;

use crate::store::{
    DeadlineRow, EntryRow, EntryText, EventRow, HistoryPruned, HistoryRetention, NodeRow, NodeState, ServerRow,
    StackRow, StoreError, StoredRequests, Tx, UiSessionRow, WaitSignalRow,
};

/// At most this many node rows (and as many server rows) are kept; past it the map starts
/// over. Every write reaches the backend at once, so forgetting is always sound, and what a
/// call reads again is the rows it touched last (a group's config node, the member just
/// inserted), not the thousands a large group create went through: caching all of those held
/// a 10,000-member create's every row in memory at once (in-process peak 94 MB, 49 MB bounded).
const ROW_LIMIT: usize = 2048;

pub(crate) struct RowCache<T> {
    backend: T,
    stack_rows: HashMap<String, StackRow>,
    /// `None`: read and found absent (a group's expansion asks before it inserts each member).
    /// Shared, so that a reader that changes nothing (`node_shared`) takes no copy.
    node_rows: HashMap<(String, String), Option<Arc<NodeRow>>>,
    server_rows: HashMap<String, ServerRow>,
    /// Changes of a cached stack's pending count not yet written: a signal that releases k
    /// successors changes it k + 1 times, and one UPDATE at the end (`finish`) is enough.
    pending_deltas: HashMap<String, i64>,
    /// Node writes not yet sent, in the order first made (so inserts keep their `seq` order).
    /// Each key's row is the one in `node_rows`, which is not cleared while any is pending.
    pending_nodes: IndexMap<(String, String), PendingNode>,
    /// The stacks whose graph this call wrote (`Tx::changed_stacks`).
    changed_stacks: BTreeSet<String>,
    /// `Tx::keep_every_row`: no `ROW_LIMIT`, and the rows `nodes` reads are kept too.
    unbounded: bool,
    /// With `unbounded`, the stacks whose every node row `node_rows` holds (read once by
    /// `nodes`, then kept by this call's own inserts and deletes), with their names in insertion
    /// order: `nodes` answers them from memory, with no write sent.
    complete: HashMap<String, Vec<String>>,
}

/// What a held-back node write sends: an INSERT for a row the backend has not seen yet, an
/// UPDATE for one it has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PendingNode {
    Insert,
    Update,
}

impl<T: Tx> RowCache<T> {
    pub(crate) fn new(backend: T) -> RowCache<T> {
        RowCache {
            backend,
            stack_rows: HashMap::new(),
            node_rows: HashMap::new(),
            server_rows: HashMap::new(),
            pending_deltas: HashMap::new(),
            pending_nodes: IndexMap::new(),
            changed_stacks: BTreeSet::new(),
            unbounded: false,
            complete: HashMap::new(),
        }
    }

    /// Notes that `stack`'s graph changed in this call.
    fn stack_changed(&mut self, stack: &str) {
        if !self.changed_stacks.contains(stack) {
            self.changed_stacks.insert(stack.to_string());
        }
    }

    /// Writes what the cache still holds back (the pending counts); the backend calls it after
    /// the work succeeded and before it commits.
    pub(crate) fn finish(&mut self) -> Result<(), StoreError> {
        self.flush_nodes()?;
        for (stack, delta) in std::mem::take(&mut self.pending_deltas) {
            if delta != 0 {
                self.backend.add_pending(&stack, delta)?;
            }
        }
        Ok(())
    }

    /// The backend, once `finish` has run.
    pub(crate) fn into_backend(self) -> T {
        self.backend
    }

    /// Sends the held-back node writes, in the order they were made.
    fn flush_nodes(&mut self) -> Result<(), StoreError> {
        for (key, kind) in std::mem::take(&mut self.pending_nodes) {
            let Some(Some(row)) = self.node_rows.get(&key) else {
                unreachable!("a pending node write's row is kept until it is sent")
            };
            match kind {
                PendingNode::Insert => self.backend.insert_node(row)?,
                PendingNode::Update => self.backend.update_node(row)?,
            }
        }
        Ok(())
    }

    /// Flushes first when `key` has a write pending (the backend is about to read or change
    /// that row itself).
    fn flush_if_pending(&mut self, key: &(String, String)) -> Result<(), StoreError> {
        if self.pending_nodes.contains_key(key) {
            self.flush_nodes()?;
        }
        Ok(())
    }

    /// Holds `row` (under `key`) back as a write of `kind`; a row already pending keeps its
    /// kind (an INSERT not yet sent inserts the newest row).
    fn hold_node(&mut self, key: (String, String), row: &NodeRow, kind: PendingNode) -> Result<(), StoreError> {
        self.keep_node(key.clone(), Some(row.clone()))?;
        self.pending_nodes.entry(key).or_insert(kind);
        Ok(())
    }

    fn keep_node(&mut self, key: (String, String), row: Option<NodeRow>) -> Result<(), StoreError> {
        self.keep_shared(key, row.map(Arc::new))
    }

    fn keep_shared(&mut self, key: (String, String), row: Option<Arc<NodeRow>>) -> Result<(), StoreError> {
        if self.node_rows.len() >= ROW_LIMIT && !self.unbounded {
            // The pending writes' rows live in the map: send them before it starts over.
            self.flush_nodes()?;
            self.node_rows.clear();
        }
        self.node_rows.insert(key, row);
        Ok(())
    }

    fn keep_server(&mut self, row: ServerRow) {
        if self.server_rows.len() >= ROW_LIMIT {
            self.server_rows.clear();
        }
        self.server_rows.insert(row.name.clone(), row);
    }
}

impl<T: Tx> Tx for RowCache<T> {
    fn insert_server(&mut self, row: &ServerRow) -> Result<bool, StoreError> {
        self.server_rows.remove(&row.name);
        self.backend.insert_server(row)
    }
    fn server(&mut self, name: &str) -> Result<Option<ServerRow>, StoreError> {
        if let Some(row) = self.server_rows.get(name) {
            return Ok(Some(row.clone()));
        }
        let row = self.backend.server(name)?;
        if let Some(row) = &row {
            self.keep_server(row.clone());
        }
        Ok(row)
    }
    fn server_by_token_hash(&mut self, hash: &str) -> Result<Option<ServerRow>, StoreError> {
        self.backend.server_by_token_hash(hash)
    }
    fn servers(&mut self) -> Result<Vec<ServerRow>, StoreError> {
        let rows = self.backend.servers()?;
        // A group over every server lists them, then reads each member's: once is enough.
        for row in rows.iter().take(ROW_LIMIT) {
            self.keep_server(row.clone());
        }
        Ok(rows)
    }
    fn document_versions(&mut self) -> Result<Vec<(String, u64)>, StoreError> {
        self.backend.document_versions()
    }
    fn set_server_document(
        &mut self,
        name: &str,
        version: u64,
        body: &str,
        published_at: u64,
    ) -> Result<(), StoreError> {
        self.backend.set_server_document(name, version, body, published_at)?;
        if let Some(row) = self.server_rows.get_mut(name) {
            row.metadata_version = version;
            body.clone_into(&mut row.metadata_body);
            row.published_at = published_at;
        }
        Ok(())
    }
    fn touch_server(&mut self, name: &str, at: u64) -> Result<(), StoreError> {
        self.backend.touch_server(name, at)?;
        if let Some(row) = self.server_rows.get_mut(name) {
            row.last_seen = Some(at);
        }
        Ok(())
    }
    fn rotate_server_token(
        &mut self,
        name: &str,
        new_hash: &str,
        previous_expires_at: u64,
    ) -> Result<bool, StoreError> {
        self.server_rows.remove(name);
        self.backend.rotate_server_token(name, new_hash, previous_expires_at)
    }
    fn server_by_previous_token_hash(&mut self, hash: &str) -> Result<Option<(String, u64)>, StoreError> {
        self.backend.server_by_previous_token_hash(hash)
    }
    fn delete_server(&mut self, name: &str) -> Result<bool, StoreError> {
        self.flush_nodes()?;
        // Whatever the deletion cascades to, no node read before it is trusted after it.
        self.node_rows.clear();
        self.complete.clear();
        self.server_rows.remove(name);
        self.backend.delete_server(name)
    }
    fn stacks_using_server(&mut self, server: &str) -> Result<Vec<String>, StoreError> {
        self.flush_nodes()?;
        self.backend.stacks_using_server(server)
    }
    fn put_entry_text(&mut self, server: &str, entry: &EntryText) -> Result<(), StoreError> {
        self.backend.put_entry_text(server, entry)
    }
    fn remove_entry(&mut self, server: &str, stack: &str, node: &str) -> Result<(), StoreError> {
        self.backend.remove_entry(server, stack, node)
    }
    fn entry_bytes(&mut self, server: &str, stack: &str, node: &str) -> Result<Option<u64>, StoreError> {
        self.backend.entry_bytes(server, stack, node)
    }
    fn stack_entry_bytes(&mut self, stack: &str) -> Result<u64, StoreError> {
        self.backend.stack_entry_bytes(stack)
    }
    fn entries(&mut self, server: &str) -> Result<Vec<EntryRow>, StoreError> {
        self.backend.entries(server)
    }
    fn entry_texts(&mut self, server: &str) -> Result<Vec<EntryText>, StoreError> {
        self.backend.entry_texts(server)
    }
    fn insert_stack(&mut self, row: &StackRow, template: &str) -> Result<bool, StoreError> {
        self.stack_rows.remove(&row.name);
        self.pending_deltas.remove(&row.name);
        self.stack_changed(&row.name);
        self.backend.insert_stack(row, template)
    }
    fn stack(&mut self, name: &str) -> Result<Option<StackRow>, StoreError> {
        if let Some(row) = self.stack_rows.get(name) {
            return Ok(Some(row.clone()));
        }
        let row = self.backend.stack(name)?;
        if let Some(row) = &row {
            self.stack_rows.insert(name.to_string(), row.clone());
        }
        Ok(row)
    }
    fn stack_template(&mut self, name: &str) -> Result<Option<String>, StoreError> {
        self.backend.stack_template(name)
    }
    fn set_stack_template(&mut self, name: &str, template: &str) -> Result<(), StoreError> {
        self.backend.set_stack_template(name, template)
    }
    fn stack_requests(&mut self, name: &str) -> Result<StoredRequests, StoreError> {
        self.backend.stack_requests(name)
    }
    fn set_stack_requests(&mut self, name: &str, requests: &StoredRequests) -> Result<(), StoreError> {
        self.backend.set_stack_requests(name, requests)
    }
    fn stacks(&mut self) -> Result<Vec<StackRow>, StoreError> {
        // The listing is read from the backend: it must hold every count first.
        self.finish()?;
        self.backend.stacks()
    }
    fn update_stack(&mut self, row: &StackRow) -> Result<(), StoreError> {
        // The row written carries its own pending count (as it replaced whatever the backend
        // held): the deltas not yet written are part of it or overwritten by it, as they were
        // when every delta was written at once.
        self.stack_rows.remove(&row.name);
        self.pending_deltas.remove(&row.name);
        self.stack_changed(&row.name);
        self.backend.update_stack(row)
    }
    fn add_pending(&mut self, stack: &str, delta: i64) -> Result<i64, StoreError> {
        // Exact under the write lock: nothing else changes the count before `finish`.
        if let Some(row) = self.stack_rows.get_mut(stack) {
            row.pending += delta;
            *self.pending_deltas.entry(stack.to_string()).or_insert(0) += delta;
            return Ok(row.pending);
        }
        self.backend.add_pending(stack, delta)
    }
    fn delete_stack(&mut self, name: &str) -> Result<(), StoreError> {
        self.flush_nodes()?;
        self.stack_rows.remove(name);
        self.pending_deltas.remove(name);
        self.node_rows.retain(|(stack, _), _| stack != name);
        self.complete.remove(name);
        self.stack_changed(name);
        self.backend.delete_stack(name)
    }
    fn insert_node(&mut self, row: &NodeRow) -> Result<(), StoreError> {
        let key = (row.stack.clone(), row.name.clone());
        // A second INSERT of a pending row goes to the backend, which refuses it as before.
        self.flush_if_pending(&key)?;
        self.stack_changed(&row.stack);
        if let Some(names) = self.complete.get_mut(&row.stack) {
            if let Some(Some(_)) = self.node_rows.get(&key) {
                // A row known to be there: the backend refuses the INSERT, as it would later.
                self.backend.insert_node(row)?;
                return self.keep_node(key, Some(row.clone()));
            }
            names.push(row.name.clone());
        }
        // The stored row is the row written (its `seq` is not part of it): no need to read it.
        self.hold_node(key, row, PendingNode::Insert)
    }
    fn node(&mut self, stack: &str, name: &str) -> Result<Option<NodeRow>, StoreError> {
        Ok(self.node_shared(stack, name)?.map(Arc::unwrap_or_clone))
    }
    fn node_shared(&mut self, stack: &str, name: &str) -> Result<Option<Arc<NodeRow>>, StoreError> {
        let key = (stack.to_string(), name.to_string());
        if let Some(row) = self.node_rows.get(&key) {
            return Ok(row.clone());
        }
        let row = self.backend.node(stack, name)?.map(Arc::new);
        self.keep_shared(key, row.clone())?;
        Ok(row)
    }
    fn nodes(&mut self, stack: &str) -> Result<Vec<NodeRow>, StoreError> {
        if self.complete.contains_key(stack) {
            return Ok(self.nodes_shared(stack)?.into_iter().map(Arc::unwrap_or_clone).collect());
        }
        self.flush_nodes()?;
        let rows = self.backend.nodes(stack)?;
        if self.unbounded {
            // Every pending write was just sent, so a row read is the row this call holds.
            for row in &rows {
                let key = (row.stack.clone(), row.name.clone());
                self.node_rows.entry(key).or_insert_with(|| Some(Arc::new(row.clone())));
            }
            self.complete.insert(stack.to_string(), rows.iter().map(|row| row.name.clone()).collect());
        }
        Ok(rows)
    }
    fn nodes_shared(&mut self, stack: &str) -> Result<Vec<Arc<NodeRow>>, StoreError> {
        if let Some(names) = self.complete.get(stack) {
            let held = |name: &String| self.node_rows.get(&(stack.to_string(), name.clone())).cloned().flatten();
            return Ok(names.iter().filter_map(held).collect());
        }
        Ok(self.nodes(stack)?.into_iter().map(Arc::new).collect())
    }
    fn update_node(&mut self, row: &NodeRow) -> Result<(), StoreError> {
        // Held back only when the row is known to exist (read or written by this call); the
        // backend answers an UPDATE of any other, and refuses one of a missing row.
        let key = (row.stack.clone(), row.name.clone());
        self.stack_changed(&row.stack);
        if let Some(Some(_)) = self.node_rows.get(&key) {
            return self.hold_node(key, row, PendingNode::Update);
        }
        self.backend.update_node(row)?;
        self.keep_node(key, Some(row.clone()))
    }
    fn update_node_owned(&mut self, row: NodeRow) -> Result<(), StoreError> {
        let key = (row.stack.clone(), row.name.clone());
        // As `update_node`: held back only when the row is known to exist.
        if !matches!(self.node_rows.get(&key), Some(Some(_))) {
            return self.update_node(&row);
        }
        self.stack_changed(&row.stack);
        self.keep_shared(key.clone(), Some(Arc::new(row)))?;
        self.pending_nodes.entry(key).or_insert(PendingNode::Update);
        Ok(())
    }
    fn update_node_if(&mut self, row: &NodeRow, generation: u64, state: NodeState) -> Result<bool, StoreError> {
        let key = (row.stack.clone(), row.name.clone());
        // A row this call holds is the stored row with this call's writes: the condition is
        // checked on it, and the write held back with the others.
        if let Some(held) = self.node_rows.get(&key) {
            let holds = held.as_ref().is_some_and(|held| held.generation == generation && held.state == state);
            if !holds {
                return Ok(false);
            }
            self.stack_changed(&row.stack);
            self.hold_node(key, row, PendingNode::Update)?;
            return Ok(true);
        }
        let written = self.backend.update_node_if(row, generation, state)?;
        if written {
            self.stack_changed(&row.stack);
            self.keep_node(key, Some(row.clone()))?;
        }
        Ok(written)
    }
    fn node_by_signal_hash(&mut self, hash: &str) -> Result<Option<NodeRow>, StoreError> {
        self.flush_nodes()?;
        let row = self.backend.node_by_signal_hash(hash)?;
        // The signal's own node is read again when its successors resolve their inputs.
        if let Some(row) = &row {
            self.keep_node((row.stack.clone(), row.name.clone()), Some(row.clone()))?;
        }
        Ok(row)
    }
    fn retire_signal_hash(&mut self, hash: &str, stack: &str, node: &str) -> Result<(), StoreError> {
        self.backend.retire_signal_hash(hash, stack, node)
    }
    fn is_retired_signal_hash(&mut self, hash: &str) -> Result<bool, StoreError> {
        self.backend.is_retired_signal_hash(hash)
    }
    fn decrement_remaining(&mut self, stack: &str, name: &str) -> Result<i64, StoreError> {
        let key = (stack.to_string(), name.to_string());
        // A row this call holds already is decremented here and written once with the call's
        // other writes: a group of thousands of members whose batch completes in one call (a
        // plan's) would otherwise rewrite the group's large row once per member.
        if let Some(Some(row)) = self.node_rows.get_mut(&key) {
            // In place: no copy of the row unless a reader still shares it.
            let row = Arc::make_mut(row);
            row.remaining -= 1;
            let remaining = row.remaining;
            self.pending_nodes.entry(key).or_insert(PendingNode::Update);
            self.stack_changed(stack);
            return Ok(remaining);
        }
        let remaining = self.backend.decrement_remaining(stack, name)?;
        if let Some(Some(row)) = self.node_rows.get_mut(&key) {
            Arc::make_mut(row).remaining = remaining;
        }
        Ok(remaining)
    }
    fn delete_node(&mut self, stack: &str, name: &str) -> Result<(), StoreError> {
        let key = (stack.to_string(), name.to_string());
        self.flush_if_pending(&key)?;
        self.node_rows.remove(&key);
        if let Some(names) = self.complete.get_mut(stack) {
            names.retain(|held| held != name);
        }
        self.stack_changed(stack);
        self.backend.delete_node(stack, name)
    }
    fn insert_edge(&mut self, stack: &str, from: &str, to: &str) -> Result<(), StoreError> {
        self.stack_changed(stack);
        self.backend.insert_edge(stack, from, to)
    }
    fn successors(&mut self, stack: &str, from: &str) -> Result<Vec<String>, StoreError> {
        self.backend.successors(stack, from)
    }
    fn delete_edges(&mut self, stack: &str) -> Result<(), StoreError> {
        self.stack_changed(stack);
        self.backend.delete_edges(stack)
    }
    fn upsert_wait_signal(&mut self, row: &WaitSignalRow) -> Result<bool, StoreError> {
        self.backend.upsert_wait_signal(row)
    }
    fn wait_signals(&mut self, stack: &str, handle: &str) -> Result<Vec<WaitSignalRow>, StoreError> {
        self.backend.wait_signals(stack, handle)
    }
    fn wait_signal_success(&mut self, stack: &str, handle: &str, signal_id: &str) -> Result<Option<bool>, StoreError> {
        self.backend.wait_signal_success(stack, handle, signal_id)
    }
    fn append_event(
        &mut self,
        stack: &str,
        time: u64,
        resource: &str,
        status: &str,
        reason: &str,
    ) -> Result<u64, StoreError> {
        self.backend.append_event(stack, time, resource, status, reason)
    }
    fn events(&mut self, stack: &str) -> Result<Vec<EventRow>, StoreError> {
        self.backend.events(stack)
    }
    fn prune_history(&mut self, retention: &HistoryRetention, now: u64) -> Result<HistoryPruned, StoreError> {
        self.backend.prune_history(retention, now)
    }
    fn put_deadline(&mut self, row: &DeadlineRow) -> Result<(), StoreError> {
        self.backend.put_deadline(row)
    }
    fn delete_deadline(&mut self, stack: &str, node: Option<&str>, generation: u64) -> Result<(), StoreError> {
        self.backend.delete_deadline(stack, node, generation)
    }
    fn due_deadlines(&mut self, now: u64, limit: usize) -> Result<Vec<DeadlineRow>, StoreError> {
        self.backend.due_deadlines(now, limit)
    }
    fn insert_ui_session(&mut self, row: &UiSessionRow) -> Result<bool, StoreError> {
        self.backend.insert_ui_session(row)
    }
    fn ui_session(&mut self, key: &str) -> Result<Option<UiSessionRow>, StoreError> {
        self.backend.ui_session(key)
    }
    fn delete_ui_session(&mut self, key: &str) -> Result<bool, StoreError> {
        self.backend.delete_ui_session(key)
    }
    fn prune_ui_sessions(&mut self, now: u64) -> Result<usize, StoreError> {
        self.backend.prune_ui_sessions(now)
    }
    fn changed_stacks(&self) -> Vec<String> {
        self.changed_stacks.iter().cloned().collect()
    }
    fn keep_every_row(&mut self) {
        self.unbounded = true;
    }
}
