//! Every `Tx` method against an in-memory store: round trips, orderings, upserts, the
//! conditional write of signals, and the cascades of `delete_stack` and `delete_server`.

use serde_json::json;

use super::{TEMPLATE, node_row, run, server_row, stack_row, store_with_stack};
use crate::store::*;

fn entry_row(server: &str, stack: &str, node: &str, sort_key: &str) -> EntryRow {
    EntryRow {
        server: server.to_owned(),
        stack: stack.to_owned(),
        node: node.to_owned(),
        sort_key: sort_key.to_owned(),
        entry: json!({"name": node, "inputs": []}),
        tokens: vec![format!("signal:{node}")],
    }
}

fn wait_signal(stack: &str, handle: &str, signal_id: &str, received_at: u64) -> WaitSignalRow {
    WaitSignalRow {
        stack: stack.to_owned(),
        handle: handle.to_owned(),
        signal_id: signal_id.to_owned(),
        success: true,
        reason: format!("signal {signal_id}"),
        data: json!({"id": signal_id}),
        received_at,
    }
}

fn deadline(stack: &str, node: Option<&str>, generation: u64, due_at: u64) -> DeadlineRow {
    DeadlineRow { stack: stack.to_owned(), node: node.map(str::to_owned), generation, due_at }
}

#[test]
fn servers_insert_read_list_and_update() {
    let store = SqliteStore::open_in_memory().unwrap();
    assert!(run(&store, |tx| tx.insert_server(&server_row("web2"))));
    assert!(run(&store, |tx| tx.insert_server(&server_row("web1"))));
    let mut taken = server_row("web1");
    taken.token_hash = "another-hash".to_owned();
    assert!(!run(&store, |tx| tx.insert_server(&taken)), "name taken");
    let mut same_hash = server_row("web3");
    same_hash.token_hash = server_row("web1").token_hash;
    assert!(store.transaction(|tx| tx.insert_server(&same_hash)).is_err(), "token hashes are unique");

    let names: Vec<String> = run(&store, |tx| tx.servers()).into_iter().map(|row| row.name).collect();
    assert_eq!(names, ["web1", "web2"]);
    assert_eq!(run(&store, |tx| tx.server("web1")), Some(server_row("web1")));
    assert_eq!(run(&store, |tx| tx.server("nobody")), None);
    assert_eq!(run(&store, |tx| tx.server_by_token_hash("hash-of-web2")), Some(server_row("web2")));
    assert_eq!(run(&store, |tx| tx.server_by_token_hash("unknown")), None);

    run(&store, |tx| {
        tx.set_server_document("web1", 7, r#"{"deployments": []}"#, 2_000)?;
        tx.touch_server("web1", 3_000)
    });
    let expected = ServerRow {
        metadata_version: 7,
        metadata_body: r#"{"deployments": []}"#.to_owned(),
        published_at: 2_000,
        last_seen: Some(3_000),
        ..server_row("web1")
    };
    assert_eq!(run(&store, |tx| tx.server("web1")), Some(expected));

    let missing = store.transaction(|tx| tx.set_server_document("nobody", 1, "{}", 1));
    assert!(matches!(missing, Err(StoreError::NotFound { kind: "server", ref key }) if key == "nobody"));
    assert!(matches!(store.transaction(|tx| tx.touch_server("nobody", 1)), Err(StoreError::NotFound { .. })));
}

#[test]
fn entries_upsert_order_and_remove() {
    let store = store_with_stack();
    run(&store, |tx| {
        tx.insert_server(&server_row("web2"))?;
        tx.insert_stack(&stack_row("other"), TEMPLATE)?;
        tx.put_entry(&entry_row("web1", "app", "b", "0002"))?;
        tx.put_entry(&entry_row("web1", "other", "a", "0001"))?;
        tx.put_entry(&entry_row("web1", "app", "a", "0001"))?;
        tx.put_entry(&entry_row("web2", "app", "c", "0000"))
    });
    let keys = |server: &str| -> Vec<(String, String, String)> {
        run(&store, |tx| tx.entries(server)).into_iter().map(|row| (row.sort_key, row.stack, row.node)).collect()
    };
    let key = |sort_key: &str, stack: &str, node: &str| (sort_key.to_owned(), stack.to_owned(), node.to_owned());
    assert_eq!(keys("web1"), [key("0001", "app", "a"), key("0001", "other", "a"), key("0002", "app", "b")]);

    // Upsert by (server, stack, node): moves the entry and replaces its body.
    let mut moved = entry_row("web1", "app", "b", "0000");
    moved.entry = json!({"replaced": true});
    moved.tokens = vec!["signal:b2".to_owned(), "handle:h".to_owned()];
    run(&store, |tx| tx.put_entry(&moved));
    let entries = run(&store, |tx| tx.entries("web1"));
    assert_eq!(entries.len(), 3);
    assert_eq!(entries[0], moved);
    let texts = run(&store, |tx| tx.entry_texts("web1"));
    assert_eq!((texts[0].entry.as_str(), &texts[0].tokens), (r#"{"replaced":true}"#, &moved.tokens));

    run(&store, |tx| {
        tx.remove_entry("web1", "app", "a")?;
        tx.remove_entry("web1", "app", "never-there")
    });
    assert_eq!(keys("web1"), [key("0000", "app", "b"), key("0001", "other", "a")]);
    assert_eq!(keys("web2"), [key("0000", "app", "c")]);
    assert!(keys("nobody").is_empty());
}

#[test]
fn stacks_insert_read_list_update_and_pending() {
    let store = SqliteStore::open_in_memory().unwrap();
    assert!(run(&store, |tx| tx.insert_stack(&stack_row("zeta"), TEMPLATE)));
    assert!(run(&store, |tx| tx.insert_stack(&stack_row("alpha"), TEMPLATE)));
    let mut taken = stack_row("alpha");
    taken.id = "another-id".to_owned();
    assert!(!run(&store, |tx| tx.insert_stack(&taken, TEMPLATE)), "name taken");
    let mut same_id = stack_row("beta");
    same_id.id = stack_row("alpha").id;
    assert!(store.transaction(|tx| tx.insert_stack(&same_id, TEMPLATE)).is_err(), "ids are unique");

    let names: Vec<String> = run(&store, |tx| tx.stacks()).into_iter().map(|row| row.name).collect();
    assert_eq!(names, ["alpha", "zeta"]);
    assert_eq!(run(&store, |tx| tx.stack("alpha")), Some(stack_row("alpha")));
    assert_eq!(run(&store, |tx| tx.stack("nope")), None);

    let updated = StackRow {
        action: Action::Update,
        state: State::Failed,
        status_reason: "deploy failed".to_owned(),
        parameters: json!({"flavor": "m1.large", "nested": {"list": [1, 2.5, null]}}),
        hidden_parameters: vec![],
        generation: 2,
        pending: 4,
        deadline: None,
        updated_at: 5_000,
        ..stack_row("alpha")
    };
    run(&store, |tx| tx.update_stack(&updated));
    assert_eq!(run(&store, |tx| tx.stack("alpha")), Some(updated));
    assert_eq!(run(&store, |tx| tx.stack_template("alpha")).as_deref(), Some(TEMPLATE), "update keeps the template");
    run(&store, |tx| tx.set_stack_template("alpha", "new template"));
    assert_eq!(run(&store, |tx| tx.stack_template("alpha")).as_deref(), Some("new template"));
    assert_eq!(run(&store, |tx| tx.stack_template("nope")), None);
    assert!(matches!(
        store.transaction(|tx| tx.set_stack_template("nope", "x")),
        Err(StoreError::NotFound { kind: "stack", .. })
    ));
    let missing = store.transaction(|tx| tx.update_stack(&stack_row("nope")));
    assert!(matches!(missing, Err(StoreError::NotFound { kind: "stack", .. })));

    assert_eq!(run(&store, |tx| tx.add_pending("alpha", 3)), 7);
    assert_eq!(run(&store, |tx| tx.add_pending("alpha", -7)), 0);
    assert_eq!(run(&store, |tx| tx.stack("alpha")).unwrap().pending, 0);
    assert!(matches!(store.transaction(|tx| tx.add_pending("nope", 1)), Err(StoreError::NotFound { .. })));
}

#[test]
fn nodes_insert_read_update_and_delete() {
    let store = store_with_stack();
    run(&store, |tx| {
        tx.insert_node(&node_row("app", "zulu"))?;
        tx.insert_node(&node_row("app", "alpha"))?;
        tx.insert_node(&node_row("app", "mike"))
    });
    assert!(store.transaction(|tx| tx.insert_node(&node_row("app", "zulu"))).is_err(), "duplicate node");
    let names = || -> Vec<String> { run(&store, |tx| tx.nodes("app")).into_iter().map(|row| row.name).collect() };
    assert_eq!(names(), ["zulu", "alpha", "mike"], "insertion order");
    assert_eq!(run(&store, |tx| tx.node("app", "alpha")), Some(node_row("app", "alpha")));
    assert_eq!(run(&store, |tx| tx.node("app", "nope")), None);
    assert!(run(&store, |tx| tx.nodes("other")).is_empty());

    let updated = NodeRow {
        generation: 3,
        state: NodeState::Complete,
        status_reason: "done".to_owned(),
        remaining: 0,
        attributes: json!({"deploy_stdout": "ok", "result": [1, 2]}),
        record: NodeRecord {
            id: Some("id-1".to_owned()),
            outcome: Some(RunOutcome::Complete),
            completed_once: true,
            members: vec!["group/a".to_owned()],
            ..NodeRecord::default()
        },
        derived_config_id: Some("derived-1".to_owned()),
        signal_token_hash: None,
        server: None,
        updated_at: 9_000,
        ..node_row("app", "alpha")
    };
    run(&store, |tx| tx.update_node(&updated));
    assert_eq!(run(&store, |tx| tx.node("app", "alpha")), Some(updated));
    let missing = store.transaction(|tx| tx.update_node(&node_row("app", "nope")));
    assert!(matches!(missing, Err(StoreError::NotFound { kind: "node", ref key }) if key == "app/nope"));

    run(&store, |tx| {
        tx.delete_node("app", "zulu")?;
        tx.delete_node("app", "never-there")
    });
    assert_eq!(names(), ["alpha", "mike"]);
}

#[test]
fn conditional_write_needs_generation_and_state() {
    let store = store_with_stack();
    run(&store, |tx| tx.insert_node(&node_row("app", "deploy")));
    let completed =
        NodeRow { state: NodeState::Complete, status_reason: "signalled".to_owned(), ..node_row("app", "deploy") };

    // Stale: the node moved on to generation 2 since the signal's deployment was released.
    assert!(!run(&store, |tx| tx.update_node_if(&completed, 2, NodeState::InProgress)));
    // Wrong state: a signal for a node that is not in progress.
    assert!(!run(&store, |tx| tx.update_node_if(&completed, 1, NodeState::Complete)));
    assert_eq!(run(&store, |tx| tx.node("app", "deploy")), Some(node_row("app", "deploy")));

    assert!(run(&store, |tx| tx.update_node_if(&completed, 1, NodeState::InProgress)));
    assert_eq!(run(&store, |tx| tx.node("app", "deploy")), Some(completed.clone()));
    // Duplicate: the same signal again no longer matches.
    let again = NodeRow { status_reason: "second signal".to_owned(), ..completed.clone() };
    assert!(!run(&store, |tx| tx.update_node_if(&again, 1, NodeState::InProgress)));
    assert_eq!(run(&store, |tx| tx.node("app", "deploy")), Some(completed));
    // A missing node matches nothing either.
    assert!(!run(&store, |tx| tx.update_node_if(&node_row("app", "nope"), 1, NodeState::InProgress)));
}

#[test]
fn node_by_signal_hash_and_decrement() {
    let store = store_with_stack();
    let mut unsigned = node_row("app", "config");
    unsigned.signal_token_hash = None;
    run(&store, |tx| {
        tx.insert_node(&node_row("app", "deploy"))?;
        tx.insert_node(&unsigned)
    });
    assert_eq!(run(&store, |tx| tx.node_by_signal_hash("signal-app-deploy")), Some(node_row("app", "deploy")));
    assert_eq!(run(&store, |tx| tx.node_by_signal_hash("unknown")), None);

    assert_eq!(run(&store, |tx| tx.decrement_remaining("app", "deploy")), 1);
    assert_eq!(run(&store, |tx| tx.decrement_remaining("app", "deploy")), 0);
    assert_eq!(run(&store, |tx| tx.node("app", "deploy")).unwrap().remaining, 0);
    let missing = store.transaction(|tx| tx.decrement_remaining("app", "nope"));
    assert!(matches!(missing, Err(StoreError::NotFound { kind: "node", .. })));
}

#[test]
fn edges_are_idempotent_sorted_and_per_stack() {
    let store = store_with_stack();
    run(&store, |tx| {
        tx.insert_stack(&stack_row("other"), TEMPLATE)?;
        tx.insert_edge("app", "config", "web_deploy")?;
        tx.insert_edge("app", "config", "db_deploy")?;
        tx.insert_edge("app", "config", "web_deploy")?;
        tx.insert_edge("app", "db_deploy", "web_deploy")?;
        tx.insert_edge("other", "config", "x")
    });
    assert_eq!(run(&store, |tx| tx.successors("app", "config")), ["db_deploy", "web_deploy"]);
    assert_eq!(run(&store, |tx| tx.successors("app", "db_deploy")), ["web_deploy"]);
    assert!(run(&store, |tx| tx.successors("app", "web_deploy")).is_empty());
    run(&store, |tx| tx.delete_edges("app"));
    assert!(run(&store, |tx| tx.successors("app", "config")).is_empty());
    assert_eq!(run(&store, |tx| tx.successors("other", "config")), ["x"]);
}

#[test]
fn wait_signals_upsert_keeps_first_position() {
    let store = store_with_stack();
    assert!(run(&store, |tx| tx.upsert_wait_signal(&wait_signal("app", "handle", "b", 1))));
    assert!(run(&store, |tx| tx.upsert_wait_signal(&wait_signal("app", "handle", "a", 2))));
    assert!(run(&store, |tx| tx.upsert_wait_signal(&wait_signal("app", "other", "a", 3))));
    let replacement = WaitSignalRow {
        success: false,
        reason: "failed this time".to_owned(),
        data: json!(null),
        ..wait_signal("app", "handle", "b", 4)
    };
    assert!(!run(&store, |tx| tx.upsert_wait_signal(&replacement)));
    assert_eq!(run(&store, |tx| tx.wait_signals("app", "handle")), [replacement, wait_signal("app", "handle", "a", 2)]);
    assert_eq!(run(&store, |tx| tx.wait_signals("app", "other")), [wait_signal("app", "other", "a", 3)]);
    assert!(run(&store, |tx| tx.wait_signals("app", "none")).is_empty());
}

#[test]
fn events_append_in_order() {
    let store = store_with_stack();
    let first = run(&store, |tx| tx.append_event("app", 10, "app", "CREATE_IN_PROGRESS", "Stack CREATE started"));
    let second = run(&store, |tx| tx.append_event("other", 11, "x", "CREATE_IN_PROGRESS", ""));
    let third = run(&store, |tx| tx.append_event("app", 12, "deploy", "CREATE_COMPLETE", "signalled"));
    assert!(first < second && second < third);
    let expected = [
        EventRow {
            id: first,
            stack: "app".to_owned(),
            time: 10,
            resource: "app".to_owned(),
            status: "CREATE_IN_PROGRESS".to_owned(),
            reason: "Stack CREATE started".to_owned(),
        },
        EventRow {
            id: third,
            stack: "app".to_owned(),
            time: 12,
            resource: "deploy".to_owned(),
            status: "CREATE_COMPLETE".to_owned(),
            reason: "signalled".to_owned(),
        },
    ];
    assert_eq!(run(&store, |tx| tx.events("app")), expected);
    assert!(run(&store, |tx| tx.events("nothing")).is_empty());
}

#[test]
fn deadlines_upsert_due_order_and_limit() {
    let store = store_with_stack();
    run(&store, |tx| {
        tx.put_deadline(&deadline("app", None, 1, 300))?;
        tx.put_deadline(&deadline("app", Some("b"), 1, 100))?;
        tx.put_deadline(&deadline("app", Some("a"), 1, 100))?;
        tx.put_deadline(&deadline("app", Some("c"), 1, 500))?;
        // Another generation of the same wait condition is another deadline.
        tx.put_deadline(&deadline("app", Some("c"), 2, 700))
    });
    let due = |now, limit| -> Vec<String> {
        run(&store, |tx| tx.due_deadlines(now, limit))
            .into_iter()
            .map(|row| format!("{}/{}", row.node.as_deref().unwrap_or("-"), row.generation))
            .collect()
    };
    assert!(due(99, 10).is_empty());
    assert_eq!(due(100, 10), ["a/1", "b/1"]);
    assert_eq!(due(300, 2), ["a/1", "b/1"]);
    assert_eq!(due(u64::MAX >> 1, usize::MAX), ["a/1", "b/1", "-/1", "c/1", "c/2"]);

    // Upsert by (stack, node, generation) moves the deadline.
    run(&store, |tx| tx.put_deadline(&deadline("app", Some("c"), 1, 50)));
    assert_eq!(run(&store, |tx| tx.due_deadlines(60, 10)), [deadline("app", Some("c"), 1, 50)]);
    run(&store, |tx| {
        tx.delete_deadline("app", Some("c"), 1)?;
        tx.delete_deadline("app", Some("never-there"), 1)
    });
    assert_eq!(due(1_000, 10), ["a/1", "b/1", "-/1", "c/2"]);
    run(&store, |tx| tx.delete_deadline("app", None, 1));
    assert_eq!(due(1_000, 10), ["a/1", "b/1", "c/2"]);
}

#[test]
fn delete_stack_cascades_but_keeps_events() {
    let store = store_with_stack();
    run(&store, |tx| {
        tx.insert_stack(&stack_row("other"), TEMPLATE)?;
        for stack in ["app", "other"] {
            tx.insert_node(&node_row(stack, "deploy"))?;
            tx.insert_edge(stack, "config", "deploy")?;
            tx.put_entry(&entry_row("web1", stack, "deploy", "0001"))?;
            tx.upsert_wait_signal(&wait_signal(stack, "handle", "1", 1))?;
            tx.put_deadline(&deadline(stack, None, 1, 10))?;
            tx.append_event(stack, 1, stack, "CREATE_IN_PROGRESS", "")?;
        }
        tx.delete_stack("app")?;
        tx.delete_stack("never-there")
    });
    run(&store, |tx| {
        assert_eq!(tx.stack("app")?, None);
        assert!(tx.nodes("app")?.is_empty());
        assert_eq!(tx.node_by_signal_hash("signal-app-deploy")?, None);
        assert!(tx.successors("app", "config")?.is_empty());
        assert!(tx.wait_signals("app", "handle")?.is_empty());
        assert_eq!(tx.entries("web1")?.iter().map(|row| row.stack.as_str()).collect::<Vec<_>>(), ["other"]);
        assert_eq!(tx.due_deadlines(100, 10)?, [deadline("other", None, 1, 10)]);
        assert_eq!(tx.events("app")?.len(), 1, "events outlive their stack");
        // The other stack is untouched.
        assert!(tx.stack("other")?.is_some());
        assert_eq!(tx.nodes("other")?.len(), 1);
        assert_eq!(tx.successors("other", "config")?, ["deploy"]);
        assert_eq!(tx.wait_signals("other", "handle")?.len(), 1);
        Ok(())
    });
    // The name is free again.
    assert!(run(&store, |tx| tx.insert_stack(&stack_row("app"), TEMPLATE)));
}

#[test]
fn delete_server_takes_its_token_and_entries_and_names_its_users() {
    let store = store_with_stack();
    run(&store, |tx| {
        tx.insert_server(&server_row("web2"))?;
        tx.insert_stack(&stack_row("other"), TEMPLATE)?;
        // `app` has a node published to web1; `other` only an entry in web1's document.
        tx.insert_node(&node_row("app", "deploy"))?;
        tx.put_entry(&entry_row("web1", "other", "old", "0001"))?;
        tx.put_entry(&entry_row("web2", "app", "deploy2", "0001"))
    });
    assert_eq!(run(&store, |tx| tx.stacks_using_server("web1")), ["app", "other"]);
    assert_eq!(run(&store, |tx| tx.stacks_using_server("web2")), ["app"]);
    assert!(run(&store, |tx| tx.stacks_using_server("nobody")).is_empty());

    assert!(run(&store, |tx| tx.delete_server("web1")));
    assert!(!run(&store, |tx| tx.delete_server("web1")), "already gone");
    assert!(!run(&store, |tx| tx.delete_server("nobody")));
    run(&store, |tx| {
        assert_eq!(tx.server("web1")?, None);
        assert_eq!(tx.server_by_token_hash("hash-of-web1")?, None, "the token is dead");
        assert!(tx.entries("web1")?.is_empty());
        assert_eq!(tx.entries("web2")?.len(), 1, "other servers' entries stay");
        assert_eq!(tx.servers()?.iter().map(|row| row.name.as_str()).collect::<Vec<_>>(), ["web2"]);
        Ok(())
    });
    // The name is free again, with a new token.
    let mut again = server_row("web1");
    again.token_hash = "new-hash".to_owned();
    assert!(run(&store, |tx| tx.insert_server(&again)));
    assert_eq!(run(&store, |tx| tx.server_by_token_hash("hash-of-web1")), None);
}

#[test]
fn server_tokens_rotate_keep_one_previous_token_and_go_with_the_server() {
    let store = SqliteStore::open_in_memory().unwrap();
    assert!(run(&store, |tx| tx.insert_server(&server_row("web1"))));
    assert!(!run(&store, |tx| tx.rotate_server_token("nobody", "h", 10)), "no such server");
    assert!(run(&store, |tx| tx.rotate_server_token("web1", "second", 1_000)));
    run(&store, |tx| {
        assert_eq!(tx.server_by_token_hash("second")?.map(|row| row.name).as_deref(), Some("web1"));
        assert_eq!(tx.server_by_token_hash("hash-of-web1")?, None);
        assert_eq!(tx.server_by_previous_token_hash("hash-of-web1")?, Some(("web1".to_owned(), 1_000)));
        Ok(())
    });
    // A second rotation replaces the previous token: only one stays recognised.
    assert!(run(&store, |tx| tx.rotate_server_token("web1", "third", 2_000)));
    assert_eq!(run(&store, |tx| tx.server_by_previous_token_hash("hash-of-web1")), None);
    assert_eq!(run(&store, |tx| tx.server_by_previous_token_hash("second")), Some(("web1".to_owned(), 2_000)));
    assert!(run(&store, |tx| tx.delete_server("web1")));
    assert_eq!(run(&store, |tx| tx.server_by_previous_token_hash("second")), None, "gone with the server");
}
