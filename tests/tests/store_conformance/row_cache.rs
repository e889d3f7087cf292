//! What a call sees of its own writes through the row cache every backend's `Tx` is wrapped in
//! (shim/src/store/cache.rs): a stack's pending count changed several times in one call is
//! written once at its end, yet every read of the call (the row, the listing) sees each change;
//! a row written is read back as written; a row found absent and then inserted is found; node
//! writes held back until the call ends are seen by the backend's own reads of the call; and
//! none of it outlives a call whose work failed. A shared read (`node_shared`) is the row as it
//! was then: the call's later writes do not change what a reader still holds. A call that keeps
//! every row (a plan's) lists a stack's nodes from memory once it has read them, with its own
//! inserts, updates and deletes, and what it stores is the same.

use anneal_shim::store::{NodeRow, NodeState, Store, StoreError};

use crate::fixtures::{node_row, run, stack_row, with_stack};

crate::conformance!(one store:
    pending_counts_changed_in_a_call_are_seen_by_it_and_stored_once_at_its_end,
    a_stack_written_whole_overrides_the_counts_changed_before,
    a_failed_call_leaves_no_count_behind,
    rows_written_in_a_call_read_back_as_written,
    a_call_through_more_rows_than_the_cache_keeps_reads_each_as_written,
    node_writes_held_back_are_seen_by_every_read_of_the_call_and_kept_in_order,
    a_failed_call_leaves_no_held_back_node,
    a_shared_read_is_the_row_then_and_later_writes_leave_it_as_it_was,
    a_call_keeping_every_row_lists_its_own_writes_from_memory_and_stores_them,
);

/// More than the cache keeps of node rows (2,048): a 10,000-member group create goes through
/// that many in one call.
const MANY_NODES: usize = 5_000;

fn pending_counts_changed_in_a_call_are_seen_by_it_and_stored_once_at_its_end<S: Store>(store: &S) {
    with_stack(store);
    let seen = run(store, |tx| {
        let before = tx.stack("app")?.expect("the stack").pending;
        let first = tx.add_pending("app", 3)?;
        let second = tx.add_pending("app", -1)?;
        let row = tx.stack("app")?.expect("the stack").pending;
        let listed = tx.stacks()?.into_iter().find(|stack| stack.name == "app").expect("listed").pending;
        let third = tx.add_pending("app", 1)?;
        Ok((before, first, second, row, listed, third))
    });
    assert_eq!(seen, (0, 3, 2, 2, 2, 3), "every read of the call sees each change");
    assert_eq!(run(store, |tx| tx.stack("app")).expect("the stack").pending, 3, "stored at the end");
    // Without a cached row the count goes to the backend at once, and still adds up.
    assert_eq!(run(store, |tx| tx.add_pending("app", 2)), 5);
    assert_eq!(store.read(|tx| tx.stack("app")).unwrap().expect("the stack").pending, 5);
}

fn a_stack_written_whole_overrides_the_counts_changed_before<S: Store>(store: &S) {
    with_stack(store);
    run(store, |tx| {
        let mut row = tx.stack("app")?.expect("the stack");
        tx.add_pending("app", 4)?;
        row.pending = 7;
        row.generation += 1;
        tx.update_stack(&row)?;
        tx.add_pending("app", 1)
    });
    let stored = run(store, |tx| tx.stack("app")).expect("the stack");
    assert_eq!((stored.pending, stored.generation), (8, stack_row("app").generation + 1));
}

fn a_failed_call_leaves_no_count_behind<S: Store>(store: &S) {
    with_stack(store);
    let failed: Result<(), StoreError> = store.transaction(|tx| {
        tx.stack("app")?;
        tx.add_pending("app", 5)?;
        Err(StoreError::NotFound { kind: "test", key: "abandon".into() })
    });
    assert!(failed.is_err());
    assert_eq!(run(store, |tx| tx.stack("app")).expect("the stack").pending, 0);
}

fn rows_written_in_a_call_read_back_as_written<S: Store>(store: &S) {
    with_stack(store);
    let read_back = run(store, |tx| {
        let absent = tx.node("app", "web")?;
        let row = node_row("app", "web");
        tx.insert_node(&row)?;
        let inserted = tx.node("app", "web")?;
        let updated = NodeRow { state: NodeState::Complete, remaining: 0, ..row.clone() };
        tx.update_node(&updated)?;
        let after_update = tx.node("app", "web")?;
        let stale = NodeRow { status_reason: "stale".into(), ..updated.clone() };
        let written = tx.update_node_if(&stale, row.generation, NodeState::InProgress)?;
        let after_refusal = tx.node("app", "web")?;
        let remaining = tx.decrement_remaining("app", "web")?;
        tx.delete_node("app", "web")?;
        let deleted = tx.node("app", "web")?;
        Ok((
            absent,
            inserted == Some(row),
            after_update == Some(updated.clone()),
            written,
            after_refusal,
            remaining,
            deleted,
        ))
    });
    let (absent, inserted, updated, written, after_refusal, remaining, deleted) = read_back;
    assert!(absent.is_none() && inserted && updated, "absent, then as inserted, then as updated");
    assert!(!written, "the conditional write saw the stored state, not the one it was given");
    assert_eq!(after_refusal.map(|row| row.status_reason), Some(String::new()), "a refused write changes nothing");
    assert_eq!((remaining, deleted), (-1, None));
}

fn a_call_through_more_rows_than_the_cache_keeps_reads_each_as_written<S: Store>(store: &S) {
    with_stack(store);
    let names: Vec<String> = (0..MANY_NODES).map(|index| format!("member/{index:05}")).collect();
    let mismatches = run(store, |tx| {
        for name in &names {
            // Asked absent first, as a group's expansion does, then inserted.
            assert!(tx.node("app", name)?.is_none());
            tx.insert_node(&node_row("app", name))?;
        }
        for (index, name) in names.iter().enumerate().filter(|(index, _)| index % 2 == 0) {
            let row = NodeRow { remaining: index as i64, ..node_row("app", name) };
            tx.update_node(&row)?;
        }
        let mut mismatches = Vec::new();
        for (index, name) in names.iter().enumerate() {
            let expected = if index % 2 == 0 { index as i64 } else { node_row("app", name).remaining };
            let found = tx.node("app", name)?.map(|row| row.remaining);
            if found != Some(expected) {
                mismatches.push((name.clone(), found, expected));
            }
        }
        Ok(mismatches)
    });
    assert!(mismatches.is_empty(), "read back differently: {:?}", &mismatches[..mismatches.len().min(5)]);
    let stored = store.read(|tx| tx.nodes("app")).unwrap();
    assert_eq!(stored.len(), MANY_NODES);
}

/// The cache holds a node's writes back until the call ends (an insert then an update is one
/// INSERT); every statement of the call that reads or changes nodes itself must still see them.
fn node_writes_held_back_are_seen_by_every_read_of_the_call_and_kept_in_order<S: Store>(store: &S) {
    with_stack(store);
    let seen = run(store, |tx| {
        tx.insert_node(&node_row("app", "b"))?;
        tx.insert_node(&node_row("app", "a"))?;
        tx.update_node(&NodeRow { status_reason: "updated".into(), ..node_row("app", "b") })?;
        let by_hash = tx.node_by_signal_hash("signal-app-b")?.map(|row| row.status_reason);
        let listed: Vec<String> = tx.nodes("app")?.into_iter().map(|row| row.name).collect();
        tx.insert_node(&node_row("app", "c"))?;
        let using = tx.stacks_using_server("web1")?;
        tx.update_node(&NodeRow { remaining: 5, ..node_row("app", "c") })?;
        let remaining = tx.decrement_remaining("app", "c")?;
        tx.insert_node(&node_row("app", "d"))?;
        tx.update_node(&NodeRow { state: NodeState::Complete, ..node_row("app", "d") })?;
        let refused = tx.update_node_if(&node_row("app", "d"), 1, NodeState::InProgress)?;
        tx.insert_node(&node_row("app", "e"))?;
        Ok((by_hash, listed, using, remaining, refused))
    });
    let (by_hash, listed, using, remaining, refused) = seen;
    assert_eq!(by_hash.as_deref(), Some("updated"), "the lookup by signal token sees the held update");
    assert_eq!(listed, ["b", "a"], "the listing sees held inserts, in the order made");
    assert_eq!(using, ["app"]);
    assert_eq!(remaining, 4, "the counter goes down from the held update's value");
    assert!(!refused, "the conditional write compares with the held state (COMPLETE)");
    let stored: Vec<(String, String, i64)> = store
        .read(|tx| tx.nodes("app"))
        .unwrap()
        .into_iter()
        .map(|row| (row.name, row.status_reason, row.remaining))
        .collect();
    let expected = [("b", "updated", 2), ("a", "", 2), ("c", "", 4), ("d", "", 2), ("e", "", 2)];
    let expected: Vec<(String, String, i64)> =
        expected.iter().map(|(name, reason, remaining)| (name.to_string(), reason.to_string(), *remaining)).collect();
    assert_eq!(stored, expected, "stored at the end, in the order inserted");
    let d = store.read(|tx| tx.node("app", "d")).unwrap().expect("d");
    assert_eq!(d.state, NodeState::Complete);
}

fn a_failed_call_leaves_no_held_back_node<S: Store>(store: &S) {
    with_stack(store);
    let failed: Result<(), StoreError> = store.transaction(|tx| {
        tx.insert_node(&node_row("app", "web"))?;
        tx.update_node(&NodeRow { state: NodeState::Complete, ..node_row("app", "web") })?;
        Err(StoreError::NotFound { kind: "test", key: "abandon".into() })
    });
    assert!(failed.is_err());
    assert_eq!(store.read(|tx| tx.nodes("app")).unwrap(), Vec::new());
    // A second insert of a held row is refused as the backend refuses any duplicate.
    let duplicate = store.transaction(|tx| {
        tx.insert_node(&node_row("app", "web"))?;
        tx.insert_node(&node_row("app", "web"))
    });
    assert!(duplicate.is_err(), "{duplicate:?}");
    assert_eq!(store.read(|tx| tx.nodes("app")).unwrap(), Vec::new());
}

fn a_shared_read_is_the_row_then_and_later_writes_leave_it_as_it_was<S: Store>(store: &S) {
    with_stack(store);
    let seen = run(store, |tx| {
        tx.insert_node(&NodeRow { remaining: 3, ..node_row("app", "a") })?;
        let before = tx.node_shared("app", "a")?.expect("a");
        tx.update_node(&NodeRow { status_reason: "updated".into(), remaining: 3, ..node_row("app", "a") })?;
        // Held while the counter changes: the change must copy the row, not change this one.
        let updated = tx.node_shared("app", "a")?.expect("a");
        let remaining = tx.decrement_remaining("app", "a")?;
        let after = tx.node_shared("app", "a")?.expect("a");
        let copied = tx.node("app", "a")?.expect("a");
        let absent = tx.node_shared("app", "nothing")?;
        Ok((before, updated, remaining, after, copied, absent))
    });
    let (before, updated, remaining, after, copied, absent) = seen;
    assert_eq!((before.status_reason.as_str(), before.remaining), ("", 3), "as it was when read");
    assert_eq!((updated.status_reason.as_str(), updated.remaining), ("updated", 3), "as it was when read");
    assert_eq!(remaining, 2);
    assert_eq!((after.status_reason.as_str(), after.remaining), ("updated", 2), "a later read sees the writes");
    assert_eq!(copied, *after, "node and node_shared read the same row");
    assert!(absent.is_none());
    let stored = store.read(|tx| tx.node_shared("app", "a")).unwrap().expect("a");
    assert_eq!((stored.status_reason.as_str(), stored.remaining), ("updated", 2), "stored as written");
}

/// `keep_every_row` (a plan's call): after one listing, the stack's nodes are listed from the
/// rows held, in insertion order, with the call's inserts, updates (conditional or taken whole)
/// and deletes; a duplicate insert is still refused; committed, the rows are as written.
fn a_call_keeping_every_row_lists_its_own_writes_from_memory_and_stores_them<S: Store>(store: &S) {
    with_stack(store);
    run(store, |tx| {
        tx.insert_node(&node_row("app", "a"))?;
        tx.insert_node(&node_row("app", "b"))
    });
    let listed = |rows: Vec<NodeRow>| -> Vec<(String, String, i64)> {
        rows.into_iter().map(|row| (row.name, row.status_reason, row.remaining)).collect()
    };
    let seen = run(store, |tx| {
        tx.keep_every_row();
        let first = listed(tx.nodes("app")?);
        tx.insert_node(&node_row("app", "c"))?;
        tx.delete_node("app", "a")?;
        let written = tx.update_node_if(
            &NodeRow { status_reason: "y".into(), ..node_row("app", "b") },
            1,
            NodeState::InProgress,
        )?;
        let refused = tx.update_node_if(&node_row("app", "b"), 1, NodeState::Complete)?;
        tx.update_node_owned(NodeRow { status_reason: "y".into(), remaining: 9, ..node_row("app", "b") })?;
        let second = listed(tx.nodes("app")?);
        let shared: Vec<String> = tx.nodes_shared("app")?.iter().map(|row| row.name.clone()).collect();
        Ok((first, written, refused, second, shared))
    });
    let (first, written, refused, second, shared) = seen;
    let row = |name: &str, reason: &str, remaining: i64| (name.to_string(), reason.to_string(), remaining);
    assert_eq!(first, [row("a", "", 2), row("b", "", 2)]);
    assert!(written && !refused, "the conditional writes compare with the held row");
    assert_eq!(second, [row("b", "y", 9), row("c", "", 2)], "listed from memory with the call's writes");
    assert_eq!(shared, ["b", "c"]);
    assert_eq!(listed(store.read(|tx| tx.nodes("app")).unwrap()), second, "stored as listed");
    let duplicate = store.transaction(|tx| {
        tx.keep_every_row();
        tx.nodes("app")?;
        tx.insert_node(&node_row("app", "c"))
    });
    assert!(duplicate.is_err(), "a row known to be there is refused again: {duplicate:?}");
}
