//! `{state_dir}/os-collect-config.toml`: the self-configured sources between runs, with the
//! source whose key they came from (`supplied_by`), so that a restarted agent still drops them
//! when that source no longer carries the key. The file is agent.toml's `[[source]]` format plus
//! that one line; it is 0600, replaced atomically and durably, and refused when someone else could
//! have written or read it (it holds credentials) or when it holds anything the agent does not
//! write.

use std::fs;
use std::io::{self, Read};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::{Collector, SelfConfig, SelfConfigError, parse_sources};
use crate::fsutil::{self, effective_uid};

/// The file in `state_dir` the derived sources are kept in.
pub const FILE_NAME: &str = "os-collect-config.toml";
/// The file holds a few tables: anything larger was not written by the agent.
const MAX_FILE_BYTES: u64 = 1024 * 1024;
/// The first lines of the file.
const FILE_HEADER: &str = "# Written by anneal-agent from the os-collect-config key of this server's Heat metadata.\n\
# Rewritten whenever that key changes, removed when its source drops it; edit agent.toml instead\n\
# (see docs/openstack.md).\n\n";
/// The top-level key naming the supplier.
const SUPPLIED_BY: &str = "supplied_by";
/// `supplied_by` of sources `bootstrap --from-metadata` wrote.
const BOOTSTRAP: &str = "bootstrap";
/// A source name is far shorter (`source[12] config-drive`).
const MAX_SUPPLIER_CHARS: usize = 64;

/// Where the sources of the file came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Supplier {
    /// `anneal-agent bootstrap --from-metadata`: an operator's choice, which no source can undo
    /// (a changed key still replaces it).
    Bootstrap,
    /// The config's source of this name (`source[0] heat-local`), or the one at the root of a
    /// chain of keys (a self-configured source's newer key keeps its root): while it has a
    /// document without the key, the sources are dropped.
    Source(String),
    /// A file written before the supplier was recorded; the tracker finds it from the documents.
    Unrecorded,
}

/// The file's content: the sources and where they came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Persisted {
    pub config: SelfConfig,
    pub supplier: Supplier,
}

/// The path of the file in `state_dir`.
pub fn file_path(state_dir: &Path) -> PathBuf {
    state_dir.join(FILE_NAME)
}

/// Reads `{state_dir}/os-collect-config.toml`; `None` when there is none. A file someone else
/// could have written or read (not ours, not 0600, a link) is refused: it holds credentials.
pub fn load(state_dir: &Path) -> Result<Option<Persisted>, SelfConfigError> {
    let path = file_path(state_dir);
    let bad = |reason: String| SelfConfigError::BadFile { path: path.clone(), reason };
    let metadata = match fs::symlink_metadata(&path) {
        Ok(metadata) => metadata,
        Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(source) => return Err(SelfConfigError::Read { path, source }),
    };
    if !metadata.file_type().is_file() {
        return Err(bad("not a regular file".to_string()));
    }
    if metadata.uid() != effective_uid() || metadata.permissions().mode() & 0o077 != 0 {
        return Err(bad("must be owned by the agent's user and readable by it only (0600)".to_string()));
    }
    let mut text = String::new();
    let read = fs::File::open(&path).and_then(|file| file.take(MAX_FILE_BYTES + 1).read_to_string(&mut text));
    read.map_err(|source| SelfConfigError::Read { path: path.clone(), source })?;
    if text.len() as u64 > MAX_FILE_BYTES {
        return Err(bad(format!("larger than {MAX_FILE_BYTES} bytes")));
    }
    from_text(&text).map(Some).map_err(bad)
}

/// Parses a file this module wrote. The sources' text is rendered again from the parsed tables,
/// as `derive` renders it, so that a key giving the same sources compares equal.
pub(super) fn from_text(text: &str) -> Result<Persisted, String> {
    let mut document: toml::Table = text.parse().map_err(|_| "not valid TOML".to_string())?;
    let supplier = match document.remove(SUPPLIED_BY) {
        None => Supplier::Unrecorded,
        Some(toml::Value::String(name)) => supplier_named(name)?,
        Some(_) => return Err(format!("{SUPPLIED_BY} must be a string")),
    };
    let agent = match document.get("agent") {
        None => None,
        Some(toml::Value::Table(agent)) if agent.keys().all(|key| key == "poll_interval_secs") => Some(agent),
        Some(_) => return Err("[agent] may only set poll_interval_secs".to_string()),
    };
    if document.keys().any(|key| key != "agent" && key != "source") {
        return Err(format!("only {SUPPLIED_BY}, [agent] and [[source]] tables are allowed"));
    }
    let Some(toml::Value::Array(tables)) = document.get("source") else {
        return Err("no [[source]] tables".to_string());
    };
    let mut collectors = Vec::with_capacity(tables.len());
    for table in tables {
        let kind = table.get("kind").and_then(toml::Value::as_str).unwrap_or_default();
        match Collector::from_kind(kind) {
            Some(collector) if !collectors.contains(&collector) => collectors.push(collector),
            _ => return Err("each [[source]] must be a different one of cfn, heat, http and zaqar".to_string()),
        }
    }
    let poll_interval = agent
        .and_then(|agent| agent.get("poll_interval_secs"))
        .and_then(toml::Value::as_integer)
        .map(|secs| Duration::from_secs(secs.unsigned_abs()));
    let body = toml::to_string(&document).map_err(|_| "the tables cannot be rendered again".to_string())?;
    let sources = parse_sources(&body, &collectors).map_err(|(key, reason)| format!("{key}: {reason}"))?;
    Ok(Persisted { config: SelfConfig { sources, poll_interval, text: body }, supplier })
}

fn supplier_named(name: String) -> Result<Supplier, String> {
    if name.chars().count() > MAX_SUPPLIER_CHARS || name.chars().any(char::is_control) {
        return Err(format!("{SUPPLIED_BY} must be a source name (at most {MAX_SUPPLIER_CHARS} characters)"));
    }
    Ok(if name == BOOTSTRAP { Supplier::Bootstrap } else { Supplier::Source(name) })
}

/// The file text: the header, `supplied_by` (none for `Unrecorded`), the sources.
fn file_text(persisted: &Persisted) -> String {
    let supplier = match &persisted.supplier {
        Supplier::Bootstrap => Some(BOOTSTRAP),
        Supplier::Source(name) => Some(name.as_str()),
        Supplier::Unrecorded => None,
    };
    // The serialiser quotes the name: it is one TOML string whatever it holds.
    let line = supplier.map(|name| format!("{SUPPLIED_BY} = {}\n\n", toml::Value::String(name.to_string())));
    format!("{FILE_HEADER}{}{}", line.unwrap_or_default(), persisted.config.text)
}

/// Writes `persisted` as `{state_dir}/os-collect-config.toml`: 0600, atomically and durably.
pub fn store(state_dir: &Path, persisted: &Persisted) -> Result<(), SelfConfigError> {
    let path = file_path(state_dir);
    fsutil::ensure_private_dir(state_dir)
        .and_then(|()| fsutil::write_atomic(&path, file_text(persisted).as_bytes(), 0o600))
        .map_err(|source| SelfConfigError::Write { path, source })
}

/// Removes `{state_dir}/os-collect-config.toml` durably; a missing file is already removed.
pub fn remove(state_dir: &Path) -> Result<(), SelfConfigError> {
    let path = file_path(state_dir);
    match fs::remove_file(&path) {
        Ok(()) => {}
        Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(source) => return Err(SelfConfigError::Remove { path, source }),
    }
    fsutil::sync_dir(state_dir).map_err(|source| SelfConfigError::Remove { path, source })
}
