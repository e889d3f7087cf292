//! A stack's component graph as operators look at it: every resource a node (configs,
//! deployments, wait conditions, groups, servers, values), every dependency an edge saying why
//! (`get_attr`, `get_resource`, `depends_on`), deployments grouped by the server they run on,
//! each node's state, a deployment group's failure budget and batches, and the stack's own
//! status and rollback setting. Built by the engine from the stored nodes and edges (`engine::graph`),
//! served as JSON by
//! `GET /v1/stacks/{name}/graph`, and drawn by the client as Graphviz DOT (`dot`) or as a
//! self-contained SVG laid out here (`layout`, `svg`), so no Graphviz is needed to see one.

mod dot;
mod layout;
mod svg;

use serde::{Deserialize, Serialize};

use crate::template::FailureBudget;

pub use dot::to_dot;
pub use svg::to_svg;

/// The graph of one stack.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StackGraph {
    pub stack: String,
    /// e.g. `CREATE_IN_PROGRESS`.
    pub status: String,
    /// Why the stack is in that status (Heat's `stack_status_reason`). Absent from an older
    /// shim's answer.
    #[serde(default)]
    pub status_reason: String,
    /// Heat's `disable_rollback`, as `StackSummary` has it (docs/day-two.md, "Rollback").
    #[serde(default = "default_true")]
    pub disable_rollback: bool,
    /// The stack failed and its rollback is about to start.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub rollback_due: bool,
    /// In the stack's resource order.
    pub nodes: Vec<GraphNode>,
    /// `from` must be done before `to` can go (`to` uses `from`).
    pub edges: Vec<GraphEdge>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GraphNode {
    pub name: String,
    /// e.g. `OS::Heat::SoftwareDeployment`.
    pub resource_type: String,
    pub kind: NodeKind,
    /// Heat's status, e.g. `CREATE_COMPLETE`.
    pub status: String,
    pub phase: Phase,
    pub status_reason: String,
    /// For deployments: the server it runs on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<String>,
    pub updated_at: String,
    /// For a deployment group: its failure budget, failed members and batches.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<GroupProgress>,
}

/// Where a deployment group (`SoftwareDeploymentGroup`, `StructuredDeploymentGroup`) stands in
/// its traversal: its failure budget (`metadata.anneal.failure_budget`, docs/day-two.md), the
/// members that failed in this traversal, its rolling batch and the pause before the next one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GroupProgress {
    /// Its members once it has expanded (0 before).
    pub members: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_failures: Option<u64>,
    /// Of the members, in percent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_failure_percentage: Option<f64>,
    /// The members' keys (as in its `servers`) that failed in this traversal, in the order they
    /// failed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failed_members: Vec<String>,
    /// With a budget: whether those failures are within it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub within_budget: Option<bool>,
    /// The batch being released (1 for the first) and how many there are, when it rolls out in
    /// more than one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batches: Option<u32>,
    /// While it pauses between batches: when the next batch is released.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pause_until: Option<String>,
}

impl GroupProgress {
    /// The budget as messages read it: `max_failures 2, max_failure_percentage 10`; `None`
    /// without one.
    pub fn budget(&self) -> Option<String> {
        let budget =
            FailureBudget { max_failures: self.max_failures, max_failure_percentage: self.max_failure_percentage };
        (budget.max_failures.is_some() || budget.max_failure_percentage.is_some()).then(|| budget.describe())
    }
}

fn default_true() -> bool {
    true
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GraphEdge {
    pub from: String,
    pub to: String,
    pub kind: EdgeKind,
}

/// One node as the web view's side panel shows it: what the graph says, its definition and
/// attributes with secrets masked, and its events.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeDetail {
    #[serde(flatten)]
    pub node: GraphNode,
    /// The resource's properties as the template wrote them (intrinsic functions unresolved);
    /// a hidden parameter's value never appears, and `get_param` of one shows `"******"`.
    pub properties: serde_json::Value,
    /// A deployment's inputs as its server got them (`{name, value}`, resolved), once it is
    /// published: `"******"` for an input whose value comes from a hidden parameter and for
    /// `deploy_signal_id` (a capability URL).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub inputs: Vec<serde_json::Value>,
    /// What `get_attr` reads once it is complete (a deployment's `deploy_stdout`,
    /// `deploy_stderr`, `deploy_status_code` and outputs), long strings cut to their last
    /// `TAIL_CHARS` characters; masked for resources whose attributes are credentials (wait
    /// condition handles, random strings).
    pub attributes: serde_json::Value,
    /// Its events, oldest first (at most `DETAIL_EVENTS`, the newest).
    pub events: Vec<NodeEvent>,
}

/// One event of a node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeEvent {
    pub time: String,
    pub status: String,
    pub reason: String,
}

/// The longest attribute text a `NodeDetail` carries (its tail).
pub const TAIL_CHARS: usize = 4096;
/// The most events a `NodeDetail` carries.
pub const DETAIL_EVENTS: usize = 50;

/// What a resource is, for drawing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NodeKind {
    Config,
    Deployment,
    Group,
    Wait,
    Server,
    Other,
}

/// Where a node is in its current action.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    /// Not started in this traversal.
    Waiting,
    InProgress,
    Complete,
    Failed,
}

/// Why `to` depends on `from`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EdgeKind {
    GetAttr,
    GetResource,
    DependsOn,
    /// A dependency the engine adds itself (a group's members, a server named by a property).
    Implicit,
}

impl NodeKind {
    /// The kind of a resource type (Heat's spelling).
    pub fn of(resource_type: &str) -> NodeKind {
        let short = resource_type.rsplit("::").next().unwrap_or(resource_type);
        match short {
            "SoftwareConfig" | "StructuredConfig" | "CloudConfig" | "MultipartMime" | "SoftwareComponent" => {
                NodeKind::Config
            }
            "SoftwareDeployment" | "StructuredDeployment" => NodeKind::Deployment,
            "SoftwareDeploymentGroup" | "StructuredDeploymentGroup" | "ResourceGroup" => NodeKind::Group,
            "WaitCondition" | "WaitConditionHandle" => NodeKind::Wait,
            "DeployedServer" | "Server" => NodeKind::Server,
            _ => NodeKind::Other,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            NodeKind::Config => "config",
            NodeKind::Deployment => "deployment",
            NodeKind::Group => "group",
            NodeKind::Wait => "wait",
            NodeKind::Server => "server",
            NodeKind::Other => "other",
        }
    }
}

impl Phase {
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Waiting => "waiting",
            Phase::InProgress => "in_progress",
            Phase::Complete => "complete",
            Phase::Failed => "failed",
        }
    }

    /// Fill and stroke colours, shared by DOT and SVG (and the web view's legend).
    pub fn colours(self) -> (&'static str, &'static str) {
        match self {
            Phase::Waiting => ("#eeeeee", "#888888"),
            Phase::InProgress => ("#fff3c4", "#c98a00"),
            Phase::Complete => ("#d8f0d2", "#2e7d32"),
            Phase::Failed => ("#f8d0cc", "#c62828"),
        }
    }
}

impl EdgeKind {
    pub fn as_str(self) -> &'static str {
        match self {
            EdgeKind::GetAttr => "get_attr",
            EdgeKind::GetResource => "get_resource",
            EdgeKind::DependsOn => "depends_on",
            EdgeKind::Implicit => "implicit",
        }
    }
}

/// The last `::` part of a resource type (`SoftwareDeployment`), for labels.
pub fn short_type(resource_type: &str) -> &str {
    resource_type.rsplit("::").next().unwrap_or(resource_type)
}

/// A name or text as one printable line: control characters become spaces, and it is cut at
/// `limit` characters (a label must not be a megabyte of status reason).
pub fn one_line(text: &str, limit: usize) -> String {
    let mut line: String = text.chars().take(limit).map(|ch| if ch.is_control() { ' ' } else { ch }).collect();
    if text.chars().count() > limit {
        line.push('…');
    }
    line
}

#[cfg(test)]
mod tests;
