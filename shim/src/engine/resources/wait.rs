//! OS::Heat::WaitConditionHandle (completes at once with its signal URL; its token is stored
//! only as a hash) and OS::Heat::WaitCondition (waits for `count` signals on its handle, with a
//! deadline; fails on any FAILURE, as Heat's does, except in an update that leaves a completed
//! one unchanged, which Heat does not check; its `data` attribute follows later values of the ids
//! its handle holds, as Heat's does).

use serde_json::{Map, Value, json};

use crate::engine::context::Context;
use crate::engine::deadlines::Deadline;
use crate::engine::error::EngineError;
use crate::engine::node::{self, Released, status};
use crate::engine::secrets::{BASE_URL, Purpose, placeholder};
use crate::store::{NodeRecord, NodeRow, NodeState, StackRow, WaitSignalRow};
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
    node.attributes = json!({"token": token, "endpoint": endpoint, "curl_cli": curl_cli, "signal": signal}).into();
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
    // Heat does not check a resource an update leaves unchanged: a condition that completed on the
    // same handle and count is not failed by what its handle received since (a later FAILURE for
    // an id it holds). Its timeout is not kept, so a change of it alone is not seen here.
    let unchanged = node.record.completed_once
        && node.record.handle.as_deref() == Some(handle.as_str())
        && node.record.count == Some(count);
    let failures = if unchanged { Failures::Overlooked } else { Failures::Fail };
    node.status_reason = format!("waiting for {count} signal(s) on {handle}");
    node.record = NodeRecord {
        id: Some(node::stable_id(&node)),
        handle: Some(handle),
        count: Some(count),
        ..NodeRecord::default()
    };
    node.attributes = json!({}).into();
    node.state = NodeState::InProgress;
    node.updated_at = ctx.now;
    ctx.tx.update_node(&node)?;
    ctx.event(&stack.name, &node.name, &status(node.action, NodeState::InProgress), &node.status_reason)?;
    let due_at = ctx.now.saturating_add(timeout.saturating_mul(1000));
    Deadline::of_wait_condition(stack, &node.name).set(ctx, due_at)?;
    decide(ctx, stack, &node.name, failures)
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
    decide(ctx, stack, name, Failures::Fail)
}

/// What FAILURE signals on its handle do to a wait condition being decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Failures {
    /// Any of them fails it (Heat's `_wait`).
    Fail,
    /// They are not looked at: an update left the completed condition unchanged.
    Overlooked,
}

fn decide(ctx: &mut Context<'_>, stack: &StackRow, name: &str, on_failures: Failures) -> Result<Released, EngineError> {
    let Some(mut node) = ctx.tx.node(&stack.name, name)? else { return Ok(Released::Nothing) };
    if node.state != NodeState::InProgress || node::resource_type(&node) != Some(ResourceType::WaitCondition) {
        return Ok(Released::Nothing);
    }
    let handle = node.record.handle.clone().unwrap_or_default();
    let count = node.record.count.unwrap_or(1);
    let Some(handle_node) = ctx.tx.node(&stack.name, &handle)? else { return Ok(Released::Nothing) };
    let (received, failures) = signal_counts(ctx, stack, &handle_node)?;
    let heeded = on_failures == Failures::Fail;
    if (failures == 0 || !heeded) && received < count {
        return Ok(Released::Nothing);
    }
    let count = count as usize;
    let signals = ctx.tx.wait_signals(&stack.name, &handle)?;
    let failures: Vec<&str> =
        signals.iter().filter(|signal| heeded && !signal.success).map(|signal| signal.reason.as_str()).collect();
    if !failures.is_empty() {
        Deadline::of_wait_condition(stack, name).clear(ctx)?;
        let reason = failures.join(";");
        node::fail(ctx, stack, node, &format!("WaitConditionFailure: {reason}"))?;
        return Ok(Released::Nothing);
    }
    if signals.len() < count {
        return Ok(Released::Nothing);
    }
    node.attributes["data"] = data_attribute(&signals);
    Deadline::of_wait_condition(stack, name).clear(ctx)?;
    node::complete(ctx, stack, node, "Signal(s) received")
}

/// A wait condition's `data`: each id's data, in the order the ids were first received. Heat
/// serialises it with json.dumps: Python separators matter to templates that use the text.
fn data_attribute(signals: &[WaitSignalRow]) -> Value {
    let data: Map<String, Value> =
        signals.iter().map(|signal| (signal.signal_id.clone(), signal.data.clone())).collect();
    Value::String(anneal_protocol::pyjson::dumps(&Value::Object(data), true))
}

/// Shows a signal its handle `handle` just stored (`signal_id` with `data`, a new value for the id
/// or a new id) in the `data` attribute of the wait condition `wait` if it has completed on that
/// handle. Heat's reads the handle's signals at each read, so outputs and later `get_attr` reads
/// see the latest value; the condition stays complete and nothing that read the earlier value
/// runs again (Heat re-runs nothing either). The stored attribute is amended in place (a
/// repeated id keeps its place, as the handle's rows do) rather than rebuilt from every signal,
/// so a signal's cost does not grow with what the handle holds; only an attribute that does not
/// read as a JSON object is rebuilt from the rows.
pub fn show_signal_in_completed_data(
    ctx: &mut Context<'_>,
    stack: &StackRow,
    mut wait: NodeRow,
    handle: &str,
    signal_id: &str,
    data: &Value,
) -> Result<(), EngineError> {
    if wait.state != NodeState::Complete || wait.record.handle.as_deref() != Some(handle) {
        return Ok(());
    }
    let stored = wait.attributes.get("data").and_then(Value::as_str);
    wait.attributes["data"] = match stored.map(serde_json::from_str::<Value>) {
        Some(Ok(Value::Object(mut shown))) => {
            shown.insert(signal_id.to_string(), data.clone());
            Value::String(anneal_protocol::pyjson::dumps(&Value::Object(shown), true))
        }
        _ => data_attribute(&ctx.tx.wait_signals(&stack.name, handle)?),
    };
    ctx.tx.update_node(&wait)?;
    Ok(())
}
