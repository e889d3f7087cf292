//! One side of a differential case: a fresh root with the recording fake tools on the hooks'
//! PATH, every `HEAT_*` directory of every hook inside it, and `anneal-agent hook-test` run with
//! either heat-agents' hook file installed (the Python side) or no file (the built-in side).
//! What the side did is read back normalised: the root's path becomes `{root}` and hook-test's
//! random scratch directory `{scratch}`, so the two sides compare as text.

use std::collections::BTreeMap;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anneal_tests::{agent_binary, toml_string};
use serde_json::Value;

use super::cases::{Case, Python};

/// Every hook setting heat-agents reads, each a directory (or file) in the root.
const SETTINGS: [(&str, &str); 16] = [
    ("HEAT_ANSIBLE_WORKING", "ansible/working"),
    ("HEAT_ANSIBLE_OUTPUTS", "ansible/outputs"),
    ("HEAT_PUPPET_WORKING", "puppet/working"),
    ("HEAT_PUPPET_OUTPUTS", "puppet/outputs"),
    ("HEAT_PUPPET_LOGDIR", "puppet/logs"),
    ("HEAT_PUPPET_HIERA_DATADIR", "hieradata"),
    ("HEAT_HIERA_CONFIG", "etc/hiera.yaml"),
    ("HEAT_CFN_INIT_LAST_METADATA_DIR", "cfn"),
    ("HEAT_CHEF_WORKING", "chef/working"),
    ("HEAT_CHEF_OUTPUTS", "chef/outputs"),
    ("HEAT_DOCKER_COMPOSE_WORKING", "compose"),
    ("HEAT_KUBELET_MANIFESTS", "kubelet/manifests"),
    ("HEAT_SALT_WORKING", "salt/working"),
    ("HEAT_SALT_OUTPUTS", "salt/outputs"),
    ("HEAT_SHELL_CONFIG", "heat-config.json"),
    ("FAKE_TOOL_LOG", "tool-log"),
];

/// Directories of the root that are the harness's, not the hook's.
const HARNESS_DIRS: [&str; 6] = ["bin", "pybin", "hooks", "state", "tool-log", "tmp"];

/// What one side did.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    pub exit_code: i32,
    /// The signal body hook-test printed, parsed (`Null` when it printed none).
    pub signal: Value,
    pub stderr: String,
    /// The fake tools' records, in order.
    pub invocations: Vec<Value>,
    /// Every file and directory the run left in the root: path → (mode, contents; `None` for a
    /// directory).
    pub files: BTreeMap<String, (u32, Option<String>)>,
}

/// Where heat-agents' files and the peers' virtual environments are.
pub struct Peers {
    pub heat_agents: PathBuf,
    /// The cache directory holding the virtual environments (`venv`, `docker-py`, `salt`).
    pub cache: PathBuf,
}

impl Peers {
    /// The `bin` directory of the case's virtual environment.
    fn bin(&self, python: Python) -> PathBuf {
        let venv = match python {
            Python::Peers => "venv",
            Python::DockerPy => "docker-py",
            Python::Salt => "salt",
        };
        self.cache.join(venv).join("bin")
    }
}

/// The fake Docker engine's HTTP side, killed (its process group) and reaped when dropped.
struct Engine(std::process::Child);

impl Drop for Engine {
    fn drop(&mut self) {
        let group = nix::unistd::Pid::from_raw(self.0.id() as i32);
        let _ = nix::sys::signal::killpg(group, nix::sys::signal::Signal::SIGKILL);
        let _ = self.0.wait();
    }
}

/// Starts `fake-docker.py serve` for the case (unless the description says no daemon answers)
/// and returns the `DOCKER_HOST` both sides use.
fn start_engine(description: &Value, root: &Path, python: &Path) -> (Option<Engine>, String) {
    if description["unreachable"] == Value::Bool(true) {
        // Port 9 (discard) on loopback: nothing listens there in the test's world.
        return (None, "tcp://127.0.0.1:9".to_string());
    }
    let port_file = root.join("state/docker-port");
    let child = Command::new(python)
        .arg(fake_docker())
        .arg("serve")
        .arg(&port_file)
        .env("FAKE_DOCKER", description.to_string())
        .env("FAKE_TOOL_LOG", root.join("tool-log"))
        .process_group(0)
        .stdin(Stdio::null())
        .spawn()
        .expect("start the fake Docker engine");
    let engine = Engine(child);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        if let Ok(port) = std::fs::read_to_string(&port_file) {
            return (Some(engine), format!("tcp://127.0.0.1:{}", port.trim()));
        }
        assert!(std::time::Instant::now() < deadline, "the fake Docker engine did not start");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

fn fake_docker() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/hooks/fake-docker.py")
}

/// Runs `case` in a fresh root under `parent`; `python_hook` installs heat-agents' hook file.
pub fn run(case: &Case, peers: &Peers, parent: &Path, python_hook: bool) -> Outcome {
    let side = if python_hook { "heat-agents" } else { "built-in" };
    let root = parent.join(format!("{}-{side}", case.name));
    for dir in HARNESS_DIRS {
        std::fs::create_dir_all(root.join(dir)).expect("root dirs");
    }
    std::fs::set_permissions(root.join("state"), std::fs::Permissions::from_mode(0o700)).expect("state mode");
    // The system directory hiera.yaml goes in exists on a real node (/etc/puppet).
    std::fs::create_dir_all(root.join("etc")).expect("etc");
    let fake = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/hooks/fake-tool.py");
    for tool in case.tools {
        std::os::unix::fs::symlink(&fake, root.join("bin").join(tool)).expect("install a fake tool");
    }
    let bin = peers.bin(case.python);
    // A wrapper, not a symlink: python finds its venv from the path it was started by, so a
    // symlink elsewhere would run the base interpreter without the venv's packages.
    let wrapper = root.join("pybin/python3");
    std::fs::write(&wrapper, format!("#!/bin/sh\nexec '{}' \"$@\"\n", bin.join("python3").display())).expect("python3");
    std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).expect("chmod python3");
    for (relative, contents) in &case.setup_files {
        let path = root.join(relative);
        std::fs::create_dir_all(path.parent().expect("a file in the root")).expect("setup dir");
        std::fs::write(&path, contents.replace("{root}", &root.display().to_string())).expect("setup file");
    }
    let deployment = with_root(&case.deployment, &root);
    let mut env = hook_env(case, &root, &bin);
    let mut _engine = None;
    if let Some(description) = &case.docker {
        std::os::unix::fs::symlink(fake_docker(), root.join("bin/docker")).expect("install the fake docker");
        let (engine, host) = start_engine(description, &root, &bin.join("python3"));
        _engine = engine;
        env.push(("DOCKER_HOST".into(), host));
        env.push(("FAKE_DOCKER".into(), description.to_string()));
    }
    if python_hook {
        install_python_hook(case.group, &peers.heat_agents, &root);
        if let Some(script) = case.orc_script {
            run_orc_script(&peers.heat_agents.join(script), &deployment, &env, &root);
        }
    }
    let config = write_config(&root, &env);
    let output = hook_test(case.group, &config, &deployment, &root);
    let text = |bytes: &[u8]| normalise(&String::from_utf8_lossy(bytes), &root);
    let stdout = text(&output.stdout);
    Outcome {
        exit_code: output.status.code().unwrap_or(-1),
        signal: serde_json::from_str(stdout.trim()).unwrap_or(Value::Null),
        stderr: text(&output.stderr),
        invocations: invocations(&root),
        files: files(&root),
    }
}

/// `{root}` in every string of `value` replaced by the root's path.
fn with_root(value: &Value, root: &Path) -> Value {
    let text = value.to_string().replace("{root}", &root.display().to_string());
    serde_json::from_str(&text).expect("the case stays JSON")
}

fn hook_env(case: &Case, root: &Path, bin: &Path) -> Vec<(String, String)> {
    let path = |relative: &str| root.join(relative).display().to_string();
    let mut env = vec![
        ("PATH".to_string(), format!("{}:{}:/usr/bin:/bin", path("bin"), path("pybin"))),
        ("LANG".to_string(), "C.UTF-8".to_string()),
        ("HOME".to_string(), path("home")),
        ("FAKE_TOOL_RESPONSES".to_string(), case.responses.to_string()),
    ];
    env.extend(SETTINGS.iter().map(|(name, relative)| (name.to_string(), path(relative))));
    for (name, value) in &case.env {
        env.retain(|(existing, _)| existing != name);
        let value = value.replace("{root}", &root.display().to_string()).replace("{bin}", &bin.display().to_string());
        env.push((name.to_string(), value));
    }
    env
}

fn install_python_hook(group: &str, heat_agents: &Path, root: &Path) {
    let source = heat_agents.join(format!("heat-config-{group}/install.d/hook-{group}.py"));
    let target = root.join("hooks").join(group);
    std::fs::copy(&source, &target).unwrap_or_else(|error| panic!("copy {}: {error}", source.display()));
    std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o755)).expect("chmod the hook");
}

/// heat-agents' os-refresh-config script for the hook (it writes what the hook then reads, e.g.
/// docker-compose.yml), run as os-refresh-config would with the deployment in HEAT_SHELL_CONFIG.
fn run_orc_script(script: &Path, deployment: &Value, env: &[(String, String)], root: &Path) {
    std::fs::write(root.join("heat-config.json"), Value::Array(vec![deployment.clone()]).to_string()).expect("config");
    let output = Command::new(root.join("pybin/python3"))
        .arg(script)
        .env_clear()
        .envs(env.iter().map(|(key, value)| (key, value)))
        .current_dir(root.join("tmp"))
        .output()
        .expect("run the os-refresh-config script");
    assert!(output.status.success(), "{}: {}", script.display(), String::from_utf8_lossy(&output.stderr));
    std::fs::remove_file(root.join("heat-config.json")).expect("remove the script's input");
}

fn write_config(root: &Path, env: &[(String, String)]) -> PathBuf {
    let quoted = |path: &Path| toml_string(&path.display().to_string());
    let mut text = format!(
        "[agent]\nstate_dir = {}\nhooks_dirs = [{}]\nhook_timeout_secs = 60\n\n[agent.hook_env]\n",
        quoted(&root.join("state")),
        quoted(&root.join("hooks"))
    );
    for (name, value) in env.iter().filter(|(name, _)| !matches!(name.as_str(), "PATH" | "LANG" | "HOME")) {
        text.push_str(&format!("{} = {}\n", toml_string(name), toml_string(value)));
    }
    text.push_str(&format!("\n[[source]]\nkind = \"local\"\npath = {}\n", quoted(&root.join("tmp"))));
    let config = root.join("state/agent.toml");
    std::fs::write(&config, text).expect("write the agent config");
    config
}

/// `anneal-agent hook-test GROUP --config F < deployment`, with the hooks' PATH, LANG and HOME
/// (the agent hands hooks its own three).
fn hook_test(group: &str, config: &Path, deployment: &Value, root: &Path) -> std::process::Output {
    let path = |relative: &str| root.join(relative).display().to_string();
    let mut child = Command::new(agent_binary())
        .args(["hook-test", group, "--config"])
        .arg(config)
        .env_clear()
        .env("PATH", format!("{}:{}:/usr/bin:/bin", path("bin"), path("pybin")))
        .env("LANG", "C.UTF-8")
        .env("HOME", path("home"))
        .env("TMPDIR", path("tmp"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start anneal-agent hook-test");
    child.stdin.take().expect("stdin").write_all(deployment.to_string().as_bytes()).expect("write the deployment");
    child.wait_with_output().expect("hook-test ends")
}

fn invocations(root: &Path) -> Vec<Value> {
    let log = root.join("tool-log");
    let count = std::fs::read_dir(&log).map(|entries| entries.count()).unwrap_or(0);
    (0..count)
        .map(|index| {
            let text = std::fs::read_to_string(log.join(format!("{index}.json"))).expect("a tool record");
            serde_json::from_str(&normalise(&text, root)).expect("a JSON record")
        })
        .collect()
}

/// Everything under the root but the harness's own directories.
fn files(root: &Path) -> BTreeMap<String, (u32, Option<String>)> {
    let mut found = BTreeMap::new();
    let mut pending = vec![root.to_path_buf()];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).expect("read a dir") {
            let path = entry.expect("a dir entry").path();
            let relative = path.strip_prefix(root).expect("under the root").display().to_string();
            if HARNESS_DIRS.contains(&relative.as_str()) {
                continue;
            }
            let metadata = std::fs::symlink_metadata(&path).expect("stat");
            let mode = metadata.permissions().mode() & 0o7777;
            if metadata.is_dir() {
                found.insert(relative, (mode, None));
                pending.push(path);
            } else {
                let contents = String::from_utf8_lossy(&std::fs::read(&path).expect("read a file")).into_owned();
                found.insert(relative, (mode, Some(normalise(&contents, root))));
            }
        }
    }
    found
}

/// The root's path as `{root}`, hook-test's scratch directory as `{scratch}`, and what differs
/// from run to run whoever runs the hook: Python logging's `asctime`, the fake Docker engine's
/// port, the timing of each Salt state.
fn normalise(text: &str, root: &Path) -> String {
    let text = text.replace(&root.display().to_string(), "{root}");
    let masks = [
        (r"\{root\}/tmp/anneal-hook-test-[A-Za-z0-9_]+", "{scratch}"),
        (r"\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}\]", "[{time}]"),
        (r"tcp://127\.0\.0\.1:\d+", "{docker_host}"),
        (r"duration: [0-9.]+", "duration: {duration}"),
        (r"start_time: '[0-9:.]+'", "start_time: {start_time}"),
    ];
    masks.iter().fold(text, |text, (pattern, replacement)| {
        regex::Regex::new(pattern).expect("pattern").replace_all(&text, *replacement).into_owned()
    })
}
