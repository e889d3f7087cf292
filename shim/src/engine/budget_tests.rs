//! The evaluation budget and `max_resources_per_stack` in the engine (issue 31): what a stack's
//! traversal evaluates is charged to one budget across its transactions, a create or update
//! over it is refused whole, a signal's activation over it fails the resource, the outputs of a
//! read get what the resources left, and every resource (group members included) counts
//! against the resource limit. Helpers come from `tests.rs`.

use serde_json::{Value, json};

use super::tests::{deployments, engine_at, register, request, signal_token, status};
use super::{Engine, EngineConfig, TokenKey};
use crate::model::{Service, ServiceError, SignalAck, StackDetail};
use crate::store::{SqliteStore, Store};
use crate::template::MaxResources;

/// The budget of these tests (the default's 64 MiB scaled down 64 times, so they stay fast).
const BUDGET: usize = 1 << 20;

/// A parameter of 8 KiB (the reviewer's 0.5 MiB, scaled as the budget).
fn big() -> String {
    "x".repeat(8 << 10)
}

/// `value` of an OS::Heat::Value made of `copies` copies of the `big` parameter.
fn replaced(copies: usize) -> String {
    format!("{{str_replace: {{template: \"{}\", params: {{\"$p\": {{get_param: big}}}}}}}}", "$p".repeat(copies))
}

pub(super) fn engine_with(path: &std::path::Path, configure: impl FnOnce(&mut EngineConfig)) -> Engine<SqliteStore> {
    let mut config = EngineConfig::new("http://127.0.0.1:9");
    configure(&mut config);
    Engine::new(SqliteStore::open(path).unwrap(), TokenKey::from_secret(b"test key"), config)
}

fn small_budget(path: &std::path::Path) -> Engine<SqliteStore> {
    engine_with(path, |config| config.evaluation_budget = BUDGET)
}

/// `v0` made from the parameter (known when the template is checked), then `readers` values
/// that copy it when they run (unknown until then), and `outputs`.
fn values(copies: usize, readers: usize, outputs: &str) -> String {
    let mut text = format!(
        "heat_template_version: 2018-08-31\nparameters:\n  big: {{type: string}}\nresources:\n  v0:\n    type: \
         OS::Heat::Value\n    properties: {{value: {}}}\n",
        replaced(copies)
    );
    for index in 1..=readers {
        text.push_str(&format!(
            "  v{index}:\n    type: OS::Heat::Value\n    properties: {{value: {{get_attr: [v0, value]}}}}\n"
        ));
    }
    text.push_str(outputs);
    text
}

fn problems(result: Result<impl std::fmt::Debug, ServiceError>) -> Vec<String> {
    match result {
        Err(ServiceError::Template { problems }) => problems,
        other => panic!("should be refused as a template: {other:?}"),
    }
}

#[tokio::test]
async fn a_create_over_the_budget_at_run_time_is_refused_and_stores_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let engine = small_budget(&dir.path().join("shim.db"));
    let big = big();
    // 256 KiB known from the parameter, then four copies made as the values run: 1.25 MiB.
    let refused = engine.create_stack(request("s", &values(32, 4, ""), &[("big", &big)])).await;
    let problems = problems(refused);
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(problems[0].starts_with("resource v"), "names the resource: {problems:?}");
    assert!(problems[0].contains("over the evaluation budget: more than 1048576 bytes (1 MiB)"), "{problems:?}");
    assert!(matches!(engine.show_stack("s").await, Err(ServiceError::NotFound { .. })), "nothing was stored");

    // Two copies fit (768 KiB); an update runs a new traversal with the whole budget again.
    engine.create_stack(request("s", &values(32, 2, ""), &[("big", &big)])).await.unwrap();
    assert_eq!(status(&engine, "s").await, "CREATE_COMPLETE");
    engine.update_stack("s", request("s", &values(32, 2, ""), &[("big", &big)])).await.unwrap();
    assert_eq!(status(&engine, "s").await, "UPDATE_COMPLETE");
}

/// The value of output `name` and its error.
fn output(detail: &StackDetail, name: &str) -> (Value, Option<String>) {
    let output = detail.outputs.iter().find(|output| output.name == name).unwrap();
    (output.value.clone(), output.error.clone())
}

#[tokio::test]
async fn the_outputs_of_a_read_get_what_the_resources_left_of_the_budget() {
    let dir = tempfile::tempdir().unwrap();
    let engine = small_budget(&dir.path().join("shim.db"));
    // Six values of 128 KiB (776 KiB with the parameter's copies); the outputs read them.
    let outputs = "outputs:\n  one: {value: {get_attr: [v1, value]}}\n  all: {value: [{get_attr: [v1, value]}, \
                   {get_attr: [v2, value]}, {get_attr: [v3, value]}]}\n  id: {value: {get_resource: v0}}\n";
    engine.create_stack(request("s", &values(16, 5, outputs), &[("big", &big())])).await.unwrap();
    assert_eq!(status(&engine, "s").await, "CREATE_COMPLETE");
    let first = engine.show_stack("s").await.unwrap();
    let (one, error) = output(&first, "one");
    assert_eq!((one.as_str().map(str::len), error), (Some(128 << 10), None));
    let (all, error) = output(&first, "all");
    assert_eq!(all, Value::Null, "a read does not build 384 KiB when the budget has less left");
    assert!(error.unwrap_or_default().contains("over the evaluation budget"));
    assert_eq!(output(&first, "id").1, None, "later outputs still get what is left");
    // Each read starts from what the resources left: nothing a read spent is kept.
    let second = engine.show_stack("s").await.unwrap();
    assert_eq!(second.outputs, first.outputs);
    let unresolved = engine.show_stack_unresolved("s").await.unwrap();
    assert!(unresolved.outputs.is_empty() && unresolved.resources == first.resources);
}

#[tokio::test]
async fn every_resource_of_a_flat_template_counts_against_max_resources_per_stack() {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine_at(&dir.path().join("shim.db"));
    let mut text = String::from("heat_template_version: 2018-08-31\nresources:\n");
    for index in 0..1_001 {
        text.push_str(&format!("  r{index}: {{type: OS::Heat::None}}\n"));
    }
    let problems = problems(engine.create_stack(request("s", &text, &[])).await);
    assert!(problems[0].starts_with("Request limit exceeded: Maximum resources per stack exceeded."), "{problems:?}");
    assert!(problems[0].contains("--max-resources-per-stack"), "{problems:?}");
    assert!(matches!(engine.show_stack("s").await, Err(ServiceError::NotFound { .. })));
}

#[tokio::test]
async fn the_limit_is_raised_or_lifted_by_the_option() {
    let dir = tempfile::tempdir().unwrap();
    let mut text = String::from("heat_template_version: 2018-08-31\nresources:\n");
    for index in 0..1_001 {
        text.push_str(&format!("  r{index}: {{type: OS::Heat::None}}\n"));
    }
    for (name, limit) in [("raised", MaxResources(Some(1_001))), ("lifted", MaxResources(None))] {
        let engine = engine_with(&dir.path().join(format!("{name}.db")), |config| config.max_resources = limit);
        engine.create_stack(request("s", &text, &[])).await.unwrap();
        assert_eq!(status(&engine, "s").await, "CREATE_COMPLETE", "{name}");
    }
}

const GROUP: &str = "
heat_template_version: 2018-08-31
resources:
  config: {type: OS::Heat::SoftwareConfig, properties: {group: script, config: x}}
  servers: {type: OS::Heat::Value, properties: {value: {a: s1, b: s2, c: s3, d: s4}}}
  group:
    type: OS::Heat::SoftwareDeploymentGroup
    properties: {config: {get_resource: config}, servers: {get_attr: [servers, value]}}
";

#[tokio::test]
async fn a_groups_members_count_when_it_expands() {
    let dir = tempfile::tempdir().unwrap();
    // Three resources and four members known only when the group runs.
    let engine = engine_with(&dir.path().join("tight.db"), |config| config.max_resources = MaxResources(Some(6)));
    register(&engine, &["s1", "s2", "s3", "s4"]).await;
    engine.create_stack(request("s", GROUP, &[])).await.unwrap();
    let detail = engine.show_stack("s").await.unwrap();
    let group = detail.resources.iter().find(|resource| resource.name == "group").unwrap();
    assert_eq!(group.status, "CREATE_FAILED");
    assert!(group.status_reason.contains("The stack would have 7 resources"), "{}", group.status_reason);
    assert!(deployments(&engine, "s1").await.is_empty(), "no member was published");

    let engine = engine_with(&dir.path().join("fits.db"), |config| config.max_resources = MaxResources(Some(7)));
    register(&engine, &["s1", "s2", "s3", "s4"]).await;
    engine.create_stack(request("s", GROUP, &[])).await.unwrap();
    assert_eq!(deployments(&engine, "s4").await.len(), 1);
    let stack = engine.store().read(|tx| tx.stack("s")).unwrap().unwrap();
    assert_eq!(stack.resource_count, 7, "the members are counted in the stack's row");
}

const SIGNALLED: &str = "
heat_template_version: 2018-08-31
resources:
  config: {type: OS::Heat::SoftwareConfig, properties: {group: script, config: x, outputs: [{name: o}]}}
  deploy: {type: OS::Heat::SoftwareDeployment, properties: {config: {get_resource: config}, server: vm1}}
  v1: {type: OS::Heat::Value, properties: {value: {get_attr: [deploy, o]}}}
  v2: {type: OS::Heat::Value, properties: {value: {get_attr: [deploy, o]}}}
  v3: {type: OS::Heat::Value, properties: {value: {get_attr: [deploy, o]}}}
";

#[tokio::test]
async fn an_activation_over_the_budget_after_a_signal_fails_the_resource() {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine_with(&dir.path().join("shim.db"), |config| config.evaluation_budget = 100_000);
    register(&engine, &["vm1"]).await;
    engine.create_stack(request("s", SIGNALLED, &[])).await.unwrap();
    let deploy = deployments(&engine, "vm1").await.remove(0);
    // Each value copies 40 KB: the third is over what is left.
    let ack = engine.deployment_signal(&signal_token(&deploy), json!({"o": "o".repeat(40_000)}), None).await;
    assert_eq!(ack.unwrap(), Some(SignalAck::Applied), "the signal itself is taken");
    let detail = engine.show_stack("s").await.unwrap();
    assert_eq!(detail.summary.status, "CREATE_FAILED");
    let failed: Vec<_> = detail.resources.iter().filter(|resource| resource.status == "CREATE_FAILED").collect();
    assert_eq!(failed.len(), 1, "{:?}", detail.resources);
    assert!(failed[0].status_reason.contains("over the evaluation budget: more than 100000 bytes"), "{failed:?}");
    let stack = engine.store().read(|tx| tx.stack("s")).unwrap().unwrap();
    assert!(stack.evaluated_bytes > 80_000 && stack.evaluated_bytes <= 100_000, "kept: {}", stack.evaluated_bytes);
}

/// Five members (on s1 to s5) whose config is the `script` parameter.
pub(super) const LARGE_CONFIG_GROUP: &str = "
heat_template_version: 2018-08-31
parameters:
  script: {type: string}
resources:
  config: {type: OS::Heat::SoftwareConfig, properties: {group: script, config: {get_param: script}}}
  group:
    type: OS::Heat::SoftwareDeploymentGroup
    properties: {config: {get_resource: config}, servers: {a: s1, b: s2, c: s3, d: s4, e: s5}}
";

#[tokio::test]
async fn a_groups_large_entries_are_published_a_few_members_per_transaction() {
    let dir = tempfile::tempdir().unwrap();
    // About 8 KB an entry (the config and what each entry adds): three fit in 20,000 bytes.
    let engine = engine_with(&dir.path().join("shim.db"), |config| config.release_bytes = 20_000);
    let servers = ["s1", "s2", "s3", "s4", "s5"];
    register(&engine, &servers).await;
    // Configs of 6,000 bytes.
    let script = "#".repeat(6_000);
    engine.create_stack(request("s", LARGE_CONFIG_GROUP, &[("script", &script)])).await.unwrap();
    let mut published = 0;
    for server in servers {
        published += deployments(&engine, server).await.len();
    }
    assert_eq!(published, 3, "the create publishes what 20,000 bytes hold, not the 2,000-member chunk");
    assert_eq!(engine.transact(super::sweeper::sweep).await.unwrap(), 1, "the rest is a continuation due now");
    for server in servers {
        assert_eq!(deployments(&engine, server).await.len(), 1, "{server} is published once");
    }
}
