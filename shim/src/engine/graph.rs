//! A stack's graph (`crate::graph`) from what the store holds: one node per stored resource, one
//! edge per stored dependency, its kind read from the dependent resource's definition (which
//! intrinsic names the other resource).

use serde_json::Value;

use crate::graph::{EdgeKind, GraphEdge, GraphNode, NodeKind, Phase, StackGraph};
use crate::store::{NodeRow, NodeState};

/// `edges` are the stored `(from, to)` pairs: `to` waits for `from`. `updated_at` formats a
/// stored time.
pub fn build(
    stack: &str,
    status: &str,
    nodes: &[NodeRow],
    edges: &[(String, String)],
    updated_at: impl Fn(u64) -> String,
) -> StackGraph {
    let graph_nodes = nodes
        .iter()
        .map(|node| GraphNode {
            name: node.name.clone(),
            resource_type: node.resource_type.clone(),
            kind: NodeKind::of(&node.resource_type),
            status: if node.state == NodeState::Init {
                "INIT_COMPLETE".to_string()
            } else {
                format!("{}_{}", node.action, node.state)
            },
            phase: phase(node.state),
            status_reason: node.status_reason.clone(),
            server: node.server.clone(),
            updated_at: updated_at(node.updated_at),
        })
        .collect();
    let definitions: std::collections::HashMap<&str, &Value> =
        nodes.iter().map(|node| (node.name.as_str(), &node.definition)).collect();
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
    StackGraph { stack: stack.to_string(), status: status.to_string(), nodes: graph_nodes, edges: graph_edges }
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
