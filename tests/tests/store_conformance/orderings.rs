//! Every ordered listing sorts names bytewise, as SQLite's BINARY collation does and as the
//! engine relies on (document entries in `sort_key` order, deadlines fired in a stable order,
//! replicas walking `document_versions` beside their own sorted caches). On PostgreSQL the
//! schema pins the "C" collation on each key; a database created with a linguistic default
//! collation (what a production cluster usually has) must sort the same.

use anneal_shim::store::{NodeRow, PgStore, Store};
use anneal_tests::Postgres;

use crate::fixtures::{TEMPLATE, deadline, entry_row, node_row, run, server_row, stack_row};

crate::conformance!(one store: orderings_are_bytewise);

/// Names whose bytewise order differs from a linguistic one: case, punctuation, digits and a
/// letter beyond ASCII. The first is the parent the others' rows hang off.
const NAMES: [&str; 8] = ["b", "B", "a-b", "a_b", "\u{e4}", "z", "A10", "A9"];

fn orderings_are_bytewise<S: Store>(store: &S) {
    let parent = NAMES[0];
    run(store, |tx| {
        for name in NAMES {
            tx.insert_server(&server_row(name))?;
            tx.insert_stack(&stack_row(name), TEMPLATE)?;
            tx.insert_node(&NodeRow { server: Some(parent.to_owned()), ..node_row(name, "deploy") })?;
            tx.insert_edge(parent, "config", name)?;
            tx.put_entry(&entry_row(parent, parent, name, name))?;
            tx.put_deadline(&deadline(parent, Some(name), 1, 10))?;
        }
        Ok(())
    });
    let mut bytewise: Vec<String> = NAMES.iter().map(|name| (*name).to_owned()).collect();
    bytewise.sort();
    run(store, |tx| {
        let servers: Vec<String> = tx.servers()?.into_iter().map(|row| row.name).collect();
        assert_eq!(servers, bytewise, "servers");
        let versions: Vec<String> = tx.document_versions()?.into_iter().map(|(name, _)| name).collect();
        assert_eq!(versions, bytewise, "document_versions");
        let stacks: Vec<String> = tx.stacks()?.into_iter().map(|row| row.name).collect();
        assert_eq!(stacks, bytewise, "stacks");
        assert_eq!(tx.stacks_using_server(parent)?, bytewise, "stacks_using_server");
        assert_eq!(tx.successors(parent, "config")?, bytewise, "successors");
        let entries: Vec<String> = tx.entries(parent)?.into_iter().map(|row| row.sort_key).collect();
        assert_eq!(entries, bytewise, "entries");
        let due: Vec<String> = tx.due_deadlines(10, 100)?.into_iter().filter_map(|row| row.node).collect();
        assert_eq!(due, bytewise, "due_deadlines");
        Ok(())
    });
}

#[test]
fn orderings_are_bytewise_in_a_database_with_a_linguistic_collation_on_postgres() {
    let postgres = Postgres::start(false);
    let database = "linguistic";
    postgres.psql(
        "postgres",
        &format!("CREATE DATABASE {database} TEMPLATE template0 LOCALE_PROVIDER icu ICU_LOCALE 'en-US'"),
    );
    // The database must really sort linguistically, or this check would prove nothing.
    let sample = "SELECT string_agg(name, ',' ORDER BY name) FROM (VALUES ('b'), ('B'), ('a_b')) AS names (name)";
    assert_eq!(postgres.psql(database, sample), "a_b,b,B");
    let store = PgStore::open(&postgres.url(database)).unwrap();
    orderings_are_bytewise(&store);
}
