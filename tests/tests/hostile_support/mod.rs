//! The hostile-input corpus (`tests/hostile/`, one file per case, described in its README) as
//! the `hostile_*` tests read it: the manifest that says what each case must produce, `.gen`
//! recipes expanded into the large cases that are not worth committing, and a raw HTTP/1.1
//! client that sends exactly the bytes a case holds (reqwest would normalise `..` in paths and
//! refuse malformed headers).

#![allow(dead_code)] // Each test crate uses its own part of this module.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// One case: its path relative to `tests/hostile`, its bytes, and its manifest entry.
pub struct Case {
    pub name: String,
    pub bytes: Vec<u8>,
    pub expect: Value,
}

impl Case {
    /// A string field of the manifest entry ("" when absent).
    pub fn field(&self, key: &str) -> &str {
        self.expect.get(key).and_then(Value::as_str).unwrap_or_default()
    }

    /// The expected error substring.
    pub fn error(&self) -> &str {
        self.field("error")
    }

    /// The case as text (lossy: the invalid UTF-8 cases are fed as bytes where that matters).
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.bytes).into_owned()
    }
}

/// `tests/hostile`.
pub fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("hostile")
}

/// The whole manifest: case path → expectation.
pub fn manifest() -> serde_json::Map<String, Value> {
    let path = corpus_dir().join("manifest.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|error| panic!("{}: {error}", path.display()));
    match serde_json::from_str(&text) {
        Ok(Value::Object(map)) => map,
        other => panic!("{} is not a JSON object: {other:?}", path.display()),
    }
}

/// Every case of the subdirectory `target` (e.g. `"metadata"`), in name order.
pub fn cases(target: &str) -> Vec<Case> {
    let prefix = format!("{target}/");
    let cases: Vec<Case> = manifest()
        .into_iter()
        .filter(|(name, _)| name.starts_with(&prefix))
        .map(|(name, expect)| {
            let bytes = load(&corpus_dir().join(&name));
            Case { name, bytes, expect }
        })
        .collect();
    assert!(!cases.is_empty(), "no {target} cases in the manifest");
    cases
}

/// A case file's bytes; a `.gen` file is a recipe `{prefix, repeat, count, suffix}` for a case
/// too large to commit.
pub fn load(path: &Path) -> Vec<u8> {
    let bytes = std::fs::read(path).unwrap_or_else(|error| panic!("{}: {error}", path.display()));
    if path.extension().is_none_or(|extension| extension != "gen") {
        return bytes;
    }
    let recipe: Value = serde_json::from_slice(&bytes).unwrap_or_else(|error| panic!("{}: {error}", path.display()));
    let part = |key: &str| recipe[key].as_str().unwrap_or_else(|| panic!("{}: no {key}", path.display())).to_string();
    let count = recipe["count"].as_u64().unwrap_or_else(|| panic!("{}: no count", path.display()));
    let count = usize::try_from(count).expect("count fits");
    let mut expanded = part("prefix");
    expanded.push_str(&part("repeat").repeat(count));
    expanded.push_str(&part("suffix"));
    expanded.into_bytes()
}

/// A response read off a raw connection.
#[derive(Debug)]
pub struct RawResponse {
    /// 0 when the server closed the connection without answering.
    pub status: u16,
    pub body: String,
}

impl RawResponse {
    /// The `error.message` of a JSON error body ("" when there is none).
    pub fn message(&self) -> String {
        serde_json::from_str::<Value>(&self.body)
            .ok()
            .and_then(|body| body["error"]["message"].as_str().map(str::to_string))
            .unwrap_or_default()
    }
}

/// Sends `method path` with `headers` and `body` (Content-Length set, connection closed after)
/// to `address` (`127.0.0.1:port`), writing and reading at once so that an early answer (413)
/// is read even while the body is still being sent.
pub async fn send(address: &str, method: &str, path: &str, headers: &[(String, String)], body: &[u8]) -> RawResponse {
    let mut request = format!("{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n").into_bytes();
    for (name, value) in headers {
        request.extend_from_slice(format!("{name}: {value}\r\n").as_bytes());
    }
    request.extend_from_slice(format!("Content-Length: {}\r\n\r\n", body.len()).as_bytes());
    request.extend_from_slice(body);
    exchange(address, request).await
}

/// Writes `request` as is and reads until the server closes (at most 60 s).
pub async fn exchange(address: &str, request: Vec<u8>) -> RawResponse {
    let stream = TcpStream::connect(address).await.unwrap_or_else(|error| panic!("connect {address}: {error}"));
    let (mut reader, mut writer) = stream.into_split();
    let writing = tokio::spawn(async move {
        // The server may answer and close before it read everything (413): not an error here.
        let _ = writer.write_all(&request).await;
        writer
    });
    let mut received = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(60), reader.read_to_end(&mut received)).await;
    assert!(read.is_ok(), "the server neither answered nor closed within 60 s");
    drop(writing.await);
    parse_response(&received)
}

/// The status and body of the first response in `bytes`.
pub fn parse_response(bytes: &[u8]) -> RawResponse {
    let text = String::from_utf8_lossy(bytes);
    let status =
        text.strip_prefix("HTTP/1.1 ").and_then(|rest| rest.get(..3)).and_then(|code| code.parse().ok()).unwrap_or(0);
    let body = text.split_once("\r\n\r\n").map(|(_, body)| body.to_string()).unwrap_or_default();
    RawResponse { status, body }
}

/// Lines of a `--log-format json` log as JSON objects (other lines skipped).
pub fn json_lines(log: &str) -> Vec<Value> {
    log.lines().filter_map(|line| serde_json::from_str::<Value>(line).ok()).collect()
}
