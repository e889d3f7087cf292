//! The one place the agent builds an HTTP client: metadata sources, deployment signals and the
//! `signal` command all get the same policy, so whether a request reaches its server never
//! depends on which client sends it (see docs/security.md#network). Every client trusts the
//! system's roots plus every configured `ca_file` (`TrustRoots`), uses no proxy from the
//! environment (reading `HTTP_PROXY` would be an environment read outside `main`, and would send
//! tokens and signal URLs through whoever set it), and follows no redirect.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use reqwest::{Certificate, Client, redirect};

use crate::config::Config;
#[cfg(test)]
use crate::config::SourceConfig;

/// The extra trust roots every client adds to the system's: the configured CA files.
#[derive(Debug, Clone, Default)]
pub struct TrustRoots {
    certificates: Arc<[Certificate]>,
}

/// A CA file that cannot be used; `key` names where it was configured.
#[derive(Debug, thiserror::Error)]
pub enum CaFileError {
    #[error("{key}: cannot read CA file {path}")]
    Read {
        key: String,
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("{key}: CA file {path}: {reason}")]
    Bad { key: String, path: PathBuf, reason: &'static str },
}

impl TrustRoots {
    /// The CA file of every source in `config` (`ca_file`, or a cfn source's `ca_certificate`), each named by its source in errors.
    pub fn from_config(config: &Config) -> Result<TrustRoots, CaFileError> {
        let mut certificates = Vec::new();
        for (index, source) in config.sources.iter().enumerate() {
            if let Some((_, path)) = source.ca_file() {
                certificates.extend(read_ca(&format!("source[{index}] {}", source.kind()), path)?);
            }
        }
        Ok(TrustRoots { certificates: certificates.into() })
    }

    /// These roots and the ones in `paths` (PEM bundles), named by `key` in errors.
    pub fn with_files(self, key: &str, paths: &[PathBuf]) -> Result<TrustRoots, CaFileError> {
        let mut certificates = self.certificates.to_vec();
        for path in paths {
            certificates.extend(read_ca(key, path)?);
        }
        Ok(TrustRoots { certificates: certificates.into() })
    }

    /// How many extra roots there are.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.certificates.len()
    }
}

/// Reads a PEM bundle of one or more certificates.
fn read_ca(key: &str, path: &Path) -> Result<Vec<Certificate>, CaFileError> {
    let bad = |reason| CaFileError::Bad { key: key.to_string(), path: path.to_path_buf(), reason };
    let pem = fs::read(path).map_err(|source| CaFileError::Read {
        key: key.to_string(),
        path: path.to_path_buf(),
        source,
    })?;
    let certificates = Certificate::from_pem_bundle(&pem).map_err(|_| bad("not a PEM certificate bundle"))?;
    if certificates.is_empty() {
        return Err(bad("no PEM certificate found"));
    }
    Ok(certificates)
}

/// A client with the agent's one policy: `roots` added to the system's, no environment proxy,
/// no redirects, the agent's user agent; `timeout` bounds a whole request unless the caller sets
/// one per request.
pub(crate) fn build(
    connect_timeout: Duration,
    timeout: Option<Duration>,
    roots: &TrustRoots,
) -> reqwest::Result<Client> {
    // reqwest is built without a default crypto provider; installing ring twice is harmless.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut builder = Client::builder()
        .connect_timeout(connect_timeout)
        .redirect(redirect::Policy::none())
        .no_proxy()
        .user_agent(concat!("anneal-agent/", env!("CARGO_PKG_VERSION")));
    if let Some(timeout) = timeout {
        builder = builder.timeout(timeout);
    }
    let extra: Vec<reqwest::Certificate> = roots.certificates.iter().chain(fallback_roots()).cloned().collect();
    if !extra.is_empty() {
        builder = builder.tls_certs_merge(extra);
    }
    builder.build()
}

/// The Mozilla roots built into the binary (webpki-root-certs), when the system has no CA store
/// of its own (a minimal image without ca-certificates): looked for once per process.
fn fallback_roots() -> &'static [reqwest::Certificate] {
    static ROOTS: std::sync::OnceLock<Vec<reqwest::Certificate>> = std::sync::OnceLock::new();
    ROOTS.get_or_init(|| builtin_roots_unless(!rustls_native_certs::load_native_certs().certs.is_empty()))
}

fn builtin_roots_unless(system_has_roots: bool) -> Vec<reqwest::Certificate> {
    if system_has_roots {
        return Vec::new();
    }
    tracing::info!("the system has no CA certificates; using the Mozilla roots built into anneal-agent");
    webpki_root_certs::TLS_SERVER_ROOT_CERTS
        .iter()
        .filter_map(|der| reqwest::Certificate::from_der(der.as_ref()).ok())
        .collect()
}

#[cfg(test)]
mod tests;
