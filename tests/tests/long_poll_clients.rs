//! Held long-polls against a real `anneal-shim serve`, from raw TCP clients: a client that hangs
//! up while its poll is held must end that request at once (not at the end of its wait), and a
//! connection keeps working for the next request after a long-poll answered. The shim serves
//! connections with hyper's `half_close` (hyper does not read while a request is in flight) and
//! watches the socket of a held long-poll itself, so these pin that watch down.

use std::time::Duration;

use anneal_tests::{Shim, wait_until};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Long enough that a poll ended by its wait would fail `wait_until` below.
const WAIT_SECS: u64 = 60;

fn long_poll_request(server: &str, token: &str, etag: &str) -> String {
    format!(
        "GET /v1/servers/{server}/metadata?wait={WAIT_SECS} HTTP/1.1\r\nHost: shim\r\n\
         Authorization: Bearer {token}\r\nIf-None-Match: {etag}\r\n\r\n"
    )
}

/// Registers `name` and returns its token and its document's current ETag (fetched over a
/// connection of its own).
async fn register(shim: &Shim, name: &str) -> (String, String) {
    let credentials = shim.cli_json(&["server", "add", name, "--format", "json"]).await;
    let token = credentials["token"].as_str().expect("server add prints a token").to_string();
    let mut client = TcpStream::connect(address(shim)).await.expect("connect");
    client.write_all(plain_request(name, &token).as_bytes()).await.expect("send");
    let response = read_response(&mut client).await;
    let etag = response
        .lines()
        .find_map(|line| line.to_ascii_lowercase().starts_with("etag:").then(|| line[5..].trim().to_string()))
        .unwrap_or_else(|| panic!("no ETag in {response}"));
    (token, etag)
}

fn plain_request(server: &str, token: &str) -> String {
    format!("GET /v1/servers/{server}/metadata HTTP/1.1\r\nHost: shim\r\nAuthorization: Bearer {token}\r\n\r\n")
}

fn address(shim: &Shim) -> String {
    shim.url().trim_start_matches("http://").to_string()
}

/// The shim's debug log lines for requests to `name`'s metadata with `status`.
fn logged_requests(shim: &Shim, name: &str, status: u16) -> usize {
    let path = format!("/v1/servers/{name}/metadata");
    shim.log_text().lines().filter(|line| line.contains(&path) && line.contains(&format!("status={status}"))).count()
}

#[tokio::test]
async fn a_long_poll_ends_as_soon_as_its_client_hangs_up() {
    let shim = Shim::start_logging("anneal_shim=debug").await;
    let (token, etag) = register(&shim, "vm1").await;
    let mut client = TcpStream::connect(address(&shim)).await.expect("connect");
    client.write_all(long_poll_request("vm1", &token, &etag).as_bytes()).await.expect("send");
    // The poll is held: nothing comes back.
    let mut byte = [0u8; 1];
    let early = tokio::time::timeout(Duration::from_millis(500), client.read(&mut byte)).await;
    assert!(early.is_err(), "the long-poll answered at once: {early:?}");
    assert_eq!(logged_requests(&shim, "vm1", 499), 0, "ended before the client left:\n{}", shim.log_text());
    drop(client);
    wait_until(Duration::from_secs(10), "the shim ends the held poll of a client that left", || async {
        (logged_requests(&shim, "vm1", 499) == 1).then_some(())
    })
    .await;
}

#[tokio::test]
async fn a_connection_serves_the_next_request_after_a_long_poll() {
    let shim = Shim::start_logging("anneal_shim=debug").await;
    let (token, etag) = register(&shim, "vm2").await;
    let mut client = TcpStream::connect(address(&shim)).await.expect("connect");
    client.write_all(long_poll_request("vm2", &token, &etag).as_bytes()).await.expect("send");
    tokio::time::sleep(Duration::from_millis(200)).await;
    // A change wakes the poll: its answer is the new document.
    let template = shim.write_template(
        "one.yaml",
        "heat_template_version: 2018-08-31\nresources:\n  config:\n    type: OS::Heat::SoftwareConfig\n    \
         properties: {group: script, config: \"#!/bin/sh\\n\"}\n  deploy:\n    type: OS::Heat::SoftwareDeployment\n    \
         properties: {config: {get_resource: config}, server: vm2}\n",
    );
    shim.cli_ok(&["stack", "create", "one", "--template", &template.display().to_string()]).await;
    let first = read_response(&mut client).await;
    assert!(first.starts_with("HTTP/1.1 200"), "{first}");
    assert!(first.contains("\"deployments\":[{"), "{first}");
    // The same connection takes another request (a plain fetch, answered at once).
    client.write_all(plain_request("vm2", &token).as_bytes()).await.expect("send the second request");
    let second = read_response(&mut client).await;
    assert!(second.starts_with("HTTP/1.1 200"), "{second}");
    assert_eq!(logged_requests(&shim, "vm2", 499), 0, "{}", shim.log_text());
}

/// One response with a `Content-Length` body, read within 10 s.
async fn read_response(client: &mut TcpStream) -> String {
    let mut received = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let text = String::from_utf8_lossy(&received).to_string();
        if let Some((head, body)) = text.split_once("\r\n\r\n") {
            let length = head
                .lines()
                .find_map(|line| line.to_ascii_lowercase().strip_prefix("content-length:").map(str::to_string))
                .and_then(|value| value.trim().parse::<usize>().ok())
                .unwrap_or(0);
            if body.len() >= length {
                return text;
            }
        }
        let mut chunk = [0u8; 4096];
        let read = tokio::time::timeout_at(deadline, client.read(&mut chunk))
            .await
            .expect("a response within 10 s")
            .expect("read");
        assert!(read > 0, "the shim closed the connection; got {:?}", String::from_utf8_lossy(&received));
        received.extend_from_slice(&chunk[..read]);
    }
}
