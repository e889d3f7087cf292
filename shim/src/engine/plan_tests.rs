//! Plans (`--dry-run`): a plan changes nothing stored and sends nothing; it names Heat's
//! resource changes, group members under their group as Heat's `show_nested` lists them, and
//! categorises NO_SIGNAL deployments, `actions` and OS::Heat::None as Heat does; and the
//! property that makes it worth having: over hundreds of random template and parameter update
//! pairs, the (resource, server, action) runs and the group batches a plan predicts are exactly
//! those the update then publishes, when every run reports what its previous run reported (the
//! plan's one assumption). Time moves by sweeping with a later clock. Helpers: `tests.rs`.

use std::collections::BTreeSet;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};

use super::plan_changes::{changes, snapshot};
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

/// A group and a deployment, NO_SIGNAL (each completes as soon as it is published, without a run
/// to answer), each property a parameter an update may change.
const GROUPED: &str = r##"
heat_template_version: 2018-08-31
parameters:
  members: {type: json, default: {a: s0, b: s1}}
  message: {type: string, default: one}
  actions: {type: comma_delimited_list, default: "CREATE,UPDATE"}
  server: {type: string, default: s2}
  note: {type: string, default: one}
resources:
  config:
    type: OS::Heat::SoftwareConfig
    properties: {group: script, inputs: [{name: message}], config: "#!/bin/sh\n"}
  g:
    type: OS::Heat::SoftwareDeploymentGroup
    properties:
      config: {get_resource: config}
      servers: {get_param: members}
      signal_transport: NO_SIGNAL
      input_values: {message: {get_param: message}}
  quiet:
    type: OS::Heat::SoftwareDeployment
    properties:
      config: {get_resource: config}
      server: {get_param: server}
      signal_transport: NO_SIGNAL
      actions: {get_param: actions}
      input_values: {message: {get_param: message}}
  placeholder:
    type: OS::Heat::None
    properties: {note: {get_param: note}}
"##;

/// An update's parameter values.
type Parameters = &'static [(&'static str, &'static str)];

/// Each resource of a plan's changes as (category, parent, name).
fn categorised(plan: &StackPlan) -> BTreeSet<(&'static str, Option<String>, String)> {
    let changes = &plan.resource_changes;
    let lists = [
        ("added", &changes.added),
        ("deleted", &changes.deleted),
        ("replaced", &changes.replaced),
        ("updated", &changes.updated),
        ("unchanged", &changes.unchanged),
    ];
    let mut all = BTreeSet::new();
    for (category, resources) in lists {
        for resource in resources {
            all.insert((category, resource.parent_resource.clone(), resource.resource_name.clone()));
        }
    }
    all
}

fn entry(category: &'static str, parent: Option<&str>, name: &str) -> (&'static str, Option<String>, String) {
    (category, parent.map(str::to_string), name.to_string())
}

#[tokio::test]
async fn a_plan_lists_group_members_under_their_group_as_heats_show_nested_does() {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine_at(&dir.path().join("shim.db"));
    register(&engine, &SERVERS).await;
    engine.create_stack(request("s", GROUPED, &[])).await.unwrap();
    assert_eq!(status(&engine, "s").await, "CREATE_COMPLETE");
    let plan = |parameters: &'static [(&'static str, &'static str)]| {
        let engine = engine.clone();
        async move { engine.preview_stack(Some("s"), request("s", GROUPED, parameters)).await.unwrap() }
    };

    // Member b leaves, c joins, every member's input changes: the group is updated, a (input)
    // updated, c added and b deleted, each under its group by its own name.
    let members = plan(&[("members", r#"{"a": "s0", "c": "s3"}"#), ("message", "two")]).await;
    let group = |category, name| entry(category, Some("g"), name);
    let expected = [group("updated", "a"), group("added", "c"), group("deleted", "b"), entry("updated", None, "g")];
    let all = categorised(&members);
    assert!(expected.iter().all(|one| all.contains(one)), "{all:#?}");
    let member = members.resource_changes.added.iter().find(|resource| resource.resource_name == "c").unwrap();
    assert_eq!(member.resource_type, "OS::Heat::SoftwareDeployment");
    // Heat's preview without show_nested: the top-level resources only.
    let top =
        categorised(&StackPlan { resource_changes: members.resource_changes.clone().top_level(), ..members.clone() });
    assert!(top.iter().all(|(_, parent, _)| parent.is_none()) && top.len() == 4, "{top:#?}");

    // Another group type under the same name (as the nodes would be after such an update):
    // Heat replaces the group, so its old members are deleted and the new ones added, whatever
    // each of them would have done.
    let nodes = engine.transact(|ctx| Ok(ctx.tx.nodes("s")?)).await.unwrap();
    let before = snapshot(nodes.clone());
    let mut after = nodes;
    after.iter_mut().filter(|node| node.name == "g").for_each(|node| {
        node.resource_type = "OS::Heat::StructuredDeploymentGroup".into();
    });
    let after: Vec<std::sync::Arc<_>> = after.into_iter().map(std::sync::Arc::new).collect();
    let retyped = StackPlan { resource_changes: changes(&before, &after, &[]), ..members };
    let retyped = categorised(&retyped);
    for expected in [entry("replaced", None, "g"), group("deleted", "a"), group("added", "a"), group("added", "b")] {
        assert!(retyped.contains(&expected), "{expected:?} in {retyped:#?}");
    }
    assert!(!retyped.iter().any(|(category, parent, _)| parent.is_some() && *category == "unchanged"), "{retyped:#?}");
}

#[tokio::test]
async fn a_plan_categorises_no_signal_deployments_actions_and_none_as_heat_does() {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine_at(&dir.path().join("shim.db"));
    register(&engine, &SERVERS).await;
    engine.create_stack(request("s", GROUPED, &[])).await.unwrap();
    let category_of = |plan: &StackPlan, name: &str| {
        let all = categorised(plan);
        all.iter().find(|(_, parent, resource)| parent.is_none() && resource == name).unwrap().0
    };
    let cases: [(Parameters, &str, &str); 5] = [
        // A NO_SIGNAL deployment publishes its new input, though no run is answered: updated.
        (&[("message", "two")], "quiet", "updated"),
        // Heat updates `actions` in place, though no run follows.
        (&[("actions", "CREATE")], "quiet", "updated"),
        (&[("server", "s3")], "quiet", "replaced"),
        (&[], "quiet", "unchanged"),
        // Heat's NoneResource never needs an update.
        (&[("note", "two")], "placeholder", "unchanged"),
    ];
    for (parameters, name, expected) in cases {
        let plan = engine.preview_stack(Some("s"), request("s", GROUPED, parameters)).await.unwrap();
        assert_eq!(category_of(&plan, name), expected, "{parameters:?}: {:#?}", plan.resource_changes);
    }
    // NO_SIGNAL runs are runs: published (an agent runs them), though none is waited for.
    let plan = engine.preview_stack(Some("s"), request("s", GROUPED, &[("message", "two")])).await.unwrap();
    let runs: BTreeSet<(&str, &str, &str)> =
        plan.runs.iter().map(|run| (run.resource.as_str(), run.server.as_str(), run.action.as_str())).collect();
    let expected = BTreeSet::from([("g/a", "s0", "UPDATE"), ("g/b", "s1", "UPDATE"), ("quiet", "s2", "UPDATE")]);
    assert_eq!(runs, expected, "{:#?}", plan.runs);
    // Documented (docs/day-two.md, "Differences from Heat's preview"): a deployment whose
    // `actions` leave out UPDATE keeps no copy of its resolved inputs, so a change of those
    // alone plans nothing for it, where Heat shows it updated.
    let create_only = [("actions", "CREATE")];
    engine.create_stack(request("t", GROUPED, &create_only)).await.unwrap();
    let plan = engine.preview_stack(Some("t"), request("t", GROUPED, &[create_only[0], ("message", "two")])).await;
    assert_eq!(category_of(&plan.unwrap(), "quiet"), "unchanged");
}
