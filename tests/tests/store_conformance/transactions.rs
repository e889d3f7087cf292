//! The transaction boundary and what a call may hand the store: all-or-nothing on an error or a
//! panic of the work, errors of the caller's own type, foreign keys checked per statement,
//! `read` beside `transaction`, the statement and commit counters, numbers beyond what a
//! BIGINT holds, and free text holding NUL (which PostgreSQL's TEXT cannot).

use std::panic::{AssertUnwindSafe, catch_unwind};

use anneal_shim::store::{EntryRow, EventRow, NodeRow, ServerRow, StackRow, Store, StoreError, Tx, WaitSignalRow};
use serde_json::json;

use crate::Backend;
use crate::fixtures::{TEMPLATE, deadline, entry_row, node_row, run, server_row, stack_row, wait_signal, with_stack};

crate::conformance!(one store:
    error_in_work_rolls_everything_back,
    caller_error_type_rolls_back_and_store_errors_convert,
    panic_in_work_rolls_back_and_store_stays_usable,
    foreign_key_violation_fails_the_call,
    read_sees_what_transactions_committed,
    statements_and_commits_are_counted,
    numbers_beyond_a_signed_64_bit_integer_are_refused_and_nothing_is_stored,
    free_text_with_nul_is_stored,
    work_that_goes_on_past_a_failed_statement_is_kept_or_refused_whole,
);

fn error_in_work_rolls_everything_back<S: Store>(store: &S) {
    let result: Result<(), StoreError> = store.transaction(|tx| {
        tx.insert_server(&server_row("web1"))?;
        tx.insert_stack(&stack_row("app"), TEMPLATE)?;
        tx.append_event("app", 1, "app", "CREATE_IN_PROGRESS", "")?;
        Err(StoreError::NotFound { kind: "test", key: "rollback".to_owned() })
    });
    assert!(matches!(result, Err(StoreError::NotFound { kind: "test", .. })), "{result:?}");
    let (servers, stacks, events) = run(store, |tx| Ok((tx.servers()?, tx.stacks()?, tx.events("app")?)));
    assert!(servers.is_empty() && stacks.is_empty() && events.is_empty());
}

#[derive(Debug)]
enum CallerError {
    Store(StoreError),
    Refused,
}

impl From<StoreError> for CallerError {
    fn from(error: StoreError) -> Self {
        CallerError::Store(error)
    }
}

fn caller_error_type_rolls_back_and_store_errors_convert<S: Store>(store: &S) {
    let refused = store.transaction(|tx| {
        tx.insert_server(&server_row("web1"))?;
        Err::<(), _>(CallerError::Refused)
    });
    assert!(matches!(refused, Err(CallerError::Refused)), "{refused:?}");
    assert_eq!(run(store, |tx| tx.server("web1")), None);
    let missing = store.transaction(|tx| -> Result<(), CallerError> { Ok(tx.touch_server("web1", 5)?) });
    assert!(matches!(missing, Err(CallerError::Store(StoreError::NotFound { kind: "server", .. }))), "{missing:?}");
}

fn panic_in_work_rolls_back_and_store_stays_usable<S: Store>(store: &S) {
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        store.transaction(|tx| -> Result<(), StoreError> {
            tx.insert_server(&server_row("web1"))?;
            panic!("work panicked on purpose")
        })
    }));
    assert!(outcome.is_err());
    assert!(run(store, |tx| tx.server("web1")).is_none());
    assert!(run(store, |tx| tx.insert_server(&server_row("web1"))));
}

fn foreign_key_violation_fails_the_call<S: Store>(store: &S) {
    // Checked per statement (not at a COMMIT a group of calls may share): a node of a missing stack.
    let result = store.transaction(|tx| {
        tx.insert_server(&server_row("web1"))?;
        tx.insert_node(&node_row("ghost", "deploy"))
    });
    assert!(matches!(result, Err(StoreError::Query { action: "insert a node", .. })), "{result:?}");
    let orphan_entry =
        EntryRow { server: "nobody".to_owned(), stack: "ghost".to_owned(), ..entry_row("", "", "d", "") };
    assert!(store.transaction(|tx| tx.put_entry(&orphan_entry)).is_err());
    assert!(store.transaction(|tx| tx.put_deadline(&deadline("ghost", None, 1, 10))).is_err());
    assert!(store.transaction(|tx| tx.upsert_wait_signal(&wait_signal("ghost", "handle", "1", 1))).is_err());
    assert!(run(store, |tx| tx.server("web1")).is_none());
    assert!(run(store, |tx| tx.insert_stack(&stack_row("app"), TEMPLATE)));
}

/// What the lookups a replica makes outside a write transaction found.
#[derive(Debug, PartialEq)]
struct Lookups {
    server: Option<ServerRow>,
    by_token: Option<ServerRow>,
    versions: Vec<(String, u64)>,
    stack: Option<StackRow>,
    node: Option<NodeRow>,
    entries: usize,
    signals: Vec<WaitSignalRow>,
    events: Vec<EventRow>,
}

fn lookups(tx: &mut dyn Tx) -> Result<Lookups, StoreError> {
    Ok(Lookups {
        server: tx.server("web1")?,
        by_token: tx.server_by_token_hash("hash-of-web1")?,
        versions: tx.document_versions()?,
        stack: tx.stack("app")?,
        node: tx.node_by_signal_hash("signal-app-deploy")?,
        entries: tx.entry_texts("web1")?.len(),
        signals: tx.wait_signals("app", "handle")?,
        events: tx.events("app")?,
    })
}

fn read_sees_what_transactions_committed<S: Store>(store: &S) {
    assert_eq!(store.read(|tx| tx.server("web1")).unwrap(), None);
    with_stack(store);
    run(store, |tx| {
        tx.set_server_document("web1", 3, "{}", 2_000)?;
        tx.insert_node(&node_row("app", "deploy"))?;
        tx.put_entry(&entry_row("web1", "app", "deploy", "0001"))?;
        tx.upsert_wait_signal(&wait_signal("app", "handle", "1", 1))?;
        tx.append_event("app", 1, "app", "CREATE_IN_PROGRESS", "").map(drop)
    });
    let found = store.read(lookups).unwrap();
    assert_eq!(found.server.as_ref().map(|row| row.metadata_version), Some(3));
    assert_eq!(found.by_token, found.server);
    assert_eq!(found.versions, [("web1".to_owned(), 3)]);
    assert_eq!(found.stack, Some(stack_row("app")));
    assert_eq!(found.node, Some(node_row("app", "deploy")));
    assert_eq!((found.entries, found.signals.len(), found.events.len()), (1, 1, 1));
    assert_eq!(found, run(store, lookups), "read and transaction see the same rows");

    // The work's own error comes back as it is, and the store stays usable.
    let failed = store.read(|tx| -> Result<(), StoreError> {
        tx.servers()?;
        Err(StoreError::NotFound { kind: "test", key: "read".to_owned() })
    });
    assert!(matches!(failed, Err(StoreError::NotFound { kind: "test", .. })), "{failed:?}");
    assert_eq!(store.read(|tx| tx.server("web1")).unwrap(), found.server);
}

fn statements_and_commits_are_counted<S: Backend>(store: &S) {
    let (statements, commits) = (store.statements(), store.commits());
    run(store, |tx| tx.insert_server(&server_row("web1")));
    assert!(store.statements() > statements, "the write's statements are counted");
    assert_eq!(store.commits(), commits + 1);

    let (statements, commits) = (store.statements(), store.commits());
    assert!(store.transaction(|tx| tx.touch_server("missing", 1)).is_err());
    assert!(store.statements() > statements);
    assert_eq!(store.commits(), commits, "a call that kept nothing commits nothing");

    let statements = store.statements();
    assert_eq!(store.read(|tx| tx.servers()).unwrap().len(), 1);
    assert!(store.statements() > statements, "reads are counted");
    assert_eq!(store.commits(), commits, "a read commits nothing");
}

/// One write a check attempts, named by the `Tx` method it calls.
type NamedWrite = (&'static str, Box<dyn Fn(&mut dyn Tx) -> Result<(), StoreError>>);

/// Every write that stores a `u64` in a signed 64-bit column, with a value one beyond.
fn writes_of_a_number_beyond_i64() -> Vec<NamedWrite> {
    let beyond = u64::try_from(i64::MAX).unwrap() + 1;
    vec![
        (
            "insert_server",
            Box::new(move |tx| tx.insert_server(&ServerRow { created_at: beyond, ..server_row("web2") }).map(drop)),
        ),
        ("set_server_document", Box::new(move |tx| tx.set_server_document("web1", beyond, "{}", 1))),
        ("touch_server", Box::new(move |tx| tx.touch_server("web1", beyond))),
        ("rotate_server_token", Box::new(move |tx| tx.rotate_server_token("web1", "new", beyond).map(drop))),
        (
            "insert_stack",
            Box::new(move |tx| {
                tx.insert_stack(&StackRow { generation: beyond, ..stack_row("big") }, TEMPLATE).map(drop)
            }),
        ),
        ("update_stack", Box::new(move |tx| tx.update_stack(&StackRow { deadline: Some(beyond), ..stack_row("app") }))),
        (
            "insert_node",
            Box::new(move |tx| tx.insert_node(&NodeRow { updated_at: beyond, ..node_row("app", "deploy") })),
        ),
        (
            "upsert_wait_signal",
            Box::new(move |tx| tx.upsert_wait_signal(&wait_signal("app", "handle", "1", beyond)).map(drop)),
        ),
        ("append_event", Box::new(move |tx| tx.append_event("app", beyond, "app", "CREATE_IN_PROGRESS", "").map(drop))),
        ("put_deadline", Box::new(move |tx| tx.put_deadline(&deadline("app", None, 1, beyond)))),
    ]
}

fn numbers_beyond_a_signed_64_bit_integer_are_refused_and_nothing_is_stored<S: Store>(store: &S) {
    with_stack(store);
    for (method, write) in writes_of_a_number_beyond_i64() {
        // A valid write first: the refused one must take the whole call with it.
        let result = store.transaction(|tx| {
            tx.retire_signal_hash(method, "app", "deploy")?;
            write(tx)
        });
        assert!(matches!(result, Err(StoreError::Query { .. })), "{method}: {result:?}");
    }
    run(store, |tx| {
        assert_eq!(tx.servers()?, [server_row("web1")], "no server added, none changed");
        assert_eq!(tx.server_by_previous_token_hash("hash-of-web1")?, None, "no token rotated");
        assert_eq!(tx.stacks()?, [stack_row("app")], "no stack added, none changed");
        assert!(tx.nodes("app")?.is_empty());
        assert!(tx.wait_signals("app", "handle")?.is_empty());
        assert!(tx.events("app")?.is_empty());
        assert!(tx.due_deadlines(u64::try_from(i64::MAX).unwrap(), 10)?.is_empty());
        assert!(!tx.is_retired_signal_hash("insert_server")?, "the valid write went with the refused one");
        Ok(())
    });
}

fn free_text_with_nul_is_stored<S: Backend>(store: &S) {
    with_stack(store);
    let text = "exit 1: \0 in the output";
    let signal_id = "id\0one";
    run(store, |tx| {
        tx.update_stack(&StackRow { status_reason: text.to_owned(), ..stack_row("app") })?;
        tx.insert_stack(&StackRow { status_reason: text.to_owned(), ..stack_row("second") }, text)?;
        tx.insert_node(&NodeRow {
            status_reason: text.to_owned(),
            attributes: json!({"stdout": text}).into(),
            ..node_row("app", "deploy")
        })?;
        let signal = WaitSignalRow {
            reason: text.to_owned(),
            data: json!({"text": text}),
            ..wait_signal("app", "handle", signal_id, 1)
        };
        tx.upsert_wait_signal(&signal)?;
        tx.append_event("app", 5, "deploy", "CREATE_FAILED", text).map(drop)
    });
    // Free text comes back as the backend stores it; JSON columns escape NUL, so they round trip.
    let stored = S::stored_text(text);
    run(store, |tx| {
        assert_eq!(tx.stack("app")?.unwrap().status_reason, stored, "a stack's status_reason");
        assert_eq!(tx.stack("second")?.unwrap().status_reason, stored, "an inserted stack's status_reason");
        assert_eq!(tx.stack_template("second")?.unwrap(), stored, "a template");
        let node = tx.node("app", "deploy")?.unwrap();
        assert_eq!((node.status_reason.as_str(), &*node.attributes), (stored.as_str(), &json!({"stdout": text})));
        let signals = tx.wait_signals("app", "handle")?;
        assert_eq!(signals.len(), 1);
        assert_eq!((signals[0].reason.as_str(), &signals[0].data), (stored.as_str(), &json!({"text": text})));
        assert_eq!(signals[0].signal_id, S::stored_text(signal_id));
        assert_eq!(tx.wait_signal_success("app", "handle", signal_id)?, Some(true), "found by the id it came with");
        assert_eq!(tx.events("app")?[0].reason, stored, "an event's reason");
        Ok(())
    });
    // A second signal with the same id replaces the first rather than adding one.
    let again = WaitSignalRow { success: false, ..wait_signal("app", "handle", signal_id, 2) };
    assert!(!run(store, |tx| tx.upsert_wait_signal(&again)));
}

/// Work that meets a failed statement (a constraint violation) and goes on without passing the
/// error on. Either the call is acknowledged and keeps its other writes, or it is refused and
/// keeps nothing; never acknowledged with its writes gone.
fn work_that_goes_on_past_a_failed_statement_is_kept_or_refused_whole<S: Backend>(store: &S) {
    run(store, |tx| tx.insert_server(&server_row("web1")));
    let result = store.transaction(|tx| {
        tx.insert_server(&server_row("web2"))?;
        tx.append_event("app", 1, "app", "CREATE_IN_PROGRESS", "")?;
        // Last, so that no later statement of the work reports the aborted transaction.
        let duplicate = ServerRow { token_hash: server_row("web1").token_hash, ..server_row("web3") };
        assert!(tx.insert_server(&duplicate).is_err(), "token hashes are unique");
        Ok::<_, StoreError>(())
    });
    let names: Vec<String> = run(store, |tx| tx.servers()).into_iter().map(|row| row.name).collect();
    let events = run(store, |tx| tx.events("app")).len();
    if S::KEEPS_WRITES_PAST_A_FAILED_STATEMENT {
        assert!(result.is_ok(), "{result:?}");
        assert_eq!((names, events), (vec!["web1".to_owned(), "web2".to_owned()], 1), "acknowledged, so kept");
    } else {
        assert!(matches!(result, Err(StoreError::RolledBack)), "{result:?}");
        assert_eq!((names, events), (vec!["web1".to_owned()], 0), "refused, so nothing kept");
    }
    assert!(run(store, |tx| tx.insert_server(&server_row("web4"))), "the store stays usable");
}
