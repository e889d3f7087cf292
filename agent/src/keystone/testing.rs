//! A Keystone v3 fake for the agent's tests: wiremock answering `POST /v3/auth/tokens` the way
//! Keystone does (token in `X-Subject-Token`, `expires_at`/`issued_at` and the catalog in the
//! body), shared by the keystone, heat, zaqar and signal tests.

use std::time::Duration;

use serde_json::{Value, json};
use wiremock::matchers::{body_partial_json, method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

use super::Credentials;
use crate::secret::Secret;

pub(crate) const USER_ID: &str = "7d3b1a2c4e5f";
pub(crate) const PROJECT_ID: &str = "a1b2c3d4e5f6";
pub(crate) const PASSWORD: &str = "pa55-word-never-printed";
pub(crate) const TOKEN: &str = "gAAAAABtoken-never-printed-1";

/// The credentials the fake accepts, with `auth_url` pointing at `server` (no `/v3`).
pub(crate) fn credentials(server: &MockServer) -> Credentials {
    Credentials {
        auth_url: server.uri(),
        user_id: USER_ID.to_string(),
        password: Secret::new(PASSWORD.to_string()),
        project_id: PROJECT_ID.to_string(),
    }
}

/// A catalog entry list: each `(service type, public url)` in region `RegionOne`, with an
/// `internal` endpoint first that must never be picked.
pub(crate) fn catalog(services: &[(&str, &str)]) -> Value {
    let entries: Vec<Value> = services
        .iter()
        .map(|(service_type, url)| {
            json!({"type": service_type, "name": service_type, "endpoints": [
                {"interface": "internal", "region_id": "RegionOne", "region": "RegionOne", "url": "http://internal.invalid/"},
                {"interface": "public", "region_id": "RegionOne", "region": "RegionOne", "url": url},
            ]})
        })
        .collect();
    Value::Array(entries)
}

/// Keystone's 201 answer: `token` in the header, a lifetime of `lifetime` by Keystone's clock.
pub(crate) fn token_response(token: &str, lifetime: Duration, catalog: &Value) -> ResponseTemplate {
    let issued = 1_790_000_000_u64;
    let expires = issued + lifetime.as_secs();
    ResponseTemplate::new(201).insert_header("x-subject-token", token).set_body_json(json!({"token": {
        "methods": ["password"],
        "issued_at": iso(issued),
        "expires_at": iso(expires),
        "project": {"id": PROJECT_ID, "name": "p", "domain": {"id": "default", "name": "Default"}},
        "user": {"id": USER_ID, "name": "u", "domain": {"id": "default", "name": "Default"}},
        "catalog": catalog,
    }}))
}

/// Mounts a Keystone on `server` that accepts exactly the test credentials, answering `token`
/// with an hour's lifetime, and 401 to anything else.
pub(crate) async fn mount(server: &MockServer, token: &str, catalog: &Value) {
    mount_with(server, token_response(token, Duration::from_secs(3600), catalog)).await;
}

/// Mounts `response` for the test credentials and a 401 for others.
pub(crate) async fn mount_with(server: &MockServer, response: ResponseTemplate) {
    Mock::given(method("POST"))
        .and(path("/v3/auth/tokens"))
        .and(body_partial_json(json!({"auth": {
            "identity": {"methods": ["password"], "password": {"user": {"id": USER_ID, "password": PASSWORD}}},
            "scope": {"project": {"id": PROJECT_ID}},
        }})))
        .respond_with(response)
        .with_priority(1)
        .mount(server)
        .await;
    Mock::given(method("POST"))
        .and(path("/v3/auth/tokens"))
        .respond_with(ResponseTemplate::new(401).set_body_json(
            json!({"error": {"code": 401, "title": "Unauthorized", "message": "The request you have made requires authentication."}}),
        ))
        .with_priority(5)
        .mount(server)
        .await;
}

/// How many token requests `server` received.
pub(crate) async fn auth_count(server: &MockServer) -> usize {
    let requests = server.received_requests().await.unwrap_or_default();
    requests.iter().filter(|request| request.url.path() == "/v3/auth/tokens").count()
}

/// Unix seconds as Keystone writes them (`2026-09-21T12:26:40.000000Z`).
fn iso(unix: u64) -> String {
    anneal_protocol::dates::rfc3339(unix * 1000).replace('Z', ".000000Z")
}
