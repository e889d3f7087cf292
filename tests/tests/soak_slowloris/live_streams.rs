//! The web view's live streams under load: 400 streams of a stack of about 1,000 nodes, from 50
//! sessions on 13 addresses (each under its stream caps), while the stack changes twice a
//! second; the agent's poll p99 must stay under 100 ms and every stream must see the changes
//! (docs/http-api.md, "Sessions, logins and live streams").

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anneal_tests::{Shim, wait_until};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::task::JoinSet;

use super::{P99_LIMIT, POLL_EVERY, connect_from, poll_once};

/// Plain resources of the large stack (chains of 20) and deployments to vm2, which the test
/// signals one by one to change the graph while the streams follow it.
const PLAIN_RESOURCES: usize = 979;
const DEPLOYMENTS: usize = 20;
const SESSIONS: usize = 50;
const STREAMS_PER_SESSION: usize = 8;
const SESSIONS_PER_ADDRESS: usize = 4;
const CHANGE_EVERY: Duration = Duration::from_millis(500);

/// The template of the large stack: `PLAIN_RESOURCES` + a config + `DEPLOYMENTS` nodes, 1,000 in
/// all (the most a stack may have: `max_resources_per_stack`).
fn large_template() -> String {
    let mut template = String::from(
        "heat_template_version: 2018-08-31\nresources:\n  config:\n    type: OS::Heat::SoftwareConfig\n    \
         properties: {group: script, config: \"#!/bin/sh\\ntrue\\n\"}\n",
    );
    for index in 0..PLAIN_RESOURCES {
        template.push_str(&format!("  plain{index}:\n    type: OS::Heat::None\n"));
        if index % 20 != 0 {
            template.push_str(&format!("    depends_on: [plain{}]\n", index - 1));
        }
    }
    for index in 0..DEPLOYMENTS {
        template.push_str(&format!(
            "  deploy{index}:\n    type: OS::Heat::SoftwareDeployment\n    \
             properties: {{config: {{get_resource: config}}, server: vm2}}\n"
        ));
    }
    template
}

/// vm2's deployments' signal URLs, from its document.
async fn signal_urls(shim: &Shim, token: &str) -> Vec<String> {
    let response = anneal_tests::http_client()
        .get(format!("{}/v1/servers/vm2/metadata", shim.url()))
        .bearer_auth(token)
        .send()
        .await
        .expect("vm2's metadata");
    let document: serde_json::Value = serde_json::from_str(&response.text().await.expect("a body")).expect("JSON");
    let entries = document["deployments"].as_array().cloned().unwrap_or_default();
    let url = |entry: &serde_json::Value| {
        let inputs = entry["inputs"].as_array()?;
        let input = inputs.iter().find(|input| input["name"] == "deploy_signal_id")?;
        input["value"].as_str().map(str::to_string)
    };
    entries.iter().filter_map(url).collect()
}

/// A session cookie of the shim's web view (`anneal_ui=<id>`).
async fn log_in(shim: &Shim, admin_token: &str) -> String {
    let response = anneal_tests::http_client()
        .post(format!("{}/ui/login", shim.url()))
        .body(serde_json::json!({"token": admin_token}).to_string())
        .send()
        .await
        .expect("a login");
    assert_eq!(response.status(), 204, "login");
    let cookie = response.headers()["set-cookie"].to_str().expect("a cookie").to_string();
    cookie.split(';').next().unwrap_or_default().to_string()
}

/// Opens a live stream of `big` with `cookie` from 127.0.0.`last` and reads it on a task of its
/// own until it ends (at most until `until`), counting its `graph` events in `seen`. A bare
/// HTTP/1.1 reader: each event is one chunk of the chunked body, and its data is skipped, not
/// scanned (the test's own CPU would otherwise be what the poll waits for).
async fn follow(
    address: SocketAddr,
    cookie: String,
    last: u8,
    until: Instant,
    seen: Arc<AtomicUsize>,
) -> tokio::task::JoinHandle<()> {
    let mut stream = connect_from(last, address).await.expect("a connection");
    let request = format!("GET /ui/api/stacks/big/watch HTTP/1.1\r\nHost: {address}\r\nCookie: {cookie}\r\n\r\n");
    stream.write_all(request.as_bytes()).await.expect("a request");
    tokio::spawn(async move {
        let reading = tokio::time::timeout_at(until.into(), read_events(stream, &seen));
        reading.await.unwrap_or_else(|_| panic!("a stream from 127.0.0.{last} outlived the test"));
    })
}

/// Counts the `graph` events of a chunked event stream in `seen`, until it ends.
async fn read_events(stream: TcpStream, seen: &AtomicUsize) {
    use tokio::io::AsyncBufReadExt;
    let mut reader = tokio::io::BufReader::with_capacity(256 << 10, stream);
    let mut line = String::new();
    reader.read_line(&mut line).await.expect("a status line");
    assert!(line.starts_with("HTTP/1.1 200"), "{line}");
    while line != "\r\n" {
        line.clear();
        if reader.read_line(&mut line).await.unwrap_or(0) == 0 {
            return;
        }
    }
    let mut scratch = vec![0u8; 256 << 10];
    loop {
        line.clear();
        let size = match reader.read_line(&mut line).await {
            Ok(0) | Err(_) => return,
            Ok(_) => usize::from_str_radix(line.trim(), 16).expect("a chunk size"),
        };
        let (mut remaining, mut first) = (size + 2, true);
        while remaining > 0 {
            let read = match reader.read(&mut scratch[..remaining.min(256 << 10)]).await {
                Ok(0) | Err(_) => return,
                Ok(read) => read,
            };
            if first && scratch[..read].starts_with(b"event: graph") {
                seen.fetch_add(1, Ordering::Relaxed);
            }
            first = false;
            remaining -= read;
        }
    }
}

/// Logs in `SESSIONS` times and opens `STREAMS_PER_SESSION` streams per session, each session's
/// from its address (`SESSIONS_PER_ADDRESS` sessions to an address, so no cap refuses them):
/// the readers, and each one's count of `graph` events.
async fn open_streams(shim: &Shim, admin_token: &str) -> (Vec<tokio::task::JoinHandle<()>>, Vec<Arc<AtomicUsize>>) {
    let address: SocketAddr = shim.url().trim_start_matches("http://").parse().expect("the shim's address");
    let until = Instant::now() + Duration::from_secs(60);
    let mut opening = JoinSet::new();
    let seen: Vec<Arc<AtomicUsize>> = (0..SESSIONS * STREAMS_PER_SESSION).map(|_| Arc::default()).collect();
    for session in 0..SESSIONS {
        let cookie = log_in(shim, admin_token).await;
        let last = 10 + u8::try_from(session / SESSIONS_PER_ADDRESS).expect("few addresses");
        for stream in 0..STREAMS_PER_SESSION {
            let counter = Arc::clone(&seen[session * STREAMS_PER_SESSION + stream]);
            opening.spawn(follow(address, cookie.clone(), last, until, counter));
        }
    }
    let mut readers = Vec::new();
    while let Some(reader) = opening.join_next().await {
        readers.push(reader.expect("a stream opened"));
    }
    (readers, seen)
}

/// Times the poll every `POLL_EVERY` while the stack changes every `CHANGE_EVERY` (one of
/// `signals` sent each time), for half as many changes as there are signals.
async fn polls_while_changing(signals: &[String], metadata_url: &str, token: &str) -> Vec<Duration> {
    let client = anneal_tests::http_client();
    let mut during = Vec::new();
    let mut next_change = Instant::now();
    let mut changes = signals.iter();
    let measure = Instant::now() + CHANGE_EVERY * u32::try_from(signals.len() / 2).expect("few");
    while Instant::now() < measure {
        if Instant::now() >= next_change {
            if let Some(url) = changes.next() {
                let body = serde_json::json!({"deploy_status_code": 0, "deploy_stdout": "ok"}).to_string();
                let answer = client.post(url).body(body).send().await.expect("a signal");
                assert_eq!(answer.status(), 200, "signal");
            }
            next_change += CHANGE_EVERY;
        }
        during.push(poll_once(metadata_url, token).await);
        tokio::time::sleep(POLL_EVERY).await;
    }
    during
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn metadata_polls_stay_fast_while_400_live_views_follow_a_large_stack() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let shim = Shim::start().await;
    let admin_token = std::fs::read_to_string(shim.token_file()).expect("the admin token").trim().to_string();
    let vm1 = shim.cli_json(&["server", "add", "vm1", "--format", "json"]).await;
    let vm2 = shim.cli_json(&["server", "add", "vm2", "--format", "json"]).await;
    let (token, metadata_url) = (vm1["token"].as_str().expect("token"), vm1["metadata_url"].as_str().expect("url"));
    let template = shim.write_template("big.yaml", &large_template());
    shim.cli_ok(&["stack", "create", "big", "--template", template.to_str().expect("utf-8")]).await;
    let vm2_token = vm2["token"].as_str().expect("token");
    let signals = wait_until(Duration::from_secs(20), "vm2 holds its deployments", || async {
        let urls = signal_urls(&shim, vm2_token).await;
        (urls.len() == DEPLOYMENTS).then_some(urls)
    })
    .await;
    let mut quiet = Vec::new();
    for _ in 0..20 {
        quiet.push(poll_once(metadata_url, token).await);
    }

    let started = Instant::now();
    let (readers, seen) = open_streams(&shim, &admin_token).await;
    let fewest = || seen.iter().map(|count| count.load(Ordering::Relaxed)).min().unwrap_or_default();
    wait_until(Duration::from_secs(30), "every stream has its first graph", || async { (fewest() >= 1).then_some(()) })
        .await;
    let opened = started.elapsed();

    let mut during = polls_while_changing(&signals, metadata_url, token).await;
    // Every stream sees the graph again after the changes (at the pace its size and audience allow).
    wait_until(Duration::from_secs(30), "every stream follows the changes", || async { (fewest() >= 2).then_some(()) })
        .await;
    let counts: Vec<usize> = seen.iter().map(|count| count.load(Ordering::Relaxed)).collect();
    drop(shim);
    for reader in readers {
        reader.await.expect("a reader");
    }

    during.sort();
    let p99 = during[(during.len() * 99).div_ceil(100) - 1];
    let p50 = during[during.len() / 2];
    let summary = format!(
        "{} polls with {} live streams of a {}-node stack (opened in {opened:?}), {} changes: p50 {p50:?}, p99 \
         {p99:?}, max {:?} (quiet max {:?}); each stream saw {} to {} graph events",
        during.len(),
        counts.len(),
        PLAIN_RESOURCES + DEPLOYMENTS + 1,
        DEPLOYMENTS / 2,
        during.last().copied().unwrap_or_default(),
        quiet.iter().max().copied().unwrap_or_default(),
        counts.iter().min().copied().unwrap_or_default(),
        counts.iter().max().copied().unwrap_or_default(),
    );
    println!("{summary}");
    assert!(p99 < P99_LIMIT, "the metadata poll slowed down under the live streams: {summary}");
}
