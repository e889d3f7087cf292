//! Orphaned hooks (see docs/journal.md, restart): an agent killed (SIGKILL of its own process
//! group) while a hook runs leaves the hook's process group alive. The restarted agent must find it
//! from the run marker the agent wrote right after the spawn (`<state>/journal/<id>.run`, pid and
//! start time; or, without it, through the marker path in the hook's environment) and stop the
//! group before deciding: two copies of one deployment never run at once. The script holds an flock
//! for as long as any process of its group lives; a second copy that finds the lock taken records
//! an overlap.

use std::path::Path;
use std::time::Duration;

use anneal_tests::metadata::journal_entries;
use anneal_tests::{Agent, AgentSettings, Shim, agent_binary, eventually, run_command};

/// The first run sleeps (holding the lock through its `sleep` child); a rerun finishes at once.
fn template(work: &Path, on_interrupt: &str) -> String {
    let script = format!(
        "#!/bin/sh\nexec 9>{work}/lock\nflock -n 9 || echo overlap >> {work}/overlaps\necho $$ >> {work}/runs\n\
         if [ ! -e {work}/first ]; then touch {work}/first; sleep 120; echo finished >> {work}/ends; fi\n\
         echo -n ok > $heat_outputs_path.result\n",
        work = work.display()
    );
    format!(
        "heat_template_version: 2018-08-31\nresources:\n  config:\n    type: OS::Heat::SoftwareConfig\n    \
         properties:\n      group: script\n      options: {{on_interrupt: {on_interrupt}}}\n      outputs: [{{name: result}}]\n      \
         config: {script}\n  slow:\n    type: OS::Heat::SoftwareDeployment\n    properties: {{config: {{get_resource: config}}, server: vm1}}\n",
        script = serde_json::to_string(&script).expect("json string")
    )
}

fn lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path).map(|text| text.lines().map(str::to_string).collect()).unwrap_or_default()
}

/// The contents of the run markers (`journal/<id>.run`) in the agent's journal.
fn run_markers(agent: &Agent) -> Vec<String> {
    std::fs::read_dir(agent.state_dir().join("journal"))
        .expect("journal dir")
        .flatten()
        .filter(|item| item.file_name().to_string_lossy().ends_with(".run"))
        .map(|item| std::fs::read_to_string(item.path()).expect("read a run marker"))
        .collect()
}

fn alive(pid: &str) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .is_ok_and(|stat| stat.rsplit_once(')').is_some_and(|(_, rest)| !rest.trim_start().starts_with('Z')))
}

/// Kills the hook's group when a test ends, so a failing test leaves no orphan behind either.
struct GroupReaper(i32);

impl Drop for GroupReaper {
    fn drop(&mut self) {
        let _ = nix::sys::signal::killpg(nix::unistd::Pid::from_raw(self.0), nix::sys::signal::Signal::SIGKILL);
    }
}

async fn crash_during_the_hook(on_interrupt: &str) -> (Shim, Agent, tempfile::TempDir, String, GroupReaper) {
    let shim = Shim::start().await;
    let dir = tempfile::tempdir().expect("temp dir");
    let work = dir.path().join("work");
    std::fs::create_dir_all(&work).expect("work dir");
    let mut agent = Agent::register(&shim, dir.path(), "vm1", &AgentSettings::default()).await;
    let path = shim.write_template("slow.yaml", &template(&work, on_interrupt));
    let created = shim.cli(&["stack", "create", "orphan", "--template", path.to_str().expect("utf-8")]).await;
    assert_eq!(created.code, 0, "{created:?}");
    agent.start();
    eventually(Duration::from_secs(30), "the hook is running", || lines(&work.join("runs")).len() == 1).await;
    let hook_pid = lines(&work.join("runs"))[0].clone();
    let markers = run_markers(&agent);
    let [marker] = &markers[..] else { panic!("one run marker for the running hook: {markers:?}") };
    assert_eq!(marker.split_whitespace().next(), Some(hook_pid.as_str()), "the marker names the hook");
    assert_eq!(marker.split_whitespace().count(), 2, "pid and start time: {marker:?}");
    agent.crash().await;
    assert!(alive(&hook_pid), "the hook's group outlives the agent (it is its own group)");
    let reaper = GroupReaper(hook_pid.parse().expect("a pid"));
    (shim, agent, dir, hook_pid, reaper)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_agent_stops_the_orphan_and_fails_the_interrupted_run() {
    let (shim, mut agent, dir, hook_pid, _reaper) = crash_during_the_hook("fail").await;
    let work = dir.path().join("work");
    agent.start();
    eventually(Duration::from_secs(30), "the orphan is stopped", || !alive(&hook_pid)).await;
    let show = shim.settled("orphan", Duration::from_secs(30)).await;
    assert_eq!(show["status"], "CREATE_FAILED", "{show:#}\n{}", agent.log_text());
    let events = shim.cli_json(&["stack", "events", "orphan", "--json"]).await;
    assert!(events.to_string().contains("slow"), "{events:#}");
    let entries = journal_entries(&agent.state_dir());
    let stderr = entries.first().map(|entry| entry["result"]["deploy_stderr"].to_string()).unwrap_or_default();
    assert!(stderr.contains("interrupted: agent restarted during the run"), "the signalled result says why: {stderr}");
    assert_eq!(lines(&work.join("runs")).len(), 1, "not rerun");
    assert!(lines(&work.join("ends")).is_empty(), "the orphan never finished its work");
    assert!(lines(&work.join("overlaps")).is_empty());
    agent.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rerun_starts_only_after_the_orphan_is_gone() {
    let (shim, mut agent, dir, hook_pid, _reaper) = crash_during_the_hook("rerun").await;
    let work = dir.path().join("work");
    agent.start();
    eventually(Duration::from_secs(30), "the stack completes", || {
        lines(&work.join("runs")).len() == 2 && !alive(&hook_pid)
    })
    .await;
    let show = shim.settled("orphan", Duration::from_secs(30)).await;
    assert_eq!(show["status"], "CREATE_COMPLETE", "{show:#}\n{}", agent.log_text());
    assert!(lines(&work.join("overlaps")).is_empty(), "two copies of the deployment ran at once");
    assert!(lines(&work.join("ends")).is_empty(), "the orphan was stopped, not waited out");
    agent.stop().await;
}

/// The agent dies right after the spawn, before it wrote the run marker file: the restarted agent
/// finds the hook through the marker path in the hook's environment and stops it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_orphan_spawned_just_before_the_crash_is_found_without_its_marker_file() {
    let shim = Shim::start().await;
    let dir = tempfile::tempdir().expect("temp dir");
    let work = dir.path().join("work");
    std::fs::create_dir_all(&work).expect("work dir");
    let mut agent = Agent::register(&shim, dir.path(), "vm1", &AgentSettings::default()).await;
    let path = shim.write_template("slow.yaml", &template(&work, "fail"));
    let created = shim.cli(&["stack", "create", "orphan", "--template", path.to_str().expect("utf-8")]).await;
    assert_eq!(created.code, 0, "{created:?}");
    let mut command = tokio::process::Command::new(agent_binary());
    command.arg("once").arg("--config").arg(agent.config_path()).env("ANNEAL_FAILPOINT", "after_spawn");
    let crashed = run_command(command, Duration::from_secs(60)).await;
    assert!(crashed.stderr.contains("failpoint after_spawn reached"), "{crashed:?}");
    eventually(Duration::from_secs(30), "the hook is running", || lines(&work.join("runs")).len() == 1).await;
    let hook_pid = lines(&work.join("runs"))[0].clone();
    let _reaper = GroupReaper(hook_pid.parse().expect("a pid"));
    assert!(run_markers(&agent).is_empty(), "the agent died before writing the marker file");
    agent.start();
    eventually(Duration::from_secs(30), "the orphan is stopped", || !alive(&hook_pid)).await;
    let show = shim.settled("orphan", Duration::from_secs(30)).await;
    assert_eq!(show["status"], "CREATE_FAILED", "{show:#}\n{}", agent.log_text());
    assert!(lines(&work.join("ends")).is_empty(), "the orphan never finished its work");
    agent.stop().await;
}
