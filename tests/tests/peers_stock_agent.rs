//! Scenario: a server run by the stock OpenStack chain, as one server of a shim stack whose other
//! servers run anneal-agent, with get_attr flowing both ways (vm1 → stock → vm2).
//!
//! The stock chain is the real one, unchanged, from PyPI and heat-agents' sdist
//! (`tests/peers/setup.sh`):
//!
//! ```text
//! os-collect-config (daemon, `collectors = request`, the shim's request_url)
//!   └─ command: os-refresh-config --lockfile <tmp>
//!        └─ configure.d/20-os-apply-config  (heat-agents; runs os-apply-config, which renders
//!        │                                    heat-agents' `{{deployments}}` template)
//!        └─ configure.d/55-heat-config      (heat-agents)
//!             └─ hooks/script = heat-agents' hook-script.py
//!             └─ heat-config-notify          (heat-agents) → POST deploy_signal_id to the shim
//! ```
//!
//! Every path is redirected into the test's temp dir: os-collect-config's `cachedir` and
//! `backup_cachedir`, os-refresh-config's base dir and lock file, heat-config's `HEAT_*`
//! variables, and os-apply-config's template tree, which mirrors the temp dir's absolute path so
//! that its default output root `/` lands inside it. The venv's `anneal_peer_sandbox` (see
//! setup.sh) sends the peers' fixed log files into the temp dir and refuses any connection that
//! is not to loopback.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anneal_tests::{AgentSettings, Daemon, Fleet, Shim, eventually, read_json};
use serde_json::Value;
use tokio::process::Command;

const TEMPLATE: &str = r##"
heat_template_version: 2018-08-31
parameters:
  who: {type: string, default: world}
resources:
  hello_config:
    type: OS::Heat::SoftwareConfig
    properties:
      group: script
      inputs: [{name: who}]
      outputs: [{name: greeting}]
      config: "#!/bin/sh\nprintf 'hello %s from vm1' \"$who\" > $heat_outputs_path.greeting\n"
  hello:
    type: OS::Heat::SoftwareDeployment
    properties:
      config: {get_resource: hello_config}
      server: vm1
      input_values: {who: {get_param: who}}
  relay_config:
    type: OS::Heat::SoftwareConfig
    properties:
      group: script
      inputs: [{name: greeting}]
      outputs: [{name: relayed}]
      config: "#!/bin/sh\necho \"stock got: $greeting\"\nprintf '%s, relayed by stock' \"$greeting\" > $heat_outputs_path.relayed\n"
  relay:
    type: OS::Heat::SoftwareDeployment
    properties:
      config: {get_resource: relay_config}
      server: stock
      input_values: {greeting: {get_attr: [hello, greeting]}}
  final_config:
    type: OS::Heat::SoftwareConfig
    properties:
      group: script
      inputs: [{name: relayed}]
      outputs: [{name: sentence}]
      config: "#!/bin/sh\nprintf '[%s] on vm2' \"$relayed\" > $heat_outputs_path.sentence\n"
  final:
    type: OS::Heat::SoftwareDeployment
    properties:
      config: {get_resource: final_config}
      server: vm2
      input_values: {relayed: {get_attr: [relay, relayed]}}
outputs:
  sentence: {value: {get_attr: [final, sentence]}}
  stock_stdout: {value: {get_attr: [relay, deploy_stdout]}}
  stock_status: {value: {get_attr: [relay, deploy_status_code]}}
"##;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn peers_stock_os_collect_config_server_exchanges_get_attr_with_anneal_agents() {
    let cache = peers_cache();
    let shim = Shim::start().await;
    let fleet = Fleet::start(&shim, &["vm1", "vm2"], &AgentSettings::default()).await;
    let stock = StockServer::start(&shim, &cache).await;

    let template = shim.write_template("stock.yaml", TEMPLATE);
    let template = template.to_str().expect("utf-8 path");
    let create = shim.cli(&["stack", "create", "mixed", "--template", template, "--wait", "--timeout", "40"]).await;
    assert_eq!(create.code, 0, "stack create: {create:?}\n{}\n{}", stock.logs(), fleet.logs());
    let outputs = shim.stack_outputs("mixed").await;
    assert_eq!(outputs["sentence"], "[hello world from vm1, relayed by stock] on vm2", "{outputs:?}\n{}", stock.logs());
    assert_eq!(outputs["stock_stdout"], "stock got: hello world from vm1\n", "{outputs:?}");
    assert_eq!(outputs["stock_status"], 0, "{outputs:?}");
    let first = stock.deployed(1).await;
    assert_eq!(first[0].1["relayed"], "hello world from vm1, relayed by stock", "what 55-heat-config notified");

    // An update flows through the same running os-collect-config: a new derived config id for
    // the stock server, run once (the old one is skipped as already deployed), and vm2 updated.
    let update =
        ["stack", "update", "mixed", "--template", template, "--param", "who=moon", "--wait", "--timeout", "40"];
    let update = shim.cli(&update).await;
    assert_eq!(update.code, 0, "stack update: {update:?}\n{}\n{}", stock.logs(), fleet.logs());
    let outputs = shim.stack_outputs("mixed").await;
    assert_eq!(outputs["sentence"], "[hello moon from vm1, relayed by stock] on vm2", "{outputs:?}\n{}", stock.logs());
    let both = stock.deployed(2).await;
    let update_run = both.iter().find(|(id, _)| *id != first[0].0).expect("a second derived config id ran");
    assert_eq!(update_run.1["relayed"], "hello moon from vm1, relayed by stock");
    let inputs = stock.deployed_inputs(&update_run.0);
    assert_eq!(inputs["deploy_action"], "UPDATE", "{inputs:?}");

    let log = stock.daemon.log_text();
    assert!(log.contains("Completed phase configure"), "os-refresh-config ran its configure phase:\n{log}");
    assert!(!log.contains("anneal peer sandbox: refused"), "the stock chain tried to leave loopback:\n{log}");
    assert!(
        stock.dir().join("occ/request.json").is_file(),
        "os-collect-config cached the request collector's document"
    );
    assert!(stock.daemon.pid().is_some(), "os-collect-config is still polling");
}

/// One server run by os-collect-config + os-refresh-config + os-apply-config + 55-heat-config +
/// hook-script.py + heat-config-notify, every path inside its temp dir.
struct StockServer {
    daemon: Daemon,
    dir: tempfile::TempDir,
}

impl StockServer {
    async fn start(shim: &Shim, cache: &Path) -> StockServer {
        let credentials = shim.cli_json(&["server", "add", "stock", "--format", "json"]).await;
        let request_url = credentials["request_url"].as_str().expect("server add prints request_url");
        let dir = tempfile::Builder::new().prefix("anneal-peers-stock-").tempdir().expect("temp dir");
        let root = dir.path();
        let heat_agents = cache.join("heat-agents");
        let venv = cache.join("venv");

        let configure = root.join("orc/configure.d");
        std::fs::create_dir_all(&configure).expect("configure.d");
        for part in ["20-os-apply-config", "55-heat-config"] {
            symlink(&heat_agents.join("heat-config/os-refresh-config/configure.d").join(part), &configure.join(part));
        }
        std::fs::create_dir_all(root.join("hooks")).expect("hooks dir");
        symlink(&heat_agents.join("heat-config-script/install.d/hook-script.py"), &root.join("hooks/script"));
        // os-apply-config renders <templates>/X to /X: mirror the temp dir's absolute path so
        // heat-agents' `var/run/heat-config/heat-config` template lands at <root>/run/heat-config.
        let relative_root = root.strip_prefix("/").expect("absolute temp dir");
        let template_dir = root.join("templates").join(relative_root).join("run");
        std::fs::create_dir_all(&template_dir).expect("template dir");
        std::fs::copy(
            heat_agents.join("heat-config/os-apply-config/var/run/heat-config/heat-config"),
            template_dir.join("heat-config"),
        )
        .expect("copy heat-config template");
        std::fs::create_dir_all(root.join("peer-logs")).expect("peer log dir");

        let config = root.join("os-collect-config.conf");
        std::fs::write(
            &config,
            format!(
                "[DEFAULT]\ncommand = os-refresh-config --lockfile {root}/os-refresh-config.lock\ncollectors = request\n\
                 cachedir = {root}/occ\nbackup_cachedir = {root}/occ-backup\npolling_interval = 1\nmin_polling_interval = 1\n\
                 \n[request]\nmetadata_url = {request_url}\n",
                root = root.display()
            ),
        )
        .expect("write os-collect-config.conf");

        let mut command = Command::new(venv.join("bin/os-collect-config"));
        command.arg("--config-file").arg(&config).current_dir(root).env_clear();
        for (name, value) in [
            ("PATH", format!("{}:/usr/bin:/bin", venv.join("bin").display())),
            // os-collect-config breaks under C.UTF-8.
            ("LC_ALL", "C".to_string()),
            ("HOME", root.display().to_string()),
            ("ANNEAL_PEER_SANDBOX", root.join("peer-logs").display().to_string()),
            ("OS_REFRESH_CONFIG_BASE_DIR", root.join("orc").display().to_string()),
            ("OS_CONFIG_APPLIER_TEMPLATES", root.join("templates").display().to_string()),
            ("HEAT_SHELL_CONFIG", root.join("run/heat-config").display().to_string()),
            ("HEAT_CONFIG_DEPLOYED", root.join("deployed").display().to_string()),
            ("HEAT_CONFIG_DEPLOYED_OLD", root.join("deployed-old").display().to_string()),
            ("HEAT_CONFIG_HOOKS", root.join("hooks").display().to_string()),
            ("HEAT_CONFIG_NOTIFY", heat_agents.join("heat-config/bin/heat-config-notify").display().to_string()),
            ("HEAT_SCRIPT_WORKING", root.join("script-working").display().to_string()),
            ("HEAT_SCRIPT_OUTPUTS", root.join("script-outputs").display().to_string()),
        ] {
            command.env(name, value);
        }
        let daemon = Daemon::spawn(command, &root.join("occ.out"), &root.join("occ.log"));
        StockServer { daemon, dir }
    }

    fn dir(&self) -> &Path {
        self.dir.path()
    }

    fn logs(&self) -> String {
        format!("--- stock (os-collect-config chain) ---\n{}", self.daemon.log_text())
    }

    /// Waits until 55-heat-config has notified `count` deployments; returns each derived config
    /// id with the signal data heat-config-notify sent (`<deployed>/<id>.notify.json`).
    async fn deployed(&self, count: usize) -> Vec<(String, Value)> {
        let deployed = self.dir().join("deployed");
        let notified = || -> Vec<PathBuf> {
            let Ok(entries) = std::fs::read_dir(&deployed) else { return Vec::new() };
            entries
                .filter_map(|entry| entry.ok().map(|entry| entry.path()))
                .filter(|path| path.to_string_lossy().ends_with(".notify.json"))
                .collect()
        };
        eventually(Duration::from_secs(10), "55-heat-config notified the stock deployments", || {
            notified().len() >= count
        })
        .await;
        let files = notified();
        assert_eq!(files.len(), count, "each stock deployment ran exactly once: {files:?}\n{}", self.logs());
        files
            .iter()
            .map(|path| {
                let name = path.file_name().expect("file name").to_string_lossy();
                let id = name.trim_end_matches(".notify.json").to_string();
                (id, read_json(path))
            })
            .collect()
    }

    /// The inputs of a deployment as 55-heat-config recorded it (`<deployed>/<id>.json`).
    fn deployed_inputs(&self, id: &str) -> serde_json::Map<String, Value> {
        let deployment = read_json(&self.dir().join("deployed").join(format!("{id}.json")));
        let inputs = deployment["inputs"].as_array().expect("inputs");
        inputs.iter().map(|input| (input["name"].as_str().expect("name").to_string(), input["value"].clone())).collect()
    }
}

fn symlink(target: &Path, link: &Path) {
    std::os::unix::fs::symlink(target, link)
        .unwrap_or_else(|error| panic!("symlink {} -> {}: {error}", link.display(), target.display()));
}

/// tests/peers/.cache with the peers setup.sh installs; fails (never skips) when it is missing.
fn peers_cache() -> PathBuf {
    anneal_tests::peers::cache(&[
        "heat-agents/heat-config/os-refresh-config/configure.d/55-heat-config",
        "heat-agents/heat-config/bin/heat-config-notify",
        "venv/bin/os-collect-config",
        "venv/bin/os-refresh-config",
        "venv/bin/os-apply-config",
    ])
}
