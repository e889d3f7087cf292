//! The live progress line of `--wait` on a terminal (indicatif, on stderr): resources by phase,
//! the deployments that have been running longest (and on which server), and the time waited,
//! redrawn in place; the event lines are printed above it as they come. Off a terminal there
//! is no line and the event lines are all there is, as before.

use std::io::Write;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use super::{ClientError, write};
use crate::dates::parse_rfc3339_millis;
use crate::model::StackDetail;

/// How many of the longest-running deployments the line names.
const SLOWEST: usize = 3;

pub(crate) struct LiveLine {
    bar: Option<ProgressBar>,
}

impl LiveLine {
    /// A line on stderr when `enabled` (stderr is a terminal and the output is not JSON).
    pub(crate) fn new(enabled: bool) -> LiveLine {
        if !enabled {
            return LiveLine { bar: None };
        }
        let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
        bar.set_style(
            ProgressStyle::with_template("{spinner} {msg}").unwrap_or_else(|_| ProgressStyle::default_spinner()),
        );
        bar.enable_steady_tick(Duration::from_millis(120));
        LiveLine { bar: Some(bar) }
    }

    /// Prints `text` (event lines) to `out` above the live line.
    pub(crate) fn print(&self, text: &str, out: &mut dyn Write) -> Result<(), ClientError> {
        if text.is_empty() {
            return Ok(());
        }
        match &self.bar {
            Some(bar) => bar.suspend(|| write(out, text)),
            None => write(out, text),
        }
    }

    pub(crate) fn update(&self, detail: &StackDetail, waited: Duration) {
        if let Some(bar) = &self.bar {
            bar.set_message(summary(detail, waited, now_millis()));
        }
    }

    /// Removes the line (the wait is over).
    pub(crate) fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

impl Drop for LiveLine {
    fn drop(&mut self) {
        self.finish();
    }
}

/// `stack: 3 complete, 2 in progress, 1 waiting, 0 failed · running longest: app on vm2 42s · 1m12s`.
pub(crate) fn summary(detail: &StackDetail, waited: Duration, now_millis: u64) -> String {
    let (mut complete, mut running, mut waiting, mut failed) = (0, 0, 0, 0);
    let mut slowest: Vec<(u64, String)> = Vec::new();
    for resource in &detail.resources {
        let status = resource.status.as_str();
        if status == "INIT_COMPLETE" {
            waiting += 1;
        } else if status.ends_with("_COMPLETE") {
            complete += 1;
        } else if status.ends_with("_FAILED") {
            failed += 1;
        } else {
            running += 1;
            if let Some(server) = &resource.server {
                let since = parse_rfc3339_millis(&resource.updated_at).unwrap_or(now_millis);
                let name = super::render::printable(&resource.name);
                slowest.push((
                    now_millis.saturating_sub(since),
                    format!("{name} on {}", super::render::printable(server)),
                ));
            }
        }
    }
    slowest.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
    let mut line = format!(
        "{}: {complete} complete, {running} in progress, {waiting} waiting, {failed} failed",
        super::render::printable(&detail.summary.name)
    );
    if !slowest.is_empty() {
        let named: Vec<String> = slowest
            .iter()
            .take(SLOWEST)
            .map(|(age, name)| format!("{name} {}", clock(Duration::from_millis(*age))))
            .collect();
        line.push_str(&format!(" · running longest: {}", named.join(", ")));
    }
    line.push_str(&format!(" · {}", clock(waited)));
    line
}

/// `42s`, `3m05s`, `1h02m`.
fn clock(duration: Duration) -> String {
    let seconds = duration.as_secs();
    match seconds {
        0..60 => format!("{seconds}s"),
        60..3600 => format!("{}m{:02}s", seconds / 60, seconds % 60),
        _ => format!("{}h{:02}m", seconds / 3600, seconds % 3600 / 60),
    }
}

fn now_millis() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |since| since.as_millis() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{ResourceSummary, StackSummary};

    fn resource(name: &str, status: &str, server: Option<&str>, updated_at: &str) -> ResourceSummary {
        ResourceSummary {
            name: name.into(),
            resource_type: "OS::Heat::SoftwareDeployment".into(),
            status: status.into(),
            status_reason: String::new(),
            server: server.map(str::to_string),
            updated_at: updated_at.into(),
        }
    }

    #[test]
    fn the_line_counts_phases_and_names_the_longest_running_deployments() {
        let stack = StackSummary {
            name: "web".into(),
            id: "x".into(),
            status: "CREATE_IN_PROGRESS".into(),
            status_reason: String::new(),
            created_at: String::new(),
            updated_at: String::new(),
            disable_rollback: true,
            rollback_due: false,
        };
        let detail = StackDetail {
            summary: stack,
            parameters: Default::default(),
            outputs: Vec::new(),
            resources: vec![
                resource("config", "CREATE_COMPLETE", None, "2026-01-01T00:00:00Z"),
                resource("app", "CREATE_IN_PROGRESS", Some("vm2"), "2026-01-01T00:00:00Z"),
                resource("db", "CREATE_IN_PROGRESS", Some("vm3"), "2026-01-01T00:00:30Z"),
                resource("later", "INIT_COMPLETE", None, "2026-01-01T00:00:00Z"),
                resource("broken", "CREATE_FAILED", Some("vm1"), "2026-01-01T00:00:00Z"),
            ],
        };
        let now = parse_rfc3339_millis("2026-01-01T00:01:12Z").unwrap();
        let line = summary(&detail, Duration::from_secs(75), now);
        assert_eq!(
            line,
            "web: 1 complete, 2 in progress, 1 waiting, 1 failed · running longest: app on vm2 1m12s, db on vm3 42s · 1m15s"
        );
        assert_eq!(clock(Duration::from_secs(3720)), "1h02m");
    }
}
