//! The agent's TOML configuration (`/etc/anneal/agent.toml`): parsed in two stages, serde `Raw*`
//! structs that reject unknown keys, then validation into typed settings with defaults applied
//! and `*_secs` integers turned into `Duration`s. Every error names the file and the key. This
//! module only reads the file it is given; it never reads environment variables.

use std::collections::BTreeMap;
use std::fs;
use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anneal_protocol::env::is_valid_env_name;
use serde::Deserialize;

mod http_urls;
mod openstack;

pub use http_urls::MAX_HTTP_URLS;
pub use openstack::{
    CfnSourceConfig, ClientConfig, ConfigDriveSourceConfig, DEFAULT_CONFIG_DRIVE_LABEL, DEFAULT_EC2_METADATA_URL,
    Ec2SourceConfig, HeatSourceConfig, KeystoneConfig, ZaqarSourceConfig,
};
use openstack::{RawCfnSource, RawConfigDriveSource, RawEc2Source, RawHeatSource, RawZaqarSource};

/// Where heat-config and anneal look for hooks, in lookup order.
pub(crate) const DEFAULT_HOOKS_DIRS: [&str; 3] =
    ["/usr/libexec/anneal/hooks", "/usr/libexec/heat-config/hooks", "/var/lib/heat-config/hooks"];
/// [`DEFAULT_HOOKS_DIRS`] as paths, for commands run without a config.
pub fn default_hooks_dirs() -> Vec<PathBuf> {
    DEFAULT_HOOKS_DIRS.iter().map(PathBuf::from).collect()
}

pub(crate) const DEFAULT_STATE_DIR: &str = "/var/lib/anneal";
/// The file Heat writes through cloud-init at boot (os-collect-config's `[heat_local] path`).
pub(crate) const DEFAULT_HEAT_LOCAL_PATH: &str = "/var/lib/heat-cfntools/cfn-init-data";
/// The most deployments we allow to run at once: more would only thrash a VM.
pub(crate) const MAX_PARALLEL: u64 = 64;
/// How long the journal keeps the entry of a deployment that left the metadata: 7 days.
pub(crate) const DEFAULT_JOURNAL_RETENTION_SECS: u64 = 7 * 86_400;

/// The whole validated configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// The file it was read from, for messages.
    pub path: PathBuf,
    pub agent: AgentSettings,
    /// In config order: later sources win when merged.
    pub sources: Vec<SourceConfig>,
}

/// The `[agent]` table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentSettings {
    pub state_dir: PathBuf,
    pub hooks_dirs: Vec<PathBuf>,
    pub poll_interval: Duration,
    /// Whether sources that cannot long-poll are read again soon after a signal was delivered or
    /// a document changed (docs/metadata.md, "Polling").
    pub fast_follow: bool,
    pub hook_timeout: Duration,
    /// Time between TERM and KILL when a hook's process group is stopped.
    pub hook_kill_grace: Duration,
    pub parallel: usize,
    /// Extra environment variables given to every hook.
    pub hook_env: BTreeMap<String, String>,
    /// How long the journal entry (and script and output files) of a deployment that left the
    /// metadata is kept once it owes nothing; `None` (`journal_retention_secs = 0`) keeps them all.
    pub journal_retention: Option<Duration>,
    /// Where the agent writes its metrics for node_exporter's textfile collector (a `*.prom`
    /// file); `None`: no metrics are written.
    pub metrics_textfile: Option<PathBuf>,
}

/// One `[[source]]` table, chosen by its `kind`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SourceConfig {
    Http(HttpSourceConfig),
    Local(LocalSourceConfig),
    HeatLocal(HeatLocalSourceConfig),
    Heat(HeatSourceConfig),
    Cfn(CfnSourceConfig),
    Zaqar(ZaqarSourceConfig),
    Ec2(Ec2SourceConfig),
    ConfigDrive(ConfigDriveSourceConfig),
}

impl SourceConfig {
    /// The name of source number `index` of the config (`source[0] heat-local`): its log name and
    /// cache key.
    pub(crate) fn name_at(&self, index: usize) -> String {
        format!("source[{index}] {}", self.kind())
    }

    /// Whether an `os-collect-config` key in this source's document may configure the agent's
    /// sources (docs/openstack.md, "Self-configuration"). The kinds that read the server's own
    /// Heat or Nova metadata do; an `http` URL or a `local` directory only with `self_configure`.
    pub(crate) fn self_configure(&self) -> bool {
        match self {
            SourceConfig::Http(http) => http.self_configure,
            SourceConfig::Local(local) => local.self_configure,
            SourceConfig::HeatLocal(_)
            | SourceConfig::Heat(_)
            | SourceConfig::Cfn(_)
            | SourceConfig::Zaqar(_)
            | SourceConfig::Ec2(_)
            | SourceConfig::ConfigDrive(_) => true,
        }
    }

    /// The `kind` value that selects this source, as written in the config.
    pub(crate) fn kind(&self) -> &'static str {
        match self {
            SourceConfig::Http(_) => "http",
            SourceConfig::Local(_) => "local",
            SourceConfig::HeatLocal(_) => "heat-local",
            SourceConfig::Heat(_) => "heat",
            SourceConfig::Cfn(_) => "cfn",
            SourceConfig::Zaqar(_) => "zaqar",
            SourceConfig::Ec2(_) => "ec2",
            SourceConfig::ConfigDrive(_) => "config-drive",
        }
    }

    /// The extra trust roots this source names, with the key that names them.
    pub(crate) fn ca_file(&self) -> Option<(&'static str, &Path)> {
        match self {
            SourceConfig::Http(http) => http.ca_file.as_deref().map(|path| ("ca_file", path)),
            SourceConfig::Heat(heat) => heat.client.ca_file.as_deref().map(|path| ("ca_file", path)),
            SourceConfig::Cfn(cfn) => cfn.client.ca_file.as_deref().map(|path| ("ca_certificate", path)),
            SourceConfig::Zaqar(zaqar) => zaqar.client.ca_file.as_deref().map(|path| ("ca_file", path)),
            SourceConfig::Ec2(ec2) => ec2.client.ca_file.as_deref().map(|path| ("ca_file", path)),
            SourceConfig::Local(_) | SourceConfig::HeatLocal(_) | SourceConfig::ConfigDrive(_) => None,
        }
    }

    /// Whether the source holds a credential inline (a password or a secret key), so the file
    /// it is written in must be readable by its owner only.
    pub(crate) fn holds_secret(&self) -> bool {
        matches!(self, SourceConfig::Heat(_) | SourceConfig::Cfn(_) | SourceConfig::Zaqar(_))
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpSourceConfig {
    /// Never empty: `url` as given, or its list (or `urls`), in fail-over order. The URLs are
    /// replicas of one service: the source reads the first and moves on when it fails (see
    /// `source::http::rotation`); a signal to one of their origins may go to the others.
    pub urls: Vec<String>,
    pub token_file: Option<PathBuf>,
    pub ca_file: Option<PathBuf>,
    pub connect_timeout: Duration,
    pub read_timeout: Duration,
    /// The `?wait=` asked for when the server advertises long-poll; zero disables long-poll.
    pub long_poll: Duration,
    /// `self_configure`: whether the document's `os-collect-config` key may configure the agent
    /// (off by default: the shim, a web server). A self-configured `request` source's key counts
    /// whatever this says (see `selfconfig::tracker`).
    pub self_configure: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalSourceConfig {
    pub path: PathBuf,
    /// `self_configure`: whether an `os-collect-config` key in the directory's documents may
    /// configure the agent (off by default).
    pub self_configure: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeatLocalSourceConfig {
    pub path: PathBuf,
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config file {path}")]
    Read {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("{path}: {message}")]
    Syntax { path: PathBuf, message: String },
    #[error("{path}: {key}: {reason}")]
    Invalid { path: PathBuf, key: String, reason: String },
    #[error("{path}: {reason}")]
    Unsafe { path: PathBuf, reason: String },
}

/// Reads and validates the config file at `path`.
///
/// A world-writable config file is refused: it would let any local user choose what the agent
/// runs as root.
pub fn load(path: &Path) -> Result<Config, ConfigError> {
    let read_error = |source| ConfigError::Read { path: path.to_path_buf(), source };
    let metadata = fs::metadata(path).map_err(read_error)?;
    if metadata.permissions().mode() & 0o002 != 0 {
        return Err(ConfigError::Unsafe {
            path: path.to_path_buf(),
            reason: "the config file is world-writable; refusing to use it".to_string(),
        });
    }
    let text = fs::read_to_string(path).map_err(read_error)?;
    let config = parse(&text, path)?;
    if metadata.permissions().mode() & 0o077 != 0 && config.sources.iter().any(SourceConfig::holds_secret) {
        return Err(ConfigError::Unsafe {
            path: path.to_path_buf(),
            reason: "the config file holds a password or secret key but group or others may read it (chmod 600)"
                .to_string(),
        });
    }
    Ok(config)
}

/// Parses and validates config text; `path` is only used in messages and kept in `Config`.
pub fn parse(text: &str, path: &Path) -> Result<Config, ConfigError> {
    let raw: RawConfig = toml::from_str(text)
        .map_err(|error| ConfigError::Syntax { path: path.to_path_buf(), message: error.to_string() })?;
    let invalid = |key: String, reason: String| ConfigError::Invalid { path: path.to_path_buf(), key, reason };
    let agent = validate_agent(raw.agent).map_err(|(key, reason)| invalid(key, reason))?;
    if raw.source.is_empty() {
        return Err(invalid("[[source]]".to_string(), "at least one [[source]] table is required".to_string()));
    }
    let sources = raw
        .source
        .into_iter()
        .enumerate()
        .map(|(index, source)| validate_source(index, source))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|(key, reason)| invalid(key, reason))?;
    Ok(Config { path: path.to_path_buf(), agent, sources })
}

/// A validation failure before the file name is attached: `(key, reason)`.
pub(crate) type Problem = (String, String);

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    #[serde(default)]
    agent: RawAgent,
    #[serde(default)]
    source: Vec<RawSource>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawAgent {
    state_dir: Option<PathBuf>,
    hooks_dirs: Option<Vec<PathBuf>>,
    poll_interval_secs: Option<u64>,
    fast_follow: Option<bool>,
    hook_timeout_secs: Option<u64>,
    hook_kill_grace_secs: Option<u64>,
    parallel: Option<u64>,
    journal_retention_secs: Option<u64>,
    metrics_textfile: Option<PathBuf>,
    #[serde(default)]
    hook_env: BTreeMap<String, String>,
}

#[derive(Debug, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
enum RawSource {
    Http(RawHttpSource),
    Local(RawLocalSource),
    HeatLocal(RawHeatLocalSource),
    Heat(RawHeatSource),
    Cfn(RawCfnSource),
    Zaqar(RawZaqarSource),
    Ec2(RawEc2Source),
    ConfigDrive(RawConfigDriveSource),
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawHttpSource {
    /// A URL or a list of URLs (checked by `http_urls`, which names the key when it is neither).
    url: Option<toml::Value>,
    /// The same as a list of `url`; giving both is an error.
    urls: Option<toml::Value>,
    token_file: Option<PathBuf>,
    ca_file: Option<PathBuf>,
    connect_timeout_secs: Option<u64>,
    read_timeout_secs: Option<u64>,
    long_poll_secs: Option<u64>,
    /// A boolean, checked by `self_configure` so that a wrong type names the key.
    self_configure: Option<toml::Value>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLocalSource {
    path: PathBuf,
    self_configure: Option<toml::Value>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawHeatLocalSource {
    path: Option<PathBuf>,
}

fn validate_agent(raw: RawAgent) -> Result<AgentSettings, Problem> {
    let key = |name: &str| format!("[agent] {name}");
    let state_dir = raw.state_dir.unwrap_or_else(|| PathBuf::from(DEFAULT_STATE_DIR));
    absolute(&state_dir).map_err(|reason| (key("state_dir"), reason))?;
    let hooks_dirs = raw.hooks_dirs.unwrap_or_else(|| DEFAULT_HOOKS_DIRS.iter().map(PathBuf::from).collect());
    for (index, dir) in hooks_dirs.iter().enumerate() {
        absolute(dir).map_err(|reason| (key(&format!("hooks_dirs[{index}]")), reason))?;
    }
    let poll_interval =
        at_least(raw.poll_interval_secs.unwrap_or(30), 1).map_err(|reason| (key("poll_interval_secs"), reason))?;
    let hook_timeout =
        at_least(raw.hook_timeout_secs.unwrap_or(3600), 1).map_err(|reason| (key("hook_timeout_secs"), reason))?;
    let hook_kill_grace = at_most(raw.hook_kill_grace_secs.unwrap_or(10), MAX_KILL_GRACE_SECS)
        .map_err(|reason| (key("hook_kill_grace_secs"), reason))?;
    let parallel = raw.parallel.unwrap_or(1);
    if !(1..=MAX_PARALLEL).contains(&parallel) {
        return Err((key("parallel"), format!("must be between 1 and {MAX_PARALLEL}, got {parallel}")));
    }
    for (name, value) in &raw.hook_env {
        let name_key = || key(&format!("hook_env.{name}"));
        if !is_valid_env_name(name) {
            return Err((name_key(), "not a valid environment variable name".to_string()));
        }
        if value.contains('\0') {
            return Err((name_key(), "the value contains a NUL byte".to_string()));
        }
    }
    if let Some(path) = &raw.metrics_textfile {
        let problem = |reason: String| (key("metrics_textfile"), reason);
        absolute(path).map_err(problem)?;
        if path.extension().is_none_or(|extension| extension != "prom") {
            return Err(problem(format!(
                "{} must end in .prom: node_exporter's textfile collector reads only *.prom files",
                path.display()
            )));
        }
    }
    Ok(AgentSettings {
        state_dir,
        hooks_dirs,
        poll_interval,
        fast_follow: raw.fast_follow.unwrap_or(true),
        hook_timeout,
        hook_kill_grace,
        // Safe: `parallel` was checked to be at most 64 above.
        parallel: usize::try_from(parallel).unwrap_or(1),
        hook_env: raw.hook_env,
        journal_retention: match raw.journal_retention_secs.unwrap_or(DEFAULT_JOURNAL_RETENTION_SECS) {
            0 => None,
            secs => Some(Duration::from_secs(secs)),
        },
        metrics_textfile: raw.metrics_textfile,
    })
}

fn validate_source(index: usize, raw: RawSource) -> Result<SourceConfig, Problem> {
    match raw {
        RawSource::Http(http) => validate_http(http)
            .map(SourceConfig::Http)
            .map_err(|(field, reason)| (format!("source[{index}] (http) {field}"), reason)),
        RawSource::Local(local) => validate_local(local).map(SourceConfig::Local).map_err(in_source(index, "local")),
        RawSource::HeatLocal(heat_local) => {
            let path = heat_local.path.unwrap_or_else(|| PathBuf::from(DEFAULT_HEAT_LOCAL_PATH));
            absolute(&path)
                .map(|()| SourceConfig::HeatLocal(HeatLocalSourceConfig { path }))
                .map_err(|reason| (format!("source[{index}] (heat-local) path"), reason))
        }
        RawSource::Heat(heat) => {
            openstack::validate_heat(heat).map(SourceConfig::Heat).map_err(in_source(index, "heat"))
        }
        RawSource::Cfn(cfn) => openstack::validate_cfn(cfn).map(SourceConfig::Cfn).map_err(in_source(index, "cfn")),
        RawSource::Zaqar(zaqar) => {
            openstack::validate_zaqar(zaqar).map(SourceConfig::Zaqar).map_err(in_source(index, "zaqar"))
        }
        RawSource::Ec2(ec2) => openstack::validate_ec2(ec2).map(SourceConfig::Ec2).map_err(in_source(index, "ec2")),
        RawSource::ConfigDrive(drive) => openstack::validate_config_drive(drive)
            .map(SourceConfig::ConfigDrive)
            .map_err(in_source(index, "config-drive")),
    }
}

/// Prefixes a field's problem with the source it belongs to: `source[2] (cfn) path`.
fn in_source(index: usize, kind: &'static str) -> impl Fn(Problem) -> Problem {
    move |(field, reason)| (format!("source[{index}] ({kind}) {field}"), reason)
}

fn validate_local(raw: RawLocalSource) -> Result<LocalSourceConfig, Problem> {
    absolute(&raw.path).map_err(|reason| ("path".to_string(), reason))?;
    Ok(LocalSourceConfig { path: raw.path, self_configure: self_configure(raw.self_configure)? })
}

/// `self_configure`: false unless given; anything but a boolean is refused naming the key.
fn self_configure(value: Option<toml::Value>) -> Result<bool, Problem> {
    match value {
        None => Ok(false),
        Some(toml::Value::Boolean(value)) => Ok(value),
        Some(other) => {
            Err(("self_configure".to_string(), format!("must be true or false, got {}", http_urls::a_type(&other))))
        }
    }
}

fn validate_http(raw: RawHttpSource) -> Result<HttpSourceConfig, Problem> {
    let urls = http_urls::validate(raw.url, raw.urls)?;
    for (name, file) in [("token_file", &raw.token_file), ("ca_file", &raw.ca_file)] {
        if let Some(file) = file {
            absolute(file).map_err(|reason| (name.to_string(), reason))?;
        }
    }
    let connect_timeout = at_least(raw.connect_timeout_secs.unwrap_or(10), 1)
        .map_err(|reason| ("connect_timeout_secs".to_string(), reason))?;
    let read_timeout =
        at_least(raw.read_timeout_secs.unwrap_or(30), 1).map_err(|reason| ("read_timeout_secs".to_string(), reason))?;
    Ok(HttpSourceConfig {
        urls,
        token_file: raw.token_file,
        ca_file: raw.ca_file,
        connect_timeout,
        read_timeout,
        long_poll: Duration::from_secs(raw.long_poll_secs.unwrap_or(60)),
        self_configure: self_configure(raw.self_configure)?,
    })
}

/// Checks that `url` is an absolute http(s) URL with a host. The reason never quotes the URL: its
/// query string may be a credential (a Swift temp URL signature).
pub(crate) fn check_url(url: &str) -> Result<(), String> {
    let parsed = reqwest::Url::parse(url).map_err(|error| format!("not a valid URL: {error}"))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(format!("scheme must be http or https, got {:?}", parsed.scheme()));
    }
    if parsed.host_str().is_none_or(str::is_empty) {
        return Err("the URL has no host".to_string());
    }
    Ok(())
}

/// Relative paths would depend on the agent's working directory, which differs between a
/// systemd unit and a shell.
pub(crate) fn absolute(path: &Path) -> Result<(), String> {
    if path.is_absolute() {
        Ok(())
    } else {
        Err(format!("must be an absolute path, got {:?}", path.display().to_string()))
    }
}

/// The longest `hook_kill_grace_secs`: a day. Any longer is a mistake, and the deadline of a
/// grace must stay within what the clock can add.
const MAX_KILL_GRACE_SECS: u64 = 86_400;

fn at_most(secs: u64, maximum: u64) -> Result<Duration, String> {
    if secs > maximum {
        return Err(format!("must be at most {maximum}, got {secs}"));
    }
    Ok(Duration::from_secs(secs))
}

pub(crate) fn at_least(secs: u64, minimum: u64) -> Result<Duration, String> {
    if secs < minimum {
        return Err(format!("must be at least {minimum}, got {secs}"));
    }
    Ok(Duration::from_secs(secs))
}

#[cfg(test)]
mod tests;
