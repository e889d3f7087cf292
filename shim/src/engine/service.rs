//! The engine's `Service` implementation: the operations the HTTP layer calls, each one a
//! transaction (`Engine::transact`) or a read (`Store::read`), with the read models built
//! from stored rows (stack details with evaluated outputs: `detail`; events).

use std::collections::BTreeMap;

use serde_json::{Value, json};
use tokio::sync::watch;

use super::context::{self, Context, now_millis, rfc3339};
use super::detail::{self, OutputContext, summary};
use super::error::EngineError;
use super::node::{self, AfterFailure, status};
use super::requests;
use super::transact::Engine;
use super::traversal::forward;
use super::traversal::reverse;
use super::{failures, plan, removal, signals};
use crate::model::{
    AddServer, Event, Failure, MAX_TOKEN_GRACE_SECS, MetadataDocument, RotatedCredentials, ServerCredentials,
    ServerSummary, Service, ServiceError, SignalAck, StackDetail, StackEnvironment, StackPlan, StackRequest,
    StackSummary, StackTemplate, TokenOwner, WaitConditionSignal,
};
use crate::store::{Action, Rollback, ServerRow, StackRow, State, Store, StoreError};
use crate::template::{self, Constraint, SERVER_CONSTRAINTS, Template};
use crate::token;

/// A custom constraint the shim cannot check (anything but a server one) is accepted with a
/// warning event on the stack, naming the parameter and the constraint.
fn warn_unchecked_constraints(ctx: &mut Context<'_>, stack: &str, template: &Template) -> Result<(), EngineError> {
    for (parameter, declared) in &template.parameters {
        for constraint in &declared.constraints {
            if let Constraint::Custom { name, .. } = constraint
                && !SERVER_CONSTRAINTS.contains(&name.as_str())
            {
                let reason = format!("parameter {parameter}: custom_constraint {name} is not checked by anneal-shim");
                ctx.event(stack, stack, "WARNING", &reason)?;
            }
        }
    }
    Ok(())
}

/// Heat's cancel of a create or update in progress (see `Service::cancel_stack`). Heat takes a
/// cancel with rollback only for an UPDATE; anneal also rolls a CREATE back (it deletes what
/// the create made, as a failed create with rollback does).
fn cancel(ctx: &mut Context<'_>, name: &str, rollback: bool) -> Result<StackRow, EngineError> {
    let Some(stack) = ctx.tx.stack(name)? else {
        return Err(EngineError::NotFound { what: format!("stack {name}") });
    };
    if stack.state != State::InProgress || !matches!(stack.action, Action::Create | Action::Update) {
        return Err(EngineError::InUse {
            message: format!(
                "stack {name} is {}: only a CREATE or UPDATE in progress can be cancelled",
                status(stack.action, stack.state)
            ),
        });
    }
    let reason = format!("Stack {} cancelled", stack.action);
    let after = if rollback { AfterFailure::RollBack } else { AfterFailure::Stop };
    node::fail_stack_then(ctx, name, stack.generation, &reason, after)?;
    Ok(ctx.tx.stack(name)?.unwrap_or(stack))
}

fn valid_name(kind: &str, name: &str) -> Result<(), EngineError> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name.bytes().all(|byte| byte.is_ascii_alphanumeric() || b"._-".contains(&byte))
        && !name.starts_with('.');
    if ok {
        return Ok(());
    }
    Err(EngineError::Invalid {
        message: format!("{kind} name {name:?} must be 1-64 characters of [A-Za-z0-9._-] not starting with '.'"),
    })
}

impl<S: Store> Engine<S> {
    /// What an agent needs to reach this shim as server `name`: its URLs here and at every
    /// other replica the shim was told of.
    fn credentials(&self, name: String, token: String) -> ServerCredentials {
        let base = &self.inner.public_url;
        let metadata_url = format!("{base}/v1/servers/{name}/metadata");
        let mut metadata_urls = vec![metadata_url.clone()];
        metadata_urls
            .extend(self.inner.replica_urls.iter().map(|replica| format!("{replica}/v1/servers/{name}/metadata")));
        ServerCredentials {
            request_url: format!("{base}/v1/metadata/{token}"),
            metadata_url,
            metadata_urls,
            name,
            token,
        }
    }
}

impl<S: Store> Engine<S> {
    /// A stack's detail: its rows read (no write transaction), then, the store released, its
    /// outputs evaluated when `resolve_outputs` (on the blocking pool: they may be large).
    async fn stack_detail(&self, name: &str, resolve_outputs: bool) -> Result<StackDetail, EngineError> {
        let (engine, name) = (self.clone(), name.to_string());
        let work = move || {
            let rows = engine.store().read(|tx| {
                let Some(stack) = tx.stack(&name)? else { return Ok::<_, StoreError>(None) };
                let template = if resolve_outputs { tx.stack_template(&name)? } else { None };
                Ok(Some((stack, tx.nodes(&name)?, template)))
            })?;
            let (stack, nodes, template) =
                rows.ok_or_else(|| EngineError::NotFound { what: format!("stack {name}") })?;
            let inner = &engine.inner;
            let context = OutputContext {
                key: &inner.key,
                public_url: &inner.public_url,
                budget_limit: inner.limits.evaluation_budget,
            };
            Ok(detail::detail(&stack, nodes, template.as_deref(), &context))
        };
        tokio::task::spawn_blocking(work).await.map_err(|error| EngineError::Worker { detail: error.to_string() })?
    }
}

impl<S: Store> Engine<S> {
    /// When each server's agent last asked for metadata: this process's memory of its polls,
    /// else what the store kept (a poll seen by another replica, or before a restart).
    fn last_seen(&self) -> impl Fn(&crate::store::ServerRow) -> Option<u64> {
        let seen = self.inner.last_seen.lock().map(|seen| seen.clone()).unwrap_or_default();
        move |row| seen.get(&row.name).copied().or(row.last_seen)
    }
}

impl<S: Store> Service for Engine<S> {
    async fn add_server(&self, request: AddServer) -> Result<ServerCredentials, ServiceError> {
        valid_name("server", &request.name)?;
        let addresses = template::ServerAddresses::parse(&request.addresses, &request.networks)
            .map_err(|error| EngineError::Invalid { message: format!("server {}: {error}", request.name) })?;
        let token = token::new_token().map_err(|error| ServiceError::Store(Box::new(error)))?;
        let row = ServerRow {
            name: request.name.clone(),
            token_hash: token::hash_token(&token),
            created_at: now_millis(),
            metadata_version: 0,
            metadata_body: String::new(),
            published_at: 0,
            last_seen: None,
            addresses: addresses.to_stored(),
        };
        let inserted = self.transact(move |ctx| Ok(ctx.tx.insert_server(&row)?)).await?;
        if !inserted {
            return Err(ServiceError::Conflict { what: format!("server {}", request.name) });
        }
        // A server of this name may have been removed while one of its documents was being
        // loaded into the cache; the new registration must not be served that old document.
        self.forget_server(&request.name);
        Ok(self.credentials(request.name, token))
    }

    async fn list_servers(&self) -> Result<Vec<ServerSummary>, ServiceError> {
        let rows = self.transact(|ctx| Ok(ctx.tx.servers()?)).await?;
        let last_seen = self.last_seen();
        Ok(rows
            .into_iter()
            .map(|row| ServerSummary {
                last_seen: last_seen(&row).map(rfc3339),
                created_at: rfc3339(row.created_at),
                metadata_version: row.metadata_version,
                name: row.name,
            })
            .collect())
    }

    async fn remove_server(&self, name: &str) -> Result<(), ServiceError> {
        let name = name.to_string();
        let removed = name.clone();
        self.transact(move |ctx| removal::remove(ctx, &name)).await?;
        self.forget_server(&removed);
        tracing::info!(server = %removed, "server removed");
        Ok(())
    }

    async fn server_for_token(&self, token_text: &str) -> Result<Option<String>, ServiceError> {
        Ok(self.token_owner(token_text).await?.filter(|owner| !owner.expired).map(|owner| owner.server))
    }

    async fn token_owner(&self, token_text: &str) -> Result<Option<TokenOwner>, ServiceError> {
        if !token::is_well_formed(token_text) {
            return Ok(None);
        }
        let hash = token::hash_token(token_text);
        // A read, not a transaction: every metadata poll asks, and so may anyone with a made-up token.
        let now = now_millis();
        Ok(self
            .read(move |tx| {
                if let Some(row) = tx.server_by_token_hash(&hash)? {
                    return Ok(Some(TokenOwner { server: row.name, expired: false, grace_ends_at: None }));
                }
                // A replaced token works during its grace period (docs/security.md).
                let previous = tx.server_by_previous_token_hash(&hash)?;
                Ok(previous.map(|(server, expires_at)| TokenOwner {
                    server,
                    expired: now >= expires_at,
                    grace_ends_at: Some(expires_at),
                }))
            })
            .await?)
    }

    async fn rotate_server_token(&self, name: &str, grace_secs: u64) -> Result<RotatedCredentials, ServiceError> {
        if grace_secs > MAX_TOKEN_GRACE_SECS {
            let message = format!("grace_secs is {grace_secs}; the longest grace is {MAX_TOKEN_GRACE_SECS} s");
            return Err(ServiceError::Invalid { message });
        }
        let token = token::new_token().map_err(|error| ServiceError::Store(Box::new(error)))?;
        let (server, hash) = (name.to_string(), token::hash_token(&token));
        let expires_at = self
            .transact(move |ctx| {
                let expires_at = ctx.now.saturating_add(grace_secs.saturating_mul(1000));
                Ok(ctx.tx.rotate_server_token(&server, &hash, expires_at)?.then_some(expires_at))
            })
            .await?
            .ok_or_else(|| ServiceError::NotFound { what: format!("server {name}") })?;
        tracing::info!(server = %name, grace_secs, "server token rotated");
        let credentials = self.credentials(name.to_string(), token);
        Ok(RotatedCredentials { credentials, previous_token_expires_at: rfc3339(expires_at) })
    }

    fn touch_server(&self, name: &str) {
        // Kept in memory: a poll must not cost a store write.
        if let Ok(mut seen) = self.inner.last_seen.lock() {
            seen.insert(name.to_string(), now_millis());
        }
    }

    async fn metadata(&self, server: &str) -> Result<MetadataDocument, ServiceError> {
        Ok(self.load_document(server).await?.0)
    }

    async fn watch_metadata(&self, server: &str) -> Result<watch::Receiver<u64>, ServiceError> {
        Ok(self.load_document(server).await?.1)
    }

    async fn create_stack(&self, request: StackRequest) -> Result<StackSummary, ServiceError> {
        let name =
            request.name.clone().ok_or_else(|| ServiceError::Invalid { message: "the stack needs a name".into() })?;
        valid_name("stack", &name)?;
        let stack = self
            .transact(move |ctx| {
                ctx.refuse_over_budget = true;
                let stack_id = context::new_uuid();
                let checked = requests::check(ctx, &request, &name, &stack_id)?;
                // Stored with the setting in effect, so a rollback knows what to return to.
                let request =
                    StackRequest { disable_rollback: Some(request.disable_rollback.unwrap_or(true)), ..request };
                let stack = forward::create(ctx, &name, &stack_id, &request, &checked)?;
                requests::record(ctx, &name, &request, false)?;
                warn_unchecked_constraints(ctx, &name, &checked.template)?;
                Ok(ctx.tx.stack(&name)?.unwrap_or(stack))
            })
            .await?;
        Ok(summary(&stack))
    }

    async fn update_stack(&self, name: &str, request: StackRequest) -> Result<StackSummary, ServiceError> {
        if request.name.as_deref().is_some_and(|given| given != name) {
            return Err(ServiceError::Invalid {
                message: format!("the body names stack {:?}, the path {name:?}", request.name),
            });
        }
        let name = name.to_string();
        let stack = self
            .transact(move |ctx| {
                ctx.refuse_over_budget = true;
                let Some(existing) = ctx.tx.stack(&name)? else {
                    return Err(EngineError::NotFound { what: format!("stack {name}") });
                };
                let request = requests::with_existing(ctx, &name, request)?;
                let checked = requests::check(ctx, &request, &name, &existing.id)?;
                requests::refuse_immutable_changes(&existing, &checked)?;
                let disable_rollback = request.disable_rollback.unwrap_or(existing.rollback == Rollback::Disabled);
                let request = StackRequest { disable_rollback: Some(disable_rollback), ..request };
                forward::update(ctx, &name, &request, &checked, Action::Update)?;
                requests::record(ctx, &name, &request, true)?;
                Ok(ctx.tx.stack(&name)?.unwrap_or(existing))
            })
            .await?;
        Ok(summary(&stack))
    }

    async fn delete_stack(&self, name: &str) -> Result<StackSummary, ServiceError> {
        let name = name.to_string();
        Ok(summary(&self.transact(move |ctx| reverse::delete(ctx, &name)).await?))
    }

    async fn cancel_stack(&self, name: &str, rollback: bool) -> Result<StackSummary, ServiceError> {
        let name = name.to_string();
        let stack = self.transact(move |ctx| cancel(ctx, &name, rollback)).await?;
        Ok(summary(&stack))
    }

    async fn list_stacks(&self) -> Result<Vec<StackSummary>, ServiceError> {
        Ok(self.transact(|ctx| Ok(ctx.tx.stacks()?)).await?.iter().map(summary).collect())
    }

    async fn show_stack(&self, name: &str) -> Result<StackDetail, ServiceError> {
        Ok(self.stack_detail(name, true).await?)
    }

    async fn show_stack_unresolved(&self, name: &str) -> Result<StackDetail, ServiceError> {
        Ok(self.stack_detail(name, false).await?)
    }

    fn metrics(&self) -> &crate::metrics::Metrics {
        Engine::metrics(self)
    }

    async fn metrics_snapshot(&self) -> Result<crate::metrics::Snapshot, ServiceError> {
        let counts = self
            .read(|tx| {
                let mut stacks: BTreeMap<String, u64> = BTreeMap::new();
                let mut resources: BTreeMap<(String, String), u64> = BTreeMap::new();
                for stack in tx.stacks()? {
                    *stacks.entry(status(stack.action, stack.state)).or_default() += 1;
                    for node in tx.nodes(&stack.name)? {
                        let kind = crate::graph::NodeKind::of(&node.resource_type).as_str().to_string();
                        let phase = super::graph::phase(node.state).as_str().to_string();
                        *resources.entry((kind, phase)).or_default() += 1;
                    }
                }
                Ok((stacks, resources, tx.servers()?))
            })
            .await?;
        let (stacks, resources, rows) = counts;
        let now = now_millis();
        let last_seen = self.last_seen();
        let servers = rows
            .iter()
            .map(|row| (row.name.clone(), last_seen(row).map(|at| now.saturating_sub(at) as f64 / 1000.0)))
            .collect();
        Ok(crate::metrics::Snapshot {
            stacks: stacks.into_iter().collect(),
            resources: resources.into_iter().map(|((kind, phase), count)| (kind, phase, count)).collect(),
            servers,
        })
    }

    async fn node_detail(&self, stack: &str, node: &str) -> Result<crate::graph::NodeDetail, ServiceError> {
        let (stack, node) = (stack.to_string(), node.to_string());
        let detail = self
            .read(move |tx| {
                let Some(stack_row) = tx.stack(&stack)? else { return Ok(None) };
                let Some(node_row) = tx.node(&stack, &node)? else { return Ok(None) };
                let events = tx.events(&stack)?;
                let entry = match &node_row.server {
                    Some(server) => tx.entries(server)?.into_iter().find(|row| row.stack == stack && row.node == node),
                    None => None,
                };
                let entry = entry.map(|row| row.entry);
                let masks = super::hidden::Hidden::new(tx, &stack_row).node(&node_row)?;
                Ok(Some(super::graph::detail(&stack_row, &node_row, entry.as_ref(), &events, &masks, rfc3339)))
            })
            .await?;
        detail.ok_or_else(|| ServiceError::NotFound { what: "resource".into() })
    }

    async fn stack_graph(&self, name: &str) -> Result<crate::graph::StackGraph, ServiceError> {
        let name = name.to_string();
        let graph = self
            .read(move |tx| {
                let Some(stack) = tx.stack(&name)? else { return Ok(None) };
                let nodes = tx.nodes(&name)?;
                let mut edges = Vec::new();
                for node in &nodes {
                    edges.extend(tx.successors(&name, &node.name)?.into_iter().map(|to| (node.name.clone(), to)));
                }
                Ok(Some(super::graph::of_stack(&stack, &nodes, &edges, rfc3339)))
            })
            .await?;
        graph.ok_or_else(|| ServiceError::NotFound { what: "stack".into() })
    }

    fn watch_stack(&self, name: &str) -> watch::Receiver<u64> {
        self.follow_stack(name)
    }

    async fn open_ui_session(&self, key: &str, lifetime_secs: u64) -> Result<(), ServiceError> {
        Ok(self.open_session(key.to_string(), lifetime_secs).await?)
    }

    async fn ui_session_valid(&self, key: &str) -> Result<bool, ServiceError> {
        Ok(self.session_valid(key.to_string()).await?)
    }

    async fn close_ui_session(&self, key: &str) -> Result<bool, ServiceError> {
        Ok(self.close_session(key.to_string()).await?)
    }

    async fn stack_events(&self, name: &str) -> Result<Vec<Event>, ServiceError> {
        let name = name.to_string();
        let rows = self
            .transact(move |ctx| {
                let events = ctx.tx.events(&name)?;
                // Events outlive their stack; a stack re-created under the same name shows only its own.
                let since = ctx.tx.stack(&name)?.map_or(0, |stack| stack.created_at);
                Ok(events.into_iter().filter(|event| event.time >= since).collect::<Vec<_>>())
            })
            .await?;
        if rows.is_empty() {
            return Err(ServiceError::NotFound { what: "stack".into() });
        }
        Ok(rows
            .into_iter()
            .map(|row| Event {
                id: row.id,
                time: rfc3339(row.time),
                resource: row.resource,
                status: row.status,
                reason: row.reason,
            })
            .collect())
    }

    async fn signal_token_known(&self, token_text: &str) -> Result<bool, ServiceError> {
        if !token::is_well_formed(token_text) {
            return Ok(false);
        }
        let hash = token::hash_token(token_text);
        Ok(self
            .read(move |tx| Ok(tx.node_by_signal_hash(&hash)?.is_some() || tx.is_retired_signal_hash(&hash)?))
            .await?)
    }

    async fn deployment_signal(
        &self,
        token_text: &str,
        body: Value,
        signal_id: Option<String>,
    ) -> Result<Option<SignalAck>, ServiceError> {
        let token_text = token_text.to_string();
        let ack = self.transact(move |ctx| signals::apply_deployment_signal(ctx, &token_text, body)).await?;
        if let Some(ack) = ack {
            tracing::debug!(?ack, signal_id = signal_id.as_deref().unwrap_or(""), "deployment signal");
        }
        Ok(ack)
    }

    async fn wait_condition_signal(
        &self,
        token_text: &str,
        signal: WaitConditionSignal,
    ) -> Result<Option<SignalAck>, ServiceError> {
        let token_text = token_text.to_string();
        Ok(self.transact(move |ctx| signals::apply_wait_signal(ctx, &token_text, signal)).await?)
    }

    async fn stack_template(&self, name: &str) -> Result<StackTemplate, ServiceError> {
        let key = name.to_string();
        let (text, sent) = self
            .read(move |tx| {
                let text = tx.stack_template(&key)?;
                let sent = if text.as_deref().is_some_and(crate::template::is_flattened) {
                    tx.stack_requests(&key)?.current
                } else {
                    None
                };
                Ok::<_, StoreError>((text, sent))
            })
            .await?;
        let text = text.ok_or_else(|| ServiceError::NotFound { what: format!("stack {name}") })?;
        if !crate::template::is_flattened(&text) {
            return Ok(StackTemplate { template: text });
        }
        // The expanded form quotes the values nested hidden parameters were given, and is no
        // template a user could send back: the template as sent is served instead (its nested
        // templates are the `files` it was sent with).
        let sent: Option<StackRequest> = sent.and_then(|sent| serde_json::from_str(&sent).ok());
        match sent {
            Some(request) => Ok(StackTemplate { template: request.template }),
            None => Err(ServiceError::InUse {
                message: format!(
                    "stack {name} keeps only the expanded form of its nested stacks and resource groups (it was \
                     last created or updated by anneal-shim 0.2.0 or earlier), so it cannot be printed"
                ),
            }),
        }
    }

    async fn preview_stack(&self, name: Option<&str>, request: StackRequest) -> Result<StackPlan, ServiceError> {
        if let Some(name) = name
            && request.name.as_deref().is_some_and(|given| given != name)
        {
            return Err(ServiceError::Invalid {
                message: format!("the body names stack {:?}, the path {name:?}", request.name),
            });
        }
        if name.is_none() {
            valid_name("stack", request.name.as_deref().unwrap_or_default())?;
        }
        let name = name.map(str::to_string);
        Ok(self.transact_discarded(move |ctx| plan::plan(ctx, name.as_deref(), request)).await?)
    }

    async fn stack_failures(&self, name: &str) -> Result<Vec<Failure>, ServiceError> {
        let key = name.to_string();
        let found = self
            .read(move |tx| {
                let Some(stack) = tx.stack(&key)? else { return Ok::<_, StoreError>(None) };
                let nodes = tx.nodes(&key)?;
                Ok(Some(failures::list(&stack, &nodes)))
            })
            .await?;
        found.ok_or_else(|| ServiceError::NotFound { what: format!("stack {name}") })
    }

    async fn mark_unhealthy(
        &self,
        stack: &str,
        resource: &str,
        reason: Option<String>,
        reset: bool,
    ) -> Result<(), ServiceError> {
        let (stack, resource) = (stack.to_string(), resource.to_string());
        Ok(self.transact(move |ctx| failures::mark_unhealthy(ctx, &stack, &resource, reason, reset)).await?)
    }

    async fn stack_environment(&self, name: &str) -> Result<StackEnvironment, ServiceError> {
        let key = name.to_string();
        let stack = self.read(move |tx| tx.stack(&key)).await?;
        let stack = stack.ok_or_else(|| ServiceError::NotFound { what: format!("stack {name}") })?;
        let values = stack.parameters.as_object().cloned().unwrap_or_default();
        // As `stack show` lists them (`detail`): the pseudo parameters are the engine's, and a
        // hidden value is masked as Heat's `get_environment` masks it.
        let parameters = values
            .into_iter()
            .filter(|(parameter, _)| !parameter.starts_with("OS::"))
            .map(|(parameter, value)| match stack.hidden_parameters.contains(&parameter) {
                true => (parameter, json!("******")),
                false => (parameter, value),
            })
            .collect();
        Ok(StackEnvironment { parameters })
    }
}
