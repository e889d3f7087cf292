//! Differential suite: every built-in hook of anneal-agent against heat-agents' own hook, from
//! the heat-agents 13.0.0 sdist the peers setup fetches, on the same deployments (those
//! heat-agents' tests/test_hook_*.py use) with the same recording fake tools
//! (tests/fixtures/hooks/fake-tool.py). Both run through `anneal-agent hook-test`, heat-agents'
//! as an installed hook file, anneal's as the built-in; each case compares the signal body, every
//! tool run (argv, environment, working directory, stdin) and every file written (path, mode,
//! bytes). A difference kept on purpose is a case that says why and checks both sides. kubelet
//! and salt talk to an engine (Docker, Salt) instead of a tool: their cases are in engines.rs.

#[path = "hooks_differential/cases.rs"]
mod cases;
#[path = "hooks_differential/engines.rs"]
mod engines;
#[path = "hooks_differential/side.rs"]
mod side;

use cases::{Case, Expect};
use side::{Outcome, Peers};

fn peers() -> Peers {
    let cache = anneal_tests::peers::cache(&[
        "heat-agents/heat-config-ansible/install.d/hook-ansible.py",
        "venv/bin/python3",
        "docker-py/bin/python3",
        "salt/bin/salt-call",
    ]);
    Peers { heat_agents: cache.join("heat-agents"), cache }
}

/// Runs every case on both sides; panics listing each case whose sides disagree.
fn compare(cases: Vec<Case>) {
    let peers = peers();
    let parent = tempfile::Builder::new().prefix("anneal-hooks-differential-").tempdir().expect("temp dir");
    let mut failures = Vec::new();
    for case in &cases {
        let heat_agents = side::run(case, &peers, parent.path(), true);
        let built_in = side::run(case, &peers, parent.path(), false);
        match &case.expect {
            Expect::Identical => {
                if let Some(difference) = difference(&heat_agents, &built_in) {
                    failures.push(format!("{}: {difference}", case.name));
                }
            }
            Expect::Differs { reason, check } => {
                let checked = std::panic::catch_unwind(|| check(&heat_agents, &built_in));
                if checked.is_err() {
                    failures.push(format!(
                        "{} (differs on purpose: {reason}): the sides do not behave as expected\n  heat-agents: {heat_agents:?}\n  built-in: {built_in:?}",
                        case.name
                    ));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{} of {} cases failed:\n{}", failures.len(), cases.len(), failures.join("\n"));
}

/// The first way the two sides differ, if any.
fn difference(heat_agents: &Outcome, built_in: &Outcome) -> Option<String> {
    if heat_agents.signal != built_in.signal || heat_agents.signal.is_null() {
        return Some(format!(
            "signal bodies differ\n  heat-agents: {} (stderr: {})\n  built-in:    {} (stderr: {})",
            heat_agents.signal, heat_agents.stderr, built_in.signal, built_in.stderr
        ));
    }
    if heat_agents.exit_code != built_in.exit_code {
        return Some(format!("hook-test exit codes differ: {} vs {}", heat_agents.exit_code, built_in.exit_code));
    }
    if heat_agents.invocations != built_in.invocations {
        return Some(format!(
            "tool runs differ\n  heat-agents: {:#?}\n  built-in:    {:#?}",
            heat_agents.invocations, built_in.invocations
        ));
    }
    if heat_agents.files != built_in.files {
        return Some(format!(
            "files differ\n  heat-agents: {:#?}\n  built-in:    {:#?}",
            heat_agents.files, built_in.files
        ));
    }
    None
}

#[test]
fn script_matches_heat_agents() {
    compare(cases::script());
}

#[test]
fn ansible_matches_heat_agents() {
    compare(cases::ansible());
}

#[test]
fn puppet_matches_heat_agents() {
    compare(cases::puppet());
}

#[test]
fn json_file_matches_heat_agents() {
    compare(cases::json_file());
}

#[test]
fn hiera_matches_heat_agents() {
    compare(cases::hiera());
}

#[test]
fn cfn_init_matches_heat_agents() {
    compare(cases::cfn_init());
}

#[test]
fn apply_config_matches_heat_agents() {
    compare(cases::apply_config());
}

#[test]
fn chef_matches_heat_agents() {
    compare(cases::chef());
}

#[test]
fn docker_compose_matches_heat_agents() {
    compare(cases::docker_compose());
}

#[test]
fn docker_cmd_matches_heat_agents() {
    compare(cases::docker_cmd());
}

#[test]
fn kubelet_matches_heat_agents() {
    compare(engines::kubelet());
}

#[test]
fn salt_matches_heat_agents() {
    compare(engines::salt());
}
