//! Plans (`--dry-run`): a plan changes nothing stored and sends nothing; it names Heat's
//! resource changes; and the property that makes it worth having: over hundreds of random
//! template and parameter update pairs, the (resource, server, action) runs and the group
//! batches a plan predicts are exactly those the update then publishes, when every run reports
//! what its previous run reported (the plan's one assumption). Time moves by sweeping with a
//! later clock. Helpers: `tests.rs`.

use std::collections::BTreeSet;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};

use super::sweeper;
use super::tests::{deployments, engine_at, input, register, request, signal_token, status};
use super::transact::Engine;
use crate::model::{Service, StackPlan};
use crate::store::{NodeState, SqliteStore};
use crate::token;

const SERVERS: [&str; 6] = ["s0", "s1", "s2", "s3", "s4", "s5"];

/// One observed run: (resource, server, action, batch for a group member).
type Run = (String, String, String, Option<u32>);

/// A random stack: two configs, up to six deployments (each reading a parameter or an earlier
/// deployment's output), and maybe a group with a rolling policy. `variant` changes the shape
/// an update may take (a deployment fewer or more, a member added or removed).
fn random_template(rng: &mut StdRng, variant: u32) -> String {
    let mut text = String::from(
        "heat_template_version: 2018-08-31\nparameters:\n  p0: {type: string, default: a}\n  p1: {type: string, default: \
         b}\n  p2: {type: string, default: c}\nresources:\n",
    );
    for config in 0..2 {
        text.push_str(&format!(
            "  c{config}:\n    type: OS::Heat::SoftwareConfig\n    properties:\n      group: script\n      inputs: \
             [{{name: message}}]\n      outputs: [{{name: result}}]\n      config: {{str_replace: {{template: \"#!/bin/sh \
             V\", params: {{V: {{get_param: p{config}}}}}}}}}\n"
        ));
    }
    let count = rng.random_range(2..=6) + variant as usize % 2;
    for index in 0..count {
        let server = SERVERS[rng.random_range(0..SERVERS.len())];
        let config = rng.random_range(0..2);
        // A new deployment (the variant's extra one) is read by nothing: what a run that never
        // happened outputs is the plan's unknown.
        let message = match index {
            0 => "{get_param: p2}".to_string(),
            _ if rng.random_bool(0.5) => {
                format!("{{get_attr: [d{}, result]}}", rng.random_range(0..index.min(count - 1).max(1)))
            }
            _ => format!("{{get_param: p{}}}", rng.random_range(0..3)),
        };
        let actions = if rng.random_bool(0.5) { "[CREATE, UPDATE, DELETE]" } else { "[CREATE, UPDATE]" };
        text.push_str(&format!(
            "  d{index}:\n    type: OS::Heat::SoftwareDeployment\n    properties: {{config: {{get_resource: c{config}}}, \
             server: {server}, actions: {actions}, input_values: {{message: {message}}}}}\n"
        ));
    }
    if rng.random_bool(0.7) {
        let members = 2 + rng.random_range(0..3) + variant as usize % 2;
        let servers: Vec<String> = (0..members).map(|index| format!("m{index}: {}", SERVERS[index])).collect();
        let batch = rng.random_range(1..=2);
        let pause = [0, 5][rng.random_range(0..2)];
        text.push_str(&format!(
            "  g:\n    type: OS::Heat::SoftwareDeploymentGroup\n    update_policy:\n      rolling_update: \
             {{max_batch_size: {batch}, pause_time: {pause}}}\n      batch_create: {{max_batch_size: {batch}, \
             pause_time: {pause}}}\n    properties: {{config: {{get_resource: c1}}, servers: {{{}}}, input_values: \
             {{message: {{get_param: p{}}}}}}}\n",
            servers.join(", "),
            rng.random_range(0..3)
        ));
    }
    text
}

fn random_parameters(rng: &mut StdRng) -> Vec<(&'static str, &'static str)> {
    let mut parameters = Vec::new();
    for name in ["p0", "p1", "p2"] {
        if rng.random_bool(0.5) {
            parameters.push((name, ["x", "y"][rng.random_range(0..2)]));
        }
    }
    parameters
}

/// Carries the stack's traversal to its end as agents that always succeed would, each run
/// reporting `result` = its resource's name; returns the runs it saw.
async fn execute(engine: &Engine<SqliteStore>, answered: &mut BTreeSet<String>) -> Vec<Run> {
    let mut runs = Vec::new();
    for _ in 0..500 {
        let mut any = false;
        for server in SERVERS {
            for entry in deployments(engine, server).await {
                let id = entry["id"].as_str().unwrap().to_string();
                if !answered.insert(id) {
                    continue;
                }
                let token = signal_token(&entry);
                let hash = token::hash_token(&token);
                let node = engine.transact(move |ctx| Ok(ctx.tx.node_by_signal_hash(&hash)?)).await.unwrap().unwrap();
                // The batch the group was releasing when this member was published.
                let batch = match node.definition.get("member_of").and_then(Value::as_str).map(str::to_string) {
                    Some(group) => {
                        let row = engine.transact(move |ctx| Ok(ctx.tx.node("s", &group)?)).await.unwrap();
                        row.map(|group| group.record.batch.max(1))
                    }
                    None => None,
                };
                let action = input(&entry, "deploy_action").as_str().unwrap().to_string();
                runs.push((node.name.clone(), server.to_string(), action, batch));
                let body = json!({"deploy_status_code": 0, "result": format!("out-{}", node.name)});
                engine.deployment_signal(&token, body, None).await.unwrap();
                any = true;
            }
        }
        if any {
            continue;
        }
        if !status(engine, "s").await.ends_with("IN_PROGRESS") {
            return runs;
        }
        // The pauses due first end (the sweeper with the clock moved there).
        let nodes = engine.transact(|ctx| Ok(ctx.tx.nodes("s")?)).await.unwrap();
        let pausing: Vec<(u64, String)> = nodes
            .iter()
            .filter(|node| node.state == NodeState::InProgress && node.record.queued.is_empty())
            .filter_map(|node| Some((node.record.pause_until?, node.name.clone())))
            .collect();
        let Some(due) = pausing.iter().map(|(until, _)| *until).min() else { panic!("stuck: {nodes:#?}") };
        engine
            .transact(move |ctx| {
                ctx.now = ctx.now.max(due);
                sweeper::sweep(ctx)
            })
            .await
            .unwrap();
    }
    panic!("the traversal did not end");
}

fn planned(plan: &StackPlan) -> Vec<Run> {
    plan.runs.iter().map(|run| (run.resource.clone(), run.server.clone(), run.action.clone(), run.batch)).collect()
}

fn sorted(mut runs: Vec<Run>) -> Vec<Run> {
    runs.sort();
    runs
}

#[tokio::test]
async fn the_plan_of_a_random_update_is_exactly_what_the_update_runs() {
    let cases = 120;
    for seed in 0..cases {
        let mut rng = StdRng::seed_from_u64(seed);
        let dir = tempfile::tempdir().unwrap();
        let engine = engine_at(&dir.path().join("shim.db"));
        register(&engine, &SERVERS).await;
        let template = random_template(&mut rng, 0);
        let parameters = random_parameters(&mut rng);
        let create = request("s", &template, &parameters);
        let plan = engine.preview_stack(None, create.clone()).await.unwrap();
        engine.create_stack(create).await.unwrap();
        let mut answered = BTreeSet::new();
        let created = execute(&engine, &mut answered).await;
        assert_eq!(sorted(planned(&plan)), sorted(created), "seed {seed}: create\n{template}");
        assert_eq!(status(&engine, "s").await, "CREATE_COMPLETE", "seed {seed}");

        let mut update_rng = StdRng::seed_from_u64(seed);
        let updated_template =
            if rng.random_bool(0.3) { random_template(&mut update_rng, 1) } else { template.clone() };
        let parameters_again = random_parameters(&mut rng);
        let update = request("s", &updated_template, &parameters_again);
        let plan = engine.preview_stack(Some("s"), update.clone()).await.unwrap();
        engine.update_stack("s", update).await.unwrap();
        let ran = execute(&engine, &mut answered).await;
        assert_eq!(sorted(planned(&plan)), sorted(ran.clone()), "seed {seed}: update\n{template}\n{updated_template}");
        // Applied, the same request plans nothing more to do.
        let again = engine.preview_stack(Some("s"), request("s", &updated_template, &parameters_again)).await.unwrap();
        assert!(!again.changes && again.runs.is_empty(), "seed {seed}: {again:#?}");
        assert_eq!(plan.outcome, status(&engine, "s").await, "seed {seed}");
    }
}

const CHAIN: &str = r##"
heat_template_version: 2018-08-31
parameters:
  message: {type: string, default: one}
resources:
  config:
    type: OS::Heat::SoftwareConfig
    properties: {group: script, inputs: [{name: message}], outputs: [{name: result}], config: "#!/bin/sh\n"}
  first:
    type: OS::Heat::SoftwareDeployment
    properties: {config: {get_resource: config}, server: s0, input_values: {message: {get_param: message}}}
  second:
    type: OS::Heat::SoftwareDeployment
    properties: {config: {get_resource: config}, server: s1, input_values: {message: {get_attr: [first, result]}}}
  other:
    type: OS::Heat::SoftwareDeployment
    properties: {config: {get_resource: config}, server: s2, input_values: {message: fixed}}
"##;

#[tokio::test]
async fn a_plan_changes_nothing_and_names_heats_resource_changes() {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine_at(&dir.path().join("shim.db"));
    register(&engine, &SERVERS).await;
    engine.create_stack(request("s", CHAIN, &[])).await.unwrap();
    let mut answered = BTreeSet::new();
    execute(&engine, &mut answered).await;
    let documents = |engine: &Engine<SqliteStore>| {
        let engine = engine.clone();
        async move {
            let mut all = Vec::new();
            for server in SERVERS {
                all.push(engine.metadata(server).await.unwrap().body);
            }
            all
        }
    };
    let (before_docs, before_events) = (documents(&engine).await, engine.stack_events("s").await.unwrap());

    let update = request("s", CHAIN, &[("message", "two")]);
    let plan = engine.preview_stack(Some("s"), update).await.unwrap();
    assert!(plan.changes);
    let names = |resources: &[crate::model::PlannedResource]| -> Vec<String> {
        resources.iter().map(|resource| resource.resource_name.clone()).collect()
    };
    assert_eq!(names(&plan.resource_changes.updated), ["first"], "second reads first's unchanged output");
    assert_eq!(names(&plan.resource_changes.unchanged), ["config", "second", "other"], "in resource order");
    assert_eq!(plan.runs.len(), 1);
    assert_eq!((plan.runs[0].action.as_str(), plan.runs[0].changed.clone()), ("UPDATE", vec!["message".to_string()]));
    assert_eq!(plan.outcome, "UPDATE_COMPLETE");
    assert_eq!(documents(&engine).await, before_docs, "no document changed");
    assert_eq!(engine.stack_events("s").await.unwrap(), before_events, "no event was written");
    assert_eq!(status(&engine, "s").await, "CREATE_COMPLETE");

    let same = engine.preview_stack(Some("s"), request("s", CHAIN, &[])).await.unwrap();
    assert!(!same.changes && same.runs.is_empty(), "{same:#?}");
    let created = engine.preview_stack(None, request("fresh", CHAIN, &[])).await.unwrap();
    assert_eq!(created.resource_changes.added.len(), 4);
    assert!(engine.show_stack("fresh").await.is_err(), "a create's plan creates nothing");
    let missing = engine.preview_stack(Some("nosuch"), request("nosuch", CHAIN, &[])).await.unwrap_err();
    assert!(matches!(missing, crate::model::ServiceError::NotFound { .. }), "{missing:?}");
    let taken = engine.preview_stack(None, request("s", CHAIN, &[])).await.unwrap_err();
    assert!(matches!(taken, crate::model::ServiceError::Conflict { .. }), "{taken:?}");
}
