//! Statements on `stacks` for PostgreSQL, including the cascade of `delete_stack` over everything
//! a stack owns.

use postgres::Row;

use super::access::{
    PgTx, action_column, column, enum_column, free_text, json_column, optional_unsigned_column, signed, state_column,
    to_json_text, unsigned_column,
};
use crate::store::{Rollback, StackRow, StoreError, StoredRequests};

/// `SELECT <the StackRow columns> FROM stacks <tail>` as one literal.
macro_rules! select_stacks {
    ($tail:literal) => {
        concat!(
            "SELECT id, name, action, state, status_reason, parameters, hidden_parameters, generation, ",
            "pending, deadline, created_at, updated_at, evaluated_bytes, resource_count, rollback FROM stacks ",
            $tail
        )
    };
}

/// The tables `delete_stack` empties of a stack's rows, one statement each (events stay).
const OWNED_TABLES: &[(&str, &str)] = &[
    ("delete a stack's template", "DELETE FROM stack_templates WHERE stack = $1"),
    ("delete a stack's deadlines", "DELETE FROM deadlines WHERE stack = $1"),
    ("delete a stack's wait signals", "DELETE FROM wait_signals WHERE stack = $1"),
    ("delete a stack's metadata entries", "DELETE FROM entries WHERE stack = $1"),
    ("delete a stack's edges", "DELETE FROM edges WHERE stack = $1"),
    ("delete a stack's nodes", "DELETE FROM nodes WHERE stack = $1"),
    ("delete a stack", "DELETE FROM stacks WHERE name = $1"),
];

pub(super) fn insert(tx: &mut PgTx<'_, '_>, row: &StackRow, template: &str) -> Result<bool, StoreError> {
    let parameters = to_json_text(&row.parameters, "stacks.parameters")?;
    let hidden_parameters = to_json_text(&row.hidden_parameters, "stacks.hidden_parameters")?;
    // Only a taken name means "false"; a duplicate id is a real error and still fails.
    let changed = tx.execute(
        "insert a stack",
        "INSERT INTO stacks (id, name, action, state, status_reason, parameters, hidden_parameters,
             generation, pending, deadline, created_at, updated_at, evaluated_bytes, resource_count, rollback)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15) ON CONFLICT (name) DO NOTHING",
        &[
            &row.id,
            &row.name,
            &row.action.as_str(),
            &row.state.as_str(),
            &free_text(&row.status_reason),
            &parameters,
            &hidden_parameters,
            &signed(row.generation)?,
            &row.pending,
            &row.deadline.map(signed).transpose()?,
            &signed(row.created_at)?,
            &signed(row.updated_at)?,
            &signed(row.evaluated_bytes)?,
            &signed(row.resource_count)?,
            &row.rollback.as_str(),
        ],
    )?;
    if changed == 1 {
        tx.execute(
            "store a stack's template",
            "INSERT INTO stack_templates (stack, template) VALUES ($1, $2)",
            &[&row.name, &free_text(template)],
        )?;
    }
    Ok(changed == 1)
}

pub(super) fn by_name(tx: &mut PgTx<'_, '_>, name: &str) -> Result<Option<StackRow>, StoreError> {
    tx.query_optional("read a stack", select_stacks!("WHERE name = $1"), &[&name], stack_from_row)
}

pub(super) fn all(tx: &mut PgTx<'_, '_>) -> Result<Vec<StackRow>, StoreError> {
    tx.query_all("list stacks", select_stacks!("ORDER BY name"), &[], stack_from_row)
}

pub(super) fn update(tx: &mut PgTx<'_, '_>, row: &StackRow) -> Result<(), StoreError> {
    let parameters = to_json_text(&row.parameters, "stacks.parameters")?;
    let hidden_parameters = to_json_text(&row.hidden_parameters, "stacks.hidden_parameters")?;
    let changed = tx.execute(
        "update a stack",
        "UPDATE stacks SET id = $1, action = $3, state = $4, status_reason = $5, parameters = $6,
             hidden_parameters = $7, generation = $8, pending = $9, deadline = $10, updated_at = $11,
             evaluated_bytes = $12, resource_count = $13, rollback = $14
         WHERE name = $2",
        &[
            &row.id,
            &row.name,
            &row.action.as_str(),
            &row.state.as_str(),
            &free_text(&row.status_reason),
            &parameters,
            &hidden_parameters,
            &signed(row.generation)?,
            &row.pending,
            &row.deadline.map(signed).transpose()?,
            &signed(row.updated_at)?,
            &signed(row.evaluated_bytes)?,
            &signed(row.resource_count)?,
            &row.rollback.as_str(),
        ],
    )?;
    if changed == 0 {
        return Err(StoreError::NotFound { kind: "stack", key: row.name.clone() });
    }
    Ok(())
}

/// The template text of a stack (only `show` and `update` need it).
pub(super) fn template(tx: &mut PgTx<'_, '_>, name: &str) -> Result<Option<String>, StoreError> {
    tx.query_optional(
        "read a stack's template",
        "SELECT template FROM stack_templates WHERE stack = $1",
        &[&name],
        |row| column(row, 0),
    )
}

pub(super) fn set_template(tx: &mut PgTx<'_, '_>, name: &str, template: &str) -> Result<(), StoreError> {
    let changed = tx.execute(
        "replace a stack's template",
        "UPDATE stack_templates SET template = $2 WHERE stack = $1",
        &[&name, &free_text(template)],
    )?;
    if changed == 0 {
        return Err(StoreError::NotFound { kind: "stack", key: name.to_owned() });
    }
    Ok(())
}

/// The requests beside the template (schema 5); none for a stack stored before.
pub(super) fn requests(tx: &mut PgTx<'_, '_>, name: &str) -> Result<StoredRequests, StoreError> {
    let found = tx.query_optional(
        "read a stack's requests",
        "SELECT request, previous_request FROM stack_templates WHERE stack = $1",
        &[&name],
        |row| Ok(StoredRequests { current: column(row, 0)?, previous: column(row, 1)? }),
    )?;
    Ok(found.unwrap_or_default())
}

pub(super) fn set_requests(tx: &mut PgTx<'_, '_>, name: &str, requests: &StoredRequests) -> Result<(), StoreError> {
    let current = requests.current.as_deref().map(free_text);
    let previous = requests.previous.as_deref().map(free_text);
    let changed = tx.execute(
        "replace a stack's requests",
        "UPDATE stack_templates SET request = $2, previous_request = $3 WHERE stack = $1",
        &[&name, &current, &previous],
    )?;
    if changed == 0 {
        return Err(StoreError::NotFound { kind: "stack", key: name.to_owned() });
    }
    Ok(())
}

pub(super) fn add_pending(tx: &mut PgTx<'_, '_>, name: &str, delta: i64) -> Result<i64, StoreError> {
    tx.query_optional(
        "change a stack's pending count",
        "UPDATE stacks SET pending = pending + $2 WHERE name = $1 RETURNING pending",
        &[&name, &delta],
        |row| column(row, 0),
    )?
    .ok_or_else(|| StoreError::NotFound { kind: "stack", key: name.to_owned() })
}

pub(super) fn delete(tx: &mut PgTx<'_, '_>, name: &str) -> Result<(), StoreError> {
    for (action, sql) in OWNED_TABLES {
        tx.execute(action, sql, &[&name])?;
    }
    Ok(())
}

fn stack_from_row(row: &Row) -> Result<StackRow, StoreError> {
    Ok(StackRow {
        id: column(row, 0)?,
        name: column(row, 1)?,
        action: action_column(row, 2)?,
        state: state_column(row, 3)?,
        status_reason: column(row, 4)?,
        parameters: json_column(row, 5, "stacks.parameters")?,
        hidden_parameters: json_column(row, 6, "stacks.hidden_parameters")?,
        generation: unsigned_column(row, 7)?,
        pending: column(row, 8)?,
        deadline: optional_unsigned_column(row, 9)?,
        created_at: unsigned_column(row, 10)?,
        updated_at: unsigned_column(row, 11)?,
        evaluated_bytes: unsigned_column(row, 12)?,
        resource_count: unsigned_column(row, 13)?,
        rollback: enum_column(row, 14, Rollback::parse)?,
    })
}
