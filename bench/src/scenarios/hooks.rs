//! Scenario 9, built-in hooks: the wall time per deployment of `anneal-agent once` running N
//! deployments of one group through the agent's built-in hook, and through heat-agents' Python
//! hook for that group installed as a hook file (which then wins over the built-in), everything
//! else equal: the same agent, documents and fake tool (a `#!/bin/sh` that exits 0, on the
//! hooks' PATH under every tool name). The difference is the hook itself: a Python interpreter
//! start and its imports per deployment against none.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::process::Command;

use super::{Context, millis, temp_dir, write_agent_config};
use crate::children::run_ok;
use crate::error::{BenchError, BenchResult, create_dir, write_file};
use crate::peers::Peers;
use crate::report::{Measurement, ScenarioReport};

const LIMIT: Duration = Duration::from_secs(600);
/// The tools the measured hooks run; each is the same no-op fake.
const TOOLS: [&str; 5] = ["ansible-playbook", "puppet", "hostname", "cfn-init", "os-apply-config"];

/// The hooks measured and a config of each.
fn groups() -> [(&'static str, Value); 4] {
    [
        ("ansible", json!("- hosts: localhost\n  tasks: []\n")),
        ("puppet", json!("notify { 'bench': }")),
        ("cfn-init", json!({"config": {"files": {}}})),
        ("json-file", json!({"{root}/files/bench-{index}.json": {"index": "{index}", "list": [1, 2, 3]}})),
    ]
}

pub async fn run(context: &Context) -> BenchResult<ScenarioReport> {
    let count = if context.smoke { 3 } else { 100 };
    let mut report = ScenarioReport::new(
        "hooks",
        "9. Built-in hooks",
        "heat-agents 13.0.0 (PyPI sdist): hook-<group>.py installed as the hook file, same agent and fake tool",
    );
    let peers = context.peers(&mut report)?.cloned();
    report.command("anneal-agent once --config $TMP/agent.toml   # N deployments of one group, hooks dir empty");
    if peers.is_some() {
        report.command(
            "anneal-agent once --config $TMP/agent.toml   # the same, hooks/<group> = heat-agents' hook-<group>.py",
        );
    }
    for (group, config) in groups() {
        let built_in = agent_once(context, group, &config, count, None).await?;
        let python = match &peers {
            Some(peers) => Some(agent_once(context, group, &config, count, Some(peers)).await?),
            None => None,
        };
        let per = |total: f64| total / count as f64;
        let measurement =
            Measurement::new(&format!("{group}: wall time per deployment, {count} deployments"), "ms", per(built_in))
                .with_peer(python.map(per))
                .note(&format!(
                    "total: built-in {built_in:.0} ms{}",
                    python.map(|total| format!(", heat-agents {total:.0} ms")).unwrap_or_default()
                ));
        report.measurements.push(measurement);
    }
    Ok(report)
}

/// Milliseconds of `anneal-agent once` over `count` deployments of `group`, with heat-agents'
/// hook installed when `peers` is given; every deployment must have completed.
async fn agent_once(
    context: &Context,
    group: &str,
    config: &Value,
    count: usize,
    peers: Option<&Peers>,
) -> BenchResult<f64> {
    let root = temp_dir("anneal-bench-hooks-")?;
    let root = root.path();
    let bin = root.join("bin");
    create_dir(&bin)?;
    for tool in TOOLS {
        write_executable(&bin.join(tool), "#!/bin/sh\nexit 0\n")?;
    }
    create_dir(&root.join("files"))?;
    let local = root.join("local.d");
    create_dir(&local)?;
    let deployments: Vec<Value> = (0..count).map(|index| deployment(group, config, index, root)).collect();
    write_file(&local.join("metadata.json"), &json!({ "deployments": deployments }).to_string())?;
    let python_dir = match peers {
        Some(peers) => peers.venv_bin("python3").parent().map(Path::to_path_buf).unwrap_or_default(),
        None => std::path::PathBuf::from("/nonexistent"),
    };
    let at = |relative: &str| root.join(relative).display().to_string();
    let mut hook_env =
        format!("[agent.hook_env]\nPATH = \"{}:{}:/usr/bin:/bin\"\n", bin.display(), python_dir.display());
    for (name, relative) in [
        ("HEAT_ANSIBLE_WORKING", "ansible/working"),
        ("HEAT_ANSIBLE_OUTPUTS", "ansible/outputs"),
        ("HEAT_PUPPET_WORKING", "puppet/working"),
        ("HEAT_PUPPET_OUTPUTS", "puppet/outputs"),
        ("HEAT_PUPPET_LOGDIR", "puppet/logs"),
        ("HEAT_CFN_INIT_LAST_METADATA_DIR", "cfn"),
    ] {
        hook_env.push_str(&format!("{name} = \"{}\"\n", at(relative)));
    }
    let source = format!("[[source]]\nkind = \"local\"\npath = \"{}\"\n", local.display());
    let agent_config = write_agent_config(root, &format!("parallel = 1\n{hook_env}"), &source)?;
    if let Some(peers) = peers {
        let hook = root.join("hooks").join(group);
        std::fs::copy(peers.hook(group), &hook)
            .map_err(|source| BenchError::Process { what: format!("install heat-agents' {group} hook"), source })?;
        set_mode(&hook, 0o755)?;
    }
    let mut command = Command::new(&context.binaries.agent);
    command.arg("once").arg("--config").arg(agent_config).env("ANNEAL_LOG", "warn");
    let finished = run_ok(&format!("anneal-agent once ({group})"), command, LIMIT).await?;
    Ok(millis(finished.wall))
}

/// Deployment `index` of `group`, NO_SIGNAL (nothing to deliver: the hook is what is measured).
fn deployment(group: &str, config: &Value, index: usize, root: &Path) -> Value {
    let config =
        config.to_string().replace("{root}", &root.display().to_string()).replace("{index}", &index.to_string());
    json!({
        "id": format!("bench-{group}-{index:05}"),
        "name": format!("{index:05}_{group}"),
        "group": group,
        "creation_time": "2026-11-27T00:00:00",
        "config": serde_json::from_str::<Value>(&config).unwrap_or(Value::Null),
        "inputs": [{"name": "foo", "type": "String", "value": "bar"}],
        "outputs": [],
        "options": null,
    })
}

fn write_executable(path: &Path, text: &str) -> BenchResult<()> {
    write_file(path, text)?;
    set_mode(path, 0o755)
}

fn set_mode(path: &Path, mode: u32) -> BenchResult<()> {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
        .map_err(|source| BenchError::Process { what: format!("chmod {}", path.display()), source })
}
