//! Signals: a deployment's heat-config-notify result (Heat's failure and output rules, applied
//! with one conditional write so a repeated or stale signal changes nothing), and wait-condition
//! handle signals (stored one row per id; a wait condition fails on any FAILURE and completes when
//! `count` distinct ids have arrived).

use anneal_protocol::{HookResult, Outcome, OutputDecl, evaluate};
use serde_json::{Map, Value, json};

use super::EngineError;
use super::context::{Context, STATE_COMPLETE, STATE_FAILED, STATE_IN_PROGRESS, STATE_INIT};
use super::graph::{self, WAIT_CONDITION, WAIT_HANDLE, referenced_resource};
use super::secrets::{Purpose, placeholder};
use super::sweeper;
use crate::model::{SignalAck, WaitConditionSignal};
use crate::store::{DeadlineRow, NodeRow, StackRow, WaitSignalRow};
use crate::token;

/// Applies a deployment signal. `Ok(None)`: no deployment has this token.
pub fn apply_deployment_signal(
    ctx: &mut Context<'_>,
    token_text: &str,
    body: Value,
) -> Result<Option<SignalAck>, EngineError> {
    if !token::is_well_formed(token_text) {
        return Ok(None);
    }
    let hash = token::hash_token(token_text);
    let Some(mut node) = ctx.tx.node_by_signal_hash(&hash)? else {
        let stale = ctx.tx.is_retired_signal_hash(&hash)?;
        return Ok(stale.then_some(SignalAck::Stale));
    };
    if !graph::is_deployment(&node.resource_type) {
        return Ok(None);
    }
    let Some(stack) = ctx.tx.stack(&node.stack)? else { return Ok(None) };
    let recorded_only = match node.state.as_str() {
        STATE_IN_PROGRESS => false,
        // An update reset the node while this run was going on: record the run's result against
        // its own publication; the new traversal decides what happens next.
        STATE_INIT if node.attributes.get("_outcome").is_none() => true,
        _ => return Ok(Some(SignalAck::Duplicate)),
    };
    let (generation, previous_state) = (node.generation, node.state.clone());
    let result = HookResult(match scrub_tokens(ctx, body)? {
        Value::Object(map) => map,
        _ => Map::new(),
    });
    let declarations: Vec<OutputDecl> =
        serde_json::from_value(node.attributes.get("_outputs").cloned().unwrap_or(json!([]))).unwrap_or_default();
    let evaluation = evaluate(&result, &declarations);
    for declaration in &declarations {
        node.attributes[declaration.name.as_str()] =
            evaluation.output_values.get(&declaration.name).cloned().unwrap_or(Value::Null);
    }
    for key in ["deploy_stdout", "deploy_stderr", "deploy_status_code"] {
        node.attributes[key] = evaluation.output_values.get(key).cloned().unwrap_or(Value::Null);
    }
    let failed = matches!(evaluation.outcome, Outcome::Failed { .. });
    node.attributes["_outcome"] = json!(if failed { STATE_FAILED } else { STATE_COMPLETE });
    if !failed {
        node.attributes["_completed_once"] = Value::Bool(true);
    }
    if recorded_only {
        node.updated_at = ctx.now;
        let applied = ctx.tx.update_node_if(&node, generation, &previous_state)?;
        return Ok(Some(if applied { SignalAck::Stale } else { SignalAck::Duplicate }));
    }
    node.state = if failed { STATE_FAILED } else { STATE_COMPLETE }.to_string();
    node.status_reason = evaluation.status_reason.clone();
    node.updated_at = ctx.now;
    if !ctx.tx.update_node_if(&node, generation, STATE_IN_PROGRESS)? {
        return Ok(Some(SignalAck::Duplicate));
    }
    let status = format!("{}_{}", node.action, node.state);
    ctx.event(&stack.name, &node.name, &status, &evaluation.status_reason)?;
    if failed {
        let reason = format!(
            "Resource {} failed: {}: Deployment to server failed: {}",
            node.action, node.name, evaluation.status_reason
        );
        graph::fail_stack(ctx, &stack.name, node.generation, &reason)?;
    } else {
        let mut ready = Vec::new();
        graph::released(ctx, &stack, &node, &mut ready)?;
        graph::settle(ctx, &stack.name, ready)?;
    }
    Ok(Some(SignalAck::Applied))
}

pub fn activate_wait_condition(
    ctx: &mut Context<'_>,
    stack: &StackRow,
    mut node: NodeRow,
    properties: &Map<String, Value>,
    ready: &mut Vec<String>,
) -> Result<(), EngineError> {
    let Some(handle) = referenced_resource(&node, "handle") else {
        return graph::fail(ctx, stack, node, "property handle: must be {get_resource: <a WaitConditionHandle>}");
    };
    let count = properties.get("count").and_then(Value::as_u64).unwrap_or(1).max(1);
    let timeout = properties.get("timeout").and_then(Value::as_u64).unwrap_or(43_200);
    node.attributes = json!({"_id": node.attributes.get("_id").cloned().unwrap_or(json!(super::context::new_uuid())),
        "_handle": handle, "_count": count});
    node.state = STATE_IN_PROGRESS.to_string();
    node.status_reason = format!("waiting for {count} signal(s) on {handle}");
    node.updated_at = ctx.now;
    ctx.tx.update_node(&node)?;
    ctx.event(&stack.name, &node.name, &format!("{}_IN_PROGRESS", node.action), &node.status_reason.clone())?;
    let key = sweeper::wait_deadline_key(stack, &node.name);
    let due_at = ctx.now.saturating_add(timeout.saturating_mul(1000));
    ctx.tx.put_deadline(&DeadlineRow { key, stack: stack.name.clone(), node: Some(node.name.clone()), due_at })?;
    check_wait_condition(ctx, stack, &node.name, ready)
}

/// Completes or fails the wait condition `name` if its handle's signals decide it.
pub fn check_wait_condition(
    ctx: &mut Context<'_>,
    stack: &StackRow,
    name: &str,
    ready: &mut Vec<String>,
) -> Result<(), EngineError> {
    let Some(mut node) = ctx.tx.node(&stack.name, name)? else { return Ok(()) };
    if node.state != STATE_IN_PROGRESS || node.resource_type != WAIT_CONDITION {
        return Ok(());
    }
    let handle = node.attributes.get("_handle").and_then(Value::as_str).unwrap_or_default().to_string();
    let count = node.attributes.get("_count").and_then(Value::as_u64).unwrap_or(1) as usize;
    let signals = ctx.tx.wait_signals(&stack.name, &handle)?;
    let failures: Vec<&str> =
        signals.iter().filter(|signal| !signal.success).map(|signal| signal.reason.as_str()).collect();
    if !failures.is_empty() {
        ctx.tx.delete_deadline(&sweeper::wait_deadline_key(stack, name))?;
        let reason = failures.join(";");
        return graph::fail(ctx, stack, node, &format!("WaitConditionFailure: {reason}"));
    }
    if signals.len() < count {
        return Ok(());
    }
    let data: Map<String, Value> =
        signals.iter().map(|signal| (signal.signal_id.clone(), signal.data.clone())).collect();
    // Heat serialises it with json.dumps: Python separators matter to templates that use the text.
    node.attributes["data"] = Value::String(anneal_protocol::pyjson::dumps(&Value::Object(data), true));
    ctx.tx.delete_deadline(&sweeper::wait_deadline_key(stack, name))?;
    graph::complete(ctx, stack, node, "Signal(s) received", ready)
}

/// Records a handle signal and re-checks the wait conditions on that handle. `Ok(None)`: unknown token.
pub fn apply_wait_signal(
    ctx: &mut Context<'_>,
    token_text: &str,
    signal: WaitConditionSignal,
) -> Result<Option<SignalAck>, EngineError> {
    if !token::is_well_formed(token_text) {
        return Ok(None);
    }
    let Some(handle) = ctx.tx.node_by_signal_hash(&token::hash_token(token_text))? else { return Ok(None) };
    if handle.resource_type != WAIT_HANDLE {
        return Ok(None);
    }
    let Some(stack) = ctx.tx.stack(&handle.stack)? else { return Ok(None) };
    let existing = ctx.tx.wait_signals(&stack.name, &handle.name)?.len();
    let signal_id = scrub_text(ctx, &signal.id.unwrap_or_else(|| (existing + 1).to_string()))?;
    let reason = signal.reason.unwrap_or_else(|| format!("Signal {} received", existing + 1));
    let reason = scrub_tokens(ctx, Value::String(reason))?.as_str().unwrap_or_default().to_string();
    let signal_data = match signal.data {
        Some(data) => Some(scrub_tokens(ctx, data)?),
        None => None,
    };
    let row = WaitSignalRow {
        stack: stack.name.clone(),
        handle: handle.name.clone(),
        signal_id: signal_id.clone(),
        success: signal.success,
        reason: reason.clone(),
        data: signal_data.unwrap_or(Value::Null),
        received_at: ctx.now,
    };
    let new = ctx.tx.upsert_wait_signal(&row)?;
    let status = if signal.success { "SIGNAL_SUCCESS" } else { "SIGNAL_FAILURE" };
    ctx.event(&stack.name, &handle.name, status, &format!("{signal_id}: {reason}"))?;
    let mut ready = Vec::new();
    for successor in ctx.tx.successors(&stack.name, &handle.name)? {
        check_wait_condition(ctx, &stack, &successor, &mut ready)?;
    }
    graph::settle(ctx, &stack.name, ready)?;
    Ok(Some(if new { SignalAck::Applied } else { SignalAck::Duplicate }))
}

/// A copy of `value` in which every token of ours (a run of exactly 64 hex digits whose hash
/// belongs to a signal, handle or server token) is replaced: by its placeholder where one exists
/// (so rendering shows it to the operator again), else by `***`. Hooks echo tokens back (a
/// `set -x` around `curl_cli`), and the store must never hold one in clear.
fn scrub_tokens(ctx: &mut Context<'_>, value: Value) -> Result<Value, EngineError> {
    Ok(match value {
        Value::String(text) => Value::String(scrub_text(ctx, &text)?),
        Value::Array(items) => {
            Value::Array(items.into_iter().map(|item| scrub_tokens(ctx, item)).collect::<Result<_, _>>()?)
        }
        Value::Object(map) => Value::Object(
            map.into_iter()
                // Keys too: a hook may echo a token as a key of its data.
                .map(|(key, item)| Ok((scrub_text(ctx, &key)?, scrub_tokens(ctx, item)?)))
                .collect::<Result<_, EngineError>>()?,
        ),
        other => other,
    })
}

fn scrub_text(ctx: &mut Context<'_>, text: &str) -> Result<String, EngineError> {
    let bytes = text.as_bytes();
    let mut scrubbed = String::with_capacity(text.len());
    let (mut copied, mut start) = (0, 0);
    while start < bytes.len() {
        if !bytes[start].is_ascii_hexdigit() {
            start += 1;
            continue;
        }
        let end = bytes[start..]
            .iter()
            .position(|byte| !byte.is_ascii_hexdigit())
            .map_or(bytes.len(), |length| start + length);
        if end - start == 64 {
            if let Some(replacement) = token_replacement(ctx, &text[start..end])? {
                scrubbed.push_str(&text[copied..start]);
                scrubbed.push_str(&replacement);
                copied = end;
            }
        }
        start = end;
    }
    scrubbed.push_str(&text[copied..]);
    Ok(scrubbed)
}

fn token_replacement(ctx: &mut Context<'_>, candidate: &str) -> Result<Option<String>, EngineError> {
    let hash = token::hash_token(candidate);
    if let Some(node) = ctx.tx.node_by_signal_hash(&hash)? {
        let placeholder = match (node.resource_type.as_str(), &node.derived_config_id) {
            (WAIT_HANDLE, _) => {
                node.attributes.get("_id").and_then(Value::as_str).map(|id| placeholder(Purpose::Handle, id))
            }
            (_, Some(derived)) => Some(placeholder(Purpose::Signal, derived)),
            _ => None,
        };
        return Ok(Some(placeholder.unwrap_or_else(|| "***".to_string())));
    }
    let retired = ctx.tx.is_retired_signal_hash(&hash)?;
    let server = ctx.tx.server_by_token_hash(&hash)?.is_some();
    Ok((retired || server).then(|| "***".to_string()))
}
