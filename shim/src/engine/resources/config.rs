//! OS::Heat::SoftwareConfig, StructuredConfig and SoftwareComponent: a config completes as soon
//! as it activates, keeping its definition for the deployments that point at it. CloudConfig
//! and MultipartMime render their `config` text here too.

use serde_json::{Map, Value, json};
use thiserror::Error;

use crate::engine::context::Context;
use crate::engine::derived::ConfigDefinition;
use crate::engine::error::EngineError;
use crate::engine::mime::{self, MAX_MESSAGE_BYTES, ParamError, Part, SpliceError};
use crate::engine::node::{self, Released};
use crate::store::{NodeRecord, NodeRow, StackRow};
use crate::template::{EvalError, ResourceType, render};

/// Why a MultipartMime has no message.
#[derive(Debug, Error)]
enum MessageError {
    #[error(transparent)]
    Engine(#[from] EngineError),
    #[error("parts[{index}]: the message this part of type multipart splices in: {source}")]
    Splice { index: usize, source: SpliceError },
    #[error("parts: {0}")]
    Render(#[from] ParamError),
    #[error(
        "parts: the message would be larger than {MAX_MESSAGE_BYTES} bytes, anneal-shim's limit on any one value a \
         template produces"
    )]
    TooLarge,
    #[error("parts: {0}")]
    OverBudget(EvalError),
}

pub fn activate(
    ctx: &mut Context<'_>,
    stack: &StackRow,
    mut node: NodeRow,
    kind: ResourceType,
    properties: &Map<String, Value>,
) -> Result<Released, EngineError> {
    let mut definition = ConfigDefinition::from_properties(kind, properties);
    if kind == ResourceType::MultipartMime {
        match multipart_message(ctx, stack, &node, properties) {
            Ok(message) => definition.config = message,
            Err(MessageError::Engine(error)) => return Err(error),
            Err(error @ (MessageError::TooLarge | MessageError::OverBudget(_))) => {
                node::fail_over_limit(ctx, stack, node, &error.to_string())?;
                return Ok(Released::Nothing);
            }
            Err(error) => {
                node::fail(ctx, stack, node, &error.to_string())?;
                return Ok(Released::Nothing);
            }
        }
    }
    node.record = NodeRecord {
        id: Some(node::stable_id(&node)),
        definition: Some(definition.to_json()),
        // The properties were evaluated just before (`evaluate_properties`).
        placed_handles: ctx.placed_handles.iter().cloned().collect(),
        ..NodeRecord::default()
    };
    node.attributes = json!({"config": definition.config}).into();
    node::complete(ctx, stack, node, "state changed")
}

/// MultipartMime.get_message: a part whose `config` is a config's id (`get_resource`) takes
/// that config's text; any other text is the part itself. A part of `type: multipart` adds the
/// parts of the message its text is (none when it is not one). The message is charged to the
/// stack's evaluation budget like any value the stack produces: each level of MultipartMimes
/// splicing (or naming) the one below twice doubles it.
fn multipart_message(
    ctx: &mut Context<'_>,
    stack: &StackRow,
    node: &NodeRow,
    properties: &Map<String, Value>,
) -> Result<Value, MessageError> {
    let configs = dependency_configs(ctx, stack, node)?;
    let items = properties.get("parts").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
    let text = |item: &Value, key: &str| item.get(key).filter(|value| !value.is_null()).map(render).unwrap_or_default();
    let mut parts: Vec<Part> = Vec::new();
    let mut bytes = 0usize;
    for (index, item) in items.iter().enumerate() {
        let config = text(item, "config");
        let resolved = configs.iter().find(|(id, _)| *id == config).map(|(_, text)| text.clone());
        let config = resolved.unwrap_or(config);
        let added = if text(item, "type") == "multipart" {
            mime::spliced_parts(&config).map_err(|source| MessageError::Splice { index, source })?
        } else {
            vec![Part { text: config, subtype: text(item, "subtype"), filename: text(item, "filename") }]
        };
        // Checked as the parts add up, so an oversized message is refused before it is built.
        bytes = added.iter().fold(bytes, |sum, part| sum.saturating_add(part.text.len()));
        if bytes > MAX_MESSAGE_BYTES {
            return Err(MessageError::TooLarge);
        }
        parts.extend(added);
    }
    let message = mime::message(&parts)?;
    if message.len() > MAX_MESSAGE_BYTES {
        return Err(MessageError::TooLarge);
    }
    let message = Value::String(message);
    ctx.charge(stack, &message).map_err(MessageError::OverBudget)?;
    Ok(message)
}

/// The id and text of each config the node depends on. Only the node's own dependencies are
/// read, so the work stays proportional to its edges.
fn dependency_configs(
    ctx: &mut Context<'_>,
    stack: &StackRow,
    node: &NodeRow,
) -> Result<Vec<(String, String)>, EngineError> {
    let mut configs = Vec::new();
    let requires = node.definition.get("requires").and_then(Value::as_array).cloned().unwrap_or_default();
    for name in requires.iter().filter_map(Value::as_str) {
        let Some(dependency) = ctx.tx.node(&stack.name, name)? else { continue };
        let Some(id) = dependency.record.id.clone() else { continue };
        if let Some(definition) = dependency.record.definition.as_ref() {
            configs.push((id, render(&ConfigDefinition::from_json(definition).config)));
        }
    }
    Ok(configs)
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use crate::engine::mime::{self, Part};
    use crate::engine::tests::{engine_at, request};
    use crate::engine::{Engine, EngineConfig, TokenKey};
    use crate::model::{Service, ServiceError};
    use crate::store::SqliteStore;

    const NESTED: &str = r##"
heat_template_version: 2018-08-31
parameters:
  handwritten: {type: string, default: "Content-Type: multipart/mixed; boundary=X\n\n--X\nContent-Type: text/x-shellscript\n\nhand\n--X--\n"}
resources:
  script: {type: OS::Heat::SoftwareConfig, properties: {group: script, config: "#!/bin/sh\necho not a message"}}
  inner:
    type: OS::Heat::MultipartMime
    properties:
      parts:
      - {config: "#!/bin/sh\necho inner", filename: inner.sh}
      - {config: "#cloud-config\npackages: [git]\n", subtype: cloud-config}
  middle:
    type: OS::Heat::MultipartMime
    properties:
      parts: [{config: {get_resource: inner}, type: multipart}, {config: middle text}]
  outer:
    type: OS::Heat::MultipartMime
    properties:
      parts:
      - {config: {get_resource: middle}, type: multipart}
      - {config: {get_resource: script}, type: multipart}
      - {config: {get_param: handwritten}, type: multipart}
outputs:
  outer: {value: {get_attr: [outer, config]}}
"##;

    fn part(text: &str, subtype: &str, filename: &str) -> Part {
        Part { text: text.into(), subtype: subtype.into(), filename: filename.into() }
    }

    async fn output(engine: &Engine<SqliteStore>, stack: &str) -> String {
        let detail = engine.show_stack(stack).await.unwrap();
        detail.outputs.into_iter().find(|output| output.name == "outer").unwrap().value.as_str().unwrap().to_owned()
    }

    /// Two levels of splicing flatten into one message; a config that is no multipart message
    /// (the script) adds nothing, as in Heat.
    #[tokio::test]
    async fn parts_of_type_multipart_splice_nested_messages() {
        let dir = tempfile::tempdir().unwrap();
        let engine = engine_at(&dir.path().join("shim.db"));
        engine.create_stack(request("s", NESTED, &[])).await.unwrap();
        let message = output(&engine, "s").await;
        let boundary = message.split('"').nth(1).unwrap();
        let expected = [
            part("#!/bin/sh\necho inner", "inner", "inner.sh"),
            part("#cloud-config\npackages: [git]\n", "cloud-config", ""),
            part("middle text", "plain", ""),
            part("hand", "x-shellscript", ""),
        ];
        assert_eq!(message, mime::with_boundary(&expected, boundary).unwrap());
    }

    #[tokio::test]
    async fn a_nested_multipart_part_fails_the_resource_with_the_limit() {
        let dir = tempfile::tempdir().unwrap();
        let engine = engine_at(&dir.path().join("shim.db"));
        let nested = "Content-Type: multipart/mixed; boundary=B\n\n--B\nContent-Type: multipart/mixed; boundary=C\n\n\
                      --C\n\nx\n--C--\n--B--\n";
        engine.create_stack(request("s", NESTED, &[("handwritten", nested)])).await.unwrap();
        let summary = engine.show_stack("s").await.unwrap().summary;
        assert_eq!(summary.status, "CREATE_FAILED");
        let reason = summary.status_reason;
        assert!(reason.contains("outer: parts[2]: the message this part of type multipart splices in"), "{reason}");
        assert!(reason.contains("part 1 (multipart/mixed) has parts of its own"), "{reason}");
        assert!(reason.contains("splices one level of parts"), "{reason}");
    }

    #[tokio::test]
    async fn a_part_that_splices_its_own_message_is_a_cycle() {
        let dir = tempfile::tempdir().unwrap();
        let engine = engine_at(&dir.path().join("shim.db"));
        let template = "heat_template_version: 2018-08-31\nresources:\n  mime:\n    type: OS::Heat::MultipartMime\n    \
                        properties: {parts: [{config: {get_attr: [mime, config]}, type: multipart}]}\n";
        let refused = engine.create_stack(request("s", template, &[])).await;
        let Err(ServiceError::Template { problems }) = refused else { panic!("{refused:?}") };
        assert!(problems.iter().any(|problem| problem.contains("mime") && problem.contains("cycle")), "{problems:?}");
    }

    /// Each level splices the one below twice: the messages double until the stack's
    /// evaluation budget refuses the create, naming the resource, before any large work.
    #[tokio::test]
    async fn doubling_levels_are_refused_by_the_evaluation_budget() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(&dir.path().join("shim.db")).unwrap();
        let config = EngineConfig { evaluation_budget: 1 << 20, ..EngineConfig::new("http://127.0.0.1:9") };
        let engine = Engine::new(store, TokenKey::from_secret(b"test key"), config);
        let started = Instant::now();
        let refused = engine.create_stack(request("s", &doubling_levels(40), &[("base", &"x".repeat(1024))])).await;
        let Err(ServiceError::Template { problems }) = refused else { panic!("{refused:?}") };
        assert!(problems.iter().any(|problem| problem.contains(": parts: over the evaluation budget")), "{problems:?}");
        assert!(started.elapsed() < Duration::from_secs(20), "{:?}", started.elapsed());
    }

    /// Within the default budget, the message itself is capped at the result limit.
    #[tokio::test]
    async fn a_message_over_the_result_limit_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let engine = engine_at(&dir.path().join("shim.db"));
        let refused = engine.create_stack(request("s", &doubling_levels(8), &[("base", &"x".repeat(1 << 20))])).await;
        let Err(ServiceError::Template { problems }) = refused else { panic!("{refused:?}") };
        let limit = format!("parts: the message would be larger than {} bytes", mime::MAX_MESSAGE_BYTES);
        assert!(
            problems.iter().any(|problem| problem.starts_with("resource level") && problem.contains(&limit)),
            "{problems:?}"
        );
    }

    /// `level0` has the `base` parameter as its part; each `levelN` splices `levelN-1` twice.
    fn doubling_levels(levels: usize) -> String {
        let mut template = String::from(
            "heat_template_version: 2018-08-31\nparameters:\n  base: {type: string}\nresources:\n  level0:\n    \
             type: OS::Heat::MultipartMime\n    properties: {parts: [{config: {get_param: base}}]}\n",
        );
        for level in 1..=levels {
            let below = format!("{{config: {{get_resource: level{}}}, type: multipart}}", level - 1);
            template.push_str(&format!(
                "  level{level}:\n    type: OS::Heat::MultipartMime\n    properties: {{parts: [{below}, {below}]}}\n"
            ));
        }
        template
    }
}
