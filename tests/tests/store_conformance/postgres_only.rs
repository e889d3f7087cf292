//! What only the PostgreSQL backend has: versioned migrations run by whichever replica opens the
//! database first (from an empty database, from the previous schema, refused when the schema is
//! newer than this build, several replicas opening at once), the secrets replicas share, and a
//! `read` that PostgreSQL itself keeps read-only.

use std::sync::Barrier;
use std::thread;

use anneal_shim::store::{
    POSTGRES_NODE_BY_SIGNAL_HASH, PgStore, Rollback, StackRow, Store, StoreError, StoredRequests, UiSessionRow,
};
use anneal_tests::Postgres;

use crate::DATABASE;
use crate::fixtures::{TEMPLATE, deadline, entry_row, node_row, run, server_row, stack_row, wait_signal, with_stack};

/// The versions `schema_version` lists, comma-separated, in order.
fn recorded_versions(postgres: &Postgres) -> String {
    postgres.psql(DATABASE, "SELECT string_agg(version::text, ',' ORDER BY version) FROM schema_version")
}

/// `1,2,...` up to the newest version this build knows.
fn every_version() -> String {
    (1..=PgStore::schema_version()).map(|version| version.to_string()).collect::<Vec<_>>().join(",")
}

#[test]
fn migrations_from_an_empty_database_record_every_version_once() {
    let postgres = Postgres::start(false);
    let url = postgres.create_database(DATABASE);
    assert!(PgStore::schema_version() >= 2, "v1 is the tables, v2 the shared secrets");
    drop(PgStore::open(&url).unwrap());
    assert_eq!(recorded_versions(&postgres), every_version());
    // Opening again finds nothing to do (a migration run twice would fail on CREATE TABLE).
    let store = PgStore::open(&url).unwrap();
    assert_eq!(recorded_versions(&postgres), every_version());
    with_stack(&store);
}

#[test]
fn opening_with_a_newer_build_upgrades_the_previous_schema_and_keeps_its_rows() {
    let postgres = Postgres::start(false);
    let url = postgres.create_database(DATABASE);
    let previous = PgStore::open_at_schema_version(&url, 1).unwrap();
    assert_eq!(recorded_versions(&postgres), "1");
    assert_eq!(postgres.psql(DATABASE, "SELECT to_regclass('shared_secrets') IS NULL"), "t", "v2 not applied");
    // The stack as that build wrote it: this build's statements name columns added since (v3).
    run(&previous, |tx| tx.insert_server(&server_row("web1")));
    postgres.psql(
        DATABASE,
        &format!(
            "INSERT INTO stacks (id, name, action, state, status_reason, parameters, hidden_parameters, generation, \
             pending, deadline, created_at, updated_at) VALUES ('id-app', 'app', 'CREATE', 'IN_PROGRESS', '', \
             '{{\"flavor\": \"m1.small\", \"password\": \"hunter2\"}}', '[\"password\"]', 1, 0, 9000, 1000, 1000); \
             INSERT INTO stack_templates (stack, template) VALUES ('app', '{TEMPLATE}')"
        ),
    );
    run(&previous, |tx| {
        tx.insert_node(&node_row("app", "deploy"))?;
        tx.put_entry(&entry_row("web1", "app", "deploy", "0001"))?;
        tx.upsert_wait_signal(&wait_signal("app", "handle", "1", 1))?;
        tx.put_deadline(&deadline("app", None, 1, 10))?;
        tx.append_event("app", 1, "app", "CREATE_IN_PROGRESS", "").map(drop)
    });
    let before = run(&previous, |tx| Ok((tx.servers()?, tx.nodes("app")?, tx.events("app")?)));
    drop(previous);

    let upgraded = PgStore::open(&url).unwrap();
    assert_eq!(recorded_versions(&postgres), every_version());
    let after = run(&upgraded, |tx| Ok((tx.servers()?, tx.nodes("app")?, tx.events("app")?)));
    assert_eq!(after, before, "the rows written under v1 are all there");
    // Before v3 it had used none of its limits; before v5 it had Heat's default, no rollback.
    let stored = StackRow { evaluated_bytes: 0, resource_count: 0, rollback: Rollback::Disabled, ..stack_row("app") };
    assert_eq!(run(&upgraded, |tx| tx.stacks()), [stored], "a stack stored before v3 and v5");
    run(&upgraded, |tx| {
        assert_eq!(tx.stack_template("app")?.as_deref(), Some(TEMPLATE));
        assert_eq!(tx.stack_requests("app")?, StoredRequests::default(), "no request stored before v5");
        assert_eq!(tx.entries("web1")?.len(), 1);
        assert_eq!(tx.wait_signals("app", "handle")?, [wait_signal("app", "handle", "1", 1)]);
        assert_eq!(tx.due_deadlines(10, 10)?, [deadline("app", None, 1, 10)]);
        Ok(())
    });
    assert_eq!(upgraded.shared_secret("key", || "made".to_owned()).unwrap(), "made", "v2's table is usable");
    let session = UiSessionRow { key: "k".to_owned(), created_at: 1, expires_at: 2 };
    assert!(run(&upgraded, |tx| tx.insert_ui_session(&session)), "v3's table is usable");

    // The previous build now refuses the schema rather than writing to it.
    let error = PgStore::open_at_schema_version(&url, 1).unwrap_err();
    let found = PgStore::schema_version();
    assert!(matches!(error, StoreError::SchemaTooNew { found: f, supported: 1 } if f == found), "{error:?}");
}

#[test]
fn a_schema_newer_than_this_build_is_refused() {
    let postgres = Postgres::start(false);
    let url = postgres.create_database(DATABASE);
    drop(PgStore::open(&url).unwrap());
    let newer = PgStore::schema_version() + 1;
    postgres.psql(DATABASE, &format!("INSERT INTO schema_version (version, applied_at) VALUES ({newer}, 0)"));
    let error = PgStore::open(&url).unwrap_err();
    let supported = PgStore::schema_version();
    let refused = matches!(error, StoreError::SchemaTooNew { found, supported: reported }
        if found == newer && reported == supported);
    assert!(refused, "{error:?}");
    assert_eq!(postgres.psql(DATABASE, "SELECT MAX(version) FROM schema_version"), newer.to_string(), "left as it was");
}

/// How many replicas open the empty database at the same moment.
const REPLICAS: usize = 6;

#[test]
fn replicas_opening_an_empty_database_together_all_succeed() {
    let postgres = Postgres::start(false);
    let url = postgres.create_database(DATABASE);
    let start_together = Barrier::new(REPLICAS);
    let stores: Vec<PgStore> = thread::scope(|scope| {
        let openers: Vec<_> = (0..REPLICAS)
            .map(|_| {
                scope.spawn(|| {
                    start_together.wait();
                    PgStore::open(&url)
                })
            })
            .collect();
        openers.into_iter().map(|opener| opener.join().unwrap().unwrap()).collect()
    });
    assert_eq!(recorded_versions(&postgres), every_version(), "each migration ran once");
    for (index, store) in stores.iter().enumerate() {
        assert!(run(store, |tx| tx.insert_server(&server_row(&format!("web{index}")))), "replica {index} writes");
    }
    assert_eq!(run(&stores[0], |tx| tx.servers()).len(), REPLICAS);
}

#[test]
fn replicas_agree_on_shared_secrets() {
    let postgres = Postgres::start(false);
    let url = postgres.create_database(DATABASE);
    let (first, second) = (PgStore::open(&url).unwrap(), PgStore::open(&url).unwrap());
    assert_eq!(first.shared_secret("token-key", || "first's".to_owned()).unwrap(), "first's");
    assert_eq!(second.shared_secret("token-key", || "second's".to_owned()).unwrap(), "first's", "the first one wins");
    assert_eq!(second.shared_secret("admin-hash", || "second's".to_owned()).unwrap(), "second's", "per name");
    assert_eq!(first.shared_secret("admin-hash", || "first's".to_owned()).unwrap(), "second's");

    // Replicas starting together: whichever INSERT wins, every one reads the same value.
    let start_together = Barrier::new(REPLICAS);
    let agreed: Vec<String> = thread::scope(|scope| {
        let racers: Vec<_> = (0..REPLICAS)
            .map(|index| {
                let (url, start_together) = (&url, &start_together);
                scope.spawn(move || {
                    let store = PgStore::open(url).unwrap();
                    start_together.wait();
                    store.shared_secret("raced", || format!("replica {index}")).unwrap()
                })
            })
            .collect();
        racers.into_iter().map(|racer| racer.join().unwrap()).collect()
    });
    assert!(agreed.iter().all(|value| *value == agreed[0]), "{agreed:?}");
    assert!(agreed[0].starts_with("replica "), "{agreed:?}");
    assert_eq!(postgres.psql(DATABASE, "SELECT COUNT(*) FROM shared_secrets"), "3");
}

#[test]
fn a_write_inside_read_is_refused() {
    // `read` takes no write lock, so PostgreSQL itself must refuse what it would let through
    // unserialised: the transaction is READ ONLY.
    let postgres = Postgres::start(false);
    let store = PgStore::open(&postgres.create_database(DATABASE)).unwrap();
    let result = store.read(|tx| tx.insert_server(&server_row("web1")));
    assert!(matches!(result, Err(StoreError::Query { action: "insert a server", .. })), "{result:?}");
    assert!(run(&store, |tx| tx.servers()).is_empty(), "nothing stored");
    assert!(run(&store, |tx| tx.insert_stack(&stack_row("app"), TEMPLATE)), "and the connection is usable");
}

/// A signal's token lookup keeps to the hash's index in the plan PostgreSQL caches for a
/// prepared statement (the generic plan, used after five executions), with many nodes written
/// in one transaction and no statistics yet: with `ORDER BY seq LIMIT 1` that plan walked the
/// primary key and filtered (seen here from about 10,000 nodes; 3.4 ms per lookup at 10,000).
#[test]
fn the_signal_token_lookup_keeps_to_the_hash_index_in_a_generic_plan() {
    let postgres = Postgres::start(false);
    let store = PgStore::open(&postgres.create_database(DATABASE)).unwrap();
    with_stack(&store);
    run(&store, |tx| {
        for index in 0..20_000 {
            tx.insert_node(&node_row("app", &format!("node{index:05}")))?;
        }
        Ok(())
    });
    let plan = postgres.psql(
        DATABASE,
        &format!(
            "SET plan_cache_mode = force_generic_plan; PREPARE lookup(text) AS {POSTGRES_NODE_BY_SIGNAL_HASH}; \
             EXPLAIN EXECUTE lookup('signal-app-node19999')"
        ),
    );
    assert!(plan.contains("nodes_signal_token_hash") && !plan.contains("nodes_pkey"), "{plan}");
}
