//! The delivery floor of scenario 5: how fast this machine can answer every parked long-poll at
//! once when answering is all there is to do. A child process (`anneal-bench floor-server`, the
//! same runtime shape as the shim's: 2 workers, axum over HTTP/1.1) speaks just enough of the
//! shim's metadata protocol for the fleet's load generator (`load`) to poll and park exactly
//! as it does against the shim. One request then bumps a version that every parked long-poll
//! watches, and each is answered with the same pre-rendered body, as large as the documents
//! the shim sent. No template, no store, no rendering, no signing: the lower bound this
//! machine sets for the shim's all-at-once wake-up (which answers on the same HTTP stack),
//! measured with the same client on the same cores, so the fleet's figures (and their target)
//! read against it.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anneal_tests::Daemon;
use axum::Router;
use axum::body::Bytes;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::Deserialize;
use serde_json::json;
use tokio::sync::watch;

use super::{load, signed_millis};
use crate::error::{BenchError, BenchResult};
use crate::report::{Measurement, percentile};
use crate::scenarios::backend::free_port;

/// How long the floor server may take to start listening.
const START_LIMIT: Duration = Duration::from_secs(10);
/// The longest long-poll the floor server announces, as the shim does (`X-Anneal-Long-Poll`),
/// and holds whatever `wait` asks.
const LONG_POLL_SECS: u64 = 60;
/// Each of the measurement's own requests (`/parked`, `/wake`) gets this long.
const ADMIN_TIMEOUT: Duration = Duration::from_secs(10);

/// The floor's wake-ups: per server, milliseconds from just before the wake request was sent
/// until the load generator had read the answer.
pub struct Floor {
    pub from_sent: Vec<f64>,
    pub body_bytes: usize,
}

impl Floor {
    /// The floor's rows: its wake-up p50 and p99, next to the shims' (no target: nothing here
    /// is anneal's to improve).
    pub fn measurements(&self) -> Vec<Measurement> {
        let note = format!(
            "a server that only answers (axum, no store, no rendering): {} bytes to each of {} long-polls, \
             the same load generator, right after the first store's run: the lower bound this machine sets \
             for the shim, which answers on the same HTTP stack",
            self.body_bytes,
            self.from_sent.len()
        );
        vec![
            Measurement::new("delivery floor: wake-up p50", "ms", percentile(&self.from_sent, 0.5)),
            Measurement::new("delivery floor: wake-up p99", "ms", percentile(&self.from_sent, 0.99)).note(&note),
        ]
    }
}

/// What the floor's measurement works with: the bench executable that serves it, and the
/// fleet's own pacing and limits, so that both sides are driven alike.
pub struct Setup<'a> {
    pub executable: &'a Path,
    pub servers: usize,
    /// The size of the documents that woke the shim's long-polls.
    pub body_bytes: usize,
    pub concurrency: usize,
    pub stagger: Duration,
    pub park_limit: Duration,
    pub wake_limit: Duration,
}

/// Starts the floor server, parks the long-polls on it (`stagger` apart, as the fleet's), wakes
/// them all with one request and times each answer. Errors carry the server's log.
pub async fn measure(setup: &Setup<'_>) -> BenchResult<Floor> {
    let dir = tempfile::tempdir().map_err(|source| BenchError::Process { what: "make a temp dir".into(), source })?;
    let port = free_port()?;
    let server = start(setup.executable, dir.path(), port, setup.body_bytes);
    let with_log = |error: BenchError| BenchError::Failed(format!("{error}\nfloor-server log:\n{}", server.log_text()));
    let from_sent = drive(setup, &format!("http://127.0.0.1:{port}")).await.map_err(with_log)?;
    Ok(Floor { from_sent, body_bytes: setup.body_bytes })
}

async fn drive(setup: &Setup<'_>, base: &str) -> BenchResult<Vec<f64>> {
    let admin = reqwest::Client::builder()
        .timeout(ADMIN_TIMEOUT)
        .build()
        .map_err(|error| failed("build the admin client", &error))?;
    wait_until_listening(&admin, base).await?;
    let registered = (0..setup.servers)
        .map(|index| {
            let name = format!("floor-{index:05}");
            let metadata_url = format!("{base}/v1/servers/{name}/metadata");
            (name, json!({"token": "floor", "metadata_url": metadata_url}))
        })
        .collect();
    let agents = load::clients()?;
    let (members, wait_secs) = load::first_polls(&agents, registered, setup.concurrency).await?;
    let long_polls = load::park(&agents, members, wait_secs, setup.stagger);
    let deadline = Instant::now() + setup.park_limit;
    loop {
        let parked = parked(&admin, base).await?;
        if parked == setup.servers && long_polls.sent() == setup.servers {
            break;
        }
        if Instant::now() >= deadline {
            return Err(BenchError::Failed(format!(
                "floor: after {:?} {parked} of {} long-polls were parked ({} sent)",
                setup.park_limit,
                setup.servers,
                long_polls.sent()
            )));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let sent = Instant::now();
    admin
        .post(format!("{base}/wake"))
        .send()
        .await
        .and_then(reqwest::Response::error_for_status)
        .map_err(|error| failed("POST /wake", &error))?;
    let outcome = long_polls.collect(setup.wake_limit).await;
    if outcome.wakeups.len() != setup.servers {
        let first: Vec<&String> = outcome.failures.iter().take(3).collect();
        return Err(BenchError::Failed(format!(
            "floor: {} of {} long-polls answered ({} not woken within {:?}); first failures: {first:?}",
            outcome.wakeups.len(),
            setup.servers,
            outcome.not_woken,
            setup.wake_limit
        )));
    }
    Ok(outcome.wakeups.iter().map(|wakeup| signed_millis(wakeup.at, sent)).collect())
}

/// `anneal-bench floor-server` in its own process group, logging into `dir`.
fn start(executable: &Path, dir: &Path, port: u16, body_bytes: usize) -> Daemon {
    let mut command = tokio::process::Command::new(executable);
    command.args(["floor-server", "--listen", &format!("127.0.0.1:{port}"), "--body-bytes", &body_bytes.to_string()]);
    Daemon::spawn(command, &dir.join("floor.out"), &dir.join("floor.log"))
}

async fn wait_until_listening(admin: &reqwest::Client, base: &str) -> BenchResult<()> {
    let deadline = Instant::now() + START_LIMIT;
    loop {
        match parked(admin, base).await {
            Ok(_) => return Ok(()),
            Err(error) if Instant::now() >= deadline => return Err(error),
            Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
}

/// How many long-polls the floor server holds.
async fn parked(admin: &reqwest::Client, base: &str) -> BenchResult<usize> {
    let response = admin.get(format!("{base}/parked")).send().await.map_err(|error| failed("GET /parked", &error))?;
    let text = response.text().await.map_err(|error| failed("GET /parked", &error))?;
    text.trim().parse().map_err(|_| BenchError::Failed(format!("floor: GET /parked answered {text:?}")))
}

fn failed(what: &str, error: &reqwest::Error) -> BenchError {
    BenchError::Failed(format!("floor: {what}: {}", anneal_shim::error_chain(error)))
}

/// The floor server's state: the version every long-poll watches, how many are parked, and the
/// one body every woken poll gets.
#[derive(Clone)]
struct Shared {
    version: watch::Sender<u64>,
    parked: Arc<AtomicUsize>,
    empty: Bytes,
    woken: Bytes,
}

#[derive(Deserialize)]
struct Wait {
    wait: Option<u64>,
}

/// The floor server's main loop (the hidden `floor-server` subcommand): serves until killed.
pub async fn serve(listen: &str, body_bytes: usize) -> std::io::Result<()> {
    let shared = Shared {
        version: watch::channel(1).0,
        parked: Arc::new(AtomicUsize::new(0)),
        empty: Bytes::from_static(br#"{"deployments":[]}"#),
        woken: Bytes::from(document_of_size(body_bytes)),
    };
    let app = Router::new()
        .route("/v1/servers/{name}/metadata", get(metadata))
        .route("/wake", post(wake))
        .route("/parked", get(count_parked))
        .with_state(shared);
    let listener = tokio::net::TcpListener::bind(listen).await?;
    axum::serve(listener, app).await
}

/// A document with one deployment, padded to `size` bytes (or just over, when smaller).
fn document_of_size(size: usize) -> String {
    let frame = r#"{"deployments":[{"id":"floor","config":""}]}"#;
    let padding = "x".repeat(size.saturating_sub(frame.len()));
    format!(r#"{{"deployments":[{{"id":"floor","config":"{padding}"}}]}}"#)
}

/// GET metadata: the current document; with `wait` and the current ETag, held until the
/// version moves (or the wait ends: 304), as the shim's long-poll.
async fn metadata(State(shared): State<Shared>, Query(query): Query<Wait>, headers: HeaderMap) -> Response {
    let mut watching = shared.version.subscribe();
    let current = *watching.borrow_and_update();
    let known = headers.get(header::IF_NONE_MATCH).and_then(|value| value.to_str().ok());
    if let (Some(wait), Some(known)) = (query.wait, known) {
        if known == etag(current) {
            let _parked = Parked::count(&shared.parked);
            let wait = Duration::from_secs(wait.min(LONG_POLL_SECS));
            let changed = tokio::time::timeout(wait, watching.changed()).await;
            if !matches!(changed, Ok(Ok(()))) {
                return (StatusCode::NOT_MODIFIED, [(header::ETAG, etag(current))]).into_response();
            }
        }
    }
    let version = *watching.borrow();
    let body = if version == 1 { shared.empty.clone() } else { shared.woken.clone() };
    let headers = [
        (header::ETAG, etag(version)),
        (header::HeaderName::from_static("x-anneal-long-poll"), LONG_POLL_SECS.to_string()),
    ];
    (StatusCode::OK, headers, body).into_response()
}

/// One held long-poll in the count, for as long as it is held: also when the client goes away
/// and the handler is dropped mid-wait.
struct Parked<'a>(&'a AtomicUsize);

impl<'a> Parked<'a> {
    fn count(parked: &'a AtomicUsize) -> Parked<'a> {
        parked.fetch_add(1, Ordering::SeqCst);
        Parked(parked)
    }
}

impl Drop for Parked<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

fn etag(version: u64) -> String {
    format!("\"v{version}\"")
}

async fn wake(State(shared): State<Shared>) -> StatusCode {
    shared.version.send_modify(|version| *version += 1);
    StatusCode::NO_CONTENT
}

async fn count_parked(State(shared): State<Shared>) -> String {
    shared.parked.load(Ordering::SeqCst).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The floor server on a free port, in this test's runtime; its base URL.
    async fn floor_server(body_bytes: usize) -> String {
        let port = free_port().expect("a free port");
        tokio::spawn(async move { serve(&format!("127.0.0.1:{port}"), body_bytes).await });
        let base = format!("http://127.0.0.1:{port}");
        wait_until_listening(&reqwest::Client::new(), &base).await.expect("the floor server listens");
        base
    }

    #[tokio::test]
    async fn a_long_poll_is_held_until_the_wake_and_then_gets_the_padded_document() {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let base = floor_server(900).await;
        let http = reqwest::Client::new();
        let url = format!("{base}/v1/servers/floor-00000/metadata");
        let first = http.get(&url).send().await.expect("first poll");
        assert_eq!(first.headers()[header::ETAG], "\"v1\"");
        assert_eq!(first.headers()["x-anneal-long-poll"], "60");
        assert_eq!(first.text().await.expect("body"), r#"{"deployments":[]}"#);

        let held = tokio::spawn({
            let (http, url) = (http.clone(), format!("{url}?wait=30"));
            async move { http.get(url).header(header::IF_NONE_MATCH, "\"v1\"").send().await }
        });
        while parked(&http, &base).await.expect("parked") < 1 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert!(!held.is_finished(), "a long-poll with the current ETag waits");
        http.post(format!("{base}/wake")).send().await.expect("wake");
        let woken = held.await.expect("task").expect("long-poll");
        assert_eq!(woken.status(), StatusCode::OK);
        assert_eq!(woken.headers()[header::ETAG], "\"v2\"");
        assert_eq!(woken.bytes().await.expect("body").len(), 900);
        assert_eq!(parked(&http, &base).await.expect("parked"), 0, "an answered long-poll is no longer counted");
    }

    #[tokio::test]
    async fn a_long_poll_that_sees_no_change_ends_not_modified() {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let base = floor_server(100).await;
        let http = reqwest::Client::new();
        let answer = http
            .get(format!("{base}/v1/servers/floor-00000/metadata?wait=1"))
            .header(header::IF_NONE_MATCH, "\"v1\"")
            .send()
            .await
            .expect("long-poll");
        assert_eq!(answer.status(), StatusCode::NOT_MODIFIED);
        assert_eq!(answer.headers()[header::ETAG], "\"v1\"");
    }

    #[test]
    fn the_woken_document_has_the_size_asked_for() {
        for size in [0, 10, 1_000, 4_096] {
            let document = document_of_size(size);
            assert_eq!(document.len(), size.max(r#"{"deployments":[{"id":"floor","config":""}]}"#.len()));
            let parsed: serde_json::Value = serde_json::from_str(&document).expect("JSON");
            assert_eq!(parsed["deployments"].as_array().map(Vec::len), Some(1));
        }
    }
}
