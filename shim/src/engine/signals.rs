//! Signals: a deployment's heat-config-notify result (Heat's failure and output rules, applied
//! with one conditional write so a repeated or stale signal changes nothing), and wait-condition
//! handle signals (stored one row per id, counted on the handle; a wait condition fails on any
//! FAILURE and completes when `count` distinct ids have arrived; once it has, only ids the handle
//! holds may take new values, which its `data` then shows). What a signal completes continues
//! the forward traversal. Supplied text is scrubbed of tokens before it is stored, and
//! wait signals are bounded in size and number (see docs/http-api.md).

use anneal_protocol::{HookResult, Outcome, OutputDecl, evaluate};
use serde_json::{Map, Value};

use super::context::Context;
use super::error::EngineError;
use super::node::{self, status};
use super::resources::wait::{check_wait_condition, show_signal_in_completed_data, signal_counts};
use super::secrets::{Purpose, neutralise, placeholder};
use super::traversal::forward;
use crate::model::{SignalAck, WaitConditionSignal};
use crate::store::{NodeRow, NodeState, RunOutcome, StackRow, WaitSignalRow};
use crate::template::ResourceType;
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
    let Some(node) = ctx.tx.node_by_signal_hash(&hash)? else {
        let stale = ctx.tx.is_retired_signal_hash(&hash)?;
        return Ok(stale.then_some(SignalAck::Stale));
    };
    if !node::is_deployment(&node) {
        return Ok(None);
    }
    apply_to_node(ctx, node, body)
}

/// Applies a deployment's result to `node` (found by its signal token, or, for a plan, the
/// node whose run the plan assumes finished).
pub fn apply_to_node(ctx: &mut Context<'_>, mut node: NodeRow, body: Value) -> Result<Option<SignalAck>, EngineError> {
    let Some(stack) = ctx.tx.stack(&node.stack)? else { return Ok(None) };
    let recorded_only = match node.state {
        NodeState::InProgress => false,
        // An update reset the node while this run was going on: record the run's result against
        // its own publication; the new traversal decides what happens next.
        NodeState::Init if node.record.outcome.is_none() => true,
        _ => return Ok(Some(SignalAck::Duplicate)),
    };
    let (generation, previous_state) = (node.generation, node.state);
    let result = HookResult(match Scrubber::default().value(ctx, body)? {
        Value::Object(map) => map,
        _ => Map::new(),
    });
    let (failed, status_reason) = record_result(&mut node, &result);
    if recorded_only {
        node.updated_at = ctx.now;
        let applied = ctx.tx.update_node_if(&node, generation, previous_state)?;
        return Ok(Some(if applied { SignalAck::Stale } else { SignalAck::Duplicate }));
    }
    node.state = if failed { NodeState::Failed } else { NodeState::Complete };
    node.status_reason = status_reason.clone();
    node.updated_at = ctx.now;
    if !ctx.tx.update_node_if(&node, generation, NodeState::InProgress)? {
        return Ok(Some(SignalAck::Duplicate));
    }
    ctx.event(&stack.name, &node.name, &status(node.action, node.state), &status_reason)?;
    let released = if failed {
        let reason =
            format!("Resource {} failed: {}: Deployment to server failed: {}", node.action, node.name, status_reason);
        node::after_failure(ctx, &stack, node, &reason)?
    } else {
        node::release(ctx, &stack, node)?
    };
    forward::proceed(ctx, &stack, released)?;
    Ok(Some(SignalAck::Applied))
}

/// Applies Heat's output and failure rules to a run's result: the declared outputs and the
/// `deploy_*` attributes are set, the run's outcome recorded. Returns whether it failed and why.
/// Any other key of the result is not kept, as Heat keeps none
/// (heat.engine.service_software_config.signal_software_deployment): reading it is refused.
fn record_result(node: &mut NodeRow, result: &HookResult) -> (bool, String) {
    let declarations: Vec<OutputDecl> =
        serde_json::from_value(Value::Array(node.record.outputs.clone())).unwrap_or_default();
    let evaluation = evaluate(result, &declarations);
    for declaration in &declarations {
        node.attributes[declaration.name.as_str()] =
            evaluation.output_values.get(&declaration.name).cloned().unwrap_or(Value::Null);
    }
    for key in ["deploy_stdout", "deploy_stderr", "deploy_status_code"] {
        node.attributes[key] = evaluation.output_values.get(key).cloned().unwrap_or(Value::Null);
    }
    let failed = matches!(evaluation.outcome, Outcome::Failed { .. });
    node.record.outcome = Some(if failed { RunOutcome::Failed } else { RunOutcome::Complete });
    if !failed {
        node.record.completed_once = true;
    }
    (failed, evaluation.status_reason)
}

/// The most a wait-condition signal's `reason` and its `data` (as JSON text) may hold, each.
pub const MAX_WAIT_SIGNAL_FIELD_BYTES: usize = 64 * 1024;
/// The longest signal id a handle accepts.
pub const MAX_WAIT_SIGNAL_ID_BYTES: usize = 1024;
/// Distinct signal ids one handle stores (a wait condition whose `count` is higher raises it to
/// that count); a signal with a new id beyond it is refused, a repeated id still replaces.
pub const MAX_SIGNAL_IDS_PER_HANDLE: u64 = 1000;

/// Records a handle signal and re-checks the wait conditions on that handle. `Ok(None)`: unknown
/// token. Once every wait condition on the handle has completed or failed, a signal for an id the
/// handle holds still replaces that id's signal (Heat's handle overwrites it, and a completed
/// condition's `data` shows the new value) while one with a new id is answered `stale` and
/// stored nowhere (see docs/http-api.md).
pub fn apply_wait_signal(
    ctx: &mut Context<'_>,
    token_text: &str,
    signal: WaitConditionSignal,
) -> Result<Option<SignalAck>, EngineError> {
    if !token::is_well_formed(token_text) {
        return Ok(None);
    }
    let Some(mut handle) = ctx.tx.node_by_signal_hash(&token::hash_token(token_text))? else { return Ok(None) };
    if node::resource_type(&handle) != Some(ResourceType::WaitConditionHandle) {
        return Ok(None);
    }
    let Some(stack) = ctx.tx.stack(&handle.stack)? else { return Ok(None) };
    check_wait_signal_size(&signal)?;
    let waits = wait_conditions_on(ctx, &stack, &handle)?;
    let decided =
        !waits.is_empty() && waits.iter().all(|wait| matches!(wait.state, NodeState::Complete | NodeState::Failed));
    let (received, failures) = signal_counts(ctx, &stack, &handle)?;
    let mut scrubber = Scrubber::default();
    let default_id = (received + 1).to_string();
    let signal_id = scrubber.text(ctx, signal.id.as_deref().unwrap_or(&default_id))?;
    let previous = ctx.tx.wait_signal_success(&stack.name, &handle.name, &signal_id)?;
    if decided && previous.is_none() {
        // The handle's work is done: a new id would only grow the database.
        return Ok(Some(SignalAck::Stale));
    }
    let cap = waits.iter().filter_map(|wait| wait.record.count).fold(MAX_SIGNAL_IDS_PER_HANDLE, u64::max);
    if previous.is_none() && received >= cap {
        return Err(EngineError::Invalid {
            message: format!("handle {} already holds {cap} signal ids, the most it stores", handle.name),
        });
    }
    let slot = HandleSlot { id: signal_id, previous, received, failures };
    let (new, data) = store_wait_signal(ctx, &stack, &mut handle, &slot, signal, &mut scrubber)?;
    let mut ready = Vec::new();
    for wait in waits {
        if wait.state == NodeState::Complete {
            show_signal_in_completed_data(ctx, &stack, wait, &handle.name, &slot.id, &data)?;
            continue;
        }
        let released = check_wait_condition(ctx, &stack, &wait.name)?;
        forward::follow(ctx, &stack, released, &mut ready)?;
    }
    forward::settle(ctx, &stack.name, ready)?;
    Ok(Some(if new { SignalAck::Applied } else { SignalAck::Duplicate }))
}

/// Where a signal goes on its handle: its id (scrubbed), whether the handle's earlier signal of
/// that id succeeded (`None`: a new id), and the handle's counts before it (distinct ids, ids
/// whose latest signal failed).
struct HandleSlot {
    id: String,
    previous: Option<bool>,
    received: u64,
    failures: u64,
}

/// Stores the signal (replacing an earlier one of its id), keeps the handle's counts and adds
/// its event. Returns whether the id is new and the data stored (scrubbed).
fn store_wait_signal(
    ctx: &mut Context<'_>,
    stack: &StackRow,
    handle: &mut NodeRow,
    slot: &HandleSlot,
    signal: WaitConditionSignal,
    scrubber: &mut Scrubber,
) -> Result<(bool, Value), EngineError> {
    let reason = signal.reason.unwrap_or_else(|| format!("Signal {} received", slot.received + 1));
    let reason = scrubber.text(ctx, &reason)?;
    let data = match signal.data {
        Some(data) => scrubber.value(ctx, data)?,
        None => Value::Null,
    };
    let row = WaitSignalRow {
        stack: stack.name.clone(),
        handle: handle.name.clone(),
        signal_id: slot.id.clone(),
        success: signal.success,
        reason: reason.clone(),
        data,
        received_at: ctx.now,
    };
    let new = ctx.tx.upsert_wait_signal(&row)?;
    let received = slot.received + u64::from(new);
    let failures = (slot.failures + u64::from(!signal.success)).saturating_sub(u64::from(slot.previous == Some(false)));
    (handle.record.signals, handle.record.failures) = (Some(received), failures);
    ctx.tx.update_node(handle)?;
    let status = if signal.success { "SIGNAL_SUCCESS" } else { "SIGNAL_FAILURE" };
    ctx.event(&stack.name, &handle.name, status, &format!("{}: {reason}", slot.id))?;
    Ok((new, row.data))
}

/// Refuses a signal whose id, reason or data is over its limit, naming the limit.
fn check_wait_signal_size(signal: &WaitConditionSignal) -> Result<(), EngineError> {
    let too_large = |what: &str, limit: usize| EngineError::Invalid {
        message: format!("the signal's {what} is larger than {limit} bytes, the most a handle accepts"),
    };
    if signal.id.as_ref().is_some_and(|id| id.len() > MAX_WAIT_SIGNAL_ID_BYTES) {
        return Err(too_large("id", MAX_WAIT_SIGNAL_ID_BYTES));
    }
    if signal.reason.as_ref().is_some_and(|reason| reason.len() > MAX_WAIT_SIGNAL_FIELD_BYTES) {
        return Err(too_large("reason", MAX_WAIT_SIGNAL_FIELD_BYTES));
    }
    let data_bytes =
        signal.data.as_ref().map_or(0, |data| serde_json::to_string(data).map_or(usize::MAX, |text| text.len()));
    if data_bytes > MAX_WAIT_SIGNAL_FIELD_BYTES {
        return Err(too_large("data", MAX_WAIT_SIGNAL_FIELD_BYTES));
    }
    Ok(())
}

/// The wait conditions that wait on `handle` (its successors of that type).
fn wait_conditions_on(ctx: &mut Context<'_>, stack: &StackRow, handle: &NodeRow) -> Result<Vec<NodeRow>, EngineError> {
    let mut waits = Vec::new();
    for name in ctx.tx.successors(&stack.name, &handle.name)? {
        if let Some(successor) = ctx.tx.node(&stack.name, &name)? {
            if node::resource_type(&successor) == Some(ResourceType::WaitCondition) {
                waits.push(successor);
            }
        }
    }
    Ok(waits)
}

/// Token lookups one signal body may cost; token-shaped text beyond them is masked unread.
pub const MAX_TOKEN_LOOKUPS_PER_BODY: usize = 64;

/// Makes a copy of supplied values in which every token of ours (a run of exactly 64 hex digits
/// whose hash belongs to a signal, handle or server token) is replaced: by its placeholder where
/// one exists, else by `***`. Hooks echo tokens back (a `set -x` around `curl_cli`), and the store
/// must never hold one in clear. Placeholders in the supplied text are neutralised first (see
/// `secrets`), so the only ones in the copy stand for tokens the sender held; rendering shows none
/// of them unless the engine placed that token there itself. Each lookup costs up to three index
/// reads, so one body gets `MAX_TOKEN_LOOKUPS_PER_BODY`; any token-shaped run after those is
/// replaced by `***` without one (it might be a token, and the store must not hold it).
#[derive(Default)]
struct Scrubber {
    lookups: usize,
}

impl Scrubber {
    fn value(&mut self, ctx: &mut Context<'_>, value: Value) -> Result<Value, EngineError> {
        Ok(match value {
            Value::String(text) => Value::String(self.text(ctx, &text)?),
            Value::Array(items) => {
                Value::Array(items.into_iter().map(|item| self.value(ctx, item)).collect::<Result<_, _>>()?)
            }
            Value::Object(map) => Value::Object(
                map.into_iter()
                    // Keys too: a hook may echo a token as a key of its data.
                    .map(|(key, item)| Ok((self.text(ctx, &key)?, self.value(ctx, item)?)))
                    .collect::<Result<_, EngineError>>()?,
            ),
            other => other,
        })
    }

    fn text(&mut self, ctx: &mut Context<'_>, text: &str) -> Result<String, EngineError> {
        let text = &*neutralise(text);
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
                let replacement = if self.lookups < MAX_TOKEN_LOOKUPS_PER_BODY {
                    self.lookups += 1;
                    token_replacement(ctx, &text[start..end])?
                } else {
                    Some("***".to_string())
                };
                if let Some(replacement) = replacement {
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
}

fn token_replacement(ctx: &mut Context<'_>, candidate: &str) -> Result<Option<String>, EngineError> {
    let hash = token::hash_token(candidate);
    if let Some(node) = ctx.tx.node_by_signal_hash(&hash)? {
        let placeholder = match (node::resource_type(&node), &node.derived_config_id) {
            (Some(ResourceType::WaitConditionHandle), _) => {
                node.record.id.as_deref().map(|id| placeholder(Purpose::Handle, id))
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
