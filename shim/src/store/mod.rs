//! The durable truth of the shim: servers and their materialised metadata documents, stacks,
//! graph nodes and edges, released document entries, wait-condition signals, events and
//! deadlines. `Store` runs work in one transaction; `Tx` is the vocabulary of reads and writes
//! inside it. `SqliteStore` is the embedded backend. This module makes no decisions (that is
//! the engine's job) and holds no state outside the database.
//!
//! Keys: child rows (`NodeRow::stack`, `EntryRow::stack`, ...) name their stack by its *name*,
//! which is what `delete_stack` cascades on. Events are keyed the same way but outlive the stack.
//! Parents are written first: a node, edge, wait signal or deadline needs its stack, an entry its
//! server and stack (foreign keys, checked per statement).

mod cache;
mod dispatch;
mod postgres;
mod shared;
mod sqlite;

#[cfg(test)]
mod tests;

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use crate::model::{Action, State};
pub use postgres::PgStore;
/// The statement a signal's token is looked up with on PostgreSQL, for the test of its plan.
#[doc(hidden)]
pub const POSTGRES_NODE_BY_SIGNAL_HASH: &str = postgres::NODE_BY_SIGNAL_HASH;
pub use shared::Shared;
pub use sqlite::{BATCH_LIMIT, SqliteStore};

/// Where a node is in its current traversal. `Init`: written by the plan, not yet activated
/// (its predecessors are not all complete); the others are Heat's states of the node's action.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeState {
    Init,
    InProgress,
    Complete,
    Failed,
}

impl NodeState {
    pub const ALL: [NodeState; 4] = [NodeState::Init, NodeState::InProgress, NodeState::Complete, NodeState::Failed];

    pub fn as_str(self) -> &'static str {
        match self {
            NodeState::Init => "INIT",
            NodeState::InProgress => "IN_PROGRESS",
            NodeState::Complete => "COMPLETE",
            NodeState::Failed => "FAILED",
        }
    }

    pub fn parse(text: &str) -> Option<NodeState> {
        NodeState::ALL.into_iter().find(|state| state.as_str() == text)
    }
}

impl fmt::Display for NodeState {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(self.as_str())
    }
}

/// What a failed create or update of the stack does (Heat's `disable_rollback`, plus the
/// moment between the failure and the rollback's start).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rollback {
    /// `disable_rollback: true` (Heat's default): a failure stays FAILED.
    Disabled,
    /// A failure starts a rollback.
    Enabled,
    /// The current traversal failed (or was cancelled) and its rollback is due: the sweeper
    /// starts it (the stack's deadline row for that generation, due at once, wakes it).
    Due,
}

impl Rollback {
    pub const ALL: [Rollback; 3] = [Rollback::Disabled, Rollback::Enabled, Rollback::Due];

    pub fn as_str(self) -> &'static str {
        match self {
            Rollback::Disabled => "disabled",
            Rollback::Enabled => "enabled",
            Rollback::Due => "due",
        }
    }

    pub fn parse(text: &str) -> Option<Rollback> {
        Rollback::ALL.into_iter().find(|rollback| rollback.as_str() == text)
    }

    /// The setting a request's `disable_rollback` names.
    pub fn from_disable(disable_rollback: bool) -> Rollback {
        if disable_rollback { Rollback::Disabled } else { Rollback::Enabled }
    }

    /// Heat's `disable_rollback` for this setting.
    pub fn disabled(self) -> bool {
        self == Rollback::Disabled
    }
}

/// The create or update requests of a stack as sent (the API's JSON body, `model::StackRequest`),
/// kept beside its template: `current` started its current traversal, `previous` the one before
/// (what a rollback converges back to). Both `None` for a stack stored before schema 11 (SQLite)
/// or 5 (PostgreSQL).
#[derive(Clone, Default, PartialEq)]
pub struct StoredRequests {
    pub current: Option<String>,
    pub previous: Option<String>,
}

impl fmt::Debug for StoredRequests {
    /// Only the sizes: a request carries parameter values, hidden ones among them.
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter
            .debug_struct("StoredRequests")
            .field("current_bytes", &self.current.as_ref().map(String::len))
            .field("previous_bytes", &self.previous.as_ref().map(String::len))
            .finish()
    }
}

/// A registered server and its current metadata document.
#[derive(Clone, PartialEq)]
pub struct ServerRow {
    pub name: String,
    pub token_hash: String,
    pub created_at: u64,
    pub metadata_version: u64,
    /// The JSON document served to the agent. It carries deployment inputs and signal URLs
    /// (secrets), so `Debug` shows only its length.
    pub metadata_body: String,
    pub published_at: u64,
    pub last_seen: Option<u64>,
    /// What `server add` registered of its addresses: `{"addresses": [ip...], "networks":
    /// {net: [ip...]}}` (the engine's `ServerAddresses`); `{}` for none.
    pub addresses: serde_json::Value,
}

#[derive(Clone, PartialEq)]
pub struct StackRow {
    pub id: String,
    pub name: String,
    pub action: Action,
    pub state: State,
    pub status_reason: String,
    /// Resolved parameter values, a JSON object. `Debug` masks the ones named in
    /// `hidden_parameters`.
    pub parameters: Value,
    pub hidden_parameters: Vec<String>,
    pub generation: u64,
    pub pending: i64,
    pub deadline: Option<u64>,
    pub created_at: u64,
    pub updated_at: u64,
    /// What the current traversal's evaluations produced so far (the evaluation budget's
    /// spent part; the nested stacks' copies count from the start).
    pub evaluated_bytes: u64,
    /// The current traversal's resources, deployment group members included once their group
    /// expanded (counted against max_resources_per_stack).
    pub resource_count: u64,
    pub rollback: Rollback,
}

#[derive(Debug, Clone, PartialEq)]
pub struct NodeRow {
    pub stack: String,
    pub name: String,
    pub resource_type: String,
    pub generation: u64,
    pub action: Action,
    pub state: NodeState,
    pub status_reason: String,
    pub remaining: i64,
    pub definition: Shared,
    /// What `get_attr` shows once the node is COMPLETE (a JSON object).
    pub attributes: Shared,
    /// What the engine keeps about the node for itself; never visible through `get_attr`.
    pub record: NodeRecord,
    pub derived_config_id: Option<String>,
    pub signal_token_hash: Option<String>,
    pub server: Option<String>,
    pub updated_at: u64,
}

/// How a deployment's last run ended, as its signal said.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum RunOutcome {
    #[serde(rename = "COMPLETE")]
    Complete,
    #[serde(rename = "FAILED")]
    Failed,
}

/// The engine's private bookkeeping of a node, stored as one JSON column (`nodes.record`). Each
/// field is kept by the resource types that need it; absent fields take their defaults.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct NodeRecord {
    /// The resource's physical id (`get_resource`), stable across traversals.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// A config's definition, as `ConfigDefinition::to_json` writes it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub definition: Option<Value>,
    /// A deployment's `replace_on_change` input values at its last publication.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replace_values: Option<Value>,
    /// A deployment's (or group's) `actions` property.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub actions: Vec<String>,
    /// The fingerprint of a deployment's last published entry (see `derived::fingerprint`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fingerprint: Option<String>,
    /// The output declarations of a deployment's last publication.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub outputs: Vec<Value>,
    /// How the last published run ended; `None` while it runs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub outcome: Option<RunOutcome>,
    /// Whether the node ever completed (an update then UPDATEs it instead of creating it).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub completed_once: bool,
    /// A wait condition's handle and the number of signals it waits for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub handle: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub count: Option<u64>,
    /// A deployment group: the generation it last expanded in, and its member nodes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expanded: Option<u64>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub members: Vec<String>,
    /// A config's handles whose token placeholders its definition carries (from `get_attr` on
    /// them): the deployments publishing it may render those tokens (see docs/security.md).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub placed_handles: Vec<String>,
    /// A handle's count of distinct signal ids received, kept so a signal need not count the
    /// earlier rows; `None` on a handle stored before it was kept (counted once, then kept).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signals: Option<u64>,
    /// Of those, the ids whose latest signal is a FAILURE (kept beside `signals`).
    #[serde(skip_serializing_if = "is_zero")]
    pub failures: u64,
    /// A deployment group: its resolved properties (and its config's definition) when it last
    /// expanded, which a rolling update compares against.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub applied: Option<Value>,
    /// A deployment group with an update policy: the member keys of each batch not yet released,
    /// in order, and the pause before each (see engine/resources/group.rs).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub batches: Vec<Vec<String>>,
    #[serde(skip_serializing_if = "is_zero")]
    pub pause_millis: u64,
    /// A node a new traversal reset that completed in an earlier one: that status (e.g.
    /// `CREATE_COMPLETE`), shown, and its attributes still read, until the new traversal reaches
    /// it, as Heat shows a resource an update has not reached yet.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous_status: Option<String>,
    /// A deployment group with a failure budget: the members that failed in this traversal
    /// within it (node names, in the order they failed).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failed_members: Vec<String>,
    /// A deployment group: the batch being released (1 for the first), counted up as each
    /// next batch is released.
    #[serde(default, skip_serializing_if = "is_zero_u32")]
    pub batch: u32,
    /// A deployment group pausing between batches: when the pause ends (unix milliseconds). An
    /// update during the pause keeps what is left of it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pause_until: Option<u64>,
    /// A deployment group: the member keys of the batch being released that are not written
    /// yet; the sweeper writes them a chunk per transaction (see engine/resources/group.rs).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub queued: Vec<String>,
    /// Of those, the member nodes that exist already, when the expansion knew (`None`: read
    /// each one before writing it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queued_existing: Option<Vec<String>>,
    /// An `OS::Heat::DeployedServer` that created its server (none was registered under the
    /// name): the id its token is derived from (`secrets::Purpose::Server`). Deleting the node
    /// revokes that server; `None` when it bound to a server registered before.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_token: Option<String>,
}

fn is_zero_u32(value: &u32) -> bool {
    *value == 0
}

fn is_zero(value: &u64) -> bool {
    *value == 0
}

/// One released deployment in a server's metadata document.
#[derive(Clone, PartialEq)]
pub struct EntryRow {
    pub server: String,
    pub stack: String,
    pub node: String,
    pub sort_key: String,
    /// Holds inputs and the signal URL (secrets), so `Debug` elides it.
    pub entry: Value,
    /// The token placeholders the engine placed in `entry` (`signal:<id>`, `handle:<id>`):
    /// rendering substitutes these and no others (see docs/security.md).
    pub tokens: Vec<String>,
}

/// An entry as stored JSON text with its placed tokens: what a document is rendered from,
/// with the key that places it in the document (`sort_key`, then `stack`, then `node`).
#[derive(Clone, PartialEq)]
pub struct EntryText {
    pub sort_key: String,
    pub stack: String,
    pub node: String,
    pub entry: String,
    pub tokens: Vec<String>,
}

impl EntryText {
    /// `row` with its entry as the JSON text stored.
    pub fn of(row: &EntryRow) -> Result<EntryText, StoreError> {
        Ok(EntryText {
            sort_key: row.sort_key.clone(),
            stack: row.stack.clone(),
            node: row.node.clone(),
            entry: serde_json::to_string(&row.entry)
                .map_err(|source| StoreError::Encode { column: "entries.entry", source })?,
            tokens: row.tokens.clone(),
        })
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct WaitSignalRow {
    pub stack: String,
    pub handle: String,
    pub signal_id: String,
    pub success: bool,
    pub reason: String,
    pub data: Value,
    pub received_at: u64,
}

/// How much history the store keeps: events and retired signal token hashes (see
/// docs/http-api.md, "Retention"). `None` keeps everything of that kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HistoryRetention {
    /// The newest events kept per stack name (Heat's `max_events_per_stack`).
    pub max_events_per_stack: Option<u64>,
    /// How long (ms) the events of a deleted stack are kept after its last event.
    pub deleted_stack_events_ms: Option<u64>,
    /// How long (ms) a retired signal token hash is kept, so a late signal with it is answered
    /// as stale (2xx, no change) rather than unknown (404).
    pub retired_signals_ms: Option<u64>,
}

/// What `prune_history` removed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HistoryPruned {
    pub events: usize,
    pub retired_signals: usize,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventRow {
    pub id: u64,
    pub stack: String,
    pub time: u64,
    pub resource: String,
    pub status: String,
    pub reason: String,
}

/// A deadline the sweeper enforces: the stack's own timeout (`node: None`) or a wait
/// condition's, for one traversal (`generation`) of the stack. Keyed by (stack, node, generation).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeadlineRow {
    pub stack: String,
    pub node: Option<String>,
    pub generation: u64,
    pub due_at: u64,
}

/// A web view login (`POST /ui/login`), known by `key`: a keyed hash of the random id its cookie
/// carries (the id itself is never stored). It ends at `expires_at` (unix ms) or when its
/// logout deletes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UiSessionRow {
    pub key: String,
    pub created_at: u64,
    pub expires_at: u64,
}

/// A backend's own error, boxed so that no backend's types are part of the store's API: the
/// SQLite backend maps `rusqlite` errors into it, and another backend would map its own.
pub type BackendError = Box<dyn std::error::Error + Send + Sync>;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("cannot create database directory {path}")]
    CreateDirectory {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot create database file {path}")]
    CreateFile {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot open database {path}")]
    Open {
        path: PathBuf,
        #[source]
        source: BackendError,
    },
    #[error("cannot set {setting} on the database")]
    Configure {
        setting: &'static str,
        #[source]
        source: BackendError,
    },
    /// A statement of the backend failed; `action` says what it was for ("read a node").
    #[error("cannot {action}")]
    Query {
        action: &'static str,
        #[source]
        source: BackendError,
    },
    /// The COMMIT of the batch this call's work was in failed; none of the batch took effect.
    #[error("cannot commit a transaction")]
    Commit {
        #[source]
        source: std::sync::Arc<dyn std::error::Error + Send + Sync>,
    },
    /// The backend rolled the transaction back on its own (an I/O error, a full disk, ...).
    #[error("cannot commit: the transaction was rolled back after a storage failure")]
    RolledBack,
    #[error("cannot encode column {column} as JSON")]
    Encode {
        column: &'static str,
        #[source]
        source: serde_json::Error,
    },
    #[error("cannot decode stored column {column} as JSON")]
    Decode {
        column: &'static str,
        #[source]
        source: serde_json::Error,
    },
    #[error("cannot apply schema migration {version}")]
    Migration {
        version: u32,
        #[source]
        source: BackendError,
    },
    #[error("cannot use the database: it refused WAL journal mode (it is in {mode} mode)")]
    JournalMode { mode: String },
    #[error(
        "cannot use database schema version {found}: a newer anneal-shim wrote it, and this one ({}) knows schema versions up to {supported}; downgrading is not supported: run the newer anneal-shim again, or restore the backup taken before the upgrade (docs/upgrading.md)",
        env!("CARGO_PKG_VERSION")
    )]
    SchemaTooNew { found: u32, supported: u32 },
    #[error("cannot find {kind} {key}")]
    NotFound { kind: &'static str, key: String },
    #[error("cannot use the database: its integrity check failed: {report}")]
    Integrity { report: String },
    #[error("cannot use database URL {url}: {reason}")]
    UnsupportedUrl { url: String, reason: &'static str },
    /// The URL (password masked) is not one PostgreSQL's client accepts.
    #[error("cannot use database URL {url}")]
    InvalidUrl {
        url: String,
        #[source]
        source: BackendError,
    },
    #[error("cannot connect to PostgreSQL at {target}")]
    Connect {
        target: String,
        #[source]
        source: BackendError,
    },
    /// The database cannot be reached now (connection lost, server restarting, no pooled
    /// connection in time). Nothing of the call took effect unless it failed at COMMIT; the
    /// HTTP layer answers 503 with Retry-After.
    #[error("the database is unavailable")]
    Unavailable {
        #[source]
        source: BackendError,
    },
}

/// What a backend shared with other processes reports of their commits (see
/// `Store::watch_documents`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DocumentNotice {
    /// These servers' documents (or registrations) changed.
    Changed(Vec<String>),
    /// These stacks' graphs (their row, nodes or edges) changed: what the web view's live
    /// streams of them follow.
    StacksChanged(Vec<String>),
    /// Changes may have been missed (the notification connection was re-made): check every
    /// cached document and every followed stack.
    Resync,
}

/// The reads and writes available inside one transaction. Updates of a row that does not exist
/// fail with `StoreError::NotFound` (a bug in the caller, not a race: the transaction holds the
/// write lock); deletes of a missing row succeed.
pub trait Tx {
    /// False when the name is taken.
    fn insert_server(&mut self, row: &ServerRow) -> Result<bool, StoreError>;
    fn server(&mut self, name: &str) -> Result<Option<ServerRow>, StoreError>;
    fn server_by_token_hash(&mut self, hash: &str) -> Result<Option<ServerRow>, StoreError>;
    /// Ordered by name.
    fn servers(&mut self) -> Result<Vec<ServerRow>, StoreError>;
    /// Every server's name and document version (one statement: what a replica compares its
    /// cached documents against).
    fn document_versions(&mut self) -> Result<Vec<(String, u64)>, StoreError>;
    fn set_server_document(
        &mut self,
        name: &str,
        version: u64,
        body: &str,
        published_at: u64,
    ) -> Result<(), StoreError>;
    fn touch_server(&mut self, name: &str, at: u64) -> Result<(), StoreError>;
    /// Gives the server `new_hash` as its token hash and keeps the one it replaces as its
    /// previous token, valid until `previous_expires_at` (unix ms) and recognised after that
    /// (until the next rotation or the server's removal) so its holder can be told it expired.
    /// False when there is no such server.
    fn rotate_server_token(&mut self, name: &str, new_hash: &str, previous_expires_at: u64)
    -> Result<bool, StoreError>;
    /// The server whose previous token hash this is, and when that token expires (unix ms).
    fn server_by_previous_token_hash(&mut self, hash: &str) -> Result<Option<(String, u64)>, StoreError>;
    /// Deletes the server (and with it its token hash) and any entries of its document; false
    /// when there was no such server.
    fn delete_server(&mut self, name: &str) -> Result<bool, StoreError>;
    /// The stacks with a node published to `server` or an entry in its document, ordered by name.
    fn stacks_using_server(&mut self, server: &str) -> Result<Vec<String>, StoreError>;
    /// Upsert by (server, stack, node).
    fn put_entry(&mut self, row: &EntryRow) -> Result<(), StoreError> {
        self.put_entry_text(&row.server, &EntryText::of(row)?)
    }
    /// `put_entry` with the entry already as JSON text (the engine keeps that text for the
    /// document it renders, so the entry is serialized once).
    fn put_entry_text(&mut self, server: &str, entry: &EntryText) -> Result<(), StoreError>;
    fn remove_entry(&mut self, server: &str, stack: &str, node: &str) -> Result<(), StoreError>;
    /// The size in bytes of the stored entry of (`server`, `stack`, `node`), if there is one.
    fn entry_bytes(&mut self, server: &str, stack: &str, node: &str) -> Result<Option<u64>, StoreError>;
    /// The size in bytes of all of `stack`'s entries, on every server (the store knows each
    /// entry's size without reading its text).
    fn stack_entry_bytes(&mut self, stack: &str) -> Result<u64, StoreError>;
    /// Ordered by sort_key, stack, node.
    fn entries(&mut self, server: &str) -> Result<Vec<EntryRow>, StoreError>;
    /// The same entries as stored JSON text, in the same order: what a document is rendered
    /// from, without parsing each entry only to serialize it again.
    fn entry_texts(&mut self, server: &str) -> Result<Vec<EntryText>, StoreError>;
    /// False when the name is taken.
    /// Stores a new stack with its template text (kept apart from `StackRow`: the hot paths read
    /// stacks on every signal and must not copy a template of thousands of resources each time).
    fn insert_stack(&mut self, row: &StackRow, template: &str) -> Result<bool, StoreError>;
    fn stack(&mut self, name: &str) -> Result<Option<StackRow>, StoreError>;
    fn stack_template(&mut self, name: &str) -> Result<Option<String>, StoreError>;
    fn set_stack_template(&mut self, name: &str, template: &str) -> Result<(), StoreError>;
    /// The requests the stack's current traversal and the one before it were started with.
    fn stack_requests(&mut self, name: &str) -> Result<StoredRequests, StoreError>;
    fn set_stack_requests(&mut self, name: &str, requests: &StoredRequests) -> Result<(), StoreError>;
    /// Ordered by name.
    fn stacks(&mut self) -> Result<Vec<StackRow>, StoreError>;
    /// Rewrites every column except `name` (the key) and `created_at`.
    fn update_stack(&mut self, row: &StackRow) -> Result<(), StoreError>;
    /// Atomic; returns the new value.
    fn add_pending(&mut self, stack: &str, delta: i64) -> Result<i64, StoreError>;
    /// Deletes the stack and its nodes, edges, entries, wait signals and deadlines; events are kept.
    fn delete_stack(&mut self, name: &str) -> Result<(), StoreError>;
    fn insert_node(&mut self, row: &NodeRow) -> Result<(), StoreError>;
    fn node(&mut self, stack: &str, name: &str) -> Result<Option<NodeRow>, StoreError>;
    /// The same row, shared rather than copied: for readers that change nothing (a group's
    /// members each read the config node three times; a copy of a large script each time).
    fn node_shared(&mut self, stack: &str, name: &str) -> Result<Option<Arc<NodeRow>>, StoreError> {
        Ok(self.node(stack, name)?.map(Arc::new))
    }
    /// In insertion order.
    fn nodes(&mut self, stack: &str) -> Result<Vec<NodeRow>, StoreError>;
    /// `nodes`, shared with the row cache where it holds them (no copy of each row).
    fn nodes_shared(&mut self, stack: &str) -> Result<Vec<Arc<NodeRow>>, StoreError> {
        Ok(self.nodes(stack)?.into_iter().map(Arc::new).collect())
    }
    /// `update_node`, taking the row: the row cache keeps it without a copy (a large group's
    /// row is megabytes).
    fn update_node_owned(&mut self, row: NodeRow) -> Result<(), StoreError> {
        self.update_node(&row)
    }
    fn update_node(&mut self, row: &NodeRow) -> Result<(), StoreError>;
    /// The conditional write of a signal: writes `row` only if the stored node still has `generation` and `state`;
    /// false when 0 rows matched (a duplicate or stale signal).
    fn update_node_if(&mut self, row: &NodeRow, generation: u64, state: NodeState) -> Result<bool, StoreError>;
    fn node_by_signal_hash(&mut self, hash: &str) -> Result<Option<NodeRow>, StoreError>;
    /// Remembers a signal token hash that no longer belongs to its node's current publication
    /// (an update republished the deployment), so a late signal with it is known to be stale.
    fn retire_signal_hash(&mut self, hash: &str, stack: &str, node: &str) -> Result<(), StoreError>;
    /// Whether `hash` was retired by `retire_signal_hash`.
    fn is_retired_signal_hash(&mut self, hash: &str) -> Result<bool, StoreError>;
    /// Atomic; returns the new value.
    fn decrement_remaining(&mut self, stack: &str, name: &str) -> Result<i64, StoreError>;
    fn delete_node(&mut self, stack: &str, name: &str) -> Result<(), StoreError>;
    /// Idempotent.
    fn insert_edge(&mut self, stack: &str, from: &str, to: &str) -> Result<(), StoreError>;
    /// Ordered by name.
    fn successors(&mut self, stack: &str, from: &str) -> Result<Vec<String>, StoreError>;
    fn delete_edges(&mut self, stack: &str) -> Result<(), StoreError>;
    /// Upsert by (stack, handle, signal_id); true for a new signal id. A repeated id replaces the
    /// earlier signal but keeps its place in the order (as Heat's metadata dict does).
    fn upsert_wait_signal(&mut self, row: &WaitSignalRow) -> Result<bool, StoreError>;
    /// In the order the signal ids were first received.
    fn wait_signals(&mut self, stack: &str, handle: &str) -> Result<Vec<WaitSignalRow>, StoreError>;
    /// Whether the stored signal of this id succeeded; `None` when the handle has none of that id.
    fn wait_signal_success(&mut self, stack: &str, handle: &str, signal_id: &str) -> Result<Option<bool>, StoreError>;
    /// Returns the event's id; ids only grow, even across deleted stacks.
    fn append_event(
        &mut self,
        stack: &str,
        time: u64,
        resource: &str,
        status: &str,
        reason: &str,
    ) -> Result<u64, StoreError>;
    /// Ordered by id.
    fn events(&mut self, stack: &str) -> Result<Vec<EventRow>, StoreError>;
    /// Removes the history `retention` gives up at `now` (see `HistoryRetention`).
    fn prune_history(&mut self, retention: &HistoryRetention, now: u64) -> Result<HistoryPruned, StoreError>;
    /// Upsert by (stack, node, generation).
    fn put_deadline(&mut self, row: &DeadlineRow) -> Result<(), StoreError>;
    fn delete_deadline(&mut self, stack: &str, node: Option<&str>, generation: u64) -> Result<(), StoreError>;
    /// Deadlines with `due_at <= now`, earliest first, at most `limit`.
    fn due_deadlines(&mut self, now: u64, limit: usize) -> Result<Vec<DeadlineRow>, StoreError>;
    /// Stores a web view session; false when its key is taken.
    fn insert_ui_session(&mut self, row: &UiSessionRow) -> Result<bool, StoreError>;
    /// The session of this key, expired or not (one primary-key read: every request of the
    /// web view makes it).
    fn ui_session(&mut self, key: &str) -> Result<Option<UiSessionRow>, StoreError>;
    /// Deletes the session (a logout); false when there was none.
    fn delete_ui_session(&mut self, key: &str) -> Result<bool, StoreError>;
    /// Deletes the sessions expired at `now` (`expires_at <= now`); how many.
    fn prune_ui_sessions(&mut self, now: u64) -> Result<usize, StoreError>;
    /// The stacks whose graph this call has written so far (a stack row, a node or an edge
    /// inserted, updated or deleted), by name, sorted: the engine wakes their live views after
    /// the commit, and PostgreSQL announces them to the other replicas. Kept by the row cache
    /// every backend's transaction is wrapped in; a bare backend keeps none.
    fn changed_stacks(&self) -> Vec<String> {
        Vec::new()
    }
    /// Keeps every row this call reads or writes in memory, with no bound, and writes none that
    /// no read needs: for a call that is rolled back anyway and goes through thousands of rows
    /// (a plan). Kept by the row cache; a bare backend ignores it.
    fn keep_every_row(&mut self) {}
}

pub trait Store: Send + Sync + 'static {
    /// Runs `work` in one transaction: commit if it returns Ok (durably: synchronous=FULL), roll back on Err.
    /// Blocking: async callers use `tokio::task::spawn_blocking` (the engine does that).
    /// Must not be called again from inside `work` (the connection is held: it would deadlock).
    fn transaction<T, E: From<StoreError>>(&self, work: impl FnOnce(&mut dyn Tx) -> Result<T, E>) -> Result<T, E>;
    /// Runs `work`, which must only read, without a write transaction: no write lock, no
    /// commit, nothing to wait for but the connection (lookups on behalf of unauthenticated
    /// callers use it). It may see writes of a group commit still open. Blocking, like
    /// `transaction`; by default it is one.
    fn read<T, E: From<StoreError>>(&self, work: impl FnOnce(&mut dyn Tx) -> Result<T, E>) -> Result<T, E> {
        self.transaction(work)
    }
    /// Statements executed since open (instrumentation for the benchmarks).
    fn statements(&self) -> u64;
    /// Whether this process is the only one that writes the store (SQLite): what it counted
    /// of the store at its last write still holds at its next.
    fn single_writer(&self) -> bool {
        false
    }
    /// The document changes other processes commit to this database (replicas on PostgreSQL),
    /// until `shutdown`; `None` when no other process writes it (SQLite). Spawns on the
    /// current tokio runtime.
    fn watch_documents(
        &self,
        shutdown: tokio_util::sync::CancellationToken,
    ) -> Option<tokio::sync::mpsc::Receiver<DocumentNotice>> {
        let _ = shutdown;
        None
    }
}

/// Where the store lives, from `--db`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DatabaseUrl {
    Sqlite(PathBuf),
    /// The whole `postgres://` URL (it may hold a password: not for messages).
    Postgres(String),
}

/// `sqlite:///abs/path`, `sqlite://relative/path`, a plain path, or `postgres://...` /
/// `postgresql://...` (checked when connecting).
pub fn parse_database_url(url: &str) -> Result<DatabaseUrl, StoreError> {
    if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        return Ok(DatabaseUrl::Postgres(url.to_owned()));
    }
    parse_sqlite_url(url).map(DatabaseUrl::Sqlite)
}

fn parse_sqlite_url(url: &str) -> Result<PathBuf, StoreError> {
    let unsupported = |reason| StoreError::UnsupportedUrl { url: url.to_owned(), reason };
    let path = match url.strip_prefix("sqlite://") {
        Some(rest) => rest,
        None if url.starts_with("sqlite:") => return Err(unsupported("expected sqlite://<path>")),
        None if url.contains("://") => {
            return Err(unsupported("only sqlite://, postgres:// URLs and plain paths are supported"));
        }
        None => url,
    };
    if path.is_empty() {
        return Err(unsupported("the path is empty"));
    }
    if path.contains('?') {
        // Query strings (`?mode=ro`) would silently become part of the file name.
        return Err(unsupported("query parameters are not supported"));
    }
    Ok(PathBuf::from(path))
}

impl fmt::Debug for ServerRow {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter
            .debug_struct("ServerRow")
            .field("name", &self.name)
            .field("token_hash", &self.token_hash)
            .field("created_at", &self.created_at)
            .field("metadata_version", &self.metadata_version)
            .field("metadata_body", &format_args!("<{} bytes>", self.metadata_body.len()))
            .field("published_at", &self.published_at)
            .field("last_seen", &self.last_seen)
            .field("addresses", &self.addresses)
            .finish()
    }
}

impl fmt::Debug for StackRow {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parameters = self.parameters.clone();
        if let Value::Object(map) = &mut parameters {
            for (name, value) in map.iter_mut() {
                if self.hidden_parameters.contains(name) {
                    *value = Value::String("***".to_owned());
                }
            }
        }
        formatter
            .debug_struct("StackRow")
            .field("id", &self.id)
            .field("name", &self.name)
            .field("action", &self.action)
            .field("state", &self.state)
            .field("status_reason", &self.status_reason)
            .field("parameters", &parameters)
            .field("hidden_parameters", &self.hidden_parameters)
            .field("generation", &self.generation)
            .field("pending", &self.pending)
            .field("deadline", &self.deadline)
            .field("created_at", &self.created_at)
            .field("updated_at", &self.updated_at)
            .field("evaluated_bytes", &self.evaluated_bytes)
            .field("resource_count", &self.resource_count)
            .field("rollback", &self.rollback)
            .finish()
    }
}

impl fmt::Debug for EntryRow {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter
            .debug_struct("EntryRow")
            .field("server", &self.server)
            .field("stack", &self.stack)
            .field("node", &self.node)
            .field("sort_key", &self.sort_key)
            .field("entry", &format_args!("<elided>"))
            .field("tokens", &self.tokens)
            .finish()
    }
}
