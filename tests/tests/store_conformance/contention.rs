//! The atomic counters and transaction isolation under contention: threads sharing one store,
//! and two stores on the same database (two connections to one SQLite file, as two processes
//! would have; two `PgStore`s on one PostgreSQL database, as two replicas have).

use std::collections::BTreeSet;
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use anneal_shim::store::{NodeRow, Store, StoreError};

use crate::fixtures::{TEMPLATE, node_row, run, server_row, stack_row};

crate::conformance!(one store: decrement_remaining_from_many_threads);
crate::conformance!(two stores:
    add_pending_across_two_connections,
    read_modify_write_loses_no_update_across_connections,
    read_waits_for_no_writer_and_sees_only_commits,
);

const THREADS: usize = 4;
const ROUNDS: usize = 25;

fn decrement_remaining_from_many_threads<S: Store>(store: &S) {
    let total = i64::try_from(THREADS * ROUNDS).unwrap();
    run(store, |tx| {
        tx.insert_stack(&stack_row("app"), TEMPLATE)?;
        tx.insert_node(&NodeRow { remaining: total, ..node_row("app", "join") })
    });
    let seen: BTreeSet<i64> = thread::scope(|scope| {
        let workers: Vec<_> = (0..THREADS)
            .map(|_| {
                scope.spawn(|| {
                    (0..ROUNDS).map(|_| run(store, |tx| tx.decrement_remaining("app", "join"))).collect::<Vec<i64>>()
                })
            })
            .collect();
        workers.into_iter().flat_map(|worker| worker.join().unwrap()).collect()
    });
    // Every caller saw a different value, so exactly one of them saw 0 and releases the node.
    assert_eq!(seen, (0..total).collect::<BTreeSet<i64>>());
    assert_eq!(run(store, |tx| tx.node("app", "join")).unwrap().remaining, 0);
}

fn add_pending_across_two_connections<S: Store>(first: &S, second: &S) {
    run(first, |tx| tx.insert_stack(&stack_row("app"), TEMPLATE));
    let seen: BTreeSet<i64> = thread::scope(|scope| {
        let workers: Vec<_> = [first, second]
            .into_iter()
            .map(|store| {
                scope
                    .spawn(move || (0..ROUNDS).map(|_| run(store, |tx| tx.add_pending("app", 1))).collect::<Vec<i64>>())
            })
            .collect();
        workers.into_iter().flat_map(|worker| worker.join().unwrap()).collect()
    });
    let total = i64::try_from(2 * ROUNDS).unwrap();
    assert_eq!(seen, (1..=total).collect::<BTreeSet<i64>>());
    assert_eq!(run(first, |tx| tx.stack("app")).unwrap().pending, total);
}

fn read_modify_write_loses_no_update_across_connections<S: Store>(first: &S, second: &S) {
    // A write transaction holds the write lock from its start (SQLite's immediate transactions,
    // PostgreSQL's advisory lock), so a read followed by a write in one `transaction` call
    // cannot interleave with another connection's.
    run(first, |tx| tx.insert_stack(&stack_row("app"), TEMPLATE));
    thread::scope(|scope| {
        for store in [first, second] {
            scope.spawn(move || {
                for _ in 0..ROUNDS {
                    run(store, |tx| {
                        let Some(mut stack) = tx.stack("app")? else {
                            return Err(StoreError::NotFound { kind: "stack", key: "app".to_owned() });
                        };
                        stack.generation += 1;
                        tx.update_stack(&stack)
                    });
                }
            });
        }
    });
    let expected = 1 + u64::try_from(2 * ROUNDS).unwrap();
    assert_eq!(run(second, |tx| tx.stack("app")).unwrap().generation, expected);
}

/// How long the writer keeps its transaction open for the reader: a bound, so that a read that
/// wrongly waits for the writer fails the check instead of hanging it.
const WRITER_HOLDS: Duration = Duration::from_secs(10);

fn read_waits_for_no_writer_and_sees_only_commits<S: Store>(first: &S, second: &S) {
    run(first, |tx| tx.insert_server(&server_row("web1")));
    let (writer_inside, inside) = mpsc::channel();
    let (release_writer, released) = mpsc::channel::<()>();
    let (seen, waited) = thread::scope(|scope| {
        scope.spawn(move || {
            run(first, |tx| {
                tx.set_server_document("web1", 2, "{}", 2_000)?;
                tx.insert_server(&server_row("web2"))?;
                writer_inside.send(()).unwrap();
                // Either way the transaction then commits: the reader is done or took too long.
                let _ = released.recv_timeout(WRITER_HOLDS);
                Ok(())
            })
        });
        inside.recv().unwrap();
        let started = Instant::now();
        let seen = second.read(|tx| tx.document_versions()).unwrap();
        let waited = started.elapsed();
        // The writer may have stopped waiting already; then it needs no release.
        let _ = release_writer.send(());
        (seen, waited)
    });
    assert!(waited < WRITER_HOLDS / 2, "the read waited {waited:?} for another connection's write transaction");
    assert_eq!(seen, [("web1".to_owned(), 0)], "an uncommitted write is not visible");
    let committed = second.read(|tx| tx.document_versions()).unwrap();
    assert_eq!(committed, [("web1".to_owned(), 2), ("web2".to_owned(), 0)], "the committed one is");
}
