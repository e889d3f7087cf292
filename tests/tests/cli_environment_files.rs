//! `anneal-shim stack create -e ...` sends what openstackclient sends: the same stack comes
//! from the CLI and from the request openstackclient builds for the same files, whose
//! environment part python-heatclient computes in-process in the peers' heat venv
//! (tests/peers/real-heat/heat_env.py, with openstackclient's `env_list_tracker`). The server
//! merges the environment files as Heat does, so a file's parameter wins over `--param`.

use std::path::Path;
use std::process::Command;

use anneal_tests::{Shim, peers};
use serde_json::{Value, json};

const TEMPLATE: &str = "heat_template_version: 2018-08-31
parameters:
  port: {type: number}
  greeting: {type: string, default: hi}
  names: {type: comma_delimited_list, default: []}
resources:
  value:
    type: My::Value
    properties:
      value: {list_join: ['-', [{get_param: greeting}, {get_param: port}, {list_join: [',', {get_param: names}]}]]}
outputs:
  joined:
    value: {get_attr: [value, value]}
";
const FIRST: &str = "parameters: {port: 8080, greeting: hello}\nresource_registry: {\"My::Value\": OS::Heat::Value}\n";
const SECOND: &str = "parameters:\n  port: 9090\nparameter_defaults:\n  names: [x, y]\n";

/// What openstackclient's `stack create` sends for the files in `dir` (its fields, the
/// environment part from heatclient; the template has no get_file, so its files are the
/// environments only).
fn openstackclient_body(dir: &Path) -> Value {
    let cache = peers::cache(&["heat-venv/bin/python3"]);
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("peers/real-heat/heat_env.py");
    let output = Command::new(cache.join("heat-venv/bin/python3"))
        .current_dir(dir)
        .args([script.as_os_str(), "template.yaml".as_ref(), "first.yaml".as_ref(), "second.yaml".as_ref()])
        .output()
        .expect("run heat_env.py");
    let answer: Value = serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|error| panic!("heat_env.py: {error}: {}", String::from_utf8_lossy(&output.stderr)));
    json!({
        "name": "osc",
        "template": TEMPLATE,
        "parameters": {"port": "1"},
        "environment": answer["environment"],
        "environment_files": answer["environment_files"],
        "files": answer["env_files"],
    })
}

#[tokio::test(flavor = "multi_thread")]
async fn the_cli_and_openstackclient_give_the_same_stack() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let dir = tempfile::tempdir().expect("a temporary directory");
    for (name, text) in [("template.yaml", TEMPLATE), ("first.yaml", FIRST), ("second.yaml", SECOND)] {
        std::fs::write(dir.path().join(name), text).expect("write a file");
    }
    let body = openstackclient_body(dir.path());
    let mut shim = Shim::start().await;
    let path = |name: &str| dir.path().join(name).to_str().expect("a UTF-8 path").to_owned();
    let arguments = ["--template", &path("template.yaml"), "-e", &path("first.yaml"), "-e", &path("second.yaml")];
    let dry_run = shim
        .cli_json(&[&["stack", "create", "cli", "--print-request"][..], &arguments, &["--param", "port=1"]].concat())
        .await;
    assert_eq!(dry_run["environment_files"], body["environment_files"], "the same file:// URLs, in order");
    shim.cli_ok(&[&["stack", "create", "cli"][..], &arguments, &["--param", "port=1"]].concat()).await;

    let response = shim.post_stack(&body).await;
    assert!(response.status().is_success(), "{}", response.text().await.unwrap_or_default());

    let cli = shim.settled("cli", std::time::Duration::from_secs(30)).await;
    let osc = shim.settled("osc", std::time::Duration::from_secs(30)).await;
    assert_eq!(cli["status"], "CREATE_COMPLETE", "{cli}");
    assert_eq!(osc["status"], "CREATE_COMPLETE", "{osc}");
    for shown in [&cli, &osc] {
        // Heat's merge: the second file's port wins over the first's and over --param.
        assert_eq!(shown["parameters"]["port"], json!(9090), "{shown}");
    }
    let without_identity = |shown: &Value| {
        let mut parameters = shown["parameters"].clone();
        for pseudo in ["OS::stack_name", "OS::stack_id"] {
            parameters.as_object_mut().map(|map| map.remove(pseudo));
        }
        parameters
    };
    assert_eq!(without_identity(&cli), without_identity(&osc));
    assert_eq!(shim.stack_outputs("cli").await, shim.stack_outputs("osc").await);
    assert_eq!(shim.stack_outputs("cli").await["joined"], json!("hello-9090-x,y"));
    let types = |resources: serde_json::Map<String, Value>| -> Vec<(String, Value)> {
        resources.into_iter().map(|(name, resource)| (name, resource["resource_type"].clone())).collect()
    };
    assert_eq!(types(shim.stack_resources("cli").await), types(shim.stack_resources("osc").await));
    shim.stop().await;
}
