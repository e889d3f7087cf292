//! `anneal-agent status`: what the journal says about every deployment it has seen, and with
//! `--sources` the metadata sources in use (the config's and the self-configured ones, no
//! credential shown), as a table for people or JSON for tools. Reads only; never changes state.

use std::path::Path;

use serde::Serialize;
use serde_json::Value;

use crate::config::{Config, SourceConfig};
use crate::journal::{Entry, Journal, JournalError, State};
use crate::secret::redact_url;
use crate::selfconfig::{self, SelfConfig, SelfConfigError};

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
    let mut text = align(&table);
    for row in rows
        .iter()
        .filter(|row| row.reason.is_some() || row.outcome.as_deref().is_some_and(|o| o.starts_with("FAILED")))
    {
        let why = row.reason.as_deref().or(row.outcome.as_deref()).unwrap_or_default();
        text.push_str(&format!("{}: {}\n", row.id, why));
    }
    text
}

/// One metadata source as `status --sources` and `bootstrap` show it: where it reads, never a
/// credential (a URL as in the logs, a password or secret key as `***`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SourceRow {
    /// The name in logs and in the source cache: `source[0] http`, `os-collect-config heat`.
    pub name: String,
    pub kind: &'static str,
    /// `config` (agent.toml) or `os-collect-config` (self-configured, see docs/openstack.md).
    pub origin: &'static str,
    /// The URL (redacted) or path it reads, with the stack, resource or queue it asks for.
    pub location: String,
    /// The Keystone user id or EC2 access key id it authenticates as.
    pub user: Option<String>,
    /// `***` when it holds a password or secret key.
    pub secret: Option<&'static str>,
    pub poll_interval_secs: u64,
}

/// The sources `run` and `once` poll: the config's, then the self-configured ones persisted in
/// its state directory.
pub fn read_sources(config: &Config) -> Result<Vec<SourceRow>, SelfConfigError> {
    let mut rows: Vec<SourceRow> = config
        .sources
        .iter()
        .enumerate()
        .map(|(index, source)| {
            source_row(source.name_at(index), "config", source, config.agent.poll_interval.as_secs())
        })
        .collect();
    if let Some(persisted) = selfconfig::load(&config.agent.state_dir)? {
        rows.extend(self_configured_rows(&persisted.config, config.agent.poll_interval.as_secs()));
    }
    Ok(rows)
}

/// The rows of self-configured sources; `default_poll_secs` when the key set no interval.
pub fn self_configured_rows(derived: &SelfConfig, default_poll_secs: u64) -> Vec<SourceRow> {
    let poll_secs = derived.poll_interval.map_or(default_poll_secs, |interval| interval.as_secs());
    derived
        .sources
        .iter()
        .map(|(collector, source)| source_row(collector.source_name(), selfconfig::METADATA_KEY, source, poll_secs))
        .collect()
}

fn source_row(name: String, origin: &'static str, source: &SourceConfig, poll_interval_secs: u64) -> SourceRow {
    let (location, user) = match source {
        SourceConfig::Http(http) => (http.urls.iter().map(|url| redact_url(url)).collect::<Vec<_>>().join(", "), None),
        SourceConfig::Local(local) => (local.path.display().to_string(), None),
        SourceConfig::HeatLocal(heat_local) => (heat_local.path.display().to_string(), None),
        SourceConfig::Heat(heat) => (
            format!(
                "{} (stack {}, resource {})",
                redact_url(&heat.keystone.auth_url),
                heat.stack_id,
                heat.resource_name
            ),
            Some(heat.keystone.user_id.clone()),
        ),
        SourceConfig::Cfn(cfn) => (
            format!("{} (stack {}, {})", redact_url(&cfn.metadata_url), cfn.stack_name, cfn.path),
            Some(cfn.access_key_id.clone()),
        ),
        SourceConfig::Zaqar(zaqar) => (
            format!("{} (queue {})", redact_url(&zaqar.keystone.auth_url), zaqar.queue_id),
            Some(zaqar.keystone.user_id.clone()),
        ),
        SourceConfig::Ec2(ec2) => (redact_url(&ec2.metadata_url), None),
        SourceConfig::ConfigDrive(drive) => match &drive.path {
            Some(path) => (path.display().to_string(), None),
            None => (format!("the device labelled {}", drive.label), None),
        },
    };
    let secret = source.holds_secret().then_some("***");
    SourceRow { name, kind: source.kind(), origin, location, user, secret, poll_interval_secs }
}

/// The source rows as an aligned text table.
pub fn render_sources(rows: &[SourceRow]) -> String {
    let header = ["NAME", "KIND", "ORIGIN", "POLL", "USER", "SECRET", "LOCATION"];
    let mut table: Vec<Vec<String>> = vec![header.iter().map(|title| title.to_string()).collect()];
    for row in rows {
        table.push(vec![
            row.name.clone(),
            row.kind.to_string(),
            row.origin.to_string(),
            format!("{}s", row.poll_interval_secs),
            row.user.clone().unwrap_or_default(),
            row.secret.unwrap_or_default().to_string(),
            row.location.clone(),
        ]);
    }
    align(&table)
}

fn align(table: &[Vec<String>]) -> String {
    let columns = table.first().map_or(0, Vec::len);
    let widths: Vec<usize> =
        (0..columns).map(|column| table.iter().map(|line| line[column].chars().count()).max().unwrap_or(0)).collect();
    let mut text = String::new();
    for line in table {
        let cells: Vec<String> = line.iter().zip(&widths).map(|(cell, width)| format!("{cell:<width$}")).collect();
        text.push_str(cells.join("  ").trim_end());
        text.push('\n');
    }
    text
}
