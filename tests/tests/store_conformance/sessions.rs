//! The web view's sessions (`ui_sessions`): stored by key, looked up expired or not, deleted by a
//! logout (seen at once by another store on the same database, as another replica would), and
//! pruned once expired; and `Tx::changed_stacks`, the stacks a call wrote, which wake the web
//! view's live streams (and, on PostgreSQL, other replicas' through a notification).

use anneal_shim::store::{DocumentNotice, PgStore, Store, UiSessionRow};
use anneal_tests::Postgres;

use crate::DATABASE;
use crate::fixtures::{TEMPLATE, node_row, run, stack_row, with_stack};

crate::conformance!(one store:
    ui_sessions_are_stored_looked_up_deleted_and_pruned,
    changed_stacks_names_the_stacks_a_call_wrote,
);
crate::conformance!(two stores: a_session_deleted_through_one_store_is_gone_for_the_other);

fn session(key: &str, expires_at: u64) -> UiSessionRow {
    UiSessionRow { key: key.to_owned(), created_at: 1_000, expires_at }
}

fn ui_sessions_are_stored_looked_up_deleted_and_pruned<S: Store>(store: &S) {
    let (first, second, third) = (session("a".repeat(64).as_str(), 5_000), session("b", 9_000), session("c", 5_001));
    assert!(run(store, |tx| tx.insert_ui_session(&first)));
    assert!(!run(store, |tx| tx.insert_ui_session(&session(&first.key, 7_000))), "a taken key");
    assert!(run(store, |tx| tx.insert_ui_session(&second)) && run(store, |tx| tx.insert_ui_session(&third)));
    assert_eq!(run(store, |tx| tx.ui_session(&first.key)), Some(first.clone()), "kept as first stored");
    assert_eq!(run(store, |tx| tx.ui_session("nobody")), None);
    assert_eq!(store.read(|tx| tx.ui_session("b")).unwrap(), Some(second.clone()), "a lookup needs no write");

    assert!(run(store, |tx| tx.delete_ui_session("b")));
    assert!(!run(store, |tx| tx.delete_ui_session("b")), "deleted once");
    assert_eq!(run(store, |tx| tx.ui_session("b")), None);

    assert_eq!(run(store, |tx| tx.prune_ui_sessions(4_999)), 0);
    assert_eq!(run(store, |tx| tx.prune_ui_sessions(5_000)), 1, "expired at its expiry");
    assert_eq!(run(store, |tx| tx.ui_session(&first.key)), None);
    assert_eq!(run(store, |tx| tx.ui_session("c")), Some(third));
}

fn changed_stacks_names_the_stacks_a_call_wrote<S: Store>(store: &S) {
    with_stack(store);
    let written = run(store, |tx| {
        tx.insert_stack(&stack_row("other"), TEMPLATE)?;
        tx.insert_node(&node_row("app", "deploy"))?;
        tx.insert_edge("other", "a", "b")?;
        Ok(tx.changed_stacks())
    });
    assert_eq!(written, ["app", "other"]);
    let read_only = run(store, |tx| {
        tx.nodes("app")?;
        tx.stack("other")?;
        tx.append_event("app", 1, "app", "CREATE_IN_PROGRESS", "")?;
        Ok(tx.changed_stacks())
    });
    assert!(read_only.is_empty(), "reads and events change no graph: {read_only:?}");
    let updated = run(store, |tx| {
        let mut node = tx.node("app", "deploy")?.expect("the node");
        node.status_reason = "signalled".to_owned();
        tx.update_node(&node)?;
        let mut stack = tx.stack("other")?.expect("the stack");
        stack.status_reason = "done".to_owned();
        tx.update_stack(&stack)?;
        Ok(tx.changed_stacks())
    });
    assert_eq!(updated, ["app", "other"]);
    assert_eq!(run(store, |tx| tx.delete_stack("other").map(|()| tx.changed_stacks())), ["other"]);
}

fn a_session_deleted_through_one_store_is_gone_for_the_other<S: Store>(first: &S, second: &S) {
    let stored = session("shared", u64::MAX / 2);
    assert!(run(first, |tx| tx.insert_ui_session(&stored)));
    assert_eq!(second.read(|tx| tx.ui_session("shared")).unwrap(), Some(stored));
    assert!(run(second, |tx| tx.delete_ui_session("shared")));
    assert_eq!(first.read(|tx| tx.ui_session("shared")).unwrap(), None, "a logout on one replica holds on all");
}

/// PostgreSQL announces the stacks a commit changed to every replica listening (the web view's
/// live streams there follow them), as it announces changed documents.
#[test]
fn postgres_announces_changed_stacks_to_the_other_replicas() {
    let postgres = Postgres::start(false);
    let url = postgres.create_database(DATABASE);
    let (writer, listener) = (PgStore::open(&url).unwrap(), PgStore::open(&url).unwrap());
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let shutdown = tokio_util::sync::CancellationToken::new();
    let mut notices = runtime.block_on(async { listener.watch_documents(shutdown.clone()) }).expect("notifications");
    let next = |notices: &mut tokio::sync::mpsc::Receiver<DocumentNotice>| {
        let heard =
            runtime.block_on(async { tokio::time::timeout(std::time::Duration::from_secs(10), notices.recv()).await });
        heard.expect("a notice in time").expect("the listener runs")
    };
    assert_eq!(next(&mut notices), DocumentNotice::Resync, "first, the (re)connection");
    // (The blocking client runs its own runtime: outside this one.)
    with_stack(&writer);
    let mut heard = Vec::new();
    while !heard.contains(&DocumentNotice::StacksChanged(vec!["app".to_owned()])) {
        heard.push(next(&mut notices));
    }
    shutdown.cancel();
}
