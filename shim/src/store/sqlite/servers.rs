//! Statements on `servers` (registrations and their materialised metadata documents) and
//! `entries` (the released deployments each document is built from).

use rusqlite::{Row, params};

use super::access::{SqliteTx, Unsigned, column, json_column, optional_unsigned_column, to_json_text, unsigned_column};
use crate::store::{EntryRow, EntryText, ServerRow, StoreError};

/// `SELECT <the ServerRow columns> FROM servers <tail>` as one literal: no allocation per call.
macro_rules! select_servers {
    ($tail:literal) => {
        concat!(
            "SELECT name, token_hash, created_at, metadata_version, metadata_body, published_at, last_seen, addresses \
             FROM servers ",
            $tail
        )
    };
}

pub(super) fn insert(tx: &SqliteTx<'_>, row: &ServerRow) -> Result<bool, StoreError> {
    // Only a taken name means "false"; a duplicate token hash is a real error and still fails.
    let changed = tx.execute(
        "insert a server",
        "INSERT INTO servers (name, token_hash, created_at, metadata_version, metadata_body, published_at, last_seen,
             addresses)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8) ON CONFLICT (name) DO NOTHING",
        params![
            row.name,
            row.token_hash,
            Unsigned(row.created_at),
            Unsigned(row.metadata_version),
            row.metadata_body,
            Unsigned(row.published_at),
            row.last_seen.map(Unsigned),
            to_json_text(&row.addresses, "servers.addresses")?
        ],
    )?;
    Ok(changed == 1)
}

pub(super) fn by_name(tx: &SqliteTx<'_>, name: &str) -> Result<Option<ServerRow>, StoreError> {
    tx.query_optional("read a server", select_servers!("WHERE name = ?1"), [name], server_from_row)
}

pub(super) fn by_token_hash(tx: &SqliteTx<'_>, hash: &str) -> Result<Option<ServerRow>, StoreError> {
    tx.query_optional("find a server by token", select_servers!("WHERE token_hash = ?1"), [hash], server_from_row)
}

pub(super) fn all(tx: &SqliteTx<'_>) -> Result<Vec<ServerRow>, StoreError> {
    tx.query_all("list servers", select_servers!("ORDER BY name"), [], server_from_row)
}

pub(super) fn document_versions(tx: &SqliteTx<'_>) -> Result<Vec<(String, u64)>, StoreError> {
    tx.query_all("list document versions", "SELECT name, metadata_version FROM servers ORDER BY name", [], |row| {
        Ok((column(row, 0)?, unsigned_column(row, 1)?))
    })
}

pub(super) fn set_document(
    tx: &SqliteTx<'_>,
    name: &str,
    version: u64,
    body: &str,
    published_at: u64,
) -> Result<(), StoreError> {
    let changed = tx.execute(
        "publish a metadata document",
        "UPDATE servers SET metadata_version = ?2, metadata_body = ?3, published_at = ?4 WHERE name = ?1",
        params![name, Unsigned(version), body, Unsigned(published_at)],
    )?;
    require_changed(changed, name)
}

pub(super) fn touch(tx: &SqliteTx<'_>, name: &str, at: u64) -> Result<(), StoreError> {
    let changed = tx.execute(
        "record a server's last poll",
        "UPDATE servers SET last_seen = ?2 WHERE name = ?1",
        params![name, Unsigned(at)],
    )?;
    require_changed(changed, name)
}

pub(super) fn rotate_token(
    tx: &SqliteTx<'_>,
    name: &str,
    new_hash: &str,
    previous_expires_at: u64,
) -> Result<bool, StoreError> {
    // One previous token per server: a second rotation ends the first one's grace at once.
    tx.execute(
        "keep a server's previous token",
        "INSERT INTO server_previous_tokens (name, token_hash, expires_at)
         SELECT name, token_hash, ?2 FROM servers WHERE name = ?1
         ON CONFLICT (name) DO UPDATE SET token_hash = excluded.token_hash, expires_at = excluded.expires_at",
        params![name, Unsigned(previous_expires_at)],
    )?;
    let changed = tx.execute(
        "replace a server's token",
        "UPDATE servers SET token_hash = ?2 WHERE name = ?1",
        params![name, new_hash],
    )?;
    Ok(changed == 1)
}

pub(super) fn by_previous_token_hash(tx: &SqliteTx<'_>, hash: &str) -> Result<Option<(String, u64)>, StoreError> {
    tx.query_optional(
        "find a server by its previous token",
        "SELECT name, expires_at FROM server_previous_tokens WHERE token_hash = ?1",
        [hash],
        |row| Ok((column(row, 0)?, unsigned_column(row, 1)?)),
    )
}

pub(super) fn delete(tx: &SqliteTx<'_>, name: &str) -> Result<bool, StoreError> {
    // Entries first: they reference the server (without a cascade, so a forgotten one fails
    // loudly instead of vanishing).
    tx.execute("remove a server's metadata entries", "DELETE FROM entries WHERE server = ?1", [name])?;
    let changed = tx.execute("delete a server", "DELETE FROM servers WHERE name = ?1", [name])?;
    Ok(changed == 1)
}

pub(super) fn stacks_using(tx: &SqliteTx<'_>, server: &str) -> Result<Vec<String>, StoreError> {
    // A scan of `nodes` (no index on `server`): this runs only when an operator removes a server.
    tx.query_all(
        "find the stacks using a server",
        "SELECT stack FROM nodes WHERE server = ?1 UNION SELECT stack FROM entries WHERE server = ?1 ORDER BY 1",
        [server],
        |row| column(row, 0),
    )
}

pub(super) fn put_entry(tx: &SqliteTx<'_>, server: &str, row: &EntryText) -> Result<(), StoreError> {
    let tokens = to_json_text(&row.tokens, "entries.tokens")?;
    tx.execute(
        "store a metadata entry",
        "INSERT INTO entries (server, stack, node, sort_key, entry, tokens) VALUES (?1, ?2, ?3, ?4, ?5, ?6)
         ON CONFLICT (server, stack, node) DO UPDATE SET sort_key = excluded.sort_key, entry = excluded.entry,
             tokens = excluded.tokens",
        params![server, row.stack, row.node, row.sort_key, row.entry, tokens],
    )?;
    Ok(())
}

pub(super) fn remove_entry(tx: &SqliteTx<'_>, server: &str, stack: &str, node: &str) -> Result<(), StoreError> {
    tx.execute(
        "remove a metadata entry",
        "DELETE FROM entries WHERE server = ?1 AND stack = ?2 AND node = ?3",
        [server, stack, node],
    )?;
    Ok(())
}

pub(super) fn entry_bytes(tx: &SqliteTx<'_>, server: &str, stack: &str, node: &str) -> Result<Option<u64>, StoreError> {
    tx.query_optional(
        "measure a metadata entry",
        "SELECT octet_length(entry) FROM entries WHERE server = ?1 AND stack = ?2 AND node = ?3",
        [server, stack, node],
        |row| unsigned_column(row, 0),
    )
}

pub(super) fn stack_entry_bytes(tx: &SqliteTx<'_>, stack: &str) -> Result<u64, StoreError> {
    // octet_length reads the size each value is stored with, not its text.
    let total = tx.query_optional(
        "measure a stack's metadata entries",
        "SELECT COALESCE(SUM(octet_length(entry)), 0) FROM entries WHERE stack = ?1",
        [stack],
        |row| unsigned_column(row, 0),
    )?;
    Ok(total.unwrap_or(0))
}

pub(super) fn entries(tx: &SqliteTx<'_>, server: &str) -> Result<Vec<EntryRow>, StoreError> {
    tx.query_all(
        "list a server's metadata entries",
        "SELECT server, stack, node, sort_key, entry, tokens FROM entries WHERE server = ?1
         ORDER BY sort_key, stack, node",
        [server],
        |row| {
            Ok(EntryRow {
                server: column(row, 0)?,
                stack: column(row, 1)?,
                node: column(row, 2)?,
                sort_key: column(row, 3)?,
                entry: json_column(row, 4, "entries.entry")?,
                tokens: json_column(row, 5, "entries.tokens")?,
            })
        },
    )
}

pub(super) fn entry_texts(tx: &SqliteTx<'_>, server: &str) -> Result<Vec<EntryText>, StoreError> {
    tx.query_all(
        "list a server's metadata entries",
        "SELECT sort_key, stack, node, entry, tokens FROM entries WHERE server = ?1 ORDER BY sort_key, stack, node",
        [server],
        entry_text_from_row,
    )
}

fn entry_text_from_row(row: &Row<'_>) -> Result<EntryText, StoreError> {
    Ok(EntryText {
        sort_key: column(row, 0)?,
        stack: column(row, 1)?,
        node: column(row, 2)?,
        entry: column(row, 3)?,
        tokens: json_column(row, 4, "entries.tokens")?,
    })
}

fn server_from_row(row: &Row<'_>) -> Result<ServerRow, StoreError> {
    Ok(ServerRow {
        name: column(row, 0)?,
        token_hash: column(row, 1)?,
        created_at: unsigned_column(row, 2)?,
        metadata_version: unsigned_column(row, 3)?,
        metadata_body: column(row, 4)?,
        published_at: unsigned_column(row, 5)?,
        last_seen: optional_unsigned_column(row, 6)?,
        addresses: json_column(row, 7, "servers.addresses")?,
    })
}

fn require_changed(changed: usize, name: &str) -> Result<(), StoreError> {
    if changed == 0 {
        return Err(StoreError::NotFound { kind: "server", key: name.to_owned() });
    }
    Ok(())
}
