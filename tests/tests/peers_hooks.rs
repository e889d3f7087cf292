//! Scenario: heat-agents' own hooks, unchanged from its sdist, run by anneal-agent against a real
//! shim: `hook-script.py` installed as `script` (it overrides the built-in script hook),
//! `hook-json-file.py` as `json-file` and `hook-hiera.py` as `hiera`. The hiera hook shells out
//! to `os-apply-config --key hiera.datafiles` to detect legacy hiera data; os-apply-config comes
//! from the peers' venv, put on the hooks' PATH through `[agent.hook_env]`, and reads the
//! metadata file named by `OS_CONFIG_FILES` there. Every path the hooks write is in a temp dir
//! (`HEAT_SCRIPT_*`, `HEAT_PUPPET_HIERA_DATADIR`, `HEAT_HIERA_CONFIG`, `ANNEAL_PEER_SANDBOX` for
//! os-apply-config's log file, and the json-file hook's paths come from the template).

use std::path::{Path, PathBuf};

use anneal_tests::{Agent, AgentSettings, Shim, read_json};

const TEMPLATE: &str = r##"
heat_template_version: 2018-08-31
parameters:
  server: {type: string}
  json_files: {type: json}
resources:
  script_config:
    type: OS::Heat::SoftwareConfig
    properties:
      group: script
      inputs: [{name: foo}, {name: bag, type: Json}]
      outputs: [{name: result}, {name: outputs_path}]
      config: |
        #!/bin/sh
        echo "foo is $foo"
        echo "bag is $bag" >&2
        printf '%s' "$heat_outputs_path" > $heat_outputs_path.outputs_path
        printf '%s-processed' "$foo" > $heat_outputs_path.result
  script:
    type: OS::Heat::SoftwareDeployment
    properties:
      config: {get_resource: script_config}
      server: {get_param: server}
      input_values: {foo: bar, bag: {k: [1, 2]}}
  json_config:
    type: OS::Heat::StructuredConfig
    properties:
      group: json-file
      config: {get_param: json_files}
  json:
    type: OS::Heat::StructuredDeployment
    properties: {config: {get_resource: json_config}, server: {get_param: server}}
  hiera_config:
    type: OS::Heat::StructuredConfig
    properties:
      group: hiera
      config:
        hierarchy: [compute, common]
        datafiles:
          compute: {workers: 4, ntp_server: 127.0.0.1}
  hiera:
    type: OS::Heat::StructuredDeployment
    properties: {config: {get_resource: hiera_config}, server: {get_param: server}}
outputs:
  result: {value: {get_attr: [script, result]}}
  outputs_path: {value: {get_attr: [script, outputs_path]}}
  stdout: {value: {get_attr: [script, deploy_stdout]}}
  stderr: {value: {get_attr: [script, deploy_stderr]}}
  json_status: {value: {get_attr: [json, deploy_status_code]}}
  hiera_status: {value: {get_attr: [hiera, deploy_status_code]}}
"##;

/// For the server with legacy hiera data: the hiera hook must refuse, and a failing script run
/// through hook-script.py must report its exit status.
const LEGACY_TEMPLATE: &str = r##"
heat_template_version: 2018-08-31
resources:
  hiera_config:
    type: OS::Heat::StructuredConfig
    properties:
      group: hiera
      config: {hierarchy: [compute], datafiles: {compute: {workers: 1}}}
  hiera:
    type: OS::Heat::StructuredDeployment
    properties: {config: {get_resource: hiera_config}, server: legacy}
  broken_config:
    type: OS::Heat::SoftwareConfig
    properties:
      group: script
      config: "#!/bin/sh\necho 'cannot install' >&2\nexit 3\n"
  broken:
    type: OS::Heat::SoftwareDeployment
    properties: {config: {get_resource: broken_config}, server: legacy}
"##;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn peers_heat_agents_hooks_run_under_anneal_agent() {
    let cache = peers_cache();
    let shim = Shim::start().await;
    let dir = tempfile::Builder::new().prefix("anneal-peers-hooks-").tempdir().expect("temp dir");
    let clean = HookedAgent::start(&shim, dir.path(), &cache, "clean", "{}").await;
    let legacy =
        HookedAgent::start(&shim, dir.path(), &cache, "legacy", r#"{"hiera": {"datafiles": {"old": {"x": 1}}}}"#).await;

    let app_json = clean.root.join("files/etc/app.json");
    let json_files = serde_json::json!({app_json.display().to_string(): {"command": "foo", "args": ["-v", 2], "env": {"b": true, "a": null}}});
    let template = shim.write_template("hooks.yaml", TEMPLATE);
    let legacy_template = shim.write_template("legacy.yaml", LEGACY_TEMPLATE);
    let json_param = format!("json_files={json_files}");
    let create =
        ["stack", "create", "hooks", "--template", template.to_str().expect("utf-8"), "--param", "server=clean"];
    let create = [&create[..], &["--param", &json_param, "--wait", "--timeout", "30"]].concat();
    let create_legacy = ["stack", "create", "legacy", "--template", legacy_template.to_str().expect("utf-8")];
    let create_legacy = [&create_legacy[..], &["--wait", "--timeout", "30"]].concat();
    let (create, create_legacy) = tokio::join!(shim.cli(&create), shim.cli(&create_legacy));
    assert_eq!(create.code, 0, "stack create hooks: {create:?}\n{}", clean.agent.log_text());

    // script: heat-agents' hook-script.py ran it (its outputs dir and work dir, not the agent's).
    let outputs = shim.stack_outputs("hooks").await;
    assert_eq!(outputs["result"], "bar-processed", "{outputs:?}");
    assert_eq!(outputs["stdout"], "foo is bar\n");
    assert_eq!(outputs["stderr"], "bag is {\"k\": [1, 2]}\n", "Json inputs are json.dumps'ed by hook-script.py");
    let outputs_path = outputs["outputs_path"].as_str().expect("outputs_path");
    let script_outputs = clean.root.join("script-outputs");
    let script_id = outputs_path
        .strip_prefix(&format!("{}/", script_outputs.display()))
        .unwrap_or_else(|| panic!("{outputs_path} is not in HEAT_SCRIPT_OUTPUTS {}", script_outputs.display()));
    assert!(
        clean.root.join("script-working").join(script_id).is_file(),
        "hook-script.py wrote the script to its work dir"
    );

    // json-file: the file, formatted as the hook does (indent 4, sorted keys).
    assert_eq!(outputs["json_status"], 0);
    let written = std::fs::read_to_string(&app_json).expect("the json-file hook wrote the file");
    assert_eq!(
        written,
        "{\n    \"args\": [\n        \"-v\",\n        2\n    ],\n    \"command\": \"foo\",\n    \"env\": {\n        \
         \"a\": null,\n        \"b\": true\n    }\n}"
    );

    // hiera: os-apply-config found no legacy data; hiera.yaml and the data file are written.
    assert_eq!(outputs["hiera_status"], 0);
    let hiera_yaml = std::fs::read_to_string(clean.root.join("hiera.yaml")).expect("hiera.yaml");
    let datadir = clean.root.join("hieradata");
    assert_eq!(
        hiera_yaml,
        format!(
            "\n---\n:backends:\n  - json\n:json:\n  :datadir: {}\n:hierarchy:\n  - compute\n  - common\n",
            datadir.display()
        )
    );
    let compute = std::fs::read_to_string(datadir.join("compute.json")).expect("compute.json");
    assert_eq!(compute, "{\n    \"ntp_server\": \"127.0.0.1\",\n    \"workers\": 4\n}");

    let status = clean.agent.status().await;
    assert_eq!(status.len(), 3, "{status:?}");
    for row in &status {
        assert_eq!(row["outcome"], "COMPLETE", "{row}");
        assert_eq!(row["signal"], "delivered", "{row}");
    }

    // The legacy server: os-apply-config (run by the hook from the venv on its PATH) reports the
    // legacy hiera data, so the hook fails without writing anything; the script exits 3.
    assert_eq!(create_legacy.code, 1, "stack create legacy fails: {create_legacy:?}\n{}", legacy.agent.log_text());
    let resources = shim.stack_resources("legacy").await;
    assert_eq!(resources["hiera"]["status"], "CREATE_FAILED", "{resources:?}");
    assert_eq!(
        resources["hiera"]["status_reason"],
        "deploy_status_code : Deployment exited with non-zero status code: 1"
    );
    assert!(!legacy.root.join("hiera.yaml").exists(), "the hiera hook stopped before writing hiera.yaml");
    let rows = legacy.agent.status().await;
    let broken = rows.iter().find(|row| row["name"] == "broken").expect("the broken deployment ran");
    assert_eq!(broken["exit_code"], 3, "{broken}");
    assert_eq!(broken["signal"], "delivered", "{broken}");
    let hiera = rows.iter().find(|row| row["name"] == "hiera").expect("the hiera deployment ran");
    assert_eq!(hiera["exit_code"], 1, "{hiera}");
    // heat-agents 13.0.0's hiera hook means to print `Legacy hieradata ... detected`, but crashes
    // in json.dump on Python 3 (its response holds bytes); either way it reached that branch.
    let journal = read_json(
        &legacy.agent.state_dir().join("journal").join(format!("{}.json", hiera["id"].as_str().expect("id"))),
    );
    let stderr = journal["result"]["deploy_stderr"].as_str().unwrap_or_default();
    assert!(
        stderr.contains("Legacy hieradata") || stderr.contains("exit_legacy_hiera_detected"),
        "the hook saw os-apply-config's legacy data: {stderr}"
    );
}

/// An anneal-agent with heat-agents' script, json-file and hiera hooks installed.
struct HookedAgent {
    agent: Agent,
    root: PathBuf,
}

impl HookedAgent {
    /// Registers and starts `name` with the hooks and a hook environment that keeps them in
    /// `parent/name`; `metadata` is what os-apply-config reads (`OS_CONFIG_FILES`).
    async fn start(shim: &Shim, parent: &Path, cache: &Path, name: &str, metadata: &str) -> HookedAgent {
        let root = parent.join(name);
        std::fs::create_dir_all(root.join("peer-logs")).expect("agent dir");
        std::fs::write(root.join("metadata.json"), metadata).expect("write metadata");
        let path = |relative: &str| root.join(relative).display().to_string();
        let settings = AgentSettings::default()
            .hook_env("PATH", &format!("{}:/usr/bin:/bin", cache.join("venv/bin").display()))
            .hook_env("ANNEAL_PEER_SANDBOX", &path("peer-logs"))
            .hook_env("OS_CONFIG_FILES", &path("metadata.json"))
            .hook_env("HEAT_SCRIPT_WORKING", &path("script-working"))
            .hook_env("HEAT_SCRIPT_OUTPUTS", &path("script-outputs"))
            .hook_env("HEAT_PUPPET_HIERA_DATADIR", &path("hieradata"))
            .hook_env("HEAT_HIERA_CONFIG", &path("hiera.yaml"));
        let mut agent = Agent::register(shim, parent, name, &settings).await;
        let heat_agents = cache.join("heat-agents");
        for (group, hook) in [
            ("script", "heat-config-script/install.d/hook-script.py"),
            ("json-file", "heat-config-json-file/install.d/hook-json-file.py"),
            ("hiera", "heat-config-hiera/install.d/hook-hiera.py"),
        ] {
            // Copied, not linked: the agent refuses a hook another user could change (see
            // docs/security.md), and the peers cache may belong to whoever set it up.
            let installed = agent.hooks_dir().join(group);
            std::fs::copy(heat_agents.join(hook), &installed).expect("install hook");
            let executable = std::os::unix::fs::PermissionsExt::from_mode(0o755);
            std::fs::set_permissions(&installed, executable).expect("chmod hook");
        }
        agent.start();
        HookedAgent { agent, root }
    }
}

/// tests/peers/.cache with the peers setup.sh installs; fails (never skips) when it is missing.
fn peers_cache() -> PathBuf {
    anneal_tests::peers::cache(&[
        "heat-agents/heat-config-script/install.d/hook-script.py",
        "heat-agents/heat-config-json-file/install.d/hook-json-file.py",
        "heat-agents/heat-config-hiera/install.d/hook-hiera.py",
        "venv/bin/os-apply-config",
    ])
}
