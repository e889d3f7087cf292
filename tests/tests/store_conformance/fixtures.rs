//! The rows the checks write (one builder per row type, each a valid row whose parents the
//! check writes first) and the helpers every check uses to run a transaction.

use anneal_shim::store::{
    Action, DeadlineRow, EntryRow, NodeRecord, NodeRow, NodeState, Rollback, ServerRow, StackRow, State, Store,
    StoreError, Tx, WaitSignalRow,
};
use serde_json::json;

/// The template text the test stacks are stored with.
pub const TEMPLATE: &str = "heat_template_version: 2018-08-31";

pub fn server_row(name: &str) -> ServerRow {
    ServerRow {
        name: name.to_owned(),
        token_hash: format!("hash-of-{name}"),
        created_at: 1_000,
        metadata_version: 0,
        metadata_body: "{}".to_owned(),
        published_at: 1_000,
        last_seen: None,
        addresses: json!({"networks": {"ctlplane": ["192.0.2.1"]}}),
    }
}

pub fn stack_row(name: &str) -> StackRow {
    StackRow {
        id: format!("id-{name}"),
        name: name.to_owned(),
        action: Action::Create,
        state: State::InProgress,
        status_reason: String::new(),
        parameters: json!({"flavor": "m1.small", "password": "hunter2"}),
        hidden_parameters: vec!["password".to_owned()],
        generation: 1,
        pending: 0,
        deadline: Some(9_000),
        created_at: 1_000,
        updated_at: 1_000,
        evaluated_bytes: 4_096,
        resource_count: 3,
        rollback: Rollback::Enabled,
    }
}

pub fn node_row(stack: &str, name: &str) -> NodeRow {
    NodeRow {
        stack: stack.to_owned(),
        name: name.to_owned(),
        resource_type: "OS::Heat::SoftwareDeployment".to_owned(),
        generation: 1,
        action: Action::Create,
        state: NodeState::InProgress,
        status_reason: String::new(),
        remaining: 2,
        definition: json!({"config": {"get_resource": "config"}, "server": "web1"}).into(),
        attributes: json!({}).into(),
        record: NodeRecord::default(),
        derived_config_id: None,
        signal_token_hash: Some(format!("signal-{stack}-{name}")),
        server: Some("web1".to_owned()),
        updated_at: 1_000,
    }
}

pub fn entry_row(server: &str, stack: &str, node: &str, sort_key: &str) -> EntryRow {
    EntryRow {
        server: server.to_owned(),
        stack: stack.to_owned(),
        node: node.to_owned(),
        sort_key: sort_key.to_owned(),
        entry: json!({"name": node, "inputs": []}),
        tokens: vec![format!("signal:{node}")],
    }
}

pub fn wait_signal(stack: &str, handle: &str, signal_id: &str, received_at: u64) -> WaitSignalRow {
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

pub fn deadline(stack: &str, node: Option<&str>, generation: u64, due_at: u64) -> DeadlineRow {
    DeadlineRow { stack: stack.to_owned(), node: node.map(str::to_owned), generation, due_at }
}

/// Runs `work` in a transaction that must succeed.
pub fn run<S: Store, T>(store: &S, work: impl FnOnce(&mut dyn Tx) -> Result<T, StoreError>) -> T {
    store.transaction(work).unwrap()
}

/// Writes server `web1` and stack `app`, the parents most rows need.
pub fn with_stack<S: Store>(store: &S) {
    run(store, |tx| {
        tx.insert_server(&server_row("web1"))?;
        tx.insert_stack(&stack_row("app"), TEMPLATE)
    });
}

/// The wall clock in unix milliseconds, which both backends date a retired hash by.
pub fn now_millis() -> u64 {
    let elapsed = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap();
    u64::try_from(elapsed.as_millis()).unwrap()
}
