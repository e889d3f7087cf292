//! `SqliteStore`: the embedded backend of `Store`. One connection behind a std `Mutex` (SQLite
//! has one writer anyway), in WAL mode with `synchronous=FULL`, so a commit that returned is on
//! disk. Transactions are immediate (the write lock is taken at BEGIN, so a statement never
//! fails half-way with SQLITE_BUSY because another process wrote first) and group-committed
//! (`batch`). This file owns opening and configuration; the statements live in the
//! submodules, one per group of tables.

mod access;
mod batch;
mod nodes;
mod records;
mod schema;
mod servers;
mod sessions;
mod stacks;
mod tx;

use std::fs::{DirBuilder, OpenOptions};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use rusqlite::config::DbConfig;
use rusqlite::{Connection, OpenFlags};

use crate::store::cache::RowCache;
use crate::store::{Store, StoreError, Tx};
pub use batch::BATCH_LIMIT;
use batch::Shared;
pub(crate) use schema::{MIGRATIONS, Migration};

/// How long a statement waits for another process's lock before failing with SQLITE_BUSY.
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);
/// Room for every distinct statement the `Tx` methods prepare, so none is ever re-prepared.
const STATEMENT_CACHE_CAPACITY: usize = 64;
/// At most this many problems are reported by `integrity_check`.
const INTEGRITY_REPORT_LIMIT: usize = 10;

pub struct SqliteStore {
    shared: Mutex<Shared>,
    /// The connection `read` uses (`None` in memory, where a second connection would be another
    /// database): in WAL mode it reads the last commit while the writer's transaction goes on,
    /// so the token lookup of every metadata poll never waits for a write, however long (a
    /// large create held the one connection for seconds and stalled every poll behind it).
    reader: Option<Mutex<Connection>>,
    /// Signalled whenever a batch ends (see `batch`).
    batch_ended: Condvar,
    /// `transaction` calls queued for the mutex: while there are any, the open batch waits.
    waiting: AtomicUsize,
    counters: access::Counters,
    commits: AtomicU64,
    path: Option<PathBuf>,
}

impl std::fmt::Debug for SqliteStore {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.debug_struct("SqliteStore").field("path", &self.path).finish_non_exhaustive()
    }
}

impl SqliteStore {
    /// Opens (creating it with mode 0600, and its parent directory with 0700, if missing) the
    /// database at `path` and brings its schema up to date.
    pub fn open(path: &Path) -> Result<SqliteStore, StoreError> {
        Self::open_with_migrations(path, MIGRATIONS)
    }

    /// The newest schema version this build knows.
    pub fn schema_version() -> u32 {
        MIGRATIONS.last().map_or(0, |migration| migration.version)
    }

    /// A private, empty, fully migrated database that lives as long as the value (tests).
    pub fn open_in_memory() -> Result<SqliteStore, StoreError> {
        let path = PathBuf::from(":memory:");
        let mut connection = Connection::open_in_memory()
            .map_err(|source| StoreError::Open { path: path.clone(), source: Box::new(source) })?;
        configure(&connection)?;
        schema::migrate(&mut connection, MIGRATIONS)?;
        Ok(Self::from_connection(connection, None))
    }

    pub(crate) fn open_with_migrations(path: &Path, migrations: &[Migration]) -> Result<SqliteStore, StoreError> {
        create_private_file(path)?;
        // The file exists now, so SQLite must not create one elsewhere, and a name that
        // looks like a `file:` URI is still a plain path.
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let mut connection = Connection::open_with_flags(path, flags)
            .map_err(|source| StoreError::Open { path: path.to_owned(), source: Box::new(source) })?;
        configure(&connection)?;
        enable_write_ahead_log(&connection)?;
        schema::migrate(&mut connection, migrations)?;
        let reader = open_reader(path, flags)?;
        let mut store = Self::from_connection(connection, Some(path.to_owned()));
        store.reader = Some(Mutex::new(reader));
        Ok(store)
    }

    /// The database file, `None` in memory.
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// COMMITs since open: with group commit, fewer than successful `transaction` calls
    /// (instrumentation for the benchmarks, next to `Store::statements`).
    pub fn commits(&self) -> u64 {
        self.commits.load(Ordering::Relaxed)
    }

    /// Statement executions SQLite had to compile again first because a bound value changed
    /// the plan (see `access::Counters`); tests hold the hot paths at zero.
    pub fn reprepares(&self) -> u64 {
        self.counters.reprepares.load(Ordering::Relaxed)
    }

    /// Runs SQLite's `integrity_check` and `foreign_key_check`; the error lists what they found.
    pub fn integrity_check(&self) -> Result<(), StoreError> {
        let shared = self.lock();
        let connection = &shared.connection;
        let sql_error =
            |source: rusqlite::Error| StoreError::Query { action: "run the integrity check", source: Box::new(source) };
        let mut problems = Vec::new();
        let mut statement = connection.prepare("PRAGMA integrity_check").map_err(sql_error)?;
        let mut rows = statement.query([]).map_err(sql_error)?;
        while let Some(row) = rows.next().map_err(sql_error)? {
            let message: String = row.get(0).map_err(sql_error)?;
            if message != "ok" {
                problems.push(message);
            }
        }
        let mut statement = connection.prepare("PRAGMA foreign_key_check").map_err(sql_error)?;
        let mut rows = statement.query([]).map_err(sql_error)?;
        while let Some(row) = rows.next().map_err(sql_error)? {
            let table: String = row.get(0).map_err(sql_error)?;
            let parent: String = row.get(2).map_err(sql_error)?;
            problems.push(format!("a row of {table} refers to a missing row of {parent}"));
        }
        if problems.is_empty() {
            return Ok(());
        }
        problems.truncate(INTEGRITY_REPORT_LIMIT);
        Err(StoreError::Integrity { report: problems.join("; ") })
    }

    fn from_connection(connection: Connection, path: Option<PathBuf>) -> SqliteStore {
        connection.set_prepared_statement_cache_capacity(STATEMENT_CACHE_CAPACITY);
        SqliteStore {
            shared: Mutex::new(Shared::new(connection)),
            reader: None,
            batch_ended: Condvar::new(),
            waiting: AtomicUsize::new(0),
            counters: access::Counters::default(),
            commits: AtomicU64::new(0),
            path,
        }
    }

    /// `batch` catches panics of the work it runs and unwinds its savepoint before resuming
    /// them, so the state behind a poisoned mutex is still sound.
    fn lock(&self) -> MutexGuard<'_, Shared> {
        self.shared.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn count_statement(&self) {
        self.counters.statements.fetch_add(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
impl SqliteStore {
    /// The value of a pragma on the store's own connection (`synchronous` is per connection).
    pub(crate) fn pragma_value(&self, name: &str) -> String {
        let value: rusqlite::types::Value =
            self.lock().connection.query_row(&format!("PRAGMA {name}"), [], |row| row.get(0)).unwrap();
        match value {
            rusqlite::types::Value::Integer(number) => number.to_string(),
            rusqlite::types::Value::Text(text) => text,
            other => format!("{other:?}"),
        }
    }

    /// Calls queued for the connection (they will join the open batch).
    pub(crate) fn queued_callers(&self) -> usize {
        self.waiting.load(Ordering::SeqCst)
    }

    /// SQLite's plan for `sql`, one detail per line.
    pub(crate) fn query_plan(&self, sql: &str) -> String {
        let shared = self.lock();
        let mut statement = shared.connection.prepare(&format!("EXPLAIN QUERY PLAN {sql}")).unwrap();
        let details: Vec<String> = statement.query_map([], |row| row.get(3)).unwrap().map(Result::unwrap).collect();
        details.join("\n")
    }
}

impl Store for SqliteStore {
    fn single_writer(&self) -> bool {
        true
    }

    fn transaction<T, E: From<StoreError>>(&self, work: impl FnOnce(&mut dyn Tx) -> Result<T, E>) -> Result<T, E> {
        batch::run(self, work)
    }

    /// The statements run in one read transaction on the reader connection: they see one
    /// commit (a snapshot of the WAL, as PostgreSQL's read-only transaction does) and wait for
    /// no writer. In memory they run on the one connection, inside an open batch through it.
    fn read<T, E: From<StoreError>>(&self, work: impl FnOnce(&mut dyn Tx) -> Result<T, E>) -> Result<T, E> {
        let Some(reader) = &self.reader else {
            let shared = self.lock();
            return work(&mut RowCache::new(access::SqliteTx::new(&shared.connection, &self.counters)));
        };
        let connection = reader.lock().unwrap_or_else(PoisonError::into_inner);
        read_snapshot(&connection, "BEGIN", "begin a read")?;
        let value = work(&mut RowCache::new(access::SqliteTx::new(&connection, &self.counters)));
        // A read changes nothing: ending it either way only releases the snapshot.
        read_snapshot(&connection, "COMMIT", "end a read")?;
        value
    }

    /// Includes the BEGIN, COMMIT and SAVEPOINT statements around the work; excludes opening.
    fn statements(&self) -> u64 {
        self.counters.statements.load(Ordering::Relaxed)
    }
}

/// Settings that hold for the connection's life. `synchronous=FULL` makes every commit wait
/// for the WAL to reach the disk: an acknowledged signal survives power loss, not only a crash.
/// The query planner stability guarantee keeps each cached statement's plan whatever values
/// are bound: without it a statement with an `ORDER BY` or `LIMIT` after `= ?` is compiled
/// again on every execution (throughput bench: ~2,900 signals/s with it, ~5,000 without).
fn configure(connection: &Connection) -> Result<(), StoreError> {
    connection
        .set_db_config(DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG, true)
        .map_err(|source| StoreError::Configure { setting: "enable_qpsg", source: Box::new(source) })?;
    connection
        .busy_timeout(BUSY_TIMEOUT)
        .map_err(|source| StoreError::Configure { setting: "busy_timeout", source: Box::new(source) })?;
    connection
        .pragma_update(None, "foreign_keys", "ON")
        .map_err(|source| StoreError::Configure { setting: "foreign_keys", source: Box::new(source) })?;
    connection
        .pragma_update(None, "synchronous", "FULL")
        .map_err(|source| StoreError::Configure { setting: "synchronous", source: Box::new(source) })?;
    // A large transaction (or one refused after spilling its pages) grows the write-ahead log;
    // without a limit the file keeps that size after its pages are checkpointed.
    connection
        .pragma_update(None, "journal_size_limit", JOURNAL_SIZE_LIMIT)
        .map_err(|source| StoreError::Configure { setting: "journal_size_limit", source: Box::new(source) })
}

/// Bytes the write-ahead log is truncated to when it restarts.
const JOURNAL_SIZE_LIMIT: i64 = 64 << 20;

/// Begins or ends a read's transaction on the reader (a work that panicked left its own open:
/// it is ended first). Not counted in `statements`, as PostgreSQL's read transactions are not.
fn read_snapshot(connection: &Connection, sql: &str, action: &'static str) -> Result<(), StoreError> {
    let query_error = |source: rusqlite::Error| StoreError::Query { action, source: Box::new(source) };
    if sql == "BEGIN" && !connection.is_autocommit() {
        connection.execute_batch("ROLLBACK").map_err(query_error)?;
    }
    connection.prepare_cached(sql).and_then(|mut statement| statement.execute([])).map(drop).map_err(query_error)
}

/// The connection `read` uses: configured as the writer's, and refusing writes
/// (`query_only`), so a lookup can never change what it reads outside a transaction.
fn open_reader(path: &Path, flags: OpenFlags) -> Result<Connection, StoreError> {
    let connection = Connection::open_with_flags(path, flags)
        .map_err(|source| StoreError::Open { path: path.to_owned(), source: Box::new(source) })?;
    configure(&connection)?;
    connection
        .pragma_update(None, "query_only", "ON")
        .map_err(|source| StoreError::Configure { setting: "query_only", source: Box::new(source) })?;
    connection.set_prepared_statement_cache_capacity(STATEMENT_CACHE_CAPACITY);
    Ok(connection)
}

fn enable_write_ahead_log(connection: &Connection) -> Result<(), StoreError> {
    let mode: String = connection
        .pragma_update_and_check(None, "journal_mode", "WAL", |row| row.get(0))
        .map_err(|source| StoreError::Configure { setting: "journal_mode", source: Box::new(source) })?;
    if mode.eq_ignore_ascii_case("wal") { Ok(()) } else { Err(StoreError::JournalMode { mode }) }
}

/// Creates the file owner-only before SQLite sees it: it holds hidden parameter values. SQLite
/// gives the `-wal` and `-shm` files the database file's mode. An existing file is left as is.
fn create_private_file(path: &Path) -> Result<(), StoreError> {
    if let Some(parent) = path.parent().filter(|parent| !parent.as_os_str().is_empty()) {
        DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(parent)
            .map_err(|source| StoreError::CreateDirectory { path: parent.to_owned(), source })?;
    }
    OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .open(path)
        .map(drop)
        .map_err(|source| StoreError::CreateFile { path: path.to_owned(), source })
}
