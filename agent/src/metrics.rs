//! The agent's metrics as a node_exporter textfile (`[agent] metrics_textfile`, a `*.prom` file
//! in the collector's directory): agents should not listen on a port, so node_exporter serves
//! them. Written in the classic Prometheus text format, which is what node_exporter's textfile
//! collector reads (prometheus-client writes only OpenMetrics, whose `_total` and `# EOF` rules
//! that collector does not follow), from what the journal holds: deployments by state, failed
//! runs, the hook run time histogram, signals pending and failed, and when a metadata source
//! last answered. The file is replaced atomically, so node_exporter never reads half of one.

use std::fmt::Write as _;
use std::io::{self, Write as _};
use std::path::Path;

use crate::journal::{Entry, State};

/// Upper bounds (seconds) of the hook run time buckets: hooks run from milliseconds (a
/// json-file) to an hour (a package upgrade).
const DURATION_BUCKETS: [f64; 11] = [0.1, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0, 3600.0];

const STATES: [State; 6] =
    [State::Seen, State::Waiting, State::Started, State::Finished, State::Signalled, State::Skipped];

/// The textfile for the journal's `entries`; `last_poll_ms` is when a metadata source last
/// answered (0: not since the agent started).
pub(crate) fn render(entries: &[Entry], last_poll_ms: u64) -> String {
    let mut out = String::new();
    family(&mut out, "anneal_agent_deployments", "gauge", "Deployments in the journal by state.");
    for state in STATES {
        let count = entries.iter().filter(|entry| entry.state == state).count();
        let _ = writeln!(out, "anneal_agent_deployments{{state=\"{}\"}} {count}", state.as_str());
    }
    let failed =
        entries.iter().filter(|entry| entry.outcome.as_deref().is_some_and(|outcome| outcome != "COMPLETE")).count();
    family(&mut out, "anneal_agent_deployments_failed", "gauge", "Deployments whose last run Heat would mark FAILED.");
    let _ = writeln!(out, "anneal_agent_deployments_failed {failed}");
    durations(&mut out, entries);
    let signals = entries.iter().filter_map(|entry| entry.signal.as_ref());
    let (mut pending, mut given_up) = (0, 0);
    for signal in signals {
        if signal.permanent_failure.is_some() {
            given_up += 1;
        } else if signal.delivered_at.is_none() && signal.transport != "none" {
            pending += 1;
        }
    }
    family(&mut out, "anneal_agent_signals_pending", "gauge", "Signals not yet delivered (the outbox retries them).");
    let _ = writeln!(out, "anneal_agent_signals_pending {pending}");
    family(&mut out, "anneal_agent_signals_failed", "gauge", "Signals the engine refused for good.");
    let _ = writeln!(out, "anneal_agent_signals_failed {given_up}");
    family(
        &mut out,
        "anneal_agent_last_successful_poll_timestamp_seconds",
        "gauge",
        "When a metadata source last answered (unix time; 0: not since the agent started).",
    );
    let _ = writeln!(out, "anneal_agent_last_successful_poll_timestamp_seconds {}", seconds(last_poll_ms));
    out
}

fn family(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

/// `anneal_agent_hook_duration_seconds` over the runs the journal remembers.
fn durations(out: &mut String, entries: &[Entry]) {
    let name = "anneal_agent_hook_duration_seconds";
    family(out, name, "histogram", "Run time of the hooks of the deployments in the journal.");
    let runs: Vec<u64> = entries.iter().filter_map(|entry| entry.run.as_ref()?.duration_ms).collect();
    for bound in DURATION_BUCKETS {
        let within = runs.iter().filter(|run| **run as f64 / 1000.0 <= bound).count();
        let _ = writeln!(out, "{name}_bucket{{le=\"{bound}\"}} {within}");
    }
    let _ = writeln!(out, "{name}_bucket{{le=\"+Inf\"}} {}", runs.len());
    // Summed in milliseconds: exact, where adding seconds as floats is not.
    let _ = writeln!(out, "{name}_sum {}", seconds(runs.iter().sum()));
    let _ = writeln!(out, "{name}_count {}", runs.len());
}

fn seconds(milliseconds: u64) -> String {
    format!("{}.{:03}", milliseconds / 1000, milliseconds % 1000)
}

/// Replaces `path` with `text`: a temporary file beside it (`.<name>.tmp`, which the textfile
/// collector ignores), mode 0644, renamed over the old one. The temporary file is made anew
/// (`O_EXCL`, after removing any left over): whoever may write the directory cannot make the
/// agent write through a symbolic link planted there.
pub(crate) fn write(path: &Path, text: &str) -> io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let name = path.file_name().ok_or_else(|| io::Error::other("the path names no file"))?;
    let temporary = path.with_file_name(format!(".{}.tmp", name.to_string_lossy()));
    match std::fs::remove_file(&temporary) {
        Ok(()) => {}
        Err(error) if error.kind() == io::ErrorKind::NotFound => {}
        Err(error) => return Err(error),
    }
    let mut file = std::fs::OpenOptions::new().write(true).create_new(true).mode(0o644).open(&temporary)?;
    file.write_all(text.as_bytes())?;
    file.sync_all()?;
    drop(file);
    std::fs::rename(&temporary, path)
}

#[cfg(test)]
mod tests;
