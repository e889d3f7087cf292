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

/// A queued message: `(id, body, claim id)`.
type Queued = (String, Value, Option<String>);

/// The queue's state: messages in posting order.
#[derive(Clone, Default)]
struct FakeQueue {
    messages: Arc<Mutex<Vec<Queued>>>,
    claims: Arc<Mutex<usize>>,
}

impl FakeQueue {
    fn post(&self, body: Value) {
        let mut messages = self.messages.lock().unwrap();
        let id = format!("5{:023x}", messages.len() + 1000 * (*self.claims.lock().unwrap() + 1));
        messages.push((id, body, None));
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
            .filter(|(_, _, claim)| claim.is_none())
            .take(limit.min(20))
            .map(|(id, body, claim)| {
                *claim = Some(claim_id.clone());
                json!({"body": body, "age": 3, "ttl": 300,
                       "href": format!("/v2/queues/{QUEUE}/messages/{id}?claim_id={claim_id}")})
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
        match messages.iter().position(|(message_id, _, _)| *message_id == id) {
            None => ResponseTemplate::new(204),
            Some(index) if messages[index].2 == claim_id => {
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
    let config = ZaqarSourceConfig {
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
    };
    ZaqarSource::new("source[0] zaqar".into(), &config, &TrustRoots::default()).unwrap()
}

async fn fetch(source: &mut ZaqarSource) -> Result<Fetched, SourceError> {
    source.fetch(&CancellationToken::new()).await
}

#[tokio::test]
async fn the_newest_message_is_the_document_and_all_are_deleted() {
    let queue = FakeQueue::default();
    let zaqar = zaqar_server(&queue).await;
    let keystone = keystone_for(&zaqar).await;
    let mut source = source(&keystone);
    for version in 1..=3 {
        queue.post(json!({"deployments": [], "version": version}));
    }
    assert_eq!(fetch(&mut source).await.unwrap(), Fetched::Document(json!({"deployments": [], "version": 3})));
    assert_eq!(queue.len(), 0, "every claimed message was deleted");
    // An empty queue: nothing changed, the last document stays.
    assert_eq!(fetch(&mut source).await.unwrap(), Fetched::Unchanged);
    queue.post(json!({"version": 4}));
    assert_eq!(fetch(&mut source).await.unwrap(), Fetched::Document(json!({"version": 4})));
    assert_eq!(testing::auth_count(&keystone).await, 1);

    let requests = zaqar.received_requests().await.unwrap();
    let claim = requests.iter().find(|request| request.method.as_str() == "POST").unwrap();
    assert_eq!(claim.url.query(), Some("limit=20"));
    assert_eq!(claim.headers["x-auth-token"], TOKEN);
    assert_eq!(claim.headers["x-project-id"], PROJECT_ID);
    assert_eq!(claim.headers["content-type"], "application/json");
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
    assert_eq!(fetch(&mut source(&keystone)).await.unwrap(), Fetched::Document(json!({"version": 44})));
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
async fn a_failed_delete_keeps_the_newest_message_for_later() {
    let queue = FakeQueue::default();
    let zaqar = zaqar_server(&queue).await;
    // The first delete (the oldest message) fails.
    Mock::given(method("DELETE"))
        .respond_with(ResponseTemplate::new(503))
        .up_to_n_times(1)
        .with_priority(1)
        .mount(&zaqar)
        .await;
    let keystone = keystone_for(&zaqar).await;
    queue.post(json!({"version": 1}));
    queue.post(json!({"version": 2}));
    let mut source = source(&keystone);
    let error = fetch(&mut source).await.unwrap_err();
    assert!(matches!(error, SourceError::Answered { method: "DELETE", status: 503, .. }) && error.is_transient());
    assert_eq!(queue.len(), 2, "nothing deleted: the newest is still queued (claimed until the claim lapses)");
    // The claim lapses (here: the fake forgets it) and the next poll reads the newest.
    queue.messages.lock().unwrap().iter_mut().for_each(|message| message.2 = None);
    assert_eq!(fetch(&mut source).await.unwrap(), Fetched::Document(json!({"version": 2})));
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
    let error = fetch(&mut source(&keystone)).await.unwrap_err();
    assert!(matches!(error, SourceError::NotObject { found: "string", .. }), "{error:?}");
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
