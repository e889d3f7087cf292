//! Scenario 2, update and delete of the fleet stack (`scenario/template.yaml`), after a shim
//! restart: an update that changes one config (monitor's script, through `monitor_interval`)
//! and one input (web's `site_name`) reruns exactly those two deployments, the component with
//! its UPDATE config, and a repeated update reruns nothing;
//! `stack delete --wait` runs the DELETE actions (db's script, the component's DELETE config)
//! and leaves the stack DELETE_COMPLETE: gone from `show`, its events ending with it.

mod scenario;

use scenario::{Record, STACK, Scenario, event_index, event_statuses, position};

const ENDPOINT: &str = "http://app.internal:8080";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn update_reruns_only_what_changed_and_delete_runs_delete_configs() {
    let mut scenario = Scenario::start().await;
    scenario.create().await;
    let created = scenario.records().len();
    assert_eq!(created, 8, "{:#?}", scenario.records());
    // The agents ride through a shim restart: their next long-poll reaches the new process.
    scenario.shim.restart().await;

    scenario.update(&["monitor_interval=10", "site_name=mall"]).await;
    let mut updated = summary(&scenario.records()[created..]);
    updated.sort();
    assert_eq!(updated, ["vm1 monitor UPDATE", "vm5 web UPDATE"], "only the changed ones reran");
    let outputs = scenario.outputs().await;
    assert_eq!(outputs["check"], format!("every 10s: {ENDPOINT}"), "the new config ran");
    assert_eq!(outputs["page"], format!("updated mall for {ENDPOINT}"), "the component's UPDATE config ran");
    assert_eq!(outputs["backends"], "db.internal:5432,cache.internal:6379,amqp://queue.internal:5672");
    let show = scenario.shim.cli_json(&["stack", "show", STACK, "--json"]).await;
    assert_eq!(show["status"], "UPDATE_COMPLETE", "{show}");

    // An update that changes nothing reruns nothing.
    scenario.update(&["monitor_interval=10", "site_name=mall"]).await;
    assert_eq!(scenario.records().len(), created + 2, "{:#?}", scenario.records());

    let delete = scenario.shim.cli(&["stack", "delete", STACK, "--wait", "--timeout", "45"]).await;
    assert_eq!(delete.code, 0, "stack delete --wait: {delete:?}\n{}", scenario.fleet.logs());
    let deleted = scenario.records()[created + 2..].to_vec();
    let mut ran = summary(&deleted);
    ran.sort();
    assert_eq!(ran, ["vm1 db DELETE", "vm5 web DELETE"], "DELETE actions of db and of the component");
    check_deleted(&scenario).await;
}

/// `<server> <deployment> <action>` of each record.
fn summary(records: &[Record]) -> Vec<String> {
    records.iter().map(|record| format!("{} {} {}", record.server, record.deployment, record.action)).collect()
}

async fn check_deleted(scenario: &Scenario) {
    let show = scenario.shim.cli(&["stack", "show", STACK, "--json"]).await;
    assert_ne!(show.code, 0, "show of a deleted stack fails: {show:?}");
    assert!(show.stderr.contains("404") || show.stderr.contains("not found"), "a 404 names it: {show:?}");
    let statuses = event_statuses(&scenario.events().await);
    assert_eq!(statuses.last(), Some(&(STACK.to_string(), "DELETE_COMPLETE".to_string())), "{statuses:#?}");
    let delete_started = statuses
        .iter()
        .position(|(name, status)| name == STACK && status == "DELETE_IN_PROGRESS")
        .expect("a DELETE_IN_PROGRESS event");
    let update_complete = statuses.iter().rposition(|(name, status)| name == STACK && status == "UPDATE_COMPLETE");
    assert!(update_complete.is_some_and(|index| index < delete_started), "{statuses:#?}");
    let list = scenario.shim.cli_json(&["stack", "list", "--json"]).await;
    assert_eq!(list, serde_json::json!([]), "no stack is left");
    for server in ["vm1", "vm5"] {
        let rows = scenario.fleet.agent(server).status().await;
        assert!(rows.iter().all(|row| row["signal"] == "delivered"), "{server}: {rows:#?}");
    }
}

/// Heat deletes in reverse dependency order ("cleanup of a requirement waits for cleanup of its
/// requirers", Heat's convergence design; see docs/templates.md "Delete"): web consumes app's output, which consumes
/// db's, so db's DELETE action must not start before web's has finished.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_runs_delete_actions_in_reverse_dependency_order() {
    let scenario = Scenario::start().await;
    scenario.create().await;
    let created = scenario.records().len();
    let delete = scenario.shim.cli(&["stack", "delete", STACK, "--wait", "--timeout", "45"]).await;
    assert_eq!(delete.code, 0, "stack delete --wait: {delete:?}");
    let statuses = event_statuses(&scenario.events().await);
    let web_deleted = event_index(&statuses, "web", "DELETE_COMPLETE");
    let db_deleting = event_index(&statuses, "db", "DELETE_IN_PROGRESS");
    assert!(web_deleted < db_deleting, "db's DELETE started before web's finished: {statuses:?}");
    let deleted = scenario.records()[created..].to_vec();
    assert!(position(&deleted, "web", "DELETE") < position(&deleted, "db", "DELETE"), "{deleted:#?}");
}
