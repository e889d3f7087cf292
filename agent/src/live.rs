//! What a person at a terminal sees change: `once`'s progress line (deployments by journal
//! state and what is running, for how long, redrawn in place on stderr while the cycle runs) and
//! `status --watch` (the status table redrawn every few seconds until Ctrl-C). Both only read
//! the journal, as `status` does; off a terminal `once` prints no line and `status --watch`
//! prints one table (or JSON document) per interval.

use std::io::Write;
use std::path::Path;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::clock::now_millis;
use crate::journal::{Entry, Journal, State};
use crate::status::{StatusRow, read_status, render_text};

/// How often `once`'s line is redrawn.
const LINE_INTERVAL: Duration = Duration::from_millis(250);

/// `once: 2 done, 1 running (install-db 12s), 3 waiting, 0 failed`.
pub(crate) fn once_line(entries: &[Entry], now: u64) -> String {
    let count = |states: &[State]| entries.iter().filter(|entry| states.contains(&entry.state)).count();
    let done = count(&[State::Finished, State::Signalled, State::Skipped]);
    let waiting = count(&[State::Seen, State::Waiting]);
    let failed =
        entries.iter().filter(|entry| entry.outcome.as_deref().is_some_and(|outcome| outcome != "COMPLETE")).count();
    let running: Vec<String> = entries
        .iter()
        .filter(|entry| entry.state == State::Started)
        .map(|entry| {
            let name = entry.name.as_deref().unwrap_or(&entry.id);
            let since = entry.run.as_ref().map_or(now, |run| run.started_at);
            format!("{} {}s", printable(name), now.saturating_sub(since) / 1000)
        })
        .collect();
    let running = if running.is_empty() {
        "0 running".to_string()
    } else {
        format!("{} running ({})", running.len(), running.join(", "))
    };
    format!("once: {done} done, {running}, {waiting} waiting, {failed} failed")
}

/// A name as one short line: control characters (which could move the cursor) become `?`.
fn printable(text: &str) -> String {
    text.chars().take(60).map(|ch| if ch.is_control() { '?' } else { ch }).collect()
}

/// Redraws `once`'s line on stderr until `stop`, then erases it.
pub async fn show_once_progress(state_dir: &Path, stop: CancellationToken) {
    let mut stderr = std::io::stderr();
    loop {
        if let Ok(entries) = Journal::open(state_dir).and_then(|journal| journal.load_all()) {
            let _ = write!(stderr, "\r\x1b[K{}", once_line(&entries, now_millis()));
            let _ = stderr.flush();
        }
        tokio::select! {
            () = stop.cancelled() => break,
            () = tokio::time::sleep(LINE_INTERVAL) => {}
        }
    }
    let _ = write!(stderr, "\r\x1b[K");
    let _ = stderr.flush();
}

/// How `status --watch` shows each round.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WatchFormat {
    /// The table, redrawn in place (the screen cleared first).
    Terminal,
    /// The table, one after the other.
    Text,
    /// One JSON array per line.
    Json,
}

/// `status --watch`: every `interval` until `shutdown`. Returns how the last read failed, if
/// it did (a journal that cannot be read ends the watch).
pub async fn watch_status(
    state_dir: &Path,
    format: WatchFormat,
    interval: Duration,
    shutdown: CancellationToken,
    out: &mut dyn Write,
) -> Result<(), crate::journal::JournalError> {
    loop {
        let rows = read_status(state_dir)?;
        let _ = out.write_all(round(&rows, format, now_millis()).as_bytes());
        let _ = out.flush();
        tokio::select! {
            () = shutdown.cancelled() => return Ok(()),
            () = tokio::time::sleep(interval) => {}
        }
    }
}

fn round(rows: &[StatusRow], format: WatchFormat, now: u64) -> String {
    match format {
        WatchFormat::Json => serde_json::to_string(rows).map(|text| text + "\n").unwrap_or_default(),
        WatchFormat::Text => render_text(rows) + "\n",
        WatchFormat::Terminal => {
            let clock = anneal_protocol::dates::rfc3339(now);
            format!("\x1b[H\x1b[2Janneal-agent status at {clock} (Ctrl-C ends)\n\n{}", render_text(rows))
        }
    }
}

#[cfg(test)]
mod tests;
