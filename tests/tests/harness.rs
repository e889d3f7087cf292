//! The harness itself: a shim and two agents converge a two-server stack (vm2 consumes vm1's
//! output through get_attr), the shim restarts on the same port with the agents carrying on,
//! and dropping everything leaves no process behind.

use anneal_tests::{Agent, AgentSettings, Fleet, Shim};
use nix::errno::Errno;
use nix::sys::signal::killpg;
use nix::unistd::Pid;

const TEMPLATE: &str = r##"
heat_template_version: 2018-08-31
parameters:
  greeting: {type: string, default: hello}
resources:
  first_config:
    type: OS::Heat::SoftwareConfig
    properties:
      group: script
      inputs: [{name: greeting}]
      outputs: [{name: word}]
      config: "#!/bin/sh\nprintf '%s from vm1' \"$greeting\" > $heat_outputs_path.word\n"
  first:
    type: OS::Heat::SoftwareDeployment
    properties:
      config: {get_resource: first_config}
      server: vm1
      input_values: {greeting: {get_param: greeting}}
  second_config:
    type: OS::Heat::SoftwareConfig
    properties:
      group: script
      inputs: [{name: word}]
      outputs: [{name: sentence}]
      config: "#!/bin/sh\nprintf '%s, seen on vm2' \"$word\" > $heat_outputs_path.sentence\n"
  second:
    type: OS::Heat::SoftwareDeployment
    properties:
      config: {get_resource: second_config}
      server: vm2
      input_values: {word: {get_attr: [first, word]}}
outputs:
  sentence: {value: {get_attr: [second, sentence]}}
"##;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_agents_converge_and_survive_a_shim_restart() {
    let mut shim = Shim::start().await;
    let fleet = Fleet::start(&shim, &["vm1", "vm2"], &AgentSettings::default()).await;
    let template = shim.write_template("stack.yaml", TEMPLATE);
    let template = template.to_str().expect("utf-8 path");
    let create = shim.cli(&["stack", "create", "pair", "--template", template, "--wait", "--timeout", "30"]).await;
    assert_eq!(create.code, 0, "{create:?}\n{}", fleet.logs());
    let outputs = shim.cli_json(&["stack", "outputs", "pair", "--json"]).await;
    assert_eq!(outputs[0]["value"], "hello from vm1, seen on vm2", "{outputs}");

    shim.restart().await;
    let update = ["stack", "update", "pair", "--template", template, "--param", "greeting=bye", "--wait"];
    let update = shim.cli(&[&update[..], &["--timeout", "30"]].concat()).await;
    assert_eq!(update.code, 0, "{update:?}\n{}", fleet.logs());
    let outputs = shim.cli_json(&["stack", "outputs", "pair", "--json"]).await;
    assert_eq!(outputs[0]["value"], "bye from vm1, seen on vm2", "{outputs}");

    let status = fleet.agent("vm2").status().await;
    assert_eq!(status.len(), 2, "vm2 ran CREATE and UPDATE: {status:?}");
    let groups: Vec<i32> = fleet.agents().iter().filter_map(Agent::pid).chain(shim.pid()).collect();
    assert_eq!(groups.len(), 3);
    drop(fleet);
    drop(shim);
    for group in groups {
        let gone = killpg(Pid::from_raw(group), None);
        assert_eq!(gone, Err(Errno::ESRCH), "process group {group} is gone after the drop");
    }
}
