//! OS::Heat::SoftwareDeploymentGroup and StructuredDeploymentGroup: one deployment (a
//! SoftwareDeployment or a StructuredDeployment) per entry of `servers`. When the group
//! activates it expands into member nodes (`<group>/<member>`, ordinary deployments with a literal
//! `server`), each with an edge back to the group, whose counter becomes the number of members.
//! When the last member completes the group activates again and completes with map attributes
//! (`deploy_stdouts`, ..., and each declared output as `{member: value}`), as Heat's group does.

mod members;

use std::collections::HashSet;

use serde_json::{Map, Value, json};

use self::members::Members;
use super::batches;
use super::deployment::deployment_actions;
use crate::engine::context::Context;
use crate::engine::deadlines::Deadline;
use crate::engine::error::EngineError;
use crate::engine::limits::StackActionTimeout;
use crate::engine::node::{self, Released, status};
use crate::store::{Action, NodeRecord, NodeRow, NodeState, StackRow, State};
use crate::template::{Policies, ResourceType};

/// What an activation did, for the traversal to follow. Only a group's activation expands.
#[derive(Debug)]
pub enum Activation {
    /// The node completed, failed or started running; what its completion released.
    Released(Released),
    /// A group expanded: its members are ready, and the members it had before but not now must
    /// be removed (their DELETE actions run).
    Expanded { members: Vec<String>, removed: Vec<NodeRow> },
}

impl From<Released> for Activation {
    fn from(released: Released) -> Activation {
        Activation::Released(released)
    }
}

/// The name of a group's member node.
pub fn member_name(group: &str, member: &str) -> String {
    format!("{group}/{member}")
}

pub use crate::engine::node::group_of;

pub fn activate(
    ctx: &mut Context<'_>,
    stack: &StackRow,
    node: NodeRow,
    properties: &Map<String, Value>,
) -> Result<Activation, EngineError> {
    if node.record.expanded == Some(stack.generation) {
        // A batch completed: pause before the next one, or release it.
        if !node.record.batches.is_empty() {
            return between_batches(ctx, stack, node, properties);
        }
        return finish_group(ctx, stack, node, properties).map(Activation::from);
    }
    let Some(servers) = properties.get("servers").and_then(Value::as_object).cloned() else {
        node::fail(ctx, stack, node, "property servers: must be a map of member name to server")?;
        return Ok(Activation::Released(Released::Nothing));
    };
    if servers.is_empty() {
        return finish_group(ctx, stack, node, properties).map(Activation::from);
    }
    expand(ctx, stack, node, properties)
}

/// Writes the members and returns those of the first batch (ready to activate), with the
/// previous members that are not members any more, for the traversal to remove. The later
/// batches wait in the group's record.
fn expand(
    ctx: &mut Context<'_>,
    stack: &StackRow,
    mut group: NodeRow,
    properties: &Map<String, Value>,
) -> Result<Activation, EngineError> {
    let members = Members::new(ctx, stack, &group, properties)?;
    let keys: Vec<String> = members.servers.keys().cloned().collect();
    // Heat makes the members a nested stack, whose resources count against the stack's limit.
    if let Err(reason) = ctx.count_resources(stack, keys.len()) {
        node::fail(ctx, stack, group, &reason)?;
        return Ok(Activation::Released(Released::Nothing));
    }
    // Each member's entry holds its own copy of the config and inputs: a group whose copies
    // alone pass the stack's limit is refused before any is written.
    let copies = (keys.len() as u64).saturating_mul(members.entry_bytes as u64);
    if !ctx.limits.max_deployment_bytes.allows(copies) {
        let reason = ctx.limits.max_deployment_bytes.exceeded(copies);
        node::fail_over_limit(ctx, stack, group, &reason)?;
        return Ok(Activation::Released(Released::Nothing));
    }
    let names: Vec<String> = keys.iter().map(|key| member_name(&group.name, key)).collect();
    let mut removed = Vec::new();
    // Sets, not the lists: a group of 10,000 members would compare 10^8 names.
    let staying: HashSet<&str> = names.iter().map(String::as_str).collect();
    for gone in group.record.members.iter().filter(|name| !staying.contains(name.as_str())) {
        if let Some(node) = ctx.tx.node(&stack.name, gone)? {
            removed.push(node);
        }
    }
    let (targets, running) = targets(ctx, stack, &group, &members, &keys)?;
    let timeout = timeout_millis(stack, ctx.limits.stack_action_timeout);
    let rollout = Rollout::of(ctx.now, &group, running);
    let (mut batches, pause_millis) = match plan(timeout, &group, &members, &keys, &targets, rollout) {
        Ok(plan) => plan,
        Err(reason) => {
            node::fail(ctx, stack, group, &reason)?;
            return Ok(Activation::Released(Released::Nothing));
        }
    };
    // Members waiting for a later batch keep running what they ran, but already depend on the
    // group, so a delete in between removes them after it. A member node exists only if the
    // last expansion listed it (a member's name holds a '/', which no template resource's
    // can): a create reads none of them.
    let previous: HashSet<&str> = group.record.members.iter().map(String::as_str).collect();
    let mut existing = HashSet::new();
    for name in &names {
        if previous.contains(name.as_str()) && ctx.tx.node(&stack.name, name)?.is_some() {
            ctx.tx.insert_edge(&stack.name, name, &group.name)?;
            existing.insert(name.clone());
        }
    }
    let first = if batches.is_empty() { Vec::new() } else { batches.remove(0) };
    let first = members.present(first);
    let (released, queued) = release(ctx, stack, &group.name, &members, &first, Some(&existing))?;
    ctx.tx.add_pending(&stack.name, names.len() as i64)?;
    group.remaining = first.len() as i64;
    queue(ctx, stack, &mut group, queued, Some(&existing))?;
    group.record.expanded = Some(stack.generation);
    group.record.members = names;
    group.record.applied = Some(members.group_applied());
    group.record.batches = batches;
    group.record.pause_millis = pause_millis;
    // A failure budget counts this traversal's failures only.
    group.record.failed_members.clear();
    group.record.batch = 1;
    // What is left of an earlier rollout's pause comes before the next batch (`between_batches`).
    group.record.pause_until = match rollout {
        Rollout::Pausing { until } => Some(until),
        _ => None,
    };
    group.status_reason = format!("deploying to {} server(s)", keys.len());
    group.state = NodeState::Init;
    group.updated_at = ctx.now;
    ctx.tx.update_node(&group)?;
    ctx.event(&stack.name, &group.name, &status(group.action, State::InProgress), &group.status_reason)?;
    if first.is_empty() {
        // Nothing in the first batch (not expected: it holds every unchanged member and at least
        // one to change): the group itself is ready again, as after a batch that completed.
        return Ok(Activation::Expanded { members: vec![group.name], removed });
    }
    Ok(Activation::Expanded { members: released, removed })
}

/// Where the group's previous rollout stood when this traversal expands it again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Rollout {
    /// Finished (or never started): Heat's batches.
    Settled,
    /// Batches of an earlier update were left, `running` members still run theirs: the rest of
    /// the work is planned afresh from each member's state (`batches::resumed_batches`).
    Unfinished { running: usize },
    /// As `Unfinished`, in a pause between batches that ends at `until`.
    Pausing { until: u64 },
}

impl Rollout {
    fn of(now: u64, group: &NodeRow, running: usize) -> Rollout {
        let left = !group.record.batches.is_empty() || !group.record.queued.is_empty();
        match group.record.pause_until {
            Some(until) if until > now && left => Rollout::Pausing { until },
            _ if left || running > 0 => Rollout::Unfinished { running },
            _ => Rollout::Settled,
        }
    }
}

/// The batches of member keys and the pause between them. One batch of every member unless an
/// update policy applies: `batch_create` when the group is created, `rolling_update` when an
/// update changes the group's properties, or when an update comes during an unfinished rollout
/// (`rollout`). Members that do not change join the first batch (they complete at once,
/// unchanged; one still running waits for its run). Err: Heat's refusal of a plan whose pauses
/// alone reach the stack's timeout (`timeout_millis`).
fn plan(
    timeout_millis: u64,
    group: &NodeRow,
    members: &Members,
    keys: &[String],
    targets: &[batches::Target],
    rollout: Rollout,
) -> Result<(Vec<Vec<String>>, u64), String> {
    let policies = Policies::from_json(group.definition.get("policies"));
    let changed = group.record.applied.as_ref() != Some(&members.group_applied());
    let (batches, batching) = match (group.action, policies.batch_create, policies.rolling_update, rollout) {
        (Action::Create, Some(batching), _, _) => (batches::create_batches(keys, batching.max_batch_size), batching),
        (Action::Update, _, Some(batching), Rollout::Unfinished { .. } | Rollout::Pausing { .. }) => {
            let (running, pause_first) = match rollout {
                Rollout::Unfinished { running } => (running, false),
                _ => (0, true),
            };
            let mut plan = batches::resumed_batches(targets, running, batching.max_batch_size, pause_first);
            plan[0].extend(unchanged_members(targets));
            (plan, batching)
        }
        (Action::Update, _, Some(batching), Rollout::Settled) if changed => {
            let mut plan = batches::rolling_batches(targets, batching.max_batch_size);
            match plan.first_mut() {
                Some(first) => first.extend(unchanged_members(targets)),
                None => plan.push(unchanged_members(targets).collect()),
            }
            (plan, batching)
        }
        _ => return Ok((vec![keys.to_vec()], 0)),
    };
    let pauses = batching.pause_millis.saturating_mul(batches.len().saturating_sub(1) as u64);
    if pauses >= timeout_millis {
        return Err("The current update policy will result in stack update timeout.".into());
    }
    Ok((batches, batching.pause_millis))
}

/// The members that exist and do not change.
fn unchanged_members(targets: &[batches::Target]) -> impl Iterator<Item = String> + '_ {
    targets.iter().filter(|target| target.exists && !target.changed).map(|target| target.key.clone())
}

/// For a rolling update: each member after the update, whether it is a member already and
/// whether its definition changes (the one it last ran against the one it would get now); and
/// how many members still run a run of an earlier traversal.
fn targets(
    ctx: &mut Context<'_>,
    stack: &StackRow,
    group: &NodeRow,
    members: &Members,
    keys: &[String],
) -> Result<(Vec<batches::Target>, usize), EngineError> {
    let rolling = Policies::from_json(group.definition.get("policies")).rolling_update.is_some();
    if !rolling || group.action != Action::Update {
        return Ok((Vec::new(), 0));
    }
    let mut targets = Vec::new();
    let mut running = 0;
    let members_before: HashSet<&str> = group.record.members.iter().map(String::as_str).collect();
    for key in keys {
        let name = member_name(&group.name, key);
        let existing = match members_before.contains(name.as_str()) {
            true => ctx.tx.node(&stack.name, &name)?,
            false => None,
        };
        let changed = existing.as_ref().is_none_or(|node| !members.unchanged(key, node.definition.get("applied")));
        running += usize::from(existing.as_ref().is_some_and(node::is_running));
        targets.push(batches::Target { key: key.clone(), exists: existing.is_some(), changed });
    }
    Ok((targets, running))
}

/// The stack's timeout for this traversal, which Heat's check of an update policy uses. Every
/// traversal has a deadline (its own timeout or `stack_action_timeout`); one stored by an older
/// shim without a deadline gets the default too, as Heat's `Stack.timeout_secs` does.
fn timeout_millis(stack: &StackRow, default: StackActionTimeout) -> u64 {
    stack.deadline.map_or(default.millis(), |deadline| deadline.saturating_sub(stack.updated_at))
}

/// A batch completed (or was empty): pause before the next one, release it, or finish.
fn between_batches(
    ctx: &mut Context<'_>,
    stack: &StackRow,
    mut group: NodeRow,
    properties: &Map<String, Value>,
) -> Result<Activation, EngineError> {
    if group.record.batches.is_empty() {
        return finish_group(ctx, stack, group, properties).map(Activation::from);
    }
    if group.record.pause_millis == 0 {
        return next_batch(ctx, stack, group, properties);
    }
    // An update during an earlier rollout's pause keeps what was left of it.
    let left_over = group.record.pause_until.filter(|until| *until > ctx.now);
    let due_at = left_over.unwrap_or_else(|| ctx.now.saturating_add(group.record.pause_millis));
    group.record.pause_until = Some(due_at);
    Deadline::of_batch_pause(stack, &group.name).set(ctx, due_at)?;
    group.state = NodeState::InProgress;
    group.status_reason = format!(
        "pausing {} s before the next batch ({} to go)",
        due_at.saturating_sub(ctx.now) as f64 / 1000.0,
        group.record.batches.len()
    );
    group.updated_at = ctx.now;
    ctx.tx.update_node_owned(group)?;
    Ok(Activation::Released(Released::Nothing))
}

/// The group's pause ended (its deadline fell due): release the next batch. Nothing when the
/// group is not pausing in the stack's current traversal any more (the stack failed, or an
/// update or delete started since).
pub fn pause_ended(ctx: &mut Context<'_>, stack: &StackRow, name: &str) -> Result<Option<Activation>, EngineError> {
    let Some(group) = ctx.tx.node(&stack.name, name)? else { return Ok(None) };
    let current = group.generation == stack.generation && group.record.expanded == Some(stack.generation);
    let queued = group.state == NodeState::Init && !group.record.queued.is_empty();
    let pausing = group.state == NodeState::InProgress && !group.record.batches.is_empty();
    if stack.state != State::InProgress || !current || !(queued || pausing) {
        return Ok(None);
    }
    let properties = match ctx.evaluate_properties(stack, &group) {
        Ok(properties) => properties,
        Err(error) => {
            node::fail(ctx, stack, group, error.reason())?;
            return Ok(None);
        }
    };
    if queued {
        return continue_release(ctx, stack, group, &properties).map(Some);
    }
    next_batch(ctx, stack, group, &properties).map(Some)
}

/// Releases the next batch (skipping through empty ones, with their pauses).
fn next_batch(
    ctx: &mut Context<'_>,
    stack: &StackRow,
    mut group: NodeRow,
    properties: &Map<String, Value>,
) -> Result<Activation, EngineError> {
    let members = Members::new(ctx, stack, &group, properties)?;
    group.record.pause_until = None;
    group.record.batch += 1;
    let batch = members.present(group.record.batches.remove(0));
    if batch.is_empty() {
        return between_batches(ctx, stack, group, properties);
    }
    let (released, queued) = release(ctx, stack, &group.name, &members, &batch, None)?;
    group.remaining = batch.len() as i64;
    queue(ctx, stack, &mut group, queued, None)?;
    group.state = NodeState::Init;
    group.status_reason = format!("deploying batch of {} member(s)", batch.len());
    group.updated_at = ctx.now;
    ctx.tx.update_node_owned(group)?;
    Ok(Activation::Expanded { members: released, removed: Vec::new() })
}

/// Writes as many members of `keys` as the transaction's `release_budget` has left, and as
/// its `release_bytes` has room for (their entries, the config and inputs copied into each:
/// one member at least while it has any, so a group of large entries goes on one member a
/// transaction), with their new definitions (and their edge to the group); returns their node
/// names, ready to activate, and the keys left for later transactions (see `queue`). `existing`: the members known to
/// have a node already, when the caller has read them (the others are not read again); `None`:
/// read each.
fn release(
    ctx: &mut Context<'_>,
    stack: &StackRow,
    group: &str,
    members: &Members,
    keys: &[String],
    existing: Option<&HashSet<String>>,
) -> Result<(Vec<String>, Vec<String>), EngineError> {
    let per_member = members.entry_bytes.max(1);
    let now = keys.len().min(ctx.release_budget).min(ctx.release_bytes.div_ceil(per_member));
    ctx.release_budget -= now;
    ctx.release_bytes = ctx.release_bytes.saturating_sub(now.saturating_mul(per_member));
    let mut names = Vec::new();
    for key in &keys[..now] {
        let Some(definition) = members.definition(group, key) else { continue };
        let name = member_name(group, key);
        let current = match existing {
            Some(existing) if !existing.contains(&name) => None,
            // Shared: `write_member` makes the one copy it writes.
            _ => ctx.tx.node_shared(&stack.name, &name)?,
        };
        write_member(ctx, stack, &name, current.as_deref(), members.kind, definition)?;
        ctx.tx.insert_edge(&stack.name, &name, group)?;
        names.push(name);
    }
    Ok((names, keys[now..].to_vec()))
}

/// Keeps the members of the current batch that this transaction did not release in the group's
/// record, and sets the group's deadline to now so the sweeper releases them in the next
/// transactions (`continue_release`). A group over thousands of servers thus commits its
/// first members at once, and each later chunk as it is written, instead of holding the store
/// for the whole group while no poll is answered; a restart finds the deadline and goes on.
/// `existing`: the member nodes known to exist, when the caller knows (kept for the queued ones,
/// so the later transactions need not read each member to learn that it is new).
fn queue(
    ctx: &mut Context<'_>,
    stack: &StackRow,
    group: &mut NodeRow,
    queued: Vec<String>,
    existing: Option<&HashSet<String>>,
) -> Result<(), EngineError> {
    if !queued.is_empty() {
        Deadline::of_batch_pause(stack, &group.name).set(ctx, ctx.now)?;
        ctx.continued = true;
    }
    group.record.queued_existing = match existing {
        Some(existing) if !queued.is_empty() => Some(
            queued.iter().map(|key| member_name(&group.name, key)).filter(|name| existing.contains(name)).collect(),
        ),
        _ => None,
    };
    group.record.queued = queued;
    Ok(())
}

/// The sweeper found the group's deadline with members still queued: release the next chunk of
/// them (the batch they belong to is already counted in the group's `remaining`).
fn continue_release(
    ctx: &mut Context<'_>,
    stack: &StackRow,
    mut group: NodeRow,
    properties: &Map<String, Value>,
) -> Result<Activation, EngineError> {
    let members = Members::new(ctx, stack, &group, properties)?;
    let queued = std::mem::take(&mut group.record.queued);
    let existing: Option<HashSet<String>> =
        group.record.queued_existing.take().map(|names| names.into_iter().collect());
    let count = queued.len();
    let keys = members.present(queued);
    // A key that left `servers` since (not expected within one traversal) will never complete:
    // it no longer counts, and the batch may be done without it.
    group.remaining -= (count - keys.len()) as i64;
    if keys.is_empty() && group.remaining <= 0 {
        return between_batches(ctx, stack, group, properties);
    }
    let (released, queued) = release(ctx, stack, &group.name, &members, &keys, existing.as_ref())?;
    queue(ctx, stack, &mut group, queued, existing.as_ref())?;
    group.updated_at = ctx.now;
    ctx.tx.update_node_owned(group)?;
    Ok(Activation::Expanded { members: released, removed: Vec::new() })
}

fn write_member(
    ctx: &mut Context<'_>,
    stack: &StackRow,
    name: &str,
    current: Option<&NodeRow>,
    kind: ResourceType,
    definition: Value,
) -> Result<(), EngineError> {
    match current {
        Some(existing) => {
            let mut existing = node::reset_for_update(existing);
            existing.definition = definition.into();
            existing.resource_type = kind.name().into();
            existing.generation = stack.generation;
            existing.state = NodeState::Init;
            existing.remaining = 0;
            existing.updated_at = ctx.now;
            ctx.tx.update_node(&existing)?;
        }
        None => {
            let node = NodeRow {
                stack: stack.name.clone(),
                name: name.to_string(),
                resource_type: kind.name().into(),
                generation: stack.generation,
                // A member new to the group is created, whatever the group's own action.
                action: Action::Create,
                state: NodeState::Init,
                status_reason: String::new(),
                remaining: 0,
                definition: definition.into(),
                attributes: json!({}).into(),
                record: NodeRecord::default(),
                derived_config_id: None,
                signal_token_hash: None,
                server: None,
                updated_at: ctx.now,
            };
            ctx.tx.insert_node(&node)?;
        }
    }
    Ok(())
}

/// Every member completed: the group's attributes are maps keyed by member name.
fn finish_group(
    ctx: &mut Context<'_>,
    stack: &StackRow,
    mut group: NodeRow,
    properties: &Map<String, Value>,
) -> Result<Released, EngineError> {
    let prefix = format!("{}/", group.name);
    let members = std::mem::take(&mut group.record.members);
    let mut by_member: Vec<(String, Map<String, Value>)> = Vec::new();
    for name in &members {
        let Some(member) = ctx.tx.node(&stack.name, name)? else { continue };
        let key = name.strip_prefix(&prefix).unwrap_or(name).to_string();
        let mut attributes = member.attributes.as_object().cloned().unwrap_or_default();
        // A declared output without a value (NO_SIGNAL) is still an attribute, null.
        for output in member.record.outputs.iter().filter_map(|output| output.get("name")?.as_str()) {
            attributes.entry(output.to_owned()).or_insert(Value::Null);
        }
        by_member.push((key, attributes));
    }
    let failed = std::mem::take(&mut group.record.failed_members);
    let mut attributes = member_maps(&by_member);
    // anneal's extension beside Heat's maps: the members a failure budget tolerated.
    let failed_keys: Vec<&str> = failed.iter().map(|name| name.strip_prefix(&prefix).unwrap_or(name)).collect();
    attributes.insert("failed_members".into(), json!(failed_keys));
    group.attributes = Value::Object(attributes).into();
    let reason = match failed.len() {
        0 => "all members complete".to_string(),
        count => format!(
            "all members done, {count} of {} failed within the failure budget: {}",
            members.len(),
            failed_keys.join(", ")
        ),
    };
    group.record = NodeRecord {
        id: Some(node::stable_id(&group)),
        expanded: Some(stack.generation),
        members,
        actions: deployment_actions(properties),
        applied: group.record.applied.take(),
        failed_members: failed,
        batch: group.record.batch,
        ..NodeRecord::default()
    };
    node::complete(ctx, stack, group, &reason)
}

/// The group's attributes, as SoftwareDeploymentGroup.get_attribute: each member attribute
/// (`deploy_stdout`, ..., any output) as a map keyed by member name, with every member present
/// (null where a member has no value, e.g. a NO_SIGNAL one), under its own name and, for the
/// three `deploy_*` ones, also under the group's plural (`deploy_stdouts`, ...).
fn member_maps(members: &[(String, Map<String, Value>)]) -> Map<String, Value> {
    let mut names: Vec<&str> = vec!["deploy_stdout", "deploy_stderr", "deploy_status_code"];
    for (_, attributes) in members {
        // `_` names stay hidden, as `get_attr` hides them.
        for attribute in attributes.keys().filter(|attribute| !attribute.starts_with('_')) {
            if !names.contains(&attribute.as_str()) {
                names.push(attribute);
            }
        }
    }
    let mut maps = Map::new();
    for attribute in names {
        let map: Map<String, Value> = members
            .iter()
            .map(|(member, attributes)| (member.clone(), attributes.get(attribute).cloned().unwrap_or(Value::Null)))
            .collect();
        let plural = match attribute {
            "deploy_stdout" => Some("deploy_stdouts"),
            "deploy_stderr" => Some("deploy_stderrs"),
            "deploy_status_code" => Some("deploy_status_codes"),
            _ => None,
        };
        if let Some(plural) = plural {
            maps.insert(plural.to_owned(), Value::Object(map.clone()));
        }
        maps.insert(attribute.to_owned(), Value::Object(map));
    }
    maps
}
