//! Migrations of stored rows, each tested from a database written at the version before it.

use serde_json::json;

use super::{MIGRATIONS, Migration, database_path, raw_connection, run, schema_versions};
use crate::store::*;

/// A database at `path` written by a build whose newest migration is the one before `version`.
fn open_before(path: &std::path::Path, version: u32) -> SqliteStore {
    let previous: Vec<Migration> = MIGRATIONS
        .iter()
        .filter(|migration| migration.version < version)
        .map(|migration| Migration { version: migration.version, sql: migration.sql })
        .collect();
    SqliteStore::open_with_migrations(path, &previous).unwrap()
}

/// Version 4 moves the `_` keys of node attributes into `nodes.record` and splits deadline
/// keys into (stack, node, generation).
#[test]
fn version_4_moves_private_keys_and_splits_deadline_keys() {
    let directory = tempfile::tempdir().unwrap();
    let path = database_path(directory.path());
    drop(open_before(&path, 4));
    assert_eq!(schema_versions(&path), [1, 2, 3]);
    let attributes = json!({"_id": "id-1", "config": "echo", "_definition": {"group": "script"},
        "_outcome": "COMPLETE", "_completed_once": true, "_members": ["g/a", "g/b"], "_expanded": 2,
        "deploy_stdout": "ok", "deploy_stderr": null, "flag": false, "nested": {"a": [true, 1.5]}, "_handle": "handle", "_count": 3, "_fingerprint": "f",
        "_outputs": [{"name": "x"}], "_actions": ["CREATE", "DELETE"], "_replace_values": {"a": 1}});
    raw_connection(&path)
        .execute_batch(&format!(
            "INSERT INTO stacks (name, id, action, state, status_reason, template, parameters,
                 hidden_parameters, generation, pending, deadline, created_at, updated_at)
             VALUES ('app', 'id-app', 'UPDATE', 'IN_PROGRESS', '', '', '{{}}', '[]', 2, 1, NULL, 1, 1);
             INSERT INTO nodes (stack, name, resource_type, generation, action, state, status_reason,
                 remaining, definition, attributes, updated_at)
             VALUES ('app', 'n/é', 'OS::Heat::SoftwareDeployment', 2, 'CREATE', 'INIT', '', 0, '{{}}', '{attributes}', 1),
                    ('app', 'plain', 'OS::Heat::SoftwareConfig', 2, 'CREATE', 'INIT', '', 0, '{{}}', '{{}}', 1);
             INSERT INTO deadlines (key, stack, node, due_at) VALUES
                 ('stack/app/2', 'app', NULL, 100),
                 ('wait/app/n/é/12', 'app', 'n/é', 200);"
        ))
        .unwrap();

    let store = SqliteStore::open(&path).unwrap();
    assert_eq!(schema_versions(&path)[..4], [1, 2, 3, 4], "every version up to 4 ran");
    let node = run(&store, |tx| tx.node("app", "n/é")).unwrap();
    let attributes = json!({"config": "echo", "deploy_stdout": "ok", "deploy_stderr": null, "flag": false,
        "nested": {"a": [true, 1.5]}});
    assert_eq!(node.attributes, attributes);
    let expected = NodeRecord {
        id: Some("id-1".to_owned()),
        definition: Some(json!({"group": "script"})),
        replace_values: Some(json!({"a": 1})),
        actions: vec!["CREATE".to_owned(), "DELETE".to_owned()],
        fingerprint: Some("f".to_owned()),
        outputs: vec![json!({"name": "x"})],
        outcome: Some(RunOutcome::Complete),
        completed_once: true,
        handle: Some("handle".to_owned()),
        count: Some(3),
        expanded: Some(2),
        members: vec!["g/a".to_owned(), "g/b".to_owned()],
        ..NodeRecord::default()
    };
    assert_eq!(node.record, expected);
    let plain = run(&store, |tx| tx.node("app", "plain")).unwrap();
    assert_eq!((plain.attributes.into_value(), plain.record), (json!({}), NodeRecord::default()));
    let deadlines = run(&store, |tx| tx.due_deadlines(1_000, 10));
    let stack_deadline = DeadlineRow { stack: "app".to_owned(), node: None, generation: 2, due_at: 100 };
    let wait_deadline =
        DeadlineRow { stack: "app".to_owned(), node: Some("n/é".to_owned()), generation: 12, due_at: 200 };
    assert_eq!(deadlines, [stack_deadline, wait_deadline]);
    store.integrity_check().unwrap();
}

/// Version 5 gives each entry the tokens it may render: its own signal and its stack's handles.
#[test]
fn version_5_lists_each_entrys_own_signal_and_its_stacks_handles() {
    let directory = tempfile::tempdir().unwrap();
    let path = database_path(directory.path());
    drop(open_before(&path, 5));
    raw_connection(&path)
        .execute_batch(
            "INSERT INTO servers (name, token_hash, created_at, metadata_version, metadata_body, published_at)
                 VALUES ('web1', 'h', 1, 1, '', 1);
             INSERT INTO stacks (name, id, action, state, status_reason, template, parameters,
                 hidden_parameters, generation, pending, deadline, created_at, updated_at)
             VALUES ('app', 'id-app', 'CREATE', 'IN_PROGRESS', '', '', '{}', '[]', 1, 1, NULL, 1, 1),
                    ('other', 'id-other', 'CREATE', 'IN_PROGRESS', '', '', '{}', '[]', 1, 1, NULL, 1, 1);
             INSERT INTO nodes (stack, name, resource_type, generation, action, state, status_reason,
                 remaining, definition, attributes, updated_at, record)
             VALUES ('app', 'handle', 'OS::Heat::WaitConditionHandle', 1, 'CREATE', 'COMPLETE', '', 0, '{}', '{}', 1, '{\"id\": \"h-app\"}'),
                    ('other', 'handle', 'OS::Heat::WaitConditionHandle', 1, 'CREATE', 'COMPLETE', '', 0, '{}', '{}', 1, '{\"id\": \"h-other\"}');
             INSERT INTO entries (server, stack, node, sort_key, entry)
                 VALUES ('web1', 'app', 'deploy', 'a', '{\"id\": \"d-1\"}'),
                        ('web1', 'other', 'deploy', 'b', '{\"name\": \"no id\"}');",
        )
        .unwrap();
    let store = SqliteStore::open(&path).unwrap();
    assert_eq!(schema_versions(&path)[..5], [1, 2, 3, 4, 5]);
    let tokens: Vec<Vec<String>> = run(&store, |tx| tx.entries("web1")).into_iter().map(|entry| entry.tokens).collect();
    assert_eq!(tokens, [vec!["signal:d-1".to_owned(), "handle:h-app".to_owned()], vec!["handle:h-other".to_owned()]]);
}

const DAY_MS: u64 = 86_400_000;

/// The wall clock, which SQLite's `retired_at` follows.
fn now_millis() -> u64 {
    let elapsed = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap();
    u64::try_from(elapsed.as_millis()).unwrap()
}

/// Version 7 dates the hashes retired before it as retired at the migration, so none is pruned
/// at once.
#[test]
fn version_7_dates_earlier_retired_hashes_now() {
    let directory = tempfile::tempdir().unwrap();
    let path = database_path(directory.path());
    drop(open_before(&path, 7));
    raw_connection(&path)
        .execute_batch("INSERT INTO retired_signals (hash, stack, node) VALUES ('old', 'app', 'deploy')")
        .unwrap();
    let store = SqliteStore::open(&path).unwrap();
    assert!(schema_versions(&path).contains(&7), "version 7 ran");
    let now = now_millis();
    let retention = HistoryRetention {
        retired_signals_ms: Some(DAY_MS),
        max_events_per_stack: None,
        deleted_stack_events_ms: None,
    };
    assert_eq!(run(&store, |tx| tx.prune_history(&retention, now)).retired_signals, 0);
    assert_eq!(run(&store, |tx| tx.prune_history(&retention, now + 2 * DAY_MS)).retired_signals, 1);
}

/// Version 8 gives every server registered before it an empty set of addresses.
#[test]
fn version_8_gives_existing_servers_no_addresses() {
    let directory = tempfile::tempdir().unwrap();
    let path = database_path(directory.path());
    drop(open_before(&path, 8));
    raw_connection(&path)
        .execute_batch(
            "INSERT INTO servers (name, token_hash, created_at, metadata_version, metadata_body, published_at)
                 VALUES ('web1', 'h', 1, 1, '', 1);",
        )
        .unwrap();
    let store = SqliteStore::open(&path).unwrap();
    assert_eq!(schema_versions(&path)[..8], [1, 2, 3, 4, 5, 6, 7, 8]);
    let server = run(&store, |tx| tx.server("web1")).unwrap();
    assert_eq!(server.addresses, json!({}));
    let mut registered = super::server_row("web2");
    registered.addresses = json!({"addresses": ["2001:db8::1"]});
    run(&store, |tx| tx.insert_server(&registered));
    assert_eq!(run(&store, |tx| tx.server("web2")), Some(registered));
}

/// Version 10 adds the web view's sessions in a table of their own: a database written before it
/// opens, its tables are as they were (definitions and rows), and sessions can be kept at once.
#[test]
fn version_10_adds_ui_sessions_and_changes_no_earlier_table() {
    let directory = tempfile::tempdir().unwrap();
    let path = database_path(directory.path());
    let older = open_before(&path, 10);
    run(&older, |tx| tx.insert_server(&super::server_row("web1")));
    drop(older);
    insert_stack_before_11(&path, "app");
    let definitions = || {
        let connection = raw_connection(&path);
        let mut statement = connection
            // Version 11 adds columns to these two (its own test checks it changes nothing else).
            .prepare(
                "SELECT name, sql FROM sqlite_master WHERE name NOT LIKE 'ui_sessions%' \
                 AND name NOT IN ('stacks', 'stack_templates') ORDER BY name",
            )
            .unwrap();
        let rows = statement.query_map([], |row| Ok((row.get::<_, String>(0)?, row.get::<_, Option<String>>(1)?)));
        rows.unwrap().map(Result::unwrap).collect::<Vec<_>>()
    };
    let before = definitions();

    let store = SqliteStore::open(&path).unwrap();
    assert_eq!(schema_versions(&path)[..10], [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
    assert_eq!(definitions(), before, "no earlier table or index changed");
    assert_eq!(run(&store, |tx| tx.server("web1")), Some(super::server_row("web1")));
    assert!(run(&store, |tx| tx.stack("app")).is_some());
    let session = UiSessionRow { key: "k".repeat(64), created_at: 1, expires_at: 2 };
    assert!(run(&store, |tx| tx.insert_ui_session(&session)));
    assert_eq!(run(&store, |tx| tx.ui_session(&session.key)), Some(session));
}

/// A stack row as a build before version 11 wrote it (no rollback setting, no requests).
fn insert_stack_before_11(path: &std::path::Path, name: &str) {
    raw_connection(path)
        .execute_batch(&format!(
            "INSERT INTO stacks (id, name, action, state, status_reason, template, parameters, hidden_parameters,
                 generation, pending, deadline, created_at, updated_at, evaluated_bytes, resource_count)
             VALUES ('id-{name}', '{name}', 'UPDATE', 'COMPLETE', '', '', '{{}}', '[]', 2, 0, NULL, 1, 2, 0, 1);
             INSERT INTO stack_templates (stack, template) VALUES ('{name}', 'heat_template_version: 2018-08-31');"
        ))
        .unwrap();
}

/// Version 11 gives existing stacks Heat's default (no rollback) and no stored requests (so
/// an update's rollback has nothing to return to until the stack is updated again), and
/// changes no other table.
#[test]
fn version_11_gives_existing_stacks_no_rollback_and_no_requests() {
    let directory = tempfile::tempdir().unwrap();
    let path = database_path(directory.path());
    drop(open_before(&path, 11));
    insert_stack_before_11(&path, "app");
    let definitions = || {
        let connection = raw_connection(&path);
        let mut statement = connection
            .prepare(
                "SELECT name, sql FROM sqlite_master WHERE name NOT IN ('stacks', 'stack_templates') ORDER BY name",
            )
            .unwrap();
        let rows = statement.query_map([], |row| Ok((row.get::<_, String>(0)?, row.get::<_, Option<String>>(1)?)));
        rows.unwrap().map(Result::unwrap).collect::<Vec<_>>()
    };
    let before = definitions();
    let store = SqliteStore::open(&path).unwrap();
    assert_eq!(schema_versions(&path)[..11], [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]);
    assert_eq!(definitions(), before, "no other table or index changed");
    let stack = run(&store, |tx| tx.stack("app")).unwrap();
    assert_eq!((stack.rollback, stack.generation), (Rollback::Disabled, 2));
    assert_eq!(run(&store, |tx| tx.stack_requests("app")), StoredRequests::default());
    assert_eq!(run(&store, |tx| tx.stack_template("app")).as_deref(), Some("heat_template_version: 2018-08-31"));
    // A value outside the set is refused by the column's check.
    let refused = raw_connection(&path).execute("UPDATE stacks SET rollback = 'sometimes'", []);
    assert!(refused.is_err(), "{refused:?}");
}
