//! The `[[source]]` kinds that talk to an OpenStack cloud the way os-collect-config's collectors
//! do: `heat` (Keystone v3 + Heat's resource metadata API), `cfn` (EC2-signed
//! DescribeStackResource), `zaqar` (a Keystone-authenticated message queue), `ec2` (the metadata
//! service tree) and `config-drive`. Their keys are os-collect-config's option names with `-`
//! written `_`, so an operator can translate an `os-collect-config.conf` section line by line
//! (see docs/configuration.md). Passwords and secret keys are `Secret`s from the moment they are
//! parsed.

use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

use super::{Problem, absolute, at_least, check_url};
use crate::secret::Secret;

/// os-collect-config's default for the ec2 collector. Only a default: tests always name a
/// loopback URL.
pub const DEFAULT_EC2_METADATA_URL: &str = "http://169.254.169.254/latest/meta-data/";
/// The filesystem label OpenStack gives a config drive.
pub const DEFAULT_CONFIG_DRIVE_LABEL: &str = "config-2";
/// os-collect-config's `timeout` default for its HTTP collectors, in seconds.
const DEFAULT_CONNECT_TIMEOUT_SECS: u64 = 10;
const DEFAULT_READ_TIMEOUT_SECS: u64 = 30;

/// Keystone v3 password credentials, as os-collect-config's `[heat]` and `[zaqar]` sections hold
/// them (and as Heat puts them in a server's `os-collect-config` metadata).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeystoneConfig {
    /// The identity endpoint, with or without its `/v3` suffix.
    pub auth_url: String,
    pub user_id: String,
    pub password: Secret<String>,
    pub project_id: String,
    /// The catalog region to take the service endpoint from; any region when unset.
    pub region_name: Option<String>,
}

/// HTTP client settings every network source of this module shares.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientConfig {
    /// A PEM bundle of extra trust roots (os-collect-config's `ca_certificate` / `ca_file`).
    pub ca_file: Option<PathBuf>,
    pub connect_timeout: Duration,
    pub read_timeout: Duration,
}

/// `kind = "heat"`: `GET /v1/{project_id}/stacks/{stack_id}/resources/{resource_name}/metadata`
/// on the orchestration endpoint of the Keystone catalog (POLL_SERVER_HEAT).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeatSourceConfig {
    pub keystone: KeystoneConfig,
    /// `NAME/ID` or the id alone, as Heat writes it into the metadata.
    pub stack_id: String,
    pub resource_name: String,
    pub client: ClientConfig,
}

/// `kind = "cfn"`: DescribeStackResource on heat-api-cfn, signed with EC2 signature version 2
/// (POLL_SERVER_CFN).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CfnSourceConfig {
    pub metadata_url: String,
    pub stack_name: String,
    /// `RESOURCE.Metadata` or `RESOURCE.Metadata.SUB.KEY`: which resource, and which part of its
    /// metadata is the document.
    pub path: String,
    pub access_key_id: String,
    pub secret_access_key: Secret<String>,
    pub client: ClientConfig,
}

/// `kind = "zaqar"`: the newest message of a Zaqar queue is the document (ZAQAR_MESSAGE).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ZaqarSourceConfig {
    pub keystone: KeystoneConfig,
    pub queue_id: String,
    pub client: ClientConfig,
}

/// `kind = "ec2"`: the EC2-style metadata tree under `metadata_url`, walked into one JSON object
/// as os-collect-config's ec2 collector builds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ec2SourceConfig {
    pub metadata_url: String,
    pub client: ClientConfig,
}

/// `kind = "config-drive"`: OpenStack's config drive, from a directory where it is mounted, or
/// else from the block device carrying `label`, mounted read-only for each read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigDriveSourceConfig {
    pub path: Option<PathBuf>,
    pub label: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawHeatSource {
    auth_url: String,
    user_id: String,
    password: String,
    project_id: String,
    stack_id: String,
    resource_name: String,
    region_name: Option<String>,
    ca_file: Option<PathBuf>,
    connect_timeout_secs: Option<u64>,
    read_timeout_secs: Option<u64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawCfnSource {
    metadata_url: String,
    stack_name: String,
    path: String,
    access_key_id: String,
    secret_access_key: String,
    ca_certificate: Option<PathBuf>,
    connect_timeout_secs: Option<u64>,
    read_timeout_secs: Option<u64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawZaqarSource {
    auth_url: String,
    user_id: String,
    password: String,
    project_id: String,
    queue_id: String,
    region_name: Option<String>,
    ca_file: Option<PathBuf>,
    connect_timeout_secs: Option<u64>,
    read_timeout_secs: Option<u64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawEc2Source {
    metadata_url: Option<String>,
    connect_timeout_secs: Option<u64>,
    read_timeout_secs: Option<u64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawConfigDriveSource {
    path: Option<PathBuf>,
    label: Option<String>,
}

pub(super) fn validate_heat(raw: RawHeatSource) -> Result<HeatSourceConfig, Problem> {
    let keystone = keystone(raw.auth_url, raw.user_id, raw.password, raw.project_id, raw.region_name)?;
    non_empty("stack_id", &raw.stack_id)?;
    non_empty("resource_name", &raw.resource_name)?;
    let client = client("ca_file", raw.ca_file, raw.connect_timeout_secs, raw.read_timeout_secs)?;
    Ok(HeatSourceConfig { keystone, stack_id: raw.stack_id, resource_name: raw.resource_name, client })
}

pub(super) fn validate_cfn(raw: RawCfnSource) -> Result<CfnSourceConfig, Problem> {
    check_url(&raw.metadata_url).map_err(|reason| ("metadata_url".to_string(), reason))?;
    non_empty("stack_name", &raw.stack_name)?;
    non_empty("access_key_id", &raw.access_key_id)?;
    non_empty("secret_access_key", &raw.secret_access_key)?;
    match raw.path.split_once('.') {
        Some((resource, rest)) if !resource.is_empty() && (rest == "Metadata" || rest.starts_with("Metadata.")) => {}
        _ => {
            return Err((
                "path".to_string(),
                format!("must be RESOURCE.Metadata or RESOURCE.Metadata.KEY, got {:?}", raw.path),
            ));
        }
    }
    let client = client("ca_certificate", raw.ca_certificate, raw.connect_timeout_secs, raw.read_timeout_secs)?;
    Ok(CfnSourceConfig {
        metadata_url: raw.metadata_url,
        stack_name: raw.stack_name,
        path: raw.path,
        access_key_id: raw.access_key_id,
        secret_access_key: Secret::new(raw.secret_access_key),
        client,
    })
}

pub(super) fn validate_zaqar(raw: RawZaqarSource) -> Result<ZaqarSourceConfig, Problem> {
    let keystone = keystone(raw.auth_url, raw.user_id, raw.password, raw.project_id, raw.region_name)?;
    non_empty("queue_id", &raw.queue_id)?;
    let client = client("ca_file", raw.ca_file, raw.connect_timeout_secs, raw.read_timeout_secs)?;
    Ok(ZaqarSourceConfig { keystone, queue_id: raw.queue_id, client })
}

pub(super) fn validate_ec2(raw: RawEc2Source) -> Result<Ec2SourceConfig, Problem> {
    let metadata_url = raw.metadata_url.unwrap_or_else(|| DEFAULT_EC2_METADATA_URL.to_string());
    check_url(&metadata_url).map_err(|reason| ("metadata_url".to_string(), reason))?;
    let client = client("ca_file", None, raw.connect_timeout_secs, raw.read_timeout_secs)?;
    Ok(Ec2SourceConfig { metadata_url, client })
}

pub(super) fn validate_config_drive(raw: RawConfigDriveSource) -> Result<ConfigDriveSourceConfig, Problem> {
    if let Some(path) = &raw.path {
        absolute(path).map_err(|reason| ("path".to_string(), reason))?;
    }
    let label = raw.label.unwrap_or_else(|| DEFAULT_CONFIG_DRIVE_LABEL.to_string());
    if label.is_empty() || label.len() > 64 || !label.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c)) {
        return Err(("label".to_string(), format!("must be 1-64 letters, digits, '-', '_' or '.', got {label:?}")));
    }
    Ok(ConfigDriveSourceConfig { path: raw.path, label })
}

fn keystone(
    auth_url: String,
    user_id: String,
    password: String,
    project_id: String,
    region_name: Option<String>,
) -> Result<KeystoneConfig, Problem> {
    check_url(&auth_url).map_err(|reason| ("auth_url".to_string(), reason))?;
    non_empty("user_id", &user_id)?;
    non_empty("password", &password)?;
    non_empty("project_id", &project_id)?;
    // Heat writes an empty region_name when the cloud has one region: that means "any".
    let region_name = region_name.filter(|region| !region.is_empty());
    Ok(KeystoneConfig { auth_url, user_id, password: Secret::new(password), project_id, region_name })
}

fn client(
    ca_key: &str,
    ca_file: Option<PathBuf>,
    connect_timeout_secs: Option<u64>,
    read_timeout_secs: Option<u64>,
) -> Result<ClientConfig, Problem> {
    if let Some(file) = &ca_file {
        absolute(file).map_err(|reason| (ca_key.to_string(), reason))?;
    }
    let connect_timeout = at_least(connect_timeout_secs.unwrap_or(DEFAULT_CONNECT_TIMEOUT_SECS), 1)
        .map_err(|reason| ("connect_timeout_secs".to_string(), reason))?;
    let read_timeout = at_least(read_timeout_secs.unwrap_or(DEFAULT_READ_TIMEOUT_SECS), 1)
        .map_err(|reason| ("read_timeout_secs".to_string(), reason))?;
    Ok(ClientConfig { ca_file, connect_timeout, read_timeout })
}

fn non_empty(key: &str, value: &str) -> Result<(), Problem> {
    if value.trim().is_empty() {
        return Err((key.to_string(), "must not be empty".to_string()));
    }
    if value.chars().any(char::is_control) {
        return Err((key.to_string(), "must not contain control characters".to_string()));
    }
    Ok(())
}
