//! Tests of what only the SQLite backend has: fixtures here, then opening, pragmas, durability,
//! statement counts, integrity checks and query plans; `batching` the group commit, `migration`
//! the SQLite migrations of stored rows. What every backend must do (each `Tx` method, the
//! transaction boundary, contention, retention) is the store conformance suite's, which runs it
//! on SQLite and PostgreSQL alike: tests/tests/store_conformance.rs.

mod batching;
mod migration;

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use serde_json::json;

use super::sqlite::{MIGRATIONS, Migration};
use super::*;

pub(super) fn server_row(name: &str) -> ServerRow {
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

/// The template text the test stacks are stored with.
pub(super) const TEMPLATE: &str = "heat_template_version: 2018-08-31";

pub(super) fn stack_row(name: &str) -> StackRow {
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

pub(super) fn node_row(stack: &str, name: &str) -> NodeRow {
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

/// Runs `work` in a transaction that must succeed.
pub(super) fn run<T>(store: &SqliteStore, work: impl FnOnce(&mut dyn Tx) -> Result<T, StoreError>) -> T {
    store.transaction(work).unwrap()
}

fn database_path(directory: &Path) -> PathBuf {
    directory.join("nested").join("dir").join("shim.db")
}

fn raw_connection(path: &Path) -> rusqlite::Connection {
    rusqlite::Connection::open(path).unwrap()
}

fn schema_versions(path: &Path) -> Vec<u32> {
    let connection = raw_connection(path);
    let mut statement = connection.prepare("SELECT version FROM schema_version ORDER BY version").unwrap();
    statement.query_map([], |row| row.get(0)).unwrap().map(Result::unwrap).collect()
}

#[test]
fn open_creates_private_file_and_directory() {
    let directory = tempfile::tempdir().unwrap();
    let path = database_path(directory.path());
    let store = SqliteStore::open(&path).unwrap();
    run(&store, |tx| tx.insert_server(&server_row("web1")));
    let mode = |path: &Path| fs::metadata(path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&path), 0o600);
    assert_eq!(mode(path.parent().unwrap()), 0o700);
    // SQLite gives its side files the database's mode; they hold the same secrets.
    for suffix in ["-wal", "-shm"] {
        let side = PathBuf::from(format!("{}{suffix}", path.display()));
        assert_eq!(mode(&side), 0o600, "{}", side.display());
    }
    assert_eq!(store.path(), Some(path.as_path()));
}

#[test]
fn open_configures_durability() {
    let directory = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(&database_path(directory.path())).unwrap();
    assert_eq!(store.pragma_value("journal_mode"), "wal");
    assert_eq!(store.pragma_value("synchronous"), "2", "FULL");
    assert_eq!(store.pragma_value("foreign_keys"), "1");
    assert_eq!(store.pragma_value("busy_timeout"), "5000");
    assert_eq!(store.pragma_value("journal_size_limit"), "67108864");
}

#[test]
fn open_reports_an_unusable_path() {
    let directory = tempfile::tempdir().unwrap();
    let blocker = directory.path().join("file");
    fs::write(&blocker, "not a directory").unwrap();
    let error = SqliteStore::open(&blocker.join("shim.db")).unwrap_err();
    assert!(matches!(error, StoreError::CreateDirectory { ref path, .. } if *path == blocker), "{error:?}");

    let not_a_database = directory.path().join("garbage.db");
    fs::write(&not_a_database, vec![b'x'; 4096]).unwrap();
    assert!(SqliteStore::open(&not_a_database).is_err());
}

#[test]
fn data_survives_reopen() {
    let directory = tempfile::tempdir().unwrap();
    let path = database_path(directory.path());
    let store = SqliteStore::open(&path).unwrap();
    run(&store, |tx| {
        tx.insert_server(&server_row("web1"))?;
        tx.insert_stack(&stack_row("app"), TEMPLATE)?;
        tx.insert_node(&node_row("app", "deploy"))
    });
    drop(store);
    let store = SqliteStore::open(&path).unwrap();
    let (server, stack, node) = run(&store, |tx| Ok((tx.server("web1")?, tx.stack("app")?, tx.node("app", "deploy")?)));
    assert_eq!(server, Some(server_row("web1")));
    assert_eq!(stack, Some(stack_row("app")));
    assert_eq!(node, Some(node_row("app", "deploy")));
    store.integrity_check().unwrap();
}

/// Every migration of this build, plus `extra` as the next version.
fn with_next(extra: &'static str) -> (Vec<Migration>, u32) {
    let mut migrations: Vec<Migration> =
        MIGRATIONS.iter().map(|migration| Migration { version: migration.version, sql: migration.sql }).collect();
    let next = MIGRATIONS.len() as u32 + 1;
    migrations.push(Migration { version: next, sql: extra });
    (migrations, next)
}

#[test]
fn migrations_run_once() {
    let directory = tempfile::tempdir().unwrap();
    let path = database_path(directory.path());
    drop(SqliteStore::open(&path).unwrap());
    drop(SqliteStore::open(&path).unwrap());
    let current: Vec<u32> = MIGRATIONS.iter().map(|migration| migration.version).collect();
    assert_eq!(schema_versions(&path), current);

    // A further migration that would fail if it ran twice (CREATE TABLE without IF NOT EXISTS).
    let (extended, next) = with_next("CREATE TABLE extra (x INTEGER)");
    drop(SqliteStore::open_with_migrations(&path, &extended).unwrap());
    drop(SqliteStore::open_with_migrations(&path, &extended).unwrap());
    let mut expected = current.clone();
    expected.push(next);
    assert_eq!(schema_versions(&path), expected);

    // An older build refuses a newer schema rather than writing to it.
    let error = SqliteStore::open(&path).unwrap_err();
    let supported = next - 1;
    assert!(
        matches!(error, StoreError::SchemaTooNew { found, supported: s } if found == next && s == supported),
        "{error:?}"
    );
}

#[test]
fn failed_migration_leaves_previous_version() {
    let directory = tempfile::tempdir().unwrap();
    let path = database_path(directory.path());
    drop(SqliteStore::open(&path).unwrap());
    let current: Vec<u32> = MIGRATIONS.iter().map(|migration| migration.version).collect();
    let (broken, next) = with_next("CREATE TABLE half (x INTEGER); THIS IS NOT SQL");
    let error = SqliteStore::open_with_migrations(&path, &broken).unwrap_err();
    assert!(matches!(error, StoreError::Migration { version, .. } if version == next), "{error:?}");
    assert_eq!(schema_versions(&path), current);
    let half_tables: i64 = raw_connection(&path)
        .query_row("SELECT COUNT(*) FROM sqlite_master WHERE name = 'half'", [], |row| row.get(0))
        .unwrap();
    assert_eq!(half_tables, 0);
    SqliteStore::open(&path).unwrap();
}

#[test]
fn statements_are_counted() {
    let store = SqliteStore::open_in_memory().unwrap();
    assert_eq!(store.statements(), 0);
    run(&store, |tx| tx.insert_server(&server_row("web1")));
    // BEGIN, SAVEPOINT, INSERT, RELEASE, COMMIT.
    assert_eq!(store.statements(), 5);
    run(&store, |tx| {
        tx.server("web1")?;
        tx.servers()
    });
    assert_eq!(store.statements(), 11);
    // BEGIN, SAVEPOINT, UPDATE, ROLLBACK TO, RELEASE, ROLLBACK.
    let _ = store.transaction(|tx| tx.touch_server("missing", 1));
    assert_eq!(store.statements(), 17);
    assert_eq!(store.commits(), 2, "a call that kept nothing skips the COMMIT");
}

/// A deployment is inserted and then marked IN_PROGRESS in the same call (each member of a
/// 10,000-server group did both): the row cache sends one INSERT for the two.
#[test]
fn a_node_inserted_then_updated_in_one_call_is_one_statement() {
    let store = SqliteStore::open_in_memory().unwrap();
    run(&store, |tx| {
        tx.insert_server(&server_row("web1"))?;
        tx.insert_stack(&stack_row("app"), TEMPLATE)
    });
    let before = store.statements();
    run(&store, |tx| {
        let row = node_row("app", "deploy");
        tx.insert_node(&row)?;
        tx.update_node(&NodeRow { state: NodeState::Complete, ..row.clone() })?;
        tx.update_node(&NodeRow { state: NodeState::Complete, status_reason: "done".into(), ..row })
    });
    // BEGIN, SAVEPOINT, INSERT, RELEASE, COMMIT.
    assert_eq!(store.statements() - before, 5);
    let stored = store.read(|tx| tx.node("app", "deploy")).unwrap().expect("stored");
    assert_eq!((stored.state, stored.status_reason.as_str()), (NodeState::Complete, "done"));
}

/// Each statement a signal or a poll runs keeps its compiled plan whatever it is bound to:
/// a re-preparation per execution once held the throughput bench to ~2,900 signals/s (~5,000 without).
#[test]
fn hot_statements_are_not_prepared_again_on_rebind() {
    let store = SqliteStore::open_in_memory().unwrap();
    run(&store, |tx| {
        tx.insert_server(&server_row("web1"))?;
        tx.insert_stack(&stack_row("app"), TEMPLATE)?;
        for name in ["a", "b", "c"] {
            tx.insert_node(&node_row("app", name))?;
            tx.put_entry(&EntryRow {
                server: "web1".to_owned(),
                stack: "app".to_owned(),
                node: name.to_owned(),
                sort_key: name.to_owned(),
                entry: json!({"name": name}),
                tokens: Vec::new(),
            })?;
        }
        tx.insert_edge("app", "a", "b")?;
        tx.insert_edge("app", "b", "c")
    });
    for name in ["a", "b", "c", "a", "missing"] {
        // One transaction per round: the row cache would answer a repeated read itself.
        run(&store, |tx| {
            tx.node_by_signal_hash(&format!("signal-app-{name}"))?;
            tx.successors("app", name)?;
            tx.nodes("app")?;
            tx.entries("web1")?;
            tx.entry_texts("web1")?;
            tx.events("app")?;
            tx.wait_signals("app", name)?;
            tx.due_deadlines(1_000, 10)?;
            tx.stacks_using_server("web1")
        });
    }
    assert_eq!(store.reprepares(), 0);
}

#[test]
fn integrity_check_passes_and_reports_orphans() {
    let directory = tempfile::tempdir().unwrap();
    let path = database_path(directory.path());
    let store = SqliteStore::open(&path).unwrap();
    run(&store, |tx| {
        tx.insert_stack(&stack_row("app"), TEMPLATE)?;
        tx.insert_node(&node_row("app", "deploy"))
    });
    store.integrity_check().unwrap();
    // A writer that bypasses foreign keys.
    let raw = raw_connection(&path);
    raw.pragma_update(None, "foreign_keys", "OFF").unwrap();
    raw.execute("UPDATE nodes SET stack = 'ghost'", []).unwrap();
    let error = store.integrity_check().unwrap_err();
    assert!(matches!(error, StoreError::Integrity { ref report } if report.contains("nodes")), "{error:?}");
}

#[test]
fn corrupt_json_column_is_a_decode_error() {
    let directory = tempfile::tempdir().unwrap();
    let path = database_path(directory.path());
    let store = SqliteStore::open(&path).unwrap();
    run(&store, |tx| tx.insert_stack(&stack_row("app"), TEMPLATE));
    raw_connection(&path).execute("UPDATE stacks SET parameters = '{not json'", []).unwrap();
    let error = store.transaction(|tx| tx.stack("app")).unwrap_err();
    assert!(matches!(error, StoreError::Decode { column: "stacks.parameters", .. }), "{error:?}");
}

#[test]
fn indexed_lookups_use_their_indexes() {
    let store = SqliteStore::open_in_memory().unwrap();
    let check = |sql: &str, index: &str| {
        let plan = store.query_plan(sql);
        assert!(plan.contains(index), "{sql}: {plan}");
        assert!(!plan.contains("TEMP B-TREE"), "{sql} sorts: {plan}");
    };
    check("SELECT name FROM servers WHERE token_hash = 'x'", "servers_token_hash");
    check("SELECT name FROM nodes WHERE signal_token_hash = 'x' ORDER BY seq LIMIT 1", "nodes_signal_token_hash");
    check("SELECT to_node FROM edges WHERE stack = 's' AND from_node = 'a' ORDER BY to_node", "PRIMARY KEY");
    check("SELECT entry FROM entries WHERE server = 'w' ORDER BY sort_key, stack, node", "entries_server_sort_key");
    let due =
        "SELECT stack, node, generation FROM deadlines WHERE due_at <= 5 ORDER BY due_at, stack, node, generation";
    check(due, "deadlines_due_at");
    check("SELECT reason FROM events WHERE stack = 's' ORDER BY id", "events_stack");
    check("SELECT data FROM wait_signals WHERE stack = 's' AND handle = 'h'", "wait_signals_signal_id");
}

#[test]
fn database_urls() {
    let path = |url: &str| match parse_database_url(url).unwrap() {
        DatabaseUrl::Sqlite(path) => path,
        DatabaseUrl::Postgres(url) => panic!("{url} taken for PostgreSQL"),
    };
    assert_eq!(path("sqlite:///var/lib/anneal/shim.db"), PathBuf::from("/var/lib/anneal/shim.db"));
    assert_eq!(path("sqlite://data/shim.db"), PathBuf::from("data/shim.db"));
    assert_eq!(path("/srv/shim.db"), PathBuf::from("/srv/shim.db"));
    assert_eq!(path("shim.db"), PathBuf::from("shim.db"));
    for url in ["postgres://db/anneal", "postgresql://u:p@db:5433/anneal?host=/run/pg"] {
        assert_eq!(parse_database_url(url).unwrap(), DatabaseUrl::Postgres(url.to_owned()));
    }
    for url in ["sqlite://", "", "sqlite:shim.db", "mysql://db", "sqlite:///x.db?mode=ro"] {
        assert!(matches!(parse_database_url(url), Err(StoreError::UnsupportedUrl { .. })), "{url}");
    }
}

#[test]
fn debug_output_hides_secrets() {
    let stack = format!("{:?}", stack_row("app"));
    assert!(!stack.contains("hunter2") && stack.contains("m1.small"), "{stack}");
    let mut server = server_row("web1");
    server.metadata_body = r#"{"deploy_signal_id": "http://shim/v1/signals/SECRET"}"#.to_owned();
    assert!(!format!("{server:?}").contains("SECRET"));
    let entry = EntryRow {
        server: "web1".to_owned(),
        stack: "app".to_owned(),
        node: "deploy".to_owned(),
        sort_key: "0001".to_owned(),
        entry: json!({"inputs": [{"name": "deploy_signal_id", "value": "SECRET"}]}),
        tokens: Vec::new(),
    };
    assert!(!format!("{entry:?}").contains("SECRET"));
}

#[test]
fn migration_3_moves_templates_out_of_the_stack_rows() {
    let directory = tempfile::tempdir().unwrap();
    let path = database_path(directory.path());
    let before_v3: Vec<Migration> = MIGRATIONS
        .iter()
        .filter(|migration| migration.version < 3)
        .map(|migration| Migration { version: migration.version, sql: migration.sql })
        .collect();
    drop(SqliteStore::open_with_migrations(&path, &before_v3).unwrap());
    {
        let connection = rusqlite::Connection::open(&path).unwrap();
        connection
            .execute(
                "INSERT INTO stacks (id, name, action, state, status_reason, template, parameters, hidden_parameters,
                     generation, pending, deadline, created_at, updated_at)
                 VALUES ('id-old', 'old', 'CREATE', 'COMPLETE', '', 'the old template', '{}', '[]', 1, 0, NULL, 1, 1)",
                [],
            )
            .unwrap();
    }
    let store = SqliteStore::open(&path).unwrap();
    assert_eq!(run(&store, |tx| tx.stack_template("old")).as_deref(), Some("the old template"));
    assert_eq!(run(&store, |tx| tx.stack("old")).map(|stack| stack.generation), Some(1));
    run(&store, |tx| tx.delete_stack("old"));
    assert_eq!(run(&store, |tx| tx.stack_template("old")), None, "deleted with its stack");
    store.integrity_check().unwrap();
}
