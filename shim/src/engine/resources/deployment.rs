//! OS::Heat::SoftwareDeployment and StructuredDeployment: activation publishes the derived
//! config into the server's document (or completes at once when an update changes nothing, when
//! the action is not among the deployment's `actions`, or with NO_SIGNAL); the agent's signal
//! completes it later (see `signals`). Also the DELETE publication the reverse traversal uses.

use serde_json::{Map, Value, json};

use crate::engine::context::{Context, new_uuid, rfc3339};
use crate::engine::derived::{
    ConfigDefinition, Publication, SignalTransport, build_entry, fingerprint, fingerprint_matches,
};
use crate::engine::error::EngineError;
use crate::engine::node::{self, Released};
use crate::engine::published::EntryWrite;
use crate::engine::secrets::{Purpose, placed};
use crate::store::{Action, EntryRow, NodeRow, RunOutcome, StackRow};
use crate::template::{Expr, ResourceType};

pub fn activate(
    ctx: &mut Context<'_>,
    stack: &StackRow,
    mut node: NodeRow,
    properties: &Map<String, Value>,
) -> Result<Released, EngineError> {
    let Some(server) = properties.get("server").and_then(Value::as_str).map(str::to_string) else {
        return failed(ctx, stack, node, "property server: must be the name of a registered server");
    };
    if ctx.tx.server(&server)?.is_none() {
        let reason = format!("server \"{server}\" is not registered (anneal-shim server add {server})");
        return failed(ctx, stack, node, &reason);
    }
    let config = match config_of(ctx, stack, &node)? {
        Some(config) => config,
        None => return failed(ctx, stack, node, "property config: the config resource has no definition"),
    };
    let actions = deployment_actions(properties);
    if node.action == Action::Update && is_replacement(&node, &server, &config, properties) {
        // Heat replaces the deployment: the new one runs CREATE (and the old entry goes).
        node.action = Action::Create;
    }
    node.record.replace_values = Some(replace_on_change_values(&config, properties));
    node.record.id = Some(node::stable_id(&node));
    node.record.actions = actions;
    if !node.record.actions.iter().any(|action| action == node.action.as_str()) {
        // Its config's outputs are still its attributes (null), and no other name is.
        node.record.outputs = config.output_declarations();
        let reason = format!("{} is not among the deployment's actions", node.action);
        return node::complete(ctx, stack, node, &reason);
    }
    publish(ctx, stack, node, &server, &config, properties)
}

fn failed(ctx: &mut Context<'_>, stack: &StackRow, node: NodeRow, reason: &str) -> Result<Released, EngineError> {
    node::fail(ctx, stack, node, reason)
}

/// Whether an update must replace the deployment rather than update it: its server changed, or
/// an input declared `replace_on_change` has a new value.
fn is_replacement(node: &NodeRow, server: &str, config: &ConfigDefinition, properties: &Map<String, Value>) -> bool {
    let moved = node.server.as_deref().is_some_and(|previous| previous != server);
    let previous_values = node.record.replace_values.as_ref().filter(|values| !values.is_null());
    moved || previous_values.is_some_and(|previous| *previous != replace_on_change_values(config, properties))
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

/// A deployment's entry for one publication, with what identifies it.
struct Built {
    derived_id: String,
    sort_key: String,
    entry: Value,
    transport: SignalTransport,
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
) -> Result<Released, EngineError> {
    let built = match build(ctx, stack, &node, server, config, properties) {
        Ok(built) => built,
        Err(reason) => return failed(ctx, stack, node, &reason),
    };
    let print = fingerprint(&built.entry, server);
    let unchanged = node
        .record
        .fingerprint
        .as_deref()
        .is_some_and(|stored| stored == print || fingerprint_matches(stored, &built.entry, server));
    if node.action != Action::Delete && unchanged {
        // A fingerprint an earlier version made is replaced by this version's.
        node.record.fingerprint = Some(print.clone());
        match node.record.outcome {
            Some(RunOutcome::Complete) => return node::complete(ctx, stack, node, "unchanged"),
            // Still running from the previous traversal: keep waiting for that run's signal.
            None if node.derived_config_id.is_some() => {
                node::mark_in_progress(ctx, stack, node, "Deploy data available")?;
                return Ok(Released::Nothing);
            }
            _ => {}
        }
    }
    if let Some(previous) = node.server.as_deref().filter(|previous| *previous != server) {
        ctx.remove_entry(previous, &stack.name, &node.name)?;
    }
    let Built { derived_id, sort_key, entry, transport } = built;
    let tokens = placed_tokens(ctx, stack, &node, &derived_id)?;
    let row = EntryRow {
        server: server.to_string(),
        stack: stack.name.clone(),
        node: node.name.clone(),
        sort_key,
        entry,
        tokens,
    };
    if let EntryWrite::OverLimit(reason) = ctx.put_entry(&row)? {
        return node::fail_over_limit(ctx, stack, node, &reason);
    }
    node.server = Some(server.to_string());
    if let Some(superseded) = &node.signal_token_hash {
        // A late signal for the previous publication must be answered "stale", not "unknown".
        ctx.tx.retire_signal_hash(superseded, &stack.name, &node.name)?;
    }
    node.signal_token_hash = Some(ctx.key.token_hash(Purpose::Signal, &derived_id));
    node.derived_config_id = Some(derived_id);
    node.record.fingerprint = Some(print);
    node.record.outputs = config.output_declarations();
    node.record.outcome = None;
    if transport == SignalTransport::NoSignal {
        for key in ["deploy_stdout", "deploy_stderr", "deploy_status_code"] {
            node.attributes[key] = Value::Null;
        }
        node.record.outcome = Some(RunOutcome::Complete);
        return node::complete(ctx, stack, node, "Not waiting for outputs signal");
    }
    node::mark_in_progress(ctx, stack, node, "Deploy data available")?;
    Ok(Released::Nothing)
}

/// The `deploy_stack_id` of the node: the stack's `<name>/<id>` (Heat's `stack_path()`), or
/// for a resource of a flattened nested stack, the one its definition stores for that stack.
pub(super) fn stack_path(ctx: &mut Context<'_>, stack: &StackRow, node: &NodeRow) -> Result<String, String> {
    let Some(stored) = node.definition.get("stack") else { return Ok(format!("{}/{}", stack.name, stack.id)) };
    let expression = Expr::from_json(stored).map_err(|error| format!("the nested stack's id: {error}"))?;
    match ctx.evaluate(stack, &expression) {
        Ok(Value::String(path)) => Ok(path),
        Ok(other) => Err(format!("the nested stack's id is not a string: {other}")),
        Err(error) => Err(format!("the nested stack's id: {error}")),
    }
}

/// The derived config entry of a new publication; the error says why it cannot be built.
fn build(
    ctx: &mut Context<'_>,
    stack: &StackRow,
    node: &NodeRow,
    server: &str,
    config: &ConfigDefinition,
    properties: &Map<String, Value>,
) -> Result<Built, String> {
    let transport = match properties.get("signal_transport").and_then(Value::as_str) {
        None => SignalTransport::Cfn,
        Some(name) => SignalTransport::parse(name)
            .ok_or_else(|| format!("property signal_transport: {name:?} is not a signal transport"))?,
    };
    let derived_id = new_uuid();
    let sort_key = properties.get("name").and_then(Value::as_str).unwrap_or(&node.name).to_string();
    let empty = Map::new();
    let input_values = properties.get("input_values").and_then(Value::as_object).unwrap_or(&empty);
    let structured = (node::resource_type(node) == Some(ResourceType::StructuredDeployment)).then(|| {
        let key = properties.get("input_key").and_then(Value::as_str).unwrap_or("get_input");
        (key, properties.get("input_values_validate").and_then(Value::as_str) == Some("STRICT"))
    });
    let stack_path = stack_path(ctx, stack, node)?;
    // A group member is named by its `servers` key, as in the nested stack Heat makes for a
    // SoftwareDeploymentGroup (heat.engine.resources.openstack.heat.resource_group); a resource
    // of a flattened nested stack or ResourceGroup (`outer/inner`, `group/0`) by its name in
    // the nested stack, as Heat names it there.
    let resource_name = match node::group_of(node) {
        Some(group) => node.name.strip_prefix(group).and_then(|rest| rest.strip_prefix('/')).unwrap_or(&node.name),
        None => node.name.rsplit('/').next().unwrap_or(&node.name),
    };
    let creation_time = rfc3339(ctx.now);
    let publication = Publication {
        derived_id: &derived_id,
        name: &sort_key,
        action: node.action,
        server,
        stack_path: &stack_path,
        resource_name,
        signal_transport: transport,
        creation_time: &creation_time,
        input_values,
        structured,
    };
    let entry = build_entry(config, &publication)?;
    Ok(Built { derived_id, sort_key, entry, transport })
}

/// The tokens the engine placed in a deployment's entry: its own signal (`deploy_signal_id`)
/// and the handles its properties (evaluated just before) and its config read through
/// `get_attr`. Rendering substitutes these only (see docs/security.md).
fn placed_tokens(
    ctx: &mut Context<'_>,
    stack: &StackRow,
    node: &NodeRow,
    derived_id: &str,
) -> Result<Vec<String>, EngineError> {
    let mut handles = std::mem::take(&mut ctx.placed_handles);
    if let Some(config_name) = node::referenced_resource(node, "config") {
        if let Some(config_node) = ctx.tx.node_shared(&stack.name, &config_name)? {
            handles.extend(config_node.record.placed_handles.iter().cloned());
        }
    }
    let mut tokens = vec![placed(Purpose::Signal, derived_id)];
    tokens.extend(handles.iter().map(|id| placed(Purpose::Handle, id)));
    Ok(tokens)
}

/// The config a deployment's `config: {get_resource: X}` points at.
pub fn config_of(
    ctx: &mut Context<'_>,
    stack: &StackRow,
    node: &NodeRow,
) -> Result<Option<ConfigDefinition>, EngineError> {
    let Some(config_name) = node::referenced_resource(node, "config") else { return Ok(None) };
    let Some(config_node) = ctx.tx.node_shared(&stack.name, &config_name)? else { return Ok(None) };
    Ok(config_node.record.definition.as_ref().map(ConfigDefinition::from_json))
}

/// The deployment's `actions` property (Heat's default: CREATE and UPDATE).
pub fn deployment_actions(properties: &Map<String, Value>) -> Vec<String> {
    match properties.get("actions").and_then(Value::as_array) {
        Some(actions) => actions.iter().filter_map(Value::as_str).map(str::to_string).collect(),
        None => vec![Action::Create.to_string(), Action::Update.to_string()],
    }
}

/// Properties for a DELETE action whose inputs no longer resolve (their producers are gone).
pub fn delete_properties() -> Map<String, Value> {
    Map::from_iter([("actions".to_string(), json!(deployment_actions(&Map::new())))])
}
