//! Metadata routes: the agent's (auth matrix, ETag/304, long-poll wake, timeout, clamping,
//! shutdown, removal of the server) and os-collect-config's (Last-Modified /
//! If-Modified-Since, HEAD, 404).

use std::time::{Duration, Instant};

use reqwest::Method;

use super::*;

const WEB: &str = "/v1/servers/web/metadata";

#[tokio::test]
async fn agent_auth_matrix() {
    let server = TestServer::start().await;
    error_of(server.get(WEB).send().await.unwrap(), 401).await;
    for malformed in ["Basic d2ViOg==", "Bearer", WEB_TOKEN, "Token abc"] {
        let response = server.get(WEB).header("authorization", malformed).send().await.unwrap();
        error_of(response, 401).await;
    }
    for other in [DB_TOKEN, UNKNOWN_TOKEN, ADMIN_TOKEN, "short"] {
        let response = server.get(WEB).bearer_auth(other).send().await.unwrap();
        let message = error_of(response, 403).await;
        assert_eq!(message, "the token does not grant access to the metadata of server web");
    }
    let response = server.get("/v1/servers/nobody/metadata").bearer_auth(WEB_TOKEN).send().await.unwrap();
    error_of(response, 403).await;
    let response = server.get(WEB).bearer_auth(WEB_TOKEN).send().await.unwrap();
    assert_eq!(response.status(), 200);
    // Only the authorised request counts as the agent being alive.
    assert_eq!(server.service.calls(|calls| calls.touches.clone()), ["web"]);
}

#[tokio::test]
async fn full_response_headers_and_body() {
    let server = TestServer::start().await;
    let response = server.get(WEB).bearer_auth(WEB_TOKEN).send().await.unwrap();
    assert_eq!(response.status(), 200);
    let headers = response.headers().clone();
    assert_eq!(headers["etag"], "\"1\"");
    assert_eq!(headers["x-anneal-long-poll"], "5");
    assert_eq!(headers["content-type"], "application/json");
    assert_eq!(headers["last-modified"], "Sat, 21 Nov 2026 05:00:00 GMT");
    assert_eq!(response.text().await.unwrap(), document_body("web", 1));
    let response = server.get("/v1/servers/db/metadata").bearer_auth(DB_TOKEN).send().await.unwrap();
    assert_eq!(response.text().await.unwrap(), document_body("db", 1));
}

#[tokio::test]
async fn if_none_match_gives_304_at_once() {
    let server = TestServer::start().await;
    for tag in ["\"1\"", "W/\"1\"", "\"7\", \"1\"", "*"] {
        let response = server.get(WEB).bearer_auth(WEB_TOKEN).header("if-none-match", tag).send().await.unwrap();
        assert_eq!(response.status(), 304, "{tag}");
        assert_eq!(response.headers()["etag"], "\"1\"");
        assert_eq!(response.headers()["x-anneal-long-poll"], "5");
        assert_eq!(response.headers()["content-type"], "application/json");
        assert!(response.headers().contains_key("last-modified"));
        assert!(response.bytes().await.unwrap().is_empty());
    }
    for tag in ["\"0\"", "\"12\"", "1", "garbage"] {
        let response = server.get(WEB).bearer_auth(WEB_TOKEN).header("if-none-match", tag).send().await.unwrap();
        assert_eq!(response.status(), 200, "{tag}");
    }
    // The 304 path reads nothing but the (memory-cached) document.
    assert_eq!(server.service.calls(|calls| calls.metadata_reads), 8);
}

#[tokio::test]
async fn long_poll_returns_the_new_document_promptly() {
    let server = TestServer::start().await;
    let request = server.get(&format!("{WEB}?wait=5")).bearer_auth(WEB_TOKEN).header("if-none-match", "\"1\"").send();
    let pending = tokio::spawn(request);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!pending.is_finished(), "the request must be held");
    // Another server's change must not wake it.
    server.service.publish("db", 1);
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(!pending.is_finished());
    let published = Instant::now();
    let version = server.service.publish("web", 30);
    let response = pending.await.unwrap().unwrap();
    assert!(published.elapsed() < Duration::from_millis(100), "woke after {:?}", published.elapsed());
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["etag"], format!("\"{version}\"").as_str());
    assert_eq!(response.headers()["last-modified"], "Sat, 21 Nov 2026 05:00:30 GMT");
    assert_eq!(response.text().await.unwrap(), document_body("web", 2));
}

#[tokio::test]
async fn long_poll_on_any_tag_ends_with_the_change() {
    let server = TestServer::start().await;
    let request = server.get(&format!("{WEB}?wait=5")).bearer_auth(WEB_TOKEN).header("if-none-match", "*").send();
    let pending = tokio::spawn(request);
    tokio::time::sleep(Duration::from_millis(200)).await;
    server.service.publish("web", 1);
    let response = pending.await.unwrap().unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["etag"], "\"2\"");
}

#[tokio::test]
async fn long_poll_with_a_stale_tag_answers_at_once() {
    let server = TestServer::start().await;
    server.service.publish("web", 1);
    let started = Instant::now();
    let response =
        server.get(&format!("{WEB}?wait=5")).bearer_auth(WEB_TOKEN).header("if-none-match", "\"1\"").send().await;
    let response = response.unwrap();
    assert_eq!(response.status(), 200);
    assert!(started.elapsed() < Duration::from_secs(1));
    assert_eq!(response.headers()["etag"], "\"2\"");
    // Without If-None-Match there is nothing to wait for either.
    let response = server.get(&format!("{WEB}?wait=5")).bearer_auth(WEB_TOKEN).send().await.unwrap();
    assert_eq!(response.status(), 200);
}

#[tokio::test]
async fn long_poll_times_out_with_304() {
    let server = TestServer::start().await;
    let started = Instant::now();
    let response = server.get(&format!("{WEB}?wait=1")).bearer_auth(WEB_TOKEN).header("if-none-match", "\"1\"");
    let response = response.send().await.unwrap();
    let elapsed = started.elapsed();
    assert_eq!(response.status(), 304);
    assert_eq!(response.headers()["etag"], "\"1\"");
    assert!(elapsed >= Duration::from_millis(950) && elapsed < Duration::from_secs(3), "{elapsed:?}");
}

#[tokio::test]
async fn wait_is_clamped_and_checked() {
    let server = TestServer::start_with(|config| config.long_poll_max = Duration::from_secs(1)).await;
    let started = Instant::now();
    let response = server.get(&format!("{WEB}?wait=3600")).bearer_auth(WEB_TOKEN).header("if-none-match", "\"1\"");
    let response = response.send().await.unwrap();
    assert_eq!(response.status(), 304);
    assert_eq!(response.headers()["x-anneal-long-poll"], "1");
    assert!(started.elapsed() < Duration::from_secs(3), "{:?}", started.elapsed());

    let started = Instant::now();
    let response = server.get(&format!("{WEB}?wait=0")).bearer_auth(WEB_TOKEN).header("if-none-match", "\"1\"");
    assert_eq!(response.send().await.unwrap().status(), 304);
    assert!(started.elapsed() < Duration::from_millis(500));

    for wait in ["abc", "-1", "1.5", "", "99999999999999999999999"] {
        let response = server.get(&format!("{WEB}?wait={wait}")).bearer_auth(WEB_TOKEN).send().await.unwrap();
        let message = error_of(response, 400).await;
        assert!(message.contains("wait must be a whole number of seconds"), "{wait}: {message}");
    }
    // Authentication is checked before the query; a bad query still shows the agent alive.
    error_of(server.get(&format!("{WEB}?wait=abc")).send().await.unwrap(), 401).await;
    assert_eq!(server.service.calls(|calls| calls.touches.len()), 7);
}

#[tokio::test]
async fn shutdown_ends_long_polls_promptly() {
    let server = TestServer::start().await;
    let request = server.get(&format!("{WEB}?wait=5")).bearer_auth(WEB_TOKEN).header("if-none-match", "\"1\"").send();
    let pending = tokio::spawn(request);
    tokio::time::sleep(Duration::from_millis(200)).await;
    let cancelled = Instant::now();
    server.shutdown.cancel();
    let response = pending.await.unwrap().unwrap();
    assert_eq!(response.status(), 304);
    tokio::time::timeout(Duration::from_secs(2), server.task).await.unwrap().unwrap().unwrap();
    assert!(cancelled.elapsed() < Duration::from_secs(1), "{:?}", cancelled.elapsed());
}

#[tokio::test]
async fn removing_the_server_answers_its_held_long_poll() {
    let server = TestServer::start().await;
    let request = server.get(&format!("{WEB}?wait=5")).bearer_auth(WEB_TOKEN).header("if-none-match", "\"1\"").send();
    let pending = tokio::spawn(request);
    server.service.wait_for_watchers("web", 1).await;
    let response = server.admin(Method::DELETE, "/v1/servers/web").send().await.unwrap();
    assert_eq!(response.status(), 204);
    // What the token gets now; a poll left hanging would end with 304 after its 5 s.
    let message = error_of(pending.await.unwrap().unwrap(), 403).await;
    assert_eq!(message, "the token does not grant access to the metadata of server web");
}

#[tokio::test]
async fn request_collector_route() {
    let server = TestServer::start().await;
    let path = format!("/v1/metadata/{WEB_TOKEN}");
    let response = server.get(&path).send().await.unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["last-modified"], "Sat, 21 Nov 2026 05:00:00 GMT");
    assert_eq!(response.headers()["content-type"], "application/json");
    assert!(!response.headers().contains_key("x-anneal-long-poll"));
    assert_eq!(response.text().await.unwrap(), document_body("web", 1));
    assert_eq!(server.service.calls(|calls| calls.touches.clone()), ["web"]);

    let cases = [
        ("Sat, 21 Nov 2026 05:00:00 GMT", 304),
        ("Sat, 21 Nov 2026 05:00:01 GMT", 304),
        ("Sun, 22 Nov 2026 00:00:00 GMT", 304),
        ("Saturday, 21-Nov-26 05:00:00 GMT", 304),
        ("Sat Nov 21 05:00:00 2026", 304),
        ("Sat, 21 Nov 2026 04:59:59 GMT", 200),
        ("Thu, 01 Jan 1970 00:00:00 GMT", 200),
        ("yesterday", 200),
    ];
    for (since, expected) in cases {
        let response = server.get(&path).header("if-modified-since", since).send().await.unwrap();
        assert_eq!(response.status(), expected, "{since}");
    }
    server.service.publish("web", 10);
    let response = server.get(&path).header("if-modified-since", "Sat, 21 Nov 2026 05:00:05 GMT").send();
    assert_eq!(response.await.unwrap().status(), 200);
    // If-None-Match, when present, wins over If-Modified-Since.
    let response =
        server.get(&path).header("if-modified-since", "Sun, 22 Nov 2026 00:00:00 GMT").header("if-none-match", "\"1\"");
    assert_eq!(response.send().await.unwrap().status(), 200);
}

#[tokio::test]
async fn request_collector_head() {
    let server = TestServer::start().await;
    let path = format!("/v1/metadata/{DB_TOKEN}");
    let response = server.request(Method::HEAD, &path).send().await.unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["last-modified"], "Sat, 21 Nov 2026 05:00:00 GMT");
    assert!(response.bytes().await.unwrap().is_empty());
    let response = server.request(Method::HEAD, &path).header("if-modified-since", "Sat, 21 Nov 2026 05:00:00 GMT");
    assert_eq!(response.send().await.unwrap().status(), 304);
    assert_eq!(server.service.calls(|calls| calls.touches.clone()), ["db", "db"]);
}

#[tokio::test]
async fn request_collector_unknown_tokens_are_404() {
    let server = TestServer::start().await;
    for token in [UNKNOWN_TOKEN, "short", ADMIN_TOKEN] {
        let response = server.get(&format!("/v1/metadata/{token}")).send().await.unwrap();
        assert_eq!(error_of(response, 404).await, "metadata not found");
        let response = server.request(Method::HEAD, &format!("/v1/metadata/{token}")).send().await.unwrap();
        assert_eq!(response.status(), 404);
    }
    assert!(server.service.calls(|calls| calls.touches.is_empty()));
}
