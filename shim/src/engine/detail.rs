//! The stack read models `GET /v1/stacks` and `GET /v1/stacks/{name}` answer: a stack's summary,
//! and its detail (parameters with hidden ones masked, resources, outputs). The outputs are
//! evaluated on every read, as Heat resolves them on show, from rows already read: the store is
//! not held while they are, so a large output never stalls the metadata polls, and they are
//! evaluated within what the stack's evaluation budget has left (its resources spent the
//! rest), so a read cannot produce more than the budget either. Also what the web view shows
//! of a deployment group beyond its status: its failure budget, failed members and batches
//! (`group_progress`).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use serde_json::{Value, json};

use super::context::{StackScope, remaining_budget, rfc3339};
use super::node::{self, status};
use super::secrets::{self, Purpose, TokenKey};
use crate::graph::GroupProgress;
use crate::model::{ResourceSummary, StackDetail, StackOutput, StackSummary};
use crate::store::{NodeRow, NodeState, Rollback, StackRow};
use crate::template::{self, EvalError, Policies, ResourceType};

/// What the outputs of a detail are evaluated with.
pub struct OutputContext<'a> {
    pub key: &'a TokenKey,
    pub public_url: &'a str,
    /// The evaluation budget of a stack's traversal (`EngineConfig::evaluation_budget`).
    pub budget_limit: usize,
}

pub fn summary(stack: &StackRow) -> StackSummary {
    StackSummary {
        name: stack.name.clone(),
        id: stack.id.clone(),
        status: status(stack.action, stack.state),
        status_reason: stack.status_reason.clone(),
        created_at: rfc3339(stack.created_at),
        updated_at: rfc3339(stack.updated_at),
        disable_rollback: stack.rollback.disabled(),
        rollback_due: stack.rollback == Rollback::Due,
    }
}

/// The stack's detail from its row, its nodes and its stored template (`None`: the outputs are
/// not resolved, `?resolve_outputs=false`).
pub fn detail(
    stack: &StackRow,
    nodes: Vec<NodeRow>,
    template: Option<&str>,
    context: &OutputContext<'_>,
) -> StackDetail {
    let resources = nodes
        .iter()
        .map(|node| ResourceSummary {
            status: node::shown_status(node),
            name: node.name.clone(),
            resource_type: node.resource_type.clone(),
            status_reason: node.status_reason.clone(),
            server: node.server.clone(),
            updated_at: rfc3339(node.updated_at),
        })
        .collect();
    let mut parameters = BTreeMap::new();
    if let Some(values) = stack.parameters.as_object() {
        for (name, value) in values.iter().filter(|(name, _)| !name.starts_with("OS::")) {
            let shown = if stack.hidden_parameters.contains(name) { json!("******") } else { value.clone() };
            parameters.insert(name.clone(), shown);
        }
    }
    let outputs = template.map(|text| outputs(stack, nodes, text, context)).unwrap_or_default();
    StackDetail { summary: summary(stack), parameters, resources, outputs }
}

/// Every output of the stored template, evaluated within the stack's remaining budget (one
/// budget for all of them).
fn outputs(stack: &StackRow, nodes: Vec<NodeRow>, text: &str, context: &OutputContext<'_>) -> Vec<StackOutput> {
    let Ok(template) = template::parse_stored_template(text) else { return Vec::new() };
    let nodes: HashMap<String, Arc<NodeRow>> =
        nodes.into_iter().map(|node| (node.name.clone(), Arc::new(node))).collect();
    let lookup = |name: &str| nodes.get(name).cloned();
    let budget = remaining_budget(stack, context.budget_limit);
    let mut outputs = Vec::new();
    for (name, output) in &template.outputs {
        let scope = StackScope::new(stack, &lookup, Some(&budget));
        let (value, error) = match output.value.evaluate(&scope) {
            Ok(value) => {
                // Only the handles this output reads: supplied values never render a token.
                let handles = scope.placed.borrow();
                let servers = scope.placed_servers.borrow();
                let placed: Vec<String> = handles
                    .iter()
                    .map(|id| secrets::placed(Purpose::Handle, id))
                    .chain(servers.iter().map(|id| secrets::placed(Purpose::Server, id)))
                    .collect();
                let rendered = context.key.render_at(&value.to_string(), &placed, Some(context.public_url));
                (serde_json::from_str(&rendered).unwrap_or(value), None)
            }
            Err(EvalError::NotReady { resource, .. }) => (Value::Null, Some(format!("{resource} is not complete"))),
            Err(EvalError::Invalid { message } | EvalError::HiddenInvalid { message }) => (Value::Null, Some(message)),
            Err(error @ EvalError::OverBudget { .. }) => (Value::Null, Some(error.to_string())),
        };
        outputs.push(StackOutput { name: name.clone(), description: output.description.clone(), value, error });
    }
    outputs
}

/// A deployment group's failure budget (from its stored policies), the members that failed in
/// its traversal, and its batch and pause (from its record); `None` for any other resource.
/// `time` formats a stored time.
pub fn group_progress(node: &NodeRow, time: &impl Fn(u64) -> String) -> Option<GroupProgress> {
    let group_types = [ResourceType::SoftwareDeploymentGroup, ResourceType::StructuredDeploymentGroup];
    if !node::resource_type(node).is_some_and(|kind| group_types.contains(&kind)) {
        return None;
    }
    let budget = Policies::from_json(node.definition.get("policies")).failure_budget;
    let record = &node.record;
    let prefix = format!("{}/", node.name);
    let failed_members: Vec<String> =
        record.failed_members.iter().map(|name| name.strip_prefix(&prefix).unwrap_or(name).to_string()).collect();
    let members = record.members.len() as u64;
    // `batches` holds those not released yet: with the one being released, all of them.
    let batches = record.batch.saturating_add(u32::try_from(record.batches.len()).unwrap_or(u32::MAX));
    let rolling = record.batch > 0 && batches > 1;
    // The pause a failed group was in never ends in a next batch.
    let pausing = !record.batches.is_empty() && node.state != NodeState::Failed;
    Some(GroupProgress {
        members,
        max_failures: budget.and_then(|budget| budget.max_failures),
        max_failure_percentage: budget.and_then(|budget| budget.max_failure_percentage),
        within_budget: budget.map(|budget| budget.tolerates(failed_members.len() as u64, members)),
        failed_members,
        batch: rolling.then_some(record.batch),
        batches: rolling.then_some(batches),
        pause_until: record.pause_until.filter(|_| pausing).map(time),
    })
}
