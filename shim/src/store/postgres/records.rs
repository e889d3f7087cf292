//! Statements on the smaller tables for PostgreSQL: `wait_signals`, `events`, `retired_signals`
//! and `deadlines`, and the retention that keeps `events` and `retired_signals` bounded. Due
//! deadlines are claimed with `FOR UPDATE SKIP LOCKED`: the sweeper fires them in the
//! transaction that read them, so a replica that dies mid-sweep releases its claim with its
//! connection and another fires them, and two replicas never fire the same one.

use postgres::Row;

use super::access::{PgTx, column, free_text, json_column, signed, to_json_text, unsigned_column};
use crate::store::{DeadlineRow, EventRow, HistoryPruned, HistoryRetention, StoreError, WaitSignalRow};

pub(super) fn upsert_wait_signal(tx: &mut PgTx<'_, '_>, row: &WaitSignalRow) -> Result<bool, StoreError> {
    let data = to_json_text(&row.data, "wait_signals.data")?;
    let reason = free_text(&row.reason);
    let signal_id = free_text(&row.signal_id);
    let received_at = signed(row.received_at)?;
    // Insert first: a new id (the usual case) costs one statement. A repeated id replaces the
    // signal in place, keeping its `seq` and so its position, as Heat's metadata dict does.
    let parameters: [&(dyn postgres::types::ToSql + Sync); 7] =
        [&row.stack, &row.handle, &signal_id, &row.success, &reason, &data, &received_at];
    let inserted = tx.execute(
        "record a wait condition signal",
        "INSERT INTO wait_signals (stack, handle, signal_id, success, reason, data, received_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (stack, handle, signal_id) DO NOTHING",
        &parameters,
    )?;
    if inserted == 1 {
        return Ok(true);
    }
    tx.execute(
        "replace a wait condition signal",
        "UPDATE wait_signals SET success = $4, reason = $5, data = $6, received_at = $7
         WHERE stack = $1 AND handle = $2 AND signal_id = $3",
        &parameters,
    )?;
    Ok(false)
}

pub(super) fn retire_signal_hash(tx: &mut PgTx<'_, '_>, hash: &str, stack: &str, node: &str) -> Result<(), StoreError> {
    tx.execute(
        "retire a signal token hash",
        // The time comes from the database's clock: the engine passes none here, and retention
        // only needs it to within seconds.
        "INSERT INTO retired_signals (hash, stack, node, retired_at)
         VALUES ($1, $2, $3, (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT) ON CONFLICT (hash) DO NOTHING",
        &[&hash, &stack, &node],
    )?;
    Ok(())
}

pub(super) fn is_retired_signal_hash(tx: &mut PgTx<'_, '_>, hash: &str) -> Result<bool, StoreError> {
    let found = tx.query_optional(
        "look up a retired signal token hash",
        "SELECT 1 FROM retired_signals WHERE hash = $1",
        &[&hash],
        |_| Ok(()),
    )?;
    Ok(found.is_some())
}

pub(super) fn wait_signal_success(
    tx: &mut PgTx<'_, '_>,
    stack: &str,
    handle: &str,
    signal_id: &str,
) -> Result<Option<bool>, StoreError> {
    tx.query_optional(
        "look up a wait condition signal",
        "SELECT success FROM wait_signals WHERE stack = $1 AND handle = $2 AND signal_id = $3",
        &[&stack, &handle, &free_text(signal_id)],
        |row| column(row, 0),
    )
}

pub(super) fn wait_signals(tx: &mut PgTx<'_, '_>, stack: &str, handle: &str) -> Result<Vec<WaitSignalRow>, StoreError> {
    tx.query_all(
        "list wait condition signals",
        "SELECT stack, handle, signal_id, success, reason, data, received_at FROM wait_signals
         WHERE stack = $1 AND handle = $2 ORDER BY seq",
        &[&stack, &handle],
        wait_signal_from_row,
    )
}

pub(super) fn append_event(
    tx: &mut PgTx<'_, '_>,
    stack: &str,
    time: u64,
    resource: &str,
    status: &str,
    reason: &str,
) -> Result<u64, StoreError> {
    tx.query_optional(
        "append an event",
        "INSERT INTO events (stack, time, resource, status, reason) VALUES ($1, $2, $3, $4, $5) RETURNING id",
        &[&stack, &signed(time)?, &free_text(resource), &status, &free_text(reason)],
        |row| unsigned_column(row, 0),
    )?
    .ok_or_else(|| StoreError::Query {
        action: "append an event",
        source: "INSERT ... RETURNING returned no row".into(),
    })
}

pub(super) fn events(tx: &mut PgTx<'_, '_>, stack: &str) -> Result<Vec<EventRow>, StoreError> {
    tx.query_all(
        "list a stack's events",
        "SELECT id, stack, time, resource, status, reason FROM events WHERE stack = $1 ORDER BY id",
        &[&stack],
        |row| {
            Ok(EventRow {
                id: unsigned_column(row, 0)?,
                stack: column(row, 1)?,
                time: unsigned_column(row, 2)?,
                resource: column(row, 3)?,
                status: column(row, 4)?,
                reason: column(row, 5)?,
            })
        },
    )
}

/// Removes the history `retention` gives up at `now`, by the rules of the SQLite backend's
/// `prune_history` (see there).
pub(super) fn prune_history(
    tx: &mut PgTx<'_, '_>,
    retention: &HistoryRetention,
    now: u64,
) -> Result<HistoryPruned, StoreError> {
    let mut pruned = HistoryPruned::default();
    if let Some(keep) = retention.max_events_per_stack {
        let keep = signed(keep)?;
        let crowded = tx.query_all(
            "list stacks with too many events",
            "SELECT stack FROM events GROUP BY stack HAVING COUNT(*) > $1",
            &[&keep],
            |row| column::<String>(row, 0),
        )?;
        for stack in crowded {
            pruned.events += count(tx.execute(
                "remove a stack's oldest events",
                "DELETE FROM events WHERE stack = $1 AND id <=
                 (SELECT id FROM events WHERE stack = $1 ORDER BY id DESC LIMIT 1 OFFSET $2)",
                &[&stack, &keep],
            )?);
        }
    }
    pruned.events += count(tx.execute(
        "remove the events of an earlier stack of the same name",
        "DELETE FROM events WHERE time < (SELECT created_at FROM stacks WHERE stacks.name = events.stack)",
        &[],
    )?);
    if let Some(age) = retention.deleted_stack_events_ms {
        pruned.events += count(tx.execute(
            "remove the events of long-deleted stacks",
            "DELETE FROM events WHERE stack IN
             (SELECT stack FROM events WHERE stack NOT IN (SELECT name FROM stacks)
              GROUP BY stack HAVING MAX(time) < $1)",
            &[&signed(now.saturating_sub(age))?],
        )?);
    }
    if let Some(age) = retention.retired_signals_ms {
        pruned.retired_signals = count(tx.execute(
            "remove old retired signal token hashes",
            "DELETE FROM retired_signals WHERE retired_at < $1",
            &[&signed(now.saturating_sub(age))?],
        )?);
    }
    Ok(pruned)
}

fn count(rows: u64) -> usize {
    usize::try_from(rows).unwrap_or(usize::MAX)
}

/// `deadlines.node` is NOT NULL (it is part of the key): the stack's own deadline is stored
/// with an empty node name, which no resource has (as in the SQLite backend).
const STACK_NODE: &str = "";

pub(super) fn put_deadline(tx: &mut PgTx<'_, '_>, row: &DeadlineRow) -> Result<(), StoreError> {
    tx.execute(
        "store a deadline",
        "INSERT INTO deadlines (stack, node, generation, due_at) VALUES ($1, $2, $3, $4)
         ON CONFLICT (stack, node, generation) DO UPDATE SET due_at = excluded.due_at",
        &[&row.stack, &row.node.as_deref().unwrap_or(STACK_NODE), &signed(row.generation)?, &signed(row.due_at)?],
    )?;
    Ok(())
}

pub(super) fn delete_deadline(
    tx: &mut PgTx<'_, '_>,
    stack: &str,
    node: Option<&str>,
    generation: u64,
) -> Result<(), StoreError> {
    tx.execute(
        "delete a deadline",
        "DELETE FROM deadlines WHERE stack = $1 AND node = $2 AND generation = $3",
        &[&stack, &node.unwrap_or(STACK_NODE), &signed(generation)?],
    )?;
    Ok(())
}

pub(super) fn due_deadlines(tx: &mut PgTx<'_, '_>, now: u64, limit: usize) -> Result<Vec<DeadlineRow>, StoreError> {
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    tx.query_all(
        "claim due deadlines",
        "SELECT stack, node, generation, due_at FROM deadlines WHERE due_at <= $1
         ORDER BY due_at, stack, node, generation LIMIT $2 FOR UPDATE SKIP LOCKED",
        &[&signed(now)?, &limit],
        |row| {
            let node: String = column(row, 1)?;
            Ok(DeadlineRow {
                stack: column(row, 0)?,
                node: (node != STACK_NODE).then_some(node),
                generation: unsigned_column(row, 2)?,
                due_at: unsigned_column(row, 3)?,
            })
        },
    )
}

fn wait_signal_from_row(row: &Row) -> Result<WaitSignalRow, StoreError> {
    Ok(WaitSignalRow {
        stack: column(row, 0)?,
        handle: column(row, 1)?,
        signal_id: column(row, 2)?,
        success: column(row, 3)?,
        reason: column(row, 4)?,
        data: json_column(row, 5, "wait_signals.data")?,
        received_at: unsigned_column(row, 6)?,
    })
}
