//! Human-readable output of the client commands: aligned tables of servers, stacks, resources,
//! events and outputs, and the one-line status forms `--wait` prints. Every cell goes through
//! `printable`, so text from the server (a deployment's stdout in an output, say) cannot move
//! the cursor or inject terminal escapes. Pure formatting: no I/O.

use std::fmt::Write as _;

use serde_json::Value;

use crate::model::{Event, ServerSummary, StackDetail, StackOutput, StackSummary};

/// Columns are separated by this many spaces.
const GAP: usize = 2;

/// `text` on one line with control characters escaped (`\n`, `\t`, `\r`, `\u{1b}`).
pub fn printable(text: &str) -> String {
    let mut result = String::with_capacity(text.len());
    for character in text.chars() {
        match character {
            '\n' => result.push_str("\\n"),
            '\t' => result.push_str("\\t"),
            '\r' => result.push_str("\\r"),
            character if character.is_control() => {
                let _ = write!(result, "\\u{{{:x}}}", u32::from(character));
            }
            character => result.push(character),
        }
    }
    result
}

/// Rows (the first is the header) as left-aligned columns; trailing spaces trimmed; one `\n` per row.
pub fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let header: Vec<String> = header.iter().map(|cell| (*cell).to_string()).collect();
    let all_rows: Vec<Vec<String>> = std::iter::once(header)
        .chain(rows.iter().map(|row| row.iter().map(|cell| printable(cell)).collect()))
        .collect();
    let columns = all_rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..columns)
        .map(|column| all_rows.iter().filter_map(|row| row.get(column)).map(|cell| cell.chars().count()).max())
        .map(|width| width.unwrap_or(0))
        .collect();
    let mut text = String::new();
    for row in &all_rows {
        let mut line = String::new();
        for (cell, width) in row.iter().zip(&widths) {
            let _ = write!(line, "{cell:<width$}", width = width + GAP);
        }
        text.push_str(line.trim_end());
        text.push('\n');
    }
    text
}

/// `HH:MM:SS` of an RFC 3339 time stamp (`2026-11-21T05:00:01Z` -> `05:00:01`); anything else as is.
pub fn clock(time: &str) -> &str {
    match time.split_once('T') {
        Some((_, rest)) if rest.len() >= 8 && rest.is_char_boundary(8) => &rest[..8],
        _ => time,
    }
}

/// A JSON value in a table cell: strings bare, everything else as compact JSON.
pub fn value_cell(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

fn or_dash(text: Option<&str>) -> String {
    match text {
        Some(text) if !text.is_empty() => text.to_string(),
        _ => "-".to_string(),
    }
}

pub fn server_list(servers: &[ServerSummary]) -> String {
    let rows: Vec<Vec<String>> = servers
        .iter()
        .map(|server| {
            vec![
                server.name.clone(),
                server.created_at.clone(),
                server.metadata_version.to_string(),
                or_dash(server.last_seen.as_deref()),
            ]
        })
        .collect();
    table(&["NAME", "CREATED", "METADATA VERSION", "LAST SEEN"], &rows)
}

pub fn stack_list(stacks: &[StackSummary]) -> String {
    let rows: Vec<Vec<String>> = stacks
        .iter()
        .map(|stack| {
            vec![
                stack.name.clone(),
                stack.status.clone(),
                stack.created_at.clone(),
                stack.updated_at.clone(),
                or_dash(Some(&stack.status_reason)),
            ]
        })
        .collect();
    table(&["NAME", "STATUS", "CREATED", "UPDATED", "REASON"], &rows)
}

/// What `stack create/update/delete` print without `--wait`: `stack web: CREATE_IN_PROGRESS (id ...)`.
pub fn stack_line(stack: &StackSummary) -> String {
    let mut line =
        format!("stack {}: {} (id {})", printable(&stack.name), printable(&stack.status), printable(&stack.id));
    if !stack.status_reason.is_empty() {
        let _ = write!(line, ": {}", printable(&stack.status_reason));
    }
    line.push('\n');
    line
}

/// `stack show`: the stack's fields, its parameters (hidden ones come masked), resources, outputs.
pub fn stack_detail(detail: &StackDetail) -> String {
    let summary = &detail.summary;
    let fields = [
        ("Stack:", summary.name.as_str()),
        ("ID:", &summary.id),
        ("Status:", &summary.status),
        ("Reason:", &summary.status_reason),
        ("Created:", &summary.created_at),
        ("Updated:", &summary.updated_at),
    ];
    let mut text = String::new();
    for (label, value) in fields {
        let _ = writeln!(text, "{label:<9}{}", printable(value));
    }
    if !detail.parameters.is_empty() {
        let rows: Vec<Vec<String>> =
            detail.parameters.iter().map(|(name, value)| vec![name.clone(), value_cell(value)]).collect();
        text.push_str("\nParameters:\n");
        text.push_str(&table(&["NAME", "VALUE"], &rows));
    }
    let rows: Vec<Vec<String>> = detail
        .resources
        .iter()
        .map(|resource| {
            vec![
                resource.name.clone(),
                resource.resource_type.clone(),
                resource.status.clone(),
                or_dash(resource.server.as_deref()),
                or_dash(Some(&resource.status_reason)),
            ]
        })
        .collect();
    text.push_str("\nResources:\n");
    text.push_str(&table(&["NAME", "TYPE", "STATUS", "SERVER", "REASON"], &rows));
    text.push_str("\nOutputs:\n");
    text.push_str(&outputs(&detail.outputs));
    text
}

pub fn events(events: &[Event]) -> String {
    let rows: Vec<Vec<String>> = events
        .iter()
        .map(|event| vec![event.time.clone(), event.resource.clone(), event.status.clone(), event.reason.clone()])
        .collect();
    table(&["TIME", "RESOURCE", "STATUS", "REASON"], &rows)
}

/// An output without a value shows why (`(not available: ...)`).
pub fn outputs(outputs: &[StackOutput]) -> String {
    let rows: Vec<Vec<String>> = outputs
        .iter()
        .map(|output| {
            let value = match (&output.value, &output.error) {
                (_, Some(error)) => format!("(not available: {error})"),
                (Value::Null, None) => "(not available yet)".to_string(),
                (value, None) => value_cell(value),
            };
            vec![output.name.clone(), value]
        })
        .collect();
    table(&["NAME", "VALUE"], &rows)
}

/// A `--wait` progress line: `12:00:01 db_deploy CREATE_COMPLETE`, with `: reason` when FAILED.
pub fn progress_line(time: &str, name: &str, status: &str, reason: &str) -> String {
    let mut line = format!("{} {} {}", printable(clock(time)), printable(name), printable(status));
    if status.ends_with("_FAILED") && !reason.is_empty() {
        let _ = write!(line, ": {}", printable(reason));
    }
    line.push('\n');
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_align_and_trim() {
        let rows = vec![vec!["web".to_string(), "CREATE_COMPLETE".to_string()], vec!["a".to_string(), String::new()]];
        assert_eq!(table(&["NAME", "STATUS"], &rows), "NAME  STATUS\nweb   CREATE_COMPLETE\na\n");
        assert_eq!(table(&["NAME"], &[]), "NAME\n");
    }

    #[test]
    fn control_characters_are_escaped() {
        assert_eq!(printable("a\nb\tc\u{1b}[31m"), "a\\nb\\tc\\u{1b}[31m");
        assert_eq!(printable("ünïcode ok"), "ünïcode ok");
        let rows = vec![vec!["x\ny".to_string()]];
        assert_eq!(table(&["V"], &rows), "V\nx\\ny\n");
    }

    #[test]
    fn clock_takes_the_time_of_day() {
        assert_eq!(clock("2026-11-21T05:00:01Z"), "05:00:01");
        assert_eq!(clock("2026-11-21T05:00:01.123+02:00"), "05:00:01");
        assert_eq!(clock("yesterday"), "yesterday");
        assert_eq!(clock("xTé"), "xTé");
    }

    #[test]
    fn values_render_bare_or_as_json() {
        assert_eq!(value_cell(&Value::String("hi".into())), "hi");
        assert_eq!(value_cell(&serde_json::json!({"a": [1, true]})), r#"{"a":[1,true]}"#);
    }

    #[test]
    fn progress_lines_show_reasons_of_failures_only() {
        assert_eq!(
            progress_line("2026-01-01T12:00:01Z", "db", "CREATE_COMPLETE", "ok"),
            "12:00:01 db CREATE_COMPLETE\n"
        );
        assert_eq!(
            progress_line("2026-01-01T12:00:02Z", "db", "CREATE_FAILED", "deploy_status_code 1"),
            "12:00:02 db CREATE_FAILED: deploy_status_code 1\n"
        );
    }
}
