//! The in-process API the connection tests attack (the real engine on an in-memory store, served
//! on 127.0.0.1 with the limits a test chooses; servers vm1, vm2 and vm3 registered), a real
//! `anneal-shim serve` under a chosen open-file limit, and a raw HTTP/1.1 client that connects
//! from a loopback address of its choice (127.0.0.x: each a distinct peer for the caps).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anneal_shim::api::{self, ApiConfig};
use anneal_shim::engine::{Engine, EngineConfig, TokenKey};
use anneal_shim::model::{AddServer, Service, StackRequest};
use anneal_shim::store::SqliteStore;
use anneal_shim::token::hash_token;
use anneal_tests::{Daemon, shim_binary, wait_until};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio_util::sync::CancellationToken;

pub const ADMIN_TOKEN: &str = "adminadminadminadminadminadminadminadminadminadminadminadmin0000";

/// The API over a real engine, served on 127.0.0.1 until dropped; servers vm1, vm2 and vm3 are
/// registered.
pub struct Served {
    pub address: SocketAddr,
    pub engine: Engine<SqliteStore>,
    /// vm1's token.
    pub server_token: String,
    pub tokens: BTreeMap<String, String>,
    shutdown: CancellationToken,
}

impl Drop for Served {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

pub async fn serve(adjust: impl FnOnce(&mut ApiConfig)) -> Served {
    let store = SqliteStore::open_in_memory().expect("in-memory store");
    let config = EngineConfig::new("http://127.0.0.1:1");
    let engine = Engine::new(store, TokenKey::from_secret(&[7; 32]), config);
    let mut tokens = BTreeMap::new();
    for name in ["vm1", "vm2", "vm3"] {
        let added = engine.add_server(AddServer { name: name.to_string(), ..AddServer::default() }).await;
        tokens.insert(name.to_string(), added.expect("add a server").token);
    }
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let address = listener.local_addr().expect("address");
    let mut config = ApiConfig::new(hash_token(ADMIN_TOKEN));
    adjust(&mut config);
    let shutdown = CancellationToken::new();
    tokio::spawn(api::serve(listener, Arc::new(engine.clone()), config, shutdown.clone()));
    Served { address, engine, server_token: tokens["vm1"].clone(), tokens, shutdown }
}

/// A connection from `127.0.0.<last>`, a peer address of its own.
pub async fn connect_from(last: u8, address: SocketAddr) -> TcpStream {
    let socket = TcpSocket::new_v4().expect("socket");
    socket.bind(SocketAddr::from(([127, 0, 0, last], 0))).expect("bind the client address");
    socket.connect(address).await.expect("connect")
}

/// The status and body of the response on `stream`, read until the body is complete or the
/// connection closes; `None` if nothing complete came within `limit`.
pub async fn response(stream: &mut TcpStream, limit: Duration) -> Option<(u16, String)> {
    let mut received = Vec::new();
    let read = async {
        let mut chunk = [0u8; 4096];
        loop {
            if let Some(parsed) = parse(&received) {
                return Some(parsed);
            }
            match stream.read(&mut chunk).await {
                Ok(0) | Err(_) => return parse(&received),
                Ok(count) => received.extend_from_slice(&chunk[..count]),
            }
        }
    };
    tokio::time::timeout(limit, read).await.ok().flatten()
}

pub fn parse(received: &[u8]) -> Option<(u16, String)> {
    let text = String::from_utf8_lossy(received);
    let (head, body) = text.split_once("\r\n\r\n")?;
    let status = head.split_whitespace().nth(1)?.parse().ok()?;
    let length = head
        .lines()
        .find_map(|line| {
            line.to_ascii_lowercase().strip_prefix("content-length:").map(|value| value.trim().to_string())
        })
        .and_then(|value| value.parse::<usize>().ok())
        .unwrap_or(0);
    (body.len() >= length).then(|| (status, body.to_string()))
}

/// A long-poll of `server` with its token, for a version it does not have (so it is held).
pub fn long_poll_request(server: &str, token: &str) -> String {
    format!(
        "GET /v1/servers/{server}/metadata?wait=30 HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n\
         If-None-Match: \"0\"\r\n\r\n"
    )
}

/// Sends `request` from `127.0.0.<last>` and reads its answer (within 5 s).
pub async fn exchange(last: u8, address: SocketAddr, request: &str) -> (u16, String) {
    let mut stream = connect_from(last, address).await;
    stream.write_all(request.as_bytes()).await.expect("send the request");
    response(&mut stream, Duration::from_secs(5)).await.unwrap_or_else(|| panic!("no answer to {request:?}"))
}

/// The `anneal_shim_long_polls_held` gauge, scraped with the admin token.
pub async fn long_polls_held(address: SocketAddr) -> u64 {
    let scrape = format!("GET /metrics HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {ADMIN_TOKEN}\r\n\r\n");
    let (status, body) = exchange(200, address, &scrape).await;
    assert_eq!(status, 200, "{body}");
    let line = body.lines().find(|line| line.starts_with("anneal_shim_long_polls_held ")).expect("the gauge");
    line.split_whitespace().nth(1).and_then(|value| value.parse().ok()).expect("a number")
}

/// Waits until `count` long-polls are held.
pub async fn until_held(address: SocketAddr, count: u64) {
    wait_until(Duration::from_secs(5), &format!("{count} long-polls held"), || async {
        (long_polls_held(address).await == count).then_some(())
    })
    .await;
}

/// A long-poll sent from `127.0.0.<last>`, its connection kept open for the answer.
pub async fn hold(last: u8, served: &Served, server: &str, token: &str) -> TcpStream {
    let mut stream = connect_from(last, served.address).await;
    stream.write_all(long_poll_request(server, token).as_bytes()).await.expect("send a long-poll");
    stream
}

/// Deploys a config to `server` (a new stack each call), which changes its document.
pub async fn deploy_to(engine: &Engine<SqliteStore>, stack: &str, server: &str) {
    let template = format!(
        "heat_template_version: 2018-08-31\nresources:\n  config: {{type: OS::Heat::SoftwareConfig, properties: \
         {{config: \"echo hi\"}}}}\n  deployment: {{type: OS::Heat::SoftwareDeployment, properties: {{config: \
         {{get_resource: config}}, server: {server}}}}}\n"
    );
    let request = StackRequest { name: Some(stack.to_string()), template, ..StackRequest::default() };
    engine.create_stack(request).await.expect("create the stack");
}

/// Starts a request from `127.0.0.<last>` whose head declares `length` bytes of body and sends
/// one of them; the connection stays open (the body is being received).
pub async fn start_body(last: u8, address: SocketAddr, head: &str, length: usize) -> TcpStream {
    let mut stream = connect_from(last, address).await;
    let request = format!("{head}Content-Type: application/json\r\nContent-Length: {length}\r\n\r\n{{");
    stream.write_all(request.as_bytes()).await.expect("send the head and a byte");
    stream
}

/// `anneal-shim serve` under `prlimit --nofile=<limit>` (soft and hard), on a fresh database:
/// the running daemon and its address, or its exit code and log when it exits before it listens.
pub async fn serve_with_open_files(dir: &std::path::Path, limit: u32) -> Result<(Daemon, SocketAddr), (i32, String)> {
    let stdout = dir.join("shim.out");
    let mut command = tokio::process::Command::new("prlimit");
    command
        .arg(format!("--nofile={limit}:{limit}"))
        .arg(shim_binary())
        .args(["serve", "--listen", "127.0.0.1:0", "--db"])
        .arg(format!("sqlite://{}", dir.join("shim.db").display()))
        .env("ANNEAL_TOKEN", ADMIN_TOKEN)
        .env("ANNEAL_LOG", "info");
    let mut daemon = Daemon::spawn(command, &stdout, &dir.join("shim.log"));
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let text = std::fs::read_to_string(&stdout).unwrap_or_default();
        if let Some(line) = text.lines().find(|line| line.contains("listening on")) {
            let url = line.split_whitespace().find(|word| word.starts_with("http://")).expect("a URL");
            return Ok((daemon, url.trim_start_matches("http://").parse().expect("an address")));
        }
        if !daemon.is_alive() {
            let status = daemon.wait(Duration::from_secs(5)).await;
            return Err((status.code().unwrap_or(-1), daemon.log_text()));
        }
        assert!(Instant::now() < deadline, "anneal-shim serve neither listened nor exited: {}", daemon.log_text());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Opens `count` connections from `127.0.0.<last>` that send part of a head and never finish it.
pub async fn open_headless(last: u8, address: SocketAddr, count: usize, into: &mut Vec<TcpStream>) {
    for _ in 0..count {
        let mut stream = connect_from(last, address).await;
        stream.write_all(b"GET /v1/servers HTTP/1.1\r\nHost: x\r\n").await.expect("part of a head");
        into.push(stream);
    }
}
