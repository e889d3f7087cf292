//! `SqliteTx`, the handle `Tx` methods run on inside one transaction, and the few helpers every
//! statement goes through: cached preparation, the statement counter, error context, and the
//! JSON and integer conversions of columns. Nothing here commits or rolls back.

use std::sync::atomic::{AtomicU64, Ordering};

use rusqlite::types::{FromSql, FromSqlError, FromSqlResult, ToSqlOutput, ValueRef};
use rusqlite::{CachedStatement, Connection, Params, Row, StatementStatus, ToSql};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::store::{Action, NodeState, Rollback, State, StoreError};

/// What the store counts of the statements it runs (instrumentation for tests and benchmarks).
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub(crate) statements: AtomicU64,
    /// Executions SQLite compiled again first: a statement whose plan depends on a bound
    /// value (an `ORDER BY` after an equality on a parameter is one) is re-prepared on every
    /// rebind, which costs more than running it. Hot statements must keep this at zero.
    pub(crate) reprepares: AtomicU64,
}

pub(crate) struct SqliteTx<'transaction> {
    connection: &'transaction Connection,
    counters: &'transaction Counters,
}

impl<'transaction> SqliteTx<'transaction> {
    /// `connection` must be inside a transaction for the life of the value.
    pub(crate) fn new(connection: &'transaction Connection, counters: &'transaction Counters) -> Self {
        SqliteTx { connection, counters }
    }

    fn prepare(&self, sql: &str) -> Result<CachedStatement<'transaction>, rusqlite::Error> {
        self.counters.statements.fetch_add(1, Ordering::Relaxed);
        self.connection.prepare_cached(sql)
    }

    /// Adds the statement's re-preparations since its last execution to the counters.
    fn count_reprepares(&self, statement: &mut CachedStatement<'_>) {
        let reprepared = statement.reset_status(StatementStatus::RePrepare);
        if reprepared > 0 {
            self.counters.reprepares.fetch_add(u64::try_from(reprepared).unwrap_or(0), Ordering::Relaxed);
        }
    }

    /// Runs a statement that returns no rows; the number of rows it changed.
    pub(crate) fn execute(&self, action: &'static str, sql: &str, params: impl Params) -> Result<usize, StoreError> {
        let sql_error = |source: rusqlite::Error| StoreError::Query { action, source: Box::new(source) };
        let mut statement = self.prepare(sql).map_err(sql_error)?;
        let changed = statement.execute(params).map_err(sql_error);
        self.count_reprepares(&mut statement);
        changed
    }

    /// The first row a statement returns (also for `UPDATE ... RETURNING`), mapped by `map`.
    pub(crate) fn query_optional<T>(
        &self,
        action: &'static str,
        sql: &str,
        params: impl Params,
        map: impl FnOnce(&Row<'_>) -> Result<T, StoreError>,
    ) -> Result<Option<T>, StoreError> {
        let sql_error = |source: rusqlite::Error| StoreError::Query { action, source: Box::new(source) };
        let mut statement = self.prepare(sql).map_err(sql_error)?;
        let mut rows = statement.query(params).map_err(sql_error)?;
        let found = match rows.next().map_err(sql_error)? {
            Some(row) => map(row).map(Some),
            None => Ok(None),
        };
        drop(rows);
        self.count_reprepares(&mut statement);
        found
    }

    /// Every row a statement returns, mapped by `map`.
    pub(crate) fn query_all<T>(
        &self,
        action: &'static str,
        sql: &str,
        params: impl Params,
        mut map: impl FnMut(&Row<'_>) -> Result<T, StoreError>,
    ) -> Result<Vec<T>, StoreError> {
        let sql_error = |source: rusqlite::Error| StoreError::Query { action, source: Box::new(source) };
        let mut statement = self.prepare(sql).map_err(sql_error)?;
        let mut rows = statement.query(params).map_err(sql_error)?;
        let mut found = Vec::new();
        while let Some(row) = rows.next().map_err(sql_error)? {
            found.push(map(row)?);
        }
        drop(rows);
        self.count_reprepares(&mut statement);
        Ok(found)
    }
}

/// Reads column `index` of a row; the rusqlite error names the column and the type it found.
pub(crate) fn column<T: FromSql>(row: &Row<'_>, index: usize) -> Result<T, StoreError> {
    row.get(index).map_err(|source| StoreError::Query { action: "read a stored row", source: Box::new(source) })
}

/// Reads a JSON TEXT column.
pub(crate) fn json_column<T: DeserializeOwned>(
    row: &Row<'_>,
    index: usize,
    column_name: &'static str,
) -> Result<T, StoreError> {
    let text: String = column(row, index)?;
    serde_json::from_str(&text).map_err(|source| StoreError::Decode { column: column_name, source })
}

/// The TEXT stored for a JSON column.
pub(crate) fn to_json_text(value: &impl Serialize, column_name: &'static str) -> Result<String, StoreError> {
    serde_json::to_string(value).map_err(|source| StoreError::Encode { column: column_name, source })
}

/// A `u64` as an SQLite integer (an i64). rusqlite converts `u64` only with its `fallible_uint`
/// feature; this makes the same check: a value beyond i64 fails instead of wrapping around.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Unsigned(pub(crate) u64);

impl ToSql for Unsigned {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        i64::try_from(self.0)
            .map(ToSqlOutput::from)
            .map_err(|error| rusqlite::Error::ToSqlConversionFailure(Box::new(error)))
    }
}

impl FromSql for Unsigned {
    fn column_result(value: ValueRef<'_>) -> FromSqlResult<Self> {
        let signed = i64::column_result(value)?;
        u64::try_from(signed).map(Unsigned).map_err(|_| FromSqlError::OutOfRange(signed))
    }
}

/// Reads a `u64` column.
pub(crate) fn unsigned_column(row: &Row<'_>, index: usize) -> Result<u64, StoreError> {
    column::<Unsigned>(row, index).map(|value| value.0)
}

/// Reads a nullable `u64` column.
pub(crate) fn optional_unsigned_column(row: &Row<'_>, index: usize) -> Result<Option<u64>, StoreError> {
    column::<Option<Unsigned>>(row, index).map(|value| value.map(|value| value.0))
}

/// A closed set stored as its TEXT spelling; a stored text outside the set fails the read.
macro_rules! text_enum_column {
    ($($kind:ty),*) => {$(
        impl ToSql for $kind {
            fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
                Ok(ToSqlOutput::from(self.as_str()))
            }
        }

        impl FromSql for $kind {
            fn column_result(value: ValueRef<'_>) -> FromSqlResult<Self> {
                let text = value.as_str()?;
                <$kind>::parse(text).ok_or_else(|| FromSqlError::Other(format!("unknown value {text:?}").into()))
            }
        }
    )*};
}

text_enum_column!(Action, State, NodeState, Rollback);
