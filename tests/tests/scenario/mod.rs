//! The fleet scenario shared by `fleet.rs` (create) and `fleet_update.rs` (update, delete): a
//! shim, five agents (vm1..vm5) and `template.yaml`. Every script and the `render-json` hook
//! append `<time> <server> <deployment> <action>` to one log file, which `records` reads back.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::PathBuf;

use anneal_tests::{AgentSettings, Fleet, Shim, agent_binary};
use serde_json::Value;

pub const TEMPLATE: &str = include_str!("template.yaml");
const RENDER_JSON_HOOK: &str = include_str!("render-json");
pub const SERVERS: [&str; 5] = ["vm1", "vm2", "vm3", "vm4", "vm5"];
pub const STACK: &str = "fleet";

/// One line of the scripts' log.
#[derive(Debug, Clone, PartialEq)]
pub struct Record {
    pub time: f64,
    pub server: String,
    pub deployment: String,
    pub action: String,
}

/// The running scenario: the shim, the fleet, the template file, the scripts' log.
pub struct Scenario {
    pub fleet: Fleet,
    pub shim: Shim,
    pub template: PathBuf,
    pub log: PathBuf,
}

impl Scenario {
    /// Starts the shim and five agents whose hooks know the agent binary and the log file.
    pub async fn start() -> Scenario {
        let shim = Shim::start().await;
        let log = shim.dir().join("runs.log");
        let settings = AgentSettings::default()
            .hook_env("ANNEAL_AGENT", &agent_binary().display().to_string())
            .hook_env("ANNEAL_TEST_LOG", &log.display().to_string());
        let fleet = Fleet::start(&shim, &SERVERS, &settings).await;
        for agent in fleet.agents() {
            agent.install_hook("render-json", RENDER_JSON_HOOK);
        }
        let template = shim.write_template("fleet.yaml", TEMPLATE);
        Scenario { fleet, shim, template, log }
    }

    fn template_arg(&self) -> &str {
        self.template.to_str().expect("utf-8 temp path")
    }

    /// `stack create fleet --wait`; panics with every agent's log unless it exits 0.
    pub async fn create(&self) {
        let args = ["stack", "create", STACK, "--template", self.template_arg(), "--wait", "--timeout", "45"];
        let output = self.shim.cli(&args).await;
        assert_eq!(output.code, 0, "stack create --wait: {output:?}\n{}", self.fleet.logs());
    }

    /// `stack update fleet --wait` with `params` (`K=V`).
    pub async fn update(&self, params: &[&str]) {
        let mut args = vec!["stack", "update", STACK, "--template", self.template_arg(), "--wait", "--timeout", "45"];
        for param in params {
            args.extend(["--param", param]);
        }
        let output = self.shim.cli(&args).await;
        assert_eq!(output.code, 0, "stack update --wait: {output:?}\n{}", self.fleet.logs());
    }

    /// The scripts' log, in the order the lines were appended.
    pub fn records(&self) -> Vec<Record> {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        text.lines().map(parse_record).collect()
    }

    /// `stack outputs fleet --json` as name → value.
    pub async fn outputs(&self) -> BTreeMap<String, Value> {
        let outputs = self.shim.cli_json(&["stack", "outputs", STACK, "--json"]).await;
        let list = outputs.as_array().unwrap_or_else(|| panic!("outputs are a list: {outputs}"));
        list.iter()
            .map(|output| (output["name"].as_str().unwrap_or_default().to_string(), output["value"].clone()))
            .collect()
    }

    /// `stack events fleet --json`.
    pub async fn events(&self) -> Vec<Value> {
        let events = self.shim.cli_json(&["stack", "events", STACK, "--json"]).await;
        events.as_array().unwrap_or_else(|| panic!("events are a list: {events}")).clone()
    }
}

fn parse_record(line: &str) -> Record {
    let fields: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(fields.len(), 4, "a log line is `<time> <server> <deployment> <action>`: {line:?}");
    Record {
        time: fields[0].parse().unwrap_or_else(|_| panic!("time in {line:?}")),
        server: fields[1].to_string(),
        deployment: fields[2].to_string(),
        action: fields[3].to_string(),
    }
}

/// Where `deployment` ran `action` in `records` (panics unless exactly once).
pub fn position(records: &[Record], deployment: &str, action: &str) -> usize {
    let found: Vec<usize> = records
        .iter()
        .enumerate()
        .filter(|(_, record)| record.deployment == deployment && record.action == action)
        .map(|(index, _)| index)
        .collect();
    assert_eq!(found.len(), 1, "{deployment} {action} ran exactly once: {records:#?}");
    found[0]
}

/// Asserts that each `before` ran `action` before `after` did.
pub fn assert_ran_before(records: &[Record], before: &[&str], after: &str, action: &str) {
    let later = position(records, after, action);
    for first in before {
        assert!(position(records, first, action) < later, "{first} ran before {after}: {records:#?}");
        assert!(records[position(records, first, action)].time <= records[later].time, "clock order: {records:#?}");
    }
}

/// (resource, status) of every event, in order.
pub fn event_statuses(events: &[Value]) -> Vec<(String, String)> {
    events
        .iter()
        .map(|event| {
            (
                event["resource"].as_str().unwrap_or_default().to_string(),
                event["status"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

/// The index of the first event with `resource` and `status`.
pub fn event_index(events: &[(String, String)], resource: &str, status: &str) -> usize {
    events
        .iter()
        .position(|(name, state)| name == resource && state == status)
        .unwrap_or_else(|| panic!("no {status} event for {resource}: {events:#?}"))
}
