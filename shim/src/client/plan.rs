//! `stack create|update --dry-run`: the shim's plan of the request (`POST`/`PUT
//! /v1/stacks/{name}/preview`), printed for a human or as the API's JSON, with Terraform's
//! detailed exit status: 0 nothing would change, 2 something would, 1 an error.

use std::fmt::Write as _;
use std::io::Write;

use reqwest::Method;
use serde_json::Value;

use super::http::AdminClient;
use super::render::printable;
use super::{ClientError, ExitStatus, write};
use super::{decode, pretty};
use crate::model::{Action, PlannedResource, StackPlan};

/// How the plan is asked for and shown: `--show-nested` (the group members among the resource
/// changes), `--json` (the API's answer as it came).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Shown {
    pub show_nested: bool,
    pub json: bool,
}

pub(crate) async fn preview(
    client: &AdminClient,
    name: &str,
    action: Action,
    body: &Value,
    shown: Shown,
    out: &mut dyn Write,
) -> Result<ExitStatus, ClientError> {
    let method = if action == Action::Create { Method::POST } else { Method::PUT };
    let query = match shown.show_nested {
        true => vec![("show_nested", "true".to_string())],
        false => Vec::new(),
    };
    let value = client.request_query(method, &["v1", "stacks", name, "preview"], &query, Some(body)).await?;
    let plan: StackPlan = decode(value.clone(), "stacks/{name}/preview")?;
    write(out, &if shown.json { pretty(&value) } else { render(&plan) })?;
    Ok(if plan.changes { ExitStatus::Changes } else { ExitStatus::Success })
}

/// The plan as lines: the resource counts, each change (`+` added, `-` deleted, `±` replaced,
/// `~` updated), then the runs step by step with their batches and pauses, then the outcome.
pub(crate) fn render(plan: &StackPlan) -> String {
    let changes = &plan.resource_changes;
    let mut text = format!(
        "plan for stack {} ({}): {} to add, {} to replace, {} to update, {} to delete, {} unchanged\n",
        printable(&plan.stack),
        plan.action,
        changes.added.len(),
        changes.replaced.len(),
        changes.updated.len(),
        changes.deleted.len(),
        changes.unchanged.len()
    );
    let marked = [("+", &changes.added), ("±", &changes.replaced), ("~", &changes.updated), ("-", &changes.deleted)];
    for (mark, resources) in marked {
        for PlannedResource { resource_name, resource_type, parent_resource } in resources.iter() {
            // A member as runs and events name it: `group/member`.
            let name = match parent_resource {
                Some(parent) => format!("{parent}/{resource_name}"),
                None => resource_name.clone(),
            };
            let _ = writeln!(text, "  {mark} {} ({})", printable(&name), printable(resource_type));
        }
    }
    if plan.runs.is_empty() {
        text.push_str("no deployment would run\n");
    } else {
        let _ = writeln!(text, "{} deployment run(s):", plan.runs.len());
    }
    let mut step = 0;
    for run in &plan.runs {
        if run.step != step {
            step = run.step;
            let _ = writeln!(text, "  step {step}:");
        }
        let batch = match (&run.group, run.batch) {
            (Some(group), Some(batch)) => format!(" [{} batch {batch}]", printable(group)),
            _ => String::new(),
        };
        let changed = match run.changed.is_empty() {
            true => String::new(),
            false => format!(" changes: {}", printable(&run.changed.join(", "))),
        };
        let _ = writeln!(
            text,
            "    {} {} on {}{batch}{changed}",
            run.action,
            printable(&run.resource),
            printable(&run.server)
        );
    }
    for group in &plan.groups {
        let _ = writeln!(
            text,
            "  group {} runs in {} batches, {} s apart",
            printable(&group.group),
            group.batches,
            group.pause_secs
        );
    }
    let _ = writeln!(text, "then the stack would be {}: {}", plan.outcome, printable(&plan.outcome_reason));
    text
}
