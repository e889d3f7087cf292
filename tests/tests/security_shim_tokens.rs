//! Server token rotation (`anneal-shim server rotate-token`, docs/security.md "Rotating a
//! server's token"): the new token works at once; the old one keeps working for the grace
//! period, then gets 401 on the bearer route (so an agent re-reads its token file) and 404 in a
//! `request_url`; a token of another server stays 403; and a running agent whose token file
//! was given the new token goes on receiving deployments after the grace is over.

use std::time::Duration;

use anneal_tests::{AgentSettings, Fleet, Shim};
use serde_json::Value;

const TEMPLATE: &str = r##"
heat_template_version: 2018-08-31
parameters:
  message: {type: string, default: first}
resources:
  config:
    type: OS::Heat::SoftwareConfig
    properties:
      group: script
      config: {str_replace: {template: "#!/bin/sh\necho MSG\n", params: {MSG: {get_param: message}}}}
  on_vm1:
    type: OS::Heat::SoftwareDeployment
    properties: {config: {get_resource: config}, server: vm1}
"##;

/// The status of a metadata GET with `token` as the bearer.
async fn bearer_status(shim: &Shim, server: &str, token: &str) -> u16 {
    let url = format!("{}/v1/servers/{server}/metadata", shim.url());
    reqwest::Client::new().get(url).bearer_auth(token).send().await.expect("metadata").status().as_u16()
}

async fn url_status(url: &str) -> u16 {
    reqwest::Client::new().get(url).send().await.expect("metadata").status().as_u16()
}

fn text(credentials: &Value, key: &str) -> String {
    credentials[key].as_str().unwrap_or_else(|| panic!("{key} in {credentials}")).to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn both_tokens_work_during_the_grace_and_only_the_new_one_after() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let shim = Shim::start().await;
    let vm1 = shim.cli_json(&["server", "add", "vm1", "--format", "json"]).await;
    let old = shim.cli_json(&["server", "add", "vm2", "--format", "json"]).await;
    let new = shim.cli_json(&["server", "rotate-token", "vm2", "--grace-secs", "3", "--format", "json"]).await;
    let (old_token, new_token) = (text(&old, "token"), text(&new, "token"));
    assert_ne!(old_token, new_token);
    assert_eq!(new["metadata_url"], old["metadata_url"], "the metadata URL does not change");
    assert!(new["previous_token_expires_at"].is_string(), "{new}");
    for token in [&old_token, &new_token] {
        assert_eq!(bearer_status(&shim, "vm2", token).await, 200, "both tokens work during the grace");
        assert_eq!(bearer_status(&shim, "vm1", token).await, 403, "neither opens another server");
    }
    assert_eq!(url_status(&text(&old, "request_url")).await, 200);
    assert_eq!(url_status(&text(&new, "request_url")).await, 200);
    assert_eq!(bearer_status(&shim, "vm2", &text(&vm1, "token")).await, 403);

    tokio::time::sleep(Duration::from_millis(3500)).await;
    assert_eq!(bearer_status(&shim, "vm2", &old_token).await, 401, "the old token expired: re-read the file");
    assert_eq!(bearer_status(&shim, "vm1", &old_token).await, 403, "still a stranger elsewhere");
    assert_eq!(url_status(&text(&old, "request_url")).await, 404);
    assert_eq!(bearer_status(&shim, "vm2", &new_token).await, 200);
    assert_eq!(url_status(&text(&new, "request_url")).await, 200);

    let toml = shim.cli_ok(&["server", "rotate-token", "vm2"]).await;
    assert!(toml.contains("token_file") && toml.contains("the previous token works until"), "{toml}");
    assert_eq!(bearer_status(&shim, "vm2", &new_token).await, 200, "the default grace is an hour");
    let missing = shim.cli(&["server", "rotate-token", "nosuch"]).await;
    assert!(missing.code == 1 && missing.stderr.contains("server nosuch not found"), "{missing:?}");
    let too_long = shim.cli(&["server", "rotate-token", "vm2", "--grace-secs", "99999999"]).await;
    assert!(too_long.code == 1 && too_long.stderr.contains("longest grace"), "{too_long:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_running_agent_picks_up_the_new_token_from_its_file() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let shim = Shim::start().await;
    let fleet = Fleet::start(&shim, &["vm1"], &AgentSettings::default()).await;
    let agent = fleet.agent("vm1");
    let old_token = text(agent.credentials(), "token");
    let rotated = shim.cli_json(&["server", "rotate-token", "vm1", "--grace-secs", "1", "--format", "json"]).await;
    std::fs::write(agent.token_file(), text(&rotated, "token")).expect("install the new token");
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(bearer_status(&shim, "vm1", &old_token).await, 401);

    let template = shim.write_template("rotation.yaml", TEMPLATE);
    let template = template.to_str().expect("utf-8 path");
    shim.cli_ok(&["stack", "create", "rotation", "--template", template, "--wait", "--timeout", "60"]).await;
    // The update is fetched by a poll made after the old token expired.
    let updated = ["stack", "update", "rotation", "--template", template, "--param", "message=second"];
    shim.cli_ok(&[&updated[..], &["--wait", "--timeout", "60"]].concat()).await;
    assert_eq!(shim.stack_status("rotation").await, "UPDATE_COMPLETE");
}
