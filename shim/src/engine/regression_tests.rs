//! Regression tests for traversal edge cases, from a review of the engine: each test's comment
//! describes the bug it caught (all fixed since), and the test asserts the correct behaviour.
//! Helpers come from `tests.rs`.

use serde_json::{Value, json};

use super::tests::{TEMPLATE, deployments, engine_at, input, register, request, signal_token, status};
use crate::model::{Service, SignalAck};
use crate::store::Store;

fn actions_of(published: &[Value]) -> Vec<String> {
    published.iter().map(|d| input(d, "deploy_action").as_str().unwrap().to_string()).collect()
}

/// A group member that is still running when an update starts is not reset by the update (only
/// template nodes are); its signal then goes through the normal path with the member's *old*
/// generation and `node_done` decrements the *new* traversal's `pending`. The stack reports
/// UPDATE_COMPLETE while the group's re-expanded member is still IN_PROGRESS.
#[tokio::test]
async fn late_member_signal_from_an_earlier_traversal_does_not_complete_an_update() {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine_at(&dir.path().join("shim.db"));
    register(&engine, &["vm1", "vm2"]).await;
    let template = r##"
heat_template_version: 2018-08-31
parameters:
  msg: {type: string, default: a}
resources:
  config:
    type: OS::Heat::SoftwareConfig
    properties: {group: script, inputs: [{name: msg}], config: "#!/bin/sh\n"}
  first:
    type: OS::Heat::SoftwareDeployment
    properties: {config: {get_resource: config}, server: vm1, input_values: {msg: {get_param: msg}}}
  group:
    type: OS::Heat::SoftwareDeploymentGroup
    depends_on: first
    properties:
      config: {get_resource: config}
      servers: {m: vm2}
      input_values: {msg: {get_param: msg}}
"##;
    engine.create_stack(request("s", template, &[])).await.unwrap();
    let first = deployments(&engine, "vm1").await;
    engine.deployment_signal(&signal_token(&first[0]), json!({}), None).await.unwrap();
    let member_create = deployments(&engine, "vm2").await;
    assert_eq!(member_create.len(), 1, "the member's CREATE runs");

    engine.update_stack("s", request("s", template, &[("msg", "b")])).await.unwrap();
    // The member's CREATE run finishes while the update waits for `first`.
    engine.deployment_signal(&signal_token(&member_create[0]), json!({}), None).await.unwrap();
    let first = deployments(&engine, "vm1").await;
    assert_eq!(actions_of(&first), ["UPDATE"]);
    engine.deployment_signal(&signal_token(&first[0]), json!({}), None).await.unwrap();

    let member_update = deployments(&engine, "vm2").await;
    assert_eq!(actions_of(&member_update), ["UPDATE"], "the group re-expanded and published the member's UPDATE");
    assert_eq!(
        status(&engine, "s").await,
        "UPDATE_IN_PROGRESS",
        "the member's UPDATE has not been signalled yet, so the stack cannot be complete"
    );
}

/// Delete does not touch deployments without a DELETE action, so one still running its CREATE
/// keeps its old generation; its late CREATE signal is applied and `node_done` decrements the
/// DELETE traversal's `pending`. The stack is removed (and the pending DELETE entry withdrawn
/// from its server) before the DELETE action was signalled. The same happens with a wait
/// condition that completes during a delete.
#[tokio::test]
async fn late_create_signal_during_delete_does_not_finish_the_delete() {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine_at(&dir.path().join("shim.db"));
    register(&engine, &["db1", "app1", "web1"]).await;
    engine.create_stack(request("s", TEMPLATE, &[])).await.unwrap();
    let db = deployments(&engine, "db1").await;
    engine.deployment_signal(&signal_token(&db[0]), json!({"db_host": "10.0.0.5"}), None).await.unwrap();
    let app = deployments(&engine, "app1").await;
    assert_eq!(app.len(), 1, "app's CREATE is running");

    engine.delete_stack("s").await.unwrap();
    assert_eq!(actions_of(&deployments(&engine, "db1").await), ["DELETE"]);
    // app (actions CREATE, UPDATE) finishes its CREATE run now.
    engine.deployment_signal(&signal_token(&app[0]), json!({}), None).await.unwrap();

    assert_eq!(
        engine.show_stack("s").await.map(|detail| detail.summary.status).ok().as_deref(),
        Some("DELETE_IN_PROGRESS"),
        "db's DELETE action has not been signalled"
    );
    assert_eq!(actions_of(&deployments(&engine, "db1").await), ["DELETE"], "db's DELETE must stay published");
}

/// `update` has no "hold one count while publishing" guard (unlike `delete`): with an empty new
/// template `pending` starts at 0, so a removed NO_SIGNAL deployment whose DELETE finishes at once
/// completes the update before the next removed deployment's DELETE is even published.
#[tokio::test]
async fn update_to_an_empty_template_waits_for_every_delete_action() {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine_at(&dir.path().join("shim.db"));
    register(&engine, &["vm1"]).await;
    let template = r##"
heat_template_version: 2018-08-31
resources:
  config:
    type: OS::Heat::SoftwareConfig
    properties: {group: script, config: "#!/bin/sh\n"}
  a_quick:
    type: OS::Heat::SoftwareDeployment
    properties: {config: {get_resource: config}, server: vm1, actions: [CREATE, DELETE], signal_transport: NO_SIGNAL}
  b_slow:
    type: OS::Heat::SoftwareDeployment
    properties: {config: {get_resource: config}, server: vm1, actions: [CREATE, DELETE]}
"##;
    engine.create_stack(request("s", template, &[])).await.unwrap();
    let slow = deployments(&engine, "vm1").await.into_iter().find(|d| d["name"] == "b_slow").unwrap();
    engine.deployment_signal(&signal_token(&slow), json!({}), None).await.unwrap();
    assert_eq!(status(&engine, "s").await, "CREATE_COMPLETE");

    let empty = "heat_template_version: 2018-08-31\nresources: {}\n";
    let updated = engine.update_stack("s", request("s", empty, &[])).await.unwrap();
    let published = deployments(&engine, "vm1").await;
    let slow_delete = published.iter().find(|d| d["name"] == "b_slow").expect("b_slow's DELETE is published");
    assert_eq!(input(slow_delete, "deploy_action"), "DELETE");
    assert_eq!(updated.status, "UPDATE_IN_PROGRESS", "b_slow's DELETE has not been signalled");
}

/// An update that removes a deployment together with its config forgets the nodes in name order;
/// `db_config` sorts before `db_deploy`, so the config is gone when `publish_delete` looks it up
/// (`config_of` → None) and the deployment's DELETE action is silently never run.
#[tokio::test]
async fn removing_a_deployment_with_its_config_still_runs_its_delete_action() {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine_at(&dir.path().join("shim.db"));
    register(&engine, &["vm1"]).await;
    let template = r##"
heat_template_version: 2018-08-31
resources:
  keep: {type: OS::Heat::WaitConditionHandle}
  db_config:
    type: OS::Heat::SoftwareConfig
    properties: {group: script, config: "#!/bin/sh\n"}
  db_deploy:
    type: OS::Heat::SoftwareDeployment
    properties: {config: {get_resource: db_config}, server: vm1, actions: [CREATE, UPDATE, DELETE]}
"##;
    engine.create_stack(request("s", template, &[])).await.unwrap();
    let db = deployments(&engine, "vm1").await;
    engine.deployment_signal(&signal_token(&db[0]), json!({}), None).await.unwrap();
    assert_eq!(status(&engine, "s").await, "CREATE_COMPLETE");

    let smaller = "heat_template_version: 2018-08-31\nresources:\n  keep: {type: OS::Heat::WaitConditionHandle}\n";
    engine.update_stack("s", request("s", smaller, &[])).await.unwrap();
    assert_eq!(actions_of(&deployments(&engine, "vm1").await), ["DELETE"], "db_deploy declares DELETE");
}

/// Heat §3.5: a FAILED deployment is replaced on the next update (new deployment, action CREATE).
/// The shim reruns it with action UPDATE.
#[tokio::test]
async fn update_after_a_failed_create_replaces_it_with_create() {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine_at(&dir.path().join("shim.db"));
    register(&engine, &["vm1"]).await;
    let template = r##"
heat_template_version: 2018-08-31
resources:
  config:
    type: OS::Heat::SoftwareConfig
    properties: {group: script, config: "#!/bin/sh\n"}
  deploy:
    type: OS::Heat::SoftwareDeployment
    properties: {config: {get_resource: config}, server: vm1}
"##;
    engine.create_stack(request("s", template, &[])).await.unwrap();
    let published = deployments(&engine, "vm1").await;
    engine.deployment_signal(&signal_token(&published[0]), json!({"deploy_status_code": 1}), None).await.unwrap();
    assert_eq!(status(&engine, "s").await, "CREATE_FAILED");

    engine.update_stack("s", request("s", template, &[])).await.unwrap();
    assert_eq!(actions_of(&deployments(&engine, "vm1").await), ["CREATE"], "a failed deployment is replaced");
}

/// Heat creates a resource that was never created (`check_resource_update`: INIT → create). The
/// shim labels every existing node UPDATE, so a deployment that had not run yet when an update
/// arrived gets `deploy_action: UPDATE`; with `actions: [CREATE]` it is skipped and never runs.
#[tokio::test]
async fn deployment_that_never_ran_is_created_by_an_update() {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine_at(&dir.path().join("shim.db"));
    register(&engine, &["vm1", "vm2"]).await;
    let template = r##"
heat_template_version: 2018-08-31
resources:
  config:
    type: OS::Heat::SoftwareConfig
    properties: {group: script, config: "#!/bin/sh\n"}
  first:
    type: OS::Heat::SoftwareDeployment
    properties: {config: {get_resource: config}, server: vm1}
  second:
    type: OS::Heat::SoftwareDeployment
    depends_on: first
    properties: {config: {get_resource: config}, server: vm2, actions: [CREATE]}
"##;
    engine.create_stack(request("s", template, &[])).await.unwrap();
    let first = deployments(&engine, "vm1").await;
    // An update (here: the same template) arrives while `first` still runs and `second` waits.
    engine.update_stack("s", request("s", template, &[])).await.unwrap();
    engine.deployment_signal(&signal_token(&first[0]), json!({}), None).await.unwrap();
    assert_eq!(actions_of(&deployments(&engine, "vm2").await), ["CREATE"], "second was never created");
}

/// Heat §1.2: `server` is not update_allowed, a change replaces the deployment (CREATE on the new
/// server, DELETE on the old one). The shim treats it as an in-place UPDATE, which a CREATE-only
/// deployment skips: vm2 never gets the deployment, vm1 keeps it, and the stack is UPDATE_COMPLETE.
#[tokio::test]
async fn changing_a_deployments_server_replaces_it() {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine_at(&dir.path().join("shim.db"));
    register(&engine, &["vm1", "vm2"]).await;
    let template = r##"
heat_template_version: 2018-08-31
parameters:
  target: {type: string, default: vm1}
resources:
  config:
    type: OS::Heat::SoftwareConfig
    properties: {group: script, config: "#!/bin/sh\n"}
  deploy:
    type: OS::Heat::SoftwareDeployment
    properties: {config: {get_resource: config}, server: {get_param: target}, actions: [CREATE]}
"##;
    engine.create_stack(request("s", template, &[])).await.unwrap();
    let published = deployments(&engine, "vm1").await;
    engine.deployment_signal(&signal_token(&published[0]), json!({}), None).await.unwrap();

    engine.update_stack("s", request("s", template, &[("target", "vm2")])).await.unwrap();
    assert_eq!(actions_of(&deployments(&engine, "vm2").await), ["CREATE"], "the replacement is created on vm2");
}

/// Heat §1.2: a changed input with `replace_on_change: true` replaces the deployment (CREATE).
/// The shim only copies the flag into the entry and publishes UPDATE.
#[tokio::test]
async fn changed_replace_on_change_input_replaces_the_deployment() {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine_at(&dir.path().join("shim.db"));
    register(&engine, &["vm1"]).await;
    let template = r##"
heat_template_version: 2018-08-31
parameters:
  size: {type: string, default: small}
resources:
  config:
    type: OS::Heat::SoftwareConfig
    properties: {group: script, inputs: [{name: size, replace_on_change: true}], config: "#!/bin/sh\n"}
  deploy:
    type: OS::Heat::SoftwareDeployment
    properties: {config: {get_resource: config}, server: vm1, input_values: {size: {get_param: size}}}
"##;
    engine.create_stack(request("s", template, &[])).await.unwrap();
    let published = deployments(&engine, "vm1").await;
    engine.deployment_signal(&signal_token(&published[0]), json!({}), None).await.unwrap();

    engine.update_stack("s", request("s", template, &[("size", "large")])).await.unwrap();
    assert_eq!(actions_of(&deployments(&engine, "vm1").await), ["CREATE"], "replace_on_change ⇒ replacement");
}

/// A member added to a group by an update is a new resource (Heat: CREATE in the nested stack),
/// but `write_member` gives it the group's action, UPDATE; with `actions: [CREATE]` it never runs.
#[tokio::test]
async fn member_added_by_an_update_is_created() {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine_at(&dir.path().join("shim.db"));
    register(&engine, &["vm1", "vm2"]).await;
    let template = r##"
heat_template_version: 2018-08-31
parameters:
  servers: {type: json, default: {a: vm1}}
resources:
  config:
    type: OS::Heat::SoftwareConfig
    properties: {group: script, config: "#!/bin/sh\n"}
  group:
    type: OS::Heat::SoftwareDeploymentGroup
    properties: {config: {get_resource: config}, servers: {get_param: servers}, actions: [CREATE]}
"##;
    engine.create_stack(request("s", template, &[])).await.unwrap();
    let published = deployments(&engine, "vm1").await;
    engine.deployment_signal(&signal_token(&published[0]), json!({}), None).await.unwrap();
    assert_eq!(status(&engine, "s").await, "CREATE_COMPLETE");

    engine.update_stack("s", request("s", template, &[("servers", r#"{"a": "vm1", "b": "vm2"}"#)])).await.unwrap();
    assert_eq!(actions_of(&deployments(&engine, "vm2").await), ["CREATE"], "member b is new");
}

/// After the stack FAILED (another branch failed, or the stack timed out), a late success signal
/// still releases successors and publishes new deployments. Heat's failed traversal stops
/// (`purge_db` clears `current_traversal`, §4.8) and graph.rs's `fail` promises successors never
/// activate.
#[tokio::test]
async fn successors_stay_inactive_after_the_stack_failed() {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine_at(&dir.path().join("shim.db"));
    register(&engine, &["vm1", "vm2", "vm3"]).await;
    let template = r##"
heat_template_version: 2018-08-31
resources:
  config:
    type: OS::Heat::SoftwareConfig
    properties: {group: script, config: "#!/bin/sh\n"}
  a:
    type: OS::Heat::SoftwareDeployment
    properties: {config: {get_resource: config}, server: vm1}
  b:
    type: OS::Heat::SoftwareDeployment
    properties: {config: {get_resource: config}, server: vm2}
  c:
    type: OS::Heat::SoftwareDeployment
    depends_on: a
    properties: {config: {get_resource: config}, server: vm3}
"##;
    engine.create_stack(request("s", template, &[])).await.unwrap();
    let a = deployments(&engine, "vm1").await;
    let b = deployments(&engine, "vm2").await;
    engine.deployment_signal(&signal_token(&b[0]), json!({"deploy_status_code": 2}), None).await.unwrap();
    assert_eq!(status(&engine, "s").await, "CREATE_FAILED");
    engine.deployment_signal(&signal_token(&a[0]), json!({}), None).await.unwrap();
    assert!(deployments(&engine, "vm3").await.is_empty(), "nothing is started after the stack failed");
}

/// A retried signal (the agent's 2xx was lost) for the DELETE action that finished the stack
/// answers "unknown token" (404: a permanent failure for the agent) because `finish_delete`
/// deletes the nodes without retiring their signal hashes. Same for a deployment an update
/// removed without a DELETE action (`forget_node`). A repeated or stale signal answers 2xx (see docs/http-api.md).
#[tokio::test]
async fn repeated_signal_after_delete_is_acknowledged_as_stale() {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine_at(&dir.path().join("shim.db"));
    register(&engine, &["vm1"]).await;
    let template = r##"
heat_template_version: 2018-08-31
resources:
  config:
    type: OS::Heat::SoftwareConfig
    properties: {group: script, config: "#!/bin/sh\n"}
  deploy:
    type: OS::Heat::SoftwareDeployment
    properties: {config: {get_resource: config}, server: vm1, actions: [CREATE, DELETE]}
"##;
    engine.create_stack(request("s", template, &[])).await.unwrap();
    let published = deployments(&engine, "vm1").await;
    engine.deployment_signal(&signal_token(&published[0]), json!({}), None).await.unwrap();
    engine.delete_stack("s").await.unwrap();
    let delete = deployments(&engine, "vm1").await;
    let token = signal_token(&delete[0]);
    assert_eq!(engine.deployment_signal(&token, json!({}), None).await.unwrap(), Some(SignalAck::Applied));
    assert!(deployments(&engine, "vm1").await.is_empty(), "the stack is gone");
    let again = engine.deployment_signal(&token, json!({}), None).await.unwrap();
    assert!(again.is_some(), "a repeated signal must answer 2xx, got {again:?} (404)");
}

/// Signal bodies are stored as they come; hooks commonly echo their inputs (`set -x` and a
/// `wc_notify` curl command), so the handle token rendered into the document comes back in
/// `deploy_stderr` and lands in the database in clear (ARCHITECTURE.md: "The shim's store never
/// holds a token in clear").
#[tokio::test]
async fn tokens_echoed_in_signal_output_are_not_stored_in_clear() {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine_at(&dir.path().join("shim.db"));
    register(&engine, &["db1", "app1", "web1"]).await;
    engine.create_stack(request("s", TEMPLATE, &[])).await.unwrap();
    let db = deployments(&engine, "db1").await;
    engine.deployment_signal(&signal_token(&db[0]), json!({"db_host": "h"}), None).await.unwrap();
    let app = deployments(&engine, "app1").await;
    engine.deployment_signal(&signal_token(&app[0]), json!({"app_url": "u"}), None).await.unwrap();
    let web = deployments(&engine, "web1").await;
    let curl = input(&web[0], "wc_notify").as_str().unwrap().to_string();
    let handle_token = curl.rsplit('/').next().unwrap().to_string();
    let body = json!({"deploy_status_code": 0, "deploy_stderr": format!("+ {curl} --data-binary '{{}}'\n")});
    engine.deployment_signal(&signal_token(&web[0]), body, None).await.unwrap();
    // A handle signal whose id and data keys echo the token (found by fuzzing).
    let mut data = serde_json::Map::new();
    data.insert(format!("key {handle_token}"), json!(1));
    let echoed = crate::model::WaitConditionSignal {
        success: true,
        reason: None,
        data: Some(serde_json::Value::Object(data)),
        id: Some(format!("id {handle_token}")),
    };
    assert!(engine.wait_condition_signal(&handle_token, echoed).await.unwrap().is_some());
    drop(engine);
    let mut bytes = std::fs::read(dir.path().join("shim.db")).unwrap_or_default();
    bytes.extend(std::fs::read(dir.path().join("shim.db-wal")).unwrap_or_default());
    let needle = handle_token.as_bytes();
    assert!(!bytes.windows(needle.len()).any(|window| window == needle), "the handle token is stored in clear");
}

/// Deleting again (e.g. retrying a slow delete) republishes the DELETE action of deployments whose
/// DELETE already completed: `publish_delete` only asks whether the node "ran", so the server
/// runs DELETE a second time under a new derived config id.
#[tokio::test]
async fn second_delete_does_not_rerun_completed_delete_actions() {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine_at(&dir.path().join("shim.db"));
    register(&engine, &["vm1", "vm2"]).await;
    let template = r##"
heat_template_version: 2018-08-31
resources:
  config:
    type: OS::Heat::SoftwareConfig
    properties: {group: script, config: "#!/bin/sh\n"}
  a:
    type: OS::Heat::SoftwareDeployment
    properties: {config: {get_resource: config}, server: vm1, actions: [CREATE, DELETE]}
  b:
    type: OS::Heat::SoftwareDeployment
    properties: {config: {get_resource: config}, server: vm2, actions: [CREATE, DELETE]}
"##;
    engine.create_stack(request("s", template, &[])).await.unwrap();
    for server in ["vm1", "vm2"] {
        let published = deployments(&engine, server).await;
        engine.deployment_signal(&signal_token(&published[0]), json!({}), None).await.unwrap();
    }
    engine.delete_stack("s").await.unwrap();
    let a_delete = deployments(&engine, "vm1").await;
    engine.deployment_signal(&signal_token(&a_delete[0]), json!({}), None).await.unwrap();
    assert_eq!(status(&engine, "s").await, "DELETE_IN_PROGRESS", "b's DELETE still runs");

    engine.delete_stack("s").await.unwrap();
    let a_after = deployments(&engine, "vm1").await;
    assert_eq!(a_after[0]["id"], a_delete[0]["id"], "a's DELETE already completed; it must not run again");
}

/// An update removes a deployment (its DELETE is published and running), the next update adds it
/// back. The re-added node keeps the DELETE publication's fingerprint (which ignores the action)
/// and no `_outcome`, so `publish` takes it for "still running from the previous traversal" and
/// waits for the DELETE run: the server is only ever told to DELETE, and that DELETE's signal will
/// complete the resource as UPDATE_COMPLETE.
#[tokio::test]
async fn readding_a_resource_whose_delete_runs_publishes_it_afresh() {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine_at(&dir.path().join("shim.db"));
    register(&engine, &["vm1"]).await;
    let without = r##"
heat_template_version: 2018-08-31
resources:
  config:
    type: OS::Heat::SoftwareConfig
    properties: {group: script, config: "#!/bin/sh\n"}
"##;
    let with = format!(
        "{without}  deploy:\n    type: OS::Heat::SoftwareDeployment\n    properties: {{config: {{get_resource: config}}, server: vm1, actions: [CREATE, UPDATE, DELETE]}}\n"
    );
    engine.create_stack(request("s", &with, &[])).await.unwrap();
    let published = deployments(&engine, "vm1").await;
    engine.deployment_signal(&signal_token(&published[0]), json!({}), None).await.unwrap();
    engine.update_stack("s", request("s", without, &[])).await.unwrap();
    assert_eq!(actions_of(&deployments(&engine, "vm1").await), ["DELETE"]);

    engine.update_stack("s", request("s", &with, &[])).await.unwrap();
    assert_ne!(actions_of(&deployments(&engine, "vm1").await), ["DELETE"], "the resource is back in the template");
}

/// Issue 32: a shim upgraded in place reran every finished deployment on the first update: the
/// stored fingerprints were made by the first release, which left `deploy_resource_name` and
/// `deploy_stack_id` in, and the current way never matched them. The node's fingerprint is set
/// as the first release wrote it; an update that changes nothing reruns nothing (and stores the
/// current fingerprint), and one that changes an input reruns exactly that deployment.
#[tokio::test]
async fn the_first_update_after_an_upgrade_reruns_only_what_it_changes() {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine_at(&dir.path().join("shim.db"));
    register(&engine, &["vm1", "vm2"]).await;
    let template = |message: &str| {
        format!(
            r##"
heat_template_version: 2018-08-31
resources:
  config:
    type: OS::Heat::SoftwareConfig
    properties: {{group: script, inputs: [{{name: msg}}], config: "#!/bin/sh\n"}}
  first:
    type: OS::Heat::SoftwareDeployment
    properties: {{config: {{get_resource: config}}, server: vm1, input_values: {{msg: a}}}}
  second:
    type: OS::Heat::SoftwareDeployment
    properties: {{config: {{get_resource: config}}, server: vm2, input_values: {{msg: {message}}}}}
"##
        )
    };
    engine.create_stack(request("s", &template("a"), &[])).await.unwrap();
    for server in ["vm1", "vm2"] {
        let published = deployments(&engine, server).await;
        engine.deployment_signal(&signal_token(&published[0]), json!({}), None).await.unwrap();
    }
    assert_eq!(status(&engine, "s").await, "CREATE_COMPLETE");
    let first_release = ["deploy_action", "deploy_signal_id", "deploy_signal_verb"];
    engine
        .store()
        .transaction(|tx| {
            for (server, node) in [("vm1", "first"), ("vm2", "second")] {
                let entry = tx.entries(server)?.into_iter().find(|row| row.node == node).unwrap().entry;
                let mut row = tx.node("s", node)?.unwrap();
                row.record.fingerprint =
                    Some(super::derived::tests::fingerprint_by_text_leaving_out(&entry, server, &first_release));
                tx.update_node(&row)?;
            }
            Ok::<_, crate::store::StoreError>(())
        })
        .unwrap();
    let ids = |published: Vec<Value>| published.iter().map(|d| d["id"].clone()).collect::<Vec<_>>();
    let before = (ids(deployments(&engine, "vm1").await), ids(deployments(&engine, "vm2").await));

    engine.update_stack("s", request("s", &template("a"), &[])).await.unwrap();
    assert_eq!(status(&engine, "s").await, "UPDATE_COMPLETE", "nothing changed, nothing to wait for");
    let after = (ids(deployments(&engine, "vm1").await), ids(deployments(&engine, "vm2").await));
    assert_eq!(after, before, "an unchanged deployment is not published again");

    engine.update_stack("s", request("s", &template("b"), &[])).await.unwrap();
    assert_eq!(ids(deployments(&engine, "vm1").await), before.0, "first is unchanged");
    let second = deployments(&engine, "vm2").await;
    assert_ne!(ids(second.clone()), before.1, "second's input changed: it runs again");
    assert_eq!(actions_of(&second), ["UPDATE"]);
}
