//! `SwitchableServer`: a tiny HTTP/1.1 server inside the test process on 127.0.0.1 that a test
//! can take down and bring back at will, to play a metadata source that has an outage or a signal
//! receiver that is unreachable. Up, it answers `GET` with the current document (plain polling:
//! no ETag, no long-poll header) and any other method with `200 {}`; down, it reads the request
//! and closes the connection without answering, which a client sees as a failed request. Every
//! request is recorded with its time and whether it was answered, so a test can count how often
//! a client tried. Each connection carries one request (`Connection: close`), so no pooled
//! connection outlives a switch. The accept loop stops when the value drops.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

/// The largest request head or body read; the clients under test send far less.
const MAX_REQUEST_BYTES: usize = 4 * 1024 * 1024;

/// One request as the server saw it.
#[derive(Debug, Clone)]
pub struct Request {
    pub method: String,
    /// Path and query as sent.
    pub target: String,
    pub body: Vec<u8>,
    pub at: Instant,
    /// False when the server was down: the connection was closed without an answer.
    pub answered: bool,
}

impl Request {
    /// The body as JSON (panics if it is not).
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|error| panic!("{} {}: body is not JSON ({error})", self.method, self.target))
    }
}

#[derive(Debug)]
struct State {
    up: AtomicBool,
    document: Mutex<Value>,
    requests: Mutex<Vec<Request>>,
}

/// The running server; see the module comment.
#[derive(Debug)]
pub struct SwitchableServer {
    state: Arc<State>,
    url: String,
    task: JoinHandle<()>,
}

impl SwitchableServer {
    /// Binds 127.0.0.1:0 and starts answering (up, serving `{}` until `set_document`).
    pub async fn start() -> SwitchableServer {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind a loopback port");
        let url = format!("http://{}", listener.local_addr().expect("local address"));
        let state = Arc::new(State {
            up: AtomicBool::new(true),
            document: Mutex::new(Value::Object(Default::default())),
            requests: Mutex::new(Vec::new()),
        });
        let task = tokio::spawn(accept_loop(listener, Arc::clone(&state)));
        SwitchableServer { state, url, task }
    }

    /// The base URL, e.g. `http://127.0.0.1:41234` (any path is served).
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Up: requests are answered. Down: they are read and dropped unanswered.
    pub fn set_up(&self, up: bool) {
        self.state.up.store(up, Ordering::SeqCst);
    }

    /// The JSON every later `GET` returns.
    pub fn set_document(&self, document: Value) {
        *self.state.document.lock().unwrap_or_else(PoisonError::into_inner) = document;
    }

    /// Every request so far, in arrival order.
    pub fn requests(&self) -> Vec<Request> {
        self.state.requests.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// The answered requests with `method` whose target starts with `prefix`.
    pub fn answered(&self, method: &str, prefix: &str) -> Vec<Request> {
        let requests = self.requests().into_iter();
        requests
            .filter(|request| request.answered && request.method == method && request.target.starts_with(prefix))
            .collect()
    }
}

impl Drop for SwitchableServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn accept_loop(listener: TcpListener, state: Arc<State>) {
    loop {
        let Ok((stream, _)) = listener.accept().await else { continue };
        tokio::spawn(serve(stream, Arc::clone(&state)));
    }
}

/// Reads one request, records it, and answers it only while the server is up.
async fn serve(mut stream: TcpStream, state: Arc<State>) {
    let Some((method, target, body)) = read_request(&mut stream).await else { return };
    let answered = state.up.load(Ordering::SeqCst);
    let request = Request { method: method.clone(), target, body, at: Instant::now(), answered };
    state.requests.lock().unwrap_or_else(PoisonError::into_inner).push(request);
    if !answered {
        return;
    }
    let body = if method == "GET" {
        state.document.lock().unwrap_or_else(PoisonError::into_inner).to_string()
    } else {
        "{}".to_string()
    };
    let response = format!(
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = stream.write_all(response.as_bytes()).await;
    let _ = stream.shutdown().await;
}

/// (method, target, body) of the request on `stream`; `None` if the client went away first.
async fn read_request(stream: &mut TcpStream) -> Option<(String, String, Vec<u8>)> {
    let mut buffer = Vec::new();
    let head_end = loop {
        if let Some(end) = buffer.windows(4).position(|window| window == b"\r\n\r\n") {
            break end + 4;
        }
        if buffer.len() > MAX_REQUEST_BYTES || read_more(stream, &mut buffer).await == 0 {
            return None;
        }
    };
    let head = String::from_utf8_lossy(&buffer[..head_end]).into_owned();
    let mut words = head.split_whitespace();
    let method = words.next()?.to_string();
    let target = words.next()?.to_string();
    let length = head
        .lines()
        .filter_map(|line| line.split_once(':'))
        .find(|(name, _)| name.trim().eq_ignore_ascii_case("content-length"))
        .and_then(|(_, value)| value.trim().parse::<usize>().ok())
        .unwrap_or(0)
        .min(MAX_REQUEST_BYTES);
    while buffer.len() < head_end + length {
        if read_more(stream, &mut buffer).await == 0 {
            return None;
        }
    }
    Some((method, target, buffer[head_end..head_end + length].to_vec()))
}

async fn read_more(stream: &mut TcpStream, buffer: &mut Vec<u8>) -> usize {
    let mut chunk = [0u8; 8192];
    let read = stream.read(&mut chunk).await.unwrap_or(0);
    buffer.extend_from_slice(&chunk[..read]);
    read
}
