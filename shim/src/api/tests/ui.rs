//! The web view's routes against hostile clients: the login takes only the admin token, in a
//! bounded JSON body, from the view's own pages, at a throttled rate per address; the session
//! cookie cannot be forged and dies at logout wherever it was copied; the data routes answer
//! nothing without a session or the admin token; assets are only the two files; every page
//! carries its security headers; live streams share one reader per stack and are capped.

use reqwest::Method;
use serde_json::json;

use super::*;

/// `POST /ui/login` with `body` as JSON.
async fn login(server: &TestServer, body: serde_json::Value) -> reqwest::Response {
    let request = server.request(Method::POST, "/ui/login").header("content-type", "application/json");
    request.body(body.to_string()).send().await.unwrap()
}

fn session_of(response: &reqwest::Response) -> String {
    let cookie = response.headers()["set-cookie"].to_str().unwrap().to_string();
    cookie.split(';').next().unwrap().to_string()
}

#[tokio::test]
async fn login_takes_the_admin_token_once_and_gives_a_cookie_that_opens_only_the_view() {
    let server = TestServer::start().await;
    let refused = server.get("/ui/api/stacks").send().await.unwrap();
    error_of(refused, 401).await;
    for wrong in ["", "  ", WEB_TOKEN, "not-the-token"] {
        let response = login(&server, json!({"token": wrong})).await;
        error_of(response, 403).await;
    }
    for unreadable in ["token=x", "{\"token\": 1}", "{\"token\": \"x\", \"extra\": 1}", "[]"] {
        let response = server
            .request(Method::POST, "/ui/login")
            .header("content-type", "application/json")
            .body(unreadable)
            .send()
            .await
            .unwrap();
        assert!(matches!(response.status().as_u16(), 400 | 415 | 422), "{unreadable}: {}", response.status());
    }
    let huge = json!({"token": "x".repeat(2 * 1024 * 1024)});
    let response = login(&server, huge).await;
    assert_eq!(response.status(), 413);

    let answer = login(&server, json!({"token": ADMIN_TOKEN})).await;
    assert_eq!(answer.status(), 204);
    let cookie = session_of(&answer);
    let set = answer.headers()["set-cookie"].to_str().unwrap();
    assert!(set.contains("HttpOnly") && set.contains("SameSite=Strict") && set.contains("Path=/ui"), "{set}");
    assert!(!set.contains(ADMIN_TOKEN), "the cookie does not hold the token");
    let stacks = server.get("/ui/api/stacks").header("cookie", &cookie).send().await.unwrap();
    assert_eq!(stacks.status(), 200);
    // The cookie is no API credential.
    let api = server.get("/v1/stacks").header("cookie", &cookie).send().await.unwrap();
    assert_eq!(api.status(), 401);
    // A bearer header is checked as the admin's even when a valid cookie rides along.
    let mixed = server.get("/ui/api/stacks").header("cookie", &cookie).bearer_auth(WEB_TOKEN).send().await.unwrap();
    assert_eq!(mixed.status(), 403);

    let id = cookie.trim_start_matches("anneal_ui=");
    let forged = format!("anneal_ui={}", "0".repeat(64));
    let stretched = format!("anneal_ui={id}.{}", "0".repeat(64));
    for bad in [forged, stretched, "anneal_ui=".to_string(), format!("anneal_ui={ADMIN_TOKEN}")] {
        let response = server.get("/ui/api/stacks").header("cookie", &bad).send().await.unwrap();
        assert_eq!(response.status(), 401, "{bad}");
    }
    let logout = server.request(Method::POST, "/ui/logout").send().await.unwrap();
    assert_eq!(logout.status(), 204);
    assert!(logout.headers()["set-cookie"].to_str().unwrap().contains("Max-Age=0"));
}

#[tokio::test]
async fn pages_carry_their_security_headers_and_only_two_assets_exist() {
    let server = TestServer::start().await;
    for (path, content_type) in
        [("/ui/", "text/html"), ("/ui/assets/app.js", "text/javascript"), ("/ui/assets/app.css", "text/css")]
    {
        let response = server.get(path).send().await.unwrap();
        assert_eq!(response.status(), 200, "{path}");
        let headers = response.headers();
        assert!(headers["content-type"].to_str().unwrap().starts_with(content_type), "{path}");
        let policy = headers["content-security-policy"].to_str().unwrap();
        assert!(policy.contains("default-src 'none'") && policy.contains("frame-ancestors 'none'"), "{policy}");
        assert_eq!(headers["x-frame-options"], "DENY");
        assert_eq!(headers["x-content-type-options"], "nosniff");
    }
    for path in
        ["/ui/assets/index.html", "/ui/assets/..%2Fmod.rs", "/ui/assets/%2e%2e%2f%2e%2e%2fCargo.toml", "/ui/assets/"]
    {
        let response = server.get(path).send().await.unwrap();
        assert_eq!(response.status(), 404, "{path}");
    }
}

#[tokio::test]
async fn the_data_routes_answer_the_admin_bearer_token_too() {
    let server = TestServer::start().await;
    for path in ["/ui/api/stacks", "/ui/api/servers", "/ui/api/stacks/one"] {
        let response = server.admin(Method::GET, path).send().await.unwrap();
        assert_eq!(response.status(), 200, "{path}");
        let response = server.get(path).bearer_auth(WEB_TOKEN).send().await.unwrap();
        assert_eq!(response.status(), 403, "{path}");
    }
    let node = server.admin(Method::GET, "/ui/api/stacks/one/nodes/..%2F..%2Fv1").send().await.unwrap();
    error_of(node, 404).await;
}

/// A client whose connections come from 127.0.0.`last`.
fn client_from(last: u8) -> reqwest::Client {
    let address = std::net::IpAddr::from([127, 0, 0, last]);
    reqwest::Client::builder().no_proxy().local_address(address).build().unwrap()
}

async fn login_from(server: &TestServer, client: &reqwest::Client, token: &str) -> reqwest::Response {
    let body = json!({"token": token}).to_string();
    client.post(format!("{}/ui/login", server.url)).body(body).send().await.unwrap()
}

/// A session cookie (`anneal_ui=<id>`), from a login from 127.0.0.1.
async fn session(server: &TestServer) -> String {
    let answer = login(server, json!({"token": ADMIN_TOKEN})).await;
    assert_eq!(answer.status(), 204);
    session_of(&answer)
}

#[tokio::test]
async fn logout_revokes_the_session_so_a_copied_cookie_opens_nothing_more() {
    let server = TestServer::start().await;
    let cookie = session(&server).await;
    let copied = cookie.clone();
    assert_eq!(server.get("/ui/api/stacks").header("cookie", &copied).send().await.unwrap().status(), 200);
    let logout = server.request(Method::POST, "/ui/logout").header("cookie", &cookie).send().await.unwrap();
    assert_eq!(logout.status(), 204);
    assert!(logout.headers()["set-cookie"].to_str().unwrap().contains("Max-Age=0"));
    let after = server.get("/ui/api/stacks").header("cookie", &copied).send().await.unwrap();
    error_of(after, 401).await;
    assert_eq!(server.service.session_count(), 0, "the logout deleted the session the service kept");
    let other = session(&server).await;
    assert_eq!(server.get("/ui/api/stacks").header("cookie", &other).send().await.unwrap().status(), 200);
}

#[tokio::test]
async fn failed_logins_from_an_address_are_throttled_while_other_addresses_log_in() {
    let server = TestServer::start().await;
    let guesser = client_from(2);
    for attempt in 1..=5 {
        let response = login_from(&server, &guesser, "not-the-token").await;
        assert_eq!(response.status(), 403, "attempt {attempt}");
    }
    for token in ["another-guess", ADMIN_TOKEN] {
        let refused = login_from(&server, &guesser, token).await;
        let retry_after: u64 = refused.headers()["retry-after"].to_str().unwrap().parse().unwrap();
        assert!((1..=60).contains(&retry_after), "{retry_after}");
        let message = error_of(refused, 429).await;
        assert!(message.contains("too many failed logins from 127.0.0.2 (5 within 60 s)"), "{message}");
    }
    let elsewhere = login_from(&server, &client_from(3), ADMIN_TOKEN).await;
    assert_eq!(elsewhere.status(), 204, "another address is not held back");
}

#[tokio::test]
async fn cross_site_posts_are_refused_and_the_views_own_are_not() {
    let server = TestServer::start().await;
    let own_origin = server.url.clone();
    let post = |path: &str| server.request(Method::POST, path).body(json!({"token": ADMIN_TOKEN}).to_string());
    let cross = post("/ui/login").header("sec-fetch-site", "cross-site").send().await.unwrap();
    let message = error_of(cross, 403).await;
    assert!(message.contains("cross-site request refused: Sec-Fetch-Site is cross-site"), "{message}");
    let foreign = post("/ui/login").header("origin", "http://evil.example").send().await.unwrap();
    let message = error_of(foreign, 403).await;
    assert!(message.contains("Origin http://evil.example is not this shim's"), "{message}");
    assert_eq!(server.service.session_count(), 0, "no session was opened");

    let own = post("/ui/login").header("sec-fetch-site", "same-origin").header("origin", &own_origin).send().await;
    let own = own.unwrap();
    assert_eq!(own.status(), 204);
    let cookie = session_of(&own);
    let forged = server
        .request(Method::POST, "/ui/logout")
        .header("cookie", &cookie)
        .header("sec-fetch-site", "cross-site")
        .send()
        .await
        .unwrap();
    error_of(forged, 403).await;
    assert_eq!(server.get("/ui/api/stacks").header("cookie", &cookie).send().await.unwrap().status(), 200);
    let logout = server
        .request(Method::POST, "/ui/logout")
        .header("cookie", &cookie)
        .header("sec-fetch-site", "same-origin")
        .header("origin", &own_origin)
        .send()
        .await
        .unwrap();
    assert_eq!(logout.status(), 204);
}

/// Reads `stream` until what arrived contains `wanted` (10 s at most); what arrived.
async fn read_until(stream: &mut reqwest::Response, wanted: &str) -> String {
    let mut seen = String::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !seen.contains(wanted) {
        let chunk = tokio::time::timeout_at(deadline, stream.chunk()).await;
        match chunk {
            Ok(Ok(Some(bytes))) => seen.push_str(&String::from_utf8_lossy(&bytes)),
            other => panic!("{wanted:?} never came ({other:?}); got {seen:?}"),
        }
    }
    seen
}

async fn open_stream(server: &TestServer, cookie: &str) -> reqwest::Response {
    server.get("/ui/api/stacks/one/watch").header("cookie", cookie).send().await.unwrap()
}

#[tokio::test]
async fn live_streams_are_capped_per_session_and_per_address() {
    let server = TestServer::start().await;
    let cookie = session(&server).await;
    let mut streams = Vec::new();
    for _ in 0..8 {
        let mut stream = open_stream(&server, &cookie).await;
        assert_eq!(stream.status(), 200);
        read_until(&mut stream, "event: graph").await;
        streams.push(stream);
    }
    let ninth = open_stream(&server, &cookie).await;
    assert_eq!(ninth.status(), 429, "the ninth stream of a session");
    assert_eq!(ninth.headers()["retry-after"], "10");
    let message = error_of(ninth, 429).await;
    assert!(message.contains("too many live views open in this session (limit 8)"), "{message}");
    let other = session(&server).await;
    streams.push(open_stream(&server, &other).await);
    assert_eq!(streams.last().map(reqwest::Response::status), Some(reqwest::StatusCode::OK), "another session");

    // The admin bearer token has no session: the address's cap holds it (32 with the 9 above).
    for _ in 0..23 {
        streams.push(server.admin(Method::GET, "/ui/api/stacks/one/watch").send().await.unwrap());
    }
    let over = server.admin(Method::GET, "/ui/api/stacks/one/watch").send().await.unwrap();
    assert_eq!(over.status(), 429, "the 33rd stream from one address");
    let message = error_of(over, 429).await;
    assert!(message.contains("too many live views open from 127.0.0.1 (limit 32)"), "{message}");
    streams.truncate(6);
    // The shim sees the client hang up (it watches the socket) and frees the place.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let again = open_stream(&server, &cookie).await;
        if again.status() == 200 {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "a closed stream never freed its place");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn the_streams_of_a_stack_share_one_reader_that_reads_on_change_only() {
    let server = TestServer::start().await;
    let mut streams = Vec::new();
    for _ in 0..5 {
        let mut stream = server.admin(Method::GET, "/ui/api/stacks/one/watch").send().await.unwrap();
        assert_eq!(stream.headers()["content-type"], "text/event-stream");
        let first = read_until(&mut stream, "\n\n").await;
        assert!(first.starts_with("event: graph\ndata: {\"graph\":") && first.contains("CREATE_COMPLETE"), "{first}");
        streams.push(stream);
    }
    let reads = || server.service.graph_reads.load(std::sync::atomic::Ordering::SeqCst);
    assert_eq!(reads(), 1, "five streams, one read");
    server.service.set_graph_status("UPDATE_IN_PROGRESS");
    for stream in &mut streams {
        read_until(stream, "UPDATE_IN_PROGRESS").await;
    }
    assert_eq!(reads(), 2, "one read per change, whatever the number of streams");
    let missing = server.admin(Method::GET, "/ui/api/stacks/missing/watch").send().await.unwrap();
    error_of(missing, 404).await;
}

#[tokio::test]
async fn a_stream_ends_when_its_session_logs_out() {
    let server = TestServer::start().await;
    let cookie = session(&server).await;
    let mut stream = open_stream(&server, &cookie).await;
    read_until(&mut stream, "event: graph").await;
    let logout = server.request(Method::POST, "/ui/logout").header("cookie", &cookie).send().await.unwrap();
    assert_eq!(logout.status(), 204);
    let ended =
        tokio::time::timeout(Duration::from_secs(10), async { while let Ok(Some(_)) = stream.chunk().await {} });
    assert!(ended.await.is_ok(), "the stream of a revoked session ends");
}
