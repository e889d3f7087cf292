use serde_json::json;
use wiremock::matchers::{method, path, path_regex};
use wiremock::{Mock, MockServer, ResponseTemplate};

use super::*;
use crate::config::ClientConfig;

fn source(metadata_url: &str) -> Ec2Source {
    let config = Ec2SourceConfig {
        metadata_url: metadata_url.to_string(),
        client: ClientConfig {
            ca_file: None,
            connect_timeout: Duration::from_secs(2),
            read_timeout: Duration::from_secs(5),
        },
    };
    Ec2Source::new("source[0] ec2".to_string(), &config, &TrustRoots::default()).unwrap()
}

async fn answer(server: &MockServer, at: &str, body: impl Into<Vec<u8>>) {
    let body: Vec<u8> = body.into();
    Mock::given(method("GET"))
        .and(path(at))
        .respond_with(ResponseTemplate::new(200).set_body_bytes(body))
        .mount(server)
        .await;
}

async fn fetch(source: &Ec2Source) -> Result<Fetched, SourceError> {
    source.fetch(&CancellationToken::new()).await
}

async fn requests(server: &MockServer) -> usize {
    server.received_requests().await.unwrap_or_default().len()
}

#[tokio::test]
async fn the_tree_becomes_one_object() {
    let server = MockServer::start().await;
    answer(&server, "/latest/meta-data/", "ami-id\nhostname\npublic-keys/\nplacement/\n").await;
    answer(&server, "/latest/meta-data/ami-id", "ami-00000001").await;
    answer(&server, "/latest/meta-data/hostname", "vm-1.novalocal").await;
    answer(&server, "/latest/meta-data/public-keys/", "0=my-key").await;
    answer(&server, "/latest/meta-data/public-keys/0/", "openssh-key").await;
    answer(&server, "/latest/meta-data/public-keys/0/openssh-key", "ssh-ed25519 AAAA k\n").await;
    answer(&server, "/latest/meta-data/placement/", "availability-zone").await;
    answer(&server, "/latest/meta-data/placement/availability-zone", "nova").await;
    let expected = json!({
        "ami-id": "ami-00000001",
        "hostname": "vm-1.novalocal",
        "public-keys": {"0": {"openssh-key": "ssh-ed25519 AAAA k\n"}},
        "placement": {"availability-zone": "nova"},
    });
    // With or without the trailing slash (the config's default has one, os-collect-config's not).
    for url in [format!("{}/latest/meta-data", server.uri()), format!("{}/latest/meta-data/", server.uri())] {
        assert_eq!(fetch(&source(&url)).await.unwrap(), Fetched::Document(expected.clone()), "{url}");
    }
    assert_eq!(requests(&server).await, 16);
}

#[tokio::test]
async fn depth_is_bounded() {
    let server = MockServer::start().await;
    // Every directory holds another one: an endless tree.
    Mock::given(method("GET"))
        .and(path_regex("/$"))
        .respond_with(ResponseTemplate::new(200).set_body_string("d/"))
        .mount(&server)
        .await;
    let error = fetch(&source(&format!("{}/m/", server.uri()))).await.unwrap_err();
    assert!(matches!(error, SourceError::BadResponse { .. }), "{error:?}");
    assert!(error.to_string().ends_with("the tree is deeper than 8 levels"), "{error}");
    // The root and eight levels below it, then no more.
    assert_eq!(requests(&server).await, 9);
}

#[tokio::test]
async fn requests_are_bounded() {
    let server = MockServer::start().await;
    let listing: Vec<String> = (0..2000).map(|index| format!("k{index}")).collect();
    answer(&server, "/m/", listing.join("\n")).await;
    Mock::given(method("GET"))
        .and(path_regex("^/m/k[0-9]+$"))
        .respond_with(ResponseTemplate::new(200).set_body_string("v"))
        .mount(&server)
        .await;
    let mut source = source(&format!("{}/m/", server.uri()));
    source.set_limits(Limits { requests: 50, ..Limits::default() });
    let error = fetch(&source).await.unwrap_err();
    assert!(error.to_string().ends_with("the tree needs more than 50 requests"), "{error}");
    assert_eq!(requests(&server).await, 50);
    // The default bound holds too (1000 requests, far fewer than the listing asks for).
    server.reset().await;
    answer(&server, "/m/", listing.join("\n")).await;
    Mock::given(method("GET"))
        .and(path_regex("^/m/k[0-9]+$"))
        .respond_with(ResponseTemplate::new(200).set_body_string("v"))
        .mount(&server)
        .await;
    source.set_limits(Limits::default());
    let error = fetch(&source).await.unwrap_err();
    assert!(error.to_string().ends_with("the tree needs more than 1000 requests"), "{error}");
    assert_eq!(requests(&server).await, 1000);
}

#[tokio::test]
async fn total_bytes_are_bounded() {
    let server = MockServer::start().await;
    answer(&server, "/m/", "a\nb\nc").await;
    for leaf in ["a", "b", "c"] {
        answer(&server, &format!("/m/{leaf}"), "x".repeat(100)).await;
    }
    let mut source = source(&format!("{}/m/", server.uri()));
    source.set_limits(Limits { bytes: 250, ..Limits::default() });
    let error = fetch(&source).await.unwrap_err();
    assert!(matches!(error, SourceError::TooLarge { limit: 250, .. }), "{error:?}");
    assert!(error.to_string().contains("the metadata tree under http://127.0.0.1"), "{error}");
    source.set_limits(Limits { bytes: 305, ..Limits::default() });
    assert!(fetch(&source).await.is_ok(), "5 + 300 bytes fit");
}

#[tokio::test]
async fn entries_that_change_the_url_are_refused() {
    let server = MockServer::start().await;
    for entry in ["../", "a?b", "a#b", "a/b", "%2e%2e/", ".", "a\rb", "a\\b"] {
        server.reset().await;
        answer(&server, "/m/", format!("ok\n{entry}")).await;
        answer(&server, "/m/ok", "v").await;
        let error = fetch(&source(&format!("{}/m/", server.uri()))).await.unwrap_err();
        assert!(matches!(error, SourceError::BadResponse { .. }), "{entry:?}: {error:?}");
        assert!(error.to_string().contains("not a plain name"), "{entry:?}: {error}");
    }
}

#[tokio::test]
async fn failures_name_the_entry() {
    let server = MockServer::start().await;
    answer(&server, "/m/", "gone\nbinary").await;
    let error = fetch(&source(&format!("{}/m/", server.uri()))).await.unwrap_err();
    assert!(matches!(&error, SourceError::NotFound { url, .. } if url.ends_with("/m/gone")), "{error:?}");
    assert!(error.is_transient());

    answer(&server, "/m/gone", "here").await;
    answer(&server, "/m/binary", vec![0xff, 0xfe]).await;
    let error = fetch(&source(&format!("{}/m/", server.uri()))).await.unwrap_err();
    assert!(error.to_string().ends_with("/m/binary: the answer is not UTF-8 text"), "{error}");

    server.reset().await;
    Mock::given(method("GET")).respond_with(ResponseTemplate::new(503)).mount(&server).await;
    let error = fetch(&source(&format!("{}/m/", server.uri()))).await.unwrap_err();
    assert!(matches!(error, SourceError::Status { status: 503, .. }), "{error:?}");
    assert!(error.is_transient());
}

#[tokio::test]
async fn cancelled_mid_walk() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .respond_with(ResponseTemplate::new(200).set_body_string("a").set_delay(Duration::from_secs(10)))
        .mount(&server)
        .await;
    let source = source(&format!("{}/m/", server.uri()));
    let shutdown = CancellationToken::new();
    let fetching = source.fetch(&shutdown);
    shutdown.cancel();
    assert_eq!(fetching.await.unwrap(), Fetched::Cancelled);
}
