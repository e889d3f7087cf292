//! OS::Heat::WaitConditionHandle (completes at once with its signal URL; its token is stored
//! only as a hash) and OS::Heat::WaitCondition (waits for `count` signals on its handle, with a
//! deadline; fails on any FAILURE, as Heat's does).

use serde_json::{Map, Value, json};

use crate::engine::context::Context;
use crate::engine::deadlines::Deadline;
use crate::engine::error::EngineError;
use crate::engine::node::{self, Released, status};
use crate::engine::secrets::{BASE_URL, Purpose, placeholder};
use crate::store::{NodeRecord, NodeRow, NodeState, StackRow};
use crate::template::ResourceType;

/// Heat's default wait condition timeout, in seconds.
const DEFAULT_TIMEOUT_SECS: u64 = 43_200;

pub fn activate_handle(ctx: &mut Context<'_>, stack: &StackRow, mut node: NodeRow) -> Result<Released, EngineError> {
    let id = node::stable_id(&node);
    let token = placeholder(Purpose::Handle, &id);
    let endpoint = format!("{BASE_URL}/v1/waitconditions/{token}");
    let curl_cli =
        format!("curl -i -X POST -H 'Content-Type: application/json' -H 'Accept: application/json' {endpoint}");
    let signal = json!({"alarm_url": endpoint}).to_string();
    node.attributes = json!({"token": token, "endpoint": endpoint, "curl_cli": curl_cli, "signal": signal});
    node.signal_token_hash = Some(ctx.key.token_hash(Purpose::Handle, &id));
    // The signals a handle received stay across updates (Heat's rule), and so do their counts.
    let (signals, failures) = (node.record.signals, node.record.failures);
    node.record = NodeRecord { id: Some(id), signals, failures, ..NodeRecord::default() };
    node::complete(ctx, stack, node, "state changed")
}

pub fn activate_wait_condition(
    ctx: &mut Context<'_>,
    stack: &StackRow,
    mut node: NodeRow,
    properties: &Map<String, Value>,
) -> Result<Released, EngineError> {
    let Some(handle) = node::referenced_resource(&node, "handle") else {
        let reason = "property handle: must be {get_resource: <a WaitConditionHandle>}";
        node::fail(ctx, stack, node, reason)?;
        return Ok(Released::Nothing);
    };
    let count = properties.get("count").and_then(Value::as_u64).unwrap_or(1).max(1);
    let timeout = properties.get("timeout").and_then(Value::as_u64).unwrap_or(DEFAULT_TIMEOUT_SECS);
    node.status_reason = format!("waiting for {count} signal(s) on {handle}");
    node.record = NodeRecord {
        id: Some(node::stable_id(&node)),
        handle: Some(handle),
        count: Some(count),
        ..NodeRecord::default()
    };
    node.attributes = json!({});
    node.state = NodeState::InProgress;
    node.updated_at = ctx.now;
    ctx.tx.update_node(&node)?;
    ctx.event(&stack.name, &node.name, &status(node.action, NodeState::InProgress), &node.status_reason)?;
    let due_at = ctx.now.saturating_add(timeout.saturating_mul(1000));
    Deadline::of_wait_condition(stack, &node.name).set(ctx, due_at)?;
    check_wait_condition(ctx, stack, &node.name)
}

/// The handle's (distinct ids, ids whose latest signal failed): kept on the handle, counted from
/// its rows once for a handle stored before they were kept.
pub fn signal_counts(ctx: &mut Context<'_>, stack: &StackRow, handle: &NodeRow) -> Result<(u64, u64), EngineError> {
    if let Some(received) = handle.record.signals {
        return Ok((received, handle.record.failures));
    }
    let rows = ctx.tx.wait_signals(&stack.name, &handle.name)?;
    Ok((rows.len() as u64, rows.iter().filter(|row| !row.success).count() as u64))
}

/// Completes or fails the wait condition `name` if its handle's signals decide it. The handle's
/// counts say whether they can; only then are its signals read (once: the condition is decided).
pub fn check_wait_condition(ctx: &mut Context<'_>, stack: &StackRow, name: &str) -> Result<Released, EngineError> {
    let Some(mut node) = ctx.tx.node(&stack.name, name)? else { return Ok(Released::Nothing) };
    if node.state != NodeState::InProgress || node::resource_type(&node) != Some(ResourceType::WaitCondition) {
        return Ok(Released::Nothing);
    }
    let handle = node.record.handle.clone().unwrap_or_default();
    let count = node.record.count.unwrap_or(1);
    let Some(handle_node) = ctx.tx.node(&stack.name, &handle)? else { return Ok(Released::Nothing) };
    let (received, failures) = signal_counts(ctx, stack, &handle_node)?;
    if failures == 0 && received < count {
        return Ok(Released::Nothing);
    }
    let count = count as usize;
    let signals = ctx.tx.wait_signals(&stack.name, &handle)?;
    let failures: Vec<&str> =
        signals.iter().filter(|signal| !signal.success).map(|signal| signal.reason.as_str()).collect();
    if !failures.is_empty() {
        Deadline::of_wait_condition(stack, name).clear(ctx)?;
        let reason = failures.join(";");
        node::fail(ctx, stack, node, &format!("WaitConditionFailure: {reason}"))?;
        return Ok(Released::Nothing);
    }
    if signals.len() < count {
        return Ok(Released::Nothing);
    }
    let data: Map<String, Value> =
        signals.iter().map(|signal| (signal.signal_id.clone(), signal.data.clone())).collect();
    // Heat serialises it with json.dumps: Python separators matter to templates that use the text.
    node.attributes["data"] = Value::String(anneal_protocol::pyjson::dumps(&Value::Object(data), true));
    Deadline::of_wait_condition(stack, name).clear(ctx)?;
    node::complete(ctx, stack, node, "Signal(s) received")
}
