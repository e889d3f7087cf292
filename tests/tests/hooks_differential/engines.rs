//! The differential cases of the two hooks that talk to an engine rather than run a tool
//! heat-agents' fake can stand in for: `kubelet` (heat-agents' hook asks the Docker Engine API
//! through docker-py 1.x, the built-in asks the docker CLI; both are answered by one fake engine,
//! tests/fixtures/hooks/fake-docker.py, from the same description) and `salt` (heat-agents' hook
//! drives Salt's Python API in-process, the built-in runs salt-call; both run the real Salt from
//! PyPI on the states heat-agents' tests/test_hook_salt.py applies).

use serde_json::{Value, json};

use super::cases::{Case, Python, case};
use super::side::Outcome;

const KUBELET_SCRIPT: &str = "heat-config-kubelet/os-refresh-config/configure.d/50-heat-config-kubelet";

/// heat-agents' tests/test_hook_kubelet.py pod: three containers, two images.
fn pod() -> Value {
    json!({
        "version": "v1beta2",
        "volumes": [{"name": "mariadb-data"}],
        "containers": [
            {"image": "kollaglue/fedora-rdo-rabbitmq", "name": "rabbitmq",
             "ports": [{"containerPort": 5672, "hostPort": 5672}]},
            {"image": "kollaglue/fedora-rdo-heat-engine", "name": "heat-engine",
             "env": [{"name": "AUTH_ENCRYPTION_KEY", "value": "Vegu95l2jwkucD9RSYAoFpRbUlh0PGF7"}]},
            {"image": "kollaglue/fedora-rdo-heat-engine", "name": "heat-engine2",
             "env": [{"name": "AUTH_ENCRYPTION_KEY", "value": "Vegu95l2jwkucD9RSYAoFpRbUlh0PGF7"}]},
        ],
    })
}

fn kubelet_deployment(config: Value, options: Value) -> Value {
    json!({"id": "a50ae8dd-b0c4-407f-8732-3571b3a0f28b", "group": "kubelet", "inputs": [],
           "name": "20_apache_deployment", "outputs": [], "options": options, "config": config})
}

fn kubelet_case(name: &'static str, config: Value, options: Value, engine: Value) -> Case {
    case(name, "kubelet", kubelet_deployment(config, options), &[])
        .python(Python::DockerPy)
        .docker(engine)
        .with_env("ANNEAL_PEER_SANDBOX", "{root}/state")
        .orc_script(KUBELET_SCRIPT)
}

/// The containers the pod's kubelet would have started, as that era's kubelet named them.
fn pod_containers() -> Value {
    json!([
        "k8s_rabbitmq.1a2b3c4d_a50ae8ddb0c4407uv6pejpu5nq.default.file_x",
        "k8s_heat-engine.5e6f7a8b_a50ae8ddb0c4407uv6pejpu5nq.default.file_x",
        "k8s_heat-engine2.9c0d1e2f_a50ae8ddb0c4407uv6pejpu5nq.default.file_x"
    ])
}

pub fn kubelet() -> Vec<Case> {
    let quick = json!({"poll_period": 0});
    let one = json!({"containers": [{"image": "nginx", "name": "web"}]});
    let web = json!("k8s_web.0a1b2c3d_a50ae8ddb0c4407_default");
    let both_images = json!(["kollaglue/fedora-rdo-rabbitmq:latest", "kollaglue/fedora-rdo-heat-engine:2015.1"]);
    vec![
        kubelet_case(
            "kubelet-one-container",
            one.clone(),
            quick.clone(),
            json!({"images": [["nginx:latest"]], "containers": [[web]]}),
        ),
        // The containers come up at the third listing: both hooks poll the same number of times.
        kubelet_case(
            "kubelet-polls",
            one.clone(),
            quick.clone(),
            json!({"images": [[], ["nginx:1.25"]], "containers": [[], ["other"], [web]]}),
        ),
        kubelet_case("kubelet-no-containers", json!({}), quick.clone(), json!({})),
        kubelet_case(
            "kubelet-images-timeout",
            one.clone(),
            json!({"poll_period": 0, "images_timeout": 0}),
            json!({"images": [["redis:7"]]}),
        )
        .differs(
            "heat-agents logs the timeout with its traceback (log.exception); the built-in logs the message",
            same_but_traceback,
        ),
        kubelet_case(
            "kubelet-pod",
            pod(),
            quick.clone(),
            json!({"images": [both_images], "containers": [pod_containers()]}),
        )
        .differs(
            "heat-agents waits for a set of images (random order) and skips an image it removes while \
                      iterating, finding it at the next listing; the built-in waits in the pod's order in one listing",
            same_lines_any_order,
        ),
        kubelet_case(
            "kubelet-containers-timeout",
            one.clone(),
            json!({"poll_period": 0, "containers_timeout": 0}),
            json!({"images": [["nginx:latest"]], "containers": [["unrelated"]]}),
        )
        .differs(
            "heat-agents' timeout message joins a method (', '.join(dict.keys)), a TypeError; the \
                      built-in names the patterns",
            containers_timeout,
        ),
        kubelet_case(
            "kubelet-image-matched-twice",
            one.clone(),
            quick.clone(),
            json!({"images": [["nginx:1.24", "nginx:1.25"]], "containers": [[web]]}),
        )
        .differs(
            "heat-agents removes a found prefix once per matching image, a ValueError at the second; the \
                      built-in takes the first match",
            image_matched_twice,
        ),
        kubelet_case("kubelet-docker-unreachable", one, quick, json!({"unreachable": true})).differs(
            "heat-agents connects outside its try: a traceback; the built-in fails naming the daemon",
            docker_unreachable,
        ),
    ]
}

/// A log (deploy_stdout or deploy_stderr) without Python's traceback blocks.
fn without_tracebacks(log: &Value) -> String {
    let mut kept = Vec::new();
    let mut in_traceback = false;
    for line in log.as_str().unwrap_or("").lines() {
        if line.starts_with("Traceback (most recent call last):") {
            in_traceback = true;
        } else if line.starts_with("[{time}]") {
            in_traceback = false;
        }
        if !in_traceback {
            kept.push(line);
        }
    }
    kept.join("\n")
}

fn same_but_traceback(heat_agents: &Outcome, built_in: &Outcome) {
    assert!(heat_agents.signal["deploy_stdout"].as_str().unwrap_or("").contains("Traceback"), "{heat_agents:?}");
    for key in ["deploy_stdout", "deploy_stderr"] {
        assert_eq!(without_tracebacks(&heat_agents.signal[key]), without_tracebacks(&built_in.signal[key]), "{key}");
    }
    assert_eq!(heat_agents.signal["deploy_status_code"], 1);
    assert_eq!(built_in.signal["deploy_status_code"], 1);
    assert_eq!(heat_agents.invocations, built_in.invocations);
    assert_eq!(heat_agents.files, built_in.files);
}

/// The log's lines sorted, the images of "Waiting for images:" sorted too.
fn sorted_lines(log: &Value) -> Vec<String> {
    let mut lines: Vec<String> = log
        .as_str()
        .unwrap_or("")
        .lines()
        .map(|line| match line.split_once("Waiting for images: ") {
            Some((head, images)) => {
                let mut images: Vec<&str> = images.split(", ").collect();
                images.sort_unstable();
                format!("{head}Waiting for images: {}", images.join(", "))
            }
            None => line.to_string(),
        })
        .collect();
    lines.sort();
    lines
}

fn same_lines_any_order(heat_agents: &Outcome, built_in: &Outcome) {
    assert_eq!(sorted_lines(&heat_agents.signal["deploy_stdout"]), sorted_lines(&built_in.signal["deploy_stdout"]));
    assert_eq!(heat_agents.signal["deploy_status_code"], 0);
    assert_eq!(built_in.signal["deploy_status_code"], 0);
    assert_eq!(heat_agents.files, built_in.files);
    let images = |outcome: &Outcome| outcome.invocations.iter().filter(|record| record["query"] == "images").count();
    assert_eq!(images(built_in), 1, "the built-in finds both images in one listing");
    assert!(images(heat_agents) >= 1);
}

fn containers_timeout(heat_agents: &Outcome, built_in: &Outcome) {
    let stdout = |outcome: &Outcome| outcome.signal["deploy_stdout"].as_str().unwrap_or("").to_string();
    assert!(stdout(heat_agents).contains("TypeError"), "{heat_agents:?}");
    assert!(
        stdout(built_in).contains(
            r"Timed out after 0 seconds waiting for matching containers: ^/k8s_web\.[0-9a-z]{8}_a50ae8ddb0c4407"
        ),
        "{built_in:?}"
    );
    assert_eq!(heat_agents.signal["deploy_status_code"], 1);
    assert_eq!(built_in.signal["deploy_status_code"], 1);
    assert_eq!(heat_agents.files, built_in.files);
}

fn image_matched_twice(heat_agents: &Outcome, built_in: &Outcome) {
    assert!(heat_agents.signal["deploy_stdout"].as_str().unwrap_or("").contains("x not in list"), "{heat_agents:?}");
    assert_eq!(heat_agents.signal["deploy_status_code"], 1);
    assert!(built_in.signal["deploy_stdout"].as_str().unwrap_or("").contains("Found image: nginx:1.24\n"));
    assert_eq!(built_in.signal["deploy_status_code"], 0, "{built_in:?}");
}

fn docker_unreachable(heat_agents: &Outcome, built_in: &Outcome) {
    super::cases::crashed(heat_agents);
    assert_eq!(built_in.signal["deploy_status_code"], 1, "{built_in:?}");
    let stderr = built_in.signal["deploy_stderr"].as_str().unwrap_or("");
    assert!(stderr.contains("cannot connect to docker at {docker_host}"), "{built_in:?}");
    assert!(built_in.invocations.is_empty() && heat_agents.invocations.is_empty());
}

/// A minion config keeping every path of Salt's inside the side's root (its harness `state`
/// directory, which the file comparison skips: Salt's caches differ from run to run).
const MINION: &str = "root_dir: {root}/state/salt\ncachedir: {root}/state/salt/cache\n\
                      log_file: {root}/state/salt/minion.log\nlog_level: DEBUG\n";

/// heat-agents' tests/test_hook_salt.py states.
const SLS_OK: &str = "\ntestit:\n  environ.setenv:\n  - name: does_not_matter\n  - value:\n      \
                      foo: {{ opts['fooval'] }}\n      bar: {{ opts['barval'] }}\n";
const SLS_FAIL: &str = "\nfailure:\n  test.echo:\n  - text: I don't work\n";
const SLS_NOT_ALLOWED: &str =
    "\ndefault to accept:\n  iptables.set_policy:\n    - chain: INPUT\n    - policy: REJECT\n";

fn salt_deployment(config: Value, outputs: Value) -> Value {
    json!({"id": "fake_stack", "name": "fake_resource_name", "group": "salt",
           "inputs": [{"name": "fooval", "value": "bar"}, {"name": "barval", "value": "foo"}],
           "outputs": outputs, "config": config})
}

fn salt_case(name: &'static str, config: Value, outputs: Value) -> Case {
    case(name, "salt", salt_deployment(config, outputs), &[])
        .python(Python::Salt)
        .with_env("ANNEAL_PEER_SANDBOX", "{root}/state")
        .setup_file("etc/salt/minion", MINION)
        .with_env("SALT_MINION_CONFIG", "{root}/etc/salt/minion")
        .with_env("HEAT_SALT_CMD", "{bin}/salt-call")
        .differs(
            "the built-in runs salt-call with a config dir beside the state (the inputs as options)",
            same_but_config_dir,
        )
}

pub fn salt() -> Vec<Case> {
    let outputs = json!([{"name": "first_output"}, {"name": "second_output"}]);
    let map = json!({"testit": {"environ.setenv": [{"name": "from_a_map"}, {"value": {"answer": "42"}}]}});
    vec![
        salt_case("salt-ok", json!(SLS_OK), outputs.clone()),
        salt_case("salt-failed", json!(SLS_FAIL), outputs.clone()),
        salt_case("salt-not-allowed", json!(SLS_NOT_ALLOWED), outputs.clone()),
        salt_case("salt-map-config", map, json!([{"name": "retcode"}])),
        salt_case("salt-render-error", json!("testit:\n  - [unclosed\n"), outputs).differs(
            "heat-agents crashes on Salt's list of render errors ('list' has no 'items'); the built-in reports them",
            render_error,
        ),
    ]
}

/// Same signal and files, but for the built-in's `<id>.minion` config dir.
fn same_but_config_dir(heat_agents: &Outcome, built_in: &Outcome) {
    assert_eq!(heat_agents.signal, built_in.signal);
    assert!(heat_agents.signal["deploy_status_code"].is_number(), "{heat_agents:?}");
    let mut files = built_in.files.clone();
    let config_dir: Vec<String> = files.keys().filter(|path| path.contains("fake_stack.minion")).cloned().collect();
    assert!(!config_dir.is_empty(), "the built-in wrote its config dir: {files:?}");
    for path in config_dir {
        files.remove(&path);
    }
    assert_eq!(heat_agents.files, files);
}

fn render_error(heat_agents: &Outcome, built_in: &Outcome) {
    super::cases::crashed(heat_agents);
    assert!(heat_agents.stderr.contains("AttributeError") || heat_agents.signal.to_string().contains("AttributeError"));
    assert_ne!(built_in.signal["deploy_status_code"], 0, "{built_in:?}");
    assert!(built_in.signal["deploy_stderr"].as_str().unwrap_or("").contains("Rendering SLS"), "{built_in:?}");
}
