//! Group commit (`sqlite::batch`): calls queued while one runs share its COMMIT, yet each keeps
//! all-or-nothing. The first call waits inside its work until the others are queued, which
//! makes the batch deterministic. Reads take no part in it: they have a connection of their own.

use std::sync::{Arc, mpsc};
use std::thread;
use std::time::{Duration, Instant};

use super::{TEMPLATE, node_row, run, server_row, stack_row};
use crate::store::*;

/// One call's work, boxed so a batch can mix different closures.
type Work<T> = Box<dyn FnOnce(&mut dyn Tx) -> Result<T, StoreError> + Send>;
/// How a call ended: `Err` if its work panicked.
type Ending<T> = thread::Result<Result<T, StoreError>>;

/// Blocks until `count` calls are queued for the store's connection.
fn wait_for_queued(store: &SqliteStore, count: usize) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while store.queued_callers() < count {
        assert!(Instant::now() < deadline, "callers never queued");
        thread::yield_now();
    }
}

/// Runs `first` in a transaction that waits until `others` are queued, then the others.
/// Returns the results of `first` and of each other call, in order.
fn batch_of<T: Send + 'static>(
    store: &Arc<SqliteStore>,
    first: impl FnOnce(&mut dyn Tx) -> Result<T, StoreError> + Send + 'static,
    others: Vec<Work<T>>,
) -> (Ending<T>, Vec<Ending<T>>) {
    let count = others.len();
    let (inside, leader_is_inside) = mpsc::channel();
    let leader = {
        let store = Arc::clone(store);
        thread::spawn(move || {
            store.transaction(|tx| {
                inside.send(()).unwrap();
                wait_for_queued(&store, count);
                first(tx)
            })
        })
    };
    // The followers start once the leader holds the connection, so they queue behind it.
    leader_is_inside.recv().unwrap();
    let followers: Vec<_> = others
        .into_iter()
        .map(|work| {
            let store = Arc::clone(store);
            thread::spawn(move || store.transaction(work))
        })
        .collect();
    (leader.join(), followers.into_iter().map(thread::JoinHandle::join).collect())
}

fn file_store() -> (tempfile::TempDir, Arc<SqliteStore>) {
    let directory = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(&directory.path().join("shim.db")).unwrap();
    (directory, Arc::new(store))
}

#[test]
fn queued_calls_share_one_commit() {
    let (directory, store) = file_store();
    let before = store.commits();
    let others: Vec<Work<bool>> = ["web2", "web3", "web4"]
        .into_iter()
        .map(|name| Box::new(move |tx: &mut dyn Tx| tx.insert_server(&server_row(name))) as Box<_>)
        .collect();
    let (first, others) = batch_of(&store, |tx| tx.insert_server(&server_row("web1")), others);
    assert!(first.unwrap().unwrap());
    assert!(others.into_iter().all(|result| result.unwrap().unwrap()));
    assert_eq!(store.commits() - before, 1);
    drop(store);
    let reopened = SqliteStore::open(&directory.path().join("shim.db")).unwrap();
    assert_eq!(run(&reopened, |tx| tx.servers()).len(), 4, "the shared commit is durable");
}

#[test]
fn failed_call_in_a_batch_rolls_back_alone() {
    let (_directory, store) = file_store();
    let before = store.commits();
    let failing = Box::new(|tx: &mut dyn Tx| {
        tx.insert_server(&server_row("web2"))?;
        Err(StoreError::NotFound { kind: "test", key: "refused".to_owned() })
    });
    let succeeding = Box::new(|tx: &mut dyn Tx| tx.insert_server(&server_row("web3")));
    let (first, others) = batch_of(&store, |tx| tx.insert_server(&server_row("web1")), vec![failing, succeeding]);
    assert!(first.unwrap().unwrap());
    let results: Vec<_> = others.into_iter().map(Result::unwrap).collect();
    assert!(matches!(results[0], Err(StoreError::NotFound { kind: "test", .. })));
    assert!(results[1].as_ref().unwrap());
    let names: Vec<String> = run(&store, |tx| tx.servers()).into_iter().map(|row| row.name).collect();
    assert_eq!(names, ["web1", "web3"]);
    assert_eq!(store.commits() - before, 2, "one batch, plus the listing's own");
}

#[test]
fn panicking_call_in_a_batch_rolls_back_alone_and_still_commits_the_batch() {
    let (_directory, store) = file_store();
    let panicking: Work<bool> = Box::new(|tx: &mut dyn Tx| {
        tx.insert_server(&server_row("web2"))?;
        panic!("work panicked on purpose")
    });
    // The panicking call is the last of the batch: it must commit the leader's work on its way out.
    let (first, others) = batch_of(&store, |tx| tx.insert_server(&server_row("web1")), vec![panicking]);
    assert!(first.unwrap().unwrap());
    assert!(others.into_iter().next().unwrap().is_err(), "the panic reaches the caller");
    let names: Vec<String> = run(&store, |tx| tx.servers()).into_iter().map(|row| row.name).collect();
    assert_eq!(names, ["web1"]);
}

#[test]
fn duplicate_signals_in_one_batch_apply_once() {
    let (_directory, store) = file_store();
    run(&store, |tx| {
        tx.insert_stack(&stack_row("app"), TEMPLATE)?;
        tx.insert_node(&node_row("app", "deploy"))
    });
    let signal = || {
        |tx: &mut dyn Tx| {
            let completed = NodeRow { state: NodeState::Complete, ..node_row("app", "deploy") };
            tx.update_node_if(&completed, 1, NodeState::InProgress)
        }
    };
    let (first, others) = batch_of(&store, signal(), vec![Box::new(signal()), Box::new(signal())]);
    let mut applied = vec![first.unwrap().unwrap()];
    applied.extend(others.into_iter().map(|result| result.unwrap().unwrap()));
    assert_eq!(applied, [true, false, false]);
}

/// A read (every metadata poll's token lookup) runs on a connection of its own: it neither
/// waits for a transaction that holds the writer (a large create held it for seconds, and every
/// poll behind it) nor sees that transaction's writes before they are committed.
#[test]
fn a_read_neither_waits_for_a_transaction_nor_sees_its_writes() {
    let (_directory, store) = file_store();
    run(&store, |tx| tx.insert_server(&server_row("committed")));
    let (inside, writer_is_inside) = mpsc::channel();
    let (answered, read_was_answered) = mpsc::channel::<()>();
    let writer = {
        let store = Arc::clone(&store);
        thread::spawn(move || {
            store.transaction(|tx| {
                tx.insert_server(&server_row("pending"))?;
                inside.send(()).unwrap();
                // Held open until the read is answered; bounded, for a read that waits for it.
                Ok::<_, StoreError>(read_was_answered.recv_timeout(Duration::from_secs(10)).is_ok())
            })
        })
    };
    writer_is_inside.recv().unwrap();
    let started = Instant::now();
    let found = store
        .read(|tx| {
            let known = |tx: &mut dyn Tx, name: &str| tx.server_by_token_hash(&format!("hash-of-{name}"));
            Ok::<_, StoreError>((known(tx, "committed")?.is_some(), known(tx, "pending")?.is_some()))
        })
        .unwrap();
    let waited = started.elapsed();
    let _ = answered.send(());
    assert!(writer.join().unwrap().unwrap(), "the read was answered while the transaction held the writer");
    assert_eq!(found, (true, false), "the read sees what is committed, not the open transaction's writes");
    assert!(waited < Duration::from_secs(2), "the read waited {waited:?}");
    assert!(run(&store, |tx| tx.server("pending")).is_some(), "the transaction committed after");
}
