//! Self-configuration as on a Heat image: Heat puts an `os-collect-config` key into a server's
//! metadata (`collectors`, `polling_interval` and one section per transport: `heat`, `cfn`,
//! `request`, `zaqar`), which the stock image renders into os-collect-config.conf with
//! os-apply-config's template. Here that key becomes `[[source]]` tables in agent.toml's format,
//! validated by the same code as agent.toml (the tables are built with the TOML serialiser and
//! parsed back with `config::parse`, so no value can add a key or a table), and kept in
//! `{state_dir}/os-collect-config.toml` (`file`: 0600, replaced atomically, with the source the
//! key came from). The config's own sources come first; these follow, named `os-collect-config
//! <collector>`. Which documents' keys count, and how long their sources stay, is `tracker`'s.
//! See docs/openstack.md.
//!
//! Collectors the image already covers with its own sources (`ec2`, `local`, `heat_local`,
//! `config_drive`) are skipped: agent.toml lists those. Every value is bounded and typed before
//! it is used, and no error text quotes a value (a value may be a password).

use std::fmt;
use std::fs;
use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Map, Value};

use crate::config::{self, ConfigError, SourceConfig};

mod file;
pub(crate) mod tracker;

pub use file::{FILE_NAME, Persisted, Supplier, file_path, load, remove, store};

/// The metadata key Heat writes (and os-apply-config's template reads).
pub const METADATA_KEY: &str = "os-collect-config";
/// More collector names than os-collect-config knows is not a list Heat wrote.
const MAX_COLLECTORS: usize = 16;
/// The longest string value taken from the key (URLs, ids, passwords are far shorter).
const MAX_VALUE_CHARS: usize = 4096;
/// os-collect-config takes any float; more than a day between polls is not a setting.
const MAX_POLLING_INTERVAL_SECS: u64 = 86_400;
/// A metadata file for `bootstrap`: as large as a metadata document may be
/// (`source::MAX_DOCUMENT_BYTES`; not imported, so the sources may use this module).
const MAX_METADATA_FILE_BYTES: u64 = 16 * 1024 * 1024;

/// One source's document as self-configuration sees it: the source's name and the
/// `os-collect-config` key the document carries (`None`: it has none). Only sources with a
/// document, fresh or cached, are listed: a source without one tells nothing about the key.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct CarriedKey {
    pub(crate) source: String,
    pub(crate) key: Option<Value>,
}

/// An os-collect-config collector this module turns into a source.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Collector {
    Cfn,
    Heat,
    Request,
    Zaqar,
}

impl Collector {
    /// os-collect-config's default order of these collectors (when the key names none).
    const DEFAULT_ORDER: [Collector; 4] = [Collector::Cfn, Collector::Heat, Collector::Request, Collector::Zaqar];

    /// The collector's (and its section's) name in the key.
    pub fn name(self) -> &'static str {
        match self {
            Collector::Cfn => "cfn",
            Collector::Heat => "heat",
            Collector::Request => "request",
            Collector::Zaqar => "zaqar",
        }
    }

    fn from_name(name: &str) -> Option<Collector> {
        Collector::DEFAULT_ORDER.into_iter().find(|collector| collector.name() == name)
    }

    /// The collector a derived source of `kind` came from.
    fn from_kind(kind: &str) -> Option<Collector> {
        match kind {
            "cfn" => Some(Collector::Cfn),
            "heat" => Some(Collector::Heat),
            "http" => Some(Collector::Request),
            "zaqar" => Some(Collector::Zaqar),
            _ => None,
        }
    }

    /// The name of the source derived from this collector: its log name and cache key.
    pub fn source_name(self) -> String {
        format!("{METADATA_KEY} {}", self.name())
    }
}

/// Collectors whose work the image config does with its own sources (see the module comment).
const COVERED_BY_CONFIG: [&str; 4] = ["ec2", "local", "heat_local", "config_drive"];

/// The sources derived from one `os-collect-config` key. Its `Debug` leaves the file text out:
/// that holds the credentials in plain text.
#[derive(Clone, PartialEq, Eq)]
pub struct SelfConfig {
    /// In the key's collector order, each with the collector it came from.
    pub sources: Vec<(Collector, SourceConfig)>,
    /// `polling_interval`: the poll interval of these sources; the config's own when unset.
    pub poll_interval: Option<Duration>,
    /// The sources as TOML: what is written (after the file's header and supplier), and what a
    /// new key is compared with.
    text: String,
}

impl fmt::Debug for SelfConfig {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter
            .debug_struct("SelfConfig")
            .field("sources", &self.sources)
            .field("poll_interval", &self.poll_interval)
            .finish_non_exhaustive()
    }
}

impl SelfConfig {
    /// The source names, for log lines.
    pub fn source_names(&self) -> Vec<String> {
        self.sources.iter().map(|(collector, _)| collector.source_name()).collect()
    }
}

#[derive(Debug, thiserror::Error)]
pub enum SelfConfigError {
    #[error("the {METADATA_KEY} key is a JSON {found}, not an object")]
    NotObject { found: &'static str },
    #[error("{METADATA_KEY}.{key}: {reason}")]
    Invalid { key: String, reason: String },
    #[error("the {METADATA_KEY} key names no collector anneal-agent configures itself (cfn, heat, request, zaqar)")]
    NoSources,
    #[error("cannot read {path}")]
    Read {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("{path}: {reason}")]
    BadFile { path: PathBuf, reason: String },
    #[error("{path} is not a JSON document")]
    NotJson {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
    #[error("{path} has no {METADATA_KEY} key (neither at the top nor under \"metadata\")")]
    NoKey { path: PathBuf },
    #[error("cannot write {path}")]
    Write {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("cannot remove {path}")]
    Remove {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

fn invalid(key: impl Into<String>, reason: impl Into<String>) -> SelfConfigError {
    SelfConfigError::Invalid { key: key.into(), reason: reason.into() }
}

/// Turns the value of an `os-collect-config` key into sources, validated as agent.toml's.
pub fn derive(key: &Value) -> Result<SelfConfig, SelfConfigError> {
    let Value::Object(key) = key else { return Err(SelfConfigError::NotObject { found: json_type(key) }) };
    let collectors = collectors(key)?;
    let poll_interval = polling_interval(key.get("polling_interval"))?;
    let mut tables = Vec::with_capacity(collectors.len());
    for &collector in &collectors {
        let section = match key.get(collector.name()) {
            Some(Value::Object(section)) => section,
            Some(other) => {
                return Err(invalid(collector.name(), format!("must be an object, got a {}", json_type(other))));
            }
            None => {
                return Err(invalid("collectors", format!("names {} but there is no {0} section", collector.name())));
            }
        };
        tables.push(source_table(collector, section)?);
    }
    if tables.is_empty() {
        return Err(SelfConfigError::NoSources);
    }
    let text = render(&tables, poll_interval)?;
    let sources = parse_sources(&text, &collectors).map_err(|(key, reason)| invalid(key, reason))?;
    Ok(SelfConfig { sources, poll_interval, text })
}

/// The derived collectors in order: those `collectors` names (a list, or a comma-separated
/// string as os-collect-config's command line takes it), else every one with a section.
fn collectors(key: &Map<String, Value>) -> Result<Vec<Collector>, SelfConfigError> {
    let names: Vec<&str> = match key.get("collectors") {
        None | Some(Value::Null) => {
            return Ok(Collector::DEFAULT_ORDER.into_iter().filter(|c| key.contains_key(c.name())).collect());
        }
        Some(Value::String(text)) => text.split(',').map(str::trim).filter(|name| !name.is_empty()).collect(),
        Some(Value::Array(items)) => items
            .iter()
            .map(|item| item.as_str().ok_or_else(|| invalid("collectors", "every entry must be a string")))
            .collect::<Result<_, _>>()?,
        Some(other) => return Err(invalid("collectors", format!("must be a list, got a {}", json_type(other)))),
    };
    if names.len() > MAX_COLLECTORS {
        return Err(invalid("collectors", format!("more than {MAX_COLLECTORS} entries")));
    }
    let mut collectors = Vec::new();
    for name in names {
        match Collector::from_name(name) {
            Some(collector) if !collectors.contains(&collector) => collectors.push(collector),
            Some(_) => {}
            None if COVERED_BY_CONFIG.contains(&name) => {}
            None => return Err(invalid("collectors", format!("unknown collector {:?}", printable(name)))),
        }
    }
    Ok(collectors)
}

fn polling_interval(value: Option<&Value>) -> Result<Option<Duration>, SelfConfigError> {
    let bad =
        || invalid("polling_interval", format!("must be a number of seconds from 1 to {MAX_POLLING_INTERVAL_SECS}"));
    let secs = match value {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::Number(number)) => number.as_f64().ok_or_else(bad)?,
        Some(Value::String(text)) if text.len() <= 32 => text.trim().parse::<f64>().map_err(|_| bad())?,
        Some(_) => return Err(bad()),
    };
    if !secs.is_finite() || secs < 1.0 || secs > MAX_POLLING_INTERVAL_SECS as f64 {
        return Err(bad());
    }
    // Whole seconds, as agent.toml counts them; a fraction rounds up.
    Ok(Some(Duration::from_secs(secs.ceil() as u64)))
}

/// The `[[source]]` table for one collector's section: only the keys os-apply-config's template
/// renders for it, renamed as agent.toml names them. Other keys in the section are ignored, as
/// the template ignores them.
fn source_table(collector: Collector, section: &Map<String, Value>) -> Result<toml::Table, SelfConfigError> {
    let mut table = toml::Table::new();
    let (kind, required, optional): (&str, &[&str], &[&str]) = match collector {
        Collector::Cfn => ("cfn", &["metadata_url", "stack_name", "path", "access_key_id", "secret_access_key"], &[]),
        Collector::Heat => {
            ("heat", &["auth_url", "user_id", "password", "project_id", "stack_id", "resource_name"], &["region_name"])
        }
        Collector::Zaqar => ("zaqar", &["auth_url", "user_id", "password", "project_id", "queue_id"], &["region_name"]),
        Collector::Request => ("http", &["metadata_url"], &[]),
    };
    table.insert("kind".to_string(), toml::Value::String(kind.to_string()));
    for (&field, is_required) in required.iter().map(|f| (f, true)).chain(optional.iter().map(|f| (f, false))) {
        let key = || format!("{}.{field}", collector.name());
        let value = match section.get(field) {
            None | Some(Value::Null) if is_required => return Err(invalid(key(), "is missing")),
            None | Some(Value::Null) => continue,
            Some(Value::String(value)) => value,
            Some(other) => return Err(invalid(key(), format!("must be a string, got a {}", json_type(other)))),
        };
        if value.chars().count() > MAX_VALUE_CHARS {
            return Err(invalid(key(), format!("is longer than {MAX_VALUE_CHARS} characters")));
        }
        if value.chars().any(char::is_control) {
            return Err(invalid(key(), "must not contain control characters"));
        }
        // A request collector's URL is a Swift temp URL: agent.toml calls it `url`.
        let name = if collector == Collector::Request { "url" } else { field };
        table.insert(name.to_string(), toml::Value::String(value.clone()));
    }
    if collector == Collector::Request {
        // A Swift temp URL does not long-poll: plain polling at the poll interval.
        table.insert("long_poll_secs".to_string(), toml::Value::Integer(0));
    }
    Ok(table)
}

/// The sources' text for `tables`: `[agent] poll_interval_secs` when set, the tables.
fn render(tables: &[toml::Table], poll_interval: Option<Duration>) -> Result<String, SelfConfigError> {
    let mut document = toml::Table::new();
    if let Some(interval) = poll_interval {
        let secs = i64::try_from(interval.as_secs()).unwrap_or(i64::MAX);
        let agent = toml::Table::from_iter([("poll_interval_secs".to_string(), toml::Value::Integer(secs))]);
        document.insert("agent".to_string(), toml::Value::Table(agent));
    }
    let sources = tables.iter().cloned().map(toml::Value::Table).collect();
    document.insert("source".to_string(), toml::Value::Array(sources));
    toml::to_string(&document).map_err(|error| invalid("", format!("cannot render the sources: {error}")))
}

/// Parses the file text with agent.toml's parser; `collectors` in the order of the tables.
/// Problems name the collector and the field, as `(key, reason)`.
fn parse_sources(text: &str, collectors: &[Collector]) -> Result<Vec<(Collector, SourceConfig)>, (String, String)> {
    let config = config::parse(text, Path::new(FILE_NAME)).map_err(|error| match error {
        ConfigError::Invalid { key, reason, .. } => (rename_key(&key, collectors), reason),
        // The TOML parser quotes the offending line, which may hold a password.
        _ => ("[[source]]".to_string(), "the tables do not parse as agent.toml".to_string()),
    })?;
    Ok(collectors.iter().copied().zip(config.sources).collect())
}

/// `source[1] (heat) auth_url` -> `heat.auth_url`.
fn rename_key(key: &str, collectors: &[Collector]) -> String {
    let index = key.strip_prefix("source[").and_then(|rest| rest.split_once(']')).and_then(|(n, _)| n.parse().ok());
    let field = key.rsplit_once(") ").map_or(key, |(_, field)| field);
    match index.and_then(|index: usize| collectors.get(index)) {
        Some(collector) => format!("{}.{field}", collector.name()),
        None => key.to_string(),
    }
}

/// `anneal-agent bootstrap --from-metadata FILE`: the sources of the `os-collect-config` key of a
/// server's metadata saved in `path` (as `key_of_metadata` finds it), at most 16 MiB.
pub fn from_metadata_file(path: &Path) -> Result<SelfConfig, SelfConfigError> {
    let read_error = |source| SelfConfigError::Read { path: path.to_path_buf(), source };
    let limit = MAX_METADATA_FILE_BYTES;
    let mut bytes = Vec::new();
    fs::File::open(path).and_then(|file| file.take(limit + 1).read_to_end(&mut bytes)).map_err(read_error)?;
    if bytes.len() as u64 > limit {
        let reason = format!("larger than {limit} bytes");
        return Err(SelfConfigError::BadFile { path: path.to_path_buf(), reason });
    }
    let metadata: Value = serde_json::from_slice(&bytes)
        .map_err(|source| SelfConfigError::NotJson { path: path.to_path_buf(), source })?;
    let key = key_of_metadata(&metadata).ok_or_else(|| SelfConfigError::NoKey { path: path.to_path_buf() })?;
    derive(key)
}

/// The `os-collect-config` key of a server's metadata as Heat's API answers it: the bare
/// metadata object or `{"metadata": {...}}`.
pub fn key_of_metadata(metadata: &Value) -> Option<&Value> {
    metadata.get(METADATA_KEY).or_else(|| metadata.get("metadata").and_then(|inner| inner.get(METADATA_KEY)))
}

fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "list",
        Value::Object(_) => "object",
    }
}

/// A collector name for a message: at most 32 characters, control characters escaped.
fn printable(name: &str) -> String {
    name.chars().take(32).flat_map(char::escape_debug).collect()
}

#[cfg(test)]
mod tests;
