//! Scenario 1, fleet convergence: a real shim and five real agents (separate processes and
//! state dirs) converge `scenario/template.yaml` with `stack create --wait`: a fan-in over three
//! servers, a fan-out of one output to three deployments, a SoftwareComponent, a
//! StructuredConfig with get_input, and a wait condition (count 3) signalled by three servers'
//! scripts with `anneal-agent signal`. Asserts every output, the order the scripts ran in, the
//! events, and every agent's journal.

mod scenario;

use scenario::{STACK, Scenario, assert_ran_before, event_index, event_statuses};
use serde_json::{Value, json};

const ENDPOINT: &str = "http://app.internal:8080";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn five_agents_converge_a_stack_across_servers() {
    let scenario = Scenario::start().await;
    scenario.create().await;

    check_outputs(&scenario).await;
    check_execution_order(&scenario);
    check_events(&scenario).await;
    check_agent_journals(&scenario).await;
}

async fn check_outputs(scenario: &Scenario) {
    let outputs = scenario.outputs().await;
    assert_eq!(outputs["endpoint"], ENDPOINT);
    assert_eq!(outputs["backends"], "db.internal:5432,cache.internal:6379,amqp://queue.internal:5672", "fan-in");
    assert_eq!(outputs["page"], format!("created shop for {ENDPOINT}"), "the component's CREATE config ran");
    assert_eq!(outputs["check"], format!("every 30s: {ENDPOINT}"), "str_replace into the config");
    assert_eq!(
        outputs["rendered"],
        format!(
            r#"{{"banner": "welcome", "greetings": ["welcome", "fixed"], "upstream": "{ENDPOINT}", "workers": 4}}"#
        ),
        "get_input substituted in the structured config, nested too"
    );
    let data: Value = serde_json::from_str(outputs["wait_data"].as_str().expect("data is a JSON string"))
        .expect("wait condition data is JSON");
    assert_eq!(data, json!({"vm1": "db ready", "vm2": "cache ready", "vm3": "queue ready"}));
    assert_eq!(outputs["seen"], outputs["wait_data"], "after_wait received the wait condition's data");
    assert_eq!(outputs.len(), 7, "{outputs:?}");
}

fn check_execution_order(scenario: &Scenario) {
    let records = scenario.records();
    let mut ran: Vec<(String, String, String)> = records
        .iter()
        .map(|record| (record.server.clone(), record.deployment.clone(), record.action.clone()))
        .collect();
    ran.sort();
    let expected = [
        ("vm1", "db"),
        ("vm1", "monitor"),
        ("vm2", "after_wait"),
        ("vm2", "cache"),
        ("vm3", "queue"),
        ("vm3", "settings"),
        ("vm4", "app"),
        ("vm5", "web"),
    ];
    let expected: Vec<(String, String, String)> =
        expected.iter().map(|(server, name)| (server.to_string(), name.to_string(), "CREATE".to_string())).collect();
    assert_eq!(ran, expected, "each deployment ran once, on its server: {records:#?}");
    assert_ran_before(&records, &["db", "cache", "queue"], "app", "CREATE");
    for consumer in ["web", "monitor", "settings"] {
        assert_ran_before(&records, &["app"], consumer, "CREATE");
    }
    assert_ran_before(&records, &["db", "cache", "queue"], "after_wait", "CREATE");
}

async fn check_events(scenario: &Scenario) {
    let events = scenario.events().await;
    for event in &events {
        for key in ["id", "time", "resource", "status", "reason"] {
            assert!(event.get(key).is_some(), "event has {key}: {event}");
        }
    }
    let ids: Vec<u64> = events.iter().map(|event| event["id"].as_u64().expect("numeric id")).collect();
    assert!(ids.windows(2).all(|pair| pair[0] < pair[1]), "events in order: {ids:?}");
    let statuses = event_statuses(&events);
    assert_eq!(statuses.first(), Some(&(STACK.to_string(), "CREATE_IN_PROGRESS".to_string())), "{statuses:#?}");
    assert_eq!(statuses.last(), Some(&(STACK.to_string(), "CREATE_COMPLETE".to_string())), "{statuses:#?}");
    let resources = [
        "handle",
        "wait",
        "backend_config",
        "db",
        "cache",
        "queue",
        "app_config",
        "app",
        "web_component",
        "web",
        "monitor_config",
        "monitor",
        "settings_config",
        "settings",
        "after_wait_config",
        "after_wait",
    ];
    for resource in resources {
        event_index(&statuses, resource, "CREATE_COMPLETE");
    }
    for resource in ["db", "app", "web", "after_wait"] {
        assert!(
            event_index(&statuses, resource, "CREATE_IN_PROGRESS")
                < event_index(&statuses, resource, "CREATE_COMPLETE")
        );
    }
    let app_started = event_index(&statuses, "app", "CREATE_IN_PROGRESS");
    for producer in ["db", "cache", "queue"] {
        assert!(event_index(&statuses, producer, "CREATE_COMPLETE") < app_started, "{producer} before app");
    }
    assert!(
        event_index(&statuses, "wait", "CREATE_COMPLETE") < event_index(&statuses, "after_wait", "CREATE_IN_PROGRESS")
    );
    let failed: Vec<_> = statuses.iter().filter(|(_, status)| status.ends_with("FAILED")).collect();
    assert!(failed.is_empty(), "no failures: {failed:?}");
}

async fn check_agent_journals(scenario: &Scenario) {
    let expected_count = [("vm1", 2), ("vm2", 2), ("vm3", 2), ("vm4", 1), ("vm5", 1)];
    for (server, count) in expected_count {
        let rows = scenario.fleet.agent(server).status().await;
        assert_eq!(rows.len(), count, "{server}: {rows:#?}");
        for row in &rows {
            assert_eq!(row["state"], "signalled", "{server}: {row}");
            assert_eq!(row["signal"], "delivered", "{server}: {row}");
            assert_eq!(row["outcome"], "COMPLETE", "{server}: {row}");
        }
    }
}
