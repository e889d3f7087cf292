//! `PgStore`: the PostgreSQL backend of `Store`, for several shim replicas sharing one database.
//! Connections come from an r2d2 pool (each keeps its prepared statements). Every write
//! transaction first takes one transaction-scoped advisory lock, so writes from all replicas
//! are serialised exactly as SQLite's single writer serialises them: the engine's
//! read-modify-write steps (a stack's pending count, a node's counters, a server's document
//! version) and the conditional writes that fence stale signals keep the meaning they have on
//! SQLite, with no serialization failures to retry. Reads (`Store::read`) take no lock. A
//! transaction names the servers whose document it changed, and the stacks whose graph it
//! changed, in `NOTIFY`s that PostgreSQL delivers at COMMIT; `listen` turns those into wake-ups
//! of the long-polls and web view streams other replicas hold.
//! This file owns connecting, the pool and the transaction boundary; the statements live in the
//! submodules, one per group of tables, as in the SQLite backend.

mod access;
mod listen;
mod nodes;
mod records;
mod schema;
mod servers;
mod sessions;
mod stacks;
mod tx;

pub(crate) use nodes::BY_SIGNAL_HASH as NODE_BY_SIGNAL_HASH;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use postgres::{Client, NoTls, Statement, Transaction};
use tokio_util::sync::CancellationToken;

use self::access::{PgTx, query_error};
use crate::store::cache::RowCache;
use crate::store::{DocumentNotice, Store, StoreError, Tx};
pub(crate) use schema::{MIGRATIONS, Migration};

/// The advisory lock every write transaction holds ("anneal-w").
const WRITE_LOCK: i64 = 0x616e_6e65_616c_2d77;
/// Connections per replica: writes take turns on the lock anyway; the rest serve reads
/// (every metadata poll looks its token up) while a write holds one.
const POOL_SIZE: u32 = 8;
/// How long a call waits for a pooled connection, and a new connection for the server.
const CONNECT_WAIT: Duration = Duration::from_secs(5);
/// Set on every session. A replica that stops mid-transaction (stopped, partitioned) loses its
/// transaction, and with it the write lock, after the idle timeout; no statement (a wait for
/// the write lock included) runs longer than the statement timeout.
const SESSION_SETTINGS: &str = "SET idle_in_transaction_session_timeout = '30s'; SET statement_timeout = '30s'";
/// The channel document changes are announced on.
pub(crate) const DOCUMENTS_CHANNEL: &str = "anneal_documents";
/// The channel stack graph changes are announced on (for the web view's live streams).
pub(crate) const STACKS_CHANNEL: &str = "anneal_stacks";
/// A NOTIFY payload must stay under 8000 bytes: longer lists are sent in several.
const NOTIFY_PAYLOAD_LIMIT: usize = 7000;

pub struct PgStore {
    pool: r2d2::Pool<Connector>,
    statements: AtomicU64,
    commits: AtomicU64,
    /// The parsed URL (it may hold a password: never printed).
    config: tokio_postgres::Config,
    /// `user@host:port/database`, for messages.
    target: String,
}

impl std::fmt::Debug for PgStore {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.debug_struct("PgStore").field("target", &self.target).finish_non_exhaustive()
    }
}

/// A pooled connection and the statements prepared on it.
pub(crate) struct PgConnection {
    client: Client,
    prepared: HashMap<&'static str, Statement>,
}

struct Connector {
    config: postgres::Config,
}

impl r2d2::ManageConnection for Connector {
    type Connection = PgConnection;
    type Error = postgres::Error;

    fn connect(&self) -> Result<PgConnection, postgres::Error> {
        let mut client = self.config.connect(NoTls)?;
        client.batch_execute(SESSION_SETTINGS)?;
        Ok(PgConnection { client, prepared: HashMap::new() })
    }

    /// Checked when a connection leaves the pool: after a database restart every pooled
    /// connection is dead, and each must be replaced rather than fail one caller.
    fn is_valid(&self, connection: &mut PgConnection) -> Result<(), postgres::Error> {
        connection.client.simple_query("").map(drop)
    }

    fn has_broken(&self, connection: &mut PgConnection) -> bool {
        connection.client.is_closed()
    }
}

/// r2d2 reports failed background connects here instead of printing them.
#[derive(Debug)]
struct LogConnectErrors;

impl r2d2::HandleError<postgres::Error> for LogConnectErrors {
    fn handle_error(&self, error: postgres::Error) {
        tracing::warn!(error = %crate::error_chain(&error), "cannot connect to PostgreSQL");
    }
}

impl PgStore {
    /// Connects to the database at `url` (`postgres://USER[:PASSWORD]@HOST[:PORT]/DB`, or
    /// `?host=/socket/dir`) and brings its schema up to date.
    pub fn open(url: &str) -> Result<PgStore, StoreError> {
        Self::open_with_migrations(url, MIGRATIONS)
    }

    /// Like `open`, but migrates only up to schema `version` (tests of upgrading from an earlier
    /// schema: open at the earlier version, then `open` again).
    #[doc(hidden)]
    pub fn open_at_schema_version(url: &str, version: u32) -> Result<PgStore, StoreError> {
        let count = MIGRATIONS.iter().take_while(|migration| migration.version <= version).count();
        Self::open_with_migrations(url, &MIGRATIONS[..count])
    }

    /// The newest schema version this build knows.
    pub fn schema_version() -> u32 {
        MIGRATIONS.last().map_or(0, |migration| migration.version)
    }

    pub(crate) fn open_with_migrations(url: &str, migrations: &[Migration]) -> Result<PgStore, StoreError> {
        let mut config: tokio_postgres::Config =
            url.parse().map_err(|source| StoreError::InvalidUrl { url: redact(url), source: Box::new(source) })?;
        if config.get_application_name().is_none() {
            config.application_name("anneal-shim");
        }
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(CONNECT_WAIT);
        }
        let target = describe(&config);
        let pool = r2d2::Pool::builder()
            .max_size(POOL_SIZE)
            .min_idle(Some(1))
            .connection_timeout(CONNECT_WAIT)
            .error_handler(Box::new(LogConnectErrors))
            .build(Connector { config: postgres::Config::from(config.clone()) })
            .map_err(|source| StoreError::Connect { target: target.clone(), source: Box::new(source) })?;
        let store = PgStore { pool, statements: AtomicU64::new(0), commits: AtomicU64::new(0), config, target };
        let mut connection = store.checkout()?;
        schema::migrate(&mut connection.client, migrations)?;
        Ok(store)
    }

    /// `user@host:port/database` (no password).
    pub fn target(&self) -> &str {
        &self.target
    }

    /// COMMITs since open (instrumentation for the benchmarks, next to `Store::statements`).
    pub fn commits(&self) -> u64 {
        self.commits.load(Ordering::Relaxed)
    }

    /// The value stored under `name` in `shared_secrets`; when there is none yet, `make()`'s,
    /// stored first. Replicas starting together agree: the first INSERT wins and every one
    /// reads what it wrote.
    pub fn shared_secret(&self, name: &str, make: impl FnOnce() -> String) -> Result<String, StoreError> {
        let mut connection = self.checkout()?;
        let mut transaction =
            connection.client.transaction().map_err(|error| query_error("begin a transaction", error))?;
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |elapsed| i64::try_from(elapsed.as_millis()).unwrap_or(i64::MAX));
        transaction
            .execute(
                "INSERT INTO shared_secrets (name, value, created_at) VALUES ($1, $2, $3) ON CONFLICT (name) DO NOTHING",
                &[&name, &make(), &now],
            )
            .map_err(|error| query_error("store a shared secret", error))?;
        let value: String = transaction
            .query_one("SELECT value FROM shared_secrets WHERE name = $1", &[&name])
            .and_then(|row| row.try_get(0))
            .map_err(|error| query_error("read a shared secret", error))?;
        transaction.commit().map_err(|error| query_error("commit a shared secret", error))?;
        Ok(value)
    }

    fn checkout(&self) -> Result<r2d2::PooledConnection<Connector>, StoreError> {
        self.pool.get().map_err(|source| StoreError::Unavailable { source: Box::new(source) })
    }

    fn count_statement(&self) {
        self.statements.fetch_add(1, Ordering::Relaxed);
    }

    /// BEGIN, then the write lock.
    fn begin_write<'connection>(
        &self,
        client: &'connection mut Client,
    ) -> Result<Transaction<'connection>, StoreError> {
        self.count_statement();
        let mut transaction = client.transaction().map_err(|error| query_error("begin a transaction", error))?;
        self.count_statement();
        transaction
            .execute("SELECT pg_advisory_xact_lock($1)", &[&WRITE_LOCK])
            .map_err(|error| query_error("take the write lock", error))?;
        Ok(transaction)
    }

    fn commit(&self, transaction: Transaction<'_>) -> Result<(), StoreError> {
        self.count_statement();
        transaction.commit().map_err(|error| {
            if access::is_unavailable(&error) {
                StoreError::Unavailable { source: Box::new(error) }
            } else {
                StoreError::Commit { source: std::sync::Arc::new(error) }
            }
        })?;
        self.commits.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
}

impl Store for PgStore {
    fn transaction<T, E: From<StoreError>>(&self, work: impl FnOnce(&mut dyn Tx) -> Result<T, E>) -> Result<T, E> {
        let mut connection = self.checkout()?;
        let PgConnection { client, prepared } = &mut *connection;
        let mut transaction = self.begin_write(client)?;
        let mut cache = RowCache::new(PgTx::new(&mut transaction, prepared, &self.statements));
        // An Err (or a panic) drops the transaction, which rolls it back.
        let value = work(&mut cache)?;
        cache.finish()?;
        let changed_stacks = cache.changed_stacks();
        let PgTx { changed_servers, failed, .. } = cache.into_backend();
        if failed {
            // The work went on past a failed statement (SQLite would have undone only that
            // statement). PostgreSQL has aborted the transaction: its COMMIT would roll back
            // and report success, so the call's writes would be acknowledged and lost.
            return Err(StoreError::RolledBack.into());
        }
        notify(&mut transaction, DOCUMENTS_CHANNEL, &changed_servers, &self.statements)?;
        notify(&mut transaction, STACKS_CHANNEL, &changed_stacks, &self.statements)?;
        self.commit(transaction)?;
        Ok(value)
    }

    fn read<T, E: From<StoreError>>(&self, work: impl FnOnce(&mut dyn Tx) -> Result<T, E>) -> Result<T, E> {
        let mut connection = self.checkout()?;
        let PgConnection { client, prepared } = &mut *connection;
        let mut transaction =
            client.build_transaction().read_only(true).start().map_err(|error| query_error("begin a read", error))?;
        let value = work(&mut RowCache::new(PgTx::new(&mut transaction, prepared, &self.statements)))?;
        transaction.commit().map_err(|error| query_error("end a read", error))?;
        Ok(value)
    }

    fn statements(&self) -> u64 {
        self.statements.load(Ordering::Relaxed)
    }

    fn watch_documents(&self, shutdown: CancellationToken) -> Option<tokio::sync::mpsc::Receiver<DocumentNotice>> {
        Some(listen::spawn(self.config.clone(), self.target.clone(), shutdown))
    }
}

/// Announces on `channel` the names (servers whose documents changed, or stacks whose graph
/// changed), delivered by PostgreSQL only if the transaction commits, in commit order.
fn notify<'name>(
    transaction: &mut Transaction<'_>,
    channel: &str,
    names: impl IntoIterator<Item = &'name String, IntoIter: ExactSizeIterator>,
    statements: &AtomicU64,
) -> Result<(), StoreError> {
    let names = names.into_iter();
    let count = names.len();
    let mut payload: Vec<&str> = Vec::new();
    let mut size = 0;
    for (index, name) in names.enumerate() {
        payload.push(name);
        size += name.len() + 4;
        if size >= NOTIFY_PAYLOAD_LIMIT || index + 1 == count {
            let text =
                serde_json::to_string(&payload).map_err(|source| StoreError::Encode { column: "notify", source })?;
            statements.fetch_add(1, Ordering::Relaxed);
            transaction
                .execute("SELECT pg_notify($1, $2)", &[&channel, &text])
                .map_err(|error| query_error("announce what a transaction changed", error))?;
            payload.clear();
            size = 0;
        }
    }
    Ok(())
}

/// The URL without its password, for messages.
fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme_end), Some(at)) if at > scheme_end => {
            let credentials = &url[scheme_end + 3..at];
            match credentials.split_once(':') {
                Some((user, _password)) => format!("{}{user}:***{}", &url[..scheme_end + 3], &url[at..]),
                None => url.to_owned(),
            }
        }
        _ => url.to_owned(),
    }
}

/// `user@host:port/database` from a parsed configuration (never its password).
fn describe(config: &tokio_postgres::Config) -> String {
    let user = config.get_user().unwrap_or("(default user)");
    let host = match config.get_hosts().first() {
        Some(tokio_postgres::config::Host::Tcp(host)) => host.clone(),
        Some(tokio_postgres::config::Host::Unix(path)) => path.display().to_string(),
        None => "localhost".to_owned(),
    };
    let port = config.get_ports().first().copied().unwrap_or(5432);
    let database = config.get_dbname().unwrap_or(user);
    format!("{user}@{host}:{port}/{database}")
}
