//! What one engine operation works with inside its store transaction: the transaction, the
//! token key, the clock, the servers whose documents it changed (republished after commit),
//! what each stack touched has used of its limits (the evaluation budget, its resources) and
//! the `Scope` that resolves `get_param`, `get_resource` and `get_attr` from stored nodes (and
//! refuses, with Heat's text, a deployment's attribute its config does not declare).

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use serde_json::{Map, Value};

use super::error::EngineError;
use super::hidden::{Hidden, WITHHELD};
use super::limits::Limits;
use super::secrets::TokenKey;
use crate::store::{EntryText, NodeRow, NodeState, StackRow, Tx};
use crate::template::{Budget, EvalError, Expr, ResourceType, Scope};

/// The entries of one server a transaction wrote (`Some`, as written) or removed (`None`), by
/// (stack, node); the last change of an entry wins.
pub type Changes = BTreeMap<(String, String), Option<EntryText>>;

/// Attribute names `get_attr` never shows (the engine's own bookkeeping is in `NodeRow::record`;
/// an output a config declares with such a name stays hidden as it always was).
const PRIVATE_PREFIX: &str = "_";

pub struct Context<'a> {
    pub tx: &'a mut dyn Tx,
    pub key: &'a TokenKey,
    pub public_url: &'a str,
    pub now: u64,
    /// Servers whose deployment entries changed (their documents get a new version), with
    /// which entries, as (stack, node), and each one's text as written (`None`: removed): a
    /// server whose cached document is current gets only these rendered, from memory
    /// (`transact::publish_documents`).
    pub changed_entries: BTreeMap<String, Changes>,
    /// Handles whose token placeholders the evaluations since `evaluate_properties` began
    /// placed in their values (through `get_attr` on the handle, or on a config that carries
    /// them): the tokens a value built from them may render (see `secrets`).
    pub placed_handles: BTreeSet<String>,
    /// How many more members of deployment groups this transaction may write (the rest are
    /// queued for the next ones): one budget however many groups the transaction expands.
    pub release_budget: usize,
    /// How many more bytes of group members' entries this transaction may publish
    /// (`RELEASE_BYTES`): with a large config, fewer members than `release_budget` per
    /// transaction, so that one transaction never holds thousands of copies of it.
    pub release_bytes: usize,
    /// Set when this transaction queued group members for the sweeper to release next.
    pub continued: bool,
    /// The limits every stack's traversal is held to.
    pub limits: Limits,
    /// What each stack touched so far has used of its limits, written back at the end
    /// (`write_usage`).
    pub usage: BTreeMap<String, Usage>,
    /// What each stack touched has published to servers' documents, in bytes, as counted since
    /// read (`published`).
    pub published: BTreeMap<String, u64>,
    /// What earlier calls of this process counted (`Engine`'s `entry_bytes`): read instead of
    /// a sum when this call has counted nothing yet for a stack.
    pub known_entry_bytes: Option<&'a std::sync::Mutex<std::collections::HashMap<String, u64>>>,
    /// An evaluation over the budget refuses the whole call (a create or update, whose
    /// request is still open) instead of failing the resource (a signal's, a sweep's).
    pub refuse_over_budget: bool,
    /// Servers this transaction deleted (a stack's created servers it revoked): after the
    /// commit, memory forgets their documents, which ends the long-polls held on them.
    pub revoked_servers: Vec<String>,
    /// When a plan is being computed (`plan`): every entry written, in order.
    pub publications: Option<Vec<Publication>>,
}

impl Context<'_> {
    /// Whether this transaction computes a plan (and will be discarded): what it does is not
    /// logged as done.
    pub fn planning(&self) -> bool {
        self.publications.is_some()
    }
}

/// An entry a plan's transaction wrote, with the one it replaced.
#[derive(Debug, Clone)]
pub struct Publication {
    pub stack: String,
    pub node: String,
    pub server: String,
    pub entry: Value,
    pub previous: Option<Value>,
}

/// What one stack's current traversal has used of its limits, as this call sees it.
#[derive(Debug)]
pub struct Usage {
    generation: u64,
    budget: Budget,
    resources: u64,
    changed: bool,
}

/// Why a node's properties could not be evaluated.
#[derive(Debug, Clone, PartialEq)]
pub enum PropertiesError {
    /// The resource fails with this reason.
    Failed(String),
    /// The stack's evaluation budget ran out: the reason names it.
    OverBudget(String),
}

impl PropertiesError {
    pub fn reason(&self) -> &str {
        match self {
            PropertiesError::Failed(reason) | PropertiesError::OverBudget(reason) => reason,
        }
    }
}

impl Context<'_> {
    pub(super) fn changed(&mut self, server: &str, stack: &str, node: &str, text: Option<EntryText>) {
        let changes = self.changed_entries.entry(server.to_string()).or_default();
        changes.insert((stack.to_string(), node.to_string()), text);
    }

    pub fn event(&mut self, stack: &str, resource: &str, status: &str, reason: &str) -> Result<(), EngineError> {
        if self.planning() {
            // Rolled back and never read in a plan: two per member of a large group add up.
            return Ok(());
        }
        self.tx.append_event(stack, self.now, resource, status, reason)?;
        Ok(())
    }

    /// Evaluates `expression` against the stack's parameters and nodes, charged to the
    /// stack's evaluation budget. The handles it reads through are added to `placed_handles`.
    pub fn evaluate(&mut self, stack: &StackRow, expression: &Expr) -> Result<Value, EvalError> {
        let usage = usage_of(&mut self.usage, stack, self.limits.evaluation_budget);
        let before = usage.budget.used();
        let tx = RefCell::new(&mut *self.tx);
        let lookup = |name: &str| tx.borrow_mut().node_shared(&stack.name, name).ok().flatten();
        let scope = StackScope::new(stack, &lookup, Some(&usage.budget));
        let value = expression.evaluate(&scope);
        usage.changed |= usage.budget.used() != before;
        self.placed_handles.extend(scope.placed.into_inner());
        value
    }

    /// Charges `value`, which a resource produced without an expression (a MultipartMime's
    /// message), to the stack's evaluation budget as an evaluation's result is charged.
    pub fn charge(&mut self, stack: &StackRow, value: &Value) -> Result<(), EvalError> {
        let usage = usage_of(&mut self.usage, stack, self.limits.evaluation_budget);
        usage.budget.charge_value(value)?;
        usage.changed = true;
        Ok(())
    }

    /// Evaluates a node's stored properties into a JSON object; `placed_handles` then holds
    /// the handles placed in them.
    pub fn evaluate_properties(
        &mut self,
        stack: &StackRow,
        node: &NodeRow,
    ) -> Result<Map<String, Value>, PropertiesError> {
        self.placed_handles.clear();
        let mut values = Map::new();
        let Some(properties) = node.definition.get("properties").and_then(Value::as_object) else {
            return Ok(values);
        };
        for (name, stored) in properties {
            let expression = Expr::from_json(stored)
                .map_err(|error| PropertiesError::Failed(format!("property {name}: {error}")))?;
            match self.evaluate(stack, &expression) {
                Ok(value) => {
                    values.insert(name.clone(), value);
                }
                Err(EvalError::NotReady { resource, attribute }) => {
                    let what = attribute.map_or(resource.clone(), |attribute| format!("{resource}.{attribute}"));
                    return Err(PropertiesError::Failed(format!("property {name}: {what} has no value")));
                }
                Err(EvalError::HiddenInvalid { message }) => {
                    return Err(PropertiesError::Failed(format!("property {name}: {message}")));
                }
                Err(EvalError::Invalid { message }) => {
                    // A store error while deciding counts as hidden: withheld rather than shown.
                    let hidden = Hidden::new(&mut *self.tx, stack).expression(&expression).unwrap_or(true);
                    let shown = if hidden { WITHHELD } else { message.as_str() };
                    return Err(PropertiesError::Failed(format!("property {name}: {shown}")));
                }
                Err(error @ EvalError::OverBudget { .. }) => {
                    return Err(PropertiesError::OverBudget(format!("property {name}: {error}")));
                }
            }
        }
        Ok(values)
    }

    /// Counts `added` more resources (a deployment group's members) in the stack's traversal;
    /// refused, with Heat's reason, past `max_resources_per_stack`.
    pub fn count_resources(&mut self, stack: &StackRow, added: usize) -> Result<(), String> {
        let usage = usage_of(&mut self.usage, stack, self.limits.evaluation_budget);
        let total = usage.resources.saturating_add(added as u64);
        let count = usize::try_from(total).unwrap_or(usize::MAX);
        if !self.limits.max_resources.allows(count) {
            return Err(self.limits.max_resources.exceeded(Some(count)));
        }
        usage.resources = total;
        usage.changed = true;
        Ok(())
    }

    /// Writes what the stacks' traversals used in this call to their rows (one UPDATE each,
    /// which carries the pending count the call changed too); a stack whose traversal changed
    /// since (an update, a delete) or that is gone keeps what it has.
    pub fn write_usage(&mut self) -> Result<(), EngineError> {
        for (name, usage) in std::mem::take(&mut self.usage) {
            if !usage.changed {
                continue;
            }
            let Some(mut row) = self.tx.stack(&name)? else { continue };
            if row.generation != usage.generation {
                continue;
            }
            row.evaluated_bytes = usage.budget.used() as u64;
            row.resource_count = usage.resources;
            self.tx.update_stack(&row)?;
        }
        Ok(())
    }
}

/// `stack`'s usage in `usage`, read from its row the first time (or when its traversal is
/// newer than the one recorded).
fn usage_of<'u>(usage: &'u mut BTreeMap<String, Usage>, stack: &StackRow, limit: usize) -> &'u mut Usage {
    let fresh = || Usage {
        generation: stack.generation,
        budget: Budget::spent(limit, usize::try_from(stack.evaluated_bytes).unwrap_or(usize::MAX)),
        resources: stack.resource_count,
        changed: false,
    };
    let entry = usage.entry(stack.name.clone()).or_insert_with(fresh);
    if entry.generation != stack.generation {
        *entry = fresh();
    }
    entry
}

/// What the stack's current traversal may still produce: the outputs of a `show` are
/// evaluated within it (each read anew, nothing of it kept).
pub fn remaining_budget(stack: &StackRow, limit: usize) -> Budget {
    Budget::spent(limit, usize::try_from(stack.evaluated_bytes).unwrap_or(usize::MAX))
}

/// A stack's node by name, as the scope reads it.
pub type NodeLookup<'a> = dyn Fn(&str) -> Option<Arc<NodeRow>> + 'a;

/// Resolves functions from stored state. A node's attributes are visible once it is COMPLETE.
pub struct StackScope<'a> {
    lookup: &'a NodeLookup<'a>,
    stack: &'a StackRow,
    /// The handles whose placeholders the values read carry (see `Context::placed_handles`).
    pub placed: RefCell<BTreeSet<String>>,
    /// The token ids of the servers whose `os_collect_config` the values read carry (a server
    /// a stack created): only an answer to the admin renders them (`detail`).
    pub placed_servers: RefCell<BTreeSet<String>>,
    budget: Option<&'a Budget>,
}

impl<'a> StackScope<'a> {
    /// The stack's scope with its nodes read through `lookup`, charged to `budget`.
    pub fn new(stack: &'a StackRow, lookup: &'a NodeLookup<'a>, budget: Option<&'a Budget>) -> StackScope<'a> {
        StackScope { lookup, stack, placed: RefCell::default(), placed_servers: RefCell::default(), budget }
    }

    fn complete_node(&self, resource: &str) -> Option<Arc<NodeRow>> {
        let node = (self.lookup)(resource)?;
        // Completed in this traversal, or in an earlier one and not reached by this one yet (as
        // Heat keeps a resource's attributes until it is updated).
        let readable = node.state == NodeState::Complete
            || (node.state == NodeState::Init && node.record.previous_status.is_some());
        readable.then_some(node)
    }
}

impl Scope for StackScope<'_> {
    fn parameter(&self, name: &str) -> Option<Value> {
        self.stack.parameters.get(name).cloned()
    }

    fn resource_id(&self, resource: &str) -> Option<Value> {
        // A handle's or config's id exists from activation on; a deployment's too.
        let node = (self.lookup)(resource)?;
        node.record.id.clone().map(Value::String)
    }

    fn attribute(&self, resource: &str, attribute: &str) -> Option<Value> {
        if attribute.starts_with(PRIVATE_PREFIX) {
            return None;
        }
        let node = self.complete_node(resource)?;
        let mut placed = self.placed.borrow_mut();
        // Every attribute of a handle carries its placeholder; a config's carries those its
        // definition placed. Other attributes hold supplied values, never a placed token.
        if node.resource_type == ResourceType::WaitConditionHandle.name() {
            placed.extend(node.record.id.clone());
        }
        placed.extend(node.record.placed_handles.iter().cloned());
        if attribute == "os_collect_config" {
            self.placed_servers.borrow_mut().extend(node.record.server_token.clone());
        }
        let absent = match ResourceType::parse(&node.resource_type) {
            // A group without members answers an empty map for any attribute: Heat's
            // SoftwareDeploymentGroup collects it over no member (ResourceGroup.get_attribute).
            Some(kind) if kind.group_member().is_some() && node.record.members.is_empty() => Value::Object(Map::new()),
            _ => Value::Null,
        };
        Some(node.attributes.get(attribute).cloned().unwrap_or(absent))
    }

    fn attribute_refusal(&self, resource: &str, attribute: &str, path: &[Value]) -> Option<String> {
        let node = self.complete_node(resource)?;
        let kind = ResourceType::parse(&node.resource_type)?;
        let refused = match kind.group_member() {
            _ if !kind.is_deployment() => false,
            // What its members refuse (alike: one config); with none there is nothing to refuse.
            Some(_) => {
                node.attributes.get(attribute).is_none()
                    && node
                        .record
                        .members
                        .first()
                        .and_then(|member| (self.lookup)(member))
                        .is_some_and(|member| refuses(&member, attribute))
            }
            None => refuses(&node, attribute),
        };
        refused.then(|| invalid_attribute(resource, attribute, path))
    }

    fn resource_type(&self, resource: &str) -> Option<ResourceType> {
        ResourceType::parse(&self.complete_node(resource)?.resource_type)
    }

    fn budget(&self) -> Option<&Budget> {
        self.budget
    }
}

/// The attributes every deployment has (heat.engine.resources.openstack.heat.
/// software_deployment.SoftwareDeployment.ATTRIBUTES).
const DEPLOYMENT_ATTRIBUTES: [&str; 3] = ["deploy_stdout", "deploy_stderr", "deploy_status_code"];

/// Whether a deployment refuses `attribute`: neither one every deployment has nor an output its
/// config declares. Its declarations are recorded when it is activated; a deployment an earlier
/// version completed without publishing (its action not among its `actions`) recorded none,
/// so what it declares is unknown and nothing is refused.
fn refuses(node: &NodeRow, attribute: &str) -> bool {
    let recorded = !node.record.outputs.is_empty() || node.derived_config_id.is_some();
    let declared =
        node.record.outputs.iter().any(|output| output.get("name").and_then(Value::as_str) == Some(attribute));
    recorded && !declared && !DEPLOYMENT_ATTRIBUTES.contains(&attribute)
}

/// Heat's text for an attribute a deployment refuses: its signal keeps only the outputs the
/// config declares (heat.engine.service_software_config.signal_software_deployment) and
/// SoftwareDeployment.get_attribute raises InvalidTemplateAttribute for any other name, which
/// the resource's node data leaves out, so reading it raises that error again
/// (heat.engine.stk_defn.ResourceProxy.FnGetAtt) with the key it was read by: the attribute,
/// or with a path the Python tuple `(attribute, *path)`. The resource is named as in its own
/// (nested) stack.
fn invalid_attribute(resource: &str, attribute: &str, path: &[Value]) -> String {
    let name = resource.rsplit('/').next().unwrap_or(resource);
    let key = if path.is_empty() {
        attribute.to_owned()
    } else {
        let component = |value: &Value| match value {
            Value::String(text) => python_string_repr(text),
            other => anneal_protocol::pyjson::python_str(other),
        };
        let items: Vec<String> =
            std::iter::once(python_string_repr(attribute)).chain(path.iter().map(component)).collect();
        format!("({})", items.join(", "))
    };
    format!("The Referenced Attribute ({name} {key}) is incorrect.")
}

/// Python's `repr()` of a string: single quotes unless it holds one and no double quote, the
/// usual escapes, control characters as `\xNN` (other characters as they are).
fn python_string_repr(text: &str) -> String {
    let quote = if text.contains('\'') && !text.contains('"') { '"' } else { '\'' };
    let mut repr = String::with_capacity(text.len() + 2);
    repr.push(quote);
    for character in text.chars() {
        match character {
            '\\' => repr.push_str("\\\\"),
            '\n' => repr.push_str("\\n"),
            '\r' => repr.push_str("\\r"),
            '\t' => repr.push_str("\\t"),
            _ if character == quote => {
                repr.push('\\');
                repr.push(character);
            }
            _ if character < ' ' || ('\u{7f}'..='\u{9f}').contains(&character) => {
                repr.push_str(&format!("\\x{:02x}", u32::from(character)));
            }
            _ => repr.push(character),
        }
    }
    repr.push(quote);
    repr
}

/// A random UUID (version 4), as Heat's ids are.
pub fn new_uuid() -> String {
    use rand::RngCore;
    thread_local! {
        // Seeded once per thread: seeding on every id cost a getrandom call and a cipher
        // set-up per deployment (10,000 of them in one group's activation).
        static IDS: std::cell::RefCell<rand::rngs::StdRng> =
            std::cell::RefCell::new(rand::rngs::StdRng::from_os_rng_or_seed());
    }
    let mut bytes = [0u8; 16];
    IDS.with(|rng| rng.borrow_mut().fill_bytes(&mut bytes));
    bytes[6] = (bytes[6] & 0x0f) | 0x40;
    bytes[8] = (bytes[8] & 0x3f) | 0x80;
    let hex = crate::token::hex(&bytes);
    format!("{}-{}-{}-{}-{}", &hex[0..8], &hex[8..12], &hex[12..16], &hex[16..20], &hex[20..32])
}

/// Seeds from the OS, falling back to the clock (ids need uniqueness, not secrecy).
trait FromOsRngOrSeed {
    fn from_os_rng_or_seed() -> Self;
}

impl FromOsRngOrSeed for rand::rngs::StdRng {
    fn from_os_rng_or_seed() -> Self {
        use rand::SeedableRng;
        rand::rngs::StdRng::try_from_os_rng().unwrap_or_else(|_| {
            let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
            rand::rngs::StdRng::seed_from_u64(nanos as u64 ^ u64::from(std::process::id()))
        })
    }
}

/// Milliseconds since the Unix epoch.
pub fn now_millis() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |elapsed| elapsed.as_millis() as u64)
}

/// RFC 3339 UTC (`2026-11-21T05:00:00Z`) for API times and Heat's `creation_time`.
pub use crate::dates::rfc3339;

/// An HTTP date (RFC 7231 IMF-fixdate) of unix milliseconds, for `Last-Modified`.
pub fn http_date(millis: u64) -> String {
    crate::dates::format_http_date(millis / 1000)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(1_779_339_600_000), "2026-05-21T05:00:00Z");
        assert_eq!(http_date(784_111_777_000), "Sun, 06 Nov 1994 08:49:37 GMT");
    }

    #[test]
    fn uuids_are_version_4() {
        let id = new_uuid();
        assert_eq!(id.len(), 36);
        assert_eq!(&id[14..15], "4");
        assert_ne!(id, new_uuid());
    }
}
