//! Reliability: the metadata source goes down, then flaps. A standalone agent
//! polls an in-process `SwitchableServer` (plain polling, no long-poll) and signals to a second
//! one. The agent must keep running on its last good document (a hook that appears during the
//! outage still runs a deployment from it), retry on the schedule of `agent/src/backoff.rs`
//! (`source_retry`: 1 s doubling up to the poll interval, ±20% jitter; plain polls ±10%), deliver the signals
//! queued while the receiver was down, and apply a new document within one step of the source's
//! recovery. Fast-follow is off (`fast_follow = false`): its extra polls are not this schedule.
//!
//! The outage lasts a full minute; with a 4 s poll interval the backoff reaches its cap
//! after three failures (1 + 2 + 4 s) and then repeats the capped step. Request counts are
//! checked against an upper bound computed from the schedule, and every gap between two requests
//! against the step the schedule prescribes.

use std::path::Path;
use std::time::{Duration, Instant};

use anneal_tests::metadata::{document, hook_deployment, journal_entries, script_deployment};
use anneal_tests::{Agent, AgentSettings, Request, SwitchableServer, toml_string, wait_until};
use serde_json::Value;

/// The outage test's `poll_interval_secs`, which is also the cap of the error backoff: 1, 2, 4.
const OUTAGE_SCHEDULE: Schedule = Schedule { poll: Duration::from_secs(4) };
/// The flapping test polls more often, for enough gaps to see the jitter in.
const FLAPPING_SCHEDULE: Schedule = Schedule { poll: Duration::from_secs(2) };
const OUTAGE: Duration = Duration::from_secs(60);
const FLAPPING: Duration = Duration::from_secs(12);
const FLAP_DOWN: Duration = Duration::from_millis(2500);
const FLAP_UP: Duration = Duration::from_millis(1000);
/// Lateness allowed on a timer of the agent (a loaded 2-core machine); never on the early side.
const TIMER_SLACK: Duration = Duration::from_millis(1500);
/// From the request that fetches a new document to its hook's signal arriving.
const APPLY_SLACK: Duration = Duration::from_secs(5);
const LATE_HOOK: &str = "#!/bin/sh\ncat > /dev/null\necho '{\"deploy_status_code\": 0}'\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn outage_keeps_the_last_document_and_queued_signals_are_delivered() {
    let receiver = SwitchableServer::start().await;
    receiver.set_up(false);
    let source = SwitchableServer::start().await;
    let signal = |id: &str| format!("{}/signal/{id}", receiver.url());
    let mut deployments = vec![
        script_deployment("quick", "#!/bin/sh\necho quick\n", &signal("quick")),
        script_deployment("slow", "#!/bin/sh\nsleep 2\necho slow\n", &signal("slow")),
        hook_deployment("late", "late", &signal("late")),
    ];
    source.set_document(document(&deployments));
    let dir = tempfile::tempdir().expect("temp dir");
    let mut agent = start_agent(dir.path(), &source, OUTAGE_SCHEDULE);

    wait_for_state(&agent, "quick", &["finished", "signalled"], Duration::from_secs(20)).await;
    source.set_up(false);
    let down_at = Instant::now();
    // `slow` finishes during the outage and its signal fails against the receiver, also down.
    wait_until(Duration::from_secs(20), "slow's signal failed at least once", || async {
        let entry = entry(&agent, "slow")?;
        (entry["signal"]["attempts"].as_u64() >= Some(1)).then_some(())
    })
    .await;
    // A hook installed now runs `late` from the last good document: the source is still down.
    agent.install_hook("late", LATE_HOOK);
    wait_for_state(&agent, "late", &["finished"], Duration::from_secs(20)).await;
    receiver.set_up(true);
    wait_until(Duration::from_secs(40), "the queued signals are delivered", || async {
        let ids = ["quick", "slow", "late"];
        ids.iter().all(|id| !receiver.answered("POST", &format!("/signal/{id}")).is_empty()).then_some(())
    })
    .await;
    tokio::time::sleep(OUTAGE.saturating_sub(down_at.elapsed())).await;
    let outage = down_at.elapsed();
    let during: Vec<Request> = source.requests().into_iter().filter(|request| request.at >= down_at).collect();

    assert!(agent.is_alive(), "the agent rides out the outage\n{}", agent.log_text());
    assert!(during.iter().all(|request| !request.answered), "the source was down throughout");
    let bound = OUTAGE_SCHEDULE.outage_request_bound(outage);
    eprintln!("outage of {outage:?}: {} requests to the source (schedule bound {bound})", during.len());
    assert!(during.len() <= bound, "{} requests in {outage:?}, more than the schedule allows ({bound})", during.len());
    assert!(during.len() >= 2, "the agent keeps retrying during the outage: {}", during.len());
    assert!(agent.log_text().contains("keeping its last good document"), "{}", agent.log_text());
    assert_eq!(cached_document(&agent), document(&deployments), "the cache still holds the last good document");
    OUTAGE_SCHEDULE.check(&source.requests());

    deployments.push(script_deployment("after", "#!/bin/sh\necho after\n", &signal("after")));
    source.set_document(document(&deployments));
    source.set_up(true);
    let applied = applied_within_one_step(OUTAGE_SCHEDULE, &source, &receiver, "after").await;
    eprintln!("new document applied {applied:?} after the source came back");
    check_final_journal(&agent, &receiver, &["quick", "slow", "late", "after"]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flapping_source_is_polled_on_a_bounded_jittered_schedule() {
    let receiver = SwitchableServer::start().await;
    let source = SwitchableServer::start().await;
    let signal = |id: &str| format!("{}/signal/{id}", receiver.url());
    let mut deployments = vec![script_deployment("first", "#!/bin/sh\necho first\n", &signal("first"))];
    source.set_document(document(&deployments));
    let dir = tempfile::tempdir().expect("temp dir");
    let mut agent = start_agent(dir.path(), &source, FLAPPING_SCHEDULE);
    wait_for_state(&agent, "first", &["signalled"], Duration::from_secs(20)).await;

    let flapping_from = Instant::now();
    while flapping_from.elapsed() < FLAPPING {
        source.set_up(false);
        tokio::time::sleep(FLAP_DOWN).await;
        source.set_up(true);
        tokio::time::sleep(FLAP_UP).await;
    }
    source.set_up(false);
    tokio::time::sleep(FLAP_DOWN).await;
    let flapped = flapping_from.elapsed();
    let requests = source.requests();
    let during = requests.iter().filter(|request| request.at >= flapping_from).count();
    let failed = requests.iter().filter(|request| request.at >= flapping_from && !request.answered).count();
    let bound = 1 + (flapped.as_secs_f64() / FLAPPING_SCHEDULE.min_step(1).as_secs_f64()).floor() as usize;
    eprintln!(
        "flapping for {flapped:?}: {during} requests ({failed} failed), {:.2}/s (bound {bound})",
        during as f64 / flapped.as_secs_f64()
    );
    assert!(during <= bound, "{during} requests while flapping for {flapped:?}; at most {bound}");
    assert!(failed >= 2, "the flapping was seen: {requests:?}");
    let ratios = FLAPPING_SCHEDULE.check(&requests);
    // Unjittered steps would all be 1.00 give or take a few milliseconds of latency.
    let spread = ratios.iter().cloned().fold(f64::MIN, f64::max) - ratios.iter().cloned().fold(f64::MAX, f64::min);
    assert!(ratios.len() >= 6 && spread > 0.01, "the steps are jittered: ratios {ratios:?}");
    assert!(agent.is_alive(), "the agent rides out the flapping\n{}", agent.log_text());

    deployments.push(script_deployment("second", "#!/bin/sh\necho second\n", &signal("second")));
    source.set_document(document(&deployments));
    source.set_up(true);
    let applied = applied_within_one_step(FLAPPING_SCHEDULE, &source, &receiver, "second").await;
    eprintln!("new document applied {applied:?} after the source came back");
    check_final_journal(&agent, &receiver, &["first", "second"]).await;
}

fn start_agent(dir: &Path, source: &SwitchableServer, schedule: Schedule) -> Agent {
    let url = format!("{}/metadata/vm", source.url());
    let sources = format!("[[source]]\nkind = \"http\"\nurl = {}\n", toml_string(&url));
    // The schedule checked here is the plain one and the error backoff: fast-follow (read again
    // after 1, 2, 4 s when a signal is delivered or the document changes) is off, and
    // tests/tests/fast_follow.rs covers it.
    let settings = AgentSettings::default()
        .line(&format!("poll_interval_secs = {}", schedule.poll.as_secs()))
        .line("fast_follow = false");
    let mut agent = Agent::standalone(dir, "vm", &settings, &sources);
    agent.start();
    agent
}

/// The agent's request schedule for one poll interval (`agent/src/source/poll.rs` and
/// `backoff::source_retry`): plain polls every `poll` ±10%; after the n-th error in a row, 1 s
/// doubling up to `poll`, ±20% (the agent never waits longer than `poll`; this bound allows 1.2x).
#[derive(Debug, Clone, Copy)]
struct Schedule {
    poll: Duration,
}

impl Schedule {
    /// The backoff after `failures` errors in a row, before jitter.
    fn backoff_base(self, failures: u32) -> Duration {
        Duration::from_secs(1u64 << failures.saturating_sub(1).min(16)).min(self.poll)
    }

    /// The pause before jitter after a request that was the `failures`-th error in a row (0: it
    /// succeeded, so a plain poll follows).
    fn base(self, failures: u32) -> Duration {
        if failures == 0 { self.poll } else { self.backoff_base(failures) }
    }

    fn spread(failures: u32) -> f64 {
        if failures == 0 { 0.1 } else { 0.2 }
    }

    /// The shortest pause the agent may take after such a request.
    fn min_step(self, failures: u32) -> Duration {
        self.base(failures).mul_f64(1.0 - Schedule::spread(failures))
    }

    /// The longest pause (before `TIMER_SLACK`) after such a request.
    fn max_step(self, failures: u32) -> Duration {
        self.base(failures).mul_f64(1.0 + Schedule::spread(failures))
    }

    /// The longest pause in any state: how long a recovery can go unnoticed.
    fn longest_step(self) -> Duration {
        self.max_step(0).max(self.max_step(u32::MAX))
    }

    /// The most requests an outage of `outage` can see: one, then one per shortest backoff step
    /// that fits (0.8 s, 1.6 s, 3.2 s, ... up to 0.8 × the poll interval each).
    fn outage_request_bound(self, outage: Duration) -> usize {
        let mut count = 1;
        let mut elapsed = Duration::ZERO;
        loop {
            elapsed += self.min_step(count as u32);
            if elapsed > outage {
                return count;
            }
            count += 1;
        }
    }

    /// Checks that every gap between two requests is the step prescribed after the first one;
    /// returns each gap's ratio to its unjittered step.
    fn check(self, requests: &[Request]) -> Vec<f64> {
        let mut failures = 0;
        let mut ratios = Vec::new();
        for pair in requests.windows(2) {
            failures = if pair[0].answered { 0 } else { failures + 1 };
            let gap = pair[1].at.duration_since(pair[0].at);
            let (shortest, longest) = (self.min_step(failures), self.max_step(failures) + TIMER_SLACK);
            assert!(
                gap >= shortest && gap <= longest,
                "after {failures} failures in a row the next request came {gap:?} later, not within \
                 {shortest:?}..{longest:?}: {requests:#?}"
            );
            ratios.push(gap.as_secs_f64() / self.base(failures).as_secs_f64());
        }
        eprintln!("{} gaps checked; step ratios {ratios:.2?}", ratios.len());
        ratios
    }
}

/// Waits for `id`'s signal after the source came back; asserts the first fetch came within one
/// step and the signal within one step plus the time to run; returns how long it took.
async fn applied_within_one_step(
    schedule: Schedule,
    source: &SwitchableServer,
    receiver: &SwitchableServer,
    id: &str,
) -> Duration {
    let up_at = Instant::now();
    let path = format!("/signal/{id}");
    let limit = schedule.longest_step() + TIMER_SLACK + APPLY_SLACK;
    wait_until(limit, &format!("{id} runs within one backoff step"), || async {
        (!receiver.answered("POST", &path).is_empty()).then_some(())
    })
    .await;
    let fetched = source.requests().into_iter().find(|request| request.at >= up_at && request.answered);
    let fetched = fetched.expect("the document was fetched").at.duration_since(up_at);
    let step = schedule.longest_step() + TIMER_SLACK;
    assert!(fetched <= step, "first fetch {fetched:?} after recovery; one step is at most {step:?}");
    up_at.elapsed()
}

/// Every deployment ran once, was delivered once, and the journal says so.
async fn check_final_journal(agent: &Agent, receiver: &SwitchableServer, ids: &[&str]) {
    // The receiver answered before the agent journaled the delivery.
    for id in ids {
        wait_for_state(agent, id, &["signalled"], Duration::from_secs(10)).await;
    }
    for id in ids {
        let posts = receiver.answered("POST", &format!("/signal/{id}"));
        assert_eq!(posts.len(), 1, "{id} was signalled exactly once: {posts:?}");
        assert_eq!(posts[0].json()["deploy_status_code"], 0, "{id} succeeded");
    }
    let entries = journal_entries(&agent.state_dir());
    assert_eq!(entries.len(), ids.len(), "{entries:#?}");
    for entry in &entries {
        assert_eq!(entry["state"], "signalled", "{entry}");
        assert_eq!(entry["run"]["attempt"], 1, "ran once: {entry}");
    }
}

/// The journal entry of `id`, if written.
fn entry(agent: &Agent, id: &str) -> Option<Value> {
    journal_entries(&agent.state_dir()).into_iter().find(|entry| entry["id"] == id)
}

async fn wait_for_state(agent: &Agent, id: &str, states: &[&str], limit: Duration) {
    let what = format!("{id} is {states:?} (log: {})", agent.log_path().display());
    wait_until(limit, &what, || async {
        let entry = entry(agent, id)?;
        states.iter().any(|state| entry["state"] == *state).then_some(())
    })
    .await;
}

/// The document in the agent's only source cache file.
fn cached_document(agent: &Agent) -> Value {
    let dir = agent.state_dir().join("sources");
    let files: Vec<_> = std::fs::read_dir(&dir).expect("cache dir").flatten().collect();
    assert_eq!(files.len(), 1, "one cache file: {files:?}");
    let cached: Value = serde_json::from_slice(&std::fs::read(files[0].path()).expect("read cache")).expect("JSON");
    cached["document"].clone()
}
