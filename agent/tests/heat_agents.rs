//! heat-agents' own test scenarios replayed against anneal-agent (openstack/heat-agents
//! `tests/test_heat_config.py`, `test_heat_config_notify.py`, `test_hook_script.py`), with the
//! fake hooks and config tool taken from the heat-agents sdist that `tests/peers/setup.sh`
//! fetches from PyPI (never committed):
//! 1. heat-config's run over ten deployments through `hook-fake.py` (expected results: those of
//!    `test_heat_config.py`);
//! 2. heat-config-notify's HTTP transport rules (verb, header, exact body, `{}` for no output);
//! 3. the script hook with `config-tool-fake.py`, both anneal's built-in script hook and
//!    heat-agents' own `hook-script.py` installed over it.

mod common;

use std::path::PathBuf;

use common::*;
use serde_json::{Value, json};

fn heat_agents() -> PathBuf {
    let dir = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/peers/.cache/heat-agents"));
    assert!(
        dir.join("tests/hook-fake.py").exists(),
        "heat-agents' sdist is missing from {}: run tests/peers/setup.sh (scripts/test does) with PyPI reachable",
        dir.display()
    );
    dir
}

fn fixture(name: &str) -> Value {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/fixtures/heat/").to_string() + name;
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// Document B with every deployment signalling to `receiver` at `/signal/<id>`.
fn document_b(receiver: &str) -> Vec<Value> {
    let mut deployments = fixture("heat-config-deployments.json").as_array().unwrap().clone();
    for deployment in &mut deployments {
        let id = deployment["id"].as_str().unwrap().to_string();
        let inputs = deployment["inputs"].as_array_mut().unwrap();
        inputs.retain(|input| input["name"] != "deploy_signal_id");
        inputs.push(json!({"name": "deploy_signal_id", "value": format!("{receiver}/signal/{id}")}));
    }
    deployments
}

const FAKE_GROUPS: [&str; 8] = ["cfn-init", "chef", "puppet", "salt", "script", "apply-config", "hiera", "json-file"];

#[tokio::test]
async fn heat_config_replay_with_fake_hooks() {
    let peers = heat_agents();
    let sandbox = Sandbox::new();
    let fake = std::fs::read_to_string(peers.join("tests/hook-fake.py")).unwrap();
    for group in FAKE_GROUPS {
        sandbox.install_hook(group, &fake);
    }
    sandbox.install_hook("hook-raises", &std::fs::read_to_string(peers.join("tests/hook-fake-raises.py")).unwrap());
    let receiver = signal_receiver().await;
    let deployments = document_b(&receiver.uri());
    sandbox.write_local_document("b.json", &json!({"deployments": deployments}));
    sandbox.write_local_config("");

    let finished = sandbox.once().await;
    assert_eq!(finished.status.code(), Some(1), "script (-1) and hook-raises fail: {}", finished.stderr);
    let bodies = bodies_by_id(&receiver).await;
    let plain = json!({"deploy_status_code": "0", "deploy_stderr": "stderr", "deploy_stdout": "stdout"});
    for id in ["1111", "2222", "4444", "6666", "7777", "8888"] {
        assert_eq!(bodies[id], plain, "deployment {id}");
    }
    assert_eq!(
        bodies["3333"],
        json!({"deploy_status_code": "0", "deploy_stderr": "stderr", "deploy_stdout": "stdout", "foo": "bar"})
    );
    assert_eq!(
        bodies["5555"],
        json!({"deploy_status_code": "-1", "deploy_stderr": "A bad thing happened", "deploy_stdout": "stdout"})
    );
    let raised = &bodies["0123"];
    assert_eq!(anneal_protocol::pyjson::python_str(&raised["deploy_status_code"]), "1");
    assert!(raised["deploy_stderr"].as_str().unwrap().contains("Something bad happened!"), "{raised}");
    assert!(!bodies.contains_key("9999"), "no hook, no signal");
    assert!(!sandbox.hooks().join("no-such-hook.stdin").exists());

    // Each hook saw its deployment on stdin.
    for (group, deployment) in
        FAKE_GROUPS.iter().zip([&deployments[1], &deployments[0], &deployments[3], &deployments[2]])
    {
        let stdin: Value =
            serde_json::from_str(&std::fs::read_to_string(sandbox.hooks().join(format!("{group}.stdin"))).unwrap())
                .unwrap();
        assert_eq!(stdin["id"], deployment["id"], "{group}");
        assert_eq!(stdin["inputs"], deployment["inputs"], "{group}");
        assert_eq!(stdin["config"], deployment["config"], "{group}");
    }

    // A second run runs nothing; a new id for puppet's deployment reruns only that one.
    remove_stdin_files(&sandbox);
    sandbox.once().await;
    assert!(stdin_files(&sandbox).is_empty(), "second run invoked hooks: {:?}", stdin_files(&sandbox));
    let mut renamed = deployments.clone();
    renamed[3]["id"] = json!("44444444");
    sandbox.write_local_document("b.json", &json!({"deployments": renamed}));
    sandbox.once().await;
    assert_eq!(stdin_files(&sandbox), vec!["puppet.stdin".to_string()]);
    assert_eq!(signals(&receiver).await.len(), 10, "nine first signals plus the rerun");
}

#[tokio::test]
async fn notify_transport_rules() {
    let sandbox = Sandbox::new();
    sandbox.install_hook("prints-foo", "#!/bin/sh\ncat >/dev/null\nprintf '{\"foo\": \"bar\"}'\n");
    sandbox.install_hook("prints-nothing", "#!/bin/sh\ncat >/dev/null\n");
    sandbox.install_hook("prints-text", "#!/bin/sh\ncat >/dev/null\necho not json\n");
    let receiver = signal_receiver().await;
    let deployment = |id: &str, group: &str, verb: Option<&str>| {
        let mut inputs = vec![json!({"name": "deploy_signal_id", "value": format!("{}/signal/{id}", receiver.uri())})];
        if let Some(verb) = verb {
            inputs.push(json!({"name": "deploy_signal_verb", "value": verb}));
        }
        json!({"id": id, "group": group, "config": "", "inputs": inputs})
    };
    let deployments = [
        deployment("post", "prints-foo", None),
        deployment("put", "prints-foo", Some("PUT")),
        deployment("empty", "prints-nothing", None),
        deployment("text", "prints-text", None),
    ];
    sandbox.write_local_document("a.json", &json!({"deployments": deployments}));
    sandbox.write_local_config("");
    let finished = sandbox.once().await;
    assert!(finished.status.success(), "{}", finished.stderr);

    let received = signals(&receiver).await;
    let by_path = |id: &str| received.iter().find(|request| request.url.path() == format!("/signal/{id}")).unwrap();
    assert_eq!(by_path("post").method.as_str(), "POST");
    assert_eq!(by_path("put").method.as_str(), "PUT");
    for request in &received {
        assert_eq!(request.headers.get("content-type").unwrap(), "application/json");
    }
    assert_eq!(by_path("post").body, br#"{"foo": "bar"}"#, "json.dumps bytes");
    assert_eq!(by_path("empty").body, b"{}");
    assert_eq!(
        body_json(by_path("text")),
        json!({"deploy_stdout": "not json\n", "deploy_stderr": "", "deploy_status_code": 0})
    );
}

#[tokio::test]
async fn script_hook_replay_builtin() {
    let sandbox = Sandbox::new();
    sandbox.write_local_config("");
    script_replay(&sandbox, &sandbox.state().join("outputs")).await;
}

#[tokio::test]
async fn script_hook_replay_with_heat_agents_hook_installed() {
    let peers = heat_agents();
    let sandbox = Sandbox::new();
    let hook = std::fs::read_to_string(peers.join("heat-config-script/install.d/hook-script.py")).unwrap();
    sandbox.install_hook("script", &hook);
    let working = sandbox.root().join("hs-working");
    let outputs = sandbox.root().join("hs-outputs");
    let hook_env = format!(
        "[agent.hook_env]\nHEAT_SCRIPT_WORKING = \"{}\"\nHEAT_SCRIPT_OUTPUTS = \"{}\"\n",
        working.display(),
        outputs.display()
    );
    sandbox.write_local_config(&hook_env);
    script_replay(&sandbox, &outputs).await;
}

/// Document D through the `script` group: outputs, env encoding, exit codes.
async fn script_replay(sandbox: &Sandbox, outputs_dir: &std::path::Path) {
    let peers = heat_agents();
    let receiver = signal_receiver().await;
    let tool = std::fs::read_to_string(peers.join("tests/config-tool-fake.py")).unwrap();
    let state_path = sandbox.root().join("tool-state");
    let success = json!({"stdout": "script success", "stderr": "thing happened", "files": {
        outputs_dir.join("1234.first_output").display().to_string(): "output 1",
        outputs_dir.join("1234.second_output").display().to_string(): "output 2"}});
    let failure = json!({"stdout": "script failure", "stderr": "failed", "returncode": 1});
    let deployment = |id: &str, response: &Value, state: &std::path::Path| {
        json!({"id": id, "group": "script", "config": tool, "outputs": [{"name": "first_output"}, {"name": "second_output"}],
               "inputs": [{"name": "foo", "value": "bar"}, {"name": "another", "value": "input"},
                          {"name": "a_dict", "value": "{\"key\": \"value\"}"}, {"name": "a_list", "value": "[\"v1\", 12]"},
                          {"name": "TEST_STATE_PATH", "value": state.display().to_string()},
                          {"name": "TEST_RESPONSE", "value": response.to_string()},
                          {"name": "deploy_signal_id", "value": format!("{}/signal/{id}", receiver.uri())}]})
    };
    let failing_state = sandbox.root().join("tool-state-failing");
    let document = json!({"deployments": [deployment("1234", &success, &state_path), deployment("1235", &failure, &failing_state)]});
    sandbox.write_local_document("d.json", &document);

    let finished = sandbox.once().await;
    assert_eq!(finished.status.code(), Some(1), "1235 fails: {}", finished.stderr);
    let bodies = bodies_by_id(&receiver).await;
    assert_eq!(
        bodies["1234"],
        json!({"deploy_stdout": "script success", "deploy_stderr": "thing happened", "deploy_status_code": 0,
               "first_output": "output 1", "second_output": "output 2"})
    );
    assert_eq!(
        bodies["1235"],
        json!({"deploy_stdout": "script failure", "deploy_stderr": "failed", "deploy_status_code": 1})
    );
    let state: Value = serde_json::from_str(&std::fs::read_to_string(&state_path).unwrap()).unwrap();
    let env = &state["env"];
    assert_eq!(env["foo"], "bar");
    assert_eq!(env["another"], "input");
    assert_eq!(env["a_dict"], "{\"key\": \"value\"}");
    assert_eq!(env["a_list"], "[\"v1\", 12]");
    assert_eq!(env["heat_outputs_path"], outputs_dir.join("1234").display().to_string());
}

async fn bodies_by_id(receiver: &wiremock::MockServer) -> std::collections::HashMap<String, Value> {
    signals(receiver)
        .await
        .iter()
        .map(|request| (request.url.path().trim_start_matches("/signal/").to_string(), body_json(request)))
        .collect()
}

fn stdin_files(sandbox: &Sandbox) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(sandbox.hooks())
        .unwrap()
        .filter_map(|entry| entry.ok()?.file_name().into_string().ok())
        .filter(|name| name.ends_with(".stdin"))
        .collect();
    names.sort();
    names
}

fn remove_stdin_files(sandbox: &Sandbox) {
    for name in stdin_files(sandbox) {
        std::fs::remove_file(sandbox.hooks().join(name)).unwrap();
    }
}
