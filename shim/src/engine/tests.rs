//! Engine scenarios over a real SQLite file, driven through the `Service` trait the way agents
//! and operators drive it: release order across servers, get_attr flowing between them, wait
//! conditions, duplicate and unknown signals, update, delete, restart and timeouts.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::{Value, json};

use super::*;
use crate::model::{AddServer, Service, ServiceError, SignalAck, StackRequest, WaitConditionSignal};
use crate::store::SqliteStore;

pub(super) const TEMPLATE: &str = r##"
heat_template_version: 2018-08-31
parameters:
  db_server: {type: string, default: db1}
  app_server: {type: string, default: app1}
  web_server: {type: string, default: web1}
  db_password: {type: string, hidden: true, default: planted-password}
  web_message: {type: string, default: hello}
resources:
  db_config:
    type: OS::Heat::SoftwareConfig
    properties:
      group: script
      inputs: [{name: password}]
      outputs: [{name: db_host}]
      config: "#!/bin/sh\necho -n 10.0.0.5 > $heat_outputs_path.db_host\n"
  db_deploy:
    type: OS::Heat::SoftwareDeployment
    properties:
      config: {get_resource: db_config}
      server: {get_param: db_server}
      actions: [CREATE, UPDATE, DELETE]
      input_values: {password: {get_param: db_password}}
  app_config:
    type: OS::Heat::SoftwareConfig
    properties:
      group: script
      inputs: [{name: db_host}]
      outputs: [{name: app_url}]
      config: "#!/bin/sh\necho app\n"
  app_deploy:
    type: OS::Heat::SoftwareDeployment
    properties:
      config: {get_resource: app_config}
      server: {get_param: app_server}
      input_values: {db_host: {get_attr: [db_deploy, db_host]}}
  handle:
    type: OS::Heat::WaitConditionHandle
  wait:
    type: OS::Heat::WaitCondition
    properties: {handle: {get_resource: handle}, timeout: 600, count: 1}
  web_config:
    type: OS::Heat::SoftwareConfig
    properties:
      group: script
      inputs: [{name: app_url}, {name: wc_notify}]
      config:
        str_replace:
          template: "#!/bin/sh\necho MESSAGE\n"
          params: {MESSAGE: {get_param: web_message}}
  web_deploy:
    type: OS::Heat::SoftwareDeployment
    properties:
      config: {get_resource: web_config}
      server: {get_param: web_server}
      input_values:
        app_url: {get_attr: [app_deploy, app_url]}
        wc_notify: {get_attr: [handle, curl_cli]}
outputs:
  app_url: {value: {get_attr: [app_deploy, app_url]}}
  wait_data: {value: {get_attr: [wait, data]}}
"##;

pub(super) fn engine_at(path: &Path) -> Engine<SqliteStore> {
    let store = SqliteStore::open(path).unwrap();
    Engine::new(store, TokenKey::from_secret(b"test key"), EngineConfig::new("http://127.0.0.1:9"))
}

pub(super) async fn register(engine: &Engine<SqliteStore>, names: &[&str]) -> Vec<String> {
    let mut tokens = Vec::new();
    for name in names {
        tokens
            .push(engine.add_server(AddServer { name: name.to_string(), ..AddServer::default() }).await.unwrap().token);
    }
    tokens
}

pub(super) fn request(name: &str, template: &str, parameters: &[(&str, &str)]) -> StackRequest {
    let parameters: BTreeMap<String, String> = parameters.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    StackRequest { name: Some(name.into()), template: template.into(), parameters, ..Default::default() }
}

pub(super) async fn deployments(engine: &Engine<SqliteStore>, server: &str) -> Vec<Value> {
    let document = engine.metadata(server).await.unwrap();
    let body: Value = serde_json::from_str(&document.body).unwrap();
    body["deployments"].as_array().unwrap().clone()
}

pub(super) fn input<'a>(deployment: &'a Value, name: &str) -> &'a Value {
    deployment["inputs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|input| input["name"] == name)
        .map(|input| &input["value"])
        .unwrap()
}

pub(super) fn signal_token(deployment: &Value) -> String {
    input(deployment, "deploy_signal_id").as_str().unwrap().rsplit('/').next().unwrap().to_string()
}

/// Runs the sweeper as if `seconds` had passed since now; returns how many deadlines fired.
pub(super) async fn sweep_after(engine: &Engine<SqliteStore>, seconds: u64) -> usize {
    engine
        .transact(move |ctx| {
            ctx.now += seconds * 1000;
            super::sweeper::sweep(ctx)
        })
        .await
        .unwrap()
}

pub(super) async fn status(engine: &Engine<SqliteStore>, stack: &str) -> String {
    engine.show_stack(stack).await.unwrap().summary.status
}

/// Drives the three-server stack to COMPLETE; returns the web deployment as published.
async fn converge(engine: &Engine<SqliteStore>) -> Value {
    let db = deployments(engine, "db1").await;
    assert_eq!(db.len(), 1);
    assert!(deployments(engine, "app1").await.is_empty(), "app waits for db's output");
    let ack = engine
        .deployment_signal(&signal_token(&db[0]), json!({"db_host": "10.0.0.5", "deploy_status_code": 0}), None)
        .await;
    assert_eq!(ack.unwrap(), Some(SignalAck::Applied));
    let app = deployments(engine, "app1").await;
    assert_eq!(input(&app[0], "db_host"), "10.0.0.5", "get_attr crossed servers");
    engine.deployment_signal(&signal_token(&app[0]), json!({"app_url": "http://app1:80"}), None).await.unwrap();
    let web = deployments(engine, "web1").await;
    assert_eq!(input(&web[0], "app_url"), "http://app1:80");
    let curl = input(&web[0], "wc_notify").as_str().unwrap().to_string();
    assert!(curl.starts_with("curl -i -X POST") && !curl.contains("@@"), "{curl}");
    let handle_token = curl.rsplit('/').next().unwrap().to_string();
    let signal = WaitConditionSignal { success: true, reason: None, data: Some(json!("ok")), id: Some("web1".into()) };
    assert_eq!(engine.wait_condition_signal(&handle_token, signal).await.unwrap(), Some(SignalAck::Applied));
    assert_eq!(status(engine, "s").await, "CREATE_IN_PROGRESS");
    engine.deployment_signal(&signal_token(&web[0]), json!({"deploy_status_code": 0}), None).await.unwrap();
    web[0].clone()
}

#[tokio::test]
async fn three_servers_converge_with_get_attr_and_a_wait_condition() {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine_at(&dir.path().join("shim.db"));
    let tokens = register(&engine, &["db1", "app1", "web1"]).await;
    let app_watch = engine.watch_metadata("app1").await.unwrap();
    let created = engine.create_stack(request("s", TEMPLATE, &[])).await.unwrap();
    assert_eq!(created.status, "CREATE_IN_PROGRESS");
    assert!(!app_watch.has_changed().unwrap());
    let web = converge(&engine).await;
    assert!(app_watch.has_changed().unwrap(), "releasing app's deployment woke its long-poll");

    let detail = engine.show_stack("s").await.unwrap();
    assert_eq!(detail.summary.status, "CREATE_COMPLETE", "{detail:?}");
    let outputs: BTreeMap<_, _> =
        detail.outputs.iter().map(|output| (output.name.as_str(), output.value.clone())).collect();
    assert_eq!(outputs["app_url"], "http://app1:80");
    assert_eq!(outputs["wait_data"], json!("{\"web1\": \"ok\"}"), "Python json.dumps separators, as Heat");
    assert_eq!(detail.parameters["db_password"], "******", "hidden parameters are never echoed");
    assert!(detail.resources.iter().all(|resource| resource.status == "CREATE_COMPLETE"), "{:?}", detail.resources);

    // Repeated and unknown signals change nothing.
    let again = engine.deployment_signal(&signal_token(&web), json!({"deploy_status_code": 1}), None).await.unwrap();
    assert_eq!(again, Some(SignalAck::Duplicate));
    assert_eq!(status(&engine, "s").await, "CREATE_COMPLETE");
    assert_eq!(engine.deployment_signal(&"0".repeat(64), json!({}), None).await.unwrap(), None);
    assert_eq!(engine.deployment_signal("not-a-token", json!({}), None).await.unwrap(), None);

    // A server token reads only its own server; tokens are stored hashed.
    assert_eq!(engine.server_for_token(&tokens[0]).await.unwrap().as_deref(), Some("db1"));
    let events = engine.stack_events("s").await.unwrap();
    assert!(events.iter().any(|event| event.resource == "s" && event.status == "CREATE_COMPLETE"));
    drop(engine);
    let database = std::fs::read(dir.path().join("shim.db")).unwrap_or_default();
    let wal = std::fs::read(dir.path().join("shim.db-wal")).unwrap_or_default();
    for secret in tokens.iter().map(String::as_str).chain([signal_token(&web).as_str()]) {
        let needle = secret.as_bytes();
        let found =
            database.windows(needle.len()).any(|w| w == needle) || wal.windows(needle.len()).any(|w| w == needle);
        assert!(!found, "a token is stored in clear");
    }
}

#[tokio::test]
async fn update_reruns_only_what_changed_and_delete_runs_delete_actions() {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine_at(&dir.path().join("shim.db"));
    register(&engine, &["db1", "app1", "web1"]).await;
    engine.create_stack(request("s", TEMPLATE, &[])).await.unwrap();
    let web_before_token = signal_token(&converge(&engine).await);
    let ids =
        |deployments: &[Value]| deployments.iter().map(|d| d["id"].as_str().unwrap().to_string()).collect::<Vec<_>>();
    let (db_before, app_before, web_before) = (
        ids(&deployments(&engine, "db1").await),
        ids(&deployments(&engine, "app1").await),
        ids(&deployments(&engine, "web1").await),
    );

    let updated = engine.update_stack("s", request("s", TEMPLATE, &[("web_message", "changed")])).await.unwrap();
    assert_eq!(updated.status, "UPDATE_IN_PROGRESS");
    assert_eq!(ids(&deployments(&engine, "db1").await), db_before, "unchanged deployments keep their id");
    assert_eq!(ids(&deployments(&engine, "app1").await), app_before);
    let web = deployments(&engine, "web1").await;
    assert_ne!(ids(&web), web_before, "the changed config gets a new derived id");
    assert_eq!(input(&web[0], "deploy_action"), "UPDATE");
    assert!(web[0]["config"].as_str().unwrap().contains("changed"));
    let late = engine.deployment_signal(&web_before_token, json!({"deploy_status_code": 1}), None).await.unwrap();
    assert_eq!(late, Some(SignalAck::Stale), "a signal for the superseded publication is stale, not unknown");
    assert_eq!(status(&engine, "s").await, "UPDATE_IN_PROGRESS", "and changes nothing");
    engine.deployment_signal(&signal_token(&web[0]), json!({}), None).await.unwrap();
    assert_eq!(status(&engine, "s").await, "UPDATE_COMPLETE");

    // Restart in the middle of a delete: nothing is lost.
    let deleting = engine.delete_stack("s").await.unwrap();
    assert_eq!(deleting.status, "DELETE_IN_PROGRESS");
    drop(engine);
    let engine = engine_at(&dir.path().join("shim.db"));
    let db = deployments(&engine, "db1").await;
    let delete = db.iter().find(|d| input(d, "deploy_action") == "DELETE").expect("db's DELETE action is published");
    assert!(deployments(&engine, "web1").await.len() == 1, "web has no DELETE action; removed with the stack");
    engine.deployment_signal(&signal_token(delete), json!({}), None).await.unwrap();
    assert!(matches!(engine.show_stack("s").await, Err(ServiceError::NotFound { .. })));
    assert!(deployments(&engine, "db1").await.is_empty() && deployments(&engine, "web1").await.is_empty());
    let events = engine.stack_events("s").await.unwrap();
    assert_eq!(events.last().unwrap().status, "DELETE_COMPLETE");
}

#[tokio::test]
async fn failure_and_timeouts_fail_the_stack() {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine_at(&dir.path().join("shim.db"));
    register(&engine, &["db1", "app1", "web1"]).await;
    engine.create_stack(request("s", TEMPLATE, &[])).await.unwrap();
    let db = deployments(&engine, "db1").await;
    engine
        .deployment_signal(&signal_token(&db[0]), json!({"deploy_status_code": 3, "deploy_stderr": "boom"}), None)
        .await
        .unwrap();
    let detail = engine.show_stack("s").await.unwrap();
    assert_eq!(detail.summary.status, "CREATE_FAILED");
    assert!(detail.summary.status_reason.contains("non-zero status code: 3"), "{}", detail.summary.status_reason);
    assert!(deployments(&engine, "app1").await.is_empty(), "nothing after a failure is released");

    let waiting = "heat_template_version: 2018-08-31\nresources:\n  h: {type: OS::Heat::WaitConditionHandle}\n  w:\n    type: OS::Heat::WaitCondition\n    properties: {handle: {get_resource: h}, timeout: 1}\n";
    let mut timed = request("t", waiting, &[]);
    timed.timeout_secs = Some(60);
    engine.create_stack(timed).await.unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    let fired = engine.transact(sweeper::sweep).await.unwrap();
    assert!(fired >= 1);
    let detail = engine.show_stack("t").await.unwrap();
    assert_eq!(detail.summary.status, "CREATE_FAILED");
    assert!(
        detail.summary.status_reason.contains("WaitConditionTimeout: 0 of 1 received"),
        "{}",
        detail.summary.status_reason
    );
}

#[tokio::test]
async fn invalid_stacks_are_rejected_before_anything_runs() {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine_at(&dir.path().join("shim.db"));
    register(&engine, &["db1", "app1"]).await;
    let Err(ServiceError::Template { problems }) = engine.create_stack(request("s", TEMPLATE, &[])).await else {
        panic!("an unregistered server must be rejected")
    };
    assert!(
        problems.iter().any(|problem| problem.contains("web1") && problem.contains("not registered")),
        "{problems:?}"
    );
    assert!(matches!(engine.show_stack("s").await, Err(ServiceError::NotFound { .. })), "nothing was stored");
    let cycle = "heat_template_version: 2018-08-31\nresources:\n  a: {type: OS::Heat::WaitConditionHandle, depends_on: b}\n  b: {type: OS::Heat::WaitConditionHandle, depends_on: a}\n";
    let Err(ServiceError::Template { problems }) = engine.create_stack(request("c", cycle, &[])).await else {
        panic!()
    };
    assert!(problems.iter().any(|problem| problem.contains("cycle")), "{problems:?}");
    assert!(matches!(engine.create_stack(request("bad name/", cycle, &[])).await, Err(ServiceError::Invalid { .. })));
    assert!(matches!(
        engine.add_server(AddServer { name: "db1".into(), ..AddServer::default() }).await,
        Err(ServiceError::Conflict { .. })
    ));
}

#[tokio::test]
async fn deployment_group_runs_on_every_server_and_aggregates() {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine_at(&dir.path().join("shim.db"));
    register(&engine, &["app1", "web1", "web2"]).await;
    let template = r##"
heat_template_version: 2018-08-31
parameters:
  servers: {type: json, default: {a: app1, b: web1}}
resources:
  config:
    type: OS::Heat::SoftwareConfig
    properties: {group: script, outputs: [{name: result}], config: "#!/bin/sh\n"}
  group:
    type: OS::Heat::SoftwareDeploymentGroup
    properties: {config: {get_resource: config}, servers: {get_param: servers}}
outputs:
  codes: {value: {get_attr: [group, deploy_status_codes]}}
  results: {value: {get_attr: [group, result]}}
"##;
    engine.create_stack(request("g", template, &[])).await.unwrap();
    for (server, result) in [("app1", "from-a"), ("web1", "from-b")] {
        let published = deployments(&engine, server).await;
        assert_eq!(published.len(), 1, "{server}");
        assert_eq!(published[0]["name"], "group/".to_string() + if server == "app1" { "a" } else { "b" });
        assert_eq!(status(&engine, "g").await, "CREATE_IN_PROGRESS");
        engine
            .deployment_signal(&signal_token(&published[0]), json!({"result": result, "deploy_status_code": 0}), None)
            .await
            .unwrap();
    }
    let detail = engine.show_stack("g").await.unwrap();
    assert_eq!(detail.summary.status, "CREATE_COMPLETE", "{detail:?}");
    let outputs: BTreeMap<_, _> =
        detail.outputs.iter().map(|output| (output.name.as_str(), output.value.clone())).collect();
    assert_eq!(outputs["codes"], json!({"a": 0, "b": 0}));
    assert_eq!(outputs["results"], json!({"a": "from-a", "b": "from-b"}));

    // Moving member b to web2 removes it from web1 and publishes it on web2.
    engine.update_stack("g", request("g", template, &[("servers", r#"{"a": "app1", "b": "web2"}"#)])).await.unwrap();
    assert!(deployments(&engine, "web1").await.is_empty());
    let moved = deployments(&engine, "web2").await;
    assert_eq!(moved.len(), 1);
    assert_eq!(deployments(&engine, "app1").await.len(), 1, "member a is unchanged");
    engine.deployment_signal(&signal_token(&moved[0]), json!({"result": "moved"}), None).await.unwrap();
    let detail = engine.show_stack("g").await.unwrap();
    assert_eq!(detail.summary.status, "UPDATE_COMPLETE", "{detail:?}");
}

const COMPONENTS: &str = r##"
heat_template_version: 2018-08-31
parameters:
  port: {type: number, default: 80}
resources:
  component:
    type: OS::Heat::SoftwareComponent
    properties:
      configs:
        - {actions: [CREATE], tool: script, config: "#!/bin/sh\necho create\n"}
        - {actions: [UPDATE], tool: script, config: "#!/bin/sh\necho update\n"}
        - {actions: [DELETE], tool: script, config: "#!/bin/sh\necho delete\n"}
      inputs: [{name: port, type: Number}]
      outputs: [{name: fatal, error_output: true}]
  component_deploy:
    type: OS::Heat::SoftwareDeployment
    properties:
      config: {get_resource: component}
      server: vm1
      actions: [CREATE, UPDATE, DELETE]
      input_values: {port: {get_param: port}}
  structured:
    type: OS::Heat::StructuredConfig
    properties:
      group: os-apply-config
      config: {listen: {get_input: port}, action: {get_input: deploy_action}}
  structured_deploy:
    type: OS::Heat::StructuredDeployment
    properties: {config: {get_resource: structured}, server: vm1, input_values: {port: {get_param: port}}}
  handle: {type: OS::Heat::WaitConditionHandle}
  wait:
    type: OS::Heat::WaitCondition
    properties: {handle: {get_resource: handle}, timeout: 600, count: 2}
"##;

#[tokio::test]
async fn components_structured_configs_and_wait_condition_rules() {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine_at(&dir.path().join("shim.db"));
    register(&engine, &["vm1"]).await;
    engine.create_stack(request("c", COMPONENTS, &[])).await.unwrap();
    let published = deployments(&engine, "vm1").await;
    assert_eq!(published.len(), 2);
    let by_name = |name: &str| published.iter().find(|d| d["name"] == name).unwrap().clone();
    let component = by_name("component_deploy");
    assert_eq!(component["group"], "component");
    assert_eq!(component["config"]["configs"].as_array().unwrap().len(), 3);
    assert_eq!(input(&component, "port"), 80);
    let structured = by_name("structured_deploy");
    assert_eq!(structured["config"], json!({"listen": 80, "action": "CREATE"}), "get_input substituted");

    // Wait condition: one SUCCESS is not enough for count 2; a FAILURE fails at once.
    let detail = engine.show_stack("c").await.unwrap();
    assert!(detail.resources.iter().any(|r| r.name == "wait" && r.status == "CREATE_IN_PROGRESS"));
    let handle_token = {
        let outputs = engine.transact(|ctx| Ok(ctx.tx.node("c", "handle")?.unwrap().attributes)).await.unwrap();
        let (endpoint, handle_id) =
            (outputs["endpoint"].as_str().unwrap().to_string(), outputs["token"].as_str().unwrap());
        let handle_id = handle_id.trim_start_matches("@@anneal-token:handle:").trim_end_matches("@@");
        let rendered = TokenKey::from_secret(b"test key").render(&endpoint, &[format!("handle:{handle_id}")]);
        rendered.rsplit('/').next().unwrap().to_string()
    };
    let success = WaitConditionSignal { success: true, reason: None, data: Some(json!(1)), id: None };
    engine.wait_condition_signal(&handle_token, success.clone()).await.unwrap();
    let again = engine
        .wait_condition_signal(&handle_token, WaitConditionSignal { id: Some("1".into()), ..success })
        .await
        .unwrap();
    assert_eq!(again, Some(SignalAck::Duplicate), "a repeated id counts once");
    assert_eq!(status(&engine, "c").await, "CREATE_IN_PROGRESS");
    let failure =
        WaitConditionSignal { success: false, reason: Some("disk full".into()), data: None, id: Some("vm1".into()) };
    engine.wait_condition_signal(&handle_token, failure).await.unwrap();
    let detail = engine.show_stack("c").await.unwrap();
    assert_eq!(detail.summary.status, "CREATE_FAILED");
    assert!(
        detail.summary.status_reason.contains("WaitConditionFailure: disk full"),
        "{}",
        detail.summary.status_reason
    );

    // The handle keeps its signals across updates (Heat's rule), so the update drops the wait.
    // An update while the failed create's deployments still run is accepted; the newest wins.
    let without_wait = &COMPONENTS[..COMPONENTS.find("  handle:").unwrap()];
    let update = engine.update_stack("c", request("c", without_wait, &[("port", "8080")])).await.unwrap();
    assert_eq!(update.status, "UPDATE_IN_PROGRESS", "{}", update.status_reason);
    let second = engine.update_stack("c", request("c", without_wait, &[("port", "9090")])).await;
    assert_eq!(second.unwrap().status, "UPDATE_IN_PROGRESS");
    let published = deployments(&engine, "vm1").await;
    let component = published.iter().find(|d| d["name"] == "component_deploy").unwrap();
    assert_eq!(input(component, "port"), 9090);
    assert_eq!(input(component, "deploy_action"), "CREATE", "its CREATE never completed: Heat replaces it");
    // error_output present: FAILED with Heat's reason.
    engine
        .deployment_signal(&signal_token(component), json!({"fatal": "bad config", "deploy_status_code": 0}), None)
        .await
        .unwrap();
    let detail = engine.show_stack("c").await.unwrap();
    assert_eq!(detail.summary.status, "UPDATE_FAILED");
    assert!(detail.summary.status_reason.contains("fatal : bad config"), "{}", detail.summary.status_reason);
}
