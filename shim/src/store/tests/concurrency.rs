//! The atomic counters and transaction isolation under contention: threads sharing one store,
//! and two stores (two connections, as two processes would have) on the same file.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::thread;

use super::{TEMPLATE, node_row, run, stack_row};
use crate::store::*;

const THREADS: usize = 4;
const ROUNDS: usize = 25;

fn opened_twice() -> (tempfile::TempDir, SqliteStore, SqliteStore) {
    let directory = tempfile::tempdir().unwrap();
    let path = directory.path().join("shim.db");
    let first = SqliteStore::open(&path).unwrap();
    let second = SqliteStore::open(&path).unwrap();
    run(&first, |tx| tx.insert_stack(&stack_row("app"), TEMPLATE));
    (directory, first, second)
}

#[test]
fn decrement_remaining_from_many_threads() {
    let store = Arc::new(SqliteStore::open_in_memory().unwrap());
    let total = i64::try_from(THREADS * ROUNDS).unwrap();
    run(&store, |tx| {
        tx.insert_stack(&stack_row("app"), TEMPLATE)?;
        tx.insert_node(&NodeRow { remaining: total, ..node_row("app", "join") })
    });
    let workers: Vec<_> = (0..THREADS)
        .map(|_| {
            let store = Arc::clone(&store);
            thread::spawn(move || {
                (0..ROUNDS).map(|_| run(&store, |tx| tx.decrement_remaining("app", "join"))).collect::<Vec<i64>>()
            })
        })
        .collect();
    let seen: BTreeSet<i64> = workers.into_iter().flat_map(|worker| worker.join().unwrap()).collect();
    // Every caller saw a different value, so exactly one of them saw 0 and releases the node.
    assert_eq!(seen, (0..total).collect::<BTreeSet<i64>>());
    assert_eq!(run(&store, |tx| tx.node("app", "join")).unwrap().remaining, 0);
}

#[test]
fn add_pending_across_two_connections() {
    let (_directory, first, second) = opened_twice();
    let stores = [Arc::new(first), Arc::new(second)];
    let workers: Vec<_> = stores
        .iter()
        .map(|store| {
            let store = Arc::clone(store);
            thread::spawn(move || (0..ROUNDS).map(|_| run(&store, |tx| tx.add_pending("app", 1))).collect::<Vec<i64>>())
        })
        .collect();
    let seen: BTreeSet<i64> = workers.into_iter().flat_map(|worker| worker.join().unwrap()).collect();
    let total = i64::try_from(2 * ROUNDS).unwrap();
    assert_eq!(seen, (1..=total).collect::<BTreeSet<i64>>());
    assert_eq!(run(&stores[0], |tx| tx.stack("app")).unwrap().pending, total);
}

#[test]
fn read_modify_write_loses_no_update_across_connections() {
    // Immediate transactions take the write lock at BEGIN, so a read followed by a write in one
    // `transaction` call cannot interleave with another connection's.
    let (_directory, first, second) = opened_twice();
    let stores = [Arc::new(first), Arc::new(second)];
    let workers: Vec<_> = stores
        .iter()
        .map(|store| {
            let store = Arc::clone(store);
            thread::spawn(move || {
                for _ in 0..ROUNDS {
                    run(&store, |tx| {
                        let Some(mut stack) = tx.stack("app")? else {
                            return Err(StoreError::NotFound { kind: "stack", key: "app".to_owned() });
                        };
                        stack.generation += 1;
                        tx.update_stack(&stack)
                    });
                }
            })
        })
        .collect();
    for worker in workers {
        worker.join().unwrap();
    }
    let expected = 1 + u64::try_from(2 * ROUNDS).unwrap();
    assert_eq!(run(&stores[1], |tx| tx.stack("app")).unwrap().generation, expected);
}
