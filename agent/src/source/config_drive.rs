//! The `config-drive` source: OpenStack's config drive, read from a directory where it is
//! mounted (`path`), or else found as the block device labelled `label` (vfat or iso9660, as
//! os-collect-config's config_drive module looks for it with `blkid`) and read where it is already
//! mounted, or mounted read-only on a private temp directory for the read and unmounted after
//! (`device`). The document is what os-collect-config's ec2 collector takes from a config drive
//! (`ec2/latest/meta-data.json`, at the top level) plus the OpenStack files under `openstack`:
//! `meta_data` (`openstack/latest/meta_data.json`), `vendor_data` (`vendor_data.json`) and
//! `user_data` (text). Every file and directory read passes the local source's trust checks. No
//! drive (no device with the label, or a missing `path`) is an empty document. See
//! docs/configuration.md#kind--config-drive.

mod device;

use std::fs::{self, File};
use std::io::{ErrorKind, Read};
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;

pub(crate) use device::Tools;

use super::local::read_json_file;
use super::{Fetched, MAX_DOCUMENT_BYTES, SourceError};
use crate::config::ConfigDriveSourceConfig;
use crate::fsutil::{UnsafePath, check_trusted, check_trusted_path};

const META_DATA: &str = "openstack/latest/meta_data.json";
const VENDOR_DATA: &str = "openstack/latest/vendor_data.json";
const USER_DATA: &str = "openstack/latest/user_data";
const EC2_META_DATA: &str = "ec2/latest/meta-data.json";

#[derive(Debug)]
pub(crate) struct ConfigDriveSource {
    name: String,
    path: Option<PathBuf>,
    label: String,
    tools: Tools,
}

impl ConfigDriveSource {
    pub(crate) fn new(name: String, config: &ConfigDriveSourceConfig) -> ConfigDriveSource {
        ConfigDriveSource { name, path: config.path.clone(), label: config.label.clone(), tools: Tools::default() }
    }

    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    /// What the source reads, for its cache identity.
    pub(super) fn described(&self) -> String {
        match &self.path {
            Some(path) => format!("config-drive path {}", path.display()),
            None => format!("config-drive label {}", self.label),
        }
    }

    pub(crate) async fn fetch(&self, shutdown: &CancellationToken) -> Result<Fetched, SourceError> {
        match &self.path {
            Some(path) => read_drive_or_nothing(&self.name, path).map(Fetched::Document),
            None => device::fetch(&self.name, &self.label, &self.tools, shutdown).await,
        }
    }

    #[cfg(test)]
    fn with_tools(mut self, tools: Tools) -> ConfigDriveSource {
        self.tools = tools;
        self
    }
}

/// The drive's document from the directory `root`; a missing `root` is an empty document.
fn read_drive_or_nothing(source_name: &str, root: &Path) -> Result<Value, SourceError> {
    match fs::metadata(root) {
        Ok(_) => read_drive(source_name, root),
        Err(error) if error.kind() == ErrorKind::NotFound => {
            tracing::debug!(source = %source_name, path = %root.display(), "config drive directory is missing");
            Ok(Value::Object(Map::new()))
        }
        Err(source) => Err(SourceError::ReadFile { source_name: source_name.to_string(), path: root.into(), source }),
    }
}

/// Builds the document from a mounted drive at `root`. `openstack/latest/meta_data.json` must be
/// there (else it is not a config drive); the other files are optional.
fn read_drive(source_name: &str, root: &Path) -> Result<Value, SourceError> {
    check_trusted_path(root).map_err(|problem| unsafe_path(source_name, problem))?;
    let meta_data = optional_json(source_name, &root.join(META_DATA))?.ok_or_else(|| SourceError::BadFile {
        source_name: source_name.to_string(),
        path: root.to_path_buf(),
        reason: format!("not a config drive: it has no {META_DATA}"),
    })?;
    let mut openstack = Map::new();
    openstack.insert("meta_data".to_string(), meta_data);
    if let Some(vendor_data) = optional_json(source_name, &root.join(VENDOR_DATA))? {
        openstack.insert("vendor_data".to_string(), vendor_data);
    }
    if let Some(user_data) = optional_text(source_name, &root.join(USER_DATA))? {
        openstack.insert("user_data".to_string(), Value::String(user_data));
    }
    let mut document = match optional_json(source_name, &root.join(EC2_META_DATA))? {
        Some(Value::Object(ec2)) => ec2,
        _ => Map::new(),
    };
    document.insert("openstack".to_string(), Value::Object(openstack));
    Ok(Value::Object(document))
}

/// A JSON object file under the drive, `None` when it does not exist. The file and every
/// directory above it pass the trust checks.
fn optional_json(source_name: &str, path: &Path) -> Result<Option<Value>, SourceError> {
    if !exists(source_name, path)? {
        return Ok(None);
    }
    check_trusted_path(path).map_err(|problem| unsafe_path(source_name, problem))?;
    read_json_file(source_name, path).map(Some)
}

/// `user_data` as text, `None` when it does not exist or is not UTF-8 (a gzip or binary payload
/// is for cloud-init, not for us).
fn optional_text(source_name: &str, path: &Path) -> Result<Option<String>, SourceError> {
    if !exists(source_name, path)? {
        return Ok(None);
    }
    check_trusted_path(path).map_err(|problem| unsafe_path(source_name, problem))?;
    let read_error =
        |source| SourceError::ReadFile { source_name: source_name.to_string(), path: path.to_path_buf(), source };
    let file = File::open(path).map_err(read_error)?;
    let metadata = file.metadata().map_err(read_error)?;
    check_trusted(path, &metadata).map_err(|problem| unsafe_path(source_name, problem))?;
    let mut bytes = Vec::new();
    file.take(MAX_DOCUMENT_BYTES as u64 + 1).read_to_end(&mut bytes).map_err(read_error)?;
    if bytes.len() > MAX_DOCUMENT_BYTES {
        return Err(SourceError::TooLarge {
            source_name: source_name.to_string(),
            what: path.display().to_string(),
            limit: MAX_DOCUMENT_BYTES,
        });
    }
    match String::from_utf8(bytes) {
        Ok(text) => Ok(Some(text)),
        Err(_) => {
            tracing::debug!(source = %source_name, path = %path.display(), "user_data is not UTF-8 text; left out");
            Ok(None)
        }
    }
}

fn exists(source_name: &str, path: &Path) -> Result<bool, SourceError> {
    match fs::metadata(path) {
        Ok(_) => Ok(true),
        Err(error) if error.kind() == ErrorKind::NotFound => Ok(false),
        Err(source) => {
            Err(SourceError::ReadFile { source_name: source_name.to_string(), path: path.to_path_buf(), source })
        }
    }
}

fn unsafe_path(source_name: &str, problem: UnsafePath) -> SourceError {
    SourceError::Unsafe {
        source_name: source_name.to_string(),
        path: problem.path,
        reason: format!("it {}; refusing to use it", problem.problem),
    }
}

#[cfg(test)]
mod tests;
