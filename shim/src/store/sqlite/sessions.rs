//! Statements on `ui_sessions`: the web view's logins, each known by a keyed hash of its
//! cookie's id, until it expires or its logout deletes it.

use rusqlite::params;

use super::access::{SqliteTx, Unsigned, column, unsigned_column};
use crate::store::{StoreError, UiSessionRow};

pub(super) fn insert(tx: &SqliteTx<'_>, row: &UiSessionRow) -> Result<bool, StoreError> {
    let changed = tx.execute(
        "store a web view session",
        "INSERT INTO ui_sessions (key, created_at, expires_at) VALUES (?1, ?2, ?3) ON CONFLICT (key) DO NOTHING",
        params![row.key, Unsigned(row.created_at), Unsigned(row.expires_at)],
    )?;
    Ok(changed == 1)
}

pub(super) fn by_key(tx: &SqliteTx<'_>, key: &str) -> Result<Option<UiSessionRow>, StoreError> {
    tx.query_optional(
        "look up a web view session",
        "SELECT key, created_at, expires_at FROM ui_sessions WHERE key = ?1",
        [key],
        |row| {
            Ok(UiSessionRow {
                key: column(row, 0)?,
                created_at: unsigned_column(row, 1)?,
                expires_at: unsigned_column(row, 2)?,
            })
        },
    )
}

pub(super) fn delete(tx: &SqliteTx<'_>, key: &str) -> Result<bool, StoreError> {
    Ok(tx.execute("delete a web view session", "DELETE FROM ui_sessions WHERE key = ?1", [key])? == 1)
}

pub(super) fn prune(tx: &SqliteTx<'_>, now: u64) -> Result<usize, StoreError> {
    tx.execute("remove expired web view sessions", "DELETE FROM ui_sessions WHERE expires_at <= ?1", [Unsigned(now)])
}
