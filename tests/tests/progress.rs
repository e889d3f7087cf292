//! What a person at a terminal sees, through a real pseudo-terminal (util-linux `script`): `stack
//! create --wait` draws a live progress line (resources by phase, the deployment running
//! longest and where, the time waited) above which the event lines scroll, and plain event
//! lines only when not on a terminal; `anneal-agent once` shows what runs; `anneal-agent status
//! --watch` redraws its table until Ctrl-C (and prints JSON lines off a terminal).

use std::path::Path;
use std::time::Duration;

use anneal_tests::{AgentSettings, Fleet, Shim, agent_binary, run_command, shim_binary, toml_string};
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use serde_json::json;
use tokio::process::Command;

const TEMPLATE: &str = r##"
heat_template_version: 2018-08-31
resources:
  slow_config:
    type: OS::Heat::SoftwareConfig
    properties: {group: script, config: "#!/bin/sh\nsleep 2\necho slow done\n"}
  slow:
    type: OS::Heat::SoftwareDeployment
    properties: {config: {get_resource: slow_config}, server: vm1}
"##;

/// `command` run on a pseudo-terminal; `script` exits with its status (`-e`).
fn on_terminal(command: &str) -> Command {
    let mut script = Command::new("script");
    script.args(["-qefc", command, "/dev/null"]).env("TERM", "xterm");
    script
}

fn quoted(path: &Path) -> String {
    format!("'{}'", path.display())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stack_create_wait_draws_a_live_line_on_a_terminal_only() {
    let shim = Shim::start().await;
    let fleet = Fleet::start(&shim, &["vm1"], &AgentSettings::default()).await;
    let template = shim.write_template("slow.yaml", TEMPLATE);
    let create = |name: &str| {
        format!(
            "{} stack create {name} --template {} --wait --timeout 60 --url {} --token-file {}",
            quoted(&shim_binary()),
            quoted(&template),
            shim.url(),
            quoted(&shim.token_file())
        )
    };
    let on_pty = run_command(on_terminal(&create("live")), Duration::from_secs(90)).await;
    assert_eq!(on_pty.code, 0, "{on_pty:?}\n{}", fleet.logs());
    let screen = on_pty.stdout;
    assert!(
        screen.contains("live: 1 complete, 1 in progress, 0 waiting, 0 failed · running longest: slow on vm1"),
        "{screen}"
    );
    assert!(screen.contains("CREATE_COMPLETE"), "the event lines are there too: {screen}");

    let plain =
        shim.cli(&["stack", "create", "plain", "--template", template.to_str().expect("utf-8"), "--wait"]).await;
    assert_eq!(plain.code, 0, "{plain:?}");
    assert!(!plain.stdout.contains("running longest") && !plain.stderr.contains("running longest"), "{plain:?}");
    assert!(plain.stdout.contains("CREATE_COMPLETE"), "{plain:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_agent_shows_once_progress_and_watches_its_status() {
    let dir = tempfile::Builder::new().prefix("anneal-progress-").tempdir().expect("temp dir");
    let document = json!({"deployments": [{
        "id": "d1", "name": "slow", "group": "script",
        "config": "#!/bin/sh\nsleep 2\necho done\n",
        "inputs": [{"name": "deploy_signal_transport", "value": "NO_SIGNAL"}],
    }]});
    std::fs::create_dir_all(dir.path().join("metadata")).expect("metadata dir");
    std::fs::write(dir.path().join("metadata/doc.json"), document.to_string()).expect("document");
    let config = dir.path().join("agent.toml");
    let text = format!(
        "[agent]\nstate_dir = {}\nhooks_dirs = []\n\n[[source]]\nkind = \"local\"\npath = {}\n",
        toml_string(&dir.path().join("state").display().to_string()),
        toml_string(&dir.path().join("metadata").display().to_string())
    );
    std::fs::write(&config, text).expect("config");

    let once = format!("{} once --config {}", quoted(&agent_binary()), quoted(&config));
    let ran = run_command(on_terminal(&once), Duration::from_secs(60)).await;
    assert_eq!(ran.code, 0, "{ran:?}");
    assert!(ran.stdout.contains("once: 0 done, 1 running (slow "), "{ran:?}");

    // --watch on a terminal: the screen is cleared and the table drawn, round after round.
    let watch = format!("{} status --watch --interval-secs 1 --config {}", quoted(&agent_binary()), quoted(&config));
    let screen = stop_after(on_terminal(&watch), Duration::from_millis(2500)).await;
    assert!(screen.matches("\x1b[2Janneal-agent status at").count() >= 2, "{screen:?}");
    assert!(screen.contains("slow") && screen.contains("signalled"), "{screen:?}");

    // Off a terminal, with --json: one JSON array per round.
    let mut json_watch = Command::new(agent_binary());
    json_watch.args(["status", "--watch", "--json", "--interval-secs", "1", "--config"]).arg(&config);
    let lines = stop_after(json_watch, Duration::from_millis(1500)).await;
    let rounds: Vec<serde_json::Value> =
        lines.lines().map(|line| serde_json::from_str(line).expect("a JSON line")).collect();
    assert!(rounds.len() >= 2, "{lines}");
    assert_eq!(rounds[0][0]["id"], "d1");
}

/// Runs `command` in its own process group, sends it SIGINT after `after` (Ctrl-C), and returns
/// its stdout once it exited 0.
async fn stop_after(mut command: Command, after: Duration) -> String {
    command
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    let child = command.spawn().expect("start");
    let group = Pid::from_raw(child.id().expect("a pid") as i32);
    tokio::time::sleep(after).await;
    let _ = killpg(group, Signal::SIGINT);
    let output = tokio::time::timeout(Duration::from_secs(10), child.wait_with_output())
        .await
        .expect("it stops on Ctrl-C")
        .expect("its output");
    let _ = killpg(group, Signal::SIGKILL);
    assert!(output.status.success(), "{output:?}");
    String::from_utf8_lossy(&output.stdout).into_owned()
}
