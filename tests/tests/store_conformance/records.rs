//! The smaller tables: wait-condition signals (order of first arrival, replacement in place),
//! events (ids that only grow), deadlines (upsert, due order, limit), retired signal token
//! hashes, and the history retention that keeps events and retired hashes bounded without
//! removing what `stack events` shows or a hash a late signal may still carry.

use anneal_shim::store::{EventRow, HistoryPruned, HistoryRetention, Store, WaitSignalRow};
use serde_json::json;

use crate::fixtures::{deadline, now_millis, run, wait_signal, with_stack};

crate::conformance!(one store:
    wait_signals_upsert_keeps_first_position,
    events_append_in_order,
    deadlines_upsert_due_order_and_limit,
    retired_signal_hashes_are_remembered_idempotently,
    events_beyond_the_per_stack_cap_go_oldest_first,
    events_of_deleted_stacks_age_out_and_those_of_an_earlier_stack_of_the_name_go,
    retired_signal_hashes_are_kept_for_their_retention_then_removed,
);

const DAY_MS: u64 = 86_400_000;

fn wait_signals_upsert_keeps_first_position<S: Store>(store: &S) {
    with_stack(store);
    assert!(run(store, |tx| tx.upsert_wait_signal(&wait_signal("app", "handle", "b", 1))));
    assert!(run(store, |tx| tx.upsert_wait_signal(&wait_signal("app", "handle", "a", 2))));
    assert!(run(store, |tx| tx.upsert_wait_signal(&wait_signal("app", "other", "a", 3))));
    let replacement = WaitSignalRow {
        success: false,
        reason: "failed this time".to_owned(),
        data: json!(null),
        ..wait_signal("app", "handle", "b", 4)
    };
    assert!(!run(store, |tx| tx.upsert_wait_signal(&replacement)));
    assert_eq!(run(store, |tx| tx.wait_signals("app", "handle")), [replacement, wait_signal("app", "handle", "a", 2)]);
    assert_eq!(run(store, |tx| tx.wait_signals("app", "other")), [wait_signal("app", "other", "a", 3)]);
    assert!(run(store, |tx| tx.wait_signals("app", "none")).is_empty());

    run(store, |tx| {
        assert_eq!(tx.wait_signal_success("app", "handle", "b")?, Some(false), "the replacement failed");
        assert_eq!(tx.wait_signal_success("app", "handle", "a")?, Some(true));
        assert_eq!(tx.wait_signal_success("app", "handle", "c")?, None, "no signal of that id");
        assert_eq!(tx.wait_signal_success("app", "none", "a")?, None, "no such handle");
        Ok(())
    });
}

fn events_append_in_order<S: Store>(store: &S) {
    with_stack(store);
    let first = run(store, |tx| tx.append_event("app", 10, "app", "CREATE_IN_PROGRESS", "Stack CREATE started"));
    let second = run(store, |tx| tx.append_event("other", 11, "x", "CREATE_IN_PROGRESS", ""));
    let third = run(store, |tx| tx.append_event("app", 12, "deploy", "CREATE_COMPLETE", "signalled"));
    assert!(first < second && second < third);
    let event = |id, time, resource: &str, status: &str, reason: &str| EventRow {
        id,
        stack: "app".to_owned(),
        time,
        resource: resource.to_owned(),
        status: status.to_owned(),
        reason: reason.to_owned(),
    };
    let expected = [
        event(first, 10, "app", "CREATE_IN_PROGRESS", "Stack CREATE started"),
        event(third, 12, "deploy", "CREATE_COMPLETE", "signalled"),
    ];
    assert_eq!(run(store, |tx| tx.events("app")), expected);
    assert!(run(store, |tx| tx.events("nothing")).is_empty());

    // Ids only grow, even once the newest events are gone (a deleted stack's, pruned): a
    // reused id would show a client that pages by id an old event as new.
    run(store, |tx| tx.delete_stack("app"));
    let forget_deleted = HistoryRetention { deleted_stack_events_ms: Some(0), ..keep_everything() };
    assert_eq!(run(store, |tx| tx.prune_history(&forget_deleted, 1_000)).events, 3);
    let after_prune = run(store, |tx| tx.append_event("app", 13, "app", "CREATE_IN_PROGRESS", ""));
    assert!(after_prune > third, "{after_prune} reuses an id up to {third}");
}

fn deadlines_upsert_due_order_and_limit<S: Store>(store: &S) {
    with_stack(store);
    run(store, |tx| {
        tx.put_deadline(&deadline("app", None, 1, 300))?;
        tx.put_deadline(&deadline("app", Some("b"), 1, 100))?;
        tx.put_deadline(&deadline("app", Some("a"), 1, 100))?;
        tx.put_deadline(&deadline("app", Some("c"), 1, 500))?;
        // Another generation of the same wait condition is another deadline.
        tx.put_deadline(&deadline("app", Some("c"), 2, 700))
    });
    let due = |now, limit| -> Vec<String> {
        run(store, |tx| tx.due_deadlines(now, limit))
            .into_iter()
            .map(|row| format!("{}/{}", row.node.as_deref().unwrap_or("-"), row.generation))
            .collect()
    };
    assert!(due(99, 10).is_empty());
    assert_eq!(due(100, 10), ["a/1", "b/1"]);
    assert_eq!(due(300, 2), ["a/1", "b/1"]);
    assert_eq!(due(300, 0), Vec::<String>::new(), "a limit of zero claims nothing");
    assert_eq!(due(u64::MAX >> 1, usize::MAX), ["a/1", "b/1", "-/1", "c/1", "c/2"]);

    // Upsert by (stack, node, generation) moves the deadline.
    run(store, |tx| tx.put_deadline(&deadline("app", Some("c"), 1, 50)));
    assert_eq!(run(store, |tx| tx.due_deadlines(60, 10)), [deadline("app", Some("c"), 1, 50)]);
    run(store, |tx| {
        tx.delete_deadline("app", Some("c"), 1)?;
        tx.delete_deadline("app", Some("never-there"), 1)
    });
    assert_eq!(due(1_000, 10), ["a/1", "b/1", "-/1", "c/2"]);
    run(store, |tx| tx.delete_deadline("app", None, 1));
    assert_eq!(due(1_000, 10), ["a/1", "b/1", "c/2"]);
}

fn retired_signal_hashes_are_remembered_idempotently<S: Store>(store: &S) {
    run(store, |tx| {
        assert!(!tx.is_retired_signal_hash("hash")?);
        tx.retire_signal_hash("hash", "app", "deploy")?;
        tx.retire_signal_hash("hash", "app", "deploy")?;
        assert!(tx.is_retired_signal_hash("hash")?, "seen inside the transaction that retired it");
        assert!(!tx.is_retired_signal_hash("other")?);
        Ok(())
    });
    assert!(run(store, |tx| tx.is_retired_signal_hash("hash")), "and after it committed");
}

fn keep_everything() -> HistoryRetention {
    HistoryRetention { max_events_per_stack: None, deleted_stack_events_ms: None, retired_signals_ms: None }
}

fn append<S: Store>(store: &S, stack: &str, time: u64, count: usize) -> Vec<u64> {
    run(store, |tx| (0..count).map(|index| tx.append_event(stack, time, "r", "S", &index.to_string())).collect())
}

fn event_ids<S: Store>(store: &S, stack: &str) -> Vec<u64> {
    run(store, |tx| tx.events(stack)).into_iter().map(|event| event.id).collect()
}

fn events_beyond_the_per_stack_cap_go_oldest_first<S: Store>(store: &S) {
    with_stack(store);
    let app = append(store, "app", 2_000, 30);
    let other = append(store, "other", 2_000, 5);
    let now = 3_000;
    assert_eq!(run(store, |tx| tx.prune_history(&keep_everything(), now)), HistoryPruned::default());
    let capped = HistoryRetention { max_events_per_stack: Some(10), ..keep_everything() };
    assert_eq!(run(store, |tx| tx.prune_history(&capped, now)), HistoryPruned { events: 20, retired_signals: 0 });
    assert_eq!(event_ids(store, "app"), app[20..], "the newest ten are kept");
    assert_eq!(event_ids(store, "other"), other, "a stack under the cap keeps everything");
    assert_eq!(run(store, |tx| tx.prune_history(&capped, now)), HistoryPruned::default(), "idempotent");
}

fn events_of_deleted_stacks_age_out_and_those_of_an_earlier_stack_of_the_name_go<S: Store>(store: &S) {
    with_stack(store);
    // `app` was created at 1_000 (see `stack_row`); events before it belong to an earlier `app`,
    // which `stack events` no longer shows.
    let earlier = append(store, "app", 500, 3);
    let current = append(store, "app", 1_000, 2);
    let deleted = append(store, "gone", 2 * DAY_MS, 4);
    let retention = HistoryRetention { deleted_stack_events_ms: Some(DAY_MS), ..keep_everything() };
    let pruned = run(store, |tx| tx.prune_history(&retention, 3 * DAY_MS - 1));
    assert_eq!(pruned.events, earlier.len(), "the deleted stack's last event is not a day old yet");
    assert_eq!(event_ids(store, "app"), current);
    assert_eq!(event_ids(store, "gone"), deleted);
    let pruned = run(store, |tx| tx.prune_history(&retention, 3 * DAY_MS + 1));
    assert_eq!(pruned.events, deleted.len());
    assert!(event_ids(store, "gone").is_empty());
    assert_eq!(event_ids(store, "app"), current, "an existing stack's events never age out");
}

fn retired_signal_hashes_are_kept_for_their_retention_then_removed<S: Store>(store: &S) {
    with_stack(store);
    run(store, |tx| tx.retire_signal_hash("hash", "app", "deploy"));
    let now = now_millis();
    let retention = HistoryRetention { retired_signals_ms: Some(30 * DAY_MS), ..keep_everything() };
    assert_eq!(run(store, |tx| tx.prune_history(&retention, now + 29 * DAY_MS)).retired_signals, 0);
    assert!(run(store, |tx| tx.is_retired_signal_hash("hash")), "a late signal is still known stale");
    assert_eq!(run(store, |tx| tx.prune_history(&keep_everything(), now + 3_650 * DAY_MS)).retired_signals, 0);
    assert_eq!(run(store, |tx| tx.prune_history(&retention, now + 31 * DAY_MS)).retired_signals, 1);
    assert!(!run(store, |tx| tx.is_retired_signal_hash("hash")));
}
