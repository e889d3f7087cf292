//! A stack's graph (`crate::graph`) from what the store holds: one node per stored resource, one
//! edge per stored dependency, its kind read from the dependent resource's definition (which
//! intrinsic names the other resource).

use serde_json::Value;

use super::hidden::{HiddenInputs, NodeMasks};
use super::node;
use crate::graph::{
    DETAIL_EVENTS, EdgeKind, GraphEdge, GraphNode, NodeDetail, NodeEvent, NodeKind, Phase, StackGraph, TAIL_CHARS,
};
use crate::store::{EventRow, NodeRow, NodeState, StackRow};
use crate::template::functions::HIDDEN_VALUE;

/// What the side panel shows in place of a hidden value.
const MASK: &str = "******";

/// `edges` are the stored `(from, to)` pairs: `to` waits for `from`. `updated_at` formats a
/// stored time.
pub fn build(
    stack: &str,
    status: &str,
    nodes: &[NodeRow],
    edges: &[(String, String)],
    updated_at: impl Fn(u64) -> String,
) -> StackGraph {
    let graph_nodes = nodes.iter().map(|node| graph_node(node, &updated_at)).collect();
    let definitions: std::collections::HashMap<&str, &Value> =
        nodes.iter().map(|node| (node.name.as_str(), &*node.definition)).collect();
    let graph_edges = edges
        .iter()
        .map(|(from, to)| {
            let definition = definitions.get(to.as_str()).copied();
            GraphEdge {
                from: from.clone(),
                to: to.clone(),
                kind: definition.map_or(EdgeKind::Implicit, |d| kind(d, from)),
            }
        })
        .collect();
    StackGraph {
        stack: stack.to_string(),
        status: status.to_string(),
        status_reason: String::new(),
        disable_rollback: true,
        rollback_due: false,
        nodes: graph_nodes,
        edges: graph_edges,
    }
}

/// `build` for `stack`'s row, with its status reason and rollback setting (the web view's
/// header).
pub fn of_stack(
    stack: &StackRow,
    nodes: &[NodeRow],
    edges: &[(String, String)],
    updated_at: impl Fn(u64) -> String,
) -> StackGraph {
    let summary = super::detail::summary(stack);
    let graph = build(&summary.name, &summary.status, nodes, edges, updated_at);
    StackGraph {
        status_reason: summary.status_reason,
        disable_rollback: summary.disable_rollback,
        rollback_due: summary.rollback_due,
        ..graph
    }
}

fn graph_node(node: &NodeRow, updated_at: &impl Fn(u64) -> String) -> GraphNode {
    let status = node::shown_status(node);
    GraphNode {
        name: node.name.clone(),
        resource_type: node.resource_type.clone(),
        kind: NodeKind::of(&node.resource_type),
        phase: if status.ends_with("_IN_PROGRESS") { Phase::InProgress } else { phase(node.state) },
        status,
        status_reason: node.status_reason.clone(),
        server: node.server.clone(),
        updated_at: updated_at(node.updated_at),
        group: super::detail::group_progress(node, updated_at),
    }
}

/// The side panel's view of `node` of `stack`, with its events from `events` (the stack's) and
/// its published `entry` (a deployment's, if any); `masks` says which of its values are hidden
/// (`engine::hidden`).
pub(crate) fn detail(
    stack: &StackRow,
    node: &NodeRow,
    entry: Option<&Value>,
    events: &[EventRow],
    masks: &NodeMasks,
    time: impl Fn(u64) -> String,
) -> NodeDetail {
    let mut properties = node.definition.get("properties").cloned().unwrap_or(Value::Object(Default::default()));
    mask_hidden_parameters(&mut properties, &stack.hidden_parameters);
    let inputs = entry.map_or_else(Vec::new, |entry| resolved_inputs(entry, &masks.inputs));
    let attributes = match node.resource_type.rsplit("::").next() {
        // Their attributes are credentials: a handle's URL and curl command carry its token.
        Some("WaitConditionHandle" | "RandomString") => Value::String(MASK.into()),
        // A server the stack created: its agent settings carry the server's token.
        Some("DeployedServer") if node.record.server_token.is_some() => {
            let mut attributes = tails(&node.attributes);
            if let Some(settings) = attributes.get_mut("os_collect_config") {
                *settings = Value::String(MASK.into());
            }
            attributes
        }
        // Computed from a hidden value: each one masked, its name kept.
        _ if masks.attributes => match &*node.attributes {
            Value::Object(map) => {
                Value::Object(map.keys().map(|key| (key.clone(), Value::String(MASK.into()))).collect())
            }
            _ => Value::String(MASK.into()),
        },
        _ => tails(&node.attributes),
    };
    let mine: Vec<&EventRow> =
        events.iter().filter(|event| event.resource == node.name && event.time >= stack.created_at).collect();
    let events = mine[mine.len().saturating_sub(DETAIL_EVENTS)..]
        .iter()
        .map(|row| NodeEvent { time: time(row.time), status: row.status.clone(), reason: row.reason.clone() })
        .collect();
    NodeDetail { node: graph_node(node, &time), properties, inputs, attributes, events }
}

/// The entry's inputs as `{name, value}`, the hidden ones (`HiddenInputs::hides`: from a
/// hidden value, and the signal URL) masked.
fn resolved_inputs(entry: &Value, hidden: &HiddenInputs) -> Vec<Value> {
    let inputs = entry.get("inputs").and_then(Value::as_array).map_or(&[][..], Vec::as_slice);
    inputs
        .iter()
        .filter_map(|input| {
            let name = input.get("name")?.as_str()?;
            let value = if hidden.hides(name) { Value::String(MASK.into()) } else { tails(input.get("value")?) };
            Some(serde_json::json!({"name": name, "value": value}))
        })
        .collect()
}

/// `{get_param: X}` (or `[X, ...]`) of a hidden parameter, and a value the expansion inlined
/// from one (`HIDDEN_VALUE`), become `"******"`.
fn mask_hidden_parameters(value: &mut Value, hidden: &[String]) {
    match value {
        Value::Object(map) => {
            let names_hidden = map.len() == 1
                && (map.contains_key(HIDDEN_VALUE)
                    || map.get("get_param").is_some_and(|argument| {
                        let name = argument.as_str().or_else(|| argument.get(0).and_then(Value::as_str));
                        name.is_some_and(|name| hidden.iter().any(|hidden| hidden == name))
                    }));
            if names_hidden {
                *value = Value::String(MASK.into());
            } else {
                map.values_mut().for_each(|inner| mask_hidden_parameters(inner, hidden));
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|inner| mask_hidden_parameters(inner, hidden)),
        _ => {}
    }
}

/// Every string longer than `TAIL_CHARS` cut to its last `TAIL_CHARS` characters.
fn tails(value: &Value) -> Value {
    match value {
        Value::String(text) if text.chars().count() > TAIL_CHARS => {
            let skip = text.chars().count() - TAIL_CHARS;
            Value::String(format!("…{}", text.chars().skip(skip).collect::<String>()))
        }
        Value::Object(map) => Value::Object(map.iter().map(|(key, inner)| (key.clone(), tails(inner))).collect()),
        Value::Array(items) => Value::Array(items.iter().map(tails).collect()),
        other => other.clone(),
    }
}

/// The graph's phase of a stored node state.
pub(crate) fn phase(state: NodeState) -> Phase {
    match state {
        NodeState::Init => Phase::Waiting,
        NodeState::InProgress => Phase::InProgress,
        NodeState::Complete => Phase::Complete,
        NodeState::Failed => Phase::Failed,
    }
}

/// How `definition` (a resource as stored: `properties`, `depends_on`, ...) refers to `from`:
/// the strongest reference found (`get_attr` reads data, `get_resource` an id, `depends_on`
/// only orders).
fn kind(definition: &Value, from: &str) -> EdgeKind {
    let mut found = None;
    scan(definition.get("properties").unwrap_or(&Value::Null), from, &mut found);
    if let Some(kind) = found {
        return kind;
    }
    let depends_on = match definition.get("depends_on") {
        Some(Value::String(name)) => name == from,
        Some(Value::Array(names)) => names.iter().any(|name| name.as_str() == Some(from)),
        _ => false,
    };
    if depends_on { EdgeKind::DependsOn } else { EdgeKind::Implicit }
}

/// Records `get_attr` (which wins) or `get_resource` references to `from` anywhere in `value`.
fn scan(value: &Value, from: &str, found: &mut Option<EdgeKind>) {
    match value {
        Value::Object(map) => {
            if map.len() == 1 {
                let names_from = |target: Option<&Value>| target.and_then(Value::as_str) == Some(from);
                if let Some(arguments) = map.get("get_attr") {
                    if names_from(arguments.get(0)) {
                        *found = Some(EdgeKind::GetAttr);
                        return;
                    }
                } else if names_from(map.get("get_resource")) && found.is_none() {
                    *found = Some(EdgeKind::GetResource);
                }
            }
            map.values().for_each(|inner| scan(inner, from, found));
        }
        Value::Array(items) => items.iter().for_each(|inner| scan(inner, from, found)),
        _ => {}
    }
}
