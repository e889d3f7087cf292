//! What a group's members are built from, once per activation: the group's properties without
//! `servers` (each member gets its own `server`), resolved and as written, the config the group
//! deploys, and the nested stack Heat would put the members in. Also what a member's node keeps
//! to tell a later update whether it changes (`applied`), and how that compares with a member
//! written by an older version.

use serde_json::{Map, Value, json};

use crate::engine::context::Context;
use crate::engine::error::EngineError;
use crate::engine::node;
use crate::engine::resources::deployment::stack_path;
use crate::store::{NodeRow, StackRow};
use crate::template::{Policies, ResourceType, value_bytes};

/// What a member's entry holds besides its config and `input_values`: its id, name, group,
/// options, and the `deploy_*` inputs with the signal URL.
const ENTRY_OVERHEAD: usize = 2048;

/// What a group's members are built from, for one activation.
pub(super) struct Members {
    pub(super) kind: ResourceType,
    /// The group's properties as written, without `servers` (each member gets its `server`).
    written: Map<String, Value>,
    /// The same, resolved, and the resolved `servers`.
    resolved: Map<String, Value>,
    pub(super) servers: Map<String, Value>,
    /// The definition of the config the group deploys (part of what a member's change is).
    config: Value,
    /// `config`'s digest: what a member's node keeps of it (see `applied`).
    config_digest: String,
    retain: bool,
    /// The `<name>/<id>` of the group's own nested stack, where Heat puts the members
    /// (`deploy_stack_id`); `None` when the containing stack's path cannot be evaluated.
    member_stack: Option<String>,
    /// About what one member's published entry takes (its config and inputs, each member's
    /// own copy): how many members a transaction can publish within `RELEASE_BYTES`.
    pub(super) entry_bytes: usize,
}

impl Members {
    pub(super) fn new(
        ctx: &mut Context<'_>,
        stack: &StackRow,
        group: &NodeRow,
        properties: &Map<String, Value>,
    ) -> Result<Members, EngineError> {
        let mut written = group.definition.get("properties").and_then(Value::as_object).cloned().unwrap_or_default();
        written.remove("servers");
        let mut resolved = properties.clone();
        let servers = resolved.remove("servers").and_then(|servers| servers.as_object().cloned()).unwrap_or_default();
        let config = match node::referenced_resource(group, "config") {
            Some(config) => ctx.tx.node_shared(&stack.name, &config)?.and_then(|node| node.record.definition.clone()),
            None => None,
        };
        // As build_resource_definition of SoftwareDeploymentGroup and StructuredDeploymentGroup.
        let kind =
            node::resource_type(group).and_then(|kind| kind.group_member()).unwrap_or(ResourceType::SoftwareDeployment);
        let retain = Policies::from_json(group.definition.get("policies")).retain;
        let member_stack = member_stack(ctx, stack, group);
        let config = config.unwrap_or(Value::Null);
        // SHA-256 of the JSON text, hex (`hash_token` is that): stored in member rows, so it
        // must not change between builds or processes (std's hasher may).
        let config_digest = crate::token::hash_token(&config.to_string());
        let inputs = resolved.get("input_values").map_or(0, value_bytes);
        // The deploy_* inputs and the entry's own fields besides the config and its inputs.
        let entry_bytes = value_bytes(&config).saturating_add(inputs).saturating_add(ENTRY_OVERHEAD);
        Ok(Members { kind, written, resolved, servers, config, config_digest, retain, member_stack, entry_bytes })
    }

    /// What decides whether member `key` changes, as its node keeps it: its resolved
    /// definition and the config's digest. Not the config itself: a copy in every member's
    /// row made each of a 10,000-member group's rows as large as its script, written once and
    /// copied at each read.
    pub(super) fn applied(&self, key: &str) -> Value {
        json!({"properties": self.resolved, "server": self.servers.get(key), "config_digest": self.config_digest})
    }

    /// Whether member `key`'s stored `applied` matches what it would get now. A member written
    /// before the digest (its `applied` holds the whole config) compares in that form.
    pub(super) fn unchanged(&self, key: &str, stored: Option<&Value>) -> bool {
        match stored {
            Some(stored) if stored.get("config_digest").is_some() => *stored == self.applied(key),
            Some(stored) => {
                *stored == json!({"properties": self.resolved, "server": self.servers.get(key), "config": self.config})
            }
            None => false,
        }
    }

    /// The same for the whole group: an update whose value differs changes the group's properties.
    pub(super) fn group_applied(&self) -> Value {
        json!({"properties": self.resolved, "servers": self.servers, "config": self.config})
    }

    /// The keys of `batch` that are still members (a batch planned earlier may name one the
    /// servers map no longer has).
    pub(super) fn present(&self, batch: Vec<String>) -> Vec<String> {
        batch.into_iter().filter(|key| self.servers.contains_key(key)).collect()
    }

    pub(super) fn definition(&self, group: &str, key: &str) -> Option<Value> {
        let mut properties = self.written.clone();
        properties.insert("server".into(), self.servers.get(key)?.clone());
        let mut definition = json!({"type": self.kind.name(), "properties": properties, "depends_on": [],
            "member_of": group, "applied": self.applied(key), "group_retain": self.retain});
        if let Some(path) = &self.member_stack {
            // A literal: the stored form of a string is the string.
            definition["stack"] = json!(path);
        }
        Some(definition)
    }
}

/// The group's own nested stack, as Heat names a ResourceGroup's child stack:
/// `<parent name>-<group>-<short id>/<parent id>-<group>` (the short id as for flattened nested
/// stacks, stable across updates). A member's `deploy_stack_id` is this path, as in Heat.
fn member_stack(ctx: &mut Context<'_>, stack: &StackRow, group: &NodeRow) -> Option<String> {
    let parent = stack_path(ctx, stack, group).ok()?;
    let (parent_name, parent_id) = parent.split_once('/')?;
    let local = group.name.rsplit('/').next().unwrap_or(&group.name);
    let short = crate::template::short_id(&stack.id, &group.name);
    Some(format!("{parent_name}-{local}-{short}/{parent_id}-{local}"))
}
