//! Connection exhaustion without credentials (see docs/http-api.md, "Limits", and
//! docs/security.md): a trickled body is cut at the body deadline whatever its pace; a signal
//! with an unknown token is answered before its body is read and costs no write transaction;
//! connections over the per-address cap are refused at once while held long-polls do not count
//! against it (and have a cap of their own); and `anneal-shim serve` raises its open-file soft
//! limit to the hard limit.
//!
//! The API runs in process (the real engine on an in-memory store) where a test needs limits
//! other than the defaults; clients connect from distinct loopback addresses (127.0.0.x) to be
//! distinct peers.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anneal_shim::api::{self, ApiConfig, ConnectionLimits};
use anneal_shim::engine::{Engine, EngineConfig, TokenKey};
use anneal_shim::model::{AddServer, Service};
use anneal_shim::store::SqliteStore;
use anneal_shim::token::hash_token;
use anneal_tests::{Daemon, shim_binary, wait_until};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio_util::sync::CancellationToken;

const ADMIN_TOKEN: &str = "adminadminadminadminadminadminadminadminadminadminadminadmin0000";
/// Well formed, but nobody's.
const UNKNOWN_TOKEN: &str = "9999999999999999999999999999999999999999999999999999999999999999";

/// The API over a real engine, served on 127.0.0.1 until dropped.
struct Served {
    address: SocketAddr,
    engine: Engine<SqliteStore>,
    server_token: String,
    shutdown: CancellationToken,
}

impl Drop for Served {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

async fn serve(adjust: impl FnOnce(&mut ApiConfig)) -> Served {
    let store = SqliteStore::open_in_memory().expect("in-memory store");
    let config = EngineConfig::new("http://127.0.0.1:1");
    let engine = Engine::new(store, TokenKey::from_secret(&[7; 32]), config);
    let credentials =
        engine.add_server(AddServer { name: "vm1".to_string(), ..AddServer::default() }).await.expect("add vm1");
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let address = listener.local_addr().expect("address");
    let mut config = ApiConfig::new(hash_token(ADMIN_TOKEN));
    adjust(&mut config);
    let shutdown = CancellationToken::new();
    tokio::spawn(api::serve(listener, Arc::new(engine.clone()), config, shutdown.clone()));
    Served { address, engine, server_token: credentials.token, shutdown }
}

/// A connection from `127.0.0.<last>`, a peer address of its own.
async fn connect_from(last: u8, address: SocketAddr) -> TcpStream {
    let socket = TcpSocket::new_v4().expect("socket");
    socket.bind(SocketAddr::from(([127, 0, 0, last], 0))).expect("bind the client address");
    socket.connect(address).await.expect("connect")
}

/// The status and body of the response on `stream`, read until the body is complete or the
/// connection closes; `None` if nothing complete came within `limit`.
async fn response(stream: &mut TcpStream, limit: Duration) -> Option<(u16, String)> {
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

fn parse(received: &[u8]) -> Option<(u16, String)> {
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trickled_body_is_cut_at_the_body_deadline() {
    let served = serve(|config| config.body_deadline = Duration::from_secs(2)).await;
    let mut stream = connect_from(1, served.address).await;
    let head = format!(
        "POST /v1/servers HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {ADMIN_TOKEN}\r\nContent-Length: 1000\r\n\r\n"
    );
    stream.write_all(head.as_bytes()).await.expect("send the head");
    let started = Instant::now();
    let (mut reader, mut writer) = stream.into_split();
    // One byte every 300 ms: far inside the 10 s pause limit, far too slow for 1000 bytes.
    let trickle = tokio::spawn(async move {
        for _ in 0..1000 {
            if writer.write_all(b" ").await.is_err() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
    });
    let mut received = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(8), async {
        let mut chunk = [0u8; 4096];
        while parse(&received).is_none() {
            match reader.read(&mut chunk).await {
                Ok(0) | Err(_) => break,
                Ok(count) => received.extend_from_slice(&chunk[..count]),
            }
        }
    })
    .await;
    trickle.abort();
    let elapsed = started.elapsed();
    let (status, body) = parse(&received).unwrap_or_else(|| panic!("no answer within 8 s of trickling ({elapsed:?})"));
    assert_eq!(status, 408, "{body}");
    assert!(body.contains("did not arrive within 2 s"), "{body}");
    assert!(elapsed >= Duration::from_millis(1900) && elapsed < Duration::from_secs(5), "cut after {elapsed:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_signal_token_is_answered_before_its_body_without_a_write() {
    let served = serve(|_| {}).await;
    // The first read of a document fills the engine's cache (in a transaction); later polls are
    // answered from memory.
    served.engine.metadata("vm1").await.expect("vm1's document");
    let commits_before = served.engine.store().commits();
    for path in [format!("/v1/signals/{UNKNOWN_TOKEN}"), format!("/v1/waitconditions/{UNKNOWN_TOKEN}")] {
        for method in ["POST", "PUT"] {
            // The head promises a body that never comes: the answer must not wait for it.
            let mut stream = connect_from(1, served.address).await;
            let head = format!("{method} {path} HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n");
            stream.write_all(head.as_bytes()).await.expect("send the head");
            let answer = response(&mut stream, Duration::from_secs(3)).await;
            let (status, body) = answer.unwrap_or_else(|| panic!("{method} {path}: no answer before the body"));
            assert_eq!(status, 404, "{method} {path}: {body}");
            assert!(body.contains("token not found"), "{method} {path}: {body}");
            // And the connection is closed: the rest of the body is never waited for.
            let mut rest = Vec::new();
            let closed = tokio::time::timeout(Duration::from_secs(3), stream.read_to_end(&mut rest)).await;
            assert!(closed.is_ok(), "{method} {path}: the connection stayed open after the answer");
            // With the body sent whole, the answer is the same.
            let mut stream = connect_from(1, served.address).await;
            let request = format!("{method} {path} HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{{}}");
            stream.write_all(request.as_bytes()).await.expect("send the request");
            let (status, body) = response(&mut stream, Duration::from_secs(3)).await.expect("an answer");
            assert_eq!(status, 404, "{method} {path} with a body: {body}");
        }
    }
    // Nor does a metadata poll, with a made-up bearer token or the server's own.
    for token in [UNKNOWN_TOKEN, served.server_token.as_str()] {
        let mut stream = connect_from(1, served.address).await;
        let request =
            format!("GET /v1/servers/vm1/metadata HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n\r\n");
        stream.write_all(request.as_bytes()).await.expect("send the poll");
        let (status, body) = response(&mut stream, Duration::from_secs(3)).await.expect("an answer");
        assert!(status == 403 || status == 200, "{body}");
    }
    assert_eq!(served.engine.store().commits(), commits_before, "an unknown token cost a write transaction");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_over_the_per_peer_cap_are_refused_and_held_long_polls_do_not_count() {
    let limits = ConnectionLimits { max_connections: 64, max_connections_per_peer: 4, max_long_polls: 64 };
    let served = serve(|config| config.limits = limits).await;
    // A slowloris from 127.0.0.2: four connections that send nothing fill its share...
    let mut idle = Vec::new();
    for _ in 0..4 {
        idle.push(connect_from(2, served.address).await);
    }
    // (the server counts them once it accepted them)
    tokio::time::sleep(Duration::from_millis(200)).await;
    let mut fifth = connect_from(2, served.address).await;
    let started = Instant::now();
    let (status, body) = response(&mut fifth, Duration::from_secs(3)).await.expect("the fifth is answered at once");
    assert_eq!(status, 503, "{body}");
    assert!(body.contains("too many connections from 127.0.0.2 (limit 4)"), "{body}");
    assert!(started.elapsed() < Duration::from_secs(2));

    // ...while another address is served.
    let mut other = connect_from(3, served.address).await;
    let request = format!("GET /v1/servers HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {ADMIN_TOKEN}\r\n\r\n");
    other.write_all(request.as_bytes()).await.expect("send");
    let (status, body) = response(&mut other, Duration::from_secs(3)).await.expect("served beside the slowloris");
    assert_eq!(status, 200, "{body}");

    // Held long-polls from one address do not count against its cap: six held from
    // 127.0.0.4, and a plain request from it is still served.
    let mut parked = Vec::new();
    for _ in 0..6 {
        let mut stream = connect_from(4, served.address).await;
        let request = format!(
            "GET /v1/servers/vm1/metadata?wait=30 HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {}\r\n\
             If-None-Match: \"0\"\r\n\r\n",
            served.server_token
        );
        stream.write_all(request.as_bytes()).await.expect("send a long-poll");
        // Wait until it is held before the next one connects.
        tokio::time::sleep(Duration::from_millis(150)).await;
        parked.push(stream);
    }
    let mut plain = connect_from(4, served.address).await;
    let request = format!(
        "GET /v1/servers/vm1/metadata HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {}\r\n\r\n",
        served.server_token
    );
    plain.write_all(request.as_bytes()).await.expect("send");
    let (status, body) = response(&mut plain, Duration::from_secs(3)).await.expect("served beside held long-polls");
    assert_eq!(status, 200, "{body}");
    for mut stream in parked {
        assert!(response(&mut stream, Duration::from_millis(10)).await.is_none(), "a long-poll was not held");
    }
    drop(idle);
}

#[tokio::test]
async fn serve_raises_its_open_file_soft_limit_to_the_hard_limit() {
    let dir = anneal_tests::private_temp_dir("anneal-fd-limit-");
    let stdout = dir.path().join("shim.out");
    // The shell lowers the soft limit, then becomes the shim (same pid, same limits).
    let mut command = tokio::process::Command::new("sh");
    command
        .args(["-c", "ulimit -Sn 256 && exec \"$0\" serve --listen 127.0.0.1:0 --db \"$1\""])
        .arg(shim_binary())
        .arg(format!("sqlite://{}", dir.path().join("shim.db").display()))
        .env_remove("ANNEAL_TOKEN")
        .env("ANNEAL_LOG", "info");
    let mut daemon = Daemon::spawn(command, &stdout, &dir.path().join("shim.log"));
    wait_until(Duration::from_secs(20), "anneal-shim serve prints its URL", || async {
        std::fs::read_to_string(&stdout).unwrap_or_default().contains("listening on").then_some(())
    })
    .await;
    let pid = daemon.pid().expect("running");
    let limits = std::fs::read_to_string(format!("/proc/{pid}/limits")).expect("read the limits");
    let line = limits.lines().find(|line| line.starts_with("Max open files")).expect("an open-files line");
    let numbers: Vec<&str> = line.split_whitespace().skip(3).take(2).collect();
    let hard = std::fs::read_to_string("/proc/self/limits")
        .ok()
        .and_then(|text| {
            let own = text.lines().find(|line| line.starts_with("Max open files"))?.to_string();
            own.split_whitespace().nth(4).map(str::to_string)
        })
        .expect("the test's own hard limit");
    assert_eq!(numbers, [hard.as_str(), hard.as_str()], "{line}");
    assert!(daemon.log_text().contains("open-file limit"), "{}", daemon.log_text());
    daemon.terminate(Duration::from_secs(10)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn long_polls_over_their_cap_are_refused_with_503() {
    let limits = ConnectionLimits { max_connections: 64, max_connections_per_peer: 64, max_long_polls: 2 };
    let served = serve(|config| config.limits = limits).await;
    let long_poll = format!(
        "GET /v1/servers/vm1/metadata?wait=30 HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {}\r\n\
         If-None-Match: \"0\"\r\n\r\n",
        served.server_token
    );
    let mut held = Vec::new();
    for _ in 0..2 {
        let mut stream = connect_from(1, served.address).await;
        stream.write_all(long_poll.as_bytes()).await.expect("send a long-poll");
        tokio::time::sleep(Duration::from_millis(150)).await;
        held.push(stream);
    }
    let mut third = connect_from(1, served.address).await;
    third.write_all(long_poll.as_bytes()).await.expect("send a long-poll");
    let (status, body) = response(&mut third, Duration::from_secs(3)).await.expect("answered at once");
    assert_eq!(status, 503, "{body}");
    assert!(body.contains("too many metadata long-polls held (limit 2)"), "{body}");
    // A poll that is not held is still served.
    let poll = format!(
        "GET /v1/servers/vm1/metadata HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {}\r\n\r\n",
        served.server_token
    );
    let mut plain = connect_from(1, served.address).await;
    plain.write_all(poll.as_bytes()).await.expect("send a poll");
    let (status, body) = response(&mut plain, Duration::from_secs(3)).await.expect("served");
    assert_eq!(status, 200, "{body}");
    drop(held);
}
