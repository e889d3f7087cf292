//! The shim's API vocabulary: the JSON shapes of the HTTP API (shared by the server, the CLI
//! client and the engine) and the `Service` trait, the seam between the HTTP layer and the
//! engine. The HTTP layer only parses, authenticates and maps errors; every decision is the
//! engine's.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::sync::watch;

/// `POST /v1/servers` body.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AddServer {
    pub name: String,
    /// IP addresses of the server on no named network (`--address`): its `accessIPv4` and
    /// `accessIPv6` attributes, and `first_address` when it has no network addresses.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub addresses: Vec<String>,
    /// IP addresses per network name (`--network NET=IP`): its `networks`, `addresses` and
    /// `first_address` attributes, as Nova reports a server's (docs/templates.md).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub networks: BTreeMap<String, Vec<String>>,
}

/// Where the agent config `server add` prints reads the server's token from.
pub const AGENT_TOKEN_PATH: &str = "/etc/anneal/token";

/// What `server add` prints: everything an agent needs. The token is shown once, never stored
/// in clear.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServerCredentials {
    pub name: String,
    pub token: String,
    /// `<base>/v1/servers/<name>/metadata`: bearer token, ETag, long-poll.
    pub metadata_url: String,
    /// `<base>/v1/metadata/<token>`: for os-collect-config's `request` collector.
    pub request_url: String,
    /// The metadata URL at every replica the shim knows (`serve --public-url` repeated),
    /// `metadata_url` first; empty from a shim that predates replicas.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub metadata_urls: Vec<String>,
}

/// `POST /v1/servers/{name}/token` body (may be empty: `{}`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RotateToken {
    /// How long the replaced token stays valid [default: `DEFAULT_TOKEN_GRACE_SECS`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grace_secs: Option<u64>,
}

/// How long a replaced server token stays valid by default: long enough for an agent to be
/// given the new one in its token file.
pub const DEFAULT_TOKEN_GRACE_SECS: u64 = 3600;
/// The longest grace a rotation accepts (a week): a stolen token must not outlive its rotation
/// by much.
pub const MAX_TOKEN_GRACE_SECS: u64 = 7 * 24 * 3600;

/// The server a token belongs to (`Service::token_owner`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenOwner {
    pub server: String,
    /// A token replaced by a rotation whose grace period is over.
    pub expired: bool,
    /// For a token replaced by a rotation: when its grace period ends (Unix milliseconds).
    pub grace_ends_at: Option<u64>,
}

/// What `server rotate-token` prints: the new credentials, and until when the old token works.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RotatedCredentials {
    #[serde(flatten)]
    pub credentials: ServerCredentials,
    /// RFC 3339; after it the old token gets 401 (re-read the token file).
    pub previous_token_expires_at: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServerSummary {
    pub name: String,
    pub created_at: String,
    /// Version of its metadata document (0 before anything was published).
    pub metadata_version: u64,
    /// Last time its agent asked for metadata (RFC 3339), if ever.
    pub last_seen: Option<String>,
}

/// `POST /v1/stacks` and `PUT /v1/stacks/{name}` body.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StackRequest {
    /// Only on create; must match the path on update (or be absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The HOT template text (YAML or JSON). Required, but for an update with `existing`.
    #[serde(default)]
    pub template: String,
    /// Parameter values as given on the command line (`--param K=V`).
    #[serde(default)]
    pub parameters: BTreeMap<String, String>,
    /// Stack timeout; the stack fails when it is not COMPLETE by then.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_secs: Option<u64>,
    /// The Heat environment (merged by the client as python-heatclient does; see
    /// docs/templates.md, "Environments"). Null or absent: none.
    #[serde(default, skip_serializing_if = "Value::is_null")]
    pub environment: Value,
    /// Heat's `files` map: what `get_file` names, keyed as the template writes it.
    #[serde(default, skip_serializing_if = "serde_json::Map::is_empty")]
    pub files: serde_json::Map<String, Value>,
    /// Heat's `environment_files`: names of environments in `files`, merged by the server in
    /// order (docs/templates.md, "Environments"); when given, `environment` is ignored, as Heat
    /// ignores it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub environment_files: Vec<String>,
    /// Heat's `disable_rollback`: false rolls a failed create or update back (docs/day-two.md).
    /// Absent: true on create (Heat's default), the stack's own setting
    /// on update.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disable_rollback: Option<bool>,
    /// Update only (Heat's PATCH, `stack update --existing`): the stack's stored request is the
    /// base; what this one gives (template, environment, files, parameters, timeout, rollback)
    /// replaces or adds to it. Never stored.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub existing: bool,
}

/// `GET /v1/stacks/{name}/template`: the template text the stack runs, as stored. It is the
/// text `stack create`/`update` sent, byte for byte, unless the request had an environment or
/// `files` (`-e`, `get_file`), in which case it is the template they resolved as JSON
/// (`resource_registry` types and `get_file` contents in place): either way a template
/// `stack update` takes back (docs/http-api.md, "Stacks").
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StackTemplate {
    pub template: String,
}

/// `GET /v1/stacks/{name}/environment`: the environment the stack runs with, as a Heat
/// environment. anneal-shim keeps the values in effect, not the environment as sent: every
/// declared parameter with its value (given, from `parameter_defaults` or the template's
/// default), hidden ones as `******` as Heat's `get_environment` masks them; the
/// `resource_registry` is already applied to the stored template.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StackEnvironment {
    pub parameters: BTreeMap<String, Value>,
}

/// One failed resource, as `GET /v1/stacks/{name}/failures` lists it (Heat's `stack failures
/// list`): a deployment with its run's output.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Failure {
    /// The node's name (`group/member` for a deployment group's member).
    pub resource: String,
    /// Heat's path of it: `<stack>.<resource>` (`<stack>.<group>.<member>` for a member).
    pub path: String,
    pub resource_type: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub physical_resource_id: Option<String>,
    pub status: String,
    pub status_reason: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<String>,
    /// A deployment's last run, in full (`stack failures` shows the last ten lines without
    /// `--long`).
    #[serde(default, skip_serializing_if = "Value::is_null")]
    pub deploy_status_code: Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deploy_stdout: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deploy_stderr: Option<String>,
}

/// What a create or update would do (`POST /v1/stacks/preview`, `PUT /v1/stacks/{name}/preview`,
/// `stack create|update --dry-run`), computed by performing it in a transaction that is then
/// discarded (docs/day-two.md, "Plans").
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StackPlan {
    pub stack: String,
    /// `CREATE` or `UPDATE`.
    pub action: Action,
    /// Whether anything would change: a resource added, deleted, replaced or updated, or a run.
    pub changes: bool,
    /// Heat's preview categories, deployment group members included (each with its
    /// `parent_resource`); the API leaves them out unless asked for with `show_nested`.
    pub resource_changes: ResourceChanges,
    /// Every deployment run, in the order the traversal would publish them.
    pub runs: Vec<PlannedRun>,
    /// Each deployment group that runs in batches: how many, and the pause between them.
    pub groups: Vec<PlannedGroup>,
    /// How the traversal would end if every run succeeded, reporting its previous outputs, e.g.
    /// `UPDATE_COMPLETE`; FAILED when the engine itself would fail it (a limit, a missing
    /// server, an update policy's timeout).
    pub outcome: String,
    pub outcome_reason: String,
}

/// Heat's `resource_changes` of a preview.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ResourceChanges {
    pub added: Vec<PlannedResource>,
    pub deleted: Vec<PlannedResource>,
    pub replaced: Vec<PlannedResource>,
    pub updated: Vec<PlannedResource>,
    pub unchanged: Vec<PlannedResource>,
}

impl ResourceChanges {
    /// Whether any resource is added, deleted, replaced or updated.
    pub fn any(&self) -> bool {
        [&self.added, &self.deleted, &self.replaced, &self.updated].iter().any(|resources| !resources.is_empty())
    }

    /// Without the nested resources (group members): Heat's preview without `show_nested`.
    pub fn top_level(mut self) -> ResourceChanges {
        for list in [&mut self.added, &mut self.deleted, &mut self.replaced, &mut self.updated, &mut self.unchanged] {
            list.retain(|resource| resource.parent_resource.is_none());
        }
        self
    }
}

/// One resource of a preview, as Heat's `format_stack_resource` names it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlannedResource {
    /// Its name in its own stack: a group member's is its key in the group's `servers` (`a`,
    /// where runs and events say `group/a`).
    pub resource_name: String,
    pub resource_type: String,
    /// A group member's group (Heat: the resource whose nested stack holds it); absent at the
    /// top level.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_resource: Option<String>,
}

/// One deployment run a plan predicts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlannedRun {
    pub resource: String,
    pub server: String,
    /// `CREATE`, `UPDATE` or `DELETE`.
    pub action: String,
    /// 1 for what is published at once; one more after each wait for other runs or a pause.
    pub step: u32,
    /// For a group's member: the group and its batch (1-based).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch: Option<u32>,
    /// The inputs whose values change (names only, so no hidden value is shown), and `config`
    /// when the config itself changes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub changed: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlannedGroup {
    pub group: String,
    pub batches: u32,
    pub pause_secs: f64,
}

/// A stack or resource status: `<ACTION>_<STATE>` as Heat spells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Action {
    #[serde(rename = "CREATE")]
    Create,
    #[serde(rename = "UPDATE")]
    Update,
    #[serde(rename = "DELETE")]
    Delete,
    /// A stack's convergence back to what it ran before a failed create or update (a stack
    /// action only; its resources take CREATE, UPDATE and DELETE actions).
    #[serde(rename = "ROLLBACK")]
    Rollback,
    /// A resource marked unhealthy (`CHECK_FAILED`, Heat's mark-unhealthy): the next update
    /// replaces it.
    #[serde(rename = "CHECK")]
    Check,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum State {
    #[serde(rename = "IN_PROGRESS")]
    InProgress,
    #[serde(rename = "COMPLETE")]
    Complete,
    #[serde(rename = "FAILED")]
    Failed,
}

impl Action {
    pub const ALL: [Action; 5] = [Action::Create, Action::Update, Action::Delete, Action::Rollback, Action::Check];

    /// Heat's spelling, e.g. `CREATE`.
    pub fn as_str(self) -> &'static str {
        match self {
            Action::Create => "CREATE",
            Action::Update => "UPDATE",
            Action::Delete => "DELETE",
            Action::Rollback => "ROLLBACK",
            Action::Check => "CHECK",
        }
    }

    pub fn parse(text: &str) -> Option<Action> {
        Action::ALL.into_iter().find(|action| action.as_str() == text)
    }
}

impl State {
    pub const ALL: [State; 3] = [State::InProgress, State::Complete, State::Failed];

    /// Heat's spelling, e.g. `IN_PROGRESS`.
    pub fn as_str(self) -> &'static str {
        match self {
            State::InProgress => "IN_PROGRESS",
            State::Complete => "COMPLETE",
            State::Failed => "FAILED",
        }
    }

    pub fn parse(text: &str) -> Option<State> {
        State::ALL.into_iter().find(|state| state.as_str() == text)
    }
}

impl std::fmt::Display for Action {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str(self.as_str())
    }
}

impl std::fmt::Display for State {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StackSummary {
    pub name: String,
    pub id: String,
    /// e.g. `CREATE_IN_PROGRESS`.
    pub status: String,
    pub status_reason: String,
    pub created_at: String,
    pub updated_at: String,
    /// Heat's `disable_rollback`. Absent from an older shim's answer: true, Heat's default.
    #[serde(default = "default_true")]
    pub disable_rollback: bool,
    /// The stack failed and its rollback is about to start (`stack update --wait` waits on).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub rollback_due: bool,
}

fn default_true() -> bool {
    true
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResourceSummary {
    pub name: String,
    /// e.g. `OS::Heat::SoftwareDeployment`.
    pub resource_type: String,
    pub status: String,
    pub status_reason: String,
    /// For deployments: the server it runs on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<String>,
    pub updated_at: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StackOutput {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// `null` until it can be resolved.
    pub value: Value,
    /// Why it has no value yet (its producer is not COMPLETE, or failed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// `GET /v1/stacks/{name}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StackDetail {
    #[serde(flatten)]
    pub summary: StackSummary,
    /// Parameter values; `hidden` ones are shown as `"******"`.
    pub parameters: BTreeMap<String, Value>,
    pub resources: Vec<ResourceSummary>,
    pub outputs: Vec<StackOutput>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Event {
    pub id: u64,
    pub time: String,
    /// The resource, or the stack's own name for stack-level events.
    pub resource: String,
    pub status: String,
    pub reason: String,
}

/// A server's materialised metadata document as served.
#[derive(Debug, Clone, PartialEq)]
pub struct MetadataDocument {
    /// Increases on every change; the ETag is `"<version>"`.
    pub version: u64,
    /// The JSON text (`{"deployments": [...], "anneal": {"server", "version"}}`).
    pub body: Arc<str>,
    /// When this version was published, as an HTTP date (RFC 7231), for `Last-Modified`.
    pub last_modified: String,
    /// When this process learned of this version (after its commit), for the wake-up latency
    /// of the long-polls it answers; `None` until it is announced.
    pub announced_at: Option<std::time::Instant>,
    /// The hash of the server's token when this version was rendered. It is new with each
    /// registration (a server removed and added again under its name starts its versions over,
    /// and the old one's document must not be the new one's base) and with each rotation (a
    /// long-poll held with a token that is no longer this one checks it again before it answers).
    pub server_token_hash: Arc<str>,
}

/// What a signal did. Repeated and stale signals are accepted (2xx) and change nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SignalAck {
    Applied,
    Duplicate,
    Stale,
}

/// Errors the engine reports; the HTTP layer maps each kind to a status code.
#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    /// 404.
    #[error("{what} not found")]
    NotFound { what: String },
    /// 409: a server or stack with that name exists.
    #[error("{what} already exists")]
    Conflict { what: String },
    /// 409: the thing is still in use (the message says by what), so it cannot be removed.
    #[error("{message}")]
    InUse { message: String },
    /// 400/422: the request is well-formed JSON but invalid (names the problem).
    #[error("{message}")]
    Invalid { message: String },
    /// 400: the template or parameters are invalid; one entry per problem, each naming the
    /// resource (or parameter) and the reason.
    #[error("template is invalid: {}", problems.join("; "))]
    Template { problems: Vec<String> },
    /// 500 (logged with the chain; the client sees a short message).
    #[error("storage failure")]
    Store(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// 503 with Retry-After: the database cannot be reached now (restarting, connection lost);
    /// nothing of the request took effect unless the failure came at its COMMIT.
    #[error("the database is unavailable; retry later")]
    Unavailable(#[source] Box<dyn std::error::Error + Send + Sync>),
}

/// The engine as the HTTP layer sees it. Implemented by `engine::Engine`; tests of the HTTP
/// layer implement it with a fake.
pub trait Service: Send + Sync + 'static {
    fn add_server(&self, request: AddServer) -> impl Future<Output = Result<ServerCredentials, ServiceError>> + Send;
    fn list_servers(&self) -> impl Future<Output = Result<Vec<ServerSummary>, ServiceError>> + Send;
    /// Removes a server and with it its token (at once: held long-polls of its agent end).
    /// `NotFound` for an unknown name; `InUse` while a stack has a deployment published to it.
    fn remove_server(&self, name: &str) -> impl Future<Output = Result<(), ServiceError>> + Send;
    /// The server whose token this is (`None` for an unknown or malformed token). A token
    /// replaced by `rotate_server_token` still counts until its grace period is over.
    fn server_for_token(&self, token: &str) -> impl Future<Output = Result<Option<String>, ServiceError>> + Send;
    /// Gives the server a new token; the old one stays valid for `grace_secs` (at most
    /// `MAX_TOKEN_GRACE_SECS`, else `Invalid`). `NotFound` for an unknown server.
    fn rotate_server_token(
        &self,
        name: &str,
        grace_secs: u64,
    ) -> impl Future<Output = Result<RotatedCredentials, ServiceError>> + Send;
    /// Whose server token this is, current or replaced (`None` for an unknown or malformed
    /// token); one lookup for the bearer route, which answers an expired one 401.
    fn token_owner(&self, token: &str) -> impl Future<Output = Result<Option<TokenOwner>, ServiceError>> + Send;
    /// Records that the server's agent asked for metadata (liveness).
    fn touch_server(&self, name: &str);
    /// The current document of a server (O(1), from memory after the first read).
    fn metadata(&self, server: &str) -> impl Future<Output = Result<MetadataDocument, ServiceError>> + Send;
    /// A receiver of the server's document version, for long-polls.
    fn watch_metadata(&self, server: &str) -> impl Future<Output = Result<watch::Receiver<u64>, ServiceError>> + Send;

    fn create_stack(&self, request: StackRequest) -> impl Future<Output = Result<StackSummary, ServiceError>> + Send;
    fn update_stack(
        &self,
        name: &str,
        request: StackRequest,
    ) -> impl Future<Output = Result<StackSummary, ServiceError>> + Send;
    fn delete_stack(&self, name: &str) -> impl Future<Output = Result<StackSummary, ServiceError>> + Send;
    /// Heat's cancel: stops a create or update in progress (nothing new is published; running
    /// deployments finish and their signals are taken), then rolls it back, or with
    /// `rollback` false leaves it FAILED ("Stack UPDATE cancelled"). `InUse` when nothing the
    /// cancel applies to is in progress.
    fn cancel_stack(
        &self,
        name: &str,
        rollback: bool,
    ) -> impl Future<Output = Result<StackSummary, ServiceError>> + Send;
    fn list_stacks(&self) -> impl Future<Output = Result<Vec<StackSummary>, ServiceError>> + Send;
    fn show_stack(&self, name: &str) -> impl Future<Output = Result<StackDetail, ServiceError>> + Send;
    /// `show_stack` without evaluating the outputs (`outputs` empty), as Heat's
    /// `?resolve_outputs=false`: what `--wait` polls.
    fn show_stack_unresolved(&self, name: &str) -> impl Future<Output = Result<StackDetail, ServiceError>> + Send;
    fn stack_events(&self, name: &str) -> impl Future<Output = Result<Vec<Event>, ServiceError>> + Send;
    /// The stack's stored template (`NotFound` for an unknown stack, and for one with nested
    /// stacks or resource groups: only their expanded form is kept).
    fn stack_template(&self, name: &str) -> impl Future<Output = Result<StackTemplate, ServiceError>> + Send;
    /// The parameter values the stack runs with, hidden ones masked (`NotFound` for an unknown
    /// stack).
    fn stack_environment(&self, name: &str) -> impl Future<Output = Result<StackEnvironment, ServiceError>> + Send;
    /// What `request` would do to stack `name` (an update; `None`: a create of
    /// `request.name`), nothing stored or sent.
    fn preview_stack(
        &self,
        name: Option<&str>,
        request: StackRequest,
    ) -> impl Future<Output = Result<StackPlan, ServiceError>> + Send;
    /// The stack's failed resources, in resource order; a failed group whose failed members are
    /// listed is left out, as Heat lists a failed nested stack's failed resources instead.
    fn stack_failures(&self, name: &str) -> impl Future<Output = Result<Vec<Failure>, ServiceError>> + Send;
    /// Heat's mark-unhealthy of one deployment (or group member): it shows CHECK_FAILED with
    /// `reason` and runs again (CREATE) on the next update; `reset` takes the mark back.
    /// `InUse` while the stack is in progress, `Invalid` for a resource that is not a deployment.
    fn mark_unhealthy(
        &self,
        stack: &str,
        resource: &str,
        reason: Option<String>,
        reset: bool,
    ) -> impl Future<Output = Result<(), ServiceError>> + Send;
    /// The counters and histograms the HTTP layer and the engine update.
    fn metrics(&self) -> &crate::metrics::Metrics;
    /// The store's counts for the `/metrics` gauges.
    fn metrics_snapshot(&self) -> impl Future<Output = Result<crate::metrics::Snapshot, ServiceError>> + Send;
    /// One node of a stack for the web view's side panel (`NotFound` for an unknown stack or
    /// node).
    fn node_detail(
        &self,
        stack: &str,
        node: &str,
    ) -> impl Future<Output = Result<crate::graph::NodeDetail, ServiceError>> + Send;
    /// The stack's component graph (`NotFound` for an unknown stack).
    fn stack_graph(&self, name: &str) -> impl Future<Output = Result<crate::graph::StackGraph, ServiceError>> + Send;
    /// A receiver whose value changes whenever the stack's graph may have changed: after this
    /// process's commits that wrote it, and other replicas' as PostgreSQL announces them. It
    /// says nothing of whether the stack exists (read the graph for that).
    fn watch_stack(&self, name: &str) -> watch::Receiver<u64>;

    /// Stores a web view session under `key` (a keyed hash of its cookie's id: the id is never
    /// stored) that lasts `lifetime_secs`.
    fn open_ui_session(&self, key: &str, lifetime_secs: u64) -> impl Future<Output = Result<(), ServiceError>> + Send;
    /// Whether the session of `key` exists and has not expired: one primary-key read, no write
    /// transaction (every request of the web view asks).
    fn ui_session_valid(&self, key: &str) -> impl Future<Output = Result<bool, ServiceError>> + Send;
    /// Deletes the session of `key` (a logout): its cookie stops working at once, on every
    /// replica sharing the database. False when there was none.
    fn close_ui_session(&self, key: &str) -> impl Future<Output = Result<bool, ServiceError>> + Send;

    /// Whether `token` may be a signal or wait condition handle token: one the engine knows (a
    /// retired deployment token included). A read, never a write transaction: the HTTP layer
    /// asks before it reads a signal's body, so an unknown token costs neither.
    fn signal_token_known(&self, token: &str) -> impl Future<Output = Result<bool, ServiceError>> + Send;
    /// A heat-config-notify body for the deployment whose signal token this is. `Ok(None)`:
    /// unknown token (404).
    fn deployment_signal(
        &self,
        token: &str,
        body: Value,
        signal_id: Option<String>,
    ) -> impl Future<Output = Result<Option<SignalAck>, ServiceError>> + Send;
    /// A wait-condition handle signal (either body style, already parsed). `Ok(None)`: unknown token.
    fn wait_condition_signal(
        &self,
        token: &str,
        signal: WaitConditionSignal,
    ) -> impl Future<Output = Result<Option<SignalAck>, ServiceError>> + Send;
}

/// A wait-condition signal in Heat's normal form (AWS bodies are converted by the HTTP layer).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WaitConditionSignal {
    /// `true` for SUCCESS.
    pub success: bool,
    pub reason: Option<String>,
    pub data: Option<Value>,
    /// `None`: Heat numbers it (the count of signals so far, plus one).
    pub id: Option<String>,
}
