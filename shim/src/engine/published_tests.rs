//! The limit on what a stack's deployments publish to servers' documents (issue 31: "a
//! bounded stored size per stack"): each deployment and group member stores its own copy of its
//! config, so a create whose copies pass the limit is refused whole, a group is refused before
//! any member is written, a publication after a signal fails its resource, and an update that
//! replaces every entry counts each once. Helpers come from `tests.rs` and `budget_tests.rs`.

use serde_json::json;

use super::budget_tests::{LARGE_CONFIG_GROUP, engine_with};
use super::tests::{deployments, register, request, signal_token, status};
use super::{Engine, MaxDeploymentBytes};
use crate::model::{Service, ServiceError, SignalAck};
use crate::store::{SqliteStore, Store};

/// The limit of these tests (the default's 128 MiB scaled down 1,280 times).
const LIMIT: u64 = 100_000;

fn limited(path: &std::path::Path) -> Engine<SqliteStore> {
    engine_with(path, |config| config.max_deployment_bytes = MaxDeploymentBytes(Some(LIMIT)))
}

/// A config made of the `script` parameter and `count` deployments of it to vm1 (`d0`, ...),
/// then `more` (resource lines, two spaces in).
fn copies(count: usize, more: &str) -> String {
    let mut text = String::from(
        "heat_template_version: 2018-08-31\nparameters:\n  script: {type: string}\nresources:\n  config: {type: \
         OS::Heat::SoftwareConfig, properties: {group: script, config: {get_param: script}}}\n",
    );
    for index in 0..count {
        text.push_str(&format!(
            "  d{index}: {{type: OS::Heat::SoftwareDeployment, properties: {{config: {{get_resource: config}}, \
             server: vm1}}}}\n"
        ));
    }
    text.push_str(more);
    text
}

fn refusal(result: Result<impl std::fmt::Debug, ServiceError>) -> String {
    match result {
        Err(ServiceError::Template { problems }) if problems.len() == 1 => problems[0].clone(),
        other => panic!("should be refused with one problem: {other:?}"),
    }
}

async fn stored_bytes(engine: &Engine<SqliteStore>, stack: &str) -> u64 {
    engine.store().read(|tx| tx.stack_entry_bytes(stack)).unwrap()
}

#[tokio::test]
async fn a_create_whose_deployments_copy_their_config_past_the_limit_is_refused_and_stores_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let engine = limited(&dir.path().join("shim.db"));
    register(&engine, &["vm1"]).await;
    let script = "#".repeat(20_000);
    // Five copies of 20 KB and what each entry adds: over 100,000 bytes.
    let refused = refusal(engine.create_stack(request("s", &copies(5, ""), &[("script", &script)])).await);
    assert!(refused.starts_with("resource d"), "names the resource: {refused}");
    assert!(refused.contains("over its limit of 100000 bytes"), "{refused}");
    assert!(refused.contains("--max-deployment-bytes-per-stack"), "says where it is set: {refused}");
    assert!(matches!(engine.show_stack("s").await, Err(ServiceError::NotFound { .. })), "nothing was stored");
    assert!(deployments(&engine, "vm1").await.is_empty(), "nothing was published");

    engine.create_stack(request("s", &copies(4, ""), &[("script", &script)])).await.unwrap();
    assert_eq!(status(&engine, "s").await, "CREATE_IN_PROGRESS");
    let stored = stored_bytes(&engine, "s").await;
    assert!((80_000..=LIMIT).contains(&stored), "four copies are stored: {stored}");
}

#[tokio::test]
async fn an_update_that_replaces_every_entry_counts_each_once() {
    let dir = tempfile::tempdir().unwrap();
    let engine = limited(&dir.path().join("shim.db"));
    register(&engine, &["vm1"]).await;
    let template = copies(4, "");
    engine.create_stack(request("s", &template, &[("script", &"#".repeat(20_000))])).await.unwrap();
    // Each entry is replaced by one of the same size: 80 KB stored before and after, though
    // the entries written in the update alone come to as much again.
    engine.update_stack("s", request("s", &template, &[("script", &"!".repeat(20_000))])).await.unwrap();
    assert_eq!(status(&engine, "s").await, "UPDATE_IN_PROGRESS");
    let published = deployments(&engine, "vm1").await;
    assert_eq!(published.len(), 4);
    assert!(published.iter().all(|entry| entry["config"].as_str().unwrap().starts_with('!')), "every entry is new");
    assert!(stored_bytes(&engine, "s").await <= LIMIT);
}

#[tokio::test]
async fn a_group_whose_copies_pass_the_limit_is_refused_before_any_member_is_written() {
    let dir = tempfile::tempdir().unwrap();
    // Members are released one a transaction: without the check at expansion, the create
    // would publish the first and the sweeper the rest, up to the limit.
    let engine = engine_with(&dir.path().join("shim.db"), |config| {
        config.max_deployment_bytes = MaxDeploymentBytes(Some(LIMIT));
        config.release_bytes = 1;
    });
    let servers = ["s1", "s2", "s3", "s4", "s5"];
    register(&engine, &servers).await;
    let refused =
        refusal(engine.create_stack(request("s", LARGE_CONFIG_GROUP, &[("script", &"#".repeat(20_000))])).await);
    assert!(refused.starts_with("resource group: "), "{refused}");
    assert!(refused.contains("over its limit of 100000 bytes"), "{refused}");
    for server in servers {
        assert!(deployments(&engine, server).await.is_empty(), "{server} got nothing");
    }
    engine.create_stack(request("s", LARGE_CONFIG_GROUP, &[("script", &"#".repeat(10_000))])).await.unwrap();
    while engine.transact(super::sweeper::sweep).await.unwrap() > 0 {}
    for server in servers {
        assert_eq!(deployments(&engine, server).await.len(), 1, "{server} is published once");
    }
}

#[tokio::test]
async fn a_publication_after_a_signal_past_the_limit_fails_its_resource() {
    let dir = tempfile::tempdir().unwrap();
    let engine = limited(&dir.path().join("shim.db"));
    register(&engine, &["vm1"]).await;
    // d0 is published at once; d1 and d2 after `first` signals, and only one of them fits.
    let later = "  small: {type: OS::Heat::SoftwareConfig, properties: {group: script, config: x}}\n  first: {type: \
                 OS::Heat::SoftwareDeployment, properties: {config: {get_resource: small}, server: vm1}}\n";
    let mut template = copies(3, later);
    for name in ["d1", "d2"] {
        let line = format!("  {name}: {{type: OS::Heat::SoftwareDeployment, properties: {{config");
        template = template.replace(
            &line,
            &format!("  {name}: {{type: OS::Heat::SoftwareDeployment, depends_on: [first], properties: {{config"),
        );
    }
    engine.create_stack(request("s", &template, &[("script", &"#".repeat(40_000))])).await.unwrap();
    let first = deployments(&engine, "vm1").await.into_iter().find(|entry| entry["name"] == "first").unwrap();
    let ack = engine.deployment_signal(&signal_token(&first), json!({}), None).await;
    assert_eq!(ack.unwrap(), Some(SignalAck::Applied), "the signal itself is taken");
    let detail = engine.show_stack("s").await.unwrap();
    assert_eq!(detail.summary.status, "CREATE_FAILED");
    let failed: Vec<_> = detail.resources.iter().filter(|resource| resource.status == "CREATE_FAILED").collect();
    assert_eq!(failed.len(), 1, "{:?}", detail.resources);
    assert!(failed[0].status_reason.contains("over its limit of 100000 bytes"), "{failed:?}");
    assert!(stored_bytes(&engine, "s").await <= LIMIT);
    assert_eq!(deployments(&engine, "vm1").await.len(), 3, "first, d0 and the one that fit");
}

/// Each call starts from what the previous one counted, kept in memory (SQLite: one writer),
/// which overstates once entries are removed: it never refuses what fits (the check sums the
/// stored entries before it refuses) and never lets the stack pass the limit.
#[tokio::test]
async fn what_earlier_calls_counted_refuses_nothing_that_fits_and_lets_nothing_past() {
    let dir = tempfile::tempdir().unwrap();
    let engine = limited(&dir.path().join("shim.db"));
    register(&engine, &["vm1"]).await;
    let script = |mark: &str| mark.repeat(20_000);
    engine.create_stack(request("s", &copies(4, ""), &[("script", &script("#"))])).await.unwrap();
    // Down to one deployment: three entries go, though what was counted keeps them.
    engine.update_stack("s", request("s", &copies(1, ""), &[("script", &script("!"))])).await.unwrap();
    let stored = stored_bytes(&engine, "s").await;
    assert!((20_000..40_000).contains(&stored), "one copy left: {stored}");
    // Four new copies fit in what is really stored.
    engine.update_stack("s", request("s", &copies(4, ""), &[("script", &script("?"))])).await.unwrap();
    assert_eq!(deployments(&engine, "vm1").await.len(), 4);
    // A fifth does not.
    let refused = refusal(engine.update_stack("s", request("s", &copies(5, ""), &[("script", &script("%"))])).await);
    assert!(refused.contains("over its limit of 100000 bytes"), "{refused}");
    assert!(stored_bytes(&engine, "s").await <= LIMIT);
}
