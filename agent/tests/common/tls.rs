//! A loopback HTTPS server with a private CA made at test start (rcgen): it serves a metadata
//! document at `/metadata`, answers 200 to anything else, and records every request line. Blocking
//! rustls on one thread, one request per connection (`Connection: close`).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use serde_json::Value;

pub struct TlsServer {
    /// `https://127.0.0.1:<port>`.
    pub url: String,
    /// The private CA's certificate (PEM): trusted by nobody unless configured.
    pub ca_pem: String,
    requests: Arc<Mutex<Vec<String>>>,
    document: Arc<Mutex<String>>,
}

impl TlsServer {
    /// Starts serving `{}` as the document.
    pub fn start() -> TlsServer {
        let ca_key = rcgen::KeyPair::generate().expect("ca key");
        let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("ca params");
        ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        ca_params.distinguished_name.push(rcgen::DnType::CommonName, "anneal test CA");
        let ca = rcgen::CertifiedIssuer::self_signed(ca_params, ca_key).expect("ca");
        let key = rcgen::KeyPair::generate().expect("key");
        let params = rcgen::CertificateParams::new(vec!["127.0.0.1".to_string()]).expect("params");
        let certificate = params.signed_by(&key, &ca).expect("certificate");
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("protocols")
            .with_no_client_auth()
            .with_single_cert(
                vec![CertificateDer::from(certificate.der().to_vec())],
                PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())),
            )
            .expect("server config");
        let config = Arc::new(config);
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let url = format!("https://127.0.0.1:{}", listener.local_addr().expect("addr").port());
        let requests = Arc::new(Mutex::new(Vec::new()));
        let recorded = Arc::clone(&requests);
        let document = Arc::new(Mutex::new("{}".to_string()));
        let served = Arc::clone(&document);
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let body = served.lock().expect("lock").clone();
                // A client that refuses the certificate just closes the connection.
                let _ = serve_one(stream, &config, &body, &recorded);
            }
        });
        TlsServer { url, ca_pem: ca.pem(), requests, document }
    }

    pub fn set_document(&self, document: &Value) {
        *self.document.lock().expect("lock") = document.to_string();
    }

    /// The request lines (`POST /signal/x`) received so far.
    pub fn requests(&self) -> Vec<String> {
        self.requests.lock().expect("lock").clone()
    }
}

fn serve_one(
    stream: TcpStream,
    config: &Arc<rustls::ServerConfig>,
    document: &str,
    requests: &Mutex<Vec<String>>,
) -> std::io::Result<()> {
    stream.set_read_timeout(Some(Duration::from_secs(5)))?;
    stream.set_write_timeout(Some(Duration::from_secs(5)))?;
    let connection = rustls::ServerConnection::new(Arc::clone(config)).map_err(std::io::Error::other)?;
    let mut reader = BufReader::new(rustls::StreamOwned::new(connection, stream));
    let mut request_line = String::new();
    reader.read_line(&mut request_line)?;
    let mut content_length = 0;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 || line == "\r\n" {
            break;
        }
        if let Some((name, value)) = line.split_once(':')
            && name.eq_ignore_ascii_case("content-length")
        {
            content_length = value.trim().parse().unwrap_or(0);
        }
    }
    let mut body = vec![0; content_length];
    reader.read_exact(&mut body)?;
    let request_line = request_line.rsplit_once(' ').map_or(request_line.as_str(), |(line, _)| line).to_string();
    let answer = if request_line == "GET /metadata" { document } else { "{}" };
    requests.lock().expect("lock").push(request_line);
    let mut stream = reader.into_inner();
    let head = format!(
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        answer.len()
    );
    stream.write_all(head.as_bytes())?;
    stream.write_all(answer.as_bytes())?;
    stream.conn.send_close_notify();
    stream.flush()
}
