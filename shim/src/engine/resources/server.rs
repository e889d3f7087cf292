//! `OS::Heat::DeployedServer`: the server a deployment's `server: {get_resource: ...}` names.
//! A server registered under its name (`server add`) is bound as it is. Otherwise the stack
//! registers it, as Heat's DeployedServer creates the server's identity when the stack creates
//! it (heat.engine.resources.openstack.heat.deployed_server, `handle_create`): a server row whose
//! token is derived from an id kept in the node's record (`secrets::Purpose::Server`, so the
//! database keeps only its hash), and an `os_collect_config` attribute that carries that token
//! as a placeholder, rendered only in the admin's API answers, for `anneal-agent bootstrap
//! --from-metadata`. A name is generated as Heat generates one when the template gives none.
//! Removing the node revokes the server it created (`revoke`), unless another stack still uses
//! it (docs/templates.md "Servers and their attributes").

use serde_json::{Map, Value, json};

use super::deployment::stack_path;
use crate::engine::context::{Context, new_uuid};
use crate::engine::error::EngineError;
use crate::engine::node::{self, Released};
use crate::engine::secrets::{BASE_URL, Purpose, placeholder};
use crate::model::AGENT_TOKEN_PATH;
use crate::store::{Action, NodeRow, ServerRow, StackRow};
use crate::template::{self, ResourceType, ServerAddresses};

/// Binds to, or creates, the server the `name` property (else a default, `default_name`)
/// names. Its id, what a deployment's `server: {get_resource: ...}` receives, is the server
/// name. A server this node created before and no longer names is revoked first.
pub fn activate(
    ctx: &mut Context<'_>,
    stack: &StackRow,
    mut node: NodeRow,
    properties: &Map<String, Value>,
) -> Result<Released, EngineError> {
    let server = match properties.get("name") {
        Some(Value::String(name)) if !name.is_empty() => name.clone(),
        _ => match default_name(ctx, stack, &node)? {
            Ok(name) => name,
            Err(reason) => return node::fail(ctx, stack, node, &reason),
        },
    };
    if node.record.server_token.is_some() && node.record.id.as_deref() != Some(server.as_str()) {
        revoke(ctx, stack, &node)?;
        node.record.server_token = None;
    }
    let token_id = match ctx.tx.server(&server)? {
        // Still the one this node created (an update that keeps its name): kept as it is.
        Some(_) if node.record.id.as_deref() == Some(server.as_str()) => node.record.server_token.clone(),
        Some(_) => None,
        None if !template::is_valid_server_name(&server) => {
            let reason =
                format!("server name {server:?} must be 1-64 characters of [A-Za-z0-9._-] not starting with '.'");
            return node::fail(ctx, stack, node, &reason);
        }
        None => Some(register(ctx, stack, &node, &server)?),
    };
    let row = ctx.tx.server(&server)?;
    let addresses = row.map(|row| ServerAddresses::from_stored(&row.addresses)).unwrap_or_default();
    let mut attributes = addresses.attributes(&server);
    attributes.insert("os_collect_config".to_owned(), os_collect_config(&server, token_id.as_deref()));
    node.record.id = Some(server.clone());
    node.record.server_token = token_id;
    // The resource is that server: `server delete` sees the stack using it, `stack show` lists it.
    node.server = Some(server);
    node.attributes = Value::Object(attributes).into();
    node::complete(ctx, stack, node, "state changed")
}

/// The server of a DeployedServer without a `name`: the one it bound before (an update keeps
/// it), else a server registered under the resource name (anneal's default before it created
/// servers), else the name Heat generates (`template::generated_server_name`) from the name of
/// the (nested) stack the resource is in, its own name in that stack and a short id stable
/// across updates.
fn default_name(
    ctx: &mut Context<'_>,
    stack: &StackRow,
    node: &NodeRow,
) -> Result<Result<String, String>, EngineError> {
    if let Some(previous) = node.record.id.as_deref()
        && ctx.tx.server(previous)?.is_some()
    {
        return Ok(Ok(previous.to_owned()));
    }
    if template::is_valid_server_name(&node.name) && ctx.tx.server(&node.name)?.is_some() {
        return Ok(Ok(node.name.clone()));
    }
    let path = match stack_path(ctx, stack, node) {
        Ok(path) => path,
        Err(reason) => return Ok(Err(reason)),
    };
    let stack_name = path.split_once('/').map_or(path.as_str(), |(name, _)| name);
    let resource_name = node.name.rsplit('/').next().unwrap_or(&node.name);
    let short_id = template::short_id(&stack.id, &node.name);
    Ok(Ok(template::generated_server_name(stack_name, resource_name, &short_id)))
}

/// Registers `server` for `node`, as `server add` does without addresses, with a token derived
/// from a fresh id; returns the id.
fn register(ctx: &mut Context<'_>, stack: &StackRow, node: &NodeRow, server: &str) -> Result<String, EngineError> {
    let token_id = new_uuid();
    let row = ServerRow {
        name: server.to_owned(),
        token_hash: ctx.key.token_hash(Purpose::Server, &token_id),
        created_at: ctx.now,
        metadata_version: 0,
        metadata_body: String::new(),
        published_at: 0,
        last_seen: None,
        addresses: json!({}),
    };
    // Read just before in this transaction, which holds the only writer: it cannot exist.
    ctx.tx.insert_server(&row)?;
    if !ctx.planning() {
        tracing::info!(server, stack = %stack.name, resource = %node.name, "server registered by its stack");
    }
    Ok(token_id)
}

/// The `os_collect_config` attribute: the `os-collect-config` settings Heat's BaseServer writes
/// (`collectors` and one section per collector). For a server the stack created, the
/// `request` collector's URL is its metadata URL with its token (`/v1/metadata/{token}`, as a
/// Swift temp URL carries its signature), from which `bootstrap --from-metadata` configures an
/// agent. For a server registered before, the shim holds only a hash of its token: the URL
/// takes the bearer token `server add` gave, read from `token_file` (docs/templates.md).
fn os_collect_config(server: &str, token_id: Option<&str>) -> Value {
    let request = match token_id {
        Some(id) => json!({"metadata_url": format!("{BASE_URL}/v1/metadata/{}", placeholder(Purpose::Server, id))}),
        None => json!({
            "metadata_url": format!("{BASE_URL}/v1/servers/{server}/metadata"),
            "token_file": AGENT_TOKEN_PATH,
        }),
    };
    json!({"collectors": ["request", "local"], "request": request})
}

/// Revokes the server `node` created (its row and so its token go), unless it is no longer
/// the one created (the operator registered it again or rotated its token: theirs now) or
/// another user remains. Another stack's DeployedServer bound to it takes it over (its
/// removal revokes it then); another stack's deployments alone keep it registered, the
/// operator's to delete. In an update, another DeployedServer of the same stack naming it keeps it.
pub fn revoke(ctx: &mut Context<'_>, stack: &StackRow, node: &NodeRow) -> Result<(), EngineError> {
    let (Some(server), Some(token_id)) = (node.record.id.as_deref(), node.record.server_token.as_deref()) else {
        return Ok(());
    };
    let Some(row) = ctx.tx.server(server)? else { return Ok(()) };
    if row.token_hash != ctx.key.token_hash(Purpose::Server, token_id) {
        return Ok(());
    }
    let others: Vec<String> =
        ctx.tx.stacks_using_server(server)?.into_iter().filter(|other| *other != stack.name).collect();
    if let Some((other_stack, mut heir)) = bound_elsewhere(ctx, &others, server)? {
        heir.record.server_token = Some(token_id.to_owned());
        ctx.tx.update_node(&heir)?;
        if !ctx.planning() {
            tracing::info!(server, stack = %stack.name, heir = %other_stack, "server the stack created handed over");
        }
        return Ok(());
    }
    let kept_here = ctx.tx.stack(&stack.name)?.is_some_and(|current| current.action != Action::Delete)
        && ctx.tx.nodes(&stack.name)?.iter().any(|other| {
            // Its deployments follow their DeployedServer; another DeployedServer naming it keeps it.
            other.name != node.name
                && other.resource_type == ResourceType::DeployedServer.name()
                && other.server.as_deref() == Some(server)
        });
    if !others.is_empty() || kept_here {
        if !ctx.planning() {
            tracing::info!(server, stack = %stack.name, "server the stack created kept: still used");
        }
        return Ok(());
    }
    ctx.tx.delete_server(server)?;
    ctx.revoked_servers.push(server.to_owned());
    if !ctx.planning() {
        tracing::info!(server, stack = %stack.name, "server the stack created revoked");
    }
    Ok(())
}

/// A DeployedServer of one of `stacks` bound to `server`, with its stack's name.
fn bound_elsewhere(
    ctx: &mut Context<'_>,
    stacks: &[String],
    server: &str,
) -> Result<Option<(String, NodeRow)>, EngineError> {
    for stack in stacks {
        let found = ctx.tx.nodes(stack)?.into_iter().find(|other| {
            other.resource_type == ResourceType::DeployedServer.name() && other.record.id.as_deref() == Some(server)
        });
        if let Some(heir) = found {
            return Ok(Some((stack.clone(), heir)));
        }
    }
    Ok(None)
}
