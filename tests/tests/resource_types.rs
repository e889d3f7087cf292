//! The computing and binding resource types through the real shim binary and a real agent:
//! an `OS::Heat::DeployedServer` binds a deployment to the registered server (as a Heat user's
//! `OS::Nova::Server` mapped to it does), a RandomString's secret and a Value reach the script,
//! `OS::Heat::None` stubs a resource out, and the stack converges with `stack create --wait`.

use anneal_tests::{AgentSettings, Fleet, Shim};
use serde_json::Value;

const TEMPLATE: &str = r##"
heat_template_version: 2018-08-31
parameters:
  server_name: {type: string, default: vm1, constraints: [{custom_constraint: nova.server}]}
parameter_groups:
- label: placement
  parameters: [server_name]
resources:
  port: {type: OS::Heat::None, properties: {network: private}}
  password:
    type: OS::Heat::RandomString
    properties: {length: 16, character_classes: [{class: lowercase, min: 16}]}
  greeting:
    type: OS::Heat::Value
    properties: {type: string, value: {list_join: ['-', [hello, {get_attr: [server, name]}]]}}
  server:
    type: OS::Heat::DeployedServer
    metadata: {role: web}
    properties: {name: {get_param: server_name}}
  config:
    type: OS::Heat::SoftwareConfig
    properties:
      group: script
      inputs: [{name: password}, {name: greeting}]
      outputs: [{name: seen}]
      config: |
        #!/bin/sh
        printf '%s %s' "$greeting" "${#password}" > "$heat_outputs_path.seen"
  deploy:
    type: OS::Heat::SoftwareDeployment
    deletion_policy: Delete
    properties:
      config: {get_resource: config}
      server: {get_resource: server}
      input_values:
        password: {get_attr: [password, value]}
        greeting: {get_attr: [greeting, value]}
outputs:
  seen: {value: {get_attr: [deploy, seen]}}
  password: {value: {get_attr: [password, value]}}
"##;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deployed_server_random_string_value_and_none_converge_with_an_agent() {
    let shim = Shim::start().await;
    let fleet = Fleet::start(&shim, &["vm1"], &AgentSettings::default()).await;
    let template = shim.write_template("types.yaml", TEMPLATE);
    let create =
        ["stack", "create", "types", "--template", template.to_str().expect("utf-8"), "--wait", "--timeout", "60"];
    let created = shim.cli(&create).await;
    assert_eq!(created.code, 0, "stack create --wait ends with COMPLETE: {created:?}\n{}", fleet.logs());
    let outputs = shim.cli_json(&["stack", "outputs", "types", "--json"]).await;
    let value = |name: &str| -> Value {
        let outputs = outputs.as_array().expect("a list");
        outputs.iter().find(|output| output["name"] == name).map(|output| output["value"].clone()).expect(name)
    };
    assert_eq!(value("seen"), "hello-vm1 16", "the script saw the Value and the 16-character secret");
    let password = value("password");
    let password = password.as_str().expect("a string");
    assert!(password.len() == 16 && password.chars().all(|c| c.is_ascii_lowercase()), "{password}");
    let shown = shim.cli(&["stack", "show", "types", "--json"]).await;
    let events = shim.cli(&["stack", "events", "types", "--json"]).await;
    assert!(shown.stdout.contains("OS::Heat::DeployedServer"), "{}", shown.stdout);
    let in_outputs = shown.stdout.matches(password).count();
    assert!(in_outputs <= 1 && !events.stdout.contains(password), "only the output shows the secret");

    let nova = shim.write_template("nova.yaml", &TEMPLATE.replace("OS::Heat::DeployedServer", "OS::Nova::Server"));
    let refused = shim.cli(&["stack", "create", "nova", "--template", nova.to_str().expect("utf-8")]).await;
    assert_ne!(refused.code, 0);
    assert!(
        refused.stderr.contains(r#"resource_registry: {"OS::Nova::Server": OS::Heat::DeployedServer}"#),
        "the refusal names the environment fix: {refused:?}"
    );
}
