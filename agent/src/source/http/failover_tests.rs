//! Tests of an http source with several URLs against wiremock servers and closed ports on
//! 127.0.0.1: fail-over on connection errors and 5xx, none on 4xx, the retry of URL 0 that falls
//! back within the same fetch, the return to URL 0, and validators kept across replicas.

use serde_json::json;
use wiremock::matchers::{header, method};
use wiremock::{Mock, MockServer, ResponseTemplate};

use super::*;

fn source(urls: &[String]) -> HttpSource {
    let config = HttpSourceConfig {
        urls: urls.to_vec(),
        token_file: None,
        ca_file: None,
        connect_timeout: Duration::from_secs(2),
        read_timeout: Duration::from_secs(5),
        long_poll: Duration::from_secs(60),
        self_configure: false,
    };
    HttpSource::new("source[0] http".to_string(), &config, &TrustRoots::default()).unwrap()
}

async fn fetch(source: &mut HttpSource) -> Result<Fetched, SourceError> {
    source.fetch(false, &CancellationToken::new()).await
}

/// A URL on a loopback port nothing listens on.
fn closed_url() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    format!("http://127.0.0.1:{port}/m")
}

async fn requests(server: &MockServer) -> usize {
    server.received_requests().await.unwrap().len()
}

/// 200 with the document and ETag `"v1"`, 304 to a request that sends it back.
async fn serve_versioned(server: &MockServer) {
    Mock::given(method("GET"))
        .and(header("if-none-match", "\"v1\""))
        .respond_with(ResponseTemplate::new(304))
        .with_priority(1)
        .mount(server)
        .await;
    let document = ResponseTemplate::new(200).set_body_json(json!({"deployments": []})).insert_header("etag", "\"v1\"");
    Mock::given(method("GET")).respond_with(document).with_priority(2).mount(server).await;
}

#[tokio::test]
async fn a_5xx_moves_to_the_next_url_and_url_0_is_retried_later() {
    let (first, second) = (MockServer::start().await, MockServer::start().await);
    Mock::given(method("GET")).respond_with(ResponseTemplate::new(503)).mount(&first).await;
    serve_versioned(&second).await;
    let mut source = source(&[format!("{}/m", first.uri()), format!("{}/m", second.uri())]);
    let error = fetch(&mut source).await.unwrap_err();
    assert!(matches!(error, SourceError::Status { status: 503, .. }), "{error:?}");
    assert_eq!(source.rotation.active(), 1, "the next attempt uses the next URL");
    assert_eq!(fetch(&mut source).await.unwrap(), Fetched::Document(json!({"deployments": []})));
    assert_eq!(fetch(&mut source).await.unwrap(), Fetched::Unchanged, "the validators hold on the replica");
    assert_eq!(requests(&first).await, 1, "URL 0 is not asked again before its retry is due");

    // URL 0 recovers, with the same document version: a 304, and the source is back on it.
    first.reset().await;
    serve_versioned(&first).await;
    source.make_primary_retry_due();
    assert_eq!(fetch(&mut source).await.unwrap(), Fetched::Unchanged);
    assert_eq!(source.rotation.active(), 0);
    assert_eq!(requests(&second).await, 2, "URL 0 answered: URL 1 was not asked");
    fetch(&mut source).await.unwrap();
    assert_eq!((requests(&first).await, requests(&second).await), (2, 2));
}

#[tokio::test]
async fn a_dead_url_0_falls_back_within_the_same_fetch() {
    let dead = closed_url();
    let (second, third) = (MockServer::start().await, MockServer::start().await);
    serve_versioned(&second).await;
    serve_versioned(&third).await;
    let mut source = source(&[dead, format!("{}/m?sig=SECRET", second.uri()), format!("{}/m", third.uri())]);
    let error = fetch(&mut source).await.unwrap_err();
    assert!(matches!(error, SourceError::Request { .. }), "{error:?}");
    fetch(&mut source).await.unwrap();
    source.make_primary_retry_due();
    assert_eq!(fetch(&mut source).await.unwrap(), Fetched::Unchanged, "URL 0 failed again; URL 1 answered");
    assert_eq!(source.rotation.active(), 1, "a failed retry of URL 0 is no fail-over");
    assert_eq!(requests(&second).await, 2);
    assert_eq!(requests(&third).await, 0, "the list is walked only on failures of the URL in use");
    assert!(!format!("{source:?}").contains("SECRET"));
}

#[tokio::test]
async fn the_last_url_failing_cycles_back_to_the_first() {
    let first = MockServer::start().await;
    serve_versioned(&first).await;
    let mut source = source(&[format!("{}/m", first.uri()), closed_url()]);
    source.rotation.record(0, rotation::Answer::Failed, Instant::now());
    assert!(fetch(&mut source).await.is_err(), "URL 1 is down too");
    assert_eq!(source.rotation.active(), 0, "after the last URL comes the first");
    fetch(&mut source).await.unwrap();
}

#[tokio::test]
async fn client_errors_are_answers_not_failures() {
    let (first, second) = (MockServer::start().await, MockServer::start().await);
    serve_versioned(&second).await;
    for status in [404, 401, 403, 400] {
        first.reset().await;
        Mock::given(method("GET")).respond_with(ResponseTemplate::new(status)).mount(&first).await;
        let mut source = source(&[format!("{}/m", first.uri()), format!("{}/m", second.uri())]);
        assert!(fetch(&mut source).await.is_err());
        assert!(fetch(&mut source).await.is_err());
        assert_eq!(source.rotation.active(), 0, "HTTP {status} keeps URL 0");
    }
    assert_eq!(requests(&second).await, 0);
}

#[test]
fn is_replica_failure_is_connection_timeout_or_5xx() {
    let status = |status| SourceError::Status { source_name: "s".into(), url: "u".into(), status };
    assert!(is_replica_failure(&status(500)) && is_replica_failure(&status(502)) && is_replica_failure(&status(504)));
    assert!(!is_replica_failure(&status(429)) && !is_replica_failure(&status(401)));
    assert!(!is_replica_failure(&SourceError::NotFound { source_name: "s".into(), url: "u".into() }));
    let too_large = SourceError::TooLarge { source_name: "s".into(), what: "w".into(), limit: 1 };
    assert!(!is_replica_failure(&too_large));
}

#[test]
fn a_single_url_keeps_the_identity_it_always_had() {
    let one = source(&["http://127.0.0.1:9/m?sig=s".to_string()]);
    assert_eq!(one.described(), "http http://127.0.0.1:9/m?sig=s");
    let two = source(&["http://127.0.0.1:9/m".to_string(), "http://127.0.0.1:10/m".to_string()]);
    assert_eq!(two.described(), "http http://127.0.0.1:9/m\nhttp://127.0.0.1:10/m");
}
