//! os-apply-config's control files and file writing: `<template>.oac`, read with PyYAML's
//! `safe_load` rules, sets `allow_empty`, `mode`, `owner` and `group` of the file the template
//! renders to, validated as `oac_file.OacFile` validates them (with its messages); `write` is
//! `apply_config.write_file`: an empty body without `allow_empty` removes the file, anything else
//! is written to a temporary file beside it, given its mode and owner, and renamed over it.
//! Owner and group names resolve through /etc/passwd and /etc/group only (no NSS modules).

use std::fs::{self, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use anneal_protocol::pyjson;
use serde_json::Value;

/// The settings of one output file (`OacFile` without its body).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Control {
    pub(crate) allow_empty: bool,
    pub(crate) mode: Option<u32>,
    pub(crate) owner: Option<u32>,
    pub(crate) group: Option<u32>,
}

impl Default for Control {
    fn default() -> Control {
        Control { allow_empty: true, mode: None, owner: None, group: None }
    }
}

/// `<template>.oac` when it is a file, else the defaults; `Err` is os-apply-config's message.
pub(crate) fn load(template: &Path) -> Result<Control, String> {
    let mut path = template.as_os_str().to_owned();
    path.push(".oac");
    let path = PathBuf::from(path);
    if !path.is_file() {
        return Ok(Control::default());
    }
    let text = fs::read_to_string(&path).map_err(|error| format!("cannot read {}: {error}", path.display()))?;
    // `yaml.safe_load` of a file without a document (empty, comments only) is None.
    let no_document = yaml_rust2::YamlLoader::load_from_str(&text).is_ok_and(|documents| documents.is_empty());
    let document = match no_document {
        true => Value::Null,
        false => {
            crate::pyyaml::safe_load(&text).map_err(|error| format!("cannot parse {}: {error}", path.display()))?
        }
    };
    let document = if pyjson::is_truthy(&document) { document } else { Value::Object(Default::default()) };
    let Value::Object(settings) = document else {
        return Err(format!("header is not a dict: {}", template.display()));
    };
    let mut control = Control::default();
    for (key, value) in &settings {
        match key.as_str() {
            "allow_empty" => control.allow_empty = allow_empty(value)?,
            "mode" => control.mode = Some(mode(value)?),
            "owner" => control.owner = Some(lookup(value, "owner", "/etc/passwd", "passwd")?),
            "group" => control.group = Some(lookup(value, "group", "/etc/group", "group")?),
            _ => return Err(format!("unrecognised file control key '{key}'")),
        }
    }
    Ok(control)
}

fn allow_empty(value: &Value) -> Result<bool, String> {
    value.as_bool().ok_or_else(|| format!("allow_empty requires Boolean, got: '{}'", pyjson::python_str(value)))
}

/// An int (not a bool) within 0..=0o777.
fn mode(value: &Value) -> Result<u32, String> {
    let Some(number) = value.as_number().filter(|number| number.is_i64() || number.is_u64()) else {
        return Err(format!("mode '{}' is not numeric", pyjson::python_str(value)));
    };
    match number.as_i64() {
        Some(mode @ 0..=0o777) => Ok(mode as u32),
        Some(mode) if mode < 0 => Err(format!("mode '-{:#o}' out of range", mode.unsigned_abs())),
        Some(mode) => Err(format!("mode '{mode:#o}' out of range")),
        None => Err(format!("mode '{number}' out of range")),
    }
}

/// `pwd.getpwuid`/`getpwnam` (or `grp`): the id of an existing entry named or numbered `value`.
fn lookup(value: &Value, what: &str, database: &str, name: &str) -> Result<u32, String> {
    let text = fs::read_to_string(database).unwrap_or_default();
    let wanted = match value {
        Value::Number(number) if number.is_i64() || number.is_u64() => Field::Id(number.to_string()),
        Value::String(text) => Field::Name(text.clone()),
        other => return Err(format!("{what} '{}' must be a string or int", pyjson::python_str(other))),
    };
    let found = text.lines().find_map(|line| {
        let mut fields = line.split(':');
        let (entry, id) = (fields.next()?, fields.nth(1)?);
        let matches = match &wanted {
            Field::Id(wanted) => id == wanted,
            Field::Name(wanted) => entry == wanted,
        };
        if matches { id.parse::<u32>().ok() } else { None }
    });
    found.ok_or_else(|| format!("{what} '{}' not found in {name} database", pyjson::python_str(value)))
}

enum Field {
    Id(String),
    Name(String),
}

/// What writing one file did, for the log.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Outcome {
    Deleted,
    NotCreated,
    Written,
}

/// `apply_config.write_file(path, OacFile(body, **control))`.
pub(crate) fn write(path: &Path, body: &[u8], control: &Control) -> io::Result<Outcome> {
    if !control.allow_empty && body.is_empty() {
        if fs::metadata(path).is_ok() {
            fs::remove_file(path)?;
            return Ok(Outcome::Deleted);
        }
        return Ok(Outcome::NotCreated);
    }
    let (mode, uid, gid) = match fs::metadata(path) {
        Ok(existing) => (existing.mode() & 0o7777, Some(existing.uid()), Some(existing.gid())),
        Err(_) => (0o644, None, None),
    };
    let mode = control.mode.filter(|mode| *mode != 0).unwrap_or(mode);
    let (uid, gid) = (control.owner.or(uid), control.group.or(gid));
    let dir = path.parent().filter(|dir| !dir.as_os_str().is_empty()).unwrap_or(Path::new("."));
    if fs::metadata(dir).is_err() {
        fs::create_dir_all(dir)?;
    }
    let temp = write_temp(dir, body)?;
    let finish = || -> io::Result<()> {
        fs::set_permissions(&temp, fs::Permissions::from_mode(mode))?;
        if uid.is_some() || gid.is_some() {
            std::os::unix::fs::chown(&temp, uid, gid)?;
        }
        fs::rename(&temp, path)
    };
    finish().inspect_err(|_| {
        let _ = fs::remove_file(&temp);
    })?;
    Ok(Outcome::Written)
}

/// `tempfile.NamedTemporaryFile(dir=dir, delete=False)` with `body` written: a new file (mode
/// 0600) with a name no other file has.
fn write_temp(dir: &Path, body: &[u8]) -> io::Result<PathBuf> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    loop {
        let serial = COUNTER.fetch_add(1, Ordering::Relaxed);
        let temp = dir.join(format!("tmp{}.{serial}.anneal", std::process::id()));
        match OpenOptions::new().write(true).create_new(true).mode(0o600).open(&temp) {
            Ok(mut file) => {
                let written = file.write_all(body).and_then(|()| file.sync_all());
                return written.map(|()| temp.clone()).inspect_err(|_| {
                    let _ = fs::remove_file(&temp);
                });
            }
            Err(error) if error.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(error) => return Err(error),
        }
    }
}
