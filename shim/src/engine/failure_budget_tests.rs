//! Failure budgets (`metadata.anneal.failure_budget` on a deployment group), in-process over
//! 1,000 members: 5 % of members failing within a 10 % budget completes the group and lists
//! exactly the failed set; 15 % fails it in the batch that crosses the budget, and no member of
//! a later batch is published; `stack update --existing` (the stored request again) re-runs only
//! the failed members. Without a budget one failure fails the group, as in Heat, and the group
//! shows FAILED. Helpers: `tests.rs`.

use std::collections::BTreeSet;

use serde_json::{Value, json};

use super::budget_tests::engine_with;
use super::sweeper;
use super::tests::{register, request, signal_token, status};
use super::transact::Engine;
use crate::model::{Service, StackRequest};
use crate::store::SqliteStore;
use crate::template::MaxResources;

/// An engine that takes a stack of 1,000 members (Heat's default limit is 1,000 resources).
fn engine_at(path: &std::path::Path) -> Engine<SqliteStore> {
    engine_with(path, |config| config.max_resources = MaxResources::from_option(-1).unwrap())
}

fn template(members: usize, batch: usize, budget: &str) -> String {
    let servers: Vec<String> = (0..members).map(|index| format!("m{index:04}: m{index:04}")).collect();
    format!(
        r##"
heat_template_version: 2018-08-31
parameters:
  message: {{type: string, default: one}}
resources:
  config:
    type: OS::Heat::SoftwareConfig
    properties: {{group: script, inputs: [{{name: message}}], config: "#!/bin/sh\necho $message\n"}}
  group:
    type: OS::Heat::SoftwareDeploymentGroup
    {budget}
    update_policy:
      batch_create: {{max_batch_size: {batch}}}
      rolling_update: {{max_batch_size: {batch}}}
    properties:
      config: {{get_resource: config}}
      servers: {{{servers}}}
      input_values: {{message: {{get_param: message}}}}
outputs:
  failed: {{value: {{get_attr: [group, failed_members]}}}}
"##,
        servers = servers.join(", ")
    )
}

fn names(members: usize) -> Vec<String> {
    (0..members).map(|index| format!("m{index:04}")).collect()
}

/// Every published entry of `servers`, as (server, entry).
async fn published(engine: &Engine<SqliteStore>, servers: &[String]) -> Vec<(String, Value)> {
    let mut all = Vec::new();
    for server in servers {
        let document = engine.metadata(server).await.unwrap();
        let body: Value = serde_json::from_str(&document.body).unwrap();
        for entry in body["deployments"].as_array().unwrap() {
            all.push((server.clone(), entry.clone()));
        }
    }
    all
}

/// Answers every entry not answered yet (by derived config id): `fails` decides the code.
/// Sweeps until nothing is due (a large group's queued members, its next batch). Returns the
/// servers answered in this round.
async fn answer_round(
    engine: &Engine<SqliteStore>,
    servers: &[String],
    answered: &mut BTreeSet<String>,
    fails: &dyn Fn(&str) -> bool,
) -> Vec<String> {
    let mut round = Vec::new();
    loop {
        while engine.transact(sweeper::sweep).await.unwrap() > 0 {}
        let fresh: Vec<(String, Value)> = published(engine, servers)
            .await
            .into_iter()
            .filter(|(_, entry)| !answered.contains(entry["id"].as_str().unwrap()))
            .collect();
        if fresh.is_empty() {
            return round;
        }
        for (server, entry) in fresh {
            answered.insert(entry["id"].as_str().unwrap().to_string());
            let code = if fails(&server) { 1 } else { 0 };
            engine.deployment_signal(&signal_token(&entry), json!({"deploy_status_code": code}), None).await.unwrap();
            round.push(server);
        }
    }
}

async fn group_row(engine: &Engine<SqliteStore>) -> crate::model::ResourceSummary {
    let detail = engine.show_stack("s").await.unwrap();
    detail.resources.into_iter().find(|resource| resource.name == "group").unwrap()
}

const BUDGET: &str = "metadata: {anneal: {failure_budget: {max_failure_percentage: 10}}}";

#[tokio::test]
async fn within_the_budget_the_group_completes_and_names_exactly_the_failed_members() {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine_at(&dir.path().join("shim.db"));
    let servers = names(1000);
    register(&engine, &servers.iter().map(String::as_str).collect::<Vec<_>>()).await;
    let text = template(1000, 250, BUDGET);
    engine.create_stack(request("s", &text, &[])).await.unwrap();
    let failing = |server: &str| server.ends_with('0') && server[1..].parse::<u32>().unwrap() % 20 == 0;
    let mut answered = BTreeSet::new();
    let ran = answer_round(&engine, &servers, &mut answered, &failing).await;
    assert_eq!(ran.len(), 1000);
    let detail = engine.show_stack("s").await.unwrap();
    assert_eq!(detail.summary.status, "CREATE_COMPLETE", "{}", detail.summary.status_reason);
    let expected: Vec<String> = servers.iter().filter(|server| failing(server)).cloned().collect();
    assert_eq!(expected.len(), 50, "5 %");
    assert_eq!(detail.outputs[0].value, json!(expected), "the attribute lists exactly the failed members");
    let group = group_row(&engine).await;
    assert!(group.status_reason.starts_with("all members done, 50 of 1000 failed within the failure budget"));

    // `--existing`: the stored request again. Only the 50 failed members run, and now succeed.
    engine.update_stack("s", StackRequest { existing: true, ..StackRequest::default() }).await.unwrap();
    let again = answer_round(&engine, &servers, &mut answered, &|_| false).await;
    assert_eq!(again, expected, "only the failed members run again");
    assert_eq!(status(&engine, "s").await, "UPDATE_COMPLETE");
    assert_eq!(engine.show_stack("s").await.unwrap().outputs[0].value, json!([]));
}

#[tokio::test]
async fn crossing_the_budget_fails_the_group_and_publishes_no_further_batch() {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine_at(&dir.path().join("shim.db"));
    let servers = names(1000);
    register(&engine, &servers.iter().map(String::as_str).collect::<Vec<_>>()).await;
    engine.create_stack(request("s", &template(1000, 100, BUDGET), &[])).await.unwrap();
    // 15 %: about 15 of every 100; the 101st failure comes in the seventh batch.
    let failing = |server: &str| server[1..].parse::<u32>().unwrap() % 20 < 3;
    let mut answered = BTreeSet::new();
    let ran = answer_round(&engine, &servers, &mut answered, &failing).await;
    assert_eq!(ran.len(), 700, "seven batches of 100 ran, the eighth was never published");
    let published_servers: BTreeSet<String> =
        published(&engine, &servers).await.into_iter().map(|(server, _)| server).collect();
    assert_eq!(published_servers.len(), 700);
    assert!(published_servers.iter().all(|server| server.as_str() < "m0700"), "batches in order");
    let detail = engine.show_stack("s").await.unwrap();
    assert_eq!(detail.summary.status, "CREATE_FAILED");
    let group = group_row(&engine).await;
    assert_eq!(group.status, "CREATE_FAILED");
    assert!(
        group.status_reason.starts_with("101 of 1000 member(s) failed, over the failure budget"),
        "{}",
        group.status_reason
    );
    assert!(detail.summary.status_reason.contains("over the failure budget (max_failure_percentage 10)"));
}

#[tokio::test]
async fn without_a_budget_one_failure_fails_the_group_as_in_heat() {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine_at(&dir.path().join("shim.db"));
    let servers = names(3);
    register(&engine, &servers.iter().map(String::as_str).collect::<Vec<_>>()).await;
    engine.create_stack(request("s", &template(3, 3, ""), &[])).await.unwrap();
    let mut answered = BTreeSet::new();
    answer_round(&engine, &servers, &mut answered, &|server| server == "m0001").await;
    assert_eq!(status(&engine, "s").await, "CREATE_FAILED");
    let group = group_row(&engine).await;
    assert_eq!((group.status.as_str(), group.status_reason.as_str()), ("CREATE_FAILED", "member group/m0001 failed"));
}

#[tokio::test]
async fn a_misspelt_or_out_of_range_budget_is_refused_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine_at(&dir.path().join("shim.db"));
    register(&engine, &["m0000"]).await;
    let cases = [
        ("metadata: {anneal: {failure_budget: {max_failure_percent: 10}}}", "unknown key \"max_failure_percent\""),
        ("metadata: {anneal: {failure_budjet: {max_failures: 1}}}", "unknown key \"failure_budjet\""),
        ("metadata: {anneal: {failure_budget: {max_failure_percentage: 150}}}", "from 0 to 100, not 150"),
        ("metadata: {anneal: {failure_budget: {max_failures: -1}}}", "0 or more, not -1"),
        ("metadata: {anneal: {failure_budget: {}}}", "give max_failures, max_failure_percentage or both"),
    ];
    for (budget, expected) in cases {
        let refused = engine.create_stack(request("s", &template(1, 1, budget), &[])).await.unwrap_err();
        assert!(refused.to_string().contains(expected), "{budget}: {refused}");
        assert!(refused.to_string().contains("resource group: metadata.anneal"), "{refused}");
    }
    assert!(engine.list_stacks().await.unwrap().is_empty(), "nothing stored");
    // Heat's own keys of `metadata` are not anneal's business.
    let other = "metadata: {owner: ops, anneal: {failure_budget: {max_failures: 0}}}";
    engine.create_stack(request("s", &template(1, 1, other), &[])).await.unwrap();
}
