//! The differential cases: per hook, the deployments heat-agents' own tests
//! (tests/test_hook_<name>.py of its sdist) run its hook with, the fake tools installed and what
//! they answer, and whether both sides must agree exactly or differ on purpose (and how each side
//! must then behave). `{root}` in a deployment or setting stands for the side's root directory;
//! `$VAR` in a fake tool's file path is expanded from the tool's environment.

use serde_json::{Value, json};

use super::side::Outcome;

/// One deployment run through heat-agents' hook and through the built-in.
pub struct Case {
    pub name: &'static str,
    pub group: &'static str,
    pub deployment: Value,
    /// `FAKE_TOOL_RESPONSES`: the answer of each tool run, in order.
    pub responses: Value,
    /// The fake tools on the hooks' PATH (any other tool is missing).
    pub tools: &'static [&'static str],
    /// Extra hook settings.
    pub env: Vec<(&'static str, &'static str)>,
    /// heat-agents' os-refresh-config script for the hook, run before it on the heat-agents side.
    pub orc_script: Option<&'static str>,
    /// The python heat-agents' hook runs with (and whose `bin` the built-in's tools come from).
    pub python: Python,
    /// The fake Docker engine's description (tests/fixtures/hooks/fake-docker.py), when the hook
    /// talks to docker: `docker` on the PATH, and the Engine API on a loopback port in
    /// `DOCKER_HOST`.
    pub docker: Option<Value>,
    /// Files written into the root before the run: relative path, contents (`{root}` expanded).
    pub setup_files: Vec<(&'static str, &'static str)>,
    pub expect: Expect,
}

/// The peers' virtual environments (tests/peers/setup.sh).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Python {
    /// `venv`: PyYAML and the os-*-config tools, enough for most hooks.
    Peers,
    /// `docker-py`: docker-py 1.10, the client heat-agents' kubelet hook imports.
    DockerPy,
    /// `salt`: Salt, which heat-agents' salt hook imports and whose salt-call the built-in runs.
    Salt,
}

pub enum Expect {
    /// Same signal, same tool runs (argv, env, cwd, stdin), same files (modes and bytes).
    Identical,
    /// A difference kept on purpose: `reason` says why; `check(heat_agents, built_in)` asserts
    /// what each side does.
    Differs { reason: &'static str, check: fn(&Outcome, &Outcome) },
}

pub(crate) fn case(name: &'static str, group: &'static str, deployment: Value, tools: &'static [&'static str]) -> Case {
    Case {
        name,
        group,
        deployment,
        responses: json!([]),
        tools,
        env: Vec::new(),
        orc_script: None,
        python: Python::Peers,
        docker: None,
        setup_files: Vec::new(),
        expect: Expect::Identical,
    }
}

impl Case {
    fn answers(mut self, responses: Value) -> Case {
        self.responses = responses;
        self
    }

    pub(crate) fn orc_script(mut self, script: &'static str) -> Case {
        self.orc_script = Some(script);
        self
    }

    pub(crate) fn with_env(mut self, name: &'static str, value: &'static str) -> Case {
        self.env.push((name, value));
        self
    }

    pub(crate) fn python(mut self, python: Python) -> Case {
        self.python = python;
        self
    }

    pub(crate) fn docker(mut self, description: Value) -> Case {
        self.docker = Some(description);
        self
    }

    pub(crate) fn setup_file(mut self, path: &'static str, contents: &'static str) -> Case {
        self.setup_files.push((path, contents));
        self
    }

    pub(crate) fn differs(mut self, reason: &'static str, check: fn(&Outcome, &Outcome)) -> Case {
        self.expect = Expect::Differs { reason, check };
        self
    }
}

/// A deployment with heat-agents' test inputs, `options` and `config`, and two declared outputs.
fn deployment(id: &str, group: &str, options: Value, config: Value) -> Value {
    json!({
        "id": id, "name": "fake_resource_name", "group": group, "options": options,
        "creation_time": "2015-07-16T11:40:20",
        "inputs": [{"name": "foo", "value": "bar"}, {"name": "another", "value": "input"}],
        "outputs": [{"name": "first_output"}, {"name": "second_output"}],
        "config": config,
    })
}

/// A heat-agents hook crashed (a traceback, exit 1) where the built-in reports what it means to.
pub(crate) fn crashed(heat_agents: &Outcome) {
    assert_eq!(heat_agents.signal["deploy_status_code"], 1, "{:?}", heat_agents.signal);
    assert!(heat_agents.signal["deploy_stderr"].as_str().unwrap_or("").contains("Traceback"), "{heat_agents:?}");
}

/// The script hook's config is the program: heat-agents' test_hook_script.py runs its fake tool
/// as the config, and so do these (ours, which records how it ran). heat-agents' hook keeps its
/// script and outputs in HEAT_SCRIPT_WORKING / HEAT_SCRIPT_OUTPUTS, the built-in in hook-test's
/// scratch directory: the settings put heat-agents' there too, so the recorded paths (the
/// program, its directory, `heat_outputs_path`) compare equal once normalised. Those files are
/// in the harness's `tmp`, which the file comparison skips: the script file's mode and bytes are
/// checked by the agent's and the hooks crate's unit tests instead.
pub fn script() -> Vec<Case> {
    let fake_tool = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/hooks/fake-tool.py"))
        .expect("read the fake tool");
    let mut base = deployment("1234", "script", json!({}), json!(fake_tool));
    // heat-agents' test inputs: JSON text in strings, passed as they are.
    base["inputs"] = json!([{"name": "foo", "value": "bar"}, {"name": "another", "value": "input"},
        {"name": "a_dict", "value": "{\"key\": \"value\"}"}, {"name": "a_list", "value": "[\"v1\", 12]"}]);
    let with = |name, deployment: Value, answers: Value| {
        case(name, "script", deployment, &[])
            .answers(answers)
            .with_env("HEAT_SCRIPT_WORKING", "{root}/tmp/anneal-hook-test-heatagents/script")
            .with_env("HEAT_SCRIPT_OUTPUTS", "{root}/tmp/anneal-hook-test-heatagents/outputs")
    };
    let outputs = json!([{"stdout": "script success", "stderr": "thing happened", "files": {
        "$heat_outputs_path.first_output": "output 1", "$heat_outputs_path.second_output": "output 2\r\nline\r"}}]);
    let mut structured = base.clone();
    structured["inputs"] = json!([{"name": "bag", "type": "Json", "value": {"k": ["é", null, true]}},
        {"name": "list", "value": ["a", 1]}, {"name": "novalue"}]);
    let mut number = base.clone();
    number["inputs"] = json!([{"name": "count", "type": "Number", "value": 3}]);
    let mut not_a_script = base.clone();
    not_a_script["config"] = json!("echo no interpreter line");
    vec![
        with("script-success", base.clone(), outputs),
        with(
            "script-failed",
            base,
            json!([{"stdout": "script failed", "stderr": "bad thing happened", "returncode": 1}]),
        ),
        with("script-structured-inputs", structured, json!([])),
        with("script-number-input", number, json!([])).differs(
            "heat-agents passes a Number input's value to Popen's env and crashes; the built-in passes its JSON text",
            |heat_agents, built_in| {
                crashed(heat_agents);
                assert_eq!(built_in.signal["deploy_status_code"], 0, "{:?}", built_in.signal);
                assert_eq!(built_in.invocations[0]["env"]["count"], "3");
            },
        ),
        with("script-not-a-script", not_a_script, json!([])).differs(
            "heat-agents' Popen fails with a traceback (exec format error); the built-in says what is missing",
            |heat_agents, built_in| {
                crashed(heat_agents);
                assert_eq!(built_in.signal["deploy_status_code"], 1);
                let stderr = built_in.signal["deploy_stderr"].as_str().unwrap_or("");
                assert!(stderr.contains("does not start with #!"), "{stderr}");
                assert!(built_in.invocations.is_empty());
            },
        ),
    ]
}

pub fn ansible() -> Vec<Case> {
    let playbook = json!("the ansible playbook");
    let outputs = json!([{"stdout": "ansible success", "stderr": "thing happened", "files": {
        "$HEAT_ANSIBLE_OUTPUTS/1234.first_output": "output 1", "$HEAT_ANSIBLE_OUTPUTS/1234.second_output": "output 2"}}]);
    let with = |name, options: Value| {
        case(name, "ansible", deployment("1234", "ansible", options, playbook.clone()), &["ansible-playbook"])
            .answers(outputs.clone())
    };
    let mut typed = deployment("1235", "ansible", json!({}), playbook.clone());
    typed["inputs"] = json!([{"name": "count", "type": "Number", "value": 3}, {"name": "bag", "type": "Json",
        "value": {"k": ["é", null, true]}}, {"name": "novalue"}]);
    vec![
        with("ansible-basic", json!({})),
        with("ansible-tags", json!({"tags": "abc,def"})),
        with("ansible-modulepath", json!({"modulepath": "/opt/ansible:/usr/share/ansible"})),
        with("ansible-tags-modulepath", json!({"modulepath": "/opt/ansible", "tags": "abc,def"})),
        with("ansible-callback-plugins", json!({"callback_plugins": "/usr/lib/python/foo"})),
        with("ansible-skip-tags", json!({"skip_tags": "abc,def"})),
        with("ansible-skip-tags-empty", json!({"skip_tags": ""})),
        with("ansible-tags-skip-tags", json!({"tags": "abc,def", "skip_tags": "abc"})),
        with("ansible-skip-tags-modulepath", json!({"modulepath": "/opt/ansible", "skip_tags": "abc,def"})),
        with("ansible-inventory", json!({"inventory": "hosts"})),
        with("ansible-failed", json!({})).answers(json!([{"stdout": "", "stderr": "failed", "returncode": 4}])),
        case("ansible-typed-inputs", "ansible", typed, &["ansible-playbook"]),
        case("ansible-missing", "ansible", deployment("1236", "ansible", json!({}), playbook), &[]),
        case(
            "ansible-empty-config",
            "ansible",
            deployment("1237", "ansible", json!({}), json!("")),
            &["ansible-playbook"],
        ),
    ]
}

pub fn puppet() -> Vec<Case> {
    let manifest = json!("the puppet manifest");
    let answers = |code: i64| {
        json!([{"stdout": "node1.example.com\n"}, {"stdout": "puppet success", "stderr": "thing happened",
            "returncode": code, "files": {"$FACTER_heat_outputs_path.first_output": "output 1\r\nline 2"}}])
    };
    let with = |name, options: Value, code| {
        case(name, "puppet", deployment("1234", "puppet", options, manifest.clone()), &["hostname", "puppet"])
            .answers(answers(code))
    };
    let mut typed = deployment("1235", "puppet", json!({}), manifest.clone());
    typed["inputs"] = json!([{"name": "count", "type": "Number", "value": 3}]);
    vec![
        with("puppet-basic", json!({}), 0),
        with("puppet-changes-applied", json!({}), 2),
        with("puppet-failed", json!({}), 6),
        with("puppet-hiera", json!({"enable_hiera": true, "enable_facter": false}), 0),
        with(
            "puppet-options",
            json!({"modulepath": "/opt/puppet", "tags": "package,file", "enable_debug": true,
            "enable_verbose": true}),
            0,
        ),
        case(
            "puppet-no-fqdn",
            "puppet",
            deployment("1236", "puppet", json!({}), manifest.clone()),
            &["hostname", "puppet"],
        )
        .answers(json!([{"returncode": 1}])),
        case("puppet-missing", "puppet", deployment("1237", "puppet", json!({}), manifest), &["hostname"]),
        case("puppet-typed-input", "puppet", typed, &["hostname", "puppet"]).differs(
            "heat-agents passes a Number input's value to Popen's env and crashes; the built-in passes its text",
            |heat_agents, built_in| {
                crashed(heat_agents);
                assert_eq!(built_in.signal["deploy_status_code"], 0);
                assert_eq!(built_in.invocations[1]["env"]["FACTER_count"], "3");
            },
        ),
    ]
}

pub fn json_file() -> Vec<Case> {
    let config = json!({
        "{root}/etc/app/config.json": {"command": "foo", "args": ["-v", 2, 1.5], "env": {"b": true, "a": null}},
        "{root}/etc/other.json": {"unicode": "é✓", "empty": {}, "list": []},
    });
    vec![case("json-file-basic", "json-file", json!({"id": "j1", "group": "json-file", "config": config}), &[])]
}

pub fn hiera() -> Vec<Case> {
    let config = json!({"hierarchy": ["%{::uuid}", "heat_config_%{::deploy_config_name}", "common"],
        "datafiles": {"common": {"ntp": ["127.0.0.1"], "workers": 4}, "compute": {"nova::compute": true}}});
    let deployment = json!({"id": "h1", "name": "hiera", "group": "hiera", "config": config});
    vec![
        case("hiera-basic", "hiera", deployment.clone(), &["os-apply-config"]).answers(json!([{"stdout": "empty\n"}])),
        case("hiera-no-os-apply-config", "hiera", deployment.clone(), &[]),
        case("hiera-legacy", "hiera", deployment, &["os-apply-config"])
            .answers(json!([{"stdout": "{\"old\": {\"x\": 1}}\n"}]))
            .differs(
                "heat-agents builds its legacy-data failure with bytes and crashes; the built-in reports it",
                |heat_agents, built_in| {
                    crashed(heat_agents);
                    assert_eq!(built_in.signal["deploy_status_code"], 1);
                    let stderr = built_in.signal["deploy_stderr"].as_str().unwrap_or("");
                    assert!(stderr.starts_with("Legacy hieradata from os-apply-config has been detected"), "{stderr}");
                    assert!(!built_in.files.contains_key("etc/hiera.yaml"), "nothing is written");
                },
            ),
    ]
}

pub fn cfn_init() -> Vec<Case> {
    let config = json!({"config": {"files": {"/tmp/foo": {"content": "bar"}}}});
    let answers = json!([{"stdout": "cfn-init success", "stderr": "thing happened"}]);
    vec![
        case("cfn-init-map", "cfn-init", json!({"id": "c1", "group": "cfn-init", "config": config}), &["cfn-init"])
            .answers(answers.clone()),
        case(
            "cfn-init-text",
            "cfn-init",
            json!({"id": "c2", "group": "cfn-init", "config": config.to_string()}),
            &["cfn-init"],
        )
        .answers(answers),
        case("cfn-init-failed", "cfn-init", json!({"id": "c3", "group": "cfn-init", "config": config}), &["cfn-init"])
            .answers(json!([{"stderr": "bad", "returncode": 1}])),
        case("cfn-init-missing", "cfn-init", json!({"id": "c4", "group": "cfn-init", "config": config}), &[]).differs(
            "cfn-init missing: heat-agents' hook crashes with a traceback, the built-in says it cannot start it",
            |heat_agents, built_in| {
                crashed(heat_agents);
                assert_eq!(built_in.signal["deploy_status_code"], 1);
                assert_eq!(
                    built_in.signal["deploy_stderr"],
                    "anneal: hook cfn-init: cannot start cfn-init: No such file or directory (os error 2)"
                );
                assert_eq!(heat_agents.files, built_in.files, "both wrote last_metadata first");
            },
        ),
    ]
}

pub fn apply_config() -> Vec<Case> {
    let deployment =
        json!({"id": "a1", "group": "apply-config", "config": "", "inputs": [{"name": "foo", "value": "bar"}]});
    vec![
        case("apply-config-basic", "apply-config", deployment.clone(), &["os-apply-config"])
            .answers(json!([{"stdout": "applied", "stderr": "log"}])),
        case("apply-config-failed", "apply-config", deployment.clone(), &["os-apply-config"])
            .answers(json!([{"stderr": "no templates", "returncode": 1}])),
        case("apply-config-missing", "apply-config", deployment, &[]).differs(
            "os-apply-config missing: heat-agents' hook crashes with a traceback; the built-in renders the \
             templates itself (tests/tests/apply_config_differential.rs), and here says it has no metadata",
            |heat_agents, built_in| {
                crashed(heat_agents);
                assert_eq!(built_in.signal["deploy_status_code"], 1);
                assert!(
                    built_in.signal["deploy_stderr"].as_str().unwrap_or("").contains("no metadata"),
                    "{built_in:?}"
                );
            },
        ),
    ]
}

pub fn chef() -> Vec<Case> {
    let mut basic = deployment("1234", "chef", json!({}), json!("[\"recipe[apache]\", \"role[web]\"]"));
    basic["inputs"] = json!([{"name": "environment", "value": "production"}, {"name": "deploy_action", "value": "CREATE"},
        {"name": "deploy_server_id", "value": "srv"}, {"name": "port", "value": 80}, {"name": "foo", "value": "bar"}]);
    let tools: &[&str] = &["git", "hostname", "chef-client"];
    let chef_answers = json!([{"stdout": "host.example.com\n"}, {"stdout": "chef success", "stderr": "log",
        "files": {"$heat_outputs_path.first_output": "output 1"}}]);
    let mut kitchen = basic.clone();
    kitchen["options"] = json!({"kitchen": "https://example.invalid/kitchen.git", "kitchen_path": "/opt/kitchen"});
    let mut missing = basic.clone();
    missing["id"] = json!("1235");
    vec![
        case("chef-basic", "chef", basic.clone(), tools).answers(chef_answers),
        case("chef-kitchen", "chef", kitchen.clone(), tools)
            .answers(json!([{}, {"stdout": "host.example.com\n"}, {"stdout": "chef success"}])),
        case("chef-kitchen-clone-fails", "chef", kitchen, tools)
            .answers(json!([{"stdout": "", "stderr": "fatal: repository not found", "returncode": 128}])),
        case("chef-missing", "chef", missing, &["hostname"]).answers(json!([{"stdout": "host.example.com\n"}])).differs(
            "chef-client missing: heat-agents' hook crashes calling .decode on its text message; the built-in reports -1 and that message",
            |heat_agents, built_in| {
                crashed(heat_agents);
                assert_eq!(built_in.signal["deploy_status_code"], -1);
                assert_eq!(built_in.signal["deploy_stderr"], "[Errno 2] No such file or directory: 'chef-client'");
            },
        ),
    ]
}

/// The built-in's runs of what heat-agents' os-refresh-config script did before the hook (its
/// `docker ps` listings of docker-cmd's containers), which the heat-agents side does not run.
fn is_cleanup(record: &Value) -> bool {
    let args: Vec<&str> =
        record["args"].as_array().map(|args| args.iter().filter_map(Value::as_str).collect()).unwrap_or_default();
    args.first() == Some(&"ps")
        && (args.contains(&"label=managed_by=docker-cmd")
            || args.iter().any(|arg| arg.contains("{{.Label \"container_name\"}}")))
}

/// The hook's own docker runs, the signal and the files agree; the built-in ran its cleanup
/// listings first.
fn same_after_cleanup(heat_agents: &Outcome, built_in: &Outcome) {
    let hook_runs: Vec<Value> = built_in.invocations.iter().filter(|record| !is_cleanup(record)).cloned().collect();
    assert!(built_in.invocations.len() > hook_runs.len(), "the built-in ran its cleanup listings");
    assert_eq!(heat_agents.invocations, hook_runs);
    assert_eq!(heat_agents.signal, built_in.signal);
    assert_eq!(heat_agents.files, built_in.files);
}

pub fn docker_cmd() -> Vec<Case> {
    let config = json!({
        "db": {"name": "x", "image": "xxx", "privileged": false, "environment": ["foo=bar"], "env_file": "env.file",
               "start_order": 0},
        "web-ls": {"action": "exec", "start_order": 2, "command": ["web", "/bin/ls", "-l"]},
        "web": {"name": "y", "start_order": 1, "image": "yyy", "net": "host", "restart": "always", "privileged": true,
                "user": "root", "command": "/bin/webserver start", "volumes": ["/run:/run", "db:/var/lib/db"],
                "environment": ["KOLLA_CONFIG_STRATEGY=COPY_ALWAYS", "FOO=BAR"], "env_file": ["foo.env", "bar.conf"]},
    });
    let deployment = json!({"id": "abc123", "name": "abcdef001", "group": "docker-cmd", "config": config,
        "inputs": [{"name": "deploy_stack_id", "value": "the_stack"}, {"name": "deploy_resource_name", "value": "the_deployment"}]});
    let yaml = "db:\n  image: xxx\n  privileged: yes\n  detach: no\n  start_order: 0\nweb:\n  image: yyy\n  command: /bin/web start\n  start_order: 1\n";
    let mut from_yaml = deployment.clone();
    from_yaml["config"] = json!(yaml);
    let exit_codes = json!({"id": "abc124", "name": "abcdef002", "group": "docker-cmd",
        "config": {"web-ls": {"action": "exec", "command": ["web", "/bin/ls", "-l"], "exit_codes": [0, 1]}}});
    let tools: &[&str] = &["docker"];
    // Every name is free (`inspect` fails); `run` prints nothing (heat-agents' hook echoes docker's
    // stdout before its JSON, which heat-config could then not read), `exec` writes to stderr.
    let free = json!([{"returncode": 1}, {"returncode": 1}, {"returncode": 1}]);
    let answers = json!({"inspect": free, "run": [{"stderr": "pulled"}, {"stderr": "started"}],
        "ps -a --filter label=container_name=": [{"stdout": "web-container\n"}], "exec": [{"stderr": "listing", "returncode": 0}]});
    let failing = json!({"inspect": free, "run": [{"stderr": "no such image", "returncode": 125}, {}]});
    let listed_failure = json!({"ps -a --filter label=container_name=": [{"stdout": "web\n"}], "exec": [{"stderr": "ls: missing", "returncode": 1}]});
    let reason =
        "the built-in runs the cleanup heat-agents' os-refresh-config script ran before the hook (docker ps listings)";
    vec![
        case("docker-cmd-start-order", "docker-cmd", deployment.clone(), tools)
            .answers(answers.clone())
            .differs(reason, same_after_cleanup),
        case("docker-cmd-yaml", "docker-cmd", from_yaml, tools).answers(answers).differs(reason, same_after_cleanup),
        case("docker-cmd-failed", "docker-cmd", deployment, tools).answers(failing).differs(reason, same_after_cleanup),
        case("docker-cmd-exit-codes", "docker-cmd", exit_codes, tools)
            .answers(listed_failure)
            .differs(reason, same_after_cleanup),
    ]
}

const COMPOSE_SCRIPT: &str = "heat-config-docker-compose/os-refresh-config/configure.d/50-heat-config-docker-compose";

pub fn docker_compose() -> Vec<Case> {
    let env_files = "[ { \"file_name\": \"./common.env\", \"content\": \"xxxxx\" }, { \"file_name\": \"./test.env\", \
                     \"content\": \"yyyy\" }, { \"file_name\": \"./test1.env\", \"content\": \"zzz\" } ]";
    let compose =
        "web:\n  name: x\n  env_file:\n  - ./common.env\n  - ./test.env\ndb:\n  name: y\n  env_file: ./test1.env\n";
    let with_inputs = json!({"id": "dc1", "name": "abcdef001", "group": "docker-compose",
        "inputs": [{"name": "env_files", "value": env_files}], "config": compose});
    // heat-agents' own test data: a map config, which its os-refresh-config script dumps as YAML.
    let mut map_config = with_inputs.clone();
    map_config["config"] = json!({"web": {"name": "x", "env_file": ["./common.env", "./test.env"]},
        "db": {"name": "y", "env_file": "./test1.env", "command": "run --port 5432", "enabled": true}});
    let mut without_inputs = with_inputs.clone();
    without_inputs["inputs"] = json!([]);
    let mut delete = with_inputs.clone();
    delete["inputs"] = json!([{"name": "deploy_action", "value": "DELETE"}]);
    let tools: &[&str] = &["docker-compose"];
    let answers = json!([{"stdout": "Creating abcdef001_web_1", "stderr": "Pulling"}]);
    vec![
        case("docker-compose-env-files", "docker-compose", with_inputs, tools)
            .answers(answers.clone())
            .orc_script(COMPOSE_SCRIPT),
        case("docker-compose-map-config", "docker-compose", map_config, tools)
            .answers(answers.clone())
            .orc_script(COMPOSE_SCRIPT),
        case("docker-compose-no-inputs", "docker-compose", without_inputs, tools)
            .answers(answers)
            .orc_script(COMPOSE_SCRIPT),
        case("docker-compose-delete", "docker-compose", delete, tools).orc_script(COMPOSE_SCRIPT).differs(
            "DELETE: heat-agents' hook crashes building its response; the built-in does what heat-agents' \
             os-refresh-config script did once the deployment was gone (docker-compose kill, the file removed)",
            |heat_agents, built_in| {
                crashed(heat_agents);
                assert_eq!(built_in.signal, json!({"deploy_stdout": "", "deploy_stderr": "", "deploy_status_code": 0}));
                assert_eq!(built_in.invocations.len(), 0, "no project was running on this side");
            },
        ),
    ]
}
