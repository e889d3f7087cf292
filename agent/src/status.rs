//! `anneal-agent status`: what the journal says about every deployment it has seen, as a table
//! for people or JSON for tools. Reads only; never changes state.

use std::path::Path;

use serde::Serialize;
use serde_json::Value;

use crate::journal::{Entry, Journal, JournalError, State};

/// One deployment as `status` shows it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StatusRow {
    pub(crate) id: String,
    pub(crate) name: Option<String>,
    pub(crate) group: String,
    pub(crate) state: State,
    /// `COMPLETE` or `FAILED: <reason>` once finished.
    pub(crate) outcome: Option<String>,
    pub(crate) exit_code: Option<Value>,
    pub(crate) duration_ms: Option<u64>,
    /// `delivered`, `pending (N attempts: last error)`, `failed permanently: ...`, `not needed`, or empty.
    pub(crate) signal: String,
    /// Why it waits or was skipped.
    pub(crate) reason: Option<String>,
    pub(crate) seen_at: u64,
}

/// Every journaled deployment, oldest first. A state dir that does not exist yet has none.
pub fn read_status(state_dir: &Path) -> Result<Vec<StatusRow>, JournalError> {
    if !state_dir.join("journal").exists() {
        return Ok(Vec::new());
    }
    let journal = Journal::open(state_dir)?;
    let mut rows: Vec<StatusRow> = journal.load_all()?.iter().map(row).collect();
    rows.sort_by(|a, b| a.seen_at.cmp(&b.seen_at).then_with(|| a.id.cmp(&b.id)));
    Ok(rows)
}

fn row(entry: &Entry) -> StatusRow {
    StatusRow {
        id: entry.id.clone(),
        name: entry.name.clone(),
        group: entry.group.clone(),
        state: entry.state,
        outcome: entry.outcome.clone(),
        exit_code: entry.result.as_ref().and_then(|result| result.status_code().cloned()),
        duration_ms: entry.run.as_ref().and_then(|run| run.duration_ms),
        signal: signal_text(entry),
        reason: entry.waiting_reason.clone(),
        seen_at: entry.seen_at,
    }
}

fn signal_text(entry: &Entry) -> String {
    let Some(signal) = &entry.signal else { return String::new() };
    if signal.transport == "none" {
        return "not needed (NO_SIGNAL)".into();
    }
    if signal.delivered_at.is_some() {
        return "delivered".into();
    }
    if let Some(failure) = &signal.permanent_failure {
        return format!("failed permanently: {failure}");
    }
    match &signal.last_error {
        Some(error) => format!("pending ({} attempts; last error: {error})", signal.attempts),
        None => "pending".into(),
    }
}

/// The rows as an aligned text table.
pub fn render_text(rows: &[StatusRow]) -> String {
    if rows.is_empty() {
        return "no deployments seen yet\n".into();
    }
    let header = ["ID", "NAME", "GROUP", "STATE", "EXIT", "DURATION", "SIGNAL"];
    let mut table: Vec<Vec<String>> = vec![header.iter().map(|title| title.to_string()).collect()];
    for row in rows {
        let exit = row.exit_code.as_ref().map(anneal_protocol::pyjson::python_str).unwrap_or_default();
        let duration = row.duration_ms.map(|ms| format!("{:.1}s", ms as f64 / 1000.0)).unwrap_or_default();
        let state =
            serde_json::to_value(row.state).ok().and_then(|v| v.as_str().map(str::to_string)).unwrap_or_default();
        let state = match (&row.outcome, &row.reason) {
            (Some(outcome), _) if outcome.starts_with("FAILED") => format!("{state} (failed)"),
            _ => state,
        };
        table.push(vec![
            row.id.clone(),
            row.name.clone().unwrap_or_default(),
            row.group.clone(),
            state,
            exit,
            duration,
            row.signal.clone(),
        ]);
    }
    let widths: Vec<usize> = (0..header.len())
        .map(|column| table.iter().map(|line| line[column].chars().count()).max().unwrap_or(0))
        .collect();
    let mut text = String::new();
    for line in &table {
        let cells: Vec<String> = line.iter().zip(&widths).map(|(cell, width)| format!("{cell:<width$}")).collect();
        text.push_str(cells.join("  ").trim_end());
        text.push('\n');
    }
    for row in rows
        .iter()
        .filter(|row| row.reason.is_some() || row.outcome.as_deref().is_some_and(|o| o.starts_with("FAILED")))
    {
        let why = row.reason.as_deref().or(row.outcome.as_deref()).unwrap_or_default();
        text.push_str(&format!("{}: {}\n", row.id, why));
    }
    text
}
