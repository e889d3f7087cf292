//! Statements on `nodes` (one per template resource, with its readiness counter and the
//! conditional write signals go through) and `edges` (each node's successors).

use rusqlite::{Row, params};

use super::access::{SqliteTx, Unsigned, column, json_column, to_json_text, unsigned_column};
use crate::store::{NodeRow, NodeState, StoreError};

/// `SELECT <the NodeRow columns> FROM nodes <tail>` as one literal: no allocation per call.
macro_rules! select_nodes {
    ($tail:literal) => {
        concat!(
            "SELECT stack, name, resource_type, generation, action, state, status_reason, remaining, definition, ",
            "attributes, derived_config_id, signal_token_hash, server, updated_at, record FROM nodes ",
            $tail
        )
    };
}

/// `UPDATE nodes SET <every column but the key> WHERE stack = ?1 AND name = ?2 <condition>`;
/// parameters ?1 to ?15 come from `node_parameters!`.
macro_rules! update_nodes {
    ($condition:literal) => {
        concat!(
            "UPDATE nodes SET resource_type = ?3, generation = ?4, action = ?5, state = ?6, status_reason = ?7, ",
            "remaining = ?8, definition = ?9, attributes = ?10, derived_config_id = ?11, signal_token_hash = ?12, ",
            "server = ?13, updated_at = ?14, record = ?15 WHERE stack = ?1 AND name = ?2 ",
            $condition
        )
    };
}

/// Parameters ?1 to ?15 of the node writes, in column order, then any `extra` ones.
macro_rules! node_parameters {
    ($row:expr, $encoded:expr $(, $extra:expr)*) => {
        params![
            $row.stack,
            $row.name,
            $row.resource_type,
            Unsigned($row.generation),
            $row.action,
            $row.state,
            $row.status_reason,
            $row.remaining,
            $encoded.definition,
            $encoded.attributes,
            $row.derived_config_id,
            $row.signal_token_hash,
            $row.server,
            Unsigned($row.updated_at),
            $encoded.record
            $(, $extra)*
        ]
    };
}

/// A node's JSON columns, encoded once for any of the writes.
struct EncodedNode {
    definition: String,
    attributes: String,
    record: String,
}

impl EncodedNode {
    fn new(row: &NodeRow) -> Result<EncodedNode, StoreError> {
        Ok(EncodedNode {
            definition: to_json_text(&*row.definition, "nodes.definition")?,
            attributes: to_json_text(&*row.attributes, "nodes.attributes")?,
            record: to_json_text(&row.record, "nodes.record")?,
        })
    }
}

pub(super) fn insert(tx: &SqliteTx<'_>, row: &NodeRow) -> Result<(), StoreError> {
    let encoded = EncodedNode::new(row)?;
    tx.execute(
        "insert a node",
        "INSERT INTO nodes (stack, name, resource_type, generation, action, state, status_reason, remaining,
             definition, attributes, derived_config_id, signal_token_hash, server, updated_at, record)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15)",
        node_parameters!(row, encoded),
    )?;
    Ok(())
}

pub(super) fn by_name(tx: &SqliteTx<'_>, stack: &str, name: &str) -> Result<Option<NodeRow>, StoreError> {
    tx.query_optional("read a node", select_nodes!("WHERE stack = ?1 AND name = ?2"), [stack, name], node_from_row)
}

pub(super) fn all(tx: &SqliteTx<'_>, stack: &str) -> Result<Vec<NodeRow>, StoreError> {
    tx.query_all("list a stack's nodes", select_nodes!("WHERE stack = ?1 ORDER BY seq"), [stack], node_from_row)
}

pub(super) fn by_signal_hash(tx: &SqliteTx<'_>, hash: &str) -> Result<Option<NodeRow>, StoreError> {
    tx.query_optional(
        "find a node by signal token",
        select_nodes!("WHERE signal_token_hash = ?1 ORDER BY seq LIMIT 1"),
        [hash],
        node_from_row,
    )
}

pub(super) fn update(tx: &SqliteTx<'_>, row: &NodeRow) -> Result<(), StoreError> {
    let encoded = EncodedNode::new(row)?;
    let changed = tx.execute("update a node", update_nodes!(""), node_parameters!(row, encoded))?;
    if changed == 0 {
        return Err(not_found(&row.stack, &row.name));
    }
    Ok(())
}

pub(super) fn update_if(
    tx: &SqliteTx<'_>,
    row: &NodeRow,
    generation: u64,
    state: NodeState,
) -> Result<bool, StoreError> {
    let encoded = EncodedNode::new(row)?;
    let changed = tx.execute(
        "apply a signal to a node",
        update_nodes!("AND generation = ?16 AND state = ?17"),
        node_parameters!(row, encoded, Unsigned(generation), state),
    )?;
    Ok(changed == 1)
}

pub(super) fn decrement_remaining(tx: &SqliteTx<'_>, stack: &str, name: &str) -> Result<i64, StoreError> {
    tx.query_optional(
        "decrement a node's unsatisfied predecessors",
        "UPDATE nodes SET remaining = remaining - 1 WHERE stack = ?1 AND name = ?2 RETURNING remaining",
        [stack, name],
        |row| column(row, 0),
    )?
    .ok_or_else(|| not_found(stack, name))
}

pub(super) fn delete(tx: &SqliteTx<'_>, stack: &str, name: &str) -> Result<(), StoreError> {
    tx.execute("delete a node", "DELETE FROM nodes WHERE stack = ?1 AND name = ?2", [stack, name])?;
    Ok(())
}

pub(super) fn insert_edge(tx: &SqliteTx<'_>, stack: &str, from: &str, to: &str) -> Result<(), StoreError> {
    tx.execute(
        "insert an edge",
        "INSERT INTO edges (stack, from_node, to_node) VALUES (?1, ?2, ?3) ON CONFLICT DO NOTHING",
        [stack, from, to],
    )?;
    Ok(())
}

pub(super) fn successors(tx: &SqliteTx<'_>, stack: &str, from: &str) -> Result<Vec<String>, StoreError> {
    tx.query_all(
        "list a node's successors",
        "SELECT to_node FROM edges WHERE stack = ?1 AND from_node = ?2 ORDER BY to_node",
        [stack, from],
        |row| column(row, 0),
    )
}

pub(super) fn delete_edges(tx: &SqliteTx<'_>, stack: &str) -> Result<(), StoreError> {
    tx.execute("delete a stack's edges", "DELETE FROM edges WHERE stack = ?1", [stack])?;
    Ok(())
}

fn node_from_row(row: &Row<'_>) -> Result<NodeRow, StoreError> {
    Ok(NodeRow {
        stack: column(row, 0)?,
        name: column(row, 1)?,
        resource_type: column(row, 2)?,
        generation: unsigned_column(row, 3)?,
        action: column(row, 4)?,
        state: column(row, 5)?,
        status_reason: column(row, 6)?,
        remaining: column(row, 7)?,
        definition: json_column::<serde_json::Value>(row, 8, "nodes.definition")?.into(),
        attributes: json_column::<serde_json::Value>(row, 9, "nodes.attributes")?.into(),
        derived_config_id: column(row, 10)?,
        signal_token_hash: column(row, 11)?,
        server: column(row, 12)?,
        updated_at: unsigned_column(row, 13)?,
        record: json_column(row, 14, "nodes.record")?,
    })
}

fn not_found(stack: &str, name: &str) -> StoreError {
    StoreError::NotFound { kind: "node", key: format!("{stack}/{name}") }
}
