//! Stacks and their graphs: stack rows, templates and the pending counter; nodes, the conditional
//! write a signal goes through, the lookup by signal token and the readiness counter; edges; and
//! the cascade of `delete_stack` over everything a stack owns.

use anneal_shim::store::{
    Action, NodeRecord, NodeRow, NodeState, Rollback, RunOutcome, StackRow, State, Store, StoreError, StoredRequests,
};
use serde_json::json;

use crate::fixtures::{TEMPLATE, deadline, entry_row, node_row, run, stack_row, wait_signal, with_stack};

crate::conformance!(one store:
    stacks_insert_read_list_update_and_pending,
    nodes_insert_read_update_and_delete,
    conditional_write_needs_generation_and_state,
    node_by_signal_hash_and_decrement,
    edges_are_idempotent_sorted_and_per_stack,
    delete_stack_cascades_but_keeps_events,
);

fn stacks_insert_read_list_update_and_pending<S: Store>(store: &S) {
    assert!(run(store, |tx| tx.insert_stack(&stack_row("zeta"), TEMPLATE)));
    assert!(run(store, |tx| tx.insert_stack(&stack_row("alpha"), TEMPLATE)));
    let mut taken = stack_row("alpha");
    taken.id = "another-id".to_owned();
    assert!(!run(store, |tx| tx.insert_stack(&taken, TEMPLATE)), "name taken");
    let mut same_id = stack_row("beta");
    same_id.id = stack_row("alpha").id;
    assert!(store.transaction(|tx| tx.insert_stack(&same_id, TEMPLATE)).is_err(), "ids are unique");

    let names: Vec<String> = run(store, |tx| tx.stacks()).into_iter().map(|row| row.name).collect();
    assert_eq!(names, ["alpha", "zeta"]);
    assert_eq!(run(store, |tx| tx.stack("alpha")), Some(stack_row("alpha")));
    assert_eq!(run(store, |tx| tx.stack("nope")), None);

    let updated = StackRow {
        id: "id-alpha-replaced".to_owned(),
        action: Action::Update,
        state: State::Failed,
        status_reason: "deploy failed".to_owned(),
        parameters: json!({"flavor": "m1.large", "nested": {"list": [1, 2.5, null]}}),
        hidden_parameters: vec![],
        generation: 2,
        pending: 4,
        deadline: None,
        created_at: 4_000,
        updated_at: 5_000,
        rollback: Rollback::Due,
        ..stack_row("alpha")
    };
    run(store, |tx| tx.update_stack(&updated));
    let kept_creation = StackRow { created_at: stack_row("alpha").created_at, ..updated };
    assert_eq!(run(store, |tx| tx.stack("alpha")), Some(kept_creation), "every column but name and created_at");
    assert_eq!(run(store, |tx| tx.stack_template("alpha")).as_deref(), Some(TEMPLATE), "update keeps the template");
    run(store, |tx| tx.set_stack_template("alpha", "new template"));
    assert_eq!(run(store, |tx| tx.stack_template("alpha")).as_deref(), Some("new template"));
    assert_eq!(run(store, |tx| tx.stack_template("nope")), None);
    let missing_template = store.transaction(|tx| tx.set_stack_template("nope", "x"));
    assert!(matches!(missing_template, Err(StoreError::NotFound { kind: "stack", .. })), "{missing_template:?}");
    let missing = store.transaction(|tx| tx.update_stack(&stack_row("nope")));
    assert!(matches!(missing, Err(StoreError::NotFound { kind: "stack", .. })), "{missing:?}");

    // The requests beside the template: none at first, then both, then the previous dropped.
    assert_eq!(run(store, |tx| tx.stack_requests("alpha")), StoredRequests::default());
    let both = StoredRequests { current: Some("{\"template\": \"b\"}".into()), previous: Some("{}".into()) };
    run(store, |tx| tx.set_stack_requests("alpha", &both));
    assert_eq!(run(store, |tx| tx.stack_requests("alpha")), both);
    let only_current = StoredRequests { previous: None, ..both };
    run(store, |tx| tx.set_stack_requests("alpha", &only_current));
    assert_eq!(run(store, |tx| tx.stack_requests("alpha")), only_current);
    assert_eq!(run(store, |tx| tx.stack_requests("nope")), StoredRequests::default());
    let missing_requests = store.transaction(|tx| tx.set_stack_requests("nope", &only_current));
    assert!(matches!(missing_requests, Err(StoreError::NotFound { kind: "stack", .. })), "{missing_requests:?}");

    assert_eq!(run(store, |tx| tx.add_pending("alpha", 3)), 7);
    assert_eq!(run(store, |tx| tx.add_pending("alpha", -7)), 0);
    assert_eq!(run(store, |tx| tx.stack("alpha")).unwrap().pending, 0);
    assert!(matches!(store.transaction(|tx| tx.add_pending("nope", 1)), Err(StoreError::NotFound { .. })));
}

fn nodes_insert_read_update_and_delete<S: Store>(store: &S) {
    with_stack(store);
    run(store, |tx| {
        tx.insert_node(&node_row("app", "zulu"))?;
        tx.insert_node(&node_row("app", "alpha"))?;
        tx.insert_node(&node_row("app", "mike"))
    });
    assert!(store.transaction(|tx| tx.insert_node(&node_row("app", "zulu"))).is_err(), "duplicate node");
    let names = || -> Vec<String> { run(store, |tx| tx.nodes("app")).into_iter().map(|row| row.name).collect() };
    assert_eq!(names(), ["zulu", "alpha", "mike"], "insertion order");
    assert_eq!(run(store, |tx| tx.node("app", "alpha")), Some(node_row("app", "alpha")));
    assert_eq!(run(store, |tx| tx.node("app", "nope")), None);
    assert!(run(store, |tx| tx.nodes("other")).is_empty());

    let updated = NodeRow {
        resource_type: "OS::Heat::StructuredDeployment".to_owned(),
        action: Action::Update,
        generation: 3,
        state: NodeState::Complete,
        status_reason: "done".to_owned(),
        remaining: 0,
        attributes: json!({"deploy_stdout": "ok", "result": [1, 2]}).into(),
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
    run(store, |tx| tx.update_node(&updated));
    assert_eq!(run(store, |tx| tx.node("app", "alpha")), Some(updated));
    let missing = store.transaction(|tx| tx.update_node(&node_row("app", "nope")));
    assert!(matches!(missing, Err(StoreError::NotFound { kind: "node", ref key }) if key == "app/nope"), "{missing:?}");

    run(store, |tx| {
        tx.delete_node("app", "zulu")?;
        tx.delete_node("app", "never-there")
    });
    assert_eq!(names(), ["alpha", "mike"]);
}

fn conditional_write_needs_generation_and_state<S: Store>(store: &S) {
    with_stack(store);
    run(store, |tx| tx.insert_node(&node_row("app", "deploy")));
    let completed =
        NodeRow { state: NodeState::Complete, status_reason: "signalled".to_owned(), ..node_row("app", "deploy") };

    // Stale: the node moved on to generation 2 since the signal's deployment was released.
    assert!(!run(store, |tx| tx.update_node_if(&completed, 2, NodeState::InProgress)));
    // Wrong state: a signal for a node that is not in progress.
    assert!(!run(store, |tx| tx.update_node_if(&completed, 1, NodeState::Complete)));
    assert_eq!(run(store, |tx| tx.node("app", "deploy")), Some(node_row("app", "deploy")));

    assert!(run(store, |tx| tx.update_node_if(&completed, 1, NodeState::InProgress)));
    assert_eq!(run(store, |tx| tx.node("app", "deploy")), Some(completed.clone()));
    // Duplicate: the same signal again no longer matches.
    let again = NodeRow { status_reason: "second signal".to_owned(), ..completed.clone() };
    assert!(!run(store, |tx| tx.update_node_if(&again, 1, NodeState::InProgress)));
    assert_eq!(run(store, |tx| tx.node("app", "deploy")), Some(completed));
    // A missing node matches nothing either.
    assert!(!run(store, |tx| tx.update_node_if(&node_row("app", "nope"), 1, NodeState::InProgress)));
}

fn node_by_signal_hash_and_decrement<S: Store>(store: &S) {
    with_stack(store);
    let mut unsigned = node_row("app", "config");
    unsigned.signal_token_hash = None;
    run(store, |tx| {
        tx.insert_node(&node_row("app", "deploy"))?;
        tx.insert_node(&unsigned)
    });
    assert_eq!(run(store, |tx| tx.node_by_signal_hash("signal-app-deploy")), Some(node_row("app", "deploy")));
    assert_eq!(run(store, |tx| tx.node_by_signal_hash("unknown")), None);

    assert_eq!(run(store, |tx| tx.decrement_remaining("app", "deploy")), 1);
    assert_eq!(run(store, |tx| tx.decrement_remaining("app", "deploy")), 0);
    assert_eq!(run(store, |tx| tx.node("app", "deploy")).unwrap().remaining, 0);
    let missing = store.transaction(|tx| tx.decrement_remaining("app", "nope"));
    assert!(matches!(missing, Err(StoreError::NotFound { kind: "node", .. })), "{missing:?}");
}

fn edges_are_idempotent_sorted_and_per_stack<S: Store>(store: &S) {
    with_stack(store);
    run(store, |tx| {
        tx.insert_stack(&stack_row("other"), TEMPLATE)?;
        tx.insert_edge("app", "config", "web_deploy")?;
        tx.insert_edge("app", "config", "db_deploy")?;
        tx.insert_edge("app", "config", "web_deploy")?;
        tx.insert_edge("app", "db_deploy", "web_deploy")?;
        tx.insert_edge("other", "config", "x")
    });
    assert_eq!(run(store, |tx| tx.successors("app", "config")), ["db_deploy", "web_deploy"]);
    assert_eq!(run(store, |tx| tx.successors("app", "db_deploy")), ["web_deploy"]);
    assert!(run(store, |tx| tx.successors("app", "web_deploy")).is_empty());
    run(store, |tx| tx.delete_edges("app"));
    assert!(run(store, |tx| tx.successors("app", "config")).is_empty());
    assert_eq!(run(store, |tx| tx.successors("other", "config")), ["x"]);
}

fn delete_stack_cascades_but_keeps_events<S: Store>(store: &S) {
    with_stack(store);
    run(store, |tx| {
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
    run(store, |tx| {
        assert_eq!(tx.stack("app")?, None);
        assert_eq!(tx.stack_template("app")?, None, "the template goes with its stack");
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
    assert!(run(store, |tx| tx.insert_stack(&stack_row("app"), TEMPLATE)));
    assert!(run(store, |tx| tx.server("web1")).is_some(), "a stack's deletion leaves the servers");
}
