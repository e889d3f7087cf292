//! OS::Heat::SoftwareConfig, StructuredConfig and SoftwareComponent: a config completes as soon
//! as it activates, keeping its definition for the deployments that point at it.

use serde_json::{Map, Value, json};

use crate::engine::context::Context;
use crate::engine::derived::ConfigDefinition;
use crate::engine::error::EngineError;
use crate::engine::node::{self, Released};
use crate::store::{NodeRecord, NodeRow, StackRow};
use crate::template::ResourceType;

pub fn activate(
    ctx: &mut Context<'_>,
    stack: &StackRow,
    mut node: NodeRow,
    kind: ResourceType,
    properties: &Map<String, Value>,
) -> Result<Released, EngineError> {
    let definition = ConfigDefinition::from_properties(kind, properties);
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
