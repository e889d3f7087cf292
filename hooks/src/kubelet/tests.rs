//! The kubelet hook against a recording tool runner: heat-agents' own unit cases for the pod's
//! requirements, then whole runs (manifest, docker calls, polls, log and status).

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use super::wait::{id_to_pod_name_part, required_images, required_patterns};
use crate::testing::{Answer, Recorder, context, deployment, output, printed};
use crate::{Builtin, HookEnv, HookError, Invocation, Response};

const ID: &str = "a50ae8dd-b0c4-407f-8732-3571b3a0f28b";

/// test_hook_kubelet.py's config.
fn pod() -> Value {
    json!({"version": "v1beta2", "volumes": [{"name": "mariadb-data"}], "containers": [
        {"image": "kollaglue/fedora-rdo-rabbitmq", "name": "rabbitmq",
         "ports": [{"containerPort": 5672, "hostPort": 5672}]},
        {"image": "kollaglue/fedora-rdo-heat-engine", "name": "heat-engine",
         "env": [{"name": "AUTH_ENCRYPTION_KEY", "value": "Vegu95l2jwkucD9RSYAoFpRbUlh0PGF7"}]},
        {"image": "kollaglue/fedora-rdo-heat-engine", "name": "heat-engine2",
         "env": [{"name": "AUTH_ENCRYPTION_KEY", "value": "Vegu95l2jwkucD9RSYAoFpRbUlh0PGF7"}]}]})
}

fn variables(root: &Path) -> Vec<(String, String)> {
    let manifests = root.join("manifests").to_string_lossy().into_owned();
    [("PATH", "/usr/bin:/bin"), ("HEAT_KUBELET_MANIFESTS", manifests.as_str()), ("DOCKER_HOST", "tcp://d:2375")]
        .map(|(key, value)| (key.to_string(), value.to_string()))
        .to_vec()
}

async fn run(root: &Path, document: Value, tools: &mut Recorder) -> Result<Response, HookError> {
    let env = HookEnv::new(variables(root));
    let context = context(&env, root);
    Builtin::Kubelet.run(&deployment(document), &context, tools).await
}

fn call(root: &Path, program: &str, args: &[&str]) -> Invocation {
    Invocation {
        program: program.into(),
        args: args.iter().map(|arg| arg.to_string()).collect(),
        env: variables(root),
        cwd: root.to_path_buf(),
    }
}

const VERSION: [&str; 3] = ["version", "--format", "{{.Server.APIVersion}}"];
const IMAGES: [&str; 3] = ["images", "--format", "{{.Repository}}:{{.Tag}}"];
const PS: [&str; 4] = ["ps", "--no-trunc", "--format", "{{.Names}}"];

/// The log without its times: `[LEVEL] message` lines.
fn untimed(text: &Value) -> Vec<String> {
    let text = text.as_str().unwrap();
    text.lines().map(|line| line.split_once("] (heat-config) ").unwrap().1.to_string()).collect()
}

fn manifest(root: &Path, id: &str) -> PathBuf {
    root.join("manifests").join(format!("{id}.json"))
}

#[test]
fn pod_requirements_are_heat_agents() {
    assert_eq!(id_to_pod_name_part("fc9070b3-ba4e-4f22-b732-5ffdcdb40b74"), "fc9070b3ba4e4f2");
    let patterns = required_patterns(
        "fc9070b3-ba4e-4f22-b732-5ffdcdb40b74",
        &json!({"containers": [
        {"name": "mariadb", "image": "m"}]}),
    )
    .ok()
    .unwrap();
    let mariadb = &patterns[0];
    assert_eq!(mariadb.text(), "^/k8s_mariadb\\.[0-9a-z]{8}_fc9070b3ba4e4f2");
    let long = "/k8s_mariadb.dac8ccce_fc9070b3ba4e4f2uv6pejpu5nqbmrqoungurhtob5gvt.default.\
                file_2c8cf9fc94674e8buv6pejpu5nqbmrqoungurhtob5gvt_dcd1e1d9";
    assert!(mariadb.matches(long));
    assert!(mariadb.matches("/k8s_mariadb.dac8ccce_fc9070b3ba4e4f2a"));
    assert!(!mariadb.matches("k8s_mariadb.dac8ccce_fc9070b3ba4e4f2a"));
    assert!(!mariadb.matches("/k8s_mysqldb.dac8ccce_fc9070b3ba4e4f2a"));
    assert!(!mariadb.matches("/k8s_mariadb.dac8ccc_fc9070b3ba4e4f2a"));
    assert!(!mariadb.matches("/k8s_mariadb.dac8ccce_gc9070b3ba4e4f22a"));
    assert!(!mariadb.matches("/k8s_mariadb.DAC8CCCE_fc9070b3ba4e4f2a"));

    let texts: Vec<String> = required_patterns(ID, &pod()).ok().unwrap().iter().map(|p| p.text()).collect();
    assert_eq!(
        texts,
        [
            "^/k8s_rabbitmq\\.[0-9a-z]{8}_a50ae8ddb0c4407",
            "^/k8s_heat-engine\\.[0-9a-z]{8}_a50ae8ddb0c4407",
            "^/k8s_heat-engine2\\.[0-9a-z]{8}_a50ae8ddb0c4407"
        ]
    );
    let images = required_images(&pod()).ok().unwrap();
    assert_eq!(images, ["kollaglue/fedora-rdo-rabbitmq", "kollaglue/fedora-rdo-heat-engine"]);
    assert!(required_images(&json!({})).ok().unwrap().is_empty());
}

#[tokio::test]
async fn kubelet_writes_the_manifest_and_polls_until_the_pod_runs() {
    let root = tempfile::tempdir().unwrap();
    let root = root.path();
    let containers = "k8s_rabbitmq.0123abcd_a50ae8ddb0c4407x,web/rabbit\nk8s_heat-engine.0123abcd_a50ae8ddb0c4407x\n";
    let mut tools = Recorder::answering(vec![
        output("1.41\n", "", 0),
        output("kollaglue/fedora-rdo-rabbitmq:latest\n<none>:<none>\n", "", 0),
        output("", "", 0),
        output("kollaglue/fedora-rdo-rabbitmq:latest\nkollaglue/fedora-rdo-heat-engine:1\n", "", 0),
        output(containers, "", 0),
        output("", "", 0),
        output("k8s_heat-engine2.0123abcd_a50ae8ddb0c4407x\n", "", 0),
    ]);
    let document = json!({"id": ID, "group": "kubelet", "config": pod(), "options": {"poll_period": 0.5}});
    let answer = printed(run(root, document, &mut tools).await.unwrap());

    let written = fs::read_to_string(manifest(root, ID)).unwrap();
    assert_eq!(written, anneal_protocol::pyjson::dumps_indented(&pod(), 2, false));
    assert!(written.starts_with("{\n  \"version\": \"v1beta2\",\n  \"volumes\": ["));
    assert_eq!(fs::metadata(manifest(root, ID)).unwrap().permissions().mode() & 0o777, 0o600);
    assert_eq!(fs::metadata(root.join("manifests")).unwrap().permissions().mode() & 0o777, 0o700);
    let expected = [
        call(root, "docker", &VERSION),
        call(root, "docker", &IMAGES),
        call(root, "sleep", &["0.5"]),
        call(root, "docker", &IMAGES),
        call(root, "docker", &PS),
        call(root, "sleep", &["0.5"]),
        call(root, "docker", &PS),
    ];
    assert_eq!(tools.invocations, expected);
    assert_eq!(
        untimed(&answer["deploy_stdout"]),
        [
            "[DEBUG] Connecting to tcp://d:2375",
            "[DEBUG] Connected to version 1.41",
            "[INFO] Waiting for images: kollaglue/fedora-rdo-rabbitmq, kollaglue/fedora-rdo-heat-engine",
            "[INFO] Found image: kollaglue/fedora-rdo-rabbitmq:latest",
            "[INFO] Found image: kollaglue/fedora-rdo-heat-engine:1",
            "[INFO] Waiting for containers matching: ^/k8s_rabbitmq\\.[0-9a-z]{8}_a50ae8ddb0c4407, \
             ^/k8s_heat-engine\\.[0-9a-z]{8}_a50ae8ddb0c4407, ^/k8s_heat-engine2\\.[0-9a-z]{8}_a50ae8ddb0c4407",
            "[INFO] Pattern ^/k8s_rabbitmq\\.[0-9a-z]{8}_a50ae8ddb0c4407 matches: \
             /k8s_rabbitmq.0123abcd_a50ae8ddb0c4407x",
            "[INFO] Pattern ^/k8s_heat-engine\\.[0-9a-z]{8}_a50ae8ddb0c4407 matches: \
             /k8s_heat-engine.0123abcd_a50ae8ddb0c4407x",
            "[INFO] Pattern ^/k8s_heat-engine2\\.[0-9a-z]{8}_a50ae8ddb0c4407 matches: \
             /k8s_heat-engine2.0123abcd_a50ae8ddb0c4407x",
        ]
    );
    let stdout = answer["deploy_stdout"].as_str().unwrap();
    assert!(stdout.starts_with('[') && stdout.as_bytes()[24] == b']', "{stdout}");
    let keys: Vec<&String> = answer.as_object().unwrap().keys().collect();
    assert_eq!(keys, ["deploy_stdout", "deploy_stderr", "deploy_status_code"]);
    assert_eq!(answer["deploy_stderr"], "");
    assert_eq!(answer["deploy_status_code"], 0);
}

#[tokio::test]
async fn a_timeout_or_a_failing_docker_is_status_1() {
    let root = tempfile::tempdir().unwrap();
    let root = root.path();
    let mut tools = Recorder::answering(vec![output("1.41", "", 0), output("other:latest\n", "", 0)]);
    let document = json!({"id": ID, "group": "kubelet", "config": pod(), "options": {"images_timeout": 0}});
    let answer = printed(run(root, document, &mut tools).await.unwrap());
    let errors = [
        format!("[ERROR] An error occurred deploying pod {ID}"),
        "[ERROR] Timed out after 0 seconds waiting for matching images: kollaglue/fedora-rdo-rabbitmq:, \
         kollaglue/fedora-rdo-heat-engine:"
            .to_string(),
    ];
    assert_eq!(untimed(&answer["deploy_stderr"]), errors);
    assert_eq!(untimed(&answer["deploy_stdout"])[3..], errors);
    assert_eq!(answer["deploy_status_code"], 1);
    assert_eq!(tools.invocations.len(), 2);

    // Every image found, then `docker ps` fails: no sleep, the pod failed.
    let mut tools = Recorder::answering(vec![
        output("1.41", "", 0),
        output("kollaglue/fedora-rdo-rabbitmq:latest\nkollaglue/fedora-rdo-heat-engine:latest\n", "", 0),
        output("", "Cannot connect", 1),
    ]);
    let document = json!({"id": ID, "group": "kubelet", "config": pod(), "options": {"images_timeout": 0}});
    let answer = printed(run(root, document, &mut tools).await.unwrap());
    assert_eq!(untimed(&answer["deploy_stderr"])[1], "[ERROR] docker ps failed: Cannot connect");
    assert_eq!(answer["deploy_status_code"], 1);
    assert_eq!(tools.invocations.len(), 3);

    // A config that is no pod, and a timeout that is no number, fail the pod too.
    for (config, options, error) in [
        (json!("text"), json!({}), "[ERROR] the config is not a pod manifest (a map)"),
        (pod(), json!({"images_timeout": "1"}), "[ERROR] option images_timeout must be a number, not \"1\""),
    ] {
        let mut tools = Recorder::answering(vec![output("1.41", "", 0)]);
        let document = json!({"id": "x", "group": "kubelet", "config": config, "options": options});
        let answer = printed(run(root, document, &mut tools).await.unwrap());
        assert_eq!(untimed(&answer["deploy_stderr"])[1], error);
        assert_eq!(answer["deploy_status_code"], 1);
    }
    // The manifest of the last run keeps the config's key order, as `json.dump` does.
    assert!(fs::read_to_string(manifest(root, "x")).unwrap().starts_with("{\n  \"version\": \"v1beta2\",\n"));
}

#[tokio::test]
async fn no_docker_is_the_hooks_error_and_delete_removes_the_manifest() {
    let root = tempfile::tempdir().unwrap();
    let root = root.path();
    let document = json!({"id": ID, "group": "kubelet", "config": pod()});
    let mut tools = Recorder::answering(vec![Answer::Missing]);
    let error = run(root, document.clone(), &mut tools).await.unwrap_err();
    assert_eq!(error.to_string(), "cannot start docker");
    let mut tools = Recorder::answering(vec![output("", "daemon down", 1)]);
    let error = run(root, document, &mut tools).await.unwrap_err();
    assert_eq!(error.to_string(), "cannot connect to docker at tcp://d:2375: daemon down");
    assert!(manifest(root, ID).is_file());

    let mut tools = Recorder::default();
    let document = json!({"id": ID, "group": "kubelet", "config": pod(),
        "inputs": [{"name": "deploy_action", "value": "DELETE"}]});
    let answer = printed(run(root, document, &mut tools).await.unwrap());
    assert_eq!(answer, json!({"deploy_stdout": "", "deploy_stderr": "", "deploy_status_code": 0}));
    assert!(!manifest(root, ID).exists());
    assert!(tools.invocations.is_empty());
}

#[tokio::test]
async fn each_action_replaces_the_manifest_of_the_previous_one_and_delete_removes_it() {
    let root = tempfile::tempdir().unwrap();
    let root = root.path();
    let action = |id: &str, action: &str| {
        let inputs = json!([{"name": "deploy_stack_id", "value": "stack/1"}, {"name": "deploy_resource_name", "value": "pod"},
            {"name": "deploy_action", "value": action}]);
        json!({"id": id, "group": "kubelet", "config": pod(), "inputs": inputs})
    };
    // CREATE's docker calls fail (no docker): the manifest is written all the same.
    let _ = run(root, action("create-id", "CREATE"), &mut Recorder::answering(vec![Answer::Missing])).await;
    assert!(manifest(root, "create-id").is_file());
    let _ = run(root, action("update-id", "UPDATE"), &mut Recorder::answering(vec![Answer::Missing])).await;
    assert!(manifest(root, "update-id").is_file());
    assert!(!manifest(root, "create-id").exists(), "UPDATE's manifest replaced CREATE's");
    // Another deployment's manifest is left alone.
    let _ = run(
        root,
        json!({"id": "other-id", "group": "kubelet", "config": pod()}),
        &mut Recorder::answering(vec![Answer::Missing]),
    )
    .await;
    let answer = printed(run(root, action("delete-id", "DELETE"), &mut Recorder::default()).await.unwrap());
    assert_eq!(answer["deploy_status_code"], 0);
    assert!(!manifest(root, "update-id").exists(), "DELETE removed the deployment's manifest");
    assert!(!manifest(root, "delete-id").exists());
    assert!(manifest(root, "other-id").is_file());
    let hidden: Vec<_> = std::fs::read_dir(manifest(root, "other-id").parent().unwrap())
        .unwrap()
        .map(|entry| entry.unwrap().file_name().into_string().unwrap())
        .filter(|name| name.starts_with('.'))
        .collect();
    assert!(hidden.is_empty(), "{hidden:?}");
}
