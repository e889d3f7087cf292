//! Tests of the outbox choosing where an HTTP signal goes (see `signal::route`), against a temp
//! journal, wiremock servers and closed ports on 127.0.0.1: the next replica after a host
//! failure, the URL of a newer document, and neither for an origin no source lists.

use anneal_protocol::{Deployment, HookResult};
use serde_json::json;
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

use super::*;
use crate::journal::State;
use crate::signal::route::Replicas;

const TOKEN: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

struct Fixture {
    _state: tempfile::TempDir,
    journal: Arc<Journal>,
    outbox: Outbox,
    router: Arc<SignalRouter>,
}

/// An outbox whose router knows one source listing `origins` (each with a metadata path).
fn fixture(origins: &[&str]) -> Fixture {
    let state = tempfile::tempdir().unwrap();
    let journal = Arc::new(Journal::open(state.path()).unwrap());
    let urls: Vec<String> = origins.iter().map(|origin| format!("{origin}/v1/servers/vm/metadata")).collect();
    let router = Arc::new(SignalRouter::new(Replicas::new([urls.as_slice()])));
    let sender = SignalSender::with_timeouts(Duration::from_secs(2), Duration::from_secs(5));
    let outbox = Outbox::new(journal.clone(), sender, EngineMoved::new()).with_router(router.clone());
    Fixture { _state: state, journal, outbox, router }
}

fn deployment(id: &str, signal_url: &str) -> Deployment {
    deployment_for("CREATE", id, signal_url)
}

fn deployment_for(action: &str, id: &str, signal_url: &str) -> Deployment {
    let inputs = json!([
        {"name": "deploy_action", "value": action},
        {"name": "deploy_signal_id", "value": signal_url}
    ]);
    serde_json::from_value(json!({"id": id, "group": "script", "config": "", "inputs": inputs})).unwrap()
}

fn finished(id: &str, signal_url: &str) -> Entry {
    let mut entry = Entry::seen(&deployment(id, signal_url), 0);
    entry.started(1).unwrap();
    entry.finished(HookResult::from_process("done", "", 0), 2).unwrap();
    entry
}

/// The origin of a loopback port nothing listens on.
fn closed_origin() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let origin = format!("http://{}", listener.local_addr().unwrap());
    drop(listener);
    origin
}

async fn accept(server: &MockServer, status: u16) {
    Mock::given(method("POST")).respond_with(ResponseTemplate::new(status)).mount(server).await;
}

#[tokio::test]
async fn a_dead_replica_sends_the_next_attempt_to_the_next_origin_with_the_same_path() {
    let dead = closed_origin();
    let live = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path(format!("/v1/signals/{TOKEN}")))
        .respond_with(ResponseTemplate::new(200))
        .expect(1)
        .mount(&live)
        .await;
    let fixture = fixture(&[&dead, &live.uri()]);
    fixture.journal.write(&finished("d1", &format!("{dead}/v1/signals/{TOKEN}?x=a%2Fb"))).unwrap();
    let summary = fixture.outbox.flush(2, &CancellationToken::new()).await.unwrap();
    assert_eq!(summary, OutboxSummary { delivered: 1, pending: 0, permanent: 0 });
    let request = &live.received_requests().await.unwrap()[0];
    assert_eq!(request.url.query(), Some("x=a%2Fb"), "path and query kept exactly");
    let entry = fixture.journal.load("d1").unwrap().unwrap();
    assert_eq!(entry.state, State::Signalled);
    let signal = entry.signal.unwrap();
    assert_eq!(signal.attempts, 2);
    assert_eq!(signal.target_url, Some(format!("{}/v1/signals/{TOKEN}?x=a%2Fb", live.uri())), "kept in the journal");
}

#[tokio::test]
async fn a_5xx_fails_over_and_a_4xx_does_not() {
    let (failing, refusing, live) = (MockServer::start().await, MockServer::start().await, MockServer::start().await);
    accept(&failing, 503).await;
    accept(&refusing, 404).await;
    accept(&live, 200).await;
    let fixture = fixture(&[&failing.uri(), &live.uri()]);
    fixture.journal.write(&finished("busy", &format!("{}/v1/signals/busy", failing.uri()))).unwrap();
    let summary = fixture.outbox.flush(2, &CancellationToken::new()).await.unwrap();
    assert_eq!(summary.delivered, 1);
    assert_eq!(live.received_requests().await.unwrap()[0].url.path(), "/v1/signals/busy");

    let refused = fixture_with_refusing(&refusing, &live).await;
    let entry = refused.journal.load("gone").unwrap().unwrap();
    assert!(entry.permanently_failed(), "{entry:?}");
    assert_eq!(entry.signal.unwrap().target_url, None, "a refusal is the service's answer, not a dead host");
}

async fn fixture_with_refusing(refusing: &MockServer, live: &MockServer) -> Fixture {
    let fixture = fixture(&[&refusing.uri(), &live.uri()]);
    fixture.journal.write(&finished("gone", &format!("{}/v1/signals/gone", refusing.uri()))).unwrap();
    let summary = fixture.outbox.flush(2, &CancellationToken::new()).await.unwrap();
    assert_eq!(summary.permanent, 1);
    fixture
}

#[tokio::test]
async fn an_origin_no_source_lists_is_retried_where_it_is() {
    let dead = closed_origin();
    let fixture = fixture(&[&closed_origin(), &closed_origin()]);
    let url = format!("{dead}/v1/signals/{TOKEN}");
    fixture.journal.write(&finished("d1", &url)).unwrap();
    let summary = fixture.outbox.flush(2, &CancellationToken::new()).await.unwrap();
    assert_eq!(summary.pending, 1);
    let entry = fixture.journal.load("d1").unwrap().unwrap();
    assert_eq!(entry.signal.as_ref().unwrap().target_url, None);
    assert_eq!(route::current_url(&entry), Some(url));
}

#[tokio::test]
async fn a_newer_documents_url_replaces_a_queued_signal_at_once() {
    let dead = closed_origin();
    let live = MockServer::start().await;
    accept(&live, 200).await;
    let fixture = fixture(&[]);
    fixture.journal.write(&finished("d1", &format!("{dead}/s/d1"))).unwrap();
    let shutdown = CancellationToken::new();
    let next_due = fixture.outbox.deliver_due(&shutdown).await.unwrap();
    assert!(next_due.is_some_and(|at| at > now_millis()), "the failed attempt is retried later");
    assert!(fixture.router.observe(&[deployment("d1", &format!("{dead}/s/d1"))]), "first seen");
    assert_eq!(fixture.outbox.deliver_due(&shutdown).await.unwrap(), next_due, "the same URL waits its turn");

    // Another action of the same id is another signal: its URL is not taken.
    fixture.router.observe(&[deployment_for("UPDATE", "d1", &format!("{}/s/d1", live.uri()))]);
    fixture.outbox.deliver_due(&shutdown).await.unwrap();
    assert!(live.received_requests().await.unwrap().is_empty());

    assert!(fixture.router.observe(&[deployment("d1", &format!("{}/s/d1", live.uri()))]));
    assert_eq!(fixture.outbox.deliver_due(&shutdown).await.unwrap(), None, "sent at once, and delivered");
    let entry = fixture.journal.load("d1").unwrap().unwrap();
    assert_eq!(entry.state, State::Signalled);
    assert_eq!(entry.signal.unwrap().document_url, Some(format!("{}/s/d1", live.uri())));
    assert_eq!(live.received_requests().await.unwrap()[0].url.path(), "/s/d1");
}
