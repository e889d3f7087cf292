//! Scenario: the agent's built-in hooks doing real work, no hook file installed. The ansible
//! built-in runs a real `ansible-playbook` (ansible-core from PyPI, tests/peers/setup.sh) on a
//! local-connection playbook that writes a file and an output; json-file writes its file. Once
//! through `anneal-agent once` on a local metadata document, once through a shim stack whose
//! outputs read the deployments' results with get_attr. Every path the hooks and ansible write
//! is in the test's temp dir (HEAT_ANSIBLE_*, ANSIBLE_HOME, ANSIBLE_LOCAL_TEMP, the json-file path).

use std::path::{Path, PathBuf};

use anneal_tests::{Agent, AgentSettings, Shim, toml_string};
use serde_json::json;

const PLAYBOOK: &str = r#"- hosts: localhost
  connection: local
  gather_facts: false
  tasks:
    - name: the output
      copy:
        content: "{{ greeting }} from ansible"
        dest: "{{ heat_outputs_path }}.result"
    - name: a file on the server
      copy:
        content: "{{ greeting }}, {{ count }}"
        dest: "{{ target_file }}"
"#;

const TEMPLATE: &str = r##"
heat_template_version: 2018-08-31
parameters:
  server: {type: string}
  target_file: {type: string}
  json_files: {type: json}
  playbook: {type: string}
resources:
  play_config:
    type: OS::Heat::SoftwareConfig
    properties:
      group: ansible
      inputs: [{name: greeting}, {name: count, type: Number}, {name: target_file}]
      outputs: [{name: result}]
      config: {get_param: playbook}
  play:
    type: OS::Heat::SoftwareDeployment
    properties:
      config: {get_resource: play_config}
      server: {get_param: server}
      input_values: {greeting: hello, count: 3, target_file: {get_param: target_file}}
  json_config:
    type: OS::Heat::StructuredConfig
    properties:
      group: json-file
      config: {get_param: json_files}
  json:
    type: OS::Heat::StructuredDeployment
    depends_on: play
    properties: {config: {get_resource: json_config}, server: {get_param: server}}
outputs:
  result: {value: {get_attr: [play, result]}}
  play_status: {value: {get_attr: [play, deploy_status_code]}}
  play_stdout: {value: {get_attr: [play, deploy_stdout]}}
  json_status: {value: {get_attr: [json, deploy_status_code]}}
"##;

/// The agent settings that keep the built-ins and ansible inside `root`, with ansible-playbook
/// from the peers' ansible venv on the hooks' PATH.
fn settings(root: &Path) -> AgentSettings {
    let cache = anneal_tests::peers::cache(&["ansible/bin/ansible-playbook"]);
    let path = |relative: &str| root.join(relative).display().to_string();
    std::fs::create_dir_all(root.join("ansible-home")).expect("ansible home");
    AgentSettings::default()
        .hook_env("PATH", &format!("{}:/usr/bin:/bin", cache.join("ansible/bin").display()))
        .hook_env("HEAT_ANSIBLE_WORKING", &path("ansible/working"))
        .hook_env("HEAT_ANSIBLE_OUTPUTS", &path("ansible/outputs"))
        .hook_env("ANSIBLE_HOME", &path("ansible-home"))
        .hook_env("ANSIBLE_LOCAL_TEMP", &path("ansible-home/tmp"))
        .hook_env("ANSIBLE_REMOTE_TEMP", &path("ansible-home/remote-tmp"))
        .hook_env("ANSIBLE_PYTHON_INTERPRETER", "auto_silent")
        .line("hook_timeout_secs = 120")
}

fn json_files(target: &Path) -> serde_json::Value {
    json!({target.display().to_string(): {"service": {"port": 8080, "hosts": ["a", "b"]}, "enabled": true}})
}

const JSON_TEXT: &str = "{\n    \"enabled\": true,\n    \"service\": {\n        \"hosts\": [\n            \"a\",\n            \"b\"\n        ],\n        \"port\": 8080\n    }\n}";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn built_in_ansible_and_json_file_run_a_shim_stack() {
    let shim = Shim::start().await;
    let dir = tempfile::Builder::new().prefix("anneal-hooks-e2e-").tempdir().expect("temp dir");
    let root = dir.path().join("node");
    let mut agent = Agent::register(&shim, dir.path(), "node", &settings(&root)).await;
    agent.start();
    let target = root.join("srv/greeting.txt");
    std::fs::create_dir_all(target.parent().expect("parent")).expect("srv");
    let json_target = root.join("etc/app/config.json");
    let template = shim.write_template("hooks.yaml", TEMPLATE);
    let params = [
        format!("target_file={}", target.display()),
        format!("json_files={}", json_files(&json_target)),
        format!("playbook={PLAYBOOK}"),
    ];
    let mut args =
        vec!["stack", "create", "built-ins", "--template", template.to_str().expect("utf-8"), "--param", "server=node"];
    for param in &params {
        args.extend(["--param", param.as_str()]);
    }
    args.extend(["--wait", "--timeout", "180"]);
    let created = shim.cli(&args).await;
    assert_eq!(created.code, 0, "stack create: {created:?}\n{}", agent.log_text());

    let outputs = shim.stack_outputs("built-ins").await;
    assert_eq!(outputs["result"], "hello from ansible", "{outputs:?}");
    assert_eq!(outputs["play_status"], 0);
    assert!(outputs["play_stdout"].as_str().unwrap_or("").contains("PLAY RECAP"), "{outputs:?}");
    assert_eq!(outputs["json_status"], 0);
    assert_eq!(std::fs::read_to_string(&target).expect("ansible wrote the file"), "hello, 3");
    assert_eq!(std::fs::read_to_string(&json_target).expect("json-file wrote the file"), JSON_TEXT);
    assert_no_hook_files_installed(&agent);
    for row in agent.status().await {
        assert_eq!(row["outcome"], "COMPLETE", "{row}");
        assert_eq!(row["signal"], "delivered", "{row}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn anneal_agent_once_runs_the_built_ins_from_a_local_document() {
    let dir = tempfile::Builder::new().prefix("anneal-hooks-once-").tempdir().expect("temp dir");
    let root = dir.path().join("node");
    let documents = dir.path().join("documents");
    std::fs::create_dir_all(&documents).expect("documents dir");
    let target = root.join("srv/greeting.txt");
    std::fs::create_dir_all(target.parent().expect("parent")).expect("srv");
    let json_target = root.join("etc/app/config.json");
    let input = |name: &str, value: serde_json::Value| json!({"name": name, "type": "String", "value": value});
    let document = json!({"deployments": [
        {"id": "11111111-0000-0000-0000-000000000001", "name": "a_play", "group": "ansible", "config": PLAYBOOK,
         "inputs": [input("greeting", json!("hi")), {"name": "count", "type": "Number", "value": 7},
                    input("target_file", json!(target.display().to_string()))],
         "outputs": [{"name": "result"}], "options": null},
        {"id": "11111111-0000-0000-0000-000000000002", "name": "b_json", "group": "json-file",
         "config": json_files(&json_target), "inputs": [], "outputs": []},
    ]});
    std::fs::write(documents.join("deployments.json"), document.to_string()).expect("write the document");
    let source = format!("[[source]]\nkind = \"local\"\npath = {}\n", toml_string(&documents.display().to_string()));
    let agent = Agent::standalone(dir.path(), "node", &settings(&root), &source);
    let once = agent.command(&["once"]).await;
    assert_eq!(once.code, 0, "anneal-agent once: {once:?}");
    assert_eq!(std::fs::read_to_string(&target).expect("ansible wrote the file"), "hi, 7");
    assert_eq!(std::fs::read_to_string(&json_target).expect("json-file wrote the file"), JSON_TEXT);
    let outputs = root.join("ansible/outputs/11111111-0000-0000-0000-000000000001.result");
    assert_eq!(std::fs::read_to_string(outputs).expect("the playbook's output file"), "hi from ansible");
    let rows = agent.status().await;
    assert_eq!(rows.len(), 2, "{rows:?}");
    for row in &rows {
        assert_eq!(row["outcome"], "COMPLETE", "{row}");
        assert_eq!(row["exit_code"], 0, "{row}");
    }
    assert_no_hook_files_installed(&agent);
}

/// The agent's hooks dir is empty: what ran were the built-ins.
fn assert_no_hook_files_installed(agent: &Agent) {
    let installed: Vec<PathBuf> =
        std::fs::read_dir(agent.hooks_dir()).expect("hooks dir").map(|entry| entry.expect("entry").path()).collect();
    assert!(installed.is_empty(), "{installed:?}");
}
