//! Servers and their documents: registration, lookups by name and token hash, document
//! versions, token rotation with one previous token, the entries a document is rendered from,
//! and what `delete_server` takes with it.

use anneal_shim::store::{ServerRow, Store, StoreError};
use serde_json::json;

use crate::fixtures::{TEMPLATE, entry_row, node_row, run, server_row, stack_row, with_stack};

crate::conformance!(one store:
    servers_insert_read_list_and_update,
    document_versions_follow_publications,
    one_call_publishes_the_documents_of_many_servers,
    entries_upsert_order_and_remove,
    entry_sizes_are_their_stored_bytes,
    delete_server_takes_its_token_and_entries_and_names_its_users,
    server_tokens_rotate_keep_one_previous_token_and_go_with_the_server,
);

fn servers_insert_read_list_and_update<S: Store>(store: &S) {
    assert!(run(store, |tx| tx.insert_server(&server_row("web2"))));
    assert!(run(store, |tx| tx.insert_server(&server_row("web1"))));
    let mut taken = server_row("web1");
    taken.token_hash = "another-hash".to_owned();
    assert!(!run(store, |tx| tx.insert_server(&taken)), "name taken");
    let mut same_hash = server_row("web3");
    same_hash.token_hash = server_row("web1").token_hash;
    assert!(store.transaction(|tx| tx.insert_server(&same_hash)).is_err(), "token hashes are unique");

    let names: Vec<String> = run(store, |tx| tx.servers()).into_iter().map(|row| row.name).collect();
    assert_eq!(names, ["web1", "web2"]);
    assert_eq!(run(store, |tx| tx.server("web1")), Some(server_row("web1")));
    assert_eq!(run(store, |tx| tx.server("nobody")), None);
    assert_eq!(run(store, |tx| tx.server_by_token_hash("hash-of-web2")), Some(server_row("web2")));
    assert_eq!(run(store, |tx| tx.server_by_token_hash("unknown")), None);

    run(store, |tx| {
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
    assert_eq!(run(store, |tx| tx.server("web1")), Some(expected));

    let missing = store.transaction(|tx| tx.set_server_document("nobody", 1, "{}", 1));
    assert!(matches!(missing, Err(StoreError::NotFound { kind: "server", ref key }) if key == "nobody"), "{missing:?}");
    assert!(matches!(store.transaction(|tx| tx.touch_server("nobody", 1)), Err(StoreError::NotFound { .. })));
}

fn document_versions_follow_publications<S: Store>(store: &S) {
    assert!(run(store, |tx| tx.document_versions()).is_empty());
    run(store, |tx| {
        for name in ["web2", "web1", "db1"] {
            tx.insert_server(&server_row(name))?;
        }
        tx.set_server_document("web2", 4, "{}", 2_000)?;
        tx.set_server_document("db1", 1, "{}", 2_000)
    });
    let versions = |pairs: &[(&str, u64)]| -> Vec<(String, u64)> {
        pairs.iter().map(|(name, version)| ((*name).to_owned(), *version)).collect()
    };
    // Ordered by name, so a replica can walk them beside its own sorted cache.
    assert_eq!(run(store, |tx| tx.document_versions()), versions(&[("db1", 1), ("web1", 0), ("web2", 4)]));
    run(store, |tx| {
        tx.set_server_document("web1", 9, r#"{"deployments": []}"#, 3_000)?;
        tx.delete_server("db1").map(drop)
    });
    assert_eq!(run(store, |tx| tx.document_versions()), versions(&[("web1", 9), ("web2", 4)]));
}

/// Servers whose documents one call publishes: names of the longest length the API allows, so
/// that their list is longer than one PostgreSQL notification can carry (8000 bytes).
const MANY_SERVERS: usize = 200;

fn one_call_publishes_the_documents_of_many_servers<S: Store>(store: &S) {
    let names: Vec<String> = (0..MANY_SERVERS).map(|index| format!("{index:0>64}")).collect();
    run(store, |tx| {
        for name in &names {
            tx.insert_server(&server_row(name))?;
        }
        Ok(())
    });
    run(store, |tx| {
        for name in &names {
            tx.set_server_document(name, 1, r#"{"deployments": []}"#, 2_000)?;
        }
        Ok(())
    });
    let versions = run(store, |tx| tx.document_versions());
    assert_eq!(versions, names.into_iter().map(|name| (name, 1)).collect::<Vec<_>>());
}

fn entries_upsert_order_and_remove<S: Store>(store: &S) {
    with_stack(store);
    run(store, |tx| {
        tx.insert_server(&server_row("web2"))?;
        tx.insert_stack(&stack_row("other"), TEMPLATE)?;
        tx.put_entry(&entry_row("web1", "app", "b", "0002"))?;
        tx.put_entry(&entry_row("web1", "other", "a", "0001"))?;
        tx.put_entry(&entry_row("web1", "app", "a", "0001"))?;
        tx.put_entry(&entry_row("web2", "app", "c", "0000"))
    });
    let keys = |server: &str| -> Vec<(String, String, String)> {
        run(store, |tx| tx.entries(server)).into_iter().map(|row| (row.sort_key, row.stack, row.node)).collect()
    };
    let key = |sort_key: &str, stack: &str, node: &str| (sort_key.to_owned(), stack.to_owned(), node.to_owned());
    assert_eq!(keys("web1"), [key("0001", "app", "a"), key("0001", "other", "a"), key("0002", "app", "b")]);

    // Upsert by (server, stack, node): moves the entry and replaces its body.
    let mut moved = entry_row("web1", "app", "b", "0000");
    moved.entry = json!({"replaced": true});
    moved.tokens = vec!["signal:b2".to_owned(), "handle:h".to_owned()];
    run(store, |tx| tx.put_entry(&moved));
    let entries = run(store, |tx| tx.entries("web1"));
    assert_eq!(entries.len(), 3);
    assert_eq!(entries[0], moved);
    let texts = run(store, |tx| tx.entry_texts("web1"));
    assert_eq!((texts[0].entry.as_str(), &texts[0].tokens), (r#"{"replaced":true}"#, &moved.tokens));
    let text_keys: Vec<(String, String, String)> =
        texts.iter().map(|text| (text.sort_key.clone(), text.stack.clone(), text.node.clone())).collect();
    assert_eq!(text_keys, [key("0000", "app", "b"), key("0001", "app", "a"), key("0001", "other", "a")]);
    let text_order: Vec<serde_json::Value> =
        texts.iter().map(|text| serde_json::from_str(&text.entry).unwrap()).collect();
    let entry_order: Vec<serde_json::Value> = entries.into_iter().map(|row| row.entry).collect();
    assert_eq!(text_order, entry_order, "entry_texts keeps the order of entries");

    run(store, |tx| {
        tx.remove_entry("web1", "app", "a")?;
        tx.remove_entry("web1", "app", "never-there")
    });
    assert_eq!(keys("web1"), [key("0000", "app", "b"), key("0001", "other", "a")]);
    assert_eq!(keys("web2"), [key("0000", "app", "c")]);
    assert!(keys("nobody").is_empty());
    assert!(run(store, |tx| tx.entry_texts("nobody")).is_empty());
}

/// What the engine holds a stack's publications to (`--max-deployment-bytes-per-stack`): bytes
/// of the stored text, not characters, per entry and per stack across servers.
fn entry_sizes_are_their_stored_bytes<S: Store>(store: &S) {
    with_stack(store);
    let mut wide = entry_row("web1", "app", "a", "0001");
    // Three bytes a character in UTF-8.
    wide.entry = json!({"text": "€".repeat(1000)});
    run(store, |tx| {
        tx.insert_server(&server_row("web2"))?;
        tx.insert_stack(&stack_row("other"), TEMPLATE)?;
        tx.put_entry(&wide)?;
        tx.put_entry(&entry_row("web2", "app", "b", "0001"))?;
        tx.put_entry(&entry_row("web1", "other", "c", "0001"))
    });
    let wide_bytes = serde_json::to_string(&wide.entry).unwrap().len() as u64;
    assert_eq!(wide_bytes, 3011);
    let small_bytes = serde_json::to_string(&entry_row("web2", "app", "b", "0001").entry).unwrap().len() as u64;
    assert_eq!(run(store, |tx| tx.entry_bytes("web1", "app", "a")), Some(wide_bytes));
    assert_eq!(run(store, |tx| tx.entry_bytes("web1", "app", "b")), None, "b is on web2");
    assert_eq!(run(store, |tx| tx.stack_entry_bytes("app")), wide_bytes + small_bytes, "both servers count");
    run(store, |tx| tx.remove_entry("web1", "app", "a"));
    assert_eq!(run(store, |tx| tx.stack_entry_bytes("app")), small_bytes);
    assert_eq!(run(store, |tx| tx.stack_entry_bytes("nothing")), 0);
}

fn delete_server_takes_its_token_and_entries_and_names_its_users<S: Store>(store: &S) {
    with_stack(store);
    run(store, |tx| {
        tx.insert_server(&server_row("web2"))?;
        tx.insert_stack(&stack_row("other"), TEMPLATE)?;
        // `app` has a node published to web1; `other` only an entry in web1's document.
        tx.insert_node(&node_row("app", "deploy"))?;
        tx.put_entry(&entry_row("web1", "other", "old", "0001"))?;
        tx.put_entry(&entry_row("web2", "app", "deploy2", "0001"))
    });
    assert_eq!(run(store, |tx| tx.stacks_using_server("web1")), ["app", "other"]);
    assert_eq!(run(store, |tx| tx.stacks_using_server("web2")), ["app"]);
    assert!(run(store, |tx| tx.stacks_using_server("nobody")).is_empty());

    assert!(run(store, |tx| tx.delete_server("web1")));
    assert!(!run(store, |tx| tx.delete_server("web1")), "already gone");
    assert!(!run(store, |tx| tx.delete_server("nobody")));
    run(store, |tx| {
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
    assert!(run(store, |tx| tx.insert_server(&again)));
    assert_eq!(run(store, |tx| tx.server_by_token_hash("hash-of-web1")), None);
}

fn server_tokens_rotate_keep_one_previous_token_and_go_with_the_server<S: Store>(store: &S) {
    assert!(run(store, |tx| tx.insert_server(&server_row("web1"))));
    assert!(!run(store, |tx| tx.rotate_server_token("nobody", "h", 10)), "no such server");
    assert_eq!(run(store, |tx| tx.server_by_previous_token_hash("hash-of-web1")), None, "nothing rotated yet");
    assert!(run(store, |tx| tx.rotate_server_token("web1", "second", 1_000)));
    run(store, |tx| {
        assert_eq!(tx.server_by_token_hash("second")?.map(|row| row.name).as_deref(), Some("web1"));
        assert_eq!(tx.server_by_token_hash("hash-of-web1")?, None);
        assert_eq!(tx.server_by_previous_token_hash("hash-of-web1")?, Some(("web1".to_owned(), 1_000)));
        Ok(())
    });
    // A second rotation replaces the previous token: only one stays recognised.
    assert!(run(store, |tx| tx.rotate_server_token("web1", "third", 2_000)));
    assert_eq!(run(store, |tx| tx.server_by_previous_token_hash("hash-of-web1")), None);
    assert_eq!(run(store, |tx| tx.server_by_previous_token_hash("second")), Some(("web1".to_owned(), 2_000)));
    assert!(run(store, |tx| tx.delete_server("web1")));
    assert_eq!(run(store, |tx| tx.server_by_previous_token_hash("second")), None, "gone with the server");
}
