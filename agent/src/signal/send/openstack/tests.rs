//! Tests of HEAT_SIGNAL and ZAQAR_SIGNAL against wiremock fakes on 127.0.0.1: a Keystone
//! (`keystone::testing`), heat-api's resource-signal API as heat-config-notify's heatclient calls
//! it, and Zaqar's v2 message post (built from Zaqar's API reference: Zaqar cannot run here).

use std::time::Duration;

use anneal_protocol::Deployment;
use serde_json::{Value, json};
use wiremock::matchers::{header, method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

use super::*;
use crate::journal::Entry;
use crate::keystone::testing::{self, PASSWORD, PROJECT_ID, TOKEN, USER_ID};
use crate::signal::outbox::send_entry;

const STACK: &str = "stack-name/5d7c8a2e-1111-2222-3333-444455556666";
const SIGNAL_PATH: &str =
    "/v1/a1b2c3d4e5f6/stacks/stack-name/5d7c8a2e-1111-2222-3333-444455556666/resources/dep_1/signal";

fn sender() -> SignalSender {
    SignalSender::with_timeouts(Duration::from_secs(2), Duration::from_secs(5))
}

fn keystone_inputs(keystone_url: &str) -> Vec<Value> {
    vec![
        json!({"name": "deploy_auth_url", "value": format!("{keystone_url}/v3")}),
        json!({"name": "deploy_user_id", "value": USER_ID}),
        json!({"name": "deploy_password", "value": PASSWORD}),
        json!({"name": "deploy_project_id", "value": PROJECT_ID}),
        json!({"name": "deploy_region_name", "value": "RegionOne"}),
    ]
}

fn entry(inputs: Vec<Value>) -> Entry {
    let deployment: Deployment = serde_json::from_value(
        json!({"id": "dep-1", "group": "script", "config": "", "inputs": inputs, "outputs": [{"name": "out"}]}),
    )
    .unwrap();
    let mut entry = Entry::seen(&deployment, 0);
    entry.started(1).unwrap();
    entry.finished(HookResult::from_process("done", "", 0), 2).unwrap();
    entry
}

fn heat_entry(keystone: &MockServer) -> Entry {
    let mut inputs = keystone_inputs(&keystone.uri());
    inputs.push(json!({"name": "deploy_stack_id", "value": STACK}));
    inputs.push(json!({"name": "deploy_resource_name", "value": "dep_1"}));
    entry(inputs)
}

fn zaqar_entry(keystone: &MockServer) -> Entry {
    let mut inputs = keystone_inputs(&keystone.uri());
    inputs.push(json!({"name": "deploy_queue_id", "value": "signal-queue"}));
    entry(inputs)
}

/// A Keystone whose catalog has orchestration (`/v1/{project}`) and messaging on `service`.
async fn keystone_for(service: &MockServer) -> MockServer {
    let keystone = MockServer::start().await;
    let orchestration = format!("{}/v1/{PROJECT_ID}", service.uri());
    let catalog = testing::catalog(&[("orchestration", &orchestration), ("messaging", &service.uri())]);
    testing::mount(&keystone, TOKEN, &catalog).await;
    keystone
}

fn signal_of(entry: &Entry) -> String {
    signal_body(entry.result.as_ref().unwrap(), MAX_SIGNAL_CHARS)
}

#[tokio::test]
async fn heat_signal_posts_the_signal_body_with_a_token() {
    let heat = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path(SIGNAL_PATH))
        .and(header("x-auth-token", TOKEN))
        .and(header("content-type", "application/json"))
        .respond_with(ResponseTemplate::new(200))
        .expect(3)
        .mount(&heat)
        .await;
    let keystone = keystone_for(&heat).await;
    let sender = sender();
    let entry = heat_entry(&keystone);
    for _ in 0..3 {
        assert_eq!(send_entry(&sender.clone(), &entry).await, DeliveryOutcome::Delivered { status: 200 });
    }
    assert_eq!(testing::auth_count(&keystone).await, 1, "a burst of signals authenticates once");
    assert_eq!(sender.sessions.len(), 1);
    let request = &heat.received_requests().await.unwrap()[0];
    assert_eq!(String::from_utf8(request.body.clone()).unwrap(), signal_of(&entry));
    let body: Value = serde_json::from_slice(&request.body).unwrap();
    assert_eq!(body["deploy_stdout"], "done");
    assert_eq!(body["deploy_status_code"], 0);
}

#[tokio::test]
async fn zaqar_signal_posts_one_message_with_the_signal_as_body() {
    let zaqar = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v2/queues/signal-queue/messages"))
        .and(header("x-auth-token", TOKEN))
        .and(header("x-project-id", PROJECT_ID))
        .respond_with(
            ResponseTemplate::new(201).set_body_json(json!({"resources": ["/v2/queues/signal-queue/messages/5a1"]})),
        )
        .expect(1)
        .mount(&zaqar)
        .await;
    let keystone = keystone_for(&zaqar).await;
    let entry = zaqar_entry(&keystone);
    assert_eq!(send_entry(&sender(), &entry).await, DeliveryOutcome::Delivered { status: 201 });
    let request = &zaqar.received_requests().await.unwrap()[0];
    let body: Value = serde_json::from_slice(&request.body).unwrap();
    let signal: Value = serde_json::from_str(&signal_of(&entry)).unwrap();
    assert_eq!(body, json!({"messages": [{"body": signal, "ttl": 600}]}));
    let client_id = request.headers["client-id"].to_str().unwrap();
    assert_eq!(client_id.len(), 36, "a UUID: {client_id}");
}

#[tokio::test]
async fn a_refused_token_is_renewed_once_then_the_refusal_is_permanent() {
    let heat = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(401))
        .up_to_n_times(1)
        .with_priority(1)
        .mount(&heat)
        .await;
    Mock::given(method("POST")).respond_with(ResponseTemplate::new(200)).mount(&heat).await;
    let keystone = keystone_for(&heat).await;
    let sender = sender();
    assert_eq!(send_entry(&sender, &heat_entry(&keystone)).await, DeliveryOutcome::Delivered { status: 200 });
    assert_eq!(testing::auth_count(&keystone).await, 2, "the expired token was replaced");

    let refusing = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(401).set_body_string(format!("token {TOKEN} is not valid")))
        .expect(2)
        .mount(&refusing)
        .await;
    let keystone = keystone_for(&refusing).await;
    let DeliveryOutcome::Permanent { error } = send_entry(&sender, &heat_entry(&keystone)).await else { panic!() };
    assert!(error.starts_with("HTTP 401 Unauthorized"), "{error}");
    assert!(!error.contains(TOKEN), "the echoed token is masked: {error}");
}

#[tokio::test]
async fn keystone_outages_are_transient_and_refused_credentials_permanent() {
    let heat = MockServer::start().await;
    Mock::given(method("POST")).and(path(SIGNAL_PATH)).respond_with(ResponseTemplate::new(200)).mount(&heat).await;
    // Keystone down: nothing listens on its port.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    let mut inputs = keystone_inputs(&format!("http://127.0.0.1:{port}"));
    inputs.push(json!({"name": "deploy_stack_id", "value": STACK}));
    inputs.push(json!({"name": "deploy_resource_name", "value": "dep_1"}));
    let sender = sender();
    let outcome = send_entry(&sender, &entry(inputs)).await;
    let DeliveryOutcome::Transient { error } = outcome else { panic!("{outcome:?}") };
    assert!(error.starts_with("HEAT_SIGNAL: cannot reach keystone at"), "{error}");

    // Keystone failing, then back: transient, then delivered.
    let keystone = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(503))
        .up_to_n_times(1)
        .with_priority(1)
        .mount(&keystone)
        .await;
    let catalog = testing::catalog(&[("orchestration", &format!("{}/v1/{PROJECT_ID}", heat.uri()))]);
    testing::mount(&keystone, TOKEN, &catalog).await;
    let entry = heat_entry(&keystone);
    assert!(matches!(send_entry(&sender, &entry).await, DeliveryOutcome::Transient { .. }));
    assert_eq!(send_entry(&sender, &entry).await, DeliveryOutcome::Delivered { status: 200 });

    // Credentials refused: permanent, named clearly, the password nowhere.
    let mut inputs = keystone_inputs(&keystone.uri());
    inputs[2] = json!({"name": "deploy_password", "value": "wrong-password-123"});
    inputs.push(json!({"name": "deploy_stack_id", "value": STACK}));
    inputs.push(json!({"name": "deploy_resource_name", "value": "dep_1"}));
    let DeliveryOutcome::Permanent { error } = send_entry(&sender, &self::entry(inputs)).await else { panic!() };
    assert!(error.starts_with("HEAT_SIGNAL: keystone at http://127.0.0.1:"), "{error}");
    assert!(error.contains(&format!("refused the credentials of user {USER_ID}")), "{error}");
    assert!(!error.contains("wrong-password-123") && !error.contains(PASSWORD), "{error}");
}

#[tokio::test]
async fn service_answers_are_classified_as_for_http_signals() {
    for (status, transient) in [(500, true), (503, true), (429, true), (400, false), (404, false)] {
        let heat = MockServer::start().await;
        let body = format!("{{\"error\": \"{PASSWORD}\"}}");
        Mock::given(method("POST"))
            .respond_with(ResponseTemplate::new(status).set_body_string(body))
            .mount(&heat)
            .await;
        let keystone = keystone_for(&heat).await;
        let outcome = send_entry(&sender(), &heat_entry(&keystone)).await;
        let error = match &outcome {
            DeliveryOutcome::Transient { error } if transient => error,
            DeliveryOutcome::Permanent { error } if !transient => error,
            other => panic!("{status}: {other:?}"),
        };
        assert!(error.contains(&status.to_string()) && !error.contains(PASSWORD), "{error}");
    }
}

#[tokio::test]
async fn a_catalog_without_the_service_is_permanent() {
    let keystone = MockServer::start().await;
    testing::mount(&keystone, TOKEN, &testing::catalog(&[("identity", "http://127.0.0.1:1/")])).await;
    let DeliveryOutcome::Permanent { error } = send_entry(&sender(), &zaqar_entry(&keystone)).await else { panic!() };
    assert_eq!(
        error,
        "ZAQAR_SIGNAL: the keystone catalog has no public endpoint for service type messaging in region RegionOne"
    );
}

#[tokio::test]
async fn sessions_are_per_credentials_and_bounded() {
    let heat = MockServer::start().await;
    Mock::given(method("POST")).respond_with(ResponseTemplate::new(200)).mount(&heat).await;
    let keystone = keystone_for(&heat).await;
    let sender = sender();
    let client = sender.client().unwrap().clone();
    let credentials = |user: usize| Credentials {
        auth_url: keystone.uri(),
        user_id: format!("user-{user}"),
        password: Secret::new(PASSWORD.into()),
        project_id: PROJECT_ID.into(),
    };
    let first = sender.sessions.get(credentials(0), &client, sender.request).unwrap();
    assert!(Arc::ptr_eq(&first, &sender.sessions.get(credentials(0), &client, sender.request).unwrap()));
    let mut changed = credentials(0);
    changed.password = Secret::new("rotated".into());
    let replaced = sender.sessions.get(changed, &client, sender.request).unwrap();
    assert!(!Arc::ptr_eq(&first, &replaced));
    assert_eq!(sender.sessions.len(), 1, "a new password replaces the user's session");
    for user in 1..40 {
        sender.sessions.get(credentials(user), &client, sender.request).unwrap();
    }
    assert_eq!(sender.sessions.len(), MAX_SESSIONS);
}
