//! `--wait`: polls `GET /v1/stacks/{name}` until the stack's status for the action just asked
//! for is COMPLETE or FAILED, printing a line whenever the stack's or a resource's status
//! changes. A 404 while waiting for a delete means the delete completed. Brief outages of the
//! server (connection refused, 5xx: a restart) are ridden out; other errors end the wait.

use std::collections::HashMap;
use std::io::Write;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::Value;

use super::http::AdminClient;
use super::live::LiveLine;
use super::render;
use super::{ClientError, ExitStatus, write};
use crate::model::{Action, StackDetail, StackSummary};

/// How long the server may stay unreachable (or answer 5xx) before the wait gives up.
const OUTAGE_LIMIT: Duration = Duration::from_secs(60);

/// What to wait for and how.
#[derive(Debug, Clone)]
pub(crate) struct WaitRequest<'a> {
    pub stack: &'a str,
    pub action: Action,
    pub timeout: Option<Duration>,
    pub interval: Duration,
    /// Print the final stack as JSON instead of progress lines.
    pub json: bool,
    /// Draw the live progress line on stderr (it is a terminal).
    pub live: bool,
}

/// Where a stack status stands relative to the action waited for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Standing {
    InProgress,
    Complete,
    Failed,
}

pub(crate) async fn wait_for_stack(
    client: &AdminClient,
    request: &WaitRequest<'_>,
    out: &mut dyn Write,
) -> Result<ExitStatus, ClientError> {
    let started = Instant::now();
    let live = LiveLine::new(request.live && !request.json);
    let mut progress = Progress::default();
    let mut outage_since: Option<Instant> = None;
    let mut last: Option<Value> = None;
    loop {
        // The outputs are not evaluated for a poll (Heat's resolve_outputs): only --json's
        // final answer shows them, read once at the end.
        let unresolved = [("resolve_outputs", "false".to_string())];
        match client.get_query(&["v1", "stacks", request.stack], &unresolved).await {
            Ok(value) => {
                outage_since = None;
                let detail: StackDetail = decode(value.clone())?;
                if !request.json {
                    live.print(&progress.report(&detail, request.action), out)?;
                    live.update(&detail, started.elapsed());
                }
                last = Some(value);
                match standing(&detail.summary, request.action) {
                    Standing::InProgress => {}
                    Standing::Complete => {
                        live.finish();
                        let last = with_outputs(client, request, last).await;
                        return finish(request, last.as_ref(), ExitStatus::Success, out);
                    }
                    Standing::Failed => {
                        live.finish();
                        let last = with_outputs(client, request, last).await;
                        return finish(request, last.as_ref(), ExitStatus::Failed, out);
                    }
                }
            }
            Err(error) if request.action == Action::Delete && error.is_not_found() => {
                live.finish();
                if !request.json {
                    write(out, &render::progress_line(&now_rfc3339(), request.stack, "DELETE_COMPLETE", ""))?;
                }
                return Ok(ExitStatus::Success);
            }
            Err(error) if is_transient(&error) => {
                let since = *outage_since.get_or_insert_with(Instant::now);
                if since.elapsed() >= OUTAGE_LIMIT {
                    return Err(error);
                }
            }
            Err(error) => return Err(error),
        }
        let mut pause = request.interval;
        if let Some(timeout) = request.timeout {
            let elapsed = started.elapsed();
            if elapsed >= timeout {
                live.finish();
                let last = with_outputs(client, request, last).await;
                return timed_out(request, timeout, last.as_ref(), &progress, out);
            }
            pause = pause.min(timeout - elapsed);
        }
        tokio::time::sleep(pause).await;
    }
}

/// With --json, the stack as `stack show` gives it, outputs resolved (the last poll's answer
/// when it cannot be read now); otherwise the last poll's answer, which nothing prints.
async fn with_outputs(client: &AdminClient, request: &WaitRequest<'_>, last: Option<Value>) -> Option<Value> {
    if !request.json {
        return last;
    }
    client.get(&["v1", "stacks", request.stack]).await.ok().or(last)
}

fn finish(
    request: &WaitRequest<'_>,
    last: Option<&Value>,
    status: ExitStatus,
    out: &mut dyn Write,
) -> Result<ExitStatus, ClientError> {
    if request.json {
        print_json(last, out)?;
    }
    Ok(status)
}

fn timed_out(
    request: &WaitRequest<'_>,
    timeout: Duration,
    last: Option<&Value>,
    progress: &Progress,
    out: &mut dyn Write,
) -> Result<ExitStatus, ClientError> {
    if request.json {
        print_json(last, out)?;
    } else {
        let status = progress.stack_status.as_deref().unwrap_or("unknown");
        let line = format!(
            "timed out after {} s waiting for stack {} (last status {})\n",
            timeout.as_secs(),
            render::printable(request.stack),
            render::printable(status)
        );
        write(out, &line)?;
    }
    Ok(ExitStatus::Failed)
}

fn print_json(value: Option<&Value>, out: &mut dyn Write) -> Result<(), ClientError> {
    if let Some(value) = value {
        let text = serde_json::to_string_pretty(value).unwrap_or_else(|_| value.to_string());
        write(out, &format!("{text}\n"))?;
    }
    Ok(())
}

/// `CREATE_COMPLETE` while waiting for CREATE is Complete. A create or update that failed
/// with its rollback due goes on (its rollback follows), and the rollback's end is the end of
/// the wait: FAILED, the create or update did not complete. Any status of another action (the
/// previous one, still shown right after an update was accepted) is InProgress.
fn standing(summary: &StackSummary, action: Action) -> Standing {
    let status = summary.status.as_str();
    let (prefix, standing) = if let Some(prefix) = status.strip_suffix("_COMPLETE") {
        (prefix, Standing::Complete)
    } else if let Some(prefix) = status.strip_suffix("_FAILED") {
        (prefix, Standing::Failed)
    } else {
        return Standing::InProgress;
    };
    let rolls_back = matches!(action, Action::Create | Action::Update);
    if prefix == action.as_str() {
        match standing {
            Standing::Failed if rolls_back && summary.rollback_due => Standing::InProgress,
            other => other,
        }
    } else if rolls_back && prefix == Action::Rollback.as_str() {
        Standing::Failed
    } else {
        Standing::InProgress
    }
}

fn is_transient(error: &ClientError) -> bool {
    match error {
        ClientError::Connect { .. } | ClientError::Request { .. } => true,
        ClientError::Api { status, .. } => *status >= 500,
        _ => false,
    }
}

/// The statuses already printed, so only changes are.
#[derive(Debug, Default)]
struct Progress {
    stack_status: Option<String>,
    resources: HashMap<String, String>,
}

impl Progress {
    /// The lines of what changed since the last poll: a new stack status first (last when it
    /// is the final one), then each resource whose status changed, in the API's order.
    fn report(&mut self, detail: &StackDetail, action: Action) -> String {
        let summary = &detail.summary;
        let stack_changed = self.stack_status.as_deref() != Some(summary.status.as_str());
        let stack_line =
            render::progress_line(&summary.updated_at, &summary.name, &summary.status, &summary.status_reason);
        let stack_is_final = standing(summary, action) != Standing::InProgress;
        let mut text = String::new();
        if stack_changed && !stack_is_final {
            text.push_str(&stack_line);
        }
        for resource in &detail.resources {
            if self.resources.get(&resource.name) != Some(&resource.status) {
                text.push_str(&render::progress_line(
                    &resource.updated_at,
                    &resource.name,
                    &resource.status,
                    &resource.status_reason,
                ));
                self.resources.insert(resource.name.clone(), resource.status.clone());
            }
        }
        if stack_changed && stack_is_final {
            text.push_str(&stack_line);
        }
        self.stack_status = Some(summary.status.clone());
        text
    }
}

fn decode<T: serde::de::DeserializeOwned>(value: Value) -> Result<T, ClientError> {
    serde_json::from_value(value).map_err(|error| ClientError::Response {
        url: "GET /v1/stacks/{name}".to_string(),
        reason: format!("not a stack: {error}"),
    })
}

/// The current UTC time of day as an RFC 3339 stamp for `render::clock` (the delete-complete
/// line has no server time stamp; the date part is not shown, so it is not computed).
fn now_rfc3339() -> String {
    let seconds = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |elapsed| elapsed.as_secs());
    let time_of_day = seconds % 86_400;
    format!("1970-01-01T{:02}:{:02}:{:02}Z", time_of_day / 3600, time_of_day % 3600 / 60, time_of_day % 60)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stack(status: &str, rollback_due: bool) -> StackSummary {
        StackSummary {
            name: "s".into(),
            id: "id".into(),
            status: status.into(),
            status_reason: String::new(),
            created_at: String::new(),
            updated_at: String::new(),
            disable_rollback: !rollback_due,
            rollback_due,
        }
    }

    fn of(status: &str, action: Action) -> Standing {
        standing(&stack(status, false), action)
    }

    #[test]
    fn standing_follows_the_action() {
        assert_eq!(of("CREATE_IN_PROGRESS", Action::Create), Standing::InProgress);
        assert_eq!(of("CREATE_COMPLETE", Action::Create), Standing::Complete);
        assert_eq!(of("CREATE_FAILED", Action::Create), Standing::Failed);
        assert_eq!(of("CREATE_COMPLETE", Action::Update), Standing::InProgress);
        assert_eq!(of("UPDATE_FAILED", Action::Update), Standing::Failed);
        assert_eq!(of("DELETE_FAILED", Action::Delete), Standing::Failed);
    }

    #[test]
    fn a_failure_whose_rollback_is_due_waits_for_the_rollback() {
        assert_eq!(standing(&stack("UPDATE_FAILED", true), Action::Update), Standing::InProgress);
        assert_eq!(of("ROLLBACK_IN_PROGRESS", Action::Update), Standing::InProgress);
        assert_eq!(of("ROLLBACK_COMPLETE", Action::Update), Standing::Failed, "the update did not complete");
        assert_eq!(of("ROLLBACK_FAILED", Action::Create), Standing::Failed);
        // `stack cancel --wait` waits for the rollback itself.
        assert_eq!(of("ROLLBACK_COMPLETE", Action::Rollback), Standing::Complete);
        assert_eq!(of("ROLLBACK_FAILED", Action::Rollback), Standing::Failed);
        assert_eq!(of("UPDATE_FAILED", Action::Rollback), Standing::InProgress);
        assert_eq!(of("ROLLBACK_COMPLETE", Action::Delete), Standing::InProgress);
    }

    #[test]
    fn now_is_a_clock_time() {
        let now = now_rfc3339();
        assert_eq!(render::clock(&now).len(), 8, "{now}");
    }
}
