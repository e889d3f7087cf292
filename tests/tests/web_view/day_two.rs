//! Day two in the web view: a stack created with rollback enabled whose deployment group has a
//! failure budget (`max_failures: 1`) and creates its three members in two batches with a long
//! pause between them. vm1 to vm3 have no agent: the test answers the first batch by hand, one
//! member failing (within the budget) and one succeeding, so the group pauses before its second
//! batch and the stack stays CREATE_IN_PROGRESS. In Chromium the page shows the rollback
//! setting, the cancel commands as text to select, the group's budget, failed member, batch and
//! pause (on its box and in its panel), and on demand the plan of `stack update --existing`,
//! which re-runs the failed member; `stack cancel` then rolls the create back and the page shows
//! ROLLBACK_COMPLETE, styled complete. Without a browser, the plan route is checked to change
//! nothing: the stack, its events, the group's panel and every server's document are the same
//! after it.

use std::path::PathBuf;

use anneal_tests::browser::{Browser, unavailable};
use anneal_tests::{Shim, wait_until};
use serde_json::{Value, json};

use super::secs;

const BUDGET: &str = r##"
heat_template_version: 2018-08-31
resources:
  config:
    type: OS::Heat::SoftwareConfig
    properties: {group: script, config: "#!/bin/sh\necho fleet\n"}
  fleet:
    type: OS::Heat::SoftwareDeploymentGroup
    metadata:
      anneal:
        failure_budget: {max_failures: 1}
    update_policy:
      batch_create: {max_batch_size: 2, pause_time: 600}
    properties:
      config: {get_resource: config}
      servers: {a: vm1, b: vm2, c: vm3}
"##;

/// The group's members and their servers.
const MEMBERS: [(&str, &str); 3] = [("a", "vm1"), ("b", "vm2"), ("c", "vm3")];

/// The stack paused between its group's batches.
struct Paused {
    /// The key of the member that failed, and its server.
    failed: String,
    failed_server: String,
    /// Each server's name and its `server add` credentials.
    servers: Vec<(String, Value)>,
}

/// Creates stack `budget` and answers the first batch: its first member fails, the other
/// succeeds; returns once the group pauses before the second batch.
async fn create_and_pause(shim: &Shim) -> Paused {
    let mut servers = Vec::new();
    for (_, server) in MEMBERS {
        servers.push((server.to_string(), shim.cli_json(&["server", "add", server, "--format", "json"]).await));
    }
    let template = shim.write_template("budget.yaml", BUDGET);
    let template = template.to_str().expect("utf-8");
    shim.cli_ok(&["stack", "create", "budget", "--template", template, "--enable-rollback"]).await;
    let first = wait_until(secs(20), "the first batch is published", || async {
        let mut published = Vec::new();
        for (server, credentials) in &servers {
            if let Some(url) = signal_url(shim, server, credentials).await {
                published.push((server.clone(), url));
            }
        }
        (published.len() >= 2).then_some(published)
    })
    .await;
    assert_eq!(first.len(), 2, "a batch of 2: {first:?}");
    let client = anneal_tests::http_client();
    let answers = [json!({"deploy_status_code": 1, "deploy_stderr": "disk full"}), json!({"deploy_status_code": 0})];
    for ((_, url), answer) in first.iter().zip(answers) {
        let response = client.post(url).body(answer.to_string()).send().await.expect("a signal");
        assert_eq!(response.status(), 200);
    }
    let failed_server = first[0].0.clone();
    let failed = MEMBERS.iter().find(|(_, server)| *server == failed_server).expect("a member").0.to_string();
    wait_until(secs(20), "the group pauses before its second batch", || async {
        let (_, detail) = admin_get(shim, "/ui/api/stacks/budget/nodes/fleet").await;
        let detail: Value = serde_json::from_str(&detail).ok()?;
        detail["group"]["pause_until"].is_string().then_some(())
    })
    .await;
    Paused { failed, failed_server, servers }
}

/// The signal URL of the one deployment in `server`'s document, once there is one.
async fn signal_url(shim: &Shim, server: &str, credentials: &Value) -> Option<String> {
    let token = credentials["token"].as_str().expect("a server token");
    let document = server_document(shim, server, token).await;
    let document: Value = serde_json::from_str(&document).ok()?;
    let entry = document["deployments"].as_array()?.first()?.clone();
    let inputs = entry["inputs"].as_array()?.clone();
    let input = inputs.into_iter().find(|input| input["name"] == "deploy_signal_id")?;
    input["value"].as_str().map(str::to_string)
}

async fn server_document(shim: &Shim, server: &str, token: &str) -> String {
    let url = format!("{}/v1/servers/{server}/metadata", shim.url());
    let response = anneal_tests::http_client().get(url).bearer_auth(token).send().await.expect("metadata");
    response.text().await.expect("a body")
}

/// `GET path` with the admin token: the status and the body.
async fn admin_get(shim: &Shim, path: &str) -> (u16, String) {
    let token = std::fs::read_to_string(shim.token_file()).expect("the admin token");
    let request = anneal_tests::http_client().get(format!("{}{path}", shim.url())).bearer_auth(token.trim());
    let response = request.send().await.expect(path);
    (response.status().as_u16(), response.text().await.expect("a body"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_web_view_shows_rollback_cancel_a_failure_budget_and_a_plan() {
    if let Some(reason) = unavailable() {
        eprintln!("SKIPPED: the web view's browser test needs Chromium and chromedriver: {reason}");
        return;
    }
    let shim = Shim::start().await;
    let paused = create_and_pause(&shim).await;
    let dir = tempfile::Builder::new().prefix("anneal-web-view-").tempdir().expect("temp dir");
    let shots = std::env::var_os("ANNEAL_SCREENSHOT_DIR").map_or_else(|| dir.path().to_path_buf(), PathBuf::from);
    let browser = Browser::start(dir.path()).await;
    browser.navigate(&format!("{}/ui/stacks/budget", shim.url())).await;
    browser.wait_for("return !document.getElementById('login').hidden", "the login form shows", secs(20)).await;
    let token = std::fs::read_to_string(shim.token_file()).expect("the admin token");
    browser.type_into("#token", token.trim()).await;
    browser.click("#login-form button").await;
    let rollback = "return document.getElementById('stack-rollback').textContent === 'rollback on failure: enabled'";
    browser.wait_for(rollback, "the stack's rollback setting shows", secs(20)).await;

    shows_the_cancel_commands(&browser).await;
    shows_the_group_s_budget_failures_and_batch(&browser, &paused).await;
    shows_the_plan_of_a_rerun(&browser, &paused).await;
    std::fs::write(shots.join("web-view-day-two.png"), browser.screenshot().await).expect("a screenshot");

    // Cancelled from the command line: the page follows the rollback to its end.
    shim.cli_ok(&["stack", "cancel", "budget"]).await;
    let rolled_back = "const badge = document.getElementById('stack-status'); \
                       return badge.textContent === 'ROLLBACK_COMPLETE' && badge.classList.contains('phase-complete');";
    browser.wait_for(rolled_back, "the page shows the rollback complete", secs(30)).await;
    assert!(text(&browser, "stack-rollback-state").await.starts_with("Rolled back"));
    assert_eq!(browser.execute("return document.getElementById('stack-cancel').hidden", json!([])).await, true);
    drop(browser);
}

/// The create is in progress: the commands that cancel it, each selected whole by one click.
async fn shows_the_cancel_commands(browser: &Browser) {
    assert_eq!(text(browser, "stack-status").await, "CREATE_IN_PROGRESS");
    assert_eq!(browser.execute("return document.getElementById('stack-cancel').hidden", json!([])).await, false);
    assert_eq!(text(browser, "cancel-command").await, "anneal-shim stack cancel budget");
    assert_eq!(text(browser, "cancel-no-rollback").await, "anneal-shim stack cancel budget --no-rollback");
    let select = "return getComputedStyle(document.getElementById('cancel-command')).userSelect";
    assert_eq!(browser.execute(select, json!([])).await, "all");
}

/// The group's box, then its panel: the budget, the failed member, the batch and the pause.
async fn shows_the_group_s_budget_failures_and_batch(browser: &Browser, paused: &Paused) {
    let group_box = "const node = document.querySelector('#graph g.node[data-name=\"fleet\"]'); \
                     return node ? node.textContent : '';";
    let drawn = browser.execute(group_box, json!([])).await;
    for line in ["budget: max_failures 1", "1 of 3 failed, within budget", "batch 1 of 2", "next batch at"] {
        assert!(drawn.as_str().unwrap_or("").contains(line), "the group's box says {line}: {drawn}");
    }
    browser.click("#graph g.node[data-name=\"fleet\"]").await;
    let panel = "return document.getElementById('panel-name').textContent === 'fleet'";
    browser.wait_for(panel, "the group's panel opens", secs(10)).await;
    let facts = browser
        .execute(
            "return [...document.querySelectorAll('#panel-facts dt')]\
             .map(dt => dt.textContent + ': ' + dt.nextElementSibling.textContent)",
            json!([]),
        )
        .await;
    let facts: Vec<String> = serde_json::from_value(facts).expect("facts");
    let failed_members = format!("failed members: {}", paused.failed);
    for fact in
        ["failure budget: max_failures 1", "failed: 1 of 3, within the budget", &failed_members, "batch: 1 of 2"]
    {
        assert!(facts.iter().any(|shown| shown == fact), "the panel shows {fact}: {facts:?}");
    }
    assert!(facts.iter().any(|shown| shown.starts_with("next batch after: ")), "{facts:?}");
}

/// The button's plan of `stack update --existing`: the failed member runs again (CREATE).
async fn shows_the_plan_of_a_rerun(browser: &Browser, paused: &Paused) {
    browser.click("#plan-button").await;
    let planned = "return !document.getElementById('plan').hidden";
    browser.wait_for(planned, "the plan of stack update --existing shows", secs(20)).await;
    let rows = browser
        .execute(
            "return [...document.querySelectorAll('#plan-runs tbody tr')].map(tr => [...tr.cells].map(td => td.textContent))",
            json!([]),
        )
        .await;
    let rows: Vec<Vec<String>> = serde_json::from_value(rows).expect("rows");
    let rerun =
        rows.iter().find(|row| row[0] == format!("fleet/{}", paused.failed)).expect("the failed member re-runs");
    assert_eq!((rerun[1].as_str(), rerun[2].as_str()), (paused.failed_server.as_str(), "CREATE"), "{rows:?}");
    assert!(rerun[3].starts_with("fleet batch "), "{rows:?}");
    assert!(text(browser, "plan-changes").await.contains("replaced 1"), "the failed member is replaced");
    assert_eq!(text(browser, "plan-command").await, "anneal-shim stack update budget --existing");
    assert_eq!(text(browser, "stack-status").await, "CREATE_IN_PROGRESS", "the preview changed nothing");
}

async fn text(browser: &Browser, id: &str) -> String {
    let script = "const element = document.getElementById(arguments[0]); return element ? element.textContent : '';";
    browser.execute(script, json!([id])).await.as_str().unwrap_or("").to_string()
}

/// What a plan must leave as it was: the stack, its events, the group's panel, every document.
async fn observed(shim: &Shim, paused: &Paused) -> Vec<String> {
    let mut seen = Vec::new();
    for path in ["/v1/stacks/budget", "/v1/stacks/budget/events", "/ui/api/stacks/budget/nodes/fleet"] {
        let (status, body) = admin_get(shim, path).await;
        assert_eq!(status, 200, "{path}: {body}");
        seen.push(body);
    }
    for (server, credentials) in &paused.servers {
        seen.push(server_document(shim, server, credentials["token"].as_str().expect("a token")).await);
    }
    seen
}

#[tokio::test]
async fn the_plan_route_lists_the_failed_member_s_rerun_and_changes_nothing() {
    let shim = Shim::start().await;
    let paused = create_and_pause(&shim).await;
    let (_, graph) = admin_get(&shim, "/ui/api/stacks/budget").await;
    let graph: Value = serde_json::from_str(&graph).expect("JSON");
    assert_eq!(graph["graph"]["status"], "CREATE_IN_PROGRESS");
    assert_eq!(graph["graph"]["disable_rollback"], false, "{graph}");
    let (_, detail) = admin_get(&shim, "/ui/api/stacks/budget/nodes/fleet").await;
    let group = serde_json::from_str::<Value>(&detail).expect("JSON")["group"].clone();
    assert_eq!(group["members"], 3);
    assert_eq!(group["max_failures"], 1);
    assert_eq!(group["failed_members"], json!([paused.failed]));
    assert_eq!((&group["within_budget"], &group["batch"], &group["batches"]), (&json!(true), &json!(1), &json!(2)));

    let before = observed(&shim, &paused).await;
    let (status, body) = admin_get(&shim, "/ui/api/stacks/budget/plan").await;
    assert_eq!(status, 200, "{body}");
    let plan: Value = serde_json::from_str(&body).expect("JSON");
    assert_eq!(plan["action"], "UPDATE", "{plan}");
    let member = format!("fleet/{}", paused.failed);
    let runs = plan["runs"].as_array().expect("runs");
    let rerun = runs.iter().find(|run| run["resource"] == member.as_str()).expect("the failed member re-runs");
    assert_eq!((&rerun["server"], &rerun["action"]), (&json!(paused.failed_server), &json!("CREATE")), "{plan}");
    let replaced = plan["resource_changes"]["replaced"].as_array().expect("replaced");
    // Named as Heat's --show-nested names a member (in its group), or by its node's name.
    let is_member = |resource: &Value| {
        resource["resource_name"] == member.as_str()
            || (resource["resource_name"] == paused.failed.as_str() && resource["parent_resource"] == "fleet")
    };
    assert!(replaced.iter().any(is_member), "{plan}");
    assert_eq!(observed(&shim, &paused).await, before, "a plan changes nothing stored or published");

    assert_eq!(admin_get(&shim, "/ui/api/stacks/nosuch/plan").await.0, 404);
    let anonymous = anneal_tests::http_client().get(format!("{}/ui/api/stacks/budget/plan", shim.url()));
    assert_eq!(anonymous.send().await.expect("an answer").status(), 401);
}
