//! Tests of the outbox against a temp journal and wiremock servers on 127.0.0.1.

use anneal_protocol::{Deployment, HookResult};
use serde_json::{Value, json};
use wiremock::matchers::method;
use wiremock::{Mock, MockServer, ResponseTemplate};

use super::*;
use crate::journal::State;

struct Fixture {
    _state: tempfile::TempDir,
    journal: Arc<Journal>,
    outbox: Arc<Outbox>,
    moved: EngineMoved,
}

fn fixture() -> Fixture {
    let state = tempfile::tempdir().unwrap();
    let journal = Arc::new(Journal::open(state.path()).unwrap());
    let sender = SignalSender::with_timeouts(Duration::from_secs(2), Duration::from_secs(5));
    let moved = EngineMoved::new();
    let outbox = Arc::new(Outbox::new(journal.clone(), sender, moved.clone()));
    Fixture { _state: state, journal, outbox, moved }
}

fn finished(id: &str, inputs: Value) -> Entry {
    let deployment: Deployment =
        serde_json::from_value(json!({"id": id, "group": "script", "config": "", "inputs": inputs})).unwrap();
    let mut entry = Entry::seen(&deployment, 0);
    entry.started(1).unwrap();
    entry.finished(HookResult::from_process("done", "", 0), 2).unwrap();
    entry
}

fn finished_http(id: &str, server: &MockServer) -> Entry {
    finished(id, json!([{"name": "deploy_signal_id", "value": format!("{}/signal/{id}?sig=s", server.uri())}]))
}

async fn respond(server: &MockServer, status: u16, times: Option<u64>) {
    let mock = Mock::given(method("POST")).respond_with(ResponseTemplate::new(status));
    match times {
        Some(times) => mock.up_to_n_times(times).with_priority(1).mount(server).await,
        None => mock.with_priority(2).mount(server).await,
    }
}

async fn wait_for(journal: &Journal, id: &str, done: impl Fn(&Entry) -> bool) -> Entry {
    for _ in 0..100 {
        if let Some(entry) = journal.load(id).unwrap().filter(|entry| done(entry)) {
            return entry;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("entry {id} never reached the expected state: {:?}", journal.load(id).unwrap());
}

#[tokio::test]
async fn flush_delivers_finished_entries_and_records_them() {
    let server = MockServer::start().await;
    respond(&server, 200, None).await;
    let fixture = fixture();
    fixture.journal.write(&finished_http("one", &server)).unwrap();
    let no_signal = finished("quiet", json!([]));
    assert_eq!(no_signal.state, State::Signalled);
    fixture.journal.write(&no_signal).unwrap();
    let deployment = finished_http("unstarted", &server).deployment;
    fixture.journal.write(&Entry::seen(&deployment, 0)).unwrap();

    let summary = fixture.outbox.flush(3, &CancellationToken::new()).await.unwrap();
    assert_eq!(summary, OutboxSummary { delivered: 1, pending: 0, permanent: 0 });
    let entry = fixture.journal.load("one").unwrap().unwrap();
    assert_eq!(entry.state, State::Signalled);
    let signal = entry.signal.unwrap();
    assert_eq!(signal.attempts, 1);
    assert!(signal.delivered_at.is_some());
    assert_eq!(fixture.journal.load("unstarted").unwrap().unwrap().state, State::Seen);
    assert_eq!(server.received_requests().await.unwrap().len(), 1, "only the finished http entry is sent");

    let again = fixture.outbox.flush(3, &CancellationToken::new()).await.unwrap();
    assert_eq!(again, OutboxSummary::default(), "a signalled entry is never resent");
}

#[tokio::test]
async fn only_a_delivery_tells_the_polling_tasks_the_engine_may_have_moved() {
    let flaky = MockServer::start().await;
    respond(&flaky, 503, Some(1)).await;
    respond(&flaky, 200, None).await;
    let refusing = MockServer::start().await;
    respond(&refusing, 403, None).await;
    let fixture = fixture();
    let listener = fixture.moved.listen();
    fixture.journal.write(&finished_http("busy", &flaky)).unwrap();
    fixture.journal.write(&finished_http("refused", &refusing)).unwrap();
    let summary = fixture.outbox.flush(1, &CancellationToken::new()).await.unwrap();
    assert_eq!(summary, OutboxSummary { delivered: 0, pending: 1, permanent: 1 });
    assert!(!listener.has_changed().unwrap(), "neither a transient failure nor a refusal moved the engine");
    let summary = fixture.outbox.flush(1, &CancellationToken::new()).await.unwrap();
    assert_eq!(summary, OutboxSummary { delivered: 1, pending: 0, permanent: 1 });
    assert!(listener.has_changed().unwrap(), "a delivery may have released the next deployment");
}

#[tokio::test]
async fn flush_delivers_more_entries_than_it_sends_at_once() {
    let server = MockServer::start().await;
    respond(&server, 200, None).await;
    let fixture = fixture();
    let ids: Vec<String> = (0..FLUSH_PARALLEL * 2 + 3).map(|index| format!("many-{index}")).collect();
    for id in &ids {
        fixture.journal.write(&finished_http(id, &server)).unwrap();
    }
    let summary = fixture.outbox.flush(3, &CancellationToken::new()).await.unwrap();
    assert_eq!(summary, OutboxSummary { delivered: ids.len(), pending: 0, permanent: 0 });
    for id in &ids {
        assert_eq!(fixture.journal.load(id).unwrap().unwrap().state, State::Signalled, "{id}");
    }
    assert_eq!(server.received_requests().await.unwrap().len(), ids.len(), "each entry is sent once");
}

#[tokio::test]
async fn flush_retries_transient_failures_then_succeeds() {
    let server = MockServer::start().await;
    respond(&server, 503, Some(1)).await;
    respond(&server, 200, None).await;
    let fixture = fixture();
    fixture.journal.write(&finished_http("retry", &server)).unwrap();
    let summary = fixture.outbox.flush(3, &CancellationToken::new()).await.unwrap();
    assert_eq!(summary.delivered, 1);
    let entry = fixture.journal.load("retry").unwrap().unwrap();
    assert_eq!((entry.state, entry.signal.unwrap().attempts), (State::Signalled, 2));
}

#[tokio::test]
async fn flush_leaves_exhausted_entries_pending_with_their_error() {
    let server = MockServer::start().await;
    respond(&server, 500, None).await;
    let fixture = fixture();
    fixture.journal.write(&finished_http("down", &server)).unwrap();
    let summary = fixture.outbox.flush(2, &CancellationToken::new()).await.unwrap();
    assert_eq!(summary, OutboxSummary { delivered: 0, pending: 1, permanent: 0 });
    let entry = fixture.journal.load("down").unwrap().unwrap();
    assert_eq!(entry.state, State::Finished);
    let signal = entry.signal.unwrap();
    assert_eq!(signal.attempts, 2);
    assert!(signal.last_error.unwrap().contains("500"));
    assert!(signal.next_attempt_at.is_some());
}

#[tokio::test]
async fn permanent_failures_are_recorded_and_not_retried() {
    let server = MockServer::start().await;
    Mock::given(method("POST")).respond_with(ResponseTemplate::new(403)).expect(1).mount(&server).await;
    let fixture = fixture();
    fixture.journal.write(&finished_http("refused", &server)).unwrap();
    let summary = fixture.outbox.flush(5, &CancellationToken::new()).await.unwrap();
    assert_eq!(summary, OutboxSummary { delivered: 0, pending: 0, permanent: 1 });
    let summary = fixture.outbox.flush(5, &CancellationToken::new()).await.unwrap();
    assert_eq!(summary.permanent, 1, "still counted, not resent");
    let entry = fixture.journal.load("refused").unwrap().unwrap();
    assert_eq!(entry.state, State::Finished);
    assert!(entry.signal.unwrap().permanent_failure.unwrap().contains("403"));
}

#[tokio::test]
async fn flush_after_shutdown_sends_nothing() {
    let server = MockServer::start().await;
    Mock::given(method("POST")).respond_with(ResponseTemplate::new(200)).expect(0).mount(&server).await;
    let fixture = fixture();
    fixture.journal.write(&finished_http("later", &server)).unwrap();
    let shutdown = CancellationToken::new();
    shutdown.cancel();
    let summary = fixture.outbox.flush(3, &shutdown).await.unwrap();
    assert_eq!(summary.pending, 1);
    assert_eq!(fixture.journal.load("later").unwrap().unwrap().signal.unwrap().attempts, 0);
}

#[tokio::test]
async fn run_delivers_when_woken_and_stops_on_shutdown() {
    let server = MockServer::start().await;
    respond(&server, 200, None).await;
    let fixture = fixture();
    let wake = Arc::new(Notify::new());
    let shutdown = CancellationToken::new();
    let outbox = fixture.outbox.clone();
    let task = tokio::spawn({
        let (wake, shutdown) = (wake.clone(), shutdown.clone());
        async move { outbox.run(wake, shutdown).await }
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    fixture.journal.write(&finished_http("woken", &server)).unwrap();
    wake.notify_one();
    wait_for(&fixture.journal, "woken", |entry| entry.state == State::Signalled).await;
    shutdown.cancel();
    tokio::time::timeout(Duration::from_secs(2), task).await.unwrap().unwrap();
}

#[tokio::test]
async fn run_retries_after_backoff_and_leaves_permanent_failures_alone() {
    let server = MockServer::start().await;
    respond(&server, 503, Some(1)).await;
    respond(&server, 200, None).await;
    let refusing = MockServer::start().await;
    Mock::given(method("POST")).respond_with(ResponseTemplate::new(404)).expect(1).mount(&refusing).await;
    let fixture = fixture();
    fixture.journal.write(&finished_http("flaky", &server)).unwrap();
    fixture.journal.write(&finished_http("gone", &refusing)).unwrap();
    let wake = Arc::new(Notify::new());
    let shutdown = CancellationToken::new();
    let outbox = fixture.outbox.clone();
    let task = tokio::spawn({
        let (wake, shutdown) = (wake.clone(), shutdown.clone());
        async move { outbox.run(wake, shutdown).await }
    });
    let flaky = wait_for(&fixture.journal, "flaky", |entry| entry.state == State::Signalled).await;
    assert_eq!(flaky.signal.unwrap().attempts, 2);
    wake.notify_one();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let gone = fixture.journal.load("gone").unwrap().unwrap();
    assert!(gone.permanently_failed(), "{gone:?}");
    shutdown.cancel();
    tokio::time::timeout(Duration::from_secs(2), task).await.unwrap().unwrap();
}

/// Writes `entry` as a previous agent process left it: straight to its file, unknown to the
/// journal's index until a scan finds it.
fn left_by_previous_process(journal: &Journal, entry: &Entry) {
    let path = journal.path_of(&entry.id).unwrap();
    std::fs::write(path, serde_json::to_vec(entry).unwrap()).unwrap();
}

#[tokio::test]
async fn passes_read_only_the_undelivered_entries_not_the_whole_journal() {
    const DELIVERED: usize = 2_000;
    let server = MockServer::start().await;
    respond(&server, 503, Some(1)).await;
    respond(&server, 200, None).await;
    let fixture = fixture();
    for index in 0..DELIVERED {
        let mut entry = finished_http(&format!("done-{index}"), &server);
        entry.delivery_attempted(DeliveryOutcome::Delivered { status: 200 }, 3);
        left_by_previous_process(&fixture.journal, &entry);
    }
    left_by_previous_process(&fixture.journal, &finished_http("owed", &server));
    // The start-up scan the executor makes reads everything, once.
    assert_eq!(fixture.journal.load_all().unwrap().len(), DELIVERED + 1);
    let after_scan = fixture.journal.entries_read();

    // A daemon pass: the transient failure leaves "owed" pending; one entry read.
    let next_due = fixture.outbox.deliver_due(&CancellationToken::new()).await.unwrap();
    assert!(next_due.is_some(), "the retry is scheduled");
    assert_eq!(fixture.journal.entries_read() - after_scan, 1, "a pass reads the undelivered entry only");

    let summary = fixture.outbox.flush(3, &CancellationToken::new()).await.unwrap();
    assert_eq!(summary, OutboxSummary { delivered: 1, pending: 0, permanent: 0 });
    assert_eq!(fixture.journal.entries_read() - after_scan, 2, "flush reads the undelivered entry only");
    assert_eq!(fixture.journal.load("owed").unwrap().unwrap().state, State::Signalled);

    let idle = fixture.journal.entries_read();
    assert_eq!(fixture.outbox.deliver_due(&CancellationToken::new()).await.unwrap(), None);
    assert_eq!(fixture.journal.entries_read(), idle, "nothing owed: nothing read");
}

#[tokio::test]
async fn a_signal_left_undelivered_by_a_crashed_process_is_found_without_a_start_up_load() {
    let server = MockServer::start().await;
    respond(&server, 200, None).await;
    let fixture = fixture();
    let mut refused = finished_http("refused", &server);
    refused.delivery_attempted(DeliveryOutcome::Permanent { error: "410 Gone".into() }, 3);
    left_by_previous_process(&fixture.journal, &refused);
    left_by_previous_process(&fixture.journal, &finished_http("owed", &server));
    // No load_all first: the outbox's first pass scans the journal itself.
    let summary = fixture.outbox.flush(3, &CancellationToken::new()).await.unwrap();
    assert_eq!(summary, OutboxSummary { delivered: 1, pending: 0, permanent: 1 });
    assert_eq!(server.received_requests().await.unwrap().len(), 1);
}
