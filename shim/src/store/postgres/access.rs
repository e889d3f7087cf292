//! `PgTx`, the handle `Tx` methods run on inside one PostgreSQL transaction, and the helpers every
//! statement goes through: per-connection prepared statements, the statement counter, error
//! context (a lost connection is `StoreError::Unavailable`, not a failed query), and the
//! integer, enum and JSON conversions of columns. Nothing here commits or rolls back.

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};

use postgres::types::ToSql;
use postgres::{Row, Statement, Transaction};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::store::{Action, NodeState, State, StoreError};

/// The parameters of one statement.
pub(crate) type Parameters<'p> = [&'p (dyn ToSql + Sync)];

pub(crate) struct PgTx<'call, 'connection> {
    transaction: &'call mut Transaction<'connection>,
    prepared: &'call mut HashMap<&'static str, Statement>,
    statements: &'call AtomicU64,
    /// Servers whose document this transaction changed: announced to the other replicas at
    /// COMMIT (see `postgres::notify`).
    pub(crate) changed_servers: BTreeSet<String>,
    /// Whether a statement failed. PostgreSQL then aborts the whole transaction (SQLite undoes
    /// only the statement), and a COMMIT of it rolls back yet reports success: the caller
    /// must refuse to commit when its work went on past the error (see `Store::transaction`).
    pub(crate) failed: bool,
}

impl<'call, 'connection> PgTx<'call, 'connection> {
    pub(crate) fn new(
        transaction: &'call mut Transaction<'connection>,
        prepared: &'call mut HashMap<&'static str, Statement>,
        statements: &'call AtomicU64,
    ) -> Self {
        PgTx { transaction, prepared, statements, changed_servers: BTreeSet::new(), failed: false }
    }

    /// The statement for `sql`, prepared once per connection (a statement is a server-side
    /// object of the connection, so the cache lives beside it and goes with it).
    fn statement(&mut self, action: &'static str, sql: &'static str) -> Result<Statement, StoreError> {
        if let Some(statement) = self.prepared.get(sql) {
            return Ok(statement.clone());
        }
        let statement = self.transaction.prepare(sql).map_err(|error| self.failure(action, error))?;
        self.prepared.insert(sql, statement.clone());
        Ok(statement)
    }

    /// A failed statement's error, remembering that the transaction is now aborted.
    fn failure(&mut self, action: &'static str, error: postgres::Error) -> StoreError {
        self.failed = true;
        query_error(action, error)
    }

    /// Runs a statement that returns no rows; the number of rows it changed.
    pub(crate) fn execute(
        &mut self,
        action: &'static str,
        sql: &'static str,
        parameters: &Parameters<'_>,
    ) -> Result<u64, StoreError> {
        let statement = self.statement(action, sql)?;
        self.statements.fetch_add(1, Ordering::Relaxed);
        let result = self.transaction.execute(&statement, parameters);
        result.map_err(|error| self.failure(action, error))
    }

    /// The first row a statement returns (also for `UPDATE ... RETURNING`), mapped by `map`.
    pub(crate) fn query_optional<T>(
        &mut self,
        action: &'static str,
        sql: &'static str,
        parameters: &Parameters<'_>,
        map: impl FnOnce(&Row) -> Result<T, StoreError>,
    ) -> Result<Option<T>, StoreError> {
        let statement = self.statement(action, sql)?;
        self.statements.fetch_add(1, Ordering::Relaxed);
        let row = self.transaction.query_opt(&statement, parameters);
        let row = row.map_err(|error| self.failure(action, error))?;
        row.as_ref().map(map).transpose()
    }

    /// Every row a statement returns, mapped by `map`.
    pub(crate) fn query_all<T>(
        &mut self,
        action: &'static str,
        sql: &'static str,
        parameters: &Parameters<'_>,
        map: impl FnMut(&Row) -> Result<T, StoreError>,
    ) -> Result<Vec<T>, StoreError> {
        let statement = self.statement(action, sql)?;
        self.statements.fetch_add(1, Ordering::Relaxed);
        let rows = self.transaction.query(&statement, parameters);
        let rows = rows.map_err(|error| self.failure(action, error))?;
        rows.iter().map(map).collect()
    }
}

/// A failed statement: `Unavailable` when the connection or the server is gone (the caller
/// may answer 503 and be retried), `Query` otherwise.
pub(crate) fn query_error(action: &'static str, error: postgres::Error) -> StoreError {
    if is_unavailable(&error) {
        return StoreError::Unavailable { source: Box::new(error) };
    }
    StoreError::Query { action, source: Box::new(error) }
}

/// A closed connection, a connection failure (SQLSTATE class 08) or the server going down or
/// not accepting connections yet (57P01..57P03).
pub(crate) fn is_unavailable(error: &postgres::Error) -> bool {
    if error.is_closed() {
        return true;
    }
    match error.code() {
        Some(code) => {
            let code = code.code();
            code.starts_with("08") || matches!(code, "57P01" | "57P02" | "57P03")
        }
        // No SQLSTATE: the error came from the socket or the protocol, not from the server.
        None => error.as_db_error().is_none(),
    }
}

/// A row's column, the postgres error naming the column and the type it found.
pub(crate) fn column<'row, T: postgres::types::FromSql<'row>>(row: &'row Row, index: usize) -> Result<T, StoreError> {
    row.try_get(index).map_err(|source| StoreError::Query { action: "read a stored row", source: Box::new(source) })
}

/// Reads a BIGINT column holding a `u64`.
pub(crate) fn unsigned_column(row: &Row, index: usize) -> Result<u64, StoreError> {
    let value: i64 = column(row, index)?;
    u64::try_from(value)
        .map_err(|source| StoreError::Query { action: "read a stored number", source: Box::new(source) })
}

/// Reads a nullable BIGINT column holding a `u64`.
pub(crate) fn optional_unsigned_column(row: &Row, index: usize) -> Result<Option<u64>, StoreError> {
    let value: Option<i64> = column(row, index)?;
    value
        .map(u64::try_from)
        .transpose()
        .map_err(|source| StoreError::Query { action: "read a stored number", source: Box::new(source) })
}

/// A `u64` as a BIGINT: a value beyond i64 fails instead of wrapping around.
pub(crate) fn signed(value: u64) -> Result<i64, StoreError> {
    i64::try_from(value).map_err(|source| StoreError::Query { action: "store a number", source: Box::new(source) })
}

/// Reads a JSON TEXT column.
pub(crate) fn json_column<T: DeserializeOwned>(
    row: &Row,
    index: usize,
    column_name: &'static str,
) -> Result<T, StoreError> {
    let text: &str = column(row, index)?;
    serde_json::from_str(text).map_err(|source| StoreError::Decode { column: column_name, source })
}

/// The TEXT stored for a JSON column. serde_json writes a NUL as `\u0000`, so the text has none.
pub(crate) fn to_json_text(value: &impl Serialize, column_name: &'static str) -> Result<String, StoreError> {
    serde_json::to_string(value).map_err(|source| StoreError::Encode { column: column_name, source })
}

/// PostgreSQL's TEXT cannot hold NUL (SQLite's can): free text that arrives from outside (a
/// signal's reason, an event's) is stored with U+FFFD in its place rather than failing the
/// write. Names never hold NUL (the API refuses them).
pub(crate) fn free_text(text: &str) -> std::borrow::Cow<'_, str> {
    if text.contains('\0') { std::borrow::Cow::Owned(text.replace('\0', "\u{FFFD}")) } else { text.into() }
}

/// Reads a closed set stored as its TEXT spelling; a stored text outside the set fails the read.
pub(crate) fn enum_column<T>(row: &Row, index: usize, parse: fn(&str) -> Option<T>) -> Result<T, StoreError> {
    let text: &str = column(row, index)?;
    parse(text).ok_or_else(|| StoreError::Query {
        action: "read a stored row",
        source: format!("unknown value {text:?} in column {index}").into(),
    })
}

pub(crate) fn action_column(row: &Row, index: usize) -> Result<Action, StoreError> {
    enum_column(row, index, Action::parse)
}

pub(crate) fn state_column(row: &Row, index: usize) -> Result<State, StoreError> {
    enum_column(row, index, State::parse)
}

pub(crate) fn node_state_column(row: &Row, index: usize) -> Result<NodeState, StoreError> {
    enum_column(row, index, NodeState::parse)
}
