//! The engine's token and wait-signal defences against a real `anneal-shim serve`, as an
//! attacker on loopback would try them: a server holding only a handle URL posts another server's
//! deployment placeholder as wait-condition data, and a consumer's document must not then carry
//! the victim's token (nor anything that completes the victim's deployment); signals after the
//! wait condition completed are answered `stale`, and oversized data is refused with 400 (see
//! docs/security.md and docs/http-api.md). A YAML alias bomb in a template is refused with 400
//! naming the limit while the shim goes on answering polls (docs/templates.md, "The document"),
//! and a template of many results each under the per-result cap is refused with 400 naming the
//! evaluation budget, fast and without the shim's memory growing (docs/templates.md, "Limits");
//! so are deployments and group members whose copies of one large config would pass the stack's
//! limit on what it publishes.

use std::time::Duration;

use anneal_protocol::alias_budget::AliasBudget;
use anneal_tests::evaluation::{peak_rss_mib, replaced_values};
use anneal_tests::{Shim, alias_bomb_template, capability_token, wait_until};
use serde_json::{Value, json};

const VICTIM: &str = r##"
heat_template_version: 2018-08-31
resources:
  config:
    type: OS::Heat::SoftwareConfig
    properties: {group: script, config: "#!/bin/sh\n"}
  victim:
    type: OS::Heat::SoftwareDeployment
    properties: {config: {get_resource: config}, server: victim}
"##;

const ATTACK: &str = r##"
heat_template_version: 2018-08-31
resources:
  config:
    type: OS::Heat::SoftwareConfig
    properties: {group: script, config: "#!/bin/sh\n"}
  handle:
    type: OS::Heat::WaitConditionHandle
  notifier:
    type: OS::Heat::SoftwareDeployment
    properties:
      config: {get_resource: config}
      server: attacker
      input_values: {wc_notify: {get_attr: [handle, curl_cli]}}
  wait:
    type: OS::Heat::WaitCondition
    properties: {handle: {get_resource: handle}, count: 1, timeout: 600}
  consumer:
    type: OS::Heat::SoftwareDeployment
    properties:
      config: {get_resource: config}
      server: consumer
      input_values: {wait_data: {get_attr: [wait, data]}}
"##;

/// `server`'s metadata document (read with its token) once it has a deployment.
async fn document(shim: &Shim, server: &str, token: &str) -> String {
    let client = reqwest::Client::new();
    let url = format!("{}/v1/servers/{server}/metadata", shim.url());
    wait_until(Duration::from_secs(30), &format!("a deployment in {server}'s document"), || async {
        let text = client.get(&url).bearer_auth(token).send().await.ok()?.text().await.ok()?;
        let document: Value = serde_json::from_str(&text).ok()?;
        (!document["deployments"].as_array()?.is_empty()).then_some(text)
    })
    .await
}

/// The value of input `name` of the first deployment in `text`.
fn input(text: &str, name: &str) -> String {
    let document: Value = serde_json::from_str(text).expect("a JSON document");
    let inputs = document["deployments"][0]["inputs"].as_array().expect("inputs").clone();
    let input = inputs.into_iter().find(|input| input["name"] == name).expect("the input");
    input["value"].as_str().expect("a string").to_string()
}

async fn post(url: &str, body: &Value) -> (u16, String) {
    let response = reqwest::Client::new()
        .post(url)
        .header("content-type", "application/json")
        .body(body.to_string())
        .send()
        .await
        .expect("a signal answer");
    (response.status().as_u16(), response.text().await.expect("a body"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handle_holder_cannot_mint_another_servers_signal_token() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let shim = Shim::start().await;
    let mut tokens = std::collections::BTreeMap::new();
    for server in ["victim", "attacker", "consumer"] {
        let credentials = shim.cli_json(&["server", "add", server, "--format", "json"]).await;
        tokens.insert(server, credentials["token"].as_str().expect("a server token").to_string());
    }
    let victim_template = shim.write_template("victim.yaml", VICTIM);
    shim.cli_ok(&["stack", "create", "v", "--template", victim_template.to_str().expect("utf-8")]).await;
    let victim_document = document(&shim, "victim", &tokens["victim"]).await;
    let victim_token = capability_token(&input(&victim_document, "deploy_signal_id"));
    let victim_id = serde_json::from_str::<Value>(&victim_document).expect("JSON")["deployments"][0]["id"].clone();
    let forged = format!("@@anneal-token:signal:{}@@", victim_id.as_str().expect("an id"));

    let attack_template = shim.write_template("attack.yaml", ATTACK);
    shim.cli_ok(&["stack", "create", "s", "--template", attack_template.to_str().expect("utf-8")]).await;
    let curl_cli = input(&document(&shim, "attacker", &tokens["attacker"]).await, "wc_notify");
    let handle_url = curl_cli.rsplit(' ').next().expect("the handle URL").to_string();
    let (status, answer) = post(&handle_url, &json!({"id": "a", "data": forged, "reason": forged})).await;
    assert_eq!(status, 200, "{answer}");

    let consumer_document = document(&shim, "consumer", &tokens["consumer"]).await;
    assert!(!consumer_document.contains(&victim_token), "the consumer's document carries the victim's token");
    let client = reqwest::Client::new();
    for candidate in consumer_document.split(|c: char| !c.is_ascii_hexdigit()).filter(|run| run.len() == 64) {
        let url = format!("{}/v1/signals/{candidate}", shim.url());
        client
            .post(url)
            .header("content-type", "application/json")
            .body(json!({"deploy_status_code": 0}).to_string())
            .send()
            .await
            .expect("a signal answer");
    }
    let resources = shim.stack_resources("v").await;
    assert_eq!(resources["victim"]["status"], "CREATE_IN_PROGRESS", "the victim's deployment was completed");

    // The wait condition is complete: a new id changes nothing, oversized data is refused.
    let (status, answer) = post(&handle_url, &json!({"id": "late", "data": "x"})).await;
    assert_eq!((status, answer.contains("stale")), (200, true), "{answer}");
    let (status, answer) = post(&handle_url, &json!({"id": "big", "data": "x".repeat(70_000)})).await;
    assert_eq!(status, 400, "{answer}");
    assert!(answer.contains("larger than 65536 bytes"), "{answer}");
    let events = shim.cli_json(&["stack", "events", "s", "--json"]).await;
    let is_signal = |event: &&Value| event["status"].as_str().is_some_and(|status| status.starts_with("SIGNAL_"));
    let signals = events.as_array().expect("events").iter().filter(is_signal).count();
    assert_eq!(signals, 1, "one signal event; the late and the refused ones add none: {events:#}");
}

/// An agent's poll: the status of a GET of its metadata with its token.
async fn poll(metadata_url: &str, token: &str) -> u16 {
    let response = reqwest::Client::new().get(metadata_url).bearer_auth(token).timeout(Duration::from_secs(10)).send();
    response.await.map_or(0, |response| response.status().as_u16())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_yaml_alias_bomb_is_refused_naming_the_limit_while_polls_are_answered() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let shim = Shim::start().await;
    let credentials = shim.cli_json(&["server", "add", "vm1", "--format", "json"]).await;
    let token = credentials["token"].as_str().expect("a server token");
    let metadata_url = credentials["metadata_url"].as_str().expect("a metadata URL");
    let template = alias_bomb_template();
    let body = json!({"name": "bomb", "template": template});
    assert!(body.to_string().len() < 1 << 20, "the bomb fits a request");

    let (response, polled) = tokio::join!(shim.post_stack(&body), poll(metadata_url, token));
    let status = response.status().as_u16();
    let answer = response.text().await.expect("a body");
    let limit = AliasBudget::for_text(template.len()).limit();
    assert_eq!(status, 400, "{answer}");
    assert!(answer.contains(&format!("aliases expand to more than {limit} bytes")), "{answer}");
    assert!(answer.contains("line 4 column "), "the alias over the limit is located: {answer}");
    assert_eq!(polled, 200, "a poll alongside the bomb");
    assert_eq!(poll(metadata_url, token).await, 200, "a poll after the bomb");
    assert_eq!(shim.cli_json(&["stack", "list", "--json"]).await, json!([]), "nothing is stored");
}

/// Creates stack `name` from `template` with parameter `big`, which must be refused with 400
/// and store nothing; the answer and how long it took.
async fn refused_create(shim: &Shim, name: &str, template: &str, big: &str) -> (String, Duration) {
    let body = json!({"name": name, "template": template, "parameters": {"big": big}});
    let started = std::time::Instant::now();
    let response = tokio::time::timeout(Duration::from_secs(60), shim.post_stack(&body))
        .await
        .expect("the create is answered within 60 s");
    let elapsed = started.elapsed();
    let status = response.status().as_u16();
    let answer = response.text().await.expect("a body");
    println!("{name}: {status} after {elapsed:?}");
    assert_eq!(status, 400, "{}", answer.chars().take(600).collect::<String>());
    let shown = shim.cli(&["stack", "show", name, "--json"]).await;
    assert_ne!(shown.code, 0, "nothing was stored: {}", shown.stdout);
    (answer, elapsed)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_template_of_many_capped_results_is_refused_naming_the_evaluation_budget() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let shim = Shim::start().await;
    let big = "x".repeat(500_000);
    // The reviewer's template: values and outputs each str_replace-ing a 0.5 MB parameter 32
    // times (16 MiB, under the per-result cap).
    for (name, values) in [("sixty", 60), ("two-hundred", 200)] {
        let template = replaced_values(values, 10, 32, "");
        let (answer, elapsed) = refused_create(&shim, name, &template, &big).await;
        assert!(answer.contains("over the evaluation budget: more than 67108864 bytes (64 MiB)"), "{answer}");
        assert!(elapsed < Duration::from_secs(10), "refused after {elapsed:?}");
    }
    let peak = peak_rss_mib(shim.pid().expect("the shim runs"));
    println!("the shim's peak RSS: {peak} MiB");
    assert!(peak < 250, "the shim's peak RSS was {peak} MiB");
}

/// A config of 30 copies of the 0.5 MB parameter `big` (15 MB, under the per-result cap) and
/// `deployments` deployments of it to vm1, then `more` (resource lines, two spaces in).
fn copied_config(deployments: usize, more: &str) -> String {
    let value =
        format!("{{str_replace: {{template: \"{}\", params: {{\"$p\": {{get_param: big}}}}}}}}", "$p".repeat(30));
    let mut text = format!(
        "heat_template_version: 2018-08-31\nparameters:\n  big: {{type: string}}\nresources:\n  config: {{type: \
         OS::Heat::SoftwareConfig, properties: {{group: script, config: {value}}}}}\n"
    );
    for index in 0..deployments {
        text.push_str(&format!(
            "  d{index}: {{type: OS::Heat::SoftwareDeployment, properties: {{config: {{get_resource: config}}, server: vm1}}}}\n"
        ));
    }
    text.push_str(more);
    text
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn copies_of_a_large_config_past_the_stacks_limit_are_refused_without_the_memory_they_would_take() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let shim = Shim::start().await;
    shim.cli_ok(&["server", "add", "vm1"]).await;
    let big = "x".repeat(500_000);
    let members: String = (0..990).map(|index| format!("m{index}: vm1, ")).collect();
    let group = format!(
        "  group: {{type: OS::Heat::SoftwareDeploymentGroup, properties: {{config: {{get_resource: config}}, servers: {{{members}}}}}}}\n"
    );
    // 40 deployments of a 15 MB config stored 630 MB and took the shim to 2.1 GB before the
    // limit; 990 members of it would have been 15 GB.
    for (name, template, resource) in
        [("deployments", copied_config(40, ""), "resource d"), ("group", copied_config(0, &group), "resource group: ")]
    {
        let (answer, _) = refused_create(&shim, name, &template, &big).await;
        assert!(answer.contains(resource), "names the resource: {answer}");
        assert!(answer.contains("over its limit of 134217728 bytes (128 MiB"), "{answer}");
    }
    let peak = peak_rss_mib(shim.pid().expect("the shim runs"));
    println!("the shim's peak RSS: {peak} MiB");
    assert!(peak < 700, "the shim's peak RSS was {peak} MiB");
}
