use std::time::Instant;

use serde_json::json;
use wiremock::matchers::{header, method, path, query_param, query_param_is_missing};
use wiremock::{Mock, MockServer, ResponseTemplate};

use super::*;

fn config(url: &str) -> HttpSourceConfig {
    HttpSourceConfig {
        urls: vec![url.to_string()],
        token_file: None,
        ca_file: None,
        connect_timeout: Duration::from_secs(2),
        read_timeout: Duration::from_secs(5),
        long_poll: Duration::from_secs(60),
        self_configure: false,
    }
}

fn source(url: &str) -> HttpSource {
    HttpSource::new("source[0] http".to_string(), &config(url), &TrustRoots::default()).unwrap()
}

async fn fetch(source: &mut HttpSource, wait: bool) -> Result<Fetched, SourceError> {
    source.fetch(wait, &CancellationToken::new()).await
}

async fn serve(server: &MockServer, response: ResponseTemplate) {
    Mock::given(method("GET")).and(path("/m")).respond_with(response).mount(server).await;
}

#[tokio::test]
async fn ok_body_is_the_document_and_validators_are_kept() {
    let server = MockServer::start().await;
    let body = json!({"deployments": [], "anneal": {"version": 3}});
    let response = ResponseTemplate::new(200)
        .set_body_json(&body)
        .insert_header("etag", "\"v3\"")
        .insert_header("last-modified", "Tue, 01 Oct 2024 10:00:00 GMT");
    serve(&server, response).await;
    let mut source = source(&format!("{}/m", server.uri()));
    assert_eq!(fetch(&mut source, false).await.unwrap(), Fetched::Document(body));
    assert_eq!(source.validators().etag.as_deref(), Some("\"v3\""));
    assert_eq!(source.validators().last_modified.as_deref(), Some("Tue, 01 Oct 2024 10:00:00 GMT"));
    assert!(!source.can_long_poll(), "the server did not advertise long-poll");
}

#[tokio::test]
async fn not_modified_after_sending_the_validators() {
    let server = MockServer::start().await;
    // wiremock's `header` matcher splits values at commas, so If-Modified-Since is checked below.
    Mock::given(method("GET"))
        .and(header("if-none-match", "\"v1\""))
        .respond_with(ResponseTemplate::new(304))
        .expect(1)
        .mount(&server)
        .await;
    let first = ResponseTemplate::new(200)
        .set_body_json(json!({"a": 1}))
        .insert_header("etag", "\"v1\"")
        .insert_header("last-modified", "Tue, 01 Oct 2024 10:00:00 GMT");
    Mock::given(method("GET")).respond_with(first).up_to_n_times(1).mount(&server).await;
    let mut source = source(&format!("{}/m", server.uri()));
    assert_eq!(fetch(&mut source, false).await.unwrap(), Fetched::Document(json!({"a": 1})));
    assert_eq!(fetch(&mut source, false).await.unwrap(), Fetched::Unchanged);
    assert_eq!(source.validators().etag.as_deref(), Some("\"v1\""), "validators survive a 304");
    let requests = server.received_requests().await.unwrap();
    assert!(!requests[0].headers.contains_key("if-modified-since"));
    let since = requests[1].headers.get("if-modified-since").unwrap();
    assert_eq!(since.to_str().unwrap(), "Tue, 01 Oct 2024 10:00:00 GMT");
}

#[tokio::test]
async fn restored_validators_are_sent_on_the_first_request() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(header("if-none-match", "\"cached\""))
        .respond_with(ResponseTemplate::new(304))
        .expect(1)
        .mount(&server)
        .await;
    let mut source = source(&format!("{}/m", server.uri()));
    source.restore_validators(Validators { etag: Some("\"cached\"".to_string()), last_modified: None });
    assert_eq!(fetch(&mut source, false).await.unwrap(), Fetched::Unchanged);
}

#[tokio::test]
async fn not_found_is_transient_no_metadata_yet() {
    let server = MockServer::start().await;
    serve(&server, ResponseTemplate::new(404)).await;
    let error = fetch(&mut source(&format!("{}/m", server.uri())), false).await.unwrap_err();
    assert!(matches!(error, SourceError::NotFound { .. }));
    assert!(error.is_transient());
    assert!(error.to_string().contains("no metadata yet"), "{error}");
}

#[tokio::test]
async fn server_errors_are_transient_and_never_show_the_query() {
    let server = MockServer::start().await;
    serve(&server, ResponseTemplate::new(500)).await;
    let error = fetch(&mut source(&format!("{}/m?sig=SECRET", server.uri())), false).await.unwrap_err();
    assert!(matches!(error, SourceError::Status { status: 500, .. }));
    assert!(error.is_transient());
    assert!(!error.to_string().contains("SECRET"), "{error}");
    assert!(error.to_string().contains("HTTP 500"), "{error}");
}

#[tokio::test]
async fn client_errors_are_not_transient() {
    let server = MockServer::start().await;
    serve(&server, ResponseTemplate::new(403)).await;
    let error = fetch(&mut source(&format!("{}/m", server.uri())), false).await.unwrap_err();
    assert!(matches!(error, SourceError::Status { status: 403, .. }));
    assert!(!error.is_transient());
}

#[tokio::test]
async fn invalid_json_is_an_error() {
    let server = MockServer::start().await;
    serve(&server, ResponseTemplate::new(200).set_body_string("{\"deployments\": [")).await;
    let mut source = source(&format!("{}/m", server.uri()));
    let error = fetch(&mut source, false).await.unwrap_err();
    assert!(matches!(error, SourceError::InvalidJson { .. }), "{error:?}");
    assert!(!error.is_transient());
}

#[tokio::test]
async fn non_object_json_is_an_error() {
    let server = MockServer::start().await;
    serve(&server, ResponseTemplate::new(200).set_body_string("[1, 2]").insert_header("etag", "\"x\"")).await;
    let mut source = source(&format!("{}/m", server.uri()));
    let error = fetch(&mut source, false).await.unwrap_err();
    assert!(matches!(error, SourceError::NotObject { found: "array", .. }), "{error:?}");
    assert_eq!(source.validators().etag, None, "validators of a rejected body are not kept");
}

#[tokio::test]
async fn too_large_bodies_are_refused_naming_the_limit() {
    let server = MockServer::start().await;
    let mut body = vec![b' '; MAX_DOCUMENT_BYTES];
    body.extend_from_slice(b"{}");
    serve(&server, ResponseTemplate::new(200).set_body_bytes(body)).await;
    let mut source = source(&format!("{}/m", server.uri()));
    let error = fetch(&mut source, false).await.unwrap_err();
    assert!(matches!(error, SourceError::TooLarge { limit: MAX_DOCUMENT_BYTES, .. }), "{error:?}");
    assert!(error.to_string().contains("16777216 bytes"), "{error}");
    source.set_body_limit(2);
    let server = MockServer::start().await;
    serve(&server, ResponseTemplate::new(200).set_body_string("{\"a\":1}")).await;
    source.urls = vec![format!("{}/m", server.uri())];
    assert!(matches!(fetch(&mut source, false).await, Err(SourceError::TooLarge { limit: 2, .. })));
}

#[tokio::test]
async fn bearer_token_is_sent_trimmed() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(header("authorization", "Bearer s3cret-token"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({})))
        .expect(1)
        .mount(&server)
        .await;
    let dir = tempfile::tempdir().unwrap();
    let token_file = dir.path().join("token");
    fs::write(&token_file, "  s3cret-token\n").unwrap();
    let mut settings = config(&format!("{}/m", server.uri()));
    settings.token_file = Some(token_file);
    let mut source = HttpSource::new("source[0] http".to_string(), &settings, &TrustRoots::default()).unwrap();
    assert_eq!(fetch(&mut source, false).await.unwrap(), Fetched::Document(json!({})));
    let debug = format!("{source:?}");
    assert!(!debug.contains("s3cret"), "{debug}");
}

#[tokio::test]
async fn unauthorized_rereads_a_rotated_token_and_retries_once() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(header("authorization", "Bearer new"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({"ok": true})))
        .mount(&server)
        .await;
    Mock::given(method("GET")).respond_with(ResponseTemplate::new(401)).mount(&server).await;
    let dir = tempfile::tempdir().unwrap();
    let token_file = dir.path().join("token");
    fs::write(&token_file, "old").unwrap();
    let mut settings = config(&format!("{}/m", server.uri()));
    settings.token_file = Some(token_file.clone());
    let mut source = HttpSource::new("source[0] http".to_string(), &settings, &TrustRoots::default()).unwrap();
    let error = fetch(&mut source, false).await.unwrap_err();
    assert!(matches!(error, SourceError::Status { status: 401, .. }), "unchanged token: no retry loop");
    fs::write(&token_file, "new\n").unwrap();
    assert_eq!(fetch(&mut source, false).await.unwrap(), Fetched::Document(json!({"ok": true})));
    let requests = server.received_requests().await.unwrap();
    assert_eq!(requests.len(), 3, "one request, then a 401 and its retry");
}

#[tokio::test]
async fn bad_token_files_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let mut settings = config("http://127.0.0.1:9/m");
    settings.token_file = Some(dir.path().join("missing"));
    let error = HttpSource::new("s".to_string(), &settings, &TrustRoots::default()).unwrap_err();
    assert!(matches!(error, SourceError::ReadFile { .. }), "{error:?}");
    let empty = dir.path().join("empty");
    fs::write(&empty, " \n").unwrap();
    settings.token_file = Some(empty);
    let error = HttpSource::new("s".to_string(), &settings, &TrustRoots::default()).unwrap_err();
    assert!(error.to_string().contains("empty"), "{error}");
    let control = dir.path().join("control");
    fs::write(&control, "a\u{1}b").unwrap();
    settings.token_file = Some(control);
    let error = HttpSource::new("s".to_string(), &settings, &TrustRoots::default()).unwrap_err();
    assert!(matches!(error, SourceError::BadFile { .. }), "{error:?}");
    assert!(!error.to_string().contains("a\u{1}b"));
}

#[tokio::test]
async fn long_poll_header_turns_on_wait_with_if_none_match() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/m"))
        .and(query_param("wait", "20"))
        .and(query_param("sig", "x"))
        .and(header("if-none-match", "\"v1\""))
        .respond_with(ResponseTemplate::new(304).insert_header(LONG_POLL_HEADER, "20"))
        .expect(1)
        .mount(&server)
        .await;
    let first = ResponseTemplate::new(200)
        .set_body_json(json!({"a": 1}))
        .insert_header("etag", "\"v1\"")
        .insert_header(LONG_POLL_HEADER, "20");
    Mock::given(method("GET")).and(query_param_is_missing("wait")).respond_with(first).expect(2).mount(&server).await;
    let mut source = source(&format!("{}/m?sig=x", server.uri()));
    assert!(!source.can_long_poll());
    fetch(&mut source, true).await.unwrap();
    assert!(source.can_long_poll(), "advertised, with an ETag");
    // Our 60 s is capped to the server's 20 s.
    assert_eq!(fetch(&mut source, true).await.unwrap(), Fetched::Unchanged);
    // Without `wait` the request is a plain conditional GET.
    fetch(&mut source, false).await.unwrap();
}

#[tokio::test]
async fn long_poll_disabled_by_config_or_missing_header() {
    let server = MockServer::start().await;
    let response = ResponseTemplate::new(200)
        .set_body_json(json!({}))
        .insert_header("etag", "\"v1\"")
        .insert_header(LONG_POLL_HEADER, "30");
    serve(&server, response).await;
    let mut settings = config(&format!("{}/m", server.uri()));
    settings.long_poll = Duration::ZERO;
    let mut disabled = HttpSource::new("s".to_string(), &settings, &TrustRoots::default()).unwrap();
    fetch(&mut disabled, true).await.unwrap();
    assert!(!disabled.can_long_poll());

    let plain = MockServer::start().await;
    serve(&plain, ResponseTemplate::new(200).set_body_json(json!({})).insert_header("etag", "\"v1\"")).await;
    let mut source = source(&format!("{}/m", server.uri()));
    fetch(&mut source, true).await.unwrap();
    assert!(source.can_long_poll());
    source.urls = vec![format!("{}/m", plain.uri())];
    fetch(&mut source, true).await.unwrap();
    assert!(!source.can_long_poll(), "a server that stops advertising is no longer long-polled");
}

#[tokio::test]
async fn redirects_are_not_followed() {
    let server = MockServer::start().await;
    let redirect = ResponseTemplate::new(302).insert_header("location", format!("{}/elsewhere", server.uri()));
    serve(&server, redirect).await;
    Mock::given(path("/elsewhere")).respond_with(ResponseTemplate::new(200)).expect(0).mount(&server).await;
    let error = fetch(&mut source(&format!("{}/m", server.uri())), false).await.unwrap_err();
    assert!(matches!(error, SourceError::Redirect { status: 302, .. }), "{error:?}");
    assert!(!error.is_transient());
}

#[tokio::test]
async fn connection_refused_is_transient() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    let error = fetch(&mut source(&format!("http://127.0.0.1:{port}/m?sig=SECRET")), false).await.unwrap_err();
    assert!(matches!(error, SourceError::Request { .. }), "{error:?}");
    assert!(error.is_transient());
    let chain = crate::source::error_chain(&error);
    assert!(!chain.contains("SECRET"), "{chain}");
    assert!(chain.contains(&format!("127.0.0.1:{port}/m?***")), "{chain}");
}

#[tokio::test]
async fn read_timeout_is_a_transient_error() {
    let server = MockServer::start().await;
    serve(&server, ResponseTemplate::new(200).set_body_json(json!({})).set_delay(Duration::from_secs(5))).await;
    let mut settings = config(&format!("{}/m", server.uri()));
    settings.read_timeout = Duration::from_millis(300);
    let mut source = HttpSource::new("s".to_string(), &settings, &TrustRoots::default()).unwrap();
    let error = fetch(&mut source, false).await.unwrap_err();
    assert!(matches!(&error, SourceError::Request { source, .. } if source.is_timeout()), "{error:?}");
    assert!(error.is_transient());
}

#[tokio::test]
async fn shutdown_cancels_a_pending_request() {
    let server = MockServer::start().await;
    serve(&server, ResponseTemplate::new(200).set_body_json(json!({})).set_delay(Duration::from_secs(30))).await;
    let mut source = source(&format!("{}/m", server.uri()));
    let shutdown = CancellationToken::new();
    let canceller = shutdown.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(100)).await;
        canceller.cancel();
    });
    let started = Instant::now();
    assert_eq!(source.fetch(false, &shutdown).await.unwrap(), Fetched::Cancelled);
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[test]
fn wait_is_appended_to_the_query() {
    assert_eq!(with_wait("http://h/m", 5), "http://h/m?wait=5");
    assert_eq!(with_wait("http://h/m?a=b", 5), "http://h/m?a=b&wait=5");
    assert_eq!(with_wait("http://h/m?", 5), "http://h/m?wait=5");
    assert_eq!(with_wait("http://h/m?a=b&", 5), "http://h/m?a=b&wait=5");
    assert_eq!(with_wait("http://h/m?a=b#frag", 5), "http://h/m?a=b&wait=5");
}

#[test]
fn debug_hides_the_query() {
    let source = source("http://127.0.0.1:9/m?temp_url_sig=SECRET");
    let debug = format!("{source:?}");
    assert!(!debug.contains("SECRET"), "{debug}");
}
