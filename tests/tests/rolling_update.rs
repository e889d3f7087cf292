//! A SoftwareDeploymentGroup's update policy with the real anneal-shim and three real
//! anneal-agent processes: `batch_create` (two members, a pause, the third) and
//! `rolling_update` with `max_batch_size: 1, pause_time: 1`, which updates one member at a
//! time in Heat's order (the highest index in `servers` first: c, b, a), each batch starting
//! only after the previous one finished and the pause passed. The agents' script records the
//! start and end time of each run.

mod seed_case;

use std::path::Path;
use std::time::Duration;

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

/// The runs of `action`, in the order they started (the script logs the action where the
/// seed case logs its message).
fn runs(log: &Path, action: &str) -> Vec<seed_case::Run> {
    seed_case::runs(log).into_iter().filter(|run| run.message == action).collect()
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
        assert_eq!(pair[1].message, "UPDATE");
    }
    let show = shim.cli_json(&["stack", "show", STACK, "--json"]).await;
    assert_eq!(show["status"], "UPDATE_COMPLETE", "{show}");
}

use seed_case::{ROLLBACK_TEMPLATE, last_messages, logged};

async fn start_rolling(shim: &Shim, log: &Path) -> (Fleet, String) {
    let settings = AgentSettings::default().hook_env("ANNEAL_TEST_LOG", &log.display().to_string());
    let fleet = Fleet::start(shim, &["vm1", "vm2", "vm3"], &settings).await;
    let template = shim.write_template("rollback.yaml", ROLLBACK_TEMPLATE);
    let template = template.to_str().expect("a UTF-8 path").to_string();
    let create = ["stack", "create", STACK, "--template", &template, "--param", "message=one", "--enable-rollback"];
    let output = shim.cli(&[&create[..], &["--wait", "--timeout", "60"]].concat()).await;
    assert_eq!(output.code, 0, "stack create --wait: {output:?}\n{}", fleet.logs());
    (fleet, template)
}

/// The failure rolls the group back in its own batches; a shim killed (SIGKILL) mid-rollback
/// finishes it after its restart; every server's last run is the previous config, and the
/// member the update never reached ran nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_rolling_update_rolls_back_across_a_shim_crash_to_the_previous_config() {
    let mut shim = Shim::start().await;
    let log = shim.dir().join("runs.log");
    let (fleet, template) = start_rolling(&shim, &log).await;
    shim.cli_ok(&["stack", "update", STACK, "--template", &template, "--param", "message=bad"]).await;
    anneal_tests::wait_until(Duration::from_secs(30), "the rollback starts", || async {
        (shim.stack_status(STACK).await == "ROLLBACK_IN_PROGRESS").then_some(())
    })
    .await;
    shim.crash().await;
    shim.start_again().await;
    let show = shim.settled(STACK, Duration::from_secs(45)).await;
    assert_eq!(show["status"], "ROLLBACK_COMPLETE", "{show}\n{}", fleet.logs());
    let expected =
        [("vm1", "one"), ("vm2", "one"), ("vm3", "one")].map(|(server, message)| (server.into(), message.into()));
    assert_eq!(last_messages(&log), expected, "{:#?}", logged(&log));
    let vm1_runs = logged(&log).into_iter().filter(|line| line.starts_with("vm1 ")).count();
    assert_eq!(vm1_runs, 1, "vm1 was never reached: its create only: {:#?}", logged(&log));
    assert!(logged(&log).contains(&"vm3 UPDATE bad".to_string()), "vm3 ran the update first: {:#?}", logged(&log));
}

/// `stack cancel --wait` during the pause after the first batch: nothing further is published,
/// the batch that ran is rolled back, and the update's own `--wait` ends with exit 1.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancel_mid_rollout_publishes_nothing_further_and_rolls_back() {
    let shim = Shim::start().await;
    let log = shim.dir().join("runs.log");
    let (fleet, template) = start_rolling(&shim, &log).await;
    let update = ["stack", "update", STACK, "--template", &template, "--param", "message=two", "--wait"];
    let cancel = async {
        anneal_tests::wait_until(Duration::from_secs(30), "vm3 runs the update", || async {
            logged(&log).contains(&"vm3 UPDATE two".to_string()).then_some(())
        })
        .await;
        shim.cli(&["stack", "cancel", STACK, "--wait", "--timeout", "45"]).await
    };
    let update = [&update[..], &["--timeout", "60"]].concat();
    let (updated, cancelled) = tokio::join!(shim.cli(&update), cancel);
    assert_eq!(cancelled.code, 0, "stack cancel --wait: {cancelled:?}\n{}", fleet.logs());
    assert_eq!(updated.code, 1, "the update did not complete: {updated:?}");
    assert_eq!(shim.stack_status(STACK).await, "ROLLBACK_COMPLETE");
    let twos: Vec<String> = logged(&log).into_iter().filter(|line| line.ends_with(" two")).collect();
    assert_eq!(twos, ["vm3 UPDATE two"], "nothing after the cancel: {:#?}", logged(&log));
    let expected =
        [("vm1", "one"), ("vm2", "one"), ("vm3", "one")].map(|(server, message)| (server.into(), message.into()));
    assert_eq!(last_messages(&log), expected);

    let again = shim.cli(&["stack", "cancel", STACK]).await;
    assert_eq!(again.code, 1, "{again:?}");
    assert!(
        again.stderr.contains("is ROLLBACK_COMPLETE: only a CREATE or UPDATE in progress can be cancelled"),
        "{again:?}"
    );
}

/// The convergence seed case on one shim (see `seed_case`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_update_during_a_rollout_keeps_its_batches_and_changes_the_other_role_at_once() {
    let shim = Shim::start().await;
    let log = shim.dir().join("roles.log");
    let settings = AgentSettings::default().hook_env("ANNEAL_TEST_LOG", &log.display().to_string());
    let fleet = Fleet::start(&shim, &seed_case::SERVERS, &settings).await;
    seed_case::run(&shim, &shim, &log, || fleet.logs()).await;
}

/// `stack update --dry-run` against real agents: exit 2 with the runs it predicts (c, b, a, one
/// batch each), which are then exactly the runs the agents log; afterwards the same request
/// plans no change (exit 0). Nothing was sent by the plan itself.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dry_run_plans_exactly_the_runs_the_agents_then_make() {
    let shim = Shim::start().await;
    let log = shim.dir().join("runs.log");
    let (fleet, template) = start_rolling(&shim, &log).await;
    let update = ["stack", "update", STACK, "--template", &template, "--param", "message=two"];
    let dry = shim.cli(&[&update[..], &["--dry-run", "--json"]].concat()).await;
    assert_eq!(dry.code, 2, "changes: exit 2: {dry:?}");
    let plan: serde_json::Value = serde_json::from_str(&dry.stdout).expect("the plan as JSON");
    let planned: Vec<(String, String, u64)> = plan["runs"]
        .as_array()
        .expect("runs")
        .iter()
        .map(|run| {
            (
                run["server"].as_str().unwrap().to_string(),
                run["action"].as_str().unwrap().to_string(),
                run["batch"].as_u64().unwrap(),
            )
        })
        .collect();
    let expected =
        [("vm3", 1), ("vm2", 2), ("vm1", 3)].map(|(server, batch)| (server.to_string(), "UPDATE".to_string(), batch));
    assert_eq!(planned, expected, "{plan}");
    assert_eq!(logged(&log).len(), 3, "the plan ran nothing: {:#?}", logged(&log));
    let human = shim.cli(&[&update[..], &["--dry-run"]].concat()).await;
    assert!(human.stdout.contains("UPDATE group/c on vm3 [group batch 1] changes: message"), "{human:?}");
    assert!(human.stdout.contains("group group runs in 3 batches, 1 s apart"), "{human:?}");

    let output = shim.cli(&[&update[..], &["--wait", "--timeout", "60"]].concat()).await;
    assert_eq!(output.code, 0, "{output:?}\n{}", fleet.logs());
    let ran: Vec<String> = logged(&log)[3..].to_vec();
    assert_eq!(ran, ["vm3 UPDATE two", "vm2 UPDATE two", "vm1 UPDATE two"], "what the plan said, in its order");
    let again = shim.cli(&[&update[..], &["--dry-run"]].concat()).await;
    assert_eq!(again.code, 0, "no change: exit 0: {again:?}");
    assert!(again.stdout.contains("no deployment would run"), "{again:?}");
}
