//! `anneal-shim serve --tls-cert FILE --tls-key FILE` (docs/security.md "TLS"), with a CA and
//! certificates made at test time: a client trusting the CA reads metadata over https, one that
//! does not is refused; `server add --tls-ca` prints https URLs and the CA; a real agent with
//! `ca_file` polls it; SIGHUP makes new handshakes use a new certificate, and a bad file on
//! reload keeps the old one with an error logged; a plain-http public URL off loopback is
//! warned about at start.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anneal_tests::{Agent, AgentSettings, CommandOutput, Daemon, run_command, shim_binary, toml_string, wait_until};
use nix::sys::signal::Signal;
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair};
use serde_json::Value;
use tokio::process::Command;

const LIMIT: Duration = Duration::from_secs(30);

/// A CA and a certificate it signed for 127.0.0.1 and localhost, as PEM.
struct Pki {
    ca: String,
    cert: String,
    key: String,
}

fn make_pki(name: &str) -> Pki {
    let ca_key = KeyPair::generate().expect("CA key");
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params.distinguished_name.push(DnType::CommonName, format!("anneal test CA {name}"));
    let ca = ca_params.self_signed(&ca_key).expect("CA certificate");
    let key = KeyPair::generate().expect("server key");
    let params = CertificateParams::new(vec!["127.0.0.1".to_string(), "localhost".to_string()]).expect("params");
    let cert = params.signed_by(&key, &ca, &ca_key).expect("server certificate");
    Pki { ca: ca.pem(), cert: cert.pem(), key: key.serialize_pem() }
}

/// A shim serving TLS from `dir/cert.pem` and `dir/key.pem`.
struct TlsShim {
    daemon: Daemon,
    url: String,
    dir: PathBuf,
}

impl TlsShim {
    fn install(dir: &Path, pki: &Pki) {
        std::fs::write(dir.join("ca.pem"), &pki.ca).expect("write CA");
        std::fs::write(dir.join("cert.pem"), &pki.cert).expect("write cert");
        std::fs::write(dir.join("key.pem"), &pki.key).expect("write key");
    }

    async fn start(dir: &Path, extra: &[&str]) -> TlsShim {
        let mut command = Command::new(shim_binary());
        command
            .args(["serve", "--listen", "127.0.0.1:0", "--db"])
            .arg(format!("sqlite://{}", dir.join("shim.db").display()))
            .args(extra)
            .env_remove("ANNEAL_TOKEN")
            .env("ANNEAL_LOG", "info");
        let stdout = dir.join("shim.out");
        let daemon = Daemon::spawn(command, &stdout, &dir.join("shim.log"));
        let url = wait_until(LIMIT, "serve prints its URL", || async {
            let text = std::fs::read_to_string(&stdout).unwrap_or_default();
            let line = text.lines().find(|line| line.contains("listening on"))?.to_string();
            line.split_whitespace().nth(3).map(str::to_string)
        })
        .await;
        TlsShim { daemon, url, dir: dir.to_path_buf() }
    }

    async fn start_tls(dir: &Path) -> TlsShim {
        let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
        let (cert, key) = (cert.to_str().expect("utf-8"), key.to_str().expect("utf-8"));
        TlsShim::start(dir, &["--tls-cert", cert, "--tls-key", key]).await
    }

    async fn cli(&self, args: &[&str]) -> CommandOutput {
        let mut command = Command::new(shim_binary());
        command.args(args).args(["--url", &self.url, "--token-file"]).arg(self.dir.join("admin.token"));
        command.env_remove("ANNEAL_TOKEN").env_remove("ANNEAL_URL");
        run_command(command, LIMIT).await
    }

    fn log(&self) -> String {
        self.daemon.log_text()
    }
}

/// A fresh client (no pooled connection: every request makes a new handshake) trusting `ca`.
fn client_trusting(ca: Option<&str>) -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut builder = reqwest::Client::builder().no_proxy().timeout(Duration::from_secs(10));
    if let Some(ca) = ca {
        builder = builder.tls_certs_merge(reqwest::Certificate::from_pem_bundle(ca.as_bytes()).expect("CA PEM"));
    }
    builder.build().expect("client")
}

/// The status of a metadata GET, or the error's text when the request failed (e.g. TLS).
async fn get_metadata(ca: Option<&str>, credentials: &Value) -> Result<u16, String> {
    let url = credentials["metadata_url"].as_str().expect("metadata_url");
    let token = credentials["token"].as_str().expect("token");
    let response = client_trusting(ca).get(url).bearer_auth(token).send().await;
    response.map(|response| response.status().as_u16()).map_err(|error| format!("{error:?}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_trusting_the_ca_reads_metadata_over_https() {
    let dir = anneal_tests::private_temp_dir("anneal-tls-");
    let pki = make_pki("one");
    TlsShim::install(dir.path(), &pki);
    let shim = TlsShim::start_tls(dir.path()).await;
    assert!(shim.url.starts_with("https://127.0.0.1:"), "{}", shim.url);
    let ca_path = dir.path().join("ca.pem");
    let ca_arg = ca_path.to_str().expect("utf-8");

    let output = shim.cli(&["server", "add", "vm1", "--format", "json", "--tls-ca", ca_arg]).await;
    let credentials: Value = serde_json::from_str(&output.expect_success("server add")).expect("JSON");
    let metadata_url = credentials["metadata_url"].as_str().expect("metadata_url");
    assert!(metadata_url.starts_with("https://"), "the public URL is https: {metadata_url}");
    assert_eq!(get_metadata(Some(&pki.ca), &credentials).await, Ok(200));
    let untrusted = get_metadata(None, &credentials).await;
    assert!(untrusted.as_ref().is_err_and(|error| error.contains("UnknownIssuer")), "{untrusted:?}");
    let plain = client_trusting(None).get(metadata_url.replace("https://", "http://")).send().await;
    assert!(plain.as_ref().map_or(true, |response| response.status().as_u16() != 200), "{plain:?}");

    let toml = shim.cli(&["server", "add", "vm2", "--tls-ca", ca_arg]).await.expect_success("server add");
    assert!(toml.contains("ca_file = \"/etc/anneal/ca.pem\"") && toml.contains(&format!("copy {ca_arg}")), "{toml}");
    let cloud = shim.cli(&["server", "add", "vm3", "--format", "cloud-init", "--tls-ca", ca_arg]).await;
    assert!(cloud.stdout.contains("path: /etc/anneal/ca.pem"), "{cloud:?}");
    let without_ca = shim.cli(&["server", "list"]).await;
    assert_eq!(without_ca.code, 1, "the CLI trusts only the system roots and --tls-ca: {without_ca:?}");
    assert!(!shim.log().contains("plain http"), "{}", shim.log());

    // A real agent with the CA as its source's ca_file.
    let agents = tempfile::tempdir().expect("temp dir");
    let sources = format!(
        "[[source]]\nkind = \"http\"\nurl = {}\ntoken_file = {}\nca_file = {}\n",
        toml_string(metadata_url),
        toml_string(&agents.path().join("vm1/token").display().to_string()),
        toml_string(&ca_path.display().to_string()),
    );
    let agent = Agent::standalone(agents.path(), "vm1", &AgentSettings::default(), &sources);
    std::fs::write(agent.token_file(), credentials["token"].as_str().expect("token")).expect("token file");
    let once = agent.command(&["once"]).await;
    assert_eq!(once.code, 0, "the agent polls the https shim: {once:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sighup_reloads_the_certificate_and_a_bad_file_keeps_the_old_one() {
    let dir = anneal_tests::private_temp_dir("anneal-tls-");
    let (first, second) = (make_pki("first"), make_pki("second"));
    TlsShim::install(dir.path(), &first);
    let shim = TlsShim::start_tls(dir.path()).await;
    let output = shim.cli(&["server", "add", "vm1", "--format", "json", "--tls-ca"]).await;
    assert_eq!(output.code, 2, "--tls-ca needs a file: {output:?}");
    let ca_arg = dir.path().join("ca.pem").display().to_string();
    let output = shim.cli(&["server", "add", "vm1", "--format", "json", "--tls-ca", &ca_arg]).await;
    let credentials: Value = serde_json::from_str(&output.expect_success("server add")).expect("JSON");
    assert_eq!(get_metadata(Some(&first.ca), &credentials).await, Ok(200));
    assert!(get_metadata(Some(&second.ca), &credentials).await.is_err());

    TlsShim::install(dir.path(), &second);
    shim.daemon.signal(Signal::SIGHUP);
    wait_until(LIMIT, "new handshakes use the second certificate", || async {
        (get_metadata(Some(&second.ca), &credentials).await == Ok(200)).then_some(())
    })
    .await;
    assert!(get_metadata(Some(&first.ca), &credentials).await.is_err(), "the first certificate is gone");
    assert!(shim.log().contains("TLS certificate reloaded"), "{}", shim.log());

    std::fs::write(dir.path().join("cert.pem"), "half a certificate\n").expect("break the cert");
    shim.daemon.signal(Signal::SIGHUP);
    wait_until(LIMIT, "the failed reload is logged", || async {
        shim.log().contains("cannot reload the TLS certificate").then_some(())
    })
    .await;
    assert!(shim.log().contains("cert.pem"), "the error names the file: {}", shim.log());
    assert_eq!(get_metadata(Some(&second.ca), &credentials).await, Ok(200), "the previous pair stays in use");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plain_http_public_url_is_warned_about_off_loopback_and_refused_with_tls() {
    let dir = anneal_tests::private_temp_dir("anneal-tls-");
    let shim = TlsShim::start(dir.path(), &["--public-url", "http://192.0.2.7:8080"]).await;
    wait_until(LIMIT, "the warning", || async { shim.log().contains("plain http").then_some(()) }).await;
    let log = shim.log();
    assert!(log.contains("WARN") && log.contains("http://192.0.2.7:8080") && log.contains("--tls-cert"), "{log}");

    let quiet = anneal_tests::private_temp_dir("anneal-tls-");
    let loopback = TlsShim::start(quiet.path(), &[]).await;
    assert!(loopback.url.starts_with("http://127.0.0.1:"), "{}", loopback.url);
    assert!(!loopback.log().contains("plain http"), "{}", loopback.log());

    let broken = anneal_tests::private_temp_dir("anneal-tls-");
    let mut command = Command::new(shim_binary());
    command
        .args(["serve", "--listen", "127.0.0.1:0", "--db"])
        .arg(format!("sqlite://{}", broken.path().join("shim.db").display()))
        .args(["--tls-cert", "/nonexistent/cert.pem", "--tls-key", "/nonexistent/key.pem"])
        .env_remove("ANNEAL_TOKEN");
    let refused = run_command(command, LIMIT).await;
    assert!(refused.code == 1 && refused.stderr.contains("/nonexistent/cert.pem"), "{refused:?}");

    // Serving TLS while telling agents an http:// URL would hand them plain-HTTP signal URLs.
    let mismatched = anneal_tests::private_temp_dir("anneal-tls-");
    TlsShim::install(mismatched.path(), &make_pki("mismatched"));
    let (cert, key) = (mismatched.path().join("cert.pem"), mismatched.path().join("key.pem"));
    let mut command = Command::new(shim_binary());
    command
        .args(["serve", "--listen", "127.0.0.1:0", "--db"])
        .arg(format!("sqlite://{}", mismatched.path().join("shim.db").display()))
        .arg("--tls-cert")
        .arg(&cert)
        .arg("--tls-key")
        .arg(&key)
        .args(["--public-url", "http://shim.example:8443"])
        .env_remove("ANNEAL_TOKEN");
    let refused = run_command(command, LIMIT).await;
    assert_eq!(refused.code, 2, "{refused:?}");
    assert!(refused.stderr.contains("--public-url http://shim.example:8443 is not https://"), "{refused:?}");
}
