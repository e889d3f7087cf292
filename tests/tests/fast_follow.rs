//! Fast-follow end to end (docs/metadata.md, "Fast-follow"): a standalone `anneal-agent run` with
//! `poll_interval_secs = 30` polls an in-process `SwitchableServer` (plain polling, no long-poll,
//! as Heat's APIs and a Swift temp URL are read) and signals to a second one. The test plays the
//! engine: each hop of a chain is released half a second after the previous hop's signal
//! arrives, with that hop's output as its input, as Heat releases a deployment whose inputs are
//! another's outputs. With fast-follow the chain converges in a few seconds; with
//! `fast_follow = false` the agent sees the next hop only at its next plain poll, ~30 s later.
//!
//! The first hop runs for `FIRST_HOP_SECS`, so that its signal comes after the fast-follow that
//! the agent's first document started (polls at about 1, 3, 7 and 15 s, then 31 s) and before
//! the plain poll: only the signal's own fast-follow can find the second hop in seconds.

use std::path::Path;
use std::time::{Duration, Instant};

use anneal_tests::metadata::{document, script_deployment};
use anneal_tests::{Agent, AgentSettings, Request, SwitchableServer, toml_string, wait_until};
use serde_json::{Value, json};

const POLL_INTERVAL_SECS: u64 = 30;
/// Past the first document's last fast-follow poll (15 s ±10%), well before the plain one (31 s
/// ±10%, so 27.9 s at the soonest).
const FIRST_HOP_SECS: u32 = 17;
/// How long after a hop's signal the fake engine publishes the next hop (Heat: about a second).
const RELEASE_DELAY: Duration = Duration::from_millis(500);
/// From the first hop's signal to the last one's, for two more hops: each takes the release
/// delay, a fast-follow step (~1 s, 2 s if the release missed the first) and the hop's own run.
/// Generous for a loaded 2-core machine, and shorter than the 10 s at least from the first hop's
/// signal (at 17 s or later) to the plain poll (27.9 s at the soonest).
const CHAIN_LIMIT: Duration = Duration::from_secs(8);
/// How long the opt-out test watches for a poll that fast-follow would have made.
const QUIET_WATCH: Duration = Duration::from_secs(8);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_three_hop_chain_converges_in_seconds_with_a_thirty_second_poll_interval() {
    let (source, receiver) = (SwitchableServer::start().await, SwitchableServer::start().await);
    let mut deployments = vec![hop(1, "start", FIRST_HOP_SECS, &receiver)];
    source.set_document(document(&deployments));
    let dir = tempfile::tempdir().expect("temp dir");
    let mut agent = start_agent(dir.path(), &source, &[]);

    let first = signal_of(&receiver, 1, Duration::from_secs(u64::from(FIRST_HOP_SECS) + 15)).await;
    let chain_started = Instant::now();
    let mut previous = first;
    for number in 2..=3 {
        deployments.push(release_after(&previous, number, &receiver).await);
        source.set_document(document(&deployments));
        previous = signal_of(&receiver, number, CHAIN_LIMIT).await;
    }
    let took = chain_started.elapsed();
    eprintln!("hops 2 and 3 converged {took:?} after hop 1's signal");
    assert!(took < CHAIN_LIMIT, "the chain took {took:?}\n{}", agent.log_text());
    assert_eq!(previous.json()["result"], "start>1>2>3", "each hop ran on the previous one's output");

    let gets = source.answered("GET", "/metadata");
    let gaps: Vec<Duration> = gets.windows(2).map(|pair| pair[1].at.duration_since(pair[0].at)).collect();
    eprintln!("{} polls, gaps {gaps:.2?}", gets.len());
    // Fast-follow never reads a source twice within a second (a little less at the server, whose
    // clock sees requests a few milliseconds off the agent's).
    assert!(gaps.iter().all(|gap| *gap >= Duration::from_millis(800)), "{gaps:.2?}");
    agent.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_fast_follow_off_the_next_hop_waits_for_the_plain_poll() {
    let (source, receiver) = (SwitchableServer::start().await, SwitchableServer::start().await);
    let mut deployments = vec![hop(1, "start", 0, &receiver)];
    source.set_document(document(&deployments));
    let dir = tempfile::tempdir().expect("temp dir");
    let mut agent = start_agent(dir.path(), &source, &["fast_follow = false"]);

    let first = signal_of(&receiver, 1, Duration::from_secs(20)).await;
    deployments.push(release_after(&first, 2, &receiver).await);
    source.set_document(document(&deployments));
    tokio::time::sleep(QUIET_WATCH).await;
    let gets = source.answered("GET", "/metadata");
    assert_eq!(gets.len(), 1, "only the first poll within {QUIET_WATCH:?}: {gets:?}");
    assert!(receiver.answered("POST", "/signal/hop2").is_empty(), "hop 2 not seen yet");
    agent.stop().await;
}

fn start_agent(dir: &Path, source: &SwitchableServer, lines: &[&str]) -> Agent {
    let url = format!("{}/metadata/vm", source.url());
    let sources = format!("[[source]]\nkind = \"http\"\nurl = {}\n", toml_string(&url));
    let mut settings = AgentSettings::default().line(&format!("poll_interval_secs = {POLL_INTERVAL_SECS}"));
    for line in lines {
        settings = settings.line(line);
    }
    let mut agent = Agent::standalone(dir, "vm", &settings, &sources);
    agent.start();
    agent
}

/// Hop `number`: after `sleep_secs`, appends `>number` to its input `previous` and returns that
/// as output `result`.
fn hop(number: u32, previous: &str, sleep_secs: u32, receiver: &SwitchableServer) -> Value {
    let script =
        format!("#!/bin/sh\nsleep {sleep_secs}\nprintf '%s>{number}' \"$previous\" > \"$heat_outputs_path.result\"\n");
    let mut deployment = script_deployment(&format!("hop{number}"), &script, &signal_url(receiver, number));
    deployment["inputs"].as_array_mut().expect("inputs").push(json!({"name": "previous", "value": previous}));
    deployment["outputs"] = json!([{"name": "result"}]);
    deployment
}

/// Hop `number`, released `RELEASE_DELAY` after the previous hop's signal arrived.
async fn release_after(signal: &Request, number: u32, receiver: &SwitchableServer) -> Value {
    tokio::time::sleep(RELEASE_DELAY.saturating_sub(signal.at.elapsed())).await;
    let output = signal.json()["result"].as_str().expect("the previous hop's result").to_string();
    hop(number, &output, 0, receiver)
}

fn signal_url(receiver: &SwitchableServer, number: u32) -> String {
    format!("{}/signal/hop{number}", receiver.url())
}

async fn signal_of(receiver: &SwitchableServer, number: u32, limit: Duration) -> Request {
    let path = format!("/signal/hop{number}");
    let signal = wait_until(limit, &format!("hop {number}'s signal"), || async {
        receiver.answered("POST", &path).into_iter().next()
    })
    .await;
    assert_eq!(signal.json()["deploy_status_code"], 0, "hop {number} succeeded: {}", signal.json());
    signal
}
