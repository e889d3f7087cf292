//! Metadata sources: where the agent reads its Heat-format metadata document (a JSON object) from.
//! `Source` is the closed set of kinds (http, local, heat-local, and os-collect-config's heat,
//! cfn, zaqar, ec2 and config-drive), built from the config in one place; `cache` keeps each
//! source's last good document across restarts, `state` holds what is known of each source and
//! merges it into one view, `collector` fetches every source once (`once`) or starts one polling
//! task per source (`poll`, the daemon, timed by `pace`). Sources only read: they never run hooks, and they never
//! log a token or a URL's query string.

mod body;
pub(crate) mod cache;
pub(crate) mod cfn;
pub(crate) mod collector;
pub(crate) mod config_drive;
pub(crate) mod ec2;
pub(crate) mod heat;
pub(crate) mod heat_local;
pub(crate) mod http;
pub(crate) mod local;
pub(crate) mod pace;
pub(crate) mod poll;
pub(crate) mod state;
pub(crate) mod zaqar;

use std::io;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};
use tokio_util::sync::CancellationToken;

pub(crate) use cfn::CfnSource;
pub(crate) use config_drive::ConfigDriveSource;
pub(crate) use ec2::Ec2Source;
pub(crate) use heat::HeatSource;
pub(crate) use heat_local::HeatLocalSource;
pub(crate) use http::HttpSource;
pub(crate) use local::LocalSource;
pub(crate) use zaqar::ZaqarSource;

use crate::config::SourceConfig;
use crate::httpclient::TrustRoots;
use crate::keystone::KeystoneError;

/// The largest metadata document (or local file) we accept. Heat's documents are far smaller; the
/// limit keeps a broken or hostile server from exhausting a small VM's memory.
pub(crate) const MAX_DOCUMENT_BYTES: usize = 16 * 1024 * 1024;

/// A configured metadata source.
#[derive(Debug)]
pub(crate) enum Source {
    Http(HttpSource),
    Local(LocalSource),
    HeatLocal(HeatLocalSource),
    Cfn(CfnSource),
    Ec2(Ec2Source),
    ConfigDrive(ConfigDriveSource),
    Heat(HeatSource),
    Zaqar(ZaqarSource),
}

/// What one fetch produced.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Fetched {
    /// The whole current document (a JSON object).
    Document(Value),
    /// The server said the document has not changed since the validators we sent.
    Unchanged,
    /// Shutdown was requested while fetching.
    Cancelled,
}

/// The HTTP cache validators of the last document, echoed back on the next request.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Validators {
    pub(crate) etag: Option<String>,
    pub(crate) last_modified: Option<String>,
}

/// Why a fetch failed. `source_name` is the source's stable name; URLs are already redacted.
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    #[error("{source_name}: cannot build the HTTP client")]
    Client {
        source_name: String,
        #[source]
        source: reqwest::Error,
    },
    #[error("{source_name}: cannot read {path}")]
    ReadFile {
        source_name: String,
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("{source_name}: {path}: {reason}")]
    BadFile { source_name: String, path: PathBuf, reason: String },
    #[error("{source_name}: {path}: {reason}")]
    Unsafe { source_name: String, path: PathBuf, reason: String },
    #[error("{source_name}: cannot GET {url}")]
    Request {
        source_name: String,
        url: String,
        #[source]
        source: reqwest::Error,
    },
    #[error("{source_name}: GET {url}: no metadata yet (404 Not Found)")]
    NotFound { source_name: String, url: String },
    #[error("{source_name}: GET {url} answered HTTP {status}")]
    Status { source_name: String, url: String, status: u16 },
    #[error("{source_name}: GET {url} answered a redirect (HTTP {status}); redirects are not followed")]
    Redirect { source_name: String, url: String, status: u16 },
    #[error("{source_name}: {what} is larger than the limit of {limit} bytes")]
    TooLarge { source_name: String, what: String, limit: usize },
    #[error("{source_name}: {what} is not valid JSON")]
    InvalidJson {
        source_name: String,
        what: String,
        #[source]
        source: serde_json::Error,
    },
    #[error("{source_name}: {what} is a JSON {found}, not an object")]
    NotObject { source_name: String, what: String, found: &'static str },
    /// The server answered with an error of its own (heat-api-cfn's `ErrorResponse`).
    #[error("{source_name}: GET {url} was refused with {code} (HTTP {status}): {message}")]
    Refused { source_name: String, url: String, status: u16, code: String, message: String },
    /// The server's answer cannot be used (malformed, missing what we asked for, over a limit).
    #[error("{source_name}: {what}: {reason}")]
    BadResponse { source_name: String, what: String, reason: String },
    /// A helper program (blkid, mount, umount) failed.
    #[error("{source_name}: {program}: {reason}")]
    Command { source_name: String, program: PathBuf, reason: String },
    #[error("{source_name}: no token or endpoint from keystone")]
    Keystone {
        source_name: String,
        #[source]
        source: KeystoneError,
    },
    #[error("{source_name}: the {service_type} endpoint {url} in the keystone catalog is not an http(s) URL")]
    BadEndpoint { source_name: String, url: String, service_type: &'static str },
    #[error("{source_name}: cannot {method} {url}")]
    Send {
        source_name: String,
        method: &'static str,
        url: String,
        #[source]
        source: reqwest::Error,
    },
    #[error("{source_name}: {method} {url} answered HTTP {status}")]
    Answered { source_name: String, method: &'static str, url: String, status: u16 },
    #[error("cannot use the source cache {path}")]
    Cache {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

impl SourceError {
    /// Whether the failure is likely to go away by itself (network trouble, a server not yet
    /// ready, an overloaded server), as opposed to a configuration or content problem. Both kinds
    /// are retried with backoff; this decides how loudly they are reported.
    pub(crate) fn is_transient(&self) -> bool {
        match self {
            SourceError::Request { .. } | SourceError::NotFound { .. } | SourceError::Send { .. } => true,
            SourceError::Status { status, .. }
            | SourceError::Refused { status, .. }
            | SourceError::Answered { status, .. } => *status >= 500 || *status == 408 || *status == 429,
            SourceError::Keystone { source, .. } => source.is_transient(),
            _ => false,
        }
    }
}

impl Source {
    /// Builds source number `index` of the config. Reads an http source's token file; its client
    /// trusts `roots` (every configured CA file) besides the system's.
    pub(crate) fn from_config(index: usize, config: &SourceConfig, roots: &TrustRoots) -> Result<Source, SourceError> {
        Source::named(config.name_at(index), config, roots)
    }

    /// Builds a source called `name` (a self-configured one: `os-collect-config heat`).
    pub(crate) fn named(name: String, config: &SourceConfig, roots: &TrustRoots) -> Result<Source, SourceError> {
        Ok(match config {
            SourceConfig::Http(http) => Source::Http(HttpSource::new(name, http, roots)?),
            SourceConfig::Local(local) => Source::Local(LocalSource::new(name, local.path.clone())),
            SourceConfig::HeatLocal(heat_local) => {
                Source::HeatLocal(HeatLocalSource::new(name, heat_local.path.clone()))
            }
            SourceConfig::Cfn(cfn) => Source::Cfn(CfnSource::new(name, cfn, roots)?),
            SourceConfig::Ec2(ec2) => Source::Ec2(Ec2Source::new(name, ec2, roots)?),
            SourceConfig::ConfigDrive(drive) => Source::ConfigDrive(ConfigDriveSource::new(name, drive)),
            SourceConfig::Heat(heat) => Source::Heat(HeatSource::new(name, heat, roots)?),
            SourceConfig::Zaqar(zaqar) => Source::Zaqar(ZaqarSource::new(name, zaqar, roots)?),
        })
    }

    /// Stable name such as `source[0] http`: used in logs and as the cache key.
    pub(crate) fn name(&self) -> &str {
        match self {
            Source::Http(source) => source.name(),
            Source::Local(source) => source.name(),
            Source::HeatLocal(source) => source.name(),
            Source::Cfn(source) => source.name(),
            Source::Ec2(source) => source.name(),
            Source::ConfigDrive(source) => source.name(),
            Source::Heat(source) => source.name(),
            Source::Zaqar(source) => source.name(),
        }
    }

    /// Whether the next `fetch(true, ..)` will long-poll (an http source whose server advertised
    /// long-poll, with long-poll enabled and an ETag to wait on).
    pub(crate) fn can_long_poll(&self) -> bool {
        match self {
            Source::Http(source) => source.can_long_poll(),
            Source::Local(_)
            | Source::HeatLocal(_)
            | Source::Cfn(_)
            | Source::Ec2(_)
            | Source::ConfigDrive(_)
            | Source::Heat(_)
            | Source::Zaqar(_) => false,
        }
    }

    /// Fetches the current document. `wait` asks an http source to long-poll when it can.
    pub(crate) async fn fetch(&mut self, wait: bool, shutdown: &CancellationToken) -> Result<Fetched, SourceError> {
        if shutdown.is_cancelled() {
            return Ok(Fetched::Cancelled);
        }
        match self {
            Source::Http(source) => source.fetch(wait, shutdown).await,
            Source::Local(source) => source.fetch(),
            Source::HeatLocal(source) => source.fetch(),
            Source::Cfn(source) => source.fetch(shutdown).await,
            Source::Ec2(source) => source.fetch(shutdown).await,
            Source::ConfigDrive(source) => source.fetch(shutdown).await,
            Source::Heat(source) => source.fetch(shutdown).await,
            Source::Zaqar(source) => source.fetch(shutdown).await,
        }
    }

    /// Called once the document of the last fetch is persisted (or needed no write), and after
    /// a failed fetch: a zaqar source deletes the messages it read (see `zaqar`); the others
    /// keep nothing on the server to release.
    pub(crate) async fn settle(&mut self, shutdown: &CancellationToken) {
        match self {
            Source::Zaqar(source) => source.settle(shutdown).await,
            Source::Http(_)
            | Source::Local(_)
            | Source::HeatLocal(_)
            | Source::Cfn(_)
            | Source::Ec2(_)
            | Source::ConfigDrive(_)
            | Source::Heat(_) => {}
        }
    }

    /// The validators to store with the last document (only http sources have any).
    pub(crate) fn validators(&self) -> Validators {
        match self {
            Source::Http(source) => source.validators().clone(),
            Source::Local(_)
            | Source::HeatLocal(_)
            | Source::Cfn(_)
            | Source::Ec2(_)
            | Source::ConfigDrive(_)
            | Source::Heat(_)
            | Source::Zaqar(_) => Validators::default(),
        }
    }

    /// Restores validators loaded from the cache, so the first request after a restart can be
    /// answered with 304.
    pub(crate) fn restore_validators(&mut self, validators: Validators) {
        if let Source::Http(source) = self {
            source.restore_validators(validators);
        }
    }

    /// A digest of what the source reads (kind and URL or path). A cache file written for a
    /// different URL or path is ignored. Hashed because a URL may carry a credential.
    pub(crate) fn identity(&self) -> String {
        let described = match self {
            Source::Http(source) => source.described(),
            Source::Local(source) => format!("local {}", source.path().display()),
            Source::HeatLocal(source) => format!("heat-local {}", source.path().display()),
            Source::Cfn(source) => source.described(),
            Source::Ec2(source) => format!("ec2 {}", source.url()),
            Source::ConfigDrive(source) => source.described(),
            Source::Heat(source) => source.described(),
            Source::Zaqar(source) => source.described(),
        };
        hex(&Sha256::digest(described.as_bytes()))
    }
}

pub(crate) use crate::error_chain;

/// Checks that a parsed document is a JSON object; `what` names where it came from.
fn require_object(source_name: &str, what: &str, value: Value) -> Result<Value, SourceError> {
    let found = match &value {
        Value::Object(_) => return Ok(value),
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
    };
    Err(SourceError::NotObject { source_name: source_name.to_string(), what: what.to_string(), found })
}

/// Parses `bytes` as a JSON object.
fn parse_document(source_name: &str, what: &str, bytes: &[u8]) -> Result<Value, SourceError> {
    let value = serde_json::from_slice(bytes).map_err(|source| SourceError::InvalidJson {
        source_name: source_name.to_string(),
        what: what.to_string(),
        source,
    })?;
    require_object(source_name, what, value)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{HeatLocalSourceConfig, HttpSourceConfig, LocalSourceConfig};
    use serde_json::json;
    use std::time::Duration;

    fn http_config(url: &str) -> SourceConfig {
        SourceConfig::Http(HttpSourceConfig {
            urls: vec![url.to_string()],
            token_file: None,
            ca_file: None,
            connect_timeout: Duration::from_secs(1),
            read_timeout: Duration::from_secs(1),
            long_poll: Duration::from_secs(60),
            self_configure: false,
        })
    }

    #[test]
    fn names_are_index_and_kind() {
        let http = Source::from_config(0, &http_config("http://127.0.0.1:9/m"), &TrustRoots::default()).unwrap();
        assert_eq!(http.name(), "source[0] http");
        let local = Source::from_config(
            1,
            &SourceConfig::Local(LocalSourceConfig { path: "/l".into(), self_configure: false }),
            &TrustRoots::default(),
        )
        .unwrap();
        assert_eq!(local.name(), "source[1] local");
        let heat = SourceConfig::HeatLocal(HeatLocalSourceConfig { path: "/h".into() });
        assert_eq!(Source::from_config(2, &heat, &TrustRoots::default()).unwrap().name(), "source[2] heat-local");
        assert!(!local.can_long_poll());
        assert!(!http.can_long_poll(), "no long-poll before the server advertised it");
    }

    #[test]
    fn os_collect_config_kinds_are_built_without_sending_anything() {
        use crate::config::{
            CfnSourceConfig, ClientConfig, ConfigDriveSourceConfig, Ec2SourceConfig, HeatSourceConfig, KeystoneConfig,
            ZaqarSourceConfig,
        };
        use crate::secret::Secret;
        let keystone = KeystoneConfig {
            auth_url: "http://127.0.0.1:9/v3".into(),
            user_id: "u".into(),
            password: Secret::new("pa55word-in-memory".into()),
            project_id: "p".into(),
            region_name: None,
        };
        let client = ClientConfig {
            ca_file: None,
            connect_timeout: Duration::from_secs(1),
            read_timeout: Duration::from_secs(1),
        };
        let cfn = SourceConfig::Cfn(CfnSourceConfig {
            metadata_url: "http://127.0.0.1:9/v1/".to_string(),
            stack_name: "s".to_string(),
            path: "server.Metadata".to_string(),
            access_key_id: "ak".to_string(),
            secret_access_key: Secret::new("very-secret".to_string()),
            client: client.clone(),
        });
        let ec2 = SourceConfig::Ec2(Ec2SourceConfig {
            metadata_url: "http://127.0.0.1:9/m/".to_string(),
            client: client.clone(),
        });
        let drive = SourceConfig::ConfigDrive(ConfigDriveSourceConfig { path: None, label: "config-2".to_string() });
        let heat = SourceConfig::Heat(HeatSourceConfig {
            keystone: keystone.clone(),
            stack_id: "s/1".into(),
            resource_name: "server".into(),
            client: client.clone(),
        });
        let zaqar = SourceConfig::Zaqar(ZaqarSourceConfig { keystone, queue_id: "q".into(), client });
        let roots = TrustRoots::default();
        let built: Vec<Source> = [cfn, ec2, drive, heat, zaqar]
            .iter()
            .enumerate()
            .map(|(index, config)| Source::from_config(index, config, &roots).unwrap())
            .collect();
        let names: Vec<&str> = built.iter().map(Source::name).collect();
        assert_eq!(
            names,
            ["source[0] cfn", "source[1] ec2", "source[2] config-drive", "source[3] heat", "source[4] zaqar"]
        );
        assert!(built.iter().all(|source| !source.can_long_poll() && source.validators() == Validators::default()));
        let printed = format!("{built:?}");
        assert!(!printed.contains("very-secret") && !printed.contains("pa55word"), "{printed}");
        let identities: std::collections::HashSet<String> = built.iter().map(Source::identity).collect();
        assert_eq!(identities.len(), 5);
    }

    #[test]
    fn identity_depends_on_what_is_read() {
        let one = Source::from_config(0, &http_config("http://127.0.0.1:9/a?sig=s"), &TrustRoots::default()).unwrap();
        let same = Source::from_config(0, &http_config("http://127.0.0.1:9/a?sig=s"), &TrustRoots::default()).unwrap();
        let other = Source::from_config(0, &http_config("http://127.0.0.1:9/b"), &TrustRoots::default()).unwrap();
        assert_eq!(one.identity(), same.identity());
        assert_ne!(one.identity(), other.identity());
        assert_eq!(one.identity().len(), 64);
        assert!(!one.identity().contains("sig"));
    }

    #[tokio::test]
    async fn cancelled_before_fetch() {
        let mut source = Source::from_config(0, &http_config("http://127.0.0.1:9/m"), &TrustRoots::default()).unwrap();
        let shutdown = CancellationToken::new();
        shutdown.cancel();
        assert_eq!(source.fetch(false, &shutdown).await.unwrap(), Fetched::Cancelled);
    }

    #[test]
    fn objects_are_required() {
        assert_eq!(parse_document("s", "f", b"{\"a\": 1}").unwrap(), json!({"a": 1}));
        let error = parse_document("s", "f", b"[1]").unwrap_err();
        assert_eq!(error.to_string(), "s: f is a JSON array, not an object");
        let error = parse_document("s", "f", b"{").unwrap_err();
        assert!(matches!(error, SourceError::InvalidJson { .. }));
        assert!(error_chain(&error).starts_with("s: f is not valid JSON: EOF"), "{}", error_chain(&error));
    }

    #[test]
    fn transient_classification() {
        let status = |status| SourceError::Status { source_name: "s".into(), url: "u".into(), status };
        assert!(status(500).is_transient());
        assert!(status(503).is_transient());
        assert!(status(429).is_transient());
        assert!(status(408).is_transient());
        assert!(!status(403).is_transient());
        assert!(SourceError::NotFound { source_name: "s".into(), url: "u".into() }.is_transient());
        let answered =
            |status| SourceError::Answered { source_name: "s".into(), method: "POST", url: "u".into(), status };
        assert!(answered(503).is_transient() && answered(429).is_transient() && !answered(403).is_transient());
        let keystone = |source| SourceError::Keystone { source_name: "s".into(), source };
        assert!(keystone(KeystoneError::Status { url: "u".into(), status: 502 }).is_transient());
        let refused =
            KeystoneError::Refused { url: "u".into(), user_id: "a".into(), project_id: "p".into(), status: 401 };
        assert!(!keystone(refused).is_transient());
        assert!(!SourceError::Redirect { source_name: "s".into(), url: "u".into(), status: 302 }.is_transient());
        let too_large = SourceError::TooLarge { source_name: "s".into(), what: "w".into(), limit: 1 };
        assert!(!too_large.is_transient());
    }
}
