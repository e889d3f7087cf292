//! Differential: `update_policy` and `deletion_policy` against Heat's own code, in-process
//! (tests/peers/real-heat/heat_policy.py, openstack-heat from PyPI). Each resource definition is
//! checked by Heat's template class and the type's `update_policy_schema` (as
//! Resource.validate_template does) and parsed by the shim: both accept it with the same
//! resolved batch sizes and pauses, or both refuse it with Heat's text. Then the batches of a
//! rolling update: Heat's ResourceGroup._get_batches and
//! SoftwareDeploymentGroup._assemble_for_rolling_update against the shim's planner, batch by
//! batch (from no member at all it is also `batch_create`'s plan). A deletion policy from a
//! parameter goes through the shim's engine, which resolves it.

use anneal_shim::engine::{BatchTarget, Engine, EngineConfig, TokenKey, create_batches, rolling_batches};
use anneal_shim::model::{AddServer, Service, StackRequest};
use anneal_shim::store::SqliteStore;
use anneal_shim::template::{Batching, parse_template};
use anneal_tests::peers::heat_python;
use serde_json::{Value, json};

const SDG: &str = "OS::Heat::SoftwareDeploymentGroup";

/// (template version, type, the resource's definition).
fn validation_cases() -> Vec<(&'static str, &'static str, Value)> {
    let group = |policy: Value| json!({"type": SDG, "update_policy": policy});
    let deployment = |policy: Value| json!({"type": "OS::Heat::SoftwareDeployment", "deletion_policy": policy});
    vec![
        (
            "2018-08-31",
            SDG,
            group(json!({"rolling_update": {"max_batch_size": 2, "pause_time": 1.5}, "batch_create": {}})),
        ),
        ("2018-08-31", SDG, group(json!({"rolling_update": {"max_batch_size": 0}}))),
        ("2018-08-31", SDG, group(json!({"rolling_update": {"min_in_service": 1}}))),
        ("2018-08-31", SDG, group(json!({"rolling": {}}))),
        ("2018-08-31", SDG, group(json!({"batch_create": {"pause_time": -1}}))),
        ("2018-08-31", SDG, group(json!({"rolling_update": {"max_batch_size": "x"}}))),
        ("2018-08-31", SDG, group(json!({"rolling_update": {"max_batch_size": "3"}}))),
        ("2018-08-31", SDG, group(json!({"rolling_update": {"max_batch_size": 2.7}}))),
        ("2018-08-31", SDG, group(json!({"rolling_update": {"pause_time": "2.5"}}))),
        ("2018-08-31", SDG, group(json!({"rolling_update": 3}))),
        ("2018-08-31", SDG, group(json!({"rolling_update": null}))),
        ("2018-08-31", SDG, group(json!(null))),
        ("2018-08-31", SDG, group(json!([1]))),
        (
            "2018-08-31",
            "OS::Heat::StructuredDeploymentGroup",
            json!({"type": "OS::Heat::StructuredDeploymentGroup", "update_policy": {"batch_create": {"max_batch_size": 4}}}),
        ),
        (
            "2018-08-31",
            "OS::Heat::SoftwareDeployments",
            json!({"type": "OS::Heat::SoftwareDeployments", "update_policy": {"rolling_update": {"pause_time": 3}}}),
        ),
        (
            "2018-08-31",
            "OS::Heat::SoftwareDeployment",
            json!({"type": "OS::Heat::SoftwareDeployment", "update_policy": {"rolling_update": {}}}),
        ),
        (
            "2018-08-31",
            "OS::Heat::SoftwareDeployment",
            json!({"type": "OS::Heat::SoftwareDeployment", "update_policy": {}}),
        ),
        ("2018-08-31", "OS::Heat::None", json!({"type": "OS::Heat::None", "update_policy": {"batch_create": {}}})),
        (
            "2018-08-31",
            "OS::Heat::ResourceGroup",
            json!({"type": "OS::Heat::ResourceGroup",
            "properties": {"count": 1, "resource_def": {"type": "OS::Heat::None"}},
            "update_policy": {"rolling_update": {"min_in_service": -1}}}),
        ),
        (
            "2018-08-31",
            "OS::Heat::ResourceGroup",
            json!({"type": "OS::Heat::ResourceGroup",
            "properties": {"count": 1, "resource_def": {"type": "OS::Heat::None"}},
            "update_policy": {"rolling_update": {"min_in_service": 1, "max_batch_size": 2}}}),
        ),
        ("2018-08-31", "OS::Heat::SoftwareDeployment", deployment(json!("Retain"))),
        ("2018-08-31", "OS::Heat::SoftwareDeployment", deployment(json!("retain"))),
        ("2015-10-15", "OS::Heat::SoftwareDeployment", deployment(json!("retain"))),
        ("2015-10-15", "OS::Heat::SoftwareDeployment", deployment(json!("Delete"))),
        ("2018-08-31", "OS::Heat::SoftwareDeployment", deployment(json!("Snapshot"))),
        ("2018-08-31", "OS::Heat::SoftwareDeployment", deployment(json!("snapshot"))),
        ("2018-08-31", "OS::Heat::SoftwareDeployment", deployment(json!("Keep"))),
        ("2018-08-31", "OS::Heat::SoftwareDeployment", deployment(json!(3))),
        ("2018-08-31", "OS::Heat::SoftwareDeployment", deployment(json!(null))),
        (
            "2018-08-31",
            "OS::Heat::DeployedServer",
            json!({"type": "OS::Heat::DeployedServer", "deletion_policy": "Snapshot"}),
        ),
        ("2018-08-31", SDG, json!({"type": SDG, "deletion_policy": "Retain"})),
    ]
}

/// The batching Heat resolved for one section of an accepted update policy.
fn heat_batching(resolved: &Value, section: &str) -> Option<Batching> {
    let section = resolved.get("update_policy")?.get(section).filter(|value| !value.is_null())?;
    Some(Batching {
        max_batch_size: section["max_batch_size"].as_u64()?,
        pause_millis: (section["pause_time"].as_f64()? * 1000.0).round() as u64,
    })
}

#[test]
fn policies_are_accepted_and_refused_as_heat() {
    let cases = validation_cases();
    let request: Vec<Value> = cases
        .iter()
        .map(|(version, kind, resource)| json!({"version": version, "type": kind, "resource": resource}))
        .collect();
    let answers = heat_python("heat_policy.py", &json!({"validate": request}));
    let answers = answers["validate"].as_array().expect("one answer per case");
    let mut mismatches = Vec::new();
    for ((version, kind, resource), heat) in cases.iter().zip(answers) {
        let text = format!("{{\"heat_template_version\": \"{version}\", \"resources\": {{\"r\": {resource}}}}}");
        let shim = parse_template(&text);
        let what = format!("{kind} {resource} ({version})");
        match (heat.get("error").and_then(Value::as_str), &shim) {
            (Some(error), Err(refusal)) => {
                let text = error.strip_prefix("resources.r: ").unwrap_or(error);
                if !refusal.to_string().contains(text) {
                    mismatches.push(format!("{what}: Heat says {error:?}, the shim {refusal}"));
                }
            }
            (None, Ok(template)) => {
                let policies = &template.resources[0].1.policies;
                let resolved = &heat["ok"];
                let expected = (
                    resolved["deletion_policy"] == "Retain",
                    heat_batching(resolved, "batch_create"),
                    heat_batching(resolved, "rolling_update"),
                );
                // A ResourceGroup's policy is validated only: its members are flattened.
                let expected = if *kind == "OS::Heat::ResourceGroup" { (expected.0, None, None) } else { expected };
                let found = (policies.retain, policies.batch_create, policies.rolling_update);
                if found != expected {
                    mismatches.push(format!("{what}: Heat resolves {expected:?}, the shim {found:?}"));
                }
            }
            (heat_error, shim) => mismatches.push(format!("{what}: Heat {heat_error:?}, the shim {shim:?}")),
        }
    }
    assert!(mismatches.is_empty(), "the shim and Heat disagree:\n{}", mismatches.join("\n"));
}

/// A deletion policy from a parameter (TripleO's `{get_param: ServerDeletionPolicy}`): Heat
/// resolves it when it parses the template; the shim's engine when it stores the plan. Both take
/// the same values and refuse the same ones with the same text.
#[tokio::test]
async fn a_deletion_policy_from_a_parameter_is_resolved_as_heat() {
    const VALUES: &[(&str, &str)] =
        &[("2018-08-31", "retain"), ("2018-08-31", "Delete"), ("2018-08-31", "Keep"), ("2015-10-15", "retain")];
    let cases: Vec<Value> = VALUES
        .iter()
        .map(|(version, value)| {
            json!({"version": version, "type": "OS::Heat::SoftwareDeployment", "parameters": {"p": value},
                "resource": {"type": "OS::Heat::SoftwareDeployment", "deletion_policy": {"get_param": "p"}}})
        })
        .collect();
    let answers = heat_python("heat_policy.py", &json!({"validate": cases}));
    let store = SqliteStore::open_in_memory().expect("in-memory store");
    let config = EngineConfig::new("http://127.0.0.1:1");
    let engine = Engine::new(store, TokenKey::from_secret(&[7; 32]), config);
    engine.add_server(AddServer { name: "vm1".to_string(), ..AddServer::default() }).await.expect("add vm1");
    for (index, ((version, value), heat)) in
        VALUES.iter().zip(answers["validate"].as_array().expect("answers")).enumerate()
    {
        let template = format!(
            "heat_template_version: {version}\nparameters:\n  p: {{type: string}}\nresources:\n  config:\n    \
             type: OS::Heat::SoftwareConfig\n  r:\n    type: OS::Heat::SoftwareDeployment\n    \
             deletion_policy: {{get_param: p}}\n    properties: {{config: {{get_resource: config}}, server: vm1, \
             signal_transport: NO_SIGNAL}}\n"
        );
        let request = StackRequest {
            name: Some(format!("s{index}")),
            template,
            parameters: [("p".to_string(), value.to_string())].into_iter().collect(),
            ..StackRequest::default()
        };
        let created = engine.create_stack(request).await;
        match heat.get("error").and_then(Value::as_str) {
            Some(error) => {
                let refusal = created.expect_err(&format!("{value} ({version}): Heat refuses it: {error}"));
                let text = error.strip_prefix("resources.r: ").unwrap_or(error);
                assert!(format!("{refusal}").contains(text), "{value} ({version}): Heat {error:?}, the shim {refusal}");
            }
            None => {
                assert!(created.is_ok(), "{value} ({version}): Heat accepts it: {heat}, the shim {created:?}");
            }
        }
    }
}

/// (servers in template order, existing members with their server before, servers after, batch size).
type PlanCase =
    (&'static [&'static str], &'static [(&'static str, &'static str)], &'static [(&'static str, &'static str)], u64);

const PLANS: &[PlanCase] = &[
    (&["a", "b", "c"], &[("a", "s1"), ("b", "s2"), ("c", "s3")], &[("a", "t1"), ("b", "t2"), ("c", "t3")], 1),
    (&["a", "b", "c"], &[("a", "s1"), ("b", "s2"), ("c", "s3")], &[("a", "t1"), ("b", "t2"), ("c", "t3")], 2),
    (&["a", "b", "c"], &[("a", "s1"), ("b", "s2"), ("c", "s3")], &[("a", "t1"), ("b", "s2"), ("c", "t3")], 1),
    (&["a", "b", "c"], &[("a", "s1"), ("b", "s2"), ("c", "s3")], &[("a", "s1"), ("b", "t2"), ("c", "s3")], 1),
    (&["a", "b"], &[("a", "s1"), ("b", "s2"), ("c", "s3")], &[("a", "t1"), ("b", "t2")], 1),
    (&["a", "b"], &[("a", "s1"), ("b", "s2"), ("c", "s3"), ("d", "s4")], &[("a", "t1"), ("b", "s2")], 3),
    (&["a", "b", "c", "d"], &[("a", "s1"), ("b", "s2")], &[("a", "t1"), ("b", "s2"), ("c", "s3"), ("d", "s4")], 1),
    (
        &["a", "b", "c", "d", "e"],
        &[("b", "s2"), ("d", "s4")],
        &[("a", "s1"), ("b", "t2"), ("c", "s3"), ("d", "t4"), ("e", "s5")],
        2,
    ),
    // batch_create: Heat's create is the same planner from no member at all.
    (&["a", "b", "c", "d", "e"], &[], &[("a", "1"), ("b", "2"), ("c", "3"), ("d", "4"), ("e", "5")], 2),
    (
        &["x", "y", "z", "w", "v"],
        &[("x", "1"), ("y", "2"), ("z", "3"), ("w", "4"), ("v", "5")],
        &[("x", "9"), ("y", "9"), ("z", "9"), ("w", "9"), ("v", "9")],
        2,
    ),
];

#[test]
fn rolling_batches_are_heats() {
    let request: Vec<Value> = PLANS
        .iter()
        .map(|(servers, existing, current, size)| {
            let current: serde_json::Map<String, Value> =
                current.iter().map(|(name, server)| (name.to_string(), json!(server))).collect();
            json!({"servers": servers, "existing": existing, "current": current, "batch_size": size})
        })
        .collect();
    let answers = heat_python("heat_policy.py", &json!({"plan": request}));
    let mut mismatches = Vec::new();
    for ((servers, existing, current, size), heat) in PLANS.iter().zip(answers["plan"].as_array().expect("plans")) {
        let targets: Vec<BatchTarget> = servers
            .iter()
            .map(|key| {
                let before = existing.iter().find(|(name, _)| name == key).map(|(_, server)| *server);
                let after = current.iter().find(|(name, _)| name == key).map(|(_, server)| *server);
                BatchTarget { key: key.to_string(), exists: before.is_some(), changed: before != after }
            })
            .collect();
        let shim = rolling_batches(&targets, *size);
        if existing.is_empty() {
            let keys: Vec<String> = servers.iter().map(|key| key.to_string()).collect();
            assert_eq!(create_batches(&keys, *size), shim, "batch_create is the same plan from no member");
        }
        let heat_batches: Vec<Vec<String>> = heat["batches"]
            .as_array()
            .expect("batches")
            .iter()
            .map(|batch| {
                let mut members: Vec<String> = ["created", "changed"]
                    .iter()
                    .flat_map(|key| batch[key].as_array().cloned().unwrap_or_default())
                    .filter_map(|name| name.as_str().map(str::to_string))
                    .collect();
                members.sort();
                members
            })
            .collect();
        let shim_sorted: Vec<Vec<String>> = shim
            .iter()
            .map(|batch| {
                let mut batch = batch.clone();
                batch.sort();
                batch
            })
            .collect();
        let leaving: Vec<&str> =
            existing.iter().map(|(name, _)| *name).filter(|name| !servers.contains(name)).collect();
        let heat_removed_first = heat["batches"][0]["removed"].as_array().map(Vec::len) == Some(leaving.len());
        if heat_batches != shim_sorted || !heat_removed_first {
            mismatches.push(format!("{servers:?} from {existing:?}: Heat {heat}, the shim {shim:?}"));
        }
    }
    assert!(mismatches.is_empty(), "the batches differ:\n{}", mismatches.join("\n"));
}

/// Heat resolves functions inside `update_policy`; the shim refuses them, naming the limitation
/// (docs/templates.md "Update policies").
#[test]
fn a_function_in_an_update_policy_is_heats_and_refused_by_the_shim() {
    let resource = json!({"type": SDG, "update_policy": {"rolling_update": {"max_batch_size": {"get_param": "n"}}}});
    let case = json!({"version": "2018-08-31", "type": SDG, "resource": resource, "parameters": {"n": "2"}});
    let answers = heat_python("heat_policy.py", &json!({"validate": [case]}));
    assert_eq!(answers["validate"][0]["ok"]["update_policy"]["rolling_update"]["max_batch_size"], 2, "{answers}");
    let text = format!(
        "{{\"heat_template_version\": \"2018-08-31\", \"parameters\": {{\"n\": {{\"type\": \"string\"}}}}, \
         \"resources\": {{\"r\": {resource}}}}}"
    );
    let refusal = parse_template(&text).expect_err("the documented difference").to_string();
    assert!(refusal.contains("update_policy: functions are not supported here by anneal-shim"), "{refusal}");
}
