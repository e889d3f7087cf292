//! `/metrics` on a real shim while a stack converges, read by Prometheus's reference parser
//! (prometheus_client from PyPI, OpenMetrics): stacks and resources by state follow the stack,
//! the agent's held long-poll and its signals are counted, an unknown signal token is counted as
//! rejected, the histograms fill, and the scrape needs the admin token. The agent's node_exporter
//! textfile, read by the classic text parser, says the same of its side.

use std::time::{Duration, Instant};

use anneal_tests::peers::{metric_value, parse_metrics};
use anneal_tests::{AgentSettings, Fleet, Shim, toml_string};
use serde_json::Value;

const TEMPLATE: &str = r##"
heat_template_version: 2018-08-31
resources:
  first_config:
    type: OS::Heat::SoftwareConfig
    properties:
      group: script
      outputs: [{name: word}]
      config: "#!/bin/sh\nprintf hello > $heat_outputs_path.word\n"
  first:
    type: OS::Heat::SoftwareDeployment
    properties: {config: {get_resource: first_config}, server: vm1}
  second:
    type: OS::Heat::SoftwareDeployment
    properties:
      config: {get_resource: first_config}
      server: vm2
      input_values: {word: {get_attr: [first, word]}}
"##;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_follow_a_converging_stack() {
    let shim = Shim::start().await;
    let textfiles = tempfile::tempdir().expect("a textfile collector directory");
    let textfile = textfiles.path().join("anneal.prom");
    let settings =
        AgentSettings::default().line(&format!("metrics_textfile = {}", toml_string(&textfile.display().to_string())));
    let fleet = Fleet::start(&shim, &["vm1"], &settings).await;
    shim.cli_ok(&["server", "add", "vm2"]).await;
    let client = anneal_tests::http_client();
    let url = format!("{}/metrics", shim.url());

    let refused = client.get(&url).send().await.expect("scrape");
    assert_eq!(refused.status(), 401, "the scrape needs the admin token");

    // Once vm1's agent has polled, vm2 (no agent) is the one server never seen.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let before = scrape(&shim, &client).await;
        if metric_value(&before, "anneal_shim_servers_never_seen", &[]) == 1.0 {
            break;
        }
        assert!(Instant::now() < deadline, "vm1's agent never polled, or vm2 counts as seen: {before}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    let template = shim.write_template("stack.yaml", TEMPLATE);
    shim.cli_ok(&["stack", "create", "pair", "--template", template.to_str().expect("utf-8")]).await;
    let deadline = Instant::now() + Duration::from_secs(30);
    let during = loop {
        let families = scrape(&shim, &client).await;
        let done = [("kind", "deployment"), ("phase", "complete")];
        if metric_value(&families, "anneal_shim_resources", &done) == 1.0 {
            break families;
        }
        assert!(Instant::now() < deadline, "vm1's deployment never completed: {families}\n{}", fleet.logs());
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(metric_value(&during, "anneal_shim_stacks", &[("status", "CREATE_IN_PROGRESS")]), 1.0);
    let running = [("kind", "deployment"), ("phase", "in_progress")];
    assert_eq!(metric_value(&during, "anneal_shim_resources", &running), 1.0, "{during}");
    assert_eq!(metric_value(&during, "anneal_shim_resources", &[("kind", "config")]), 1.0);
    let applied = [("route", "deployment"), ("outcome", "applied")];
    assert!(metric_value(&during, "anneal_shim_signals_total", &applied) >= 1.0, "{during}");
    assert!(metric_value(&during, "anneal_shim_store_transaction_seconds_count", &[]) >= 2.0);
    assert!(metric_value(&during, "anneal_shim_wakeup_seconds_count", &[]) >= 1.0, "vm1's long-poll woke: {during}");
    let age = metric_value(&during, "anneal_shim_server_last_seen_age_seconds", &[("server", "vm1")]);
    assert!((0.0..30.0).contains(&age), "vm1's agent polls: {age}");
    let held_deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let families = scrape(&shim, &client).await;
        if metric_value(&families, "anneal_shim_long_polls_held", &[]) >= 1.0 {
            break;
        }
        assert!(Instant::now() < held_deadline, "vm1's agent holds a long-poll: {families}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    let unknown = format!("{}/v1/signals/{}", shim.url(), "a".repeat(43));
    let answer = client.post(&unknown).body("{}").send().await.expect("signal");
    assert_eq!(answer.status(), 404);
    let after = scrape(&shim, &client).await;
    let rejected = [("route", "deployment"), ("outcome", "unknown_token")];
    assert_eq!(metric_value(&after, "anneal_shim_signals_total", &rejected), 1.0, "{after}");
    assert_eq!(after["anneal_shim_signals"]["type"], "counter");
    assert_eq!(after["anneal_shim_wakeup_seconds"]["type"], "histogram");

    // The agent rewrites its textfile after each run and each poll interval (1 s here).
    let deadline = Instant::now() + Duration::from_secs(30);
    let agent = loop {
        let text = std::fs::read_to_string(&textfile).unwrap_or_default();
        if !text.is_empty() {
            let families = parse_metrics(&text, "text");
            if metric_value(&families, "anneal_agent_deployments", &[("state", "signalled")]) == 1.0 {
                break families;
            }
        }
        assert!(
            Instant::now() < deadline,
            "vm1's textfile never showed its signalled deployment: {text}\n{}",
            fleet.logs()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(agent["anneal_agent_hook_duration_seconds"]["type"], "histogram");
    assert_eq!(metric_value(&agent, "anneal_agent_hook_duration_seconds_count", &[]), 1.0, "{agent}");
    assert_eq!(metric_value(&agent, "anneal_agent_signals_pending", &[]), 0.0);
    assert_eq!(metric_value(&agent, "anneal_agent_deployments_failed", &[]), 0.0);
    let polled = metric_value(&agent, "anneal_agent_last_successful_poll_timestamp_seconds", &[]);
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).expect("clock").as_secs_f64();
    assert!((now - 60.0..=now + 1.0).contains(&polled), "the last poll was recent: {polled} vs {now}");
    drop(fleet);
}

async fn scrape(shim: &Shim, client: &reqwest::Client) -> Value {
    let token = std::fs::read_to_string(shim.token_file()).expect("the admin token");
    let response =
        client.get(format!("{}/metrics", shim.url())).bearer_auth(token.trim()).send().await.expect("scrape");
    assert_eq!(response.status(), 200);
    let content_type = response.headers()["content-type"].to_str().expect("ascii").to_string();
    assert!(content_type.starts_with("application/openmetrics-text"), "{content_type}");
    parse_metrics(&response.text().await.expect("body"), "openmetrics")
}
