//! `Receiver`: a minimal HTTP/1.1 server on 127.0.0.1:0 standing in for an engine. It answers
//! every GET with `{}` and every other request with an empty 200, keeps connections alive,
//! counts requests and remembers when the first one arrived. Stopped when it drops.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

use crate::error::{BenchError, BenchResult};

#[derive(Debug, Default)]
struct Seen {
    requests: AtomicUsize,
    first: Mutex<Option<Instant>>,
}

#[derive(Debug)]
pub struct Receiver {
    base: String,
    seen: Arc<Seen>,
    task: JoinHandle<()>,
}

impl Receiver {
    pub async fn start() -> BenchResult<Receiver> {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .map_err(|source| BenchError::Process { what: "bind the loopback receiver".into(), source })?;
        let address =
            listener.local_addr().map_err(|source| BenchError::Process { what: "receiver address".into(), source })?;
        let seen = Arc::new(Seen::default());
        let task = tokio::spawn(accept_loop(listener, Arc::clone(&seen)));
        Ok(Receiver { base: format!("http://{address}"), seen, task })
    }

    /// `http://127.0.0.1:<port>`.
    pub fn base(&self) -> &str {
        &self.base
    }

    pub fn requests(&self) -> usize {
        self.seen.requests.load(Ordering::SeqCst)
    }

    /// When the first request's head was read, if one was.
    pub fn first_request(&self) -> Option<Instant> {
        self.seen.first.lock().ok().and_then(|first| *first)
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn accept_loop(listener: TcpListener, seen: Arc<Seen>) {
    let mut connections = tokio::task::JoinSet::new();
    while let Ok((stream, _)) = listener.accept().await {
        connections.spawn(serve_connection(stream, Arc::clone(&seen)));
        while connections.try_join_next().is_some() {}
    }
}

async fn serve_connection(mut stream: TcpStream, seen: Arc<Seen>) {
    let mut buffer = Vec::new();
    let mut chunk = [0u8; 8192];
    loop {
        let Some(head_end) = find(&buffer, b"\r\n\r\n") else {
            match stream.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(read) => buffer.extend_from_slice(&chunk[..read]),
            }
            continue;
        };
        let head = String::from_utf8_lossy(&buffer[..head_end]).to_ascii_lowercase();
        if let Ok(mut first) = seen.first.lock() {
            first.get_or_insert_with(Instant::now);
        }
        let length = head
            .lines()
            .find_map(|line| line.strip_prefix("content-length:"))
            .and_then(|value| value.trim().parse::<usize>().ok())
            .unwrap_or(0);
        while buffer.len() < head_end + 4 + length {
            match stream.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(read) => buffer.extend_from_slice(&chunk[..read]),
            }
        }
        buffer.drain(..head_end + 4 + length);
        seen.requests.fetch_add(1, Ordering::SeqCst);
        let response: &[u8] = if head.starts_with("get ") {
            b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}"
        } else {
            b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n"
        };
        if stream.write_all(response).await.is_err() {
            return;
        }
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|window| window == needle)
}
