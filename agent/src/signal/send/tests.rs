//! Tests of signal delivery against wiremock servers on 127.0.0.1.

use anneal_protocol::Deployment;
use serde_json::{Value, json};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

use super::*;
use crate::journal::Entry;
use crate::signal::outbox::send_entry;

fn entry_for(inputs: Value, result: HookResult) -> Entry {
    let deployment: Deployment =
        serde_json::from_value(json!({"id": "dep-1", "group": "script", "config": "", "inputs": inputs})).unwrap();
    let mut entry = Entry::seen(&deployment, 0);
    entry.started(1).unwrap();
    entry.finished(result, 2).unwrap();
    entry
}

fn http_entry(url: &str, verb: Option<&str>) -> Entry {
    let mut inputs = vec![json!({"name": "deploy_signal_id", "value": url})];
    if let Some(verb) = verb {
        inputs.push(json!({"name": "deploy_signal_verb", "value": verb}));
    }
    entry_for(Value::Array(inputs), HookResult::from_process("h\u{e9}llo", "warn", 0))
}

fn sender() -> SignalSender {
    SignalSender::with_timeouts(Duration::from_secs(2), Duration::from_secs(5))
}

async fn outcome_for_status(status: u16, body: &str) -> DeliveryOutcome {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(status).set_body_string(body))
        .expect(1)
        .mount(&server)
        .await;
    send_entry(&sender(), &http_entry(&format!("{}/signal", server.uri()), None)).await
}

#[tokio::test]
async fn posts_the_exact_body_with_headers_to_the_unchanged_url() {
    let server = MockServer::start().await;
    Mock::given(method("POST")).respond_with(ResponseTemplate::new(200)).expect(1).mount(&server).await;
    let path_and_query = "/v1/signal/arn%3Aopenstack%3Aheat?Timestamp=2024-01-01T00%3A00%3A00Z&Signature=a%2Fb%3D";
    let entry = http_entry(&format!("{}{path_and_query}", server.uri()), None);
    assert_eq!(send_entry(&sender(), &entry).await, DeliveryOutcome::Delivered { status: 200 });

    let requests = server.received_requests().await.unwrap();
    let request = &requests[0];
    let received = format!("{}?{}", request.url.path(), request.url.query().unwrap());
    assert_eq!(received, path_and_query, "path and query reach the server byte for byte");
    let body = signal_body(entry.result.as_ref().unwrap(), MAX_SIGNAL_CHARS);
    assert_eq!(String::from_utf8(request.body.clone()).unwrap(), body);
    assert!(body.starts_with('{') && body.contains("h\\u00e9llo"), "{body}");
    assert_eq!(request.headers["content-type"], "application/json");
    assert_eq!(request.headers[SIGNAL_ID_HEADER].to_str().unwrap(), signal_id("dep-1", &body));
    assert_eq!(entry.signal.as_ref().unwrap().signal_id.as_deref(), Some(signal_id("dep-1", &body).as_str()));
}

#[tokio::test]
async fn put_verb_is_honoured() {
    let server = MockServer::start().await;
    Mock::given(method("PUT"))
        .and(path("/tempurl"))
        .respond_with(ResponseTemplate::new(201))
        .expect(1)
        .mount(&server)
        .await;
    let entry = http_entry(&format!("{}/tempurl?temp_url_sig=x", server.uri()), Some("PUT"));
    assert_eq!(send_entry(&sender(), &entry).await, DeliveryOutcome::Delivered { status: 201 });
}

#[tokio::test]
async fn status_codes_are_classified() {
    for status in [200, 204] {
        assert_eq!(outcome_for_status(status, "").await, DeliveryOutcome::Delivered { status });
    }
    for status in [408, 429, 500, 502, 503] {
        let outcome = outcome_for_status(status, "try later").await;
        let DeliveryOutcome::Transient { error } = outcome else { panic!("{status}: {outcome:?}") };
        assert!(error.contains(&status.to_string()) && error.ends_with("try later"), "{error}");
    }
    for status in [400, 401, 403, 404, 409] {
        let outcome = outcome_for_status(status, "").await;
        assert!(matches!(outcome, DeliveryOutcome::Permanent { .. }), "{status}: {outcome:?}");
    }
}

#[tokio::test]
async fn permanent_error_keeps_a_short_body_excerpt() {
    let body = format!("Signature expired {}", "x".repeat(5_000));
    let DeliveryOutcome::Permanent { error } = outcome_for_status(403, &body).await else { panic!() };
    assert!(error.starts_with("HTTP 403 Forbidden: Signature expired"), "{error}");
    assert_eq!(error.chars().count(), "HTTP 403 Forbidden: ".len() + BODY_EXCERPT_CHARS);
}

#[tokio::test]
async fn redirects_are_not_followed() {
    let server = MockServer::start().await;
    let elsewhere = format!("{}/elsewhere", server.uri());
    Mock::given(path("/signal"))
        .respond_with(ResponseTemplate::new(302).insert_header("Location", elsewhere.as_str()))
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(path("/elsewhere")).respond_with(ResponseTemplate::new(200)).expect(0).mount(&server).await;
    let outcome = send_entry(&sender(), &http_entry(&format!("{}/signal", server.uri()), None)).await;
    assert!(matches!(&outcome, DeliveryOutcome::Permanent { error } if error.contains("302")), "{outcome:?}");
}

#[tokio::test]
async fn connection_refused_is_transient_and_hides_the_url() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    let outcome =
        send_entry(&sender(), &http_entry(&format!("http://127.0.0.1:{port}/s?Signature=secret"), None)).await;
    let DeliveryOutcome::Transient { error } = outcome else { panic!("{outcome:?}") };
    assert!(!error.contains("secret") && !error.contains("127.0.0.1"), "{error}");
}

#[tokio::test]
async fn timeout_is_transient() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_delay(Duration::from_secs(3)))
        .mount(&server)
        .await;
    let quick = SignalSender::with_timeouts(Duration::from_secs(1), Duration::from_millis(200));
    let outcome = send_entry(&quick, &http_entry(&format!("{}/s", server.uri()), None)).await;
    assert!(matches!(outcome, DeliveryOutcome::Transient { .. }), "{outcome:?}");
}

#[tokio::test]
async fn unsupported_urls_and_transports_are_permanent() {
    let sender = sender();
    let outcome = send_entry(&sender, &http_entry("mock://signal/1?secret=1", None)).await;
    let DeliveryOutcome::Permanent { error } = outcome else { panic!("{outcome:?}") };
    assert!(error.contains("`mock`") && !error.contains("secret"), "{error}");
    let outcome = send_entry(&sender, &http_entry("not a url", None)).await;
    assert!(matches!(outcome, DeliveryOutcome::Permanent { .. }));

    // HEAT_SIGNAL and ZAQAR_SIGNAL without their credentials: refused before anything is sent.
    let zaqar = entry_for(json!([{"name": "deploy_queue_id", "value": "q"}]), HookResult::default());
    let DeliveryOutcome::Permanent { error } = send_entry(&sender, &zaqar).await else { panic!() };
    assert_eq!(error, "ZAQAR_SIGNAL needs the deploy_auth_url input, which is missing or empty");
    let heat = entry_for(json!([{"name": "deploy_auth_url", "value": "http://k"}]), HookResult::default());
    let DeliveryOutcome::Permanent { error } = send_entry(&sender, &heat).await else { panic!() };
    assert_eq!(error, "HEAT_SIGNAL needs the deploy_user_id input, which is missing or empty");

    let none = entry_for(json!([]), HookResult::default());
    assert_eq!(send_entry(&sender, &none).await, DeliveryOutcome::Delivered { status: 0 });
    let mut unfinished = http_entry("http://127.0.0.1:1/", None);
    unfinished.result = None;
    assert!(matches!(send_entry(&sender, &unfinished).await, DeliveryOutcome::Permanent { .. }));
    assert!(sender.client.get().is_none(), "nothing was sent over HTTP, so no client was built");
}

#[tokio::test]
async fn the_client_is_built_on_the_first_http_signal_and_shared_by_clones() {
    let server = MockServer::start().await;
    Mock::given(method("POST")).respond_with(ResponseTemplate::new(200)).expect(2).mount(&server).await;
    let sender = sender();
    let clone = sender.clone();
    assert!(sender.client.get().is_none());
    let entry = http_entry(&format!("{}/signal", server.uri()), None);
    assert_eq!(send_entry(&clone, &entry).await, DeliveryOutcome::Delivered { status: 200 });
    assert!(sender.client.get().is_some(), "a clone's first signal builds the one shared client");
    sender.warm_up().await.unwrap();
    assert_eq!(send_entry(&sender, &entry).await, DeliveryOutcome::Delivered { status: 200 });
}

#[test]
fn urls_are_checked_without_changing_them() {
    let url = "http://127.0.0.1:8000/v1/signal/x?a=1&b=%2F";
    assert_eq!(check_url(url).unwrap().as_str(), url);
    assert!(check_url("ftp://127.0.0.1/x").unwrap_err().contains("`ftp`"));
}
