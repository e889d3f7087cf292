//! Tests of the zaqar source. Zaqar cannot run here (it needs MongoDB, Redis or Swift), so these
//! run against a recorded-protocol fake built from Zaqar's v2 API reference (claims and messages:
//! `POST /v2/queues/{queue}/claims` answering 201 `{"messages": [{"body", "age", "href", "ttl"}]}`
//! oldest first or 204 when nothing is unclaimed, `DELETE /v2/queues/{queue}/messages/{id}
//! ?claim_id=` answering 204, 403 for a wrong claim) and a wiremock Keystone, all on 127.0.0.1.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use wiremock::matchers::{method, path, path_regex};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

use super::*;
use crate::config::{ClientConfig, KeystoneConfig};
use crate::keystone::testing::{self, PASSWORD, PROJECT_ID, TOKEN};
use crate::secret::Secret;

const QUEUE: &str = "queue-7f3e";

/// A queued message.
struct Queued {
    id: String,
    body: Value,
    claim: Option<String>,
    /// What the claim answer gives as its `age` (seconds since it was posted).
    age: u64,
}

/// The queue's state: messages in posting order.
#[derive(Clone, Default)]
struct FakeQueue {
    messages: Arc<Mutex<Vec<Queued>>>,
    claims: Arc<Mutex<usize>>,
}

impl FakeQueue {
    fn post(&self, body: Value) {
        self.post_aged(body, 3);
    }

    fn post_aged(&self, body: Value, age: u64) {
        let mut messages = self.messages.lock().unwrap();
        let id = format!("5{:023x}", messages.len() + 1000 * (*self.claims.lock().unwrap() + 1));
        messages.push(Queued { id, body, claim: None, age });
    }

    /// Every claim lapses: the claimed messages can be claimed again.
    fn lapse_claims(&self) {
        self.messages.lock().unwrap().iter_mut().for_each(|message| message.claim = None);
    }

    fn len(&self) -> usize {
        self.messages.lock().unwrap().len()
    }
}

/// `POST .../claims?limit=N`: claims up to N unclaimed messages, oldest first.
struct ClaimResponder(FakeQueue);

impl Respond for ClaimResponder {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        let claim: Value = serde_json::from_slice(&request.body).unwrap_or(Value::Null);
        if claim["ttl"].as_u64().is_none_or(|ttl| !(60..=43200).contains(&ttl)) {
            return ResponseTemplate::new(400);
        }
        let limit: usize = request
            .url
            .query_pairs()
            .find(|(key, _)| key == "limit")
            .and_then(|(_, value)| value.parse().ok())
            .unwrap_or(10);
        let claim_id = {
            let mut claims = self.0.claims.lock().unwrap();
            *claims += 1;
            format!("c1a1m{:019}", *claims)
        };
        let mut messages = self.0.messages.lock().unwrap();
        let claimed: Vec<Value> = messages
            .iter_mut()
            .filter(|message| message.claim.is_none())
            .take(limit.min(20))
            .map(|message| {
                message.claim = Some(claim_id.clone());
                json!({"body": message.body, "age": message.age, "ttl": 300,
                       "href": format!("/v2/queues/{QUEUE}/messages/{}?claim_id={claim_id}", message.id)})
            })
            .collect();
        if claimed.is_empty() {
            return ResponseTemplate::new(204);
        }
        ResponseTemplate::new(201)
            .insert_header("location", format!("/v2/queues/{QUEUE}/claims/{claim_id}").as_str())
            .set_body_json(json!({"messages": claimed}))
    }
}

/// `DELETE .../messages/{id}?claim_id=`: 204, or 403 when the claim does not hold the message.
struct DeleteResponder(FakeQueue);

impl Respond for DeleteResponder {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        let id = request.url.path().rsplit('/').next().unwrap_or_default().to_string();
        let claim_id =
            request.url.query_pairs().find(|(key, _)| key == "claim_id").map(|(_, value)| value.into_owned());
        let mut messages = self.0.messages.lock().unwrap();
        match messages.iter().position(|message| message.id == id) {
            None => ResponseTemplate::new(204),
            Some(index) if messages[index].claim == claim_id => {
                messages.remove(index);
                ResponseTemplate::new(204)
            }
            Some(_) => ResponseTemplate::new(403),
        }
    }
}

async fn zaqar_server(queue: &FakeQueue) -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path(format!("/v2/queues/{QUEUE}/claims")))
        .respond_with(ClaimResponder(queue.clone()))
        .mount(&server)
        .await;
    Mock::given(method("DELETE"))
        .and(path_regex(format!("^/v2/queues/{QUEUE}/messages/[0-9a-z]+$")))
        .respond_with(DeleteResponder(queue.clone()))
        .mount(&server)
        .await;
    server
}

async fn keystone_for(zaqar: &MockServer) -> MockServer {
    let keystone = MockServer::start().await;
    testing::mount(&keystone, TOKEN, &testing::catalog(&[("messaging", &zaqar.uri())])).await;
    keystone
}

fn source(keystone: &MockServer) -> ZaqarSource {
    ZaqarSource::new("source[0] zaqar".into(), &source_config(keystone), &TrustRoots::default()).unwrap()
}

fn source_config(keystone: &MockServer) -> ZaqarSourceConfig {
    ZaqarSourceConfig {
        keystone: KeystoneConfig {
            auth_url: keystone.uri(),
            user_id: testing::USER_ID.into(),
            password: Secret::new(PASSWORD.into()),
            project_id: PROJECT_ID.into(),
            region_name: Some("RegionOne".into()),
        },
        queue_id: QUEUE.into(),
        client: ClientConfig {
            ca_file: None,
            connect_timeout: Duration::from_secs(2),
            read_timeout: Duration::from_secs(5),
        },
    }
}

async fn fetch(source: &mut ZaqarSource) -> Result<Fetched, SourceError> {
    source.fetch(&CancellationToken::new()).await
}

/// What the collector does once the fetched document is persisted.
async fn settle(source: &mut ZaqarSource) {
    source.settle(&CancellationToken::new()).await;
}

/// Fails the next `n` deletes with 503.
async fn fail_deletes(zaqar: &MockServer, n: u64) {
    Mock::given(method("DELETE"))
        .respond_with(ResponseTemplate::new(503))
        .up_to_n_times(n)
        .with_priority(1)
        .mount(zaqar)
        .await;
}

#[tokio::test]
async fn the_newest_message_is_the_document_and_all_are_deleted_once_settled() {
    let queue = FakeQueue::default();
    let zaqar = zaqar_server(&queue).await;
    let keystone = keystone_for(&zaqar).await;
    let mut source = source(&keystone);
    for version in 1..=3 {
        queue.post(json!({"deployments": [], "version": version}));
    }
    assert_eq!(fetch(&mut source).await.unwrap(), Fetched::Document(json!({"deployments": [], "version": 3})));
    assert_eq!(queue.len(), 3, "a fetch only claims: the document is not persisted yet");
    settle(&mut source).await;
    assert_eq!(queue.len(), 0, "every claimed message was deleted once settled");
    // An empty queue: nothing changed, the last document stays.
    assert_eq!(fetch(&mut source).await.unwrap(), Fetched::Unchanged);
    settle(&mut source).await;
    queue.post(json!({"version": 4}));
    assert_eq!(fetch(&mut source).await.unwrap(), Fetched::Document(json!({"version": 4})));
    settle(&mut source).await;
    assert_eq!(queue.len(), 0);
    assert_eq!(testing::auth_count(&keystone).await, 1);

    let requests = zaqar.received_requests().await.unwrap();
    let claim = requests.iter().find(|request| request.method.as_str() == "POST").unwrap();
    assert_eq!(claim.url.query(), Some("limit=20"));
    assert_eq!(claim.headers["x-auth-token"], TOKEN);
    assert_eq!(claim.headers["x-project-id"], PROJECT_ID);
    assert_eq!(claim.headers["content-type"], "application/json");
    let claim_body: Value = serde_json::from_slice(&claim.body).unwrap();
    assert_eq!(claim_body, json!({"ttl": 300, "grace": 60}));
    let client_id = claim.headers["client-id"].to_str().unwrap();
    assert_eq!(client_id, source.client_id());
    assert!(requests.iter().all(|request| request.headers["client-id"] == client_id), "one Client-ID throughout");
    let deletes: Vec<_> = requests.iter().filter(|request| request.method.as_str() == "DELETE").collect();
    assert_eq!(deletes.len(), 4);
    assert!(deletes.iter().all(|request| request.url.query().unwrap().starts_with("claim_id=c1a1m")));
}

#[tokio::test]
async fn a_queue_longer_than_one_claim_is_drained_in_rounds() {
    let queue = FakeQueue::default();
    let zaqar = zaqar_server(&queue).await;
    let keystone = keystone_for(&zaqar).await;
    for version in 0..45 {
        queue.post(json!({"version": version}));
    }
    let mut source = source(&keystone);
    assert_eq!(fetch(&mut source).await.unwrap(), Fetched::Document(json!({"version": 44})));
    settle(&mut source).await;
    assert_eq!(queue.len(), 0);
    let claims = zaqar.received_requests().await.unwrap().iter().filter(|r| r.method.as_str() == "POST").count();
    assert_eq!(claims, 3);
}

#[tokio::test]
async fn an_empty_queue_is_unchanged_from_the_start() {
    let queue = FakeQueue::default();
    let zaqar = zaqar_server(&queue).await;
    let keystone = keystone_for(&zaqar).await;
    assert_eq!(fetch(&mut source(&keystone)).await.unwrap(), Fetched::Unchanged);
}

#[tokio::test]
async fn a_401_renews_the_token_once() {
    let queue = FakeQueue::default();
    let zaqar = zaqar_server(&queue).await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(401))
        .up_to_n_times(1)
        .with_priority(1)
        .mount(&zaqar)
        .await;
    let keystone = keystone_for(&zaqar).await;
    queue.post(json!({"version": 1}));
    assert_eq!(fetch(&mut source(&keystone)).await.unwrap(), Fetched::Document(json!({"version": 1})));
    assert_eq!(testing::auth_count(&keystone).await, 2);
}

#[tokio::test]
async fn a_crash_before_the_document_is_persisted_loses_nothing() {
    let queue = FakeQueue::default();
    let zaqar = zaqar_server(&queue).await;
    let keystone = keystone_for(&zaqar).await;
    queue.post(json!({"version": 1}));
    queue.post(json!({"version": 2}));
    // Fetched, then the agent dies before its cache write: never settled.
    assert_eq!(fetch(&mut source(&keystone)).await.unwrap(), Fetched::Document(json!({"version": 2})));
    assert_eq!(queue.len(), 2, "nothing deleted before the document is persisted");
    // The next process: the messages are still claimed, then the claim lapses and they are read.
    let mut restarted = source(&keystone);
    assert_eq!(fetch(&mut restarted).await.unwrap(), Fetched::Unchanged);
    queue.lapse_claims();
    assert_eq!(fetch(&mut restarted).await.unwrap(), Fetched::Document(json!({"version": 2})));
    settle(&mut restarted).await;
    assert_eq!(queue.len(), 0);
}

#[tokio::test]
async fn messages_of_an_unsettled_fetch_are_not_deleted_later() {
    let queue = FakeQueue::default();
    let zaqar = zaqar_server(&queue).await;
    let keystone = keystone_for(&zaqar).await;
    let mut source = source(&keystone);
    queue.post(json!({"version": 1}));
    assert_eq!(fetch(&mut source).await.unwrap(), Fetched::Document(json!({"version": 1})));
    // The cache write failed: no settle. The next fetch and its settle leave that message alone.
    assert_eq!(fetch(&mut source).await.unwrap(), Fetched::Unchanged);
    settle(&mut source).await;
    assert_eq!(queue.len(), 1, "its claim lapses instead, and it is read again");
}

#[tokio::test]
async fn a_failed_delete_is_not_an_error_and_the_message_comes_back() {
    let queue = FakeQueue::default();
    let zaqar = zaqar_server(&queue).await;
    fail_deletes(&zaqar, 1).await;
    let keystone = keystone_for(&zaqar).await;
    queue.post(json!({"version": 1}));
    queue.post(json!({"version": 2}));
    let mut source = source(&keystone);
    assert_eq!(fetch(&mut source).await.unwrap(), Fetched::Document(json!({"version": 2})));
    settle(&mut source).await;
    assert_eq!(queue.len(), 2, "the first delete failed: the rest are left to their claim too");
    queue.lapse_claims();
    assert_eq!(fetch(&mut source).await.unwrap(), Fetched::Document(json!({"version": 2})));
    settle(&mut source).await;
    assert_eq!(queue.len(), 0);
}

#[tokio::test]
async fn an_older_message_coming_back_does_not_roll_the_document_back() {
    let queue = FakeQueue::default();
    let zaqar = zaqar_server(&queue).await;
    fail_deletes(&zaqar, 1).await;
    let keystone = keystone_for(&zaqar).await;
    let mut source = source(&keystone);
    queue.post_aged(json!({"version": 1}), 100);
    assert_eq!(fetch(&mut source).await.unwrap(), Fetched::Document(json!({"version": 1})));
    settle(&mut source).await;
    assert_eq!(queue.len(), 1, "its delete failed; it is still claimed");
    queue.post_aged(json!({"version": 2}), 10);
    assert_eq!(fetch(&mut source).await.unwrap(), Fetched::Document(json!({"version": 2})));
    settle(&mut source).await;
    // Version 1's claim lapses and it is claimed again: older than the document, so unused.
    queue.lapse_claims();
    assert_eq!(fetch(&mut source).await.unwrap(), Fetched::Unchanged);
    settle(&mut source).await;
    assert_eq!(queue.len(), 0, "and deleted");
}

#[tokio::test]
async fn a_failed_claim_after_the_first_keeps_what_was_claimed() {
    let queue = FakeQueue::default();
    let zaqar = zaqar_server(&queue).await;
    // The first claim reaches the queue, the next ones fail.
    Mock::given(method("POST"))
        .respond_with(ClaimResponder(queue.clone()))
        .up_to_n_times(1)
        .with_priority(1)
        .mount(&zaqar)
        .await;
    Mock::given(method("POST")).respond_with(ResponseTemplate::new(503)).with_priority(2).mount(&zaqar).await;
    let keystone = keystone_for(&zaqar).await;
    for version in 0..25 {
        queue.post(json!({"version": version}));
    }
    let mut source = source(&keystone);
    assert_eq!(fetch(&mut source).await.unwrap(), Fetched::Document(json!({"version": 19})));
    settle(&mut source).await;
    assert_eq!(queue.len(), 5, "the claimed ones are deleted, the rest is read by the next poll");
}

#[tokio::test]
async fn bad_answers_are_clear_errors() {
    for (response, expected) in [
        (ResponseTemplate::new(201).set_body_string("{"), "not JSON"),
        (ResponseTemplate::new(201).set_body_json(json!({"x": 1})), "no \"messages\" list"),
        (ResponseTemplate::new(201).set_body_json(json!({"messages": [{"body": {}}]})), "no id or claim id"),
        (ResponseTemplate::new(201).set_body_json(json!({"messages": vec![json!({}); 21]})), "21 messages"),
    ] {
        let zaqar = MockServer::start().await;
        Mock::given(method("POST")).respond_with(response).mount(&zaqar).await;
        let keystone = keystone_for(&zaqar).await;
        let error = fetch(&mut source(&keystone)).await.unwrap_err();
        assert!(error.to_string().contains(expected) && !error.is_transient(), "{error}");
    }
    let queue = FakeQueue::default();
    let zaqar = zaqar_server(&queue).await;
    let keystone = keystone_for(&zaqar).await;
    queue.post(json!("not an object"));
    let mut source = source(&keystone);
    let error = fetch(&mut source).await.unwrap_err();
    assert!(matches!(error, SourceError::NotObject { found: "string", .. }), "{error:?}");
    settle(&mut source).await;
    assert_eq!(queue.len(), 0, "a bad message does not block the queue");
}

#[tokio::test]
async fn zaqar_and_keystone_failures_are_classified() {
    let zaqar = MockServer::start().await;
    Mock::given(method("POST")).respond_with(ResponseTemplate::new(500)).mount(&zaqar).await;
    let keystone = keystone_for(&zaqar).await;
    let error = fetch(&mut source(&keystone)).await.unwrap_err();
    assert!(matches!(error, SourceError::Answered { method: "POST", status: 500, .. }) && error.is_transient());

    let no_messaging = MockServer::start().await;
    testing::mount(&no_messaging, TOKEN, &testing::catalog(&[("orchestration", "http://127.0.0.1:1/v1")])).await;
    let error = fetch(&mut source(&no_messaging)).await.unwrap_err();
    let text = crate::error_chain(&error);
    assert!(text.contains("service type messaging in region RegionOne") && !error.is_transient(), "{text}");
}

#[test]
fn urls_and_client_ids() {
    let url = queue_url("http://z:8888/", "q 1", &["messages", "abc"], &[("claim_id", "c&d")]).unwrap();
    assert_eq!(url.as_str(), "http://z:8888/v2/queues/q%201/messages/abc?claim_id=c%26d");
    assert!(queue_url("http://z", "q", &["messages", ".."], &[]).is_none());
    assert!(queue_url("mailto:x@y", "q", &[], &[]).is_none());
    let id = client_id("seed");
    assert_eq!(id, client_id("seed"), "stable");
    assert_ne!(id, client_id("other"));
    assert_eq!(id.len(), 36);
    assert_eq!(&id[14..15], "4", "a version 4 layout: {id}");
    assert!(matches!(&id[19..20], "8" | "9" | "a" | "b"), "{id}");
}

/// `once` (one fetch per process): the messages are deleted once the document is in the cache,
/// and kept when the cache cannot be written.
#[tokio::test]
async fn collect_once_deletes_the_messages_only_after_caching_the_document() {
    use crate::config::{AgentSettings, Config, SourceConfig};
    use crate::source::collector::Collector;

    let queue = FakeQueue::default();
    let zaqar = zaqar_server(&queue).await;
    let keystone = keystone_for(&zaqar).await;
    let state = tempfile::tempdir().unwrap();
    let config = Config {
        path: "/etc/anneal/agent.toml".into(),
        agent: AgentSettings {
            state_dir: state.path().to_path_buf(),
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
        sources: vec![SourceConfig::Zaqar(source_config(&keystone))],
    };
    let shutdown = CancellationToken::new();
    let cache_dir = state.path().join("sources");
    queue.post(json!({"deployments": [], "version": 1}));
    let mut collector = Collector::new(&config, &TrustRoots::default()).unwrap();
    // A file where the cache directory was makes the cache write fail.
    std::fs::remove_dir(&cache_dir).unwrap();
    std::fs::write(&cache_dir, "in the way").unwrap();
    assert!(collector.collect_once(&shutdown).await.complete);
    assert_eq!(queue.len(), 1, "not in the cache: the message stays for the next process");

    std::fs::remove_file(&cache_dir).unwrap();
    queue.lapse_claims();
    let mut collector = Collector::new(&config, &TrustRoots::default()).unwrap();
    assert!(collector.collect_once(&shutdown).await.complete);
    assert!(cache_dir.join("source-0-zaqar.json").exists());
    assert_eq!(queue.len(), 0, "cached, then deleted");

    // The next process reads an empty queue and uses its cache.
    let mut collector = Collector::new(&config, &TrustRoots::default()).unwrap();
    let collected = collector.collect_once(&shutdown).await;
    assert!(collected.complete && collected.failing.is_empty(), "{collected:?}");
}
