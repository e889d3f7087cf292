//! Heat's operator verbs on failed resources: the failures list (`stack failures`, read from
//! the stored nodes) and mark-unhealthy (a deployment made to run again on the next update).

use serde_json::Value;

use super::context::Context;
use super::error::EngineError;
use super::node::{self, status};
use super::secrets::neutralise;
use crate::model::Failure;
use crate::store::{Action, NodeRow, NodeState, RunOutcome, StackRow, State};

/// The reason a mark without one of its own shows (Heat's default text).
const MARKED_REASON: &str = "state changed by resource mark unhealthy API";

/// The stack's failed resources, in resource order. A failed group is left out when any of its
/// members is listed (Heat lists a failed nested stack's failed resources instead of it).
pub fn list(stack: &StackRow, nodes: &[NodeRow]) -> Vec<Failure> {
    let failed: Vec<&NodeRow> = nodes.iter().filter(|node| node.state == NodeState::Failed).collect();
    let groups_with_failed_members: Vec<&str> = failed.iter().filter_map(|node| node::group_of(node)).collect();
    failed
        .into_iter()
        .filter(|node| !groups_with_failed_members.contains(&node.name.as_str()))
        .map(|node| failure(stack, node))
        .collect()
}

fn failure(stack: &StackRow, node: &NodeRow) -> Failure {
    let text = |key: &str| node.attributes.get(key).and_then(Value::as_str).map(str::to_string);
    let deployment = node::is_deployment(node);
    Failure {
        resource: node.name.clone(),
        path: format!("{}.{}", stack.name, node.name.replace('/', ".")),
        resource_type: node.resource_type.clone(),
        physical_resource_id: node.record.id.clone(),
        status: status(node.action, node.state),
        status_reason: node.status_reason.clone(),
        server: node.server.clone(),
        deploy_status_code: if deployment { node.attributes.get("deploy_status_code").cloned() } else { None }
            .unwrap_or(Value::Null),
        deploy_stdout: deployment.then(|| text("deploy_stdout")).flatten(),
        deploy_stderr: deployment.then(|| text("deploy_stderr")).flatten(),
    }
}

/// Marks deployment `resource` of stack `name` unhealthy (or with `reset`, takes the mark back).
pub fn mark_unhealthy(
    ctx: &mut Context<'_>,
    name: &str,
    resource: &str,
    reason: Option<String>,
    reset: bool,
) -> Result<(), EngineError> {
    let Some(stack) = ctx.tx.stack(name)? else {
        return Err(EngineError::NotFound { what: format!("stack {name}") });
    };
    if stack.state == State::InProgress {
        let message = format!(
            "stack {name} is {}: mark a resource unhealthy once it is not in progress",
            status(stack.action, stack.state)
        );
        return Err(EngineError::InUse { message });
    }
    let Some(mut node) = ctx.tx.node(name, resource)? else {
        return Err(EngineError::NotFound { what: format!("resource {resource} of stack {name}") });
    };
    if !node::is_deployment(&node) {
        let message = format!(
            "resource {resource} is an {}: only a deployment (or a deployment group's member) can be marked unhealthy",
            node.resource_type
        );
        return Err(EngineError::Invalid { message });
    }
    let marked = node.action == Action::Check && node.state == NodeState::Failed;
    match (reset, marked) {
        // Nothing to take back, or marked already with no new reason: as asked already.
        (true, false) => return Ok(()),
        (false, true) if reason.is_none() => return Ok(()),
        (true, true) => unmark(&mut node),
        (false, _) => {
            if !marked {
                let shown = node::shown_status(&node);
                node.record.previous_status = shown.ends_with("_COMPLETE").then_some(shown);
            }
            node.action = Action::Check;
            node.state = NodeState::Failed;
            // Supplied text never carries a token placeholder into stored values (see `secrets`).
            node.status_reason =
                reason.map_or_else(|| MARKED_REASON.to_string(), |given| neutralise(&given).into_owned());
            node.record.outcome = Some(RunOutcome::Failed);
        }
    }
    node.updated_at = ctx.now;
    ctx.tx.update_node(&node)?;
    ctx.event(name, resource, &status(node.action, node.state), &node.status_reason)
}

/// Takes a mark back: the status it had before (an unknown one: CREATE_COMPLETE).
fn unmark(node: &mut NodeRow) {
    let before = node.record.previous_status.take().unwrap_or_else(|| "CREATE_COMPLETE".into());
    let action = before.strip_suffix("_COMPLETE").and_then(Action::parse).unwrap_or(Action::Create);
    node.action = action;
    node.state = NodeState::Complete;
    node.status_reason = "mark unhealthy reset".into();
    node.record.outcome = Some(RunOutcome::Complete);
}
