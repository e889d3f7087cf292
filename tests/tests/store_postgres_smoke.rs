//! temporary smoke test
use anneal_shim::store::{PgStore, Store, ServerRow};
use anneal_tests::Postgres;

#[test]
fn smoke() {
    let postgres = Postgres::start(false);
    let url = postgres.create_database("smoke");
    let store = PgStore::open(&url).unwrap();
    let row = ServerRow {
        name: "web1".into(), token_hash: "h".into(), created_at: 1, metadata_version: 0, metadata_body: "{}".into(),
        published_at: 1, last_seen: None, addresses: serde_json::json!({}),
    };
    assert!(store.transaction(|tx| tx.insert_server(&row)).unwrap());
    assert_eq!(store.read(|tx| tx.server("web1")).unwrap(), Some(row));
    println!("statements {}", store.statements());
    let again = PgStore::open(&url).unwrap();
    assert_eq!(again.shared_secret("k", || "a".into()).unwrap(), "a");
    assert_eq!(store.shared_secret("k", || "b".into()).unwrap(), "a");
}
