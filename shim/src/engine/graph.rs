//! The graph semantics: activating a node once all its predecessors are complete, completing it
//! (which decrements each successor's counter and activates those that reach zero), failing it,
//! and the bookkeeping that finishes a stack. Work per event is proportional to the node's edges:
//! nothing here reads the whole graph.

use serde_json::{Map, Value, json};

use super::context::{Context, STATE_COMPLETE, STATE_FAILED, STATE_IN_PROGRESS, STATE_INIT, new_uuid};
use super::derived::{ConfigDefinition, Publication, build_entry, fingerprint};
use super::secrets::{Purpose, placeholder};
use super::{EngineError, waits};
use crate::store::{EntryRow, NodeRow, StackRow};
use crate::template::Expr;

pub const SOFTWARE_CONFIG: &str = "OS::Heat::SoftwareConfig";
pub const STRUCTURED_CONFIG: &str = "OS::Heat::StructuredConfig";
pub const SOFTWARE_COMPONENT: &str = "OS::Heat::SoftwareComponent";
pub const SOFTWARE_DEPLOYMENT: &str = "OS::Heat::SoftwareDeployment";
pub const STRUCTURED_DEPLOYMENT: &str = "OS::Heat::StructuredDeployment";
pub const DEPLOYMENT_GROUP: &str = "OS::Heat::SoftwareDeploymentGroup";
pub const WAIT_HANDLE: &str = "OS::Heat::WaitConditionHandle";
pub const WAIT_CONDITION: &str = "OS::Heat::WaitCondition";

pub fn is_deployment(resource_type: &str) -> bool {
    resource_type == SOFTWARE_DEPLOYMENT || resource_type == STRUCTURED_DEPLOYMENT
}

/// Activates `names` and everything their completion makes ready.
pub fn settle(ctx: &mut Context<'_>, stack: &str, mut ready: Vec<String>) -> Result<(), EngineError> {
    while let Some(name) = ready.pop() {
        activate(ctx, stack, &name, &mut ready)?;
    }
    Ok(())
}

fn activate(ctx: &mut Context<'_>, stack_name: &str, name: &str, ready: &mut Vec<String>) -> Result<(), EngineError> {
    let Some(stack) = ctx.tx.stack(stack_name)? else { return Ok(()) };
    let Some(node) = ctx.tx.node(stack_name, name)? else { return Ok(()) };
    if node.state != STATE_INIT || node.generation != stack.generation {
        return Ok(());
    }
    let properties = match ctx.evaluate_properties(&stack, &node) {
        Ok(properties) => properties,
        Err(reason) => return fail(ctx, &stack, node, &reason),
    };
    match node.resource_type.as_str() {
        SOFTWARE_CONFIG | STRUCTURED_CONFIG | SOFTWARE_COMPONENT => {
            activate_config(ctx, &stack, node, &properties, ready)
        }
        WAIT_HANDLE => activate_handle(ctx, &stack, node, ready),
        WAIT_CONDITION => waits::activate_wait_condition(ctx, &stack, node, &properties, ready),
        SOFTWARE_DEPLOYMENT | STRUCTURED_DEPLOYMENT => activate_deployment(ctx, &stack, node, &properties, ready),
        DEPLOYMENT_GROUP => super::group::activate_group(ctx, &stack, node, &properties, ready),
        other => {
            let reason = format!("{other} is not supported by this version of anneal-shim");
            fail(ctx, &stack, node, &reason)
        }
    }
}

fn stable_id(node: &NodeRow) -> Value {
    node.attributes.get("_id").cloned().unwrap_or_else(|| Value::String(new_uuid()))
}

fn activate_config(
    ctx: &mut Context<'_>,
    stack: &StackRow,
    mut node: NodeRow,
    properties: &Map<String, Value>,
    ready: &mut Vec<String>,
) -> Result<(), EngineError> {
    let definition = ConfigDefinition::from_properties(&node.resource_type, properties);
    node.attributes =
        json!({"_id": stable_id(&node), "config": definition.config, "_definition": definition.to_json()});
    complete(ctx, stack, node, "state changed", ready)
}

fn activate_handle(
    ctx: &mut Context<'_>,
    stack: &StackRow,
    mut node: NodeRow,
    ready: &mut Vec<String>,
) -> Result<(), EngineError> {
    let id = stable_id(&node);
    let id_text = id.as_str().unwrap_or_default().to_string();
    let token = placeholder(Purpose::Handle, &id_text);
    let endpoint = format!("{}/v1/waitconditions/{token}", ctx.public_url);
    let curl_cli =
        format!("curl -i -X POST -H 'Content-Type: application/json' -H 'Accept: application/json' {endpoint}");
    let signal = json!({"alarm_url": endpoint}).to_string();
    node.attributes = json!({"_id": id, "token": token, "endpoint": endpoint, "curl_cli": curl_cli, "signal": signal});
    node.signal_token_hash = Some(ctx.key.token_hash(Purpose::Handle, &id_text));
    complete(ctx, stack, node, "state changed", ready)
}

/// The name a `{get_resource: X}` property refers to.
pub fn referenced_resource(node: &NodeRow, property: &str) -> Option<String> {
    let stored = node.definition.get("properties")?.get(property)?;
    match Expr::from_json(stored).ok()? {
        Expr::GetResource(name) => Some(name),
        _ => None,
    }
}

fn activate_deployment(
    ctx: &mut Context<'_>,
    stack: &StackRow,
    mut node: NodeRow,
    properties: &Map<String, Value>,
    ready: &mut Vec<String>,
) -> Result<(), EngineError> {
    let Some(server) = properties.get("server").and_then(Value::as_str).map(str::to_string) else {
        return fail(ctx, stack, node, "property server: must be the name of a registered server");
    };
    if ctx.tx.server(&server)?.is_none() {
        let reason = format!("server \"{server}\" is not registered (anneal-shim server add {server})");
        return fail(ctx, stack, node, &reason);
    }
    let config = match config_of(ctx, stack, &node)? {
        Some(config) => config,
        None => return fail(ctx, stack, node, "property config: the config resource has no definition"),
    };
    let actions = deployment_actions(properties);
    if node.action == "UPDATE" && is_replacement(&node, &server, &config, properties) {
        // Heat replaces the deployment: the new one runs CREATE (and the old entry goes).
        node.action = "CREATE".into();
    }
    node.attributes["_replace_values"] = replace_on_change_values(&config, properties);
    node.attributes["_id"] = stable_id(&node);
    node.attributes["_actions"] = json!(actions);
    if !actions.iter().any(|action| action == &node.action) {
        let reason = format!("{} is not among the deployment's actions", node.action);
        return complete(ctx, stack, node, &reason, ready);
    }
    publish(ctx, stack, node, &server, &config, properties, ready)
}

/// Whether an update must replace the deployment rather than update it: its server changed, or
/// an input declared `replace_on_change` has a new value.
fn is_replacement(node: &NodeRow, server: &str, config: &ConfigDefinition, properties: &Map<String, Value>) -> bool {
    let moved = node.server.as_deref().is_some_and(|previous| previous != server);
    let previous_values = node.attributes.get("_replace_values").cloned().unwrap_or(Value::Null);
    moved || (!previous_values.is_null() && previous_values != replace_on_change_values(config, properties))
}

/// The current values of the config's `replace_on_change` inputs.
fn replace_on_change_values(config: &ConfigDefinition, properties: &Map<String, Value>) -> Value {
    let given = properties.get("input_values").and_then(Value::as_object);
    let values: Map<String, Value> = config
        .inputs
        .iter()
        .filter(|input| input.get("replace_on_change") == Some(&Value::Bool(true)))
        .filter_map(|input| {
            let name = input.get("name")?.as_str()?;
            let value = given.and_then(|given| given.get(name)).or_else(|| input.get("default")).cloned();
            Some((name.to_string(), value.unwrap_or(Value::Null)))
        })
        .collect();
    Value::Object(values)
}

/// Publishes the deployment's derived config for its current action (or recognises that an
/// update changes nothing and completes it at once).
pub fn publish(
    ctx: &mut Context<'_>,
    stack: &StackRow,
    mut node: NodeRow,
    server: &str,
    config: &ConfigDefinition,
    properties: &Map<String, Value>,
    ready: &mut Vec<String>,
) -> Result<(), EngineError> {
    let derived_id = new_uuid();
    let name = properties.get("name").and_then(Value::as_str).unwrap_or(&node.name).to_string();
    let transport = properties.get("signal_transport").and_then(Value::as_str).unwrap_or("CFN_SIGNAL").to_string();
    let empty = Map::new();
    let input_values = properties.get("input_values").and_then(Value::as_object).unwrap_or(&empty);
    let structured = (node.resource_type == STRUCTURED_DEPLOYMENT).then(|| {
        let key = properties.get("input_key").and_then(Value::as_str).unwrap_or("get_input");
        (key, properties.get("input_values_validate").and_then(Value::as_str) == Some("STRICT"))
    });
    let stack_path = format!("{}/{}", stack.name, stack.id);
    let creation_time = super::context::rfc3339(ctx.now);
    let publication = Publication {
        derived_id: &derived_id,
        name: &name,
        action: &node.action,
        server,
        stack_path: &stack_path,
        resource_name: &node.name,
        signal_transport: &transport,
        public_url: ctx.public_url,
        creation_time: &creation_time,
        input_values,
        structured,
    };
    let entry = match build_entry(config, &publication) {
        Ok(entry) => entry,
        Err(reason) => return fail(ctx, stack, node, &reason),
    };
    let print = fingerprint(&entry, server);
    if node.action != "DELETE" && node.attributes.get("_fingerprint").and_then(Value::as_str) == Some(print.as_str()) {
        match node.attributes.get("_outcome").and_then(Value::as_str) {
            Some(STATE_COMPLETE) => return complete(ctx, stack, node, "unchanged", ready),
            // Still running from the previous traversal: keep waiting for that run's signal.
            None if node.derived_config_id.is_some() => {
                return mark_in_progress(ctx, stack, node, "Deploy data available");
            }
            _ => {}
        }
    }
    if let Some(previous) = node.server.as_deref().filter(|previous| *previous != server) {
        ctx.tx.remove_entry(previous, &stack.name, &node.name)?;
        ctx.touched_servers.insert(previous.to_string());
    }
    let row = EntryRow {
        server: server.to_string(),
        stack: stack.name.clone(),
        node: node.name.clone(),
        sort_key: name,
        entry,
    };
    ctx.tx.put_entry(&row)?;
    ctx.touched_servers.insert(server.to_string());
    node.server = Some(server.to_string());
    if let Some(superseded) = &node.signal_token_hash {
        // A late signal for the previous publication must be answered "stale", not "unknown".
        ctx.tx.retire_signal_hash(superseded, &stack.name, &node.name)?;
    }
    node.signal_token_hash = Some(ctx.key.token_hash(Purpose::Signal, &derived_id));
    node.derived_config_id = Some(derived_id);
    node.attributes["_fingerprint"] = json!(print);
    node.attributes["_outputs"] = json!(config.output_declarations());
    if let Some(attributes) = node.attributes.as_object_mut() {
        attributes.remove("_outcome");
    }
    if transport == "NO_SIGNAL" {
        for key in ["deploy_stdout", "deploy_stderr", "deploy_status_code"] {
            node.attributes[key] = Value::Null;
        }
        node.attributes["_outcome"] = json!(STATE_COMPLETE);
        return complete(ctx, stack, node, "Not waiting for outputs signal", ready);
    }
    mark_in_progress(ctx, stack, node, "Deploy data available")
}

fn mark_in_progress(
    ctx: &mut Context<'_>,
    stack: &StackRow,
    mut node: NodeRow,
    reason: &str,
) -> Result<(), EngineError> {
    node.state = STATE_IN_PROGRESS.to_string();
    node.status_reason = reason.to_string();
    node.updated_at = ctx.now;
    ctx.tx.update_node(&node)?;
    ctx.event(&stack.name, &node.name, &format!("{}_IN_PROGRESS", node.action), reason)
}

/// The config a deployment's `config: {get_resource: X}` points at.
pub fn config_of(
    ctx: &mut Context<'_>,
    stack: &StackRow,
    node: &NodeRow,
) -> Result<Option<ConfigDefinition>, EngineError> {
    let Some(config_name) = referenced_resource(node, "config") else { return Ok(None) };
    let Some(config_node) = ctx.tx.node(&stack.name, &config_name)? else { return Ok(None) };
    Ok(config_node.attributes.get("_definition").map(ConfigDefinition::from_json))
}

pub fn deployment_actions(properties: &Map<String, Value>) -> Vec<String> {
    match properties.get("actions").and_then(Value::as_array) {
        Some(actions) => actions.iter().filter_map(Value::as_str).map(str::to_string).collect(),
        None => vec!["CREATE".to_string(), "UPDATE".to_string()],
    }
}

/// Marks `node` COMPLETE and releases its successors; finishes the stack when it was the last.
pub fn complete(
    ctx: &mut Context<'_>,
    stack: &StackRow,
    mut node: NodeRow,
    reason: &str,
    ready: &mut Vec<String>,
) -> Result<(), EngineError> {
    node.attributes["_completed_once"] = Value::Bool(true);
    node.state = STATE_COMPLETE.to_string();
    node.status_reason = reason.to_string();
    node.updated_at = ctx.now;
    ctx.tx.update_node(&node)?;
    ctx.event(&stack.name, &node.name, &format!("{}_COMPLETE", node.action), reason)?;
    released(ctx, stack, &node, ready)
}

/// What follows a node's completion (from activation or from a signal).
pub fn released(
    ctx: &mut Context<'_>,
    stack: &StackRow,
    node: &NodeRow,
    ready: &mut Vec<String>,
) -> Result<(), EngineError> {
    // Only a node of the current traversal of a stack still in progress releases anything: a
    // late result from an earlier traversal (a run that was going on when an update or delete
    // started), or one after the stack failed, is recorded on the node and nothing else moves.
    let current = ctx.tx.stack(&stack.name)?;
    if current.is_none_or(|current| current.state != STATE_IN_PROGRESS || current.generation != node.generation) {
        return Ok(());
    }
    if node.action == "DELETE" {
        return super::lifecycle::delete_action_done(ctx, stack, node);
    }
    for successor in ctx.tx.successors(&stack.name, &node.name)? {
        if ctx.tx.decrement_remaining(&stack.name, &successor)? == 0 {
            ready.push(successor);
        }
    }
    node_done(ctx, stack)
}

/// One node of the traversal is done; the stack completes with the last one.
pub fn node_done(ctx: &mut Context<'_>, stack: &StackRow) -> Result<(), EngineError> {
    if ctx.tx.add_pending(&stack.name, -1)? > 0 {
        return Ok(());
    }
    let Some(mut current) = ctx.tx.stack(&stack.name)? else { return Ok(()) };
    if current.state != STATE_IN_PROGRESS || current.generation != stack.generation {
        return Ok(());
    }
    if current.action == "DELETE" {
        return super::lifecycle::finish_delete(ctx, &current);
    }
    current.state = STATE_COMPLETE.to_string();
    current.status_reason = format!("Stack {} completed successfully", current.action);
    current.updated_at = ctx.now;
    ctx.tx.update_stack(&current)?;
    ctx.tx.delete_deadline(&super::sweeper::stack_deadline_key(&current))?;
    ctx.event(&current.name, &current.name, &format!("{}_COMPLETE", current.action), &current.status_reason.clone())
}

/// Marks `node` FAILED; the stack fails with it (successors never activate).
pub fn fail(ctx: &mut Context<'_>, stack: &StackRow, mut node: NodeRow, reason: &str) -> Result<(), EngineError> {
    node.state = STATE_FAILED.to_string();
    node.status_reason = reason.to_string();
    node.updated_at = ctx.now;
    ctx.tx.update_node(&node)?;
    ctx.event(&stack.name, &node.name, &format!("{}_FAILED", node.action), reason)?;
    let reason = format!("Resource {} failed: {}: {}", node.action, node.name, reason);
    fail_stack(ctx, &stack.name, node.generation, &reason)
}

pub fn fail_stack(ctx: &mut Context<'_>, name: &str, generation: u64, reason: &str) -> Result<(), EngineError> {
    let Some(mut stack) = ctx.tx.stack(name)? else { return Ok(()) };
    if stack.state != STATE_IN_PROGRESS || stack.generation != generation {
        return Ok(());
    }
    stack.state = STATE_FAILED.to_string();
    stack.status_reason = reason.to_string();
    stack.updated_at = ctx.now;
    ctx.tx.update_stack(&stack)?;
    ctx.tx.delete_deadline(&super::sweeper::stack_deadline_key(&stack))?;
    ctx.event(name, name, &format!("{}_FAILED", stack.action), reason)
}
