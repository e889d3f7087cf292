//! The convergence seed case, shared by `rolling_update` (one shim on SQLite) and `replicas`
//! (three replicas on PostgreSQL): roleA rolls over three servers one at a time with a pause;
//! during that pause a second update changes roleB's input (sent to `second`, another replica
//! where there are several). roleB must change at once, before roleA's next batch, while roleA
//! keeps one member per batch and its pause between them, and every member runs the new
//! config exactly once. Each script logs `<time> <server> <message> start|end`. Also the
//! rollback scenario's template (`ROLLBACK_TEMPLATE`), which both binaries run too.

#![allow(dead_code)]

use std::path::Path;
use std::time::Duration;

use anneal_tests::{Shim, wait_until};

pub const STACK: &str = "roles";
pub const SERVERS: [&str; 5] = ["a1", "a2", "a3", "b1", "b2"];
/// roleA's pause between batches, in seconds.
const PAUSE: f64 = 3.0;

const TEMPLATE: &str = r##"
heat_template_version: 2018-08-31
parameters:
  a: {type: string}
  b: {type: string}
resources:
  config:
    type: OS::Heat::SoftwareConfig
    properties:
      group: script
      inputs: [{name: message}]
      config: |
        #!/bin/sh
        echo "$(date +%s.%N) $deploy_server_id $message start" >> "$ANNEAL_TEST_LOG"
        sleep 0.2
        echo "$(date +%s.%N) $deploy_server_id $message end" >> "$ANNEAL_TEST_LOG"
  roleA:
    type: OS::Heat::SoftwareDeploymentGroup
    update_policy:
      rolling_update: {max_batch_size: 1, pause_time: 3}
    properties:
      config: {get_resource: config}
      servers: {a1: a1, a2: a2, a3: a3}
      input_values: {message: {get_param: a}}
  roleB:
    type: OS::Heat::SoftwareDeploymentGroup
    properties:
      config: {get_resource: config}
      servers: {b1: b1, b2: b2}
      input_values: {message: {get_param: b}}
"##;

/// One logged run: `<time> <server> <tag> start|end` lines, where the tag is what the script
/// logs (the message here, the action in `rolling_update`).
#[derive(Debug, Clone)]
pub struct Run {
    pub server: String,
    pub message: String,
    pub start: f64,
    pub end: f64,
}

/// Every run the log holds, in the order they started.
pub fn runs(log: &Path) -> Vec<Run> {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let mut runs: Vec<Run> = Vec::new();
    for line in text.lines() {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let [time, server, message, edge] = fields[..] else { panic!("a log line: {line:?}") };
        let time: f64 = time.parse().expect("a time");
        match edge {
            "start" => runs.push(Run { server: server.into(), message: message.into(), start: time, end: f64::NAN }),
            _ => {
                let run = runs.iter_mut().rev().find(|run| run.server == server).expect("a start before the end");
                run.end = time;
            }
        }
    }
    runs
}

fn finished(log: &Path, server: &str, message: &str) -> Option<Run> {
    runs(log).into_iter().find(|run| run.server == server && run.message == message && !run.end.is_nan())
}

/// Runs the seed case: creates on `first`, starts roleA's rollout there, sends the second
/// update to `second` during roleA's first pause; checks what ran, in what order.
pub async fn run(first: &Shim, second: &Shim, log: &Path, logs: impl Fn() -> String) {
    let template = first.write_template("roles.yaml", TEMPLATE);
    let template = template.to_str().expect("a UTF-8 path").to_string();
    let second_template = second.write_template("roles.yaml", TEMPLATE);
    let second_template = second_template.to_str().expect("a UTF-8 path").to_string();
    let create = ["stack", "create", STACK, "--template", &template, "--param", "a=1", "--param", "b=1"];
    let created = first.cli(&[&create[..], &["--wait", "--timeout", "60"]].concat()).await;
    assert_eq!(created.code, 0, "create: {created:?}\n{}", logs());

    let update = ["stack", "update", STACK, "--template", &template, "--param", "a=2", "--param", "b=1"];
    first.cli_ok(&update).await;
    let a3 = wait_until(Duration::from_secs(30), "a3 runs the new config", || async { finished(log, "a3", "2") }).await;
    // roleA pauses now; roleB's input changes during the pause, through the other shim.
    let both = ["stack", "update", STACK, "--template", &second_template, "--param", "a=2", "--param", "b=2"];
    let both = [&both[..], &["--wait", "--timeout", "60"]].concat();
    let updated = second.cli(&both).await;
    assert_eq!(updated.code, 0, "the second update: {updated:?}\n{}", logs());
    assert_eq!(first.stack_status(STACK).await, "UPDATE_COMPLETE");

    let all = runs(log);
    let new: Vec<&Run> = all.iter().filter(|run| run.message == "2").collect();
    let mut once: Vec<&str> = new.iter().map(|run| run.server.as_str()).collect();
    once.sort();
    assert_eq!(once, SERVERS, "every member ran the new config exactly once: {all:#?}");
    let run_of = |server: &str| *new.iter().find(|run| run.server == server).expect("a run");
    let (a2, a1) = (run_of("a2"), run_of("a1"));
    for role_b in ["b1", "b2"] {
        assert!(run_of(role_b).end <= a2.start, "{role_b} changed at once, before roleA's next batch: {all:#?}");
    }
    // One member per batch, each after the pause (what was left of it for a2).
    assert!(a2.start >= a3.end + PAUSE - 0.05, "a2 waits out a3's pause: {all:#?}");
    assert!(a1.start >= a2.end + PAUSE - 0.05, "a1 comes a pause after a2: {all:#?}");
}

/// A rolling update whose second batch fails on vm2, with rollback: vm2's script fails for the
/// message "bad"; each run that gets past that logs `<server> <action> <message>`.
pub const ROLLBACK_TEMPLATE: &str = r##"
heat_template_version: 2018-08-31
parameters:
  message: {type: string}
resources:
  config:
    type: OS::Heat::SoftwareConfig
    properties:
      group: script
      inputs: [{name: message}]
      config: |
        #!/bin/sh
        if [ "$message" = bad ] && [ "$deploy_server_id" = vm2 ]; then exit 3; fi
        sleep 0.3
        echo "$deploy_server_id $deploy_action $message" >> "$ANNEAL_TEST_LOG"
  group:
    type: OS::Heat::SoftwareDeploymentGroup
    update_policy:
      rolling_update: {max_batch_size: 1, pause_time: 1}
    properties:
      config: {get_resource: config}
      servers: {a: vm1, b: vm2, c: vm3}
      input_values: {message: {get_param: message}}
"##;

/// The logged runs, `<server> <action> <message>`, in order.
pub fn logged(log: &Path) -> Vec<String> {
    std::fs::read_to_string(log).unwrap_or_default().lines().map(str::to_string).collect()
}

/// The last message each server's runs logged.
pub fn last_messages(log: &Path) -> Vec<(String, String)> {
    let mut last = std::collections::BTreeMap::new();
    for line in logged(log) {
        let fields: Vec<&str> = line.split_whitespace().collect();
        last.insert(fields[0].to_string(), fields[2].to_string());
    }
    last.into_iter().collect()
}
