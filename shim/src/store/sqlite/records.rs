//! Statements on the smaller tables: `wait_signals` (what wait condition handles received),
//! `events` (the stack's history, kept after the stack is deleted), `retired_signals` (token
//! hashes of superseded publications) and `deadlines` (every timeout the sweeper enforces), and
//! the retention that keeps `events` and `retired_signals` bounded.

use rusqlite::{Row, params};

use super::access::{SqliteTx, Unsigned, column, json_column, to_json_text, unsigned_column};
use crate::store::{DeadlineRow, EventRow, HistoryPruned, HistoryRetention, StoreError, WaitSignalRow};

pub(super) fn upsert_wait_signal(tx: &SqliteTx<'_>, row: &WaitSignalRow) -> Result<bool, StoreError> {
    let data = to_json_text(&row.data, "wait_signals.data")?;
    // Insert first: a new id (the usual case) costs one statement. A repeated id replaces the
    // signal in place, keeping its `seq` and so its position, as Heat's metadata dict does.
    let inserted = tx.execute(
        "record a wait condition signal",
        "INSERT INTO wait_signals (stack, handle, signal_id, success, reason, data, received_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) ON CONFLICT (stack, handle, signal_id) DO NOTHING",
        params![row.stack, row.handle, row.signal_id, row.success, row.reason, data, Unsigned(row.received_at)],
    )?;
    if inserted == 1 {
        return Ok(true);
    }
    tx.execute(
        "replace a wait condition signal",
        "UPDATE wait_signals SET success = ?4, reason = ?5, data = ?6, received_at = ?7
         WHERE stack = ?1 AND handle = ?2 AND signal_id = ?3",
        params![row.stack, row.handle, row.signal_id, row.success, row.reason, data, Unsigned(row.received_at)],
    )?;
    Ok(false)
}

pub(super) fn retire_signal_hash(tx: &SqliteTx<'_>, hash: &str, stack: &str, node: &str) -> Result<(), StoreError> {
    tx.execute(
        "retire a signal token hash",
        // The time comes from SQLite's clock: the engine passes none here, and retention only
        // needs it to within seconds.
        "INSERT INTO retired_signals (hash, stack, node, retired_at)
         VALUES (?1, ?2, ?3, CAST(strftime('%s', 'now') AS INTEGER) * 1000) ON CONFLICT (hash) DO NOTHING",
        [hash, stack, node],
    )?;
    Ok(())
}

pub(super) fn is_retired_signal_hash(tx: &SqliteTx<'_>, hash: &str) -> Result<bool, StoreError> {
    let found = tx.query_optional(
        "look up a retired signal token hash",
        "SELECT 1 FROM retired_signals WHERE hash = ?1",
        [hash],
        |_| Ok(()),
    )?;
    Ok(found.is_some())
}

pub(super) fn wait_signal_success(
    tx: &SqliteTx<'_>,
    stack: &str,
    handle: &str,
    signal_id: &str,
) -> Result<Option<bool>, StoreError> {
    // One lookup in the (stack, handle, signal_id) index and its row: no other signal is read.
    tx.query_optional(
        "look up a wait condition signal",
        "SELECT success FROM wait_signals WHERE stack = ?1 AND handle = ?2 AND signal_id = ?3",
        [stack, handle, signal_id],
        |row| column(row, 0),
    )
}

pub(super) fn wait_signals(tx: &SqliteTx<'_>, stack: &str, handle: &str) -> Result<Vec<WaitSignalRow>, StoreError> {
    tx.query_all(
        "list wait condition signals",
        "SELECT stack, handle, signal_id, success, reason, data, received_at FROM wait_signals
         WHERE stack = ?1 AND handle = ?2 ORDER BY seq",
        [stack, handle],
        wait_signal_from_row,
    )
}

pub(super) fn append_event(
    tx: &SqliteTx<'_>,
    stack: &str,
    time: u64,
    resource: &str,
    status: &str,
    reason: &str,
) -> Result<u64, StoreError> {
    tx.query_optional(
        "append an event",
        "INSERT INTO events (stack, time, resource, status, reason) VALUES (?1, ?2, ?3, ?4, ?5) RETURNING id",
        params![stack, Unsigned(time), resource, status, reason],
        |row| unsigned_column(row, 0),
    )?
    // RETURNING always yields the inserted row; this only guards against an SQLite surprise.
    .ok_or_else(|| StoreError::Query {
        action: "append an event",
        source: Box::new(rusqlite::Error::QueryReturnedNoRows),
    })
}

pub(super) fn events(tx: &SqliteTx<'_>, stack: &str) -> Result<Vec<EventRow>, StoreError> {
    tx.query_all(
        "list a stack's events",
        "SELECT id, stack, time, resource, status, reason FROM events WHERE stack = ?1 ORDER BY id",
        [stack],
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

/// Removes the events and retired signal hashes `retention` gives up at `now`: per stack name the
/// events beyond the newest `max_events_per_stack` (as Heat's `max_events_per_stack` does), the
/// events of an earlier stack of a name now re-created (`stack events` shows only the current
/// stack's), the events of a deleted stack whose last event is older than its retention, and
/// retired hashes older than theirs.
pub(super) fn prune_history(
    tx: &SqliteTx<'_>,
    retention: &HistoryRetention,
    now: u64,
) -> Result<HistoryPruned, StoreError> {
    let mut pruned = HistoryPruned::default();
    if let Some(keep) = retention.max_events_per_stack {
        let crowded = tx.query_all(
            "list stacks with too many events",
            "SELECT stack FROM events GROUP BY stack HAVING COUNT(*) > ?1",
            [Unsigned(keep)],
            |row| column::<String>(row, 0),
        )?;
        for stack in crowded {
            pruned.events += tx.execute(
                "remove a stack's oldest events",
                "DELETE FROM events WHERE stack = ?1 AND id <=
                 (SELECT id FROM events WHERE stack = ?1 ORDER BY id DESC LIMIT 1 OFFSET ?2)",
                params![stack, Unsigned(keep)],
            )?;
        }
    }
    pruned.events += tx.execute(
        "remove the events of an earlier stack of the same name",
        "DELETE FROM events WHERE time < (SELECT created_at FROM stacks WHERE stacks.name = events.stack)",
        [],
    )?;
    if let Some(age) = retention.deleted_stack_events_ms {
        pruned.events += tx.execute(
            "remove the events of long-deleted stacks",
            "DELETE FROM events WHERE stack IN
             (SELECT stack FROM events WHERE stack NOT IN (SELECT name FROM stacks)
              GROUP BY stack HAVING MAX(time) < ?1)",
            [Unsigned(now.saturating_sub(age))],
        )?;
    }
    if let Some(age) = retention.retired_signals_ms {
        pruned.retired_signals = tx.execute(
            "remove old retired signal token hashes",
            "DELETE FROM retired_signals WHERE retired_at < ?1",
            [Unsigned(now.saturating_sub(age))],
        )?;
    }
    Ok(pruned)
}

/// `deadlines.node` is NOT NULL (it is part of the key, and NULLs never conflict): the stack's
/// own deadline is stored with an empty node name, which no resource has.
const STACK_NODE: &str = "";

pub(super) fn put_deadline(tx: &SqliteTx<'_>, row: &DeadlineRow) -> Result<(), StoreError> {
    tx.execute(
        "store a deadline",
        "INSERT INTO deadlines (stack, node, generation, due_at) VALUES (?1, ?2, ?3, ?4)
         ON CONFLICT (stack, node, generation) DO UPDATE SET due_at = excluded.due_at",
        params![row.stack, row.node.as_deref().unwrap_or(STACK_NODE), Unsigned(row.generation), Unsigned(row.due_at)],
    )?;
    Ok(())
}

pub(super) fn delete_deadline(
    tx: &SqliteTx<'_>,
    stack: &str,
    node: Option<&str>,
    generation: u64,
) -> Result<(), StoreError> {
    tx.execute(
        "delete a deadline",
        "DELETE FROM deadlines WHERE stack = ?1 AND node = ?2 AND generation = ?3",
        params![stack, node.unwrap_or(STACK_NODE), Unsigned(generation)],
    )?;
    Ok(())
}

pub(super) fn due_deadlines(tx: &SqliteTx<'_>, now: u64, limit: usize) -> Result<Vec<DeadlineRow>, StoreError> {
    // SQLite's LIMIT is signed; anything beyond i64 means "no limit" anyway.
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    tx.query_all(
        "list due deadlines",
        "SELECT stack, node, generation, due_at FROM deadlines WHERE due_at <= ?1
         ORDER BY due_at, stack, node, generation LIMIT ?2",
        params![Unsigned(now), limit],
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

fn wait_signal_from_row(row: &Row<'_>) -> Result<WaitSignalRow, StoreError> {
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
