//! The web view's routes against hostile clients: the login takes only the admin token, in a
//! bounded JSON body; the session cookie cannot be forged, replayed after expiry or stretched;
//! the data routes answer nothing without a session or the admin token; assets are only the two
//! files; every page carries its security headers.

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

    let (expires, signature) = cookie.trim_start_matches("anneal_ui=").split_once('.').unwrap();
    let stretched = format!("anneal_ui={}.{signature}", expires.parse::<u64>().unwrap() + 86_400);
    let past = format!("anneal_ui=1.{signature}");
    let forged = format!("anneal_ui={expires}.{}", "0".repeat(64));
    for bad in [stretched, past, forged, "anneal_ui=".to_string(), format!("anneal_ui={ADMIN_TOKEN}")] {
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
