//! TLS for `serve --tls-cert FILE --tls-key FILE`: the certificate chain and key (PEM) are read
//! at start and again on every SIGHUP; each new handshake uses the pair last read. A reload that
//! fails (unreadable file, no certificate, a key that does not match) is logged and the previous
//! pair stays in use, so a half-copied renewal never takes the API down. Also the start-up
//! warning about a plain-http public URL that is not on loopback. See docs/security.md.

use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use rustls::ServerConfig;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;
use tokio_util::sync::CancellationToken;

/// How long a client may take to complete the TLS handshake (as long as for a request head,
/// `connection::REQUEST_HEAD_TIMEOUT`).
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// The certificate chain and private key files `serve` was given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
}

#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("cannot read the TLS certificate chain {path}")]
    ReadCert {
        path: PathBuf,
        #[source]
        source: rustls::pki_types::pem::Error,
    },
    #[error("{path} holds no PEM certificate")]
    NoCert { path: PathBuf },
    #[error("cannot read the TLS private key {path}")]
    ReadKey {
        path: PathBuf,
        #[source]
        source: rustls::pki_types::pem::Error,
    },
    #[error("cannot set up TLS")]
    Config(#[source] rustls::Error),
    #[error("cannot use the TLS key {key} with the certificate {cert}")]
    Unusable {
        cert: PathBuf,
        key: PathBuf,
        #[source]
        source: rustls::Error,
    },
}

/// The certificate every new handshake gets; `reload` replaces it.
#[derive(Debug)]
pub struct ReloadingCert {
    files: TlsFiles,
    provider: Arc<CryptoProvider>,
    current: RwLock<Arc<CertifiedKey>>,
}

impl ReloadingCert {
    /// Reads the files once; an error here stops `serve`.
    pub fn load(files: TlsFiles) -> Result<Arc<ReloadingCert>, TlsError> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let current = read_pair(&files, &provider)?;
        Ok(Arc::new(ReloadingCert { files, provider, current: RwLock::new(Arc::new(current)) }))
    }

    /// Reads the files again; on success new handshakes use them, on failure nothing changes.
    pub fn reload(&self) -> Result<(), TlsError> {
        let fresh = Arc::new(read_pair(&self.files, &self.provider)?);
        if let Ok(mut current) = self.current.write() {
            *current = fresh;
        }
        Ok(())
    }

    /// The acceptor for the listener: TLS 1.2 and 1.3, HTTP/1.1 only.
    pub fn acceptor(self: &Arc<Self>) -> Result<TlsAcceptor, rustls::Error> {
        let mut config = ServerConfig::builder_with_provider(Arc::clone(&self.provider))
            .with_safe_default_protocol_versions()?
            .with_no_client_auth()
            .with_cert_resolver(Arc::clone(self) as Arc<dyn ResolvesServerCert>);
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(TlsAcceptor::from(Arc::new(config)))
    }
}

impl ResolvesServerCert for ReloadingCert {
    fn resolve(&self, _: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        self.current.read().ok().map(|current| Arc::clone(&current))
    }
}

fn read_pair(files: &TlsFiles, provider: &CryptoProvider) -> Result<CertifiedKey, TlsError> {
    let cert_error = |source| TlsError::ReadCert { path: files.cert.clone(), source };
    let chain = CertificateDer::pem_file_iter(&files.cert)
        .map_err(cert_error)?
        .collect::<Result<Vec<_>, _>>()
        .map_err(cert_error)?;
    if chain.is_empty() {
        return Err(TlsError::NoCert { path: files.cert.clone() });
    }
    let key = PrivateKeyDer::from_pem_file(&files.key)
        .map_err(|source| TlsError::ReadKey { path: files.key.clone(), source })?;
    CertifiedKey::from_der(chain, key, provider).map_err(|source| TlsError::Unusable {
        cert: files.cert.clone(),
        key: files.key.clone(),
        source,
    })
}

/// What `serve` needs for TLS: reads the files (an error stops `serve`), and re-reads them on
/// every SIGHUP until `shutdown`.
pub fn start(files: TlsFiles, shutdown: CancellationToken) -> Result<TlsAcceptor, TlsError> {
    let cert = ReloadingCert::load(files)?;
    let acceptor = cert.acceptor().map_err(TlsError::Config)?;
    tokio::spawn(reload_on_sighup(cert, shutdown));
    Ok(acceptor)
}

/// Re-reads the certificate and key on every SIGHUP until `shutdown`; a failed reload is logged
/// and the previous pair kept.
pub async fn reload_on_sighup(cert: Arc<ReloadingCert>, shutdown: CancellationToken) {
    use tokio::signal::unix::{SignalKind, signal};
    let mut hangups = match signal(SignalKind::hangup()) {
        Ok(hangups) => hangups,
        Err(error) => {
            tracing::warn!(error = %error, "cannot watch for SIGHUP; the TLS certificate will not be reloaded");
            return;
        }
    };
    loop {
        tokio::select! {
            () = shutdown.cancelled() => return,
            received = hangups.recv() => if received.is_none() { return },
        }
        match cert.reload() {
            Ok(()) => tracing::info!(cert = %cert.files.cert.display(), "TLS certificate reloaded"),
            Err(error) => tracing::error!(
                error = %crate::error_chain(&error),
                "cannot reload the TLS certificate; still using the previous one"
            ),
        }
    }
}

/// The TLS handshake on an accepted connection, within `HANDSHAKE_TIMEOUT`; `None` (logged at
/// debug level) when it fails or takes too long.
pub(super) async fn handshake<S>(acceptor: &TlsAcceptor, stream: S) -> Option<TlsStream<S>>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
        Ok(Ok(stream)) => Some(stream),
        Ok(Err(error)) => {
            tracing::debug!(error = %error, "TLS handshake failed");
            None
        }
        Err(_) => {
            tracing::debug!("TLS handshake timed out");
            None
        }
    }
}

/// The warning `serve` logs when agents would send tokens and receive configs in clear: a
/// `http://` public URL whose host is not a loopback address (or `localhost`).
pub fn plain_http_warning(public_url: &str) -> Option<String> {
    let url = reqwest::Url::parse(public_url).ok()?;
    if url.scheme() != "http" {
        return None;
    }
    let host = url.host_str()?;
    let loopback = host.eq_ignore_ascii_case("localhost")
        || host.trim_start_matches('[').trim_end_matches(']').parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback());
    (!loopback).then(|| {
        format!(
            "the public URL {public_url} is plain http on a non-loopback address: server and signal tokens and \
             deployment configs cross the network in clear; serve with --tls-cert/--tls-key or behind a \
             TLS-terminating proxy (see docs/security.md)"
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_http_is_flagged_only_off_loopback() {
        for url in ["http://192.0.2.10:8080", "http://shim.example:8080/", "http://0.0.0.0:8080"] {
            assert!(plain_http_warning(url).is_some_and(|warning| warning.contains(url)), "{url}");
        }
        let quiet =
            ["http://127.0.0.1:8080", "http://[::1]:8080", "http://localhost:8080", "https://shim.example:8443"];
        for url in quiet {
            assert_eq!(plain_http_warning(url), None, "{url}");
        }
    }

    #[test]
    fn missing_or_empty_files_are_clear_errors() {
        let dir = tempfile::tempdir().unwrap();
        let files = TlsFiles { cert: dir.path().join("cert.pem"), key: dir.path().join("key.pem") };
        let message = crate::error_chain(&ReloadingCert::load(files.clone()).unwrap_err());
        assert!(message.contains("cert.pem"), "{message}");
        std::fs::write(&files.cert, "not a certificate\n").unwrap();
        let message = crate::error_chain(&ReloadingCert::load(files).unwrap_err());
        assert!(message.contains("holds no PEM certificate"), "{message}");
    }
}
