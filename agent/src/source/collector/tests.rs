use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use wiremock::matchers::{header, method, query_param};
use wiremock::{Mock, MockServer, ResponseTemplate};

use super::*;
use crate::config::{AgentSettings, HttpSourceConfig, LocalSourceConfig, SourceConfig};
use crate::selfconfig::CarriedKey;
use crate::source::cache::CachedDocument;
use crate::source::http::LONG_POLL_HEADER;
use crate::source::state::merge_documents;

/// Merges documents given in config order (see `Collected::deployments` for the rule).
fn merge(documents: &[(String, Value)]) -> Collected {
    merge_documents(documents.iter().map(|(name, document)| (name.as_str(), document)))
}

fn deployment(id: &str, name: &str) -> Value {
    json!({"id": id, "name": name, "group": "script", "config": "#!/bin/sh\n", "inputs": [], "outputs": []})
}

fn ids(collected: &Collected) -> Vec<&str> {
    collected.deployments.iter().map(|deployment| deployment.id.as_str()).collect()
}

fn http(url: &str) -> SourceConfig {
    SourceConfig::Http(HttpSourceConfig {
        urls: vec![url.to_string()],
        token_file: None,
        ca_file: None,
        connect_timeout: Duration::from_secs(2),
        read_timeout: Duration::from_secs(5),
        long_poll: Duration::from_secs(2),
        self_configure: false,
    })
}

fn config(state_dir: &Path, sources: Vec<SourceConfig>) -> Config {
    Config {
        path: PathBuf::from("/etc/anneal/agent.toml"),
        agent: AgentSettings {
            state_dir: state_dir.to_path_buf(),
            hooks_dirs: Vec::new(),
            poll_interval: Duration::from_secs(30),
            fast_follow: true,
            hook_timeout: Duration::from_secs(60),
            hook_kill_grace: Duration::from_secs(1),
            parallel: 1,
            hook_env: Default::default(),
            journal_retention: None,
            metrics_textfile: None,
        },
        sources,
    }
}

fn document_response(document: &Value, etag: &str) -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_json(document).insert_header("etag", etag)
}

#[test]
fn merge_keeps_config_order_and_replaces_in_place() {
    let first = json!({"deployments": [deployment("a", "10_a"), deployment("b", "20_b"), deployment("c", "30_c")]});
    let second = json!({"deployments": [deployment("d", "05_d"), deployment("b", "20_b_new")]});
    let collected = merge(&[("source[0] http".to_string(), first), ("source[1] local".to_string(), second)]);
    assert_eq!(ids(&collected), ["a", "b", "c", "d"]);
    assert_eq!(collected.deployments[1].name.as_deref(), Some("20_b_new"), "the later source wins in place");
    assert!(collected.rejected.is_empty());
    assert!(collected.failing.is_empty());
}

#[test]
fn merge_reports_rejections_with_the_source_name() {
    let first =
        json!({"deployments": [deployment("ok", "a"), {"id": "../escape", "group": "script"}, {"name": "no id"}]});
    let second = json!({"deployments": {"not": "a list"}});
    let third = json!({"no_deployments": true});
    let collected = merge(&[("s0".to_string(), first), ("s1".to_string(), second), ("s2".to_string(), third)]);
    assert_eq!(ids(&collected), ["ok"]);
    let rejected: Vec<(&str, usize)> =
        collected.rejected.iter().map(|(name, rejection)| (name.as_str(), rejection.index)).collect();
    assert_eq!(rejected, [("s0", 1), ("s0", 2), ("s1", 0)]);
    assert_eq!(collected.rejected[0].1.id.as_deref(), Some("../escape"));
}

#[test]
fn merge_of_nothing_is_empty() {
    assert_eq!(merge(&[]), Collected::default());
}

#[tokio::test]
async fn collect_once_merges_http_and_local_and_caches() {
    let server = MockServer::start().await;
    let remote = json!({"deployments": [deployment("r1", "10_r1")]});
    Mock::given(method("GET")).respond_with(document_response(&remote, "\"v1\"")).mount(&server).await;
    let state = tempfile::tempdir().unwrap();
    let local_dir = state.path().join("local.d");
    fs::create_dir(&local_dir).unwrap();
    fs::set_permissions(&local_dir, fs::Permissions::from_mode(0o700)).unwrap();
    fs::write(local_dir.join("a.json"), json!({"deployments": [deployment("l1", "05_l1")]}).to_string()).unwrap();
    let sources = vec![
        http(&format!("{}/m", server.uri())),
        SourceConfig::Local(LocalSourceConfig { path: local_dir, self_configure: false }),
    ];
    let mut collector = Collector::new(&config(state.path(), sources), &TrustRoots::default()).unwrap();
    let collected = collector.collect_once(&CancellationToken::new()).await;
    assert_eq!(ids(&collected), ["r1", "l1"]);
    assert!(collected.failing.is_empty(), "{:?}", collected.failing);
    let cache = state.path().join("sources");
    assert!(cache.join("source-0-http.json").exists());
    assert!(cache.join("source-1-local.json").exists());
}

#[tokio::test]
async fn collect_once_falls_back_to_the_cache_when_the_server_is_down() {
    // Not from the pool: this server must really stop listening when dropped.
    let server = MockServer::builder().start().await;
    let remote = json!({"deployments": [deployment("r1", "10_r1")]});
    Mock::given(method("GET")).respond_with(document_response(&remote, "\"v1\"")).mount(&server).await;
    let state = tempfile::tempdir().unwrap();
    let settings = config(state.path(), vec![http(&format!("{}/m", server.uri()))]);
    Collector::new(&settings, &TrustRoots::default()).unwrap().collect_once(&CancellationToken::new()).await;
    drop(server);

    let mut restarted = Collector::new(&settings, &TrustRoots::default()).unwrap();
    assert_eq!(ids(&restarted.collected()), ["r1"], "the cache is loaded at startup");
    let collected = restarted.collect_once(&CancellationToken::new()).await;
    assert_eq!(ids(&collected), ["r1"]);
    assert_eq!(collected.failing.len(), 1);
    assert_eq!(collected.failing[0].0, "source[0] http");
    assert!(collected.failing[0].1.contains("GET"), "{}", collected.failing[0].1);
    assert!(collected.complete, "its last good document still lists everything the engine listed");
}

#[tokio::test]
async fn a_failing_source_without_cache_contributes_nothing() {
    let server = MockServer::start().await;
    Mock::given(method("GET")).respond_with(ResponseTemplate::new(503)).mount(&server).await;
    let state = tempfile::tempdir().unwrap();
    let mut collector =
        Collector::new(&config(state.path(), vec![http(&format!("{}/m", server.uri()))]), &TrustRoots::default())
            .unwrap();
    let collected = collector.collect_once(&CancellationToken::new()).await;
    assert!(collected.deployments.is_empty());
    assert!(collected.failing[0].1.contains("HTTP 503"), "{:?}", collected.failing);
    assert!(!collected.complete, "no document: journal retention must not read the empty list as departures");
}

#[tokio::test]
async fn restart_sends_cached_validators_and_uses_the_cached_document_on_304() {
    let server = MockServer::start().await;
    let remote = json!({"deployments": [deployment("r1", "10_r1")]});
    Mock::given(method("GET"))
        .and(header("if-none-match", "\"v1\""))
        .respond_with(ResponseTemplate::new(304))
        .mount(&server)
        .await;
    Mock::given(method("GET")).respond_with(document_response(&remote, "\"v1\"")).up_to_n_times(1).mount(&server).await;
    let state = tempfile::tempdir().unwrap();
    let settings = config(state.path(), vec![http(&format!("{}/m", server.uri()))]);
    Collector::new(&settings, &TrustRoots::default()).unwrap().collect_once(&CancellationToken::new()).await;
    let collected =
        Collector::new(&settings, &TrustRoots::default()).unwrap().collect_once(&CancellationToken::new()).await;
    assert_eq!(ids(&collected), ["r1"]);
    assert!(collected.failing.is_empty());
    assert_eq!(server.received_requests().await.unwrap().len(), 2);
}

/// A full disk: the write of the new document fails, and the cache must not keep the older file
/// for good; the next fetch (a 304 here) writes it.
#[tokio::test]
async fn a_failed_cache_write_is_retried_after_the_next_fetch() {
    let server = MockServer::start().await;
    let remote = json!({"deployments": [deployment("r1", "10_r1")]});
    Mock::given(method("GET"))
        .and(header("if-none-match", "\"v1\""))
        .respond_with(ResponseTemplate::new(304))
        .mount(&server)
        .await;
    Mock::given(method("GET")).respond_with(document_response(&remote, "\"v1\"")).mount(&server).await;
    let state = tempfile::tempdir().unwrap();
    let mut collector =
        Collector::new(&config(state.path(), vec![http(&format!("{}/m", server.uri()))]), &TrustRoots::default())
            .unwrap();
    // A file where the cache directory was makes every cache write fail, even for root.
    let sources = state.path().join("sources");
    fs::remove_dir(&sources).unwrap();
    fs::write(&sources, "in the way").unwrap();
    assert_eq!(ids(&collector.collect_once(&CancellationToken::new()).await), ["r1"]);
    fs::remove_file(&sources).unwrap();
    fs::create_dir(&sources).unwrap();

    assert_eq!(ids(&collector.collect_once(&CancellationToken::new()).await), ["r1"]);
    let cached: CachedDocument =
        serde_json::from_slice(&fs::read(sources.join("source-0-http.json")).unwrap()).unwrap();
    assert_eq!(cached.document, remote);
    assert_eq!(cached.validators.etag.as_deref(), Some("\"v1\""));
    assert_eq!(server.received_requests().await.unwrap().len(), 2, "the second fetch was a 304");
}

#[tokio::test]
async fn a_cache_for_another_url_is_not_used() {
    let state = tempfile::tempdir().unwrap();
    let server = MockServer::start().await;
    let remote = json!({"deployments": [deployment("old", "10_old")]});
    Mock::given(method("GET")).respond_with(document_response(&remote, "\"v1\"")).mount(&server).await;
    let old = config(state.path(), vec![http(&format!("{}/old", server.uri()))]);
    Collector::new(&old, &TrustRoots::default()).unwrap().collect_once(&CancellationToken::new()).await;
    let moved = config(state.path(), vec![http("http://127.0.0.1:9/new")]);
    assert!(Collector::new(&moved, &TrustRoots::default()).unwrap().collected().deployments.is_empty());
}

#[tokio::test]
async fn corrupt_cache_is_ignored() {
    let state = tempfile::tempdir().unwrap();
    let sources = state.path().join("sources");
    fs::create_dir_all(&sources).unwrap();
    fs::write(sources.join("source-0-http.json"), "garbage").unwrap();
    let collector =
        Collector::new(&config(state.path(), vec![http("http://127.0.0.1:9/m")]), &TrustRoots::default()).unwrap();
    assert_eq!(collector.collected(), Collected::default());
}

#[tokio::test]
async fn construction_errors_name_the_source() {
    let state = tempfile::tempdir().unwrap();
    let mut bad = http("http://127.0.0.1:9/m");
    if let SourceConfig::Http(settings) = &mut bad {
        settings.token_file = Some(state.path().join("missing-token"));
    }
    let error = Collector::new(&config(state.path(), vec![bad]), &TrustRoots::default()).unwrap_err();
    assert!(error.to_string().starts_with("source[0] http: cannot read"), "{error}");
}

#[tokio::test]
async fn cancelled_collect_once_marks_sources_not_fetched() {
    let state = tempfile::tempdir().unwrap();
    let mut collector =
        Collector::new(&config(state.path(), vec![http("http://127.0.0.1:9/m")]), &TrustRoots::default()).unwrap();
    let shutdown = CancellationToken::new();
    shutdown.cancel();
    let collected = collector.collect_once(&shutdown).await;
    assert_eq!(collected.failing, [("source[0] http".to_string(), "not fetched: shutting down".to_string())]);
}

async fn next(receiver: &mut watch::Receiver<Arc<Collected>>) -> Arc<Collected> {
    tokio::time::timeout(Duration::from_secs(10), receiver.changed()).await.expect("an update in time").unwrap();
    receiver.borrow_and_update().clone()
}

#[tokio::test]
async fn spawn_delivers_an_update_after_a_change() {
    let server = MockServer::start().await;
    let first = json!({"deployments": [deployment("a", "10_a")]});
    Mock::given(method("GET")).respond_with(document_response(&first, "\"v1\"")).mount(&server).await;
    let state = tempfile::tempdir().unwrap();
    let collector =
        Collector::new(&config(state.path(), vec![http(&format!("{}/m", server.uri()))]), &TrustRoots::default())
            .unwrap();
    let shutdown = CancellationToken::new();
    let mut receiver = collector.spawn(Duration::from_millis(100), None, shutdown.clone());
    assert!(receiver.borrow().deployments.is_empty(), "no cache: starts empty");
    assert_eq!(ids(&*next(&mut receiver).await), ["a"]);

    server.reset().await;
    let second = json!({"deployments": [deployment("a", "10_a"), deployment("b", "20_b")]});
    Mock::given(method("GET")).respond_with(document_response(&second, "\"v2\"")).mount(&server).await;
    assert_eq!(ids(&*next(&mut receiver).await), ["a", "b"]);

    // A failure keeps the last good document and says so.
    server.reset().await;
    Mock::given(method("GET")).respond_with(ResponseTemplate::new(500)).mount(&server).await;
    let failing = next(&mut receiver).await;
    assert_eq!(ids(&failing), ["a", "b"]);
    assert_eq!(failing.failing.len(), 1);

    shutdown.cancel();
    let closed = tokio::time::timeout(Duration::from_secs(5), async { while receiver.changed().await.is_ok() {} });
    closed.await.expect("every task stops on shutdown and drops the sender");
}

#[tokio::test]
async fn spawn_sends_the_first_round_even_when_nothing_changed() {
    let state = tempfile::tempdir().unwrap();
    let missing = state.path().join("absent.d");
    let sources = vec![SourceConfig::Local(LocalSourceConfig { path: missing, self_configure: false })];
    let collector = Collector::new(&config(state.path(), sources), &TrustRoots::default()).unwrap();
    let shutdown = CancellationToken::new();
    let mut receiver = collector.spawn(Duration::from_secs(30), None, shutdown.clone());
    // The missing directory is an empty document: no deployments, and every source answered.
    let empty = vec![CarriedKey { source: "source[0] local".to_string(), key: None }];
    assert_eq!(
        *next(&mut receiver).await,
        Collected { complete: true, self_config_keys: empty, ..Collected::default() }
    );
    shutdown.cancel();
}

#[tokio::test]
async fn spawn_long_polls_when_the_server_advertises_it() {
    let server = MockServer::start().await;
    let first = json!({"deployments": [deployment("a", "10_a")]});
    Mock::given(method("GET"))
        .and(query_param("wait", "2"))
        .respond_with(
            ResponseTemplate::new(304).insert_header(LONG_POLL_HEADER, "30").set_delay(Duration::from_millis(300)),
        )
        .mount(&server)
        .await;
    let response = document_response(&first, "\"v1\"").insert_header(LONG_POLL_HEADER, "30");
    Mock::given(method("GET")).respond_with(response).up_to_n_times(1).mount(&server).await;
    let state = tempfile::tempdir().unwrap();
    let collector =
        Collector::new(&config(state.path(), vec![http(&format!("{}/m", server.uri()))]), &TrustRoots::default())
            .unwrap();
    let shutdown = CancellationToken::new();
    // A poll interval this long shows that the change below arrives through long-poll.
    let mut receiver = collector.spawn(Duration::from_secs(3600), None, shutdown.clone());
    assert_eq!(ids(&*next(&mut receiver).await), ["a"]);

    let second = json!({"deployments": [deployment("b", "20_b")]});
    Mock::given(method("GET"))
        .and(query_param("wait", "2"))
        .respond_with(document_response(&second, "\"v2\"").insert_header(LONG_POLL_HEADER, "30"))
        .with_priority(1)
        .mount(&server)
        .await;
    assert_eq!(ids(&*next(&mut receiver).await), ["b"]);
    shutdown.cancel();
}

#[tokio::test]
async fn self_configured_sources_follow_the_config_with_their_own_name_and_interval() {
    let own = MockServer::start().await;
    let own_document = json!({"deployments": [deployment("o1", "10_o1")],
        "os-collect-config": {"collectors": ["request"], "request": {"metadata_url": "http://127.0.0.1:1/x"}}});
    Mock::given(method("GET")).respond_with(document_response(&own_document, "\"o\"")).mount(&own).await;
    let swift = MockServer::start().await;
    let derived_document = json!({"deployments": [deployment("d1", "20_d1")]});
    Mock::given(method("GET"))
        .respond_with(ResponseTemplate::new(200).set_body_json(&derived_document))
        .mount(&swift)
        .await;
    let key = json!({"collectors": ["ec2", "request", "local"], "polling_interval": 1,
        "request": {"metadata_url": format!("{}/v1/AUTH_t/c/o?temp_url_sig=s", swift.uri())}});
    let derived = crate::selfconfig::derive(&key).unwrap();
    let state = tempfile::tempdir().unwrap();
    let settings = config(state.path(), vec![http(&format!("{}/m", own.uri()))]);

    let mut collector = Collector::with_self_config(&settings, Some(&derived), &TrustRoots::default()).unwrap();
    assert_eq!(collector.source_names(), ["source[0] http", "os-collect-config request"]);
    let collected = collector.collect_once(&CancellationToken::new()).await;
    assert_eq!(ids(&collected), ["o1", "d1"]);
    assert!(state.path().join("sources/os-collect-config-request.json").exists(), "cached under its own name");
    // Every source with a document is listed, with the key it carries if any.
    let carried: Vec<(&str, bool)> =
        collected.self_config_keys.iter().map(|carried| (carried.source.as_str(), carried.key.is_some())).collect();
    assert_eq!(carried, [("source[0] http", true), ("os-collect-config request", false)]);

    // The config's interval is 30 s; the derived source polls every second (±10%).
    let shutdown = CancellationToken::new();
    let collector = Collector::with_self_config(&settings, Some(&derived), &TrustRoots::default()).unwrap();
    let _receiver = collector.spawn(Duration::from_secs(30), None, shutdown.clone());
    tokio::time::sleep(Duration::from_millis(2600)).await;
    shutdown.cancel();
    let own_requests = own.received_requests().await.unwrap().len();
    let swift_requests = swift.received_requests().await.unwrap().len();
    assert_eq!(own_requests, 2, "once by collect_once, once by the first round");
    assert!(swift_requests >= 3, "1 + at least two polls a second apart: {swift_requests}");
}

/// A self-configured source that cannot be built lists nothing: the deployments only it would
/// list are unknown, so the view must not be complete (journal retention would prune them).
#[tokio::test]
async fn a_self_configured_source_that_cannot_be_built_makes_the_view_incomplete() {
    let own = MockServer::start().await;
    let own_document = json!({"deployments": [deployment("o1", "10_o1")]});
    Mock::given(method("GET")).respond_with(document_response(&own_document, "\"o\"")).mount(&own).await;
    let key = json!({"collectors": ["request"], "request": {"metadata_url": "http://127.0.0.1:9/x"}});
    let mut derived = crate::selfconfig::derive(&key).unwrap();
    let state = tempfile::tempdir().unwrap();
    let SourceConfig::Http(request) = &mut derived.sources[0].1 else { panic!("{derived:?}") };
    request.token_file = Some(state.path().join("missing-token"));
    let settings = config(state.path(), vec![http(&format!("{}/m", own.uri()))]);

    let mut collector = Collector::with_self_config(&settings, Some(&derived), &TrustRoots::default()).unwrap();
    assert_eq!(collector.source_names(), ["source[0] http"], "not polled");
    let collected = collector.collect_once(&CancellationToken::new()).await;
    assert_eq!(ids(&collected), ["o1"], "the config's own source still runs");
    assert!(!collected.complete);
    assert_eq!(collected.failing.len(), 1, "{:?}", collected.failing);
    assert_eq!(collected.failing[0].0, "os-collect-config request");
    assert!(collected.failing[0].1.starts_with("cannot set up the source: "), "{}", collected.failing[0].1);

    // The daemon's view: the first round is sent, and incomplete.
    let collector = Collector::with_self_config(&settings, Some(&derived), &TrustRoots::default()).unwrap();
    assert!(!collector.collected().complete, "not even from the cache");
    let shutdown = CancellationToken::new();
    let mut receiver = collector.spawn(Duration::from_secs(30), None, shutdown.clone());
    let first = next(&mut receiver).await;
    assert_eq!(ids(&first), ["o1"]);
    assert!(!first.complete && first.failing.len() == 1, "{first:?}");
    shutdown.cancel();
}
