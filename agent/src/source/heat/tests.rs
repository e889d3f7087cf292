//! Tests of the heat source against wiremock Keystone and heat-api fakes on 127.0.0.1, speaking
//! the HTTP os-collect-config's heat collector speaks with a real Heat.

use std::time::Duration;

use serde_json::{Value, json};
use wiremock::matchers::{header, method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

use super::*;
use crate::config::{ClientConfig, KeystoneConfig};
use crate::keystone::testing::{self, PASSWORD, PROJECT_ID, TOKEN};
use crate::secret::Secret;

const STACK_ID: &str = "mystack/0a1b2c3d-aaaa-bbbb-cccc-1234567890ab";
const METADATA_PATH: &str =
    "/v1/a1b2c3d4e5f6/stacks/mystack/0a1b2c3d-aaaa-bbbb-cccc-1234567890ab/resources/server/metadata";

fn config(keystone: &MockServer) -> HeatSourceConfig {
    HeatSourceConfig {
        keystone: KeystoneConfig {
            auth_url: format!("{}/v3", keystone.uri()),
            user_id: testing::USER_ID.into(),
            password: Secret::new(PASSWORD.into()),
            project_id: PROJECT_ID.into(),
            region_name: None,
        },
        stack_id: STACK_ID.into(),
        resource_name: "server".into(),
        client: ClientConfig {
            ca_file: None,
            connect_timeout: Duration::from_secs(2),
            read_timeout: Duration::from_secs(5),
        },
    }
}

/// A Keystone whose catalog points orchestration at `heat` (`/v1/{project}` as Heat registers it).
async fn keystone_for(heat: &MockServer) -> MockServer {
    let keystone = MockServer::start().await;
    let catalog = testing::catalog(&[("orchestration", &format!("{}/v1/{PROJECT_ID}", heat.uri()))]);
    testing::mount(&keystone, TOKEN, &catalog).await;
    keystone
}

fn source(keystone: &MockServer) -> HeatSource {
    HeatSource::new("source[0] heat".into(), &config(keystone), &TrustRoots::default()).unwrap()
}

async fn fetch(source: &mut HeatSource) -> Result<Fetched, SourceError> {
    source.fetch(&CancellationToken::new()).await
}

fn metadata() -> Value {
    json!({"deployments": [{"id": "d1", "group": "script", "config": "echo", "inputs": []}], "os-collect-config": {}})
}

#[tokio::test]
async fn reads_the_resource_metadata_with_the_token() {
    let heat = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path(METADATA_PATH))
        .and(header("x-auth-token", TOKEN))
        .and(header("accept", "application/json"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({"metadata": metadata()})))
        .expect(2)
        .mount(&heat)
        .await;
    let keystone = keystone_for(&heat).await;
    let mut source = source(&keystone);
    assert_eq!(fetch(&mut source).await.unwrap(), Fetched::Document(metadata()));
    assert_eq!(fetch(&mut source).await.unwrap(), Fetched::Document(metadata()));
    assert_eq!(testing::auth_count(&keystone).await, 1, "the token is cached between polls");
    let printed = format!("{source:?}");
    assert!(!printed.contains(PASSWORD) && !printed.contains(TOKEN), "{printed}");
}

#[tokio::test]
async fn a_refused_token_is_renewed_once() {
    let heat = MockServer::start().await;
    Mock::given(method("GET"))
        .respond_with(ResponseTemplate::new(401))
        .up_to_n_times(1)
        .with_priority(1)
        .mount(&heat)
        .await;
    Mock::given(method("GET"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({"metadata": {}})))
        .mount(&heat)
        .await;
    let keystone = keystone_for(&heat).await;
    let mut source = source(&keystone);
    assert_eq!(fetch(&mut source).await.unwrap(), Fetched::Document(json!({})));
    assert_eq!(testing::auth_count(&keystone).await, 2, "the 401 made it authenticate again");
}

#[tokio::test]
async fn a_token_refused_twice_is_an_error_not_a_loop() {
    let heat = MockServer::start().await;
    Mock::given(method("GET")).respond_with(ResponseTemplate::new(401)).expect(2).mount(&heat).await;
    let keystone = keystone_for(&heat).await;
    let error = fetch(&mut source(&keystone)).await.unwrap_err();
    assert!(matches!(error, SourceError::Status { status: 401, .. }) && !error.is_transient(), "{error:?}");
}

#[tokio::test]
async fn heat_failures_are_classified() {
    for (status, transient) in [(500, true), (503, true), (404, true), (403, false), (302, false)] {
        let heat = MockServer::start().await;
        Mock::given(method("GET")).respond_with(ResponseTemplate::new(status)).mount(&heat).await;
        let keystone = keystone_for(&heat).await;
        let error = fetch(&mut source(&keystone)).await.unwrap_err();
        assert_eq!(error.is_transient(), transient, "{status}: {error}");
        assert!(error.to_string().contains("/resources/server/metadata"), "{error}");
    }
}

#[tokio::test]
async fn keystone_trouble_is_reported_through_the_source() {
    let heat = MockServer::start().await;
    let keystone = MockServer::start().await;
    Mock::given(method("POST")).respond_with(ResponseTemplate::new(503)).mount(&keystone).await;
    let error = fetch(&mut source(&keystone)).await.unwrap_err();
    assert!(matches!(error, SourceError::Keystone { .. }) && error.is_transient(), "{error:?}");

    let refusing = MockServer::start().await;
    testing::mount(&refusing, TOKEN, &json!([])).await;
    let mut wrong_config = config(&refusing);
    wrong_config.keystone.password = Secret::new("not-the-password".into());
    let mut wrong = HeatSource::new("source[0] heat".into(), &wrong_config, &TrustRoots::default()).unwrap();
    let error = fetch(&mut wrong).await.unwrap_err();
    let text = crate::error_chain(&error);
    assert!(!error.is_transient(), "refused credentials are permanent");
    assert!(text.starts_with("source[0] heat: no token or endpoint from keystone: keystone at"), "{text}");
    assert!(text.contains("refused the credentials") && !text.contains("not-the-password"), "{text}");

    let no_heat = keystone_for(&heat).await;
    let mut elsewhere = config(&no_heat);
    elsewhere.keystone.region_name = Some("Elsewhere".into());
    let error = fetch(&mut HeatSource::new("h".into(), &elsewhere, &TrustRoots::default()).unwrap()).await.unwrap_err();
    assert!(crate::error_chain(&error).contains("service type orchestration in region Elsewhere"), "{error}");
    assert!(heat.received_requests().await.unwrap().is_empty());
}

#[tokio::test]
async fn the_answer_must_wrap_an_object_and_fit_the_limit() {
    let heat = MockServer::start().await;
    Mock::given(method("GET"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({"nometadata": 1})))
        .mount(&heat)
        .await;
    let keystone = keystone_for(&heat).await;
    let error = fetch(&mut source(&keystone)).await.unwrap_err();
    assert!(matches!(error, SourceError::NotObject { found: "null", .. }), "{error:?}");

    let big = MockServer::start().await;
    let body = json!({"metadata": {"x": "y".repeat(2000)}});
    Mock::given(method("GET")).respond_with(ResponseTemplate::new(200).set_body_json(body)).mount(&big).await;
    let keystone = keystone_for(&big).await;
    let mut source = source(&keystone);
    source.set_body_limit(1000);
    assert!(matches!(fetch(&mut source).await.unwrap_err(), SourceError::TooLarge { .. }));
}

#[test]
fn urls_are_built_as_heatclient_builds_them() {
    let url = metadata_url("http://h:8004/v1/p/", "st/id", "my server/x").unwrap();
    assert_eq!(url.as_str(), "http://h:8004/v1/p/stacks/st/id/resources/my%20server%2Fx/metadata");
    let url = resource_url("https://h/v1/p", "id-only", "dep", "signal").unwrap();
    assert_eq!(url.as_str(), "https://h/v1/p/stacks/id-only/resources/dep/signal");
    assert!(metadata_url("file:///etc", "s", "r").is_none());
    assert!(metadata_url("http://h/v1/p", "s/..", "r").is_none());
    assert!(metadata_url("http://h/v1/p", "s", "..").is_none());
}

#[tokio::test]
async fn shutdown_cancels_a_slow_fetch() {
    let heat = MockServer::start().await;
    Mock::given(method("GET"))
        .respond_with(ResponseTemplate::new(200).set_delay(Duration::from_secs(30)))
        .mount(&heat)
        .await;
    let keystone = keystone_for(&heat).await;
    let mut source = source(&keystone);
    let shutdown = CancellationToken::new();
    let cancel = shutdown.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(200)).await;
        cancel.cancel();
    });
    assert_eq!(source.fetch(&shutdown).await.unwrap(), Fetched::Cancelled);
}
