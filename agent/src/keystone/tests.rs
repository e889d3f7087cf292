//! Tests of the Keystone client against a wiremock Keystone on 127.0.0.1 (`testing`).

use serde_json::{Value, json};
use wiremock::matchers::{header, method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

use super::testing::{self, PASSWORD, TOKEN};
use super::*;
use crate::httpclient::{self, TrustRoots};

fn session(credentials: Credentials) -> KeystoneSession {
    let client = httpclient::build(Duration::from_secs(2), None, &TrustRoots::default()).unwrap();
    KeystoneSession::new(credentials, client, Duration::from_secs(5)).unwrap()
}

fn heat_catalog() -> Value {
    testing::catalog(&[("orchestration", "http://127.0.0.1:8004/v1/p"), ("messaging", "http://127.0.0.1:8888")])
}

#[test]
fn tokens_url_accepts_auth_url_with_or_without_v3() {
    for auth_url in ["http://k:5000", "http://k:5000/", "http://k:5000/v3", "http://k:5000/v3/", "http://k:5000/v2.0"] {
        assert_eq!(tokens_url(auth_url).unwrap(), "http://k:5000/v3/auth/tokens", "{auth_url}");
    }
    assert_eq!(tokens_url("https://h/identity").unwrap(), "https://h/identity/v3/auth/tokens");
    assert!(matches!(tokens_url("ftp://k/v3"), Err(KeystoneError::BadUrl { .. })));
    assert!(matches!(tokens_url("not a url"), Err(KeystoneError::BadUrl { .. })));
    let error = tokens_url("http://u:pw@k/v3?x=1").unwrap_err().to_string();
    assert!(!error.contains("pw"), "{error}");
}

#[test]
fn tokens_are_renewed_five_minutes_early_or_at_half_life() {
    assert_eq!(renew_after(Duration::from_secs(3600)), Duration::from_secs(3300));
    assert_eq!(renew_after(Duration::from_secs(240)), Duration::from_secs(120));
    assert_eq!(renew_after(Duration::ZERO), Duration::ZERO);
}

#[tokio::test]
async fn authenticates_by_user_and_project_id_and_caches_the_token() {
    let server = MockServer::start().await;
    testing::mount(&server, TOKEN, &heat_catalog()).await;
    let session = session(testing::credentials(&server));
    let token = session.token().await.unwrap();
    assert_eq!(token.header().to_str().unwrap(), TOKEN);
    assert!(token.header().is_sensitive());
    assert_eq!(token.endpoint("orchestration", None).unwrap(), "http://127.0.0.1:8004/v1/p");
    let again = session.token().await.unwrap();
    assert!(Arc::ptr_eq(&token, &again), "the cached token is reused");
    assert_eq!(testing::auth_count(&server).await, 1);
    let request = &server.received_requests().await.unwrap()[0];
    assert_eq!(request.headers["content-type"], "application/json");
    let body: Value = serde_json::from_slice(&request.body).unwrap();
    assert_eq!(body["auth"]["identity"]["password"]["user"], json!({"id": testing::USER_ID, "password": PASSWORD}));
    assert_eq!(body["auth"]["scope"], json!({"project": {"id": testing::PROJECT_ID}}));
    let printed = format!("{session:?} {token:?} {:?}", session.credentials());
    assert!(!printed.contains(PASSWORD) && !printed.contains(TOKEN), "{printed}");
}

#[tokio::test]
async fn a_token_near_expiry_is_renewed() {
    let server = MockServer::start().await;
    // Two seconds of life: renewed after one.
    testing::mount_with(&server, testing::token_response(TOKEN, Duration::from_secs(2), &heat_catalog())).await;
    let session = session(testing::credentials(&server));
    let first = session.token().await.unwrap();
    assert!(Arc::ptr_eq(&first, &session.token().await.unwrap()));
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let second = session.token().await.unwrap();
    assert!(!Arc::ptr_eq(&first, &second));
    assert_eq!(testing::auth_count(&server).await, 2);
}

#[tokio::test]
async fn invalidate_drops_only_the_refused_token() {
    let server = MockServer::start().await;
    testing::mount(&server, TOKEN, &heat_catalog()).await;
    let session = session(testing::credentials(&server));
    let refused = session.token().await.unwrap();
    session.invalidate(&refused).await;
    let fresh = session.token().await.unwrap();
    assert!(!Arc::ptr_eq(&refused, &fresh));
    // A second caller that saw the old token refused does not throw away the fresh one.
    session.invalidate(&refused).await;
    assert!(Arc::ptr_eq(&fresh, &session.token().await.unwrap()));
    assert_eq!(testing::auth_count(&server).await, 2);
}

#[tokio::test]
async fn refused_credentials_are_permanent_and_never_printed() {
    let server = MockServer::start().await;
    testing::mount(&server, TOKEN, &heat_catalog()).await;
    let mut credentials = testing::credentials(&server);
    credentials.password = Secret::new("wrong-password-xyz".to_string());
    let error = session(credentials).token().await.unwrap_err();
    assert!(matches!(error, KeystoneError::Refused { status: 401, .. }), "{error:?}");
    assert!(!error.is_transient());
    let text = crate::error_chain(&error);
    assert!(text.contains(testing::USER_ID) && text.contains("401"), "{text}");
    assert!(!text.contains("wrong-password-xyz") && !format!("{error:?}").contains("wrong-password-xyz"));
}

async fn error_for(response: ResponseTemplate) -> KeystoneError {
    let server = MockServer::start().await;
    Mock::given(method("POST")).and(path("/v3/auth/tokens")).respond_with(response).mount(&server).await;
    session(testing::credentials(&server)).token().await.unwrap_err()
}

#[tokio::test]
async fn keystone_failures_are_classified() {
    for status in [500, 503, 408, 429] {
        let error = error_for(ResponseTemplate::new(status)).await;
        assert!(matches!(error, KeystoneError::Status { .. }) && error.is_transient(), "{status}: {error:?}");
    }
    let error = error_for(ResponseTemplate::new(403)).await;
    assert!(matches!(error, KeystoneError::Refused { status: 403, .. }) && !error.is_transient());
    let error = error_for(ResponseTemplate::new(404)).await;
    assert!(matches!(error, KeystoneError::Status { status: 404, .. }) && !error.is_transient());
    let error = error_for(ResponseTemplate::new(201).set_body_json(json!({"token": {}}))).await;
    assert!(error.to_string().contains("no X-Subject-Token"), "{error}");
    let no_expiry =
        ResponseTemplate::new(201).insert_header("x-subject-token", TOKEN).set_body_json(json!({"token": {}}));
    let error = error_for(no_expiry).await;
    assert!(matches!(error, KeystoneError::BadResponse { .. }) && !error.is_transient(), "{error:?}");
    let bad_time = ResponseTemplate::new(201)
        .insert_header("x-subject-token", TOKEN)
        .set_body_json(json!({"token": {"expires_at": "tomorrow", "catalog": []}}));
    assert!(error_for(bad_time).await.to_string().contains("ISO 8601"));
    let huge = ResponseTemplate::new(201)
        .insert_header("x-subject-token", TOKEN)
        .set_body_string("x".repeat(MAX_TOKEN_RESPONSE_BYTES + 1));
    assert!(matches!(error_for(huge).await, KeystoneError::TooLarge { .. }));
}

#[tokio::test]
async fn keystone_down_is_transient_and_names_no_secret() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    let credentials = Credentials {
        auth_url: format!("http://127.0.0.1:{port}/v3"),
        user_id: "u".into(),
        password: Secret::new(PASSWORD.into()),
        project_id: "p".into(),
    };
    let error = session(credentials).token().await.unwrap_err();
    assert!(matches!(error, KeystoneError::Request { .. }) && error.is_transient(), "{error:?}");
    assert!(!crate::error_chain(&error).contains(PASSWORD));
}

#[tokio::test]
async fn endpoints_are_the_public_ones_filtered_by_region() {
    let server = MockServer::start().await;
    let catalog = json!([
        {"type": "orchestration", "endpoints": [
            {"interface": "admin", "region_id": "One", "url": "http://admin/"},
            {"interface": "public", "region_id": "One", "region": "One", "url": "http://one/v1/p"},
            {"interface": "public", "region": "Two", "url": "http://two/v1/p"},
        ]},
        {"type": "identity", "endpoints": [{"interface": "public", "url": "http://k/"}]},
    ]);
    Mock::given(method("POST"))
        .and(header("content-type", "application/json"))
        .respond_with(testing::token_response(TOKEN, Duration::from_secs(3600), &catalog))
        .mount(&server)
        .await;
    let token = session(testing::credentials(&server)).token().await.unwrap();
    assert_eq!(token.endpoint("orchestration", None).unwrap(), "http://one/v1/p");
    assert_eq!(token.endpoint("orchestration", Some("Two")).unwrap(), "http://two/v1/p");
    let error = token.endpoint("orchestration", Some("Three")).unwrap_err();
    assert_eq!(
        error.to_string(),
        "the keystone catalog has no public endpoint for service type orchestration in region Three"
    );
    let error = token.endpoint("messaging", None).unwrap_err();
    assert_eq!(error.to_string(), "the keystone catalog has no public endpoint for service type messaging");
    assert!(!error.is_transient());
}
