//! OS::Heat::SoftwareConfig, StructuredConfig and SoftwareComponent: a config completes as soon
//! as it activates, keeping its definition for the deployments that point at it. CloudConfig
//! and MultipartMime render their `config` text here too.

use serde_json::{Map, Value, json};

use crate::engine::context::Context;
use crate::engine::derived::ConfigDefinition;
use crate::engine::error::EngineError;
use crate::engine::mime::{Part, message};
use crate::engine::node::{self, Released};
use crate::store::{NodeRecord, NodeRow, StackRow};
use crate::template::{ResourceType, render};

pub fn activate(
    ctx: &mut Context<'_>,
    stack: &StackRow,
    mut node: NodeRow,
    kind: ResourceType,
    properties: &Map<String, Value>,
) -> Result<Released, EngineError> {
    let mut definition = ConfigDefinition::from_properties(kind, properties);
    if kind == ResourceType::MultipartMime {
        definition.config = Value::String(multipart_message(ctx, stack, &node, properties)?);
    }
    node.record = NodeRecord {
        id: Some(node::stable_id(&node)),
        definition: Some(definition.to_json()),
        // The properties were evaluated just before (`evaluate_properties`).
        placed_handles: ctx.placed_handles.iter().cloned().collect(),
        ..NodeRecord::default()
    };
    node.attributes = json!({"config": definition.config});
    node::complete(ctx, stack, node, "state changed")
}

/// MultipartMime.get_message: a part whose `config` is a config's id (`get_resource`) takes
/// that config's text; any other text is the part itself. Only the node's own dependencies are
/// read, so the work stays proportional to its edges.
fn multipart_message(
    ctx: &mut Context<'_>,
    stack: &StackRow,
    node: &NodeRow,
    properties: &Map<String, Value>,
) -> Result<String, EngineError> {
    let mut configs: Vec<(String, String)> = Vec::new();
    let requires = node.definition.get("requires").and_then(Value::as_array).cloned().unwrap_or_default();
    for name in requires.iter().filter_map(Value::as_str) {
        let Some(dependency) = ctx.tx.node(&stack.name, name)? else { continue };
        let Some(id) = dependency.record.id.clone() else { continue };
        if let Some(definition) = dependency.record.definition.as_ref() {
            configs.push((id, render(&ConfigDefinition::from_json(definition).config)));
        }
    }
    let parts = properties.get("parts").and_then(Value::as_array).cloned().unwrap_or_default();
    let text = |item: &Value, key: &str| item.get(key).filter(|value| !value.is_null()).map(render).unwrap_or_default();
    let parts: Vec<Part> = parts
        .iter()
        .map(|item| {
            let config = text(item, "config");
            let resolved = configs.iter().find(|(id, _)| *id == config).map(|(_, text)| text.clone());
            Part { text: resolved.unwrap_or(config), subtype: text(item, "subtype"), filename: text(item, "filename") }
        })
        .collect();
    Ok(message(&parts))
}
