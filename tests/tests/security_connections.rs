//! Connection and memory exhaustion (see docs/http-api.md, "Limits", and docs/security.md): a
//! trickled body is cut at the body deadline whatever its pace; a signal with an unknown token is
//! answered before its body is read and costs no write transaction; a route without a credential
//! reads a few KiB at most; bodies in flight are bounded per address and per capability token;
//! connections over the per-address cap are refused at once while held long-polls do not count
//! against it (and have caps of their own: two per server, then a global one that one server's
//! token cannot fill); a held long-poll re-checks a replaced token; a full gate closes connections
//! that never sent a request head; and `anneal-shim serve` raises its open-file soft limit to the
//! hard limit, keeps one address to an eighth of the connections under a low one, and refuses to
//! start under a very low one.
//!
//! The API runs in process (the real engine on an in-memory store, `connections_support`) where a
//! test needs limits other than the defaults; clients connect from distinct loopback addresses
//! (127.0.0.x) to be distinct peers.

mod connections_support;

use std::time::{Duration, Instant};

use anneal_shim::api::{BodyBudgetLimits, ConnectionLimits};
use anneal_shim::model::Service;
use anneal_tests::{Daemon, shim_binary, wait_until};
use connections_support::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
/// Well formed, but nobody's.
const UNKNOWN_TOKEN: &str = "9999999999999999999999999999999999999999999999999999999999999999";

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
    // 127.0.0.4 (two for each of three servers), and a plain request from it is still served.
    let mut parked = Vec::new();
    for server in ["vm1", "vm1", "vm2", "vm2", "vm3", "vm3"] {
        let mut stream = connect_from(4, served.address).await;
        let request = long_poll_request(server, &served.tokens[server]);
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
    let mut held = Vec::new();
    for server in ["vm1", "vm2"] {
        let mut stream = connect_from(1, served.address).await;
        stream.write_all(long_poll_request(server, &served.tokens[server]).as_bytes()).await.expect("send");
        tokio::time::sleep(Duration::from_millis(150)).await;
        held.push(stream);
    }
    // vm1's second poll would take the place a server without one needs; vm3 has no poll, but
    // nobody holds a second one it could end.
    for server in ["vm1", "vm3"] {
        let mut refused = connect_from(1, served.address).await;
        refused.write_all(long_poll_request(server, &served.tokens[server]).as_bytes()).await.expect("send");
        let (status, body) = response(&mut refused, Duration::from_secs(3)).await.expect("answered at once");
        assert_eq!(status, 503, "{server}: {body}");
        assert!(body.contains("too many metadata long-polls held (limit 2)"), "{body}");
    }
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_servers_token_cannot_take_the_long_polls_another_server_needs() {
    const CAP: usize = 4;
    let limits = ConnectionLimits { max_connections: 64, max_connections_per_peer: 64, max_long_polls: CAP };
    let served = serve(|config| config.limits = limits).await;
    // vm1's token opens the cap and ten more: each beyond its second ends its oldest with 304.
    let mut hog = Vec::new();
    for opened in 1..=CAP + 10 {
        hog.push(hold(1, &served, "vm1", &served.tokens["vm1"]).await);
        until_held(served.address, opened.min(2) as u64).await;
    }
    let mut ended = 0;
    for stream in &mut hog[..CAP + 8] {
        let (status, body) = response(stream, Duration::from_secs(3)).await.expect("an ended poll answers");
        assert_eq!(status, 304, "{body}");
        ended += 1;
    }
    assert_eq!(ended, CAP + 8);
    // vm2's poll is held, not refused, and reacts to a new deployment at once.
    let mut other = hold(2, &served, "vm2", &served.tokens["vm2"]).await;
    until_held(served.address, 3).await;
    let started = Instant::now();
    deploy_to(&served.engine, "for-vm2", "vm2").await;
    let (status, body) = response(&mut other, Duration::from_secs(3)).await.expect("vm2's poll answers");
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("for-vm2"), "{body}");
    assert!(started.elapsed() < Duration::from_secs(1), "reacted after {:?}", started.elapsed());
    for stream in &mut hog[CAP + 8..] {
        assert!(response(stream, Duration::from_millis(10)).await.is_none(), "vm1 keeps its two newest polls");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_poll_with_a_replaced_token_never_answers_with_a_newer_document() {
    let served = serve(|_| {}).await;
    // vm1's token replaced with a 2 s grace: a poll held with the old one ends with 401 then.
    served.engine.rotate_server_token("vm1", 2).await.expect("rotate vm1's token");
    let mut old = hold(1, &served, "vm1", &served.tokens["vm1"]).await;
    let started = Instant::now();
    let (status, body) = response(&mut old, Duration::from_secs(6)).await.expect("the poll ends with the grace");
    assert_eq!(status, 401, "{body}");
    assert!(started.elapsed() >= Duration::from_millis(1500), "ended after {:?}", started.elapsed());
    // vm2's poll is held with its current token, which a rotation without grace then replaces:
    // the newer document does not go to the old token.
    let (status, body) = rotate_during_a_held_poll(&served, "vm2", 0).await;
    assert_eq!(status, 401, "{body}");
    assert!(!body.contains("for-vm2"), "{body}");
    // Within its grace, a replaced token still gets the newer document.
    let (status, body) = rotate_during_a_held_poll(&served, "vm3", 3600).await;
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("for-vm3"), "{body}");
}

/// Holds a long-poll of `server` with its token, rotates the token with `grace_secs`, then
/// deploys to it (stack `for-<server>`); the held poll's answer.
async fn rotate_during_a_held_poll(served: &Served, server: &str, grace_secs: u64) -> (u16, String) {
    let mut held = hold(2, served, server, &served.tokens[server]).await;
    until_held(served.address, 1).await;
    served.engine.rotate_server_token(server, grace_secs).await.expect("rotate the token");
    deploy_to(&served.engine, &format!("for-{server}"), server).await;
    response(&mut held, Duration::from_secs(3)).await.expect("the poll answers")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_route_without_a_credential_reads_a_few_kib_at_most() {
    let served = serve(|_| {}).await;
    // A declared 1 MiB login is refused from its head, before any of it is read.
    let mut stream = connect_from(1, served.address).await;
    let head =
        "POST /ui/login HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1048576\r\n\r\n";
    stream.write_all(head.as_bytes()).await.expect("send the head");
    let (status, body) = response(&mut stream, Duration::from_secs(3)).await.expect("answered before the body");
    assert_eq!(status, 413, "{body}");
    assert!(body.contains("larger than 4096 bytes"), "{body}");
    // A chunked one is cut once it passes the limit.
    let chunk = format!("{:x}\r\n{}\r\n", 3000, " ".repeat(3000));
    let request = format!(
        "POST /ui/login HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n{chunk}{chunk}{chunk}0\r\n\r\n"
    );
    let (status, body) = exchange(1, served.address, &request).await;
    assert_eq!(status, 413, "{body}");
    // A login of ordinary size is read as before.
    let login = format!("{{\"token\": \"{ADMIN_TOKEN}\"}}");
    let request = format!("POST /ui/login HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\n\r\n{login}", login.len());
    let (status, body) = exchange(1, served.address, &request).await;
    assert_eq!(status, 204, "{body}");
}

/// GET and DELETE routes carry no body guard (a held long-poll would keep its state): a body
/// sent with one is never read, the answer comes at once and the connection is closed, so the
/// body cannot pin anything.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_sent_with_a_get_is_left_unread_and_its_connection_closed() {
    let served = serve(|_| {}).await;
    let mut stream = connect_from(1, served.address).await;
    let head = format!(
        "GET /v1/stacks HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {ADMIN_TOKEN}\r\nContent-Length: 1048576\r\n\r\n"
    );
    stream.write_all(head.as_bytes()).await.expect("send the head");
    stream.write_all(&[b'a'; 1000]).await.expect("send a little of the body");
    let mut received = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(5), stream.read_to_end(&mut received)).await;
    let text = String::from_utf8_lossy(&received);
    // Closed by the shim (hyper does not read an unread body to reuse the connection; whether
    // it also says `connection: close` depends on when it notices, so that is not asserted).
    assert!(read.is_ok(), "the connection stayed open, waiting for the body: {text}");
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bodies_in_flight_are_bounded_per_address_in_all_and_per_token() {
    const MIB: usize = 1 << 20;
    let wait_for_room = Duration::from_secs(1);
    let budget = BodyBudgetLimits { total_bytes: 3 * MIB, per_peer_bytes: 2 * MIB, wait_for_room };
    let served = serve(|config| config.body_budget = budget).await;
    let admin = format!("POST /v1/stacks HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {ADMIN_TOKEN}\r\n");
    let mut holding = Vec::new();
    for _ in 0..2 {
        holding.push(start_body(5, served.address, &admin, MIB - 100).await);
    }
    // (the two reservations are made once each handler reads its body)
    tokio::time::sleep(Duration::from_millis(200)).await;
    let mut third = start_body(5, served.address, &admin, MIB - 100).await;
    let (status, body) = response(&mut third, Duration::from_secs(4)).await.expect("refused after a wait");
    assert_eq!(status, 503, "{body}");
    assert!(body.contains("from 127.0.0.5 (limit 2097152 bytes)"), "{body}");
    holding.push(start_body(6, served.address, &admin, MIB - 100).await);
    tokio::time::sleep(Duration::from_millis(200)).await;
    let mut over = start_body(7, served.address, &admin, 1000).await;
    let (status, body) = response(&mut over, Duration::from_secs(4)).await.expect("refused after a wait");
    assert_eq!(status, 503, "{body}");
    assert!(body.contains("limit 3145728 bytes in all"), "{body}");
    // Once a body is done (its client gone), another one fits.
    drop(holding.remove(0));
    let scratch = "{\"name\": \"scratch\", \"template\": \"heat_template_version: 2018-08-31\\n\"}";
    let request = format!("{admin}Content-Length: {}\r\n\r\n{scratch}", scratch.len());
    let (status, body) = exchange(7, served.address, &request).await;
    assert_eq!(status, 201, "{body}");

    // A signal token has at most two bodies in flight.
    deploy_to(&served.engine, "signalled", "vm1").await;
    let document = served.engine.metadata("vm1").await.expect("vm1's document");
    let document: serde_json::Value = serde_json::from_str(&document.body).expect("JSON");
    let inputs = document["deployments"][0]["inputs"].as_array().expect("inputs").clone();
    let signal = inputs.iter().find(|input| input["name"] == "deploy_signal_id").expect("a signal URL");
    let token = signal["value"].as_str().expect("a URL").rsplit('/').next().expect("a token").to_string();
    let head = format!("POST /v1/signals/{token} HTTP/1.1\r\nHost: x\r\n");
    let _first = start_body(8, served.address, &head, 1000).await;
    let _second = start_body(9, served.address, &head, 1000).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let mut third = start_body(10, served.address, &head, 1000).await;
    let (status, body) = response(&mut third, Duration::from_secs(3)).await.expect("refused at once");
    assert_eq!(status, 429, "{body}");
    assert!(body.contains("another request with this token is being received"), "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_a_low_open_file_limit_one_address_keeps_an_eighth_and_headless_connections_make_room() {
    let dir = anneal_tests::private_temp_dir("anneal-low-nofile-");
    let (mut daemon, address) = serve_with_open_files(dir.path(), 1024).await.expect("the shim starts");
    // 1024 files: 480 connections in all, an eighth (60) per address.
    let log = daemon.log_text();
    assert!(log.contains("max_connections=480") && log.contains("max_connections_per_peer=60"), "{log}");
    assert!(log.contains("the open-file limit lowers the connection caps"), "{log}");
    // A slowloris from 127.0.0.2 fills its share with heads it never finishes...
    let mut slow = Vec::new();
    open_headless(2, address, 60, &mut slow).await;
    let mut over = connect_from(2, address).await;
    let (status, body) = response(&mut over, Duration::from_secs(3)).await.expect("refused at once");
    assert_eq!(status, 503, "{body}");
    assert!(body.contains("too many connections from 127.0.0.2 (limit 60)"), "{body}");
    // ...seven more addresses fill the rest of the global cap the same way...
    for last in 3..10 {
        open_headless(last, address, 60, &mut slow).await;
    }
    // ...and an agent's request from another address is still served: the oldest connection
    // without a head is closed to make room.
    let request = format!("GET /v1/servers HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {ADMIN_TOKEN}\r\n\r\n");
    let (status, body) = exchange(20, address, &request).await;
    assert_eq!(status, 200, "{body}");
    let mut closed = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(3), slow[0].read_to_end(&mut closed)).await;
    assert!(read.is_ok(), "the oldest headless connection was closed");
    daemon.terminate(Duration::from_secs(10)).await;
}

#[tokio::test]
async fn serve_refuses_to_start_under_a_very_low_open_file_limit() {
    let dir = anneal_tests::private_temp_dir("anneal-tiny-nofile-");
    let (code, log) = serve_with_open_files(dir.path(), 128).await.err().expect("the shim refuses to start");
    assert_eq!(code, 1, "{log}");
    assert!(log.contains("the open-file limit is 128; the shim needs at least 256"), "{log}");
}
