//! A PostgreSQL server that goes away and comes back: calls fail with `StoreError::Unavailable`
//! (which the HTTP layer answers with 503 and Retry-After) within a bounded time instead of
//! hanging, the same `PgStore` works again once the server is back without being reopened (its
//! pooled connections are checked on checkout and re-made), and no acknowledged commit is lost.

use std::sync::Barrier;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use anneal_shim::store::{PgStore, Store, StoreError};
use anneal_tests::Postgres;

use crate::DATABASE;
use crate::fixtures::{run, server_row, with_stack};

/// How long a call may take to give up while the server is down: `PgStore` waits at most 5 s
/// for a pooled connection; the rest is slack for a loaded machine.
const GIVE_UP_WITHIN: Duration = Duration::from_secs(12);
/// Commits the writer makes before the server is stopped under it.
const COMMITS_BEFORE_STOP: usize = 20;

/// Connections the pool holds before the server goes away: more than the calls made while it is
/// down, so that dead ones are still pooled when it is back.
const POOLED: usize = 4;

/// Makes the store's pool hold `POOLED` connections (reads that overlap need one each).
fn fill_the_pool(store: &PgStore) {
    let overlap = Barrier::new(POOLED);
    thread::scope(|scope| {
        for _ in 0..POOLED {
            scope.spawn(|| {
                store
                    .read(|tx| {
                        overlap.wait();
                        tx.servers()
                    })
                    .unwrap()
            });
        }
    });
}

/// Appends events until a call fails; returns the acknowledged ids, the error and how long the
/// failed call took. Gives up after a minute, so that a check that fails before stopping the
/// server does not leave it waiting for this thread forever.
fn write_until_failure(store: &PgStore, commits: &AtomicUsize) -> (Vec<u64>, StoreError, Duration) {
    let mut acknowledged = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        assert!(Instant::now() < deadline, "every write succeeded: the server never went away");
        let started = Instant::now();
        match store.transaction(|tx| tx.append_event("app", 1, "app", "CREATE_IN_PROGRESS", "")) {
            Ok(id) => acknowledged.push(id),
            Err(error) => return (acknowledged, error, started.elapsed()),
        }
        commits.fetch_add(1, Ordering::SeqCst);
    }
}

#[test]
fn calls_fail_in_bounded_time_while_the_server_is_down_and_the_same_store_recovers() {
    let mut postgres = Postgres::start(false);
    let store = PgStore::open(&postgres.create_database(DATABASE)).unwrap();
    with_stack(&store);
    fill_the_pool(&store);

    let commits = AtomicUsize::new(0);
    let (acknowledged, error, failed_after) = thread::scope(|scope| {
        let writer = scope.spawn(|| write_until_failure(&store, &commits));
        let deadline = Instant::now() + Duration::from_secs(30);
        while commits.load(Ordering::SeqCst) < COMMITS_BEFORE_STOP && !writer.is_finished() {
            assert!(Instant::now() < deadline, "the writer made too few commits");
            thread::sleep(Duration::from_millis(5));
        }
        postgres.stop_fast();
        writer.join().unwrap()
    });
    assert!(acknowledged.len() >= COMMITS_BEFORE_STOP);
    assert!(matches!(error, StoreError::Unavailable { .. }), "the writer's call failed with {error:?}");
    assert!(failed_after < GIVE_UP_WITHIN, "the writer's call took {failed_after:?} to fail");

    // A new call while the server is down: no connection to be had.
    let started = Instant::now();
    let result = store.transaction(|tx| tx.insert_server(&server_row("web2")));
    assert!(matches!(result, Err(StoreError::Unavailable { .. })), "{result:?}");
    assert!(started.elapsed() < GIVE_UP_WITHIN, "the call took {:?} to fail", started.elapsed());

    postgres.start_again();
    // The same store, not reopened: each dead pooled connection is found out on checkout and
    // replaced, so no call after the restart fails (one per pooled connection, and one more).
    let restarted: Vec<String> = (0..=POOLED).map(|index| format!("web-after-{index}")).collect();
    for name in &restarted {
        let result = store.transaction(|tx| tx.insert_server(&server_row(name)));
        assert!(matches!(result, Ok(true)), "{name}: {result:?}");
    }
    let stored: Vec<u64> = store.read(|tx| tx.events("app")).unwrap().into_iter().map(|event| event.id).collect();
    let lost: Vec<&u64> = acknowledged.iter().filter(|id| !stored.contains(id)).collect();
    assert!(lost.is_empty(), "acknowledged commits lost: {lost:?}");
    // The call that failed as the server went down may or may not have committed; no other did.
    assert!(stored.len() <= acknowledged.len() + 1, "{} stored, {} acknowledged", stored.len(), acknowledged.len());
    let names: Vec<String> = run(&store, |tx| tx.servers()).into_iter().map(|row| row.name).collect();
    let mut expected: Vec<String> = ["web1".to_owned()].into_iter().chain(restarted).collect();
    expected.sort();
    assert_eq!(names, expected, "the call refused while the server was down left nothing");
}
