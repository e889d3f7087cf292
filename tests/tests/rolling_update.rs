//! A SoftwareDeploymentGroup's update policy with the real anneal-shim and three real
//! anneal-agent processes: `batch_create` (two members, a pause, the third) and
//! `rolling_update` with `max_batch_size: 1, pause_time: 1`, which updates one member at a
//! time in Heat's order (the highest index in `servers` first: c, b, a), each batch starting
//! only after the previous one finished and the pause passed. The agents' script records the
//! start and end time of each run.

use std::path::Path;

use anneal_tests::{AgentSettings, Fleet, Shim};

const STACK: &str = "rolling";

const TEMPLATE: &str = r##"
heat_template_version: 2018-08-31
parameters:
  message: {type: string, default: one}
resources:
  config:
    type: OS::Heat::SoftwareConfig
    properties:
      group: script
      inputs: [{name: message}]
      config: |
        #!/bin/sh
        echo "$(date +%s.%N) $deploy_server_id $deploy_action start" >> "$ANNEAL_TEST_LOG"
        sleep 0.3
        echo "$(date +%s.%N) $deploy_server_id $deploy_action end" >> "$ANNEAL_TEST_LOG"
  group:
    type: OS::Heat::SoftwareDeploymentGroup
    update_policy:
      batch_create: {max_batch_size: 2, pause_time: 1}
      rolling_update: {max_batch_size: 1, pause_time: 1}
    properties:
      config: {get_resource: config}
      servers: {a: vm1, b: vm2, c: vm3}
      input_values: {message: {get_param: message}}
"##;

/// One run as the script logged it.
#[derive(Debug)]
struct Run {
    server: String,
    action: String,
    start: f64,
    end: f64,
}

/// The runs of `action`, in the order they started.
fn runs(log: &Path, action: &str) -> Vec<Run> {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let mut runs: Vec<Run> = Vec::new();
    for line in text.lines() {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let [time, server, logged, edge] = fields[..] else { panic!("a log line: {line:?}") };
        let time: f64 = time.parse().unwrap_or_else(|_| panic!("a time in {line:?}"));
        if logged != action {
            continue;
        }
        match edge {
            "start" => runs.push(Run { server: server.into(), action: logged.into(), start: time, end: f64::NAN }),
            _ => {
                let run = runs.iter_mut().rev().find(|run| run.server == server).expect("a start before the end");
                run.end = time;
            }
        }
    }
    runs
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batches_run_one_after_another_in_heats_order() {
    let shim = Shim::start().await;
    let log = shim.dir().join("runs.log");
    let settings = AgentSettings::default().hook_env("ANNEAL_TEST_LOG", &log.display().to_string());
    let fleet = Fleet::start(&shim, &["vm1", "vm2", "vm3"], &settings).await;
    let template = shim.write_template("rolling.yaml", TEMPLATE);
    let template = template.to_str().expect("a UTF-8 path");

    let create = ["stack", "create", STACK, "--template", template, "--wait", "--timeout", "60"];
    let output = shim.cli(&create).await;
    assert_eq!(output.code, 0, "stack create --wait: {output:?}\n{}", fleet.logs());
    let created = runs(&log, "CREATE");
    let mut first: Vec<&str> = created[..2].iter().map(|run| run.server.as_str()).collect();
    first.sort();
    assert_eq!(first, ["vm1", "vm2"], "the first batch is a and b: {created:#?}");
    assert_eq!(created[2].server, "vm3", "{created:#?}");
    let first_done = created[0].end.max(created[1].end);
    assert!(created[2].start >= first_done + 1.0, "c starts after the batch and the pause: {created:#?}");

    let update =
        ["stack", "update", STACK, "--template", template, "--param", "message=two", "--wait", "--timeout", "60"];
    let output = shim.cli(&update).await;
    assert_eq!(output.code, 0, "stack update --wait: {output:?}\n{}", fleet.logs());
    let updated = runs(&log, "UPDATE");
    let order: Vec<&str> = updated.iter().map(|run| run.server.as_str()).collect();
    assert_eq!(order, ["vm3", "vm2", "vm1"], "c, b, a: the highest index first: {updated:#?}");
    for pair in updated.windows(2) {
        assert!(pair[1].start >= pair[0].end + 1.0, "one batch after the other, 1 s apart: {updated:#?}");
        assert_eq!(pair[1].action, "UPDATE");
    }
    let show = shim.cli_json(&["stack", "show", STACK, "--json"]).await;
    assert_eq!(show["status"], "UPDATE_COMPLETE", "{show}");
}
