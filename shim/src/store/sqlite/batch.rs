//! Group commit: how `SqliteStore::transaction` calls share one SQLite transaction. With
//! `synchronous=FULL` every COMMIT waits for an fsync (milliseconds), so one COMMIT per call
//! caps durable signals at a few hundred per second. Instead, calls run one after another on the
//! connection, each inside its own SAVEPOINT (an `Err` or a panic rolls back only that call's
//! work), and the open transaction is committed by the first call that finishes while nobody
//! else is queued for the connection (or when the batch is full). A call whose work succeeded
//! returns only after its batch's COMMIT did; if that COMMIT fails, every call in the batch gets
//! the error and none of them took effect. So each call keeps all-or-nothing and durable-on-Ok;
//! what it cannot see is that its neighbours' writes share its fsync.

use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};
use std::sync::atomic::Ordering;
use std::sync::{Arc, OnceLock, PoisonError};

use rusqlite::Connection;

use super::SqliteStore;
use super::access::SqliteTx;
use crate::store::cache::RowCache;
use crate::store::{StoreError, Tx};

/// A batch is committed after this many successful calls even if more are queued, which bounds
/// the wait of its first caller.
pub const BATCH_LIMIT: usize = 64;

/// What the mutex guards: the connection and the transaction open on it, if any.
pub(super) struct Shared {
    pub(super) connection: Connection,
    open: Option<OpenBatch>,
}

struct OpenBatch {
    /// Set once, when the batch ends; its members wait for it.
    outcome: Arc<OnceLock<Outcome>>,
    /// Calls whose work is kept in the batch (they are waiting for `outcome`).
    members: usize,
}

#[derive(Clone)]
enum Outcome {
    Committed,
    CommitFailed(Arc<dyn std::error::Error + Send + Sync>),
    /// SQLite rolled the whole transaction back (after an I/O error, a full disk, ...).
    RolledBack,
}

impl Shared {
    pub(super) fn new(connection: Connection) -> Shared {
        Shared { connection, open: None }
    }
}

impl Outcome {
    fn into_result(self) -> Result<(), StoreError> {
        match self {
            Outcome::Committed => Ok(()),
            Outcome::CommitFailed(source) => Err(StoreError::Commit { source }),
            Outcome::RolledBack => Err(StoreError::RolledBack),
        }
    }
}

/// `Store::transaction` for `SqliteStore`.
pub(super) fn run<T, E: From<StoreError>>(
    store: &SqliteStore,
    work: impl FnOnce(&mut dyn Tx) -> Result<T, E>,
) -> Result<T, E> {
    // Counted before taking the lock, so the holder knows someone will join its batch.
    store.waiting.fetch_add(1, Ordering::SeqCst);
    let mut shared = store.lock();
    store.waiting.fetch_sub(1, Ordering::SeqCst);
    let outcome = match begin_member(store, &mut shared) {
        Ok(outcome) => outcome,
        Err(error) => {
            end_batch_if_last(store, &mut shared);
            return Err(E::from(error));
        }
    };
    let result = catch_unwind(AssertUnwindSafe(|| {
        let mut cache = RowCache::new(SqliteTx::new(&shared.connection, &store.counters));
        let value = work(&mut cache)?;
        cache.finish()?;
        Ok(value)
    }));
    let kept = matches!(result, Ok(Ok(_)));
    let ended = end_member(store, &mut shared, kept);
    end_batch_if_last(store, &mut shared);
    let value = match result {
        Ok(Ok(value)) => value,
        Ok(Err(error)) => return Err(error),
        Err(panic) => {
            drop(shared);
            resume_unwind(panic)
        }
    };
    ended.map_err(E::from)?;
    let shared =
        store.batch_ended.wait_while(shared, |_| outcome.get().is_none()).unwrap_or_else(PoisonError::into_inner);
    drop(shared);
    let outcome = outcome.get().cloned().unwrap_or(Outcome::RolledBack);
    outcome.into_result().map_err(E::from)?;
    Ok(value)
}

/// Joins the open batch (beginning one if needed) and opens this call's savepoint.
fn begin_member(store: &SqliteStore, shared: &mut Shared) -> Result<Arc<OnceLock<Outcome>>, StoreError> {
    if shared.open.is_none() {
        if !shared.connection.is_autocommit() {
            // Only a failed ROLLBACK leaves a stray transaction; clear it so BEGIN works.
            shared
                .connection
                .execute_batch("ROLLBACK")
                .map_err(|source| StoreError::Query { action: "roll back", source: Box::new(source) })?;
        }
        // Immediate: take the write lock now, so no statement of the batch can fail later
        // with SQLITE_BUSY because another connection wrote first.
        store.count_statement();
        shared
            .connection
            .execute_batch("BEGIN IMMEDIATE")
            .map_err(|source| StoreError::Query { action: "begin a transaction", source: Box::new(source) })?;
        shared.open = Some(OpenBatch { outcome: Arc::new(OnceLock::new()), members: 0 });
    }
    let outcome = shared.open.as_ref().map(|open| Arc::clone(&open.outcome)).ok_or(StoreError::RolledBack)?;
    execute_cached(store, &shared.connection, "open a savepoint", "SAVEPOINT member")?;
    Ok(outcome)
}

/// Keeps (RELEASE) or discards (ROLLBACK TO, RELEASE) this call's work. Err when the batch as
/// a whole was lost: SQLite aborted it, or the savepoint could not be unwound.
fn end_member(store: &SqliteStore, shared: &mut Shared, kept: bool) -> Result<(), StoreError> {
    let connection = &shared.connection;
    let unwound = if connection.is_autocommit() {
        Err(StoreError::RolledBack)
    } else if kept {
        execute_cached(store, connection, "release a savepoint", "RELEASE member")
    } else {
        execute_cached(store, connection, "roll back a savepoint", "ROLLBACK TO member")
            .and_then(|()| execute_cached(store, connection, "release a savepoint", "RELEASE member"))
    };
    match unwound {
        Ok(()) => {
            if let Some(open) = shared.open.as_mut() {
                open.members += usize::from(kept);
            }
            Ok(())
        }
        Err(error) => {
            if kept {
                tracing::error!(error = %error, "a transaction batch was lost");
            }
            finish(store, shared, Outcome::RolledBack);
            Err(error)
        }
    }
}

/// Commits the open batch unless another call is about to join it.
fn end_batch_if_last(store: &SqliteStore, shared: &mut Shared) {
    let Some(open) = shared.open.as_ref() else { return };
    if store.waiting.load(Ordering::SeqCst) > 0 && open.members < BATCH_LIMIT {
        return;
    }
    if open.members == 0 {
        // Nothing to make durable: skip the fsync.
        finish(store, shared, Outcome::RolledBack);
        return;
    }
    store.count_statement();
    let outcome = match shared.connection.execute_batch("COMMIT") {
        Ok(()) => {
            store.commits.fetch_add(1, Ordering::Relaxed);
            Outcome::Committed
        }
        Err(source) => Outcome::CommitFailed(Arc::new(source)),
    };
    finish(store, shared, outcome);
}

/// Ends the batch with `outcome` (rolling back whatever is still open) and wakes its members.
fn finish(store: &SqliteStore, shared: &mut Shared, outcome: Outcome) {
    if !shared.connection.is_autocommit() {
        store.count_statement();
        if let Err(source) = shared.connection.execute_batch("ROLLBACK") {
            tracing::error!(error = %source, "failed to roll back a transaction");
        }
    }
    if let Some(open) = shared.open.take() {
        let _ = open.outcome.set(outcome);
    }
    store.batch_ended.notify_all();
}

fn execute_cached(
    store: &SqliteStore,
    connection: &Connection,
    action: &'static str,
    sql: &str,
) -> Result<(), StoreError> {
    store.count_statement();
    let sql_error = |source: rusqlite::Error| StoreError::Query { action, source: Box::new(source) };
    connection.prepare_cached(sql).map_err(sql_error)?.execute([]).map(drop).map_err(sql_error)
}
