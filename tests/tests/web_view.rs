//! The web view in a real headless Chromium (Debian's, through chromedriver): a shim runs a
//! three-server stack mid-convergence (vm1's agent runs its deployment; vm2 and vm3 have no
//! agent, so theirs wait for signals this test sends by hand). The page asks for the admin
//! token, lists the stack, draws its graph; the signals arrive; the page's DOM shows vm2's and
//! vm3's deployments complete without a reload (the page's load time, kept in `window`, is
//! unchanged), the side panel shows a clicked node, and the servers view lists what each server
//! holds. Screenshots before and after go to the test's temp dir (`ANNEAL_SCREENSHOT_DIR` keeps
//! them elsewhere: docs/web-view.png was taken so). A resource named like an HTML element with a
//! script shows as text and runs nothing. The page's own login and logout POSTs pass the shim's
//! cross-site checks, and its logout revokes the session: a copy of the cookie gets 401 after.
//! Without a browser, the view's data routes are checked to mask values computed from a hidden
//! parameter (`str_replace`, `get_attr` of such a value). `day_two`: rollback, cancel, a failure
//! budget and the plan on demand.

#[path = "web_view/day_two.rs"]
mod day_two;

use std::path::PathBuf;
use std::time::Duration;

use anneal_tests::browser::{Browser, unavailable};
use anneal_tests::{AgentSettings, Fleet, Shim};
use serde_json::{Value, json};

const TEMPLATE: &str = r##"
heat_template_version: 2018-08-31
parameters:
  db_password: {type: string, hidden: true, default: s3cr3t-value}
resources:
  base_config:
    type: OS::Heat::SoftwareConfig
    properties:
      group: script
      outputs: [{name: address}]
      config: "#!/bin/sh\necho base ready\nprintf 10.0.0.1 > $heat_outputs_path.address\n"
  app_config:
    type: OS::Heat::SoftwareConfig
    properties:
      group: script
      inputs: [{name: address}, {name: password}]
      config: "#!/bin/sh\necho app\n"
  base:
    type: OS::Heat::SoftwareDeployment
    properties: {config: {get_resource: base_config}, server: vm1}
  app:
    type: OS::Heat::SoftwareDeployment
    properties:
      config: {get_resource: app_config}
      server: vm2
      input_values: {address: {get_attr: [base, address]}, password: {get_param: db_password}}
  worker:
    type: OS::Heat::SoftwareDeployment
    properties:
      config: {get_resource: app_config}
      server: vm3
      input_values: {address: {get_attr: [base, address]}, password: {get_param: db_password}}
  "<img src=x onerror=window.pwned=1>":
    type: OS::Heat::None
    depends_on: [base]
  handle: {type: OS::Heat::WaitConditionHandle}
  done:
    type: OS::Heat::WaitCondition
    depends_on: [app, worker]
    properties: {handle: {get_resource: handle}, count: 1, timeout: 600}
"##;

fn phase_of(name: &str) -> String {
    format!(
        "const node = document.querySelector('#graph g.node[data-name=\"{name}\"]'); \
         return node ? node.getAttribute('class') : null;"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_web_view_follows_a_stack_converging_without_a_reload() {
    if let Some(reason) = unavailable() {
        eprintln!("SKIPPED: the web view's browser test needs Chromium and chromedriver: {reason}");
        return;
    }
    let shim = Shim::start().await;
    let fleet = Fleet::start(&shim, &["vm1"], &AgentSettings::default()).await;
    let vm2 = shim.cli_json(&["server", "add", "vm2", "--format", "json"]).await;
    let vm3 = shim.cli_json(&["server", "add", "vm3", "--format", "json"]).await;
    let template = shim.write_template("web.yaml", TEMPLATE);
    shim.cli_ok(&["stack", "create", "web", "--template", template.to_str().expect("utf-8")]).await;

    let dir = tempfile::Builder::new().prefix("anneal-web-view-").tempdir().expect("temp dir");
    let shots = std::env::var_os("ANNEAL_SCREENSHOT_DIR").map_or_else(|| dir.path().to_path_buf(), PathBuf::from);
    let browser = Browser::start(dir.path()).await;
    let ui = format!("{}/ui/", shim.url());
    browser.navigate(&ui).await;
    browser.wait_for("return !document.getElementById('login').hidden", "the login form shows", secs(20)).await;
    let token = std::fs::read_to_string(shim.token_file()).expect("the admin token");
    browser.type_into("#token", "not the token").await;
    browser.click("#login-form button").await;
    browser
        .wait_for(
            "return document.getElementById('login-error').textContent.includes('not the admin token')",
            "a wrong token is refused",
            secs(10),
        )
        .await;
    browser.type_into("#token", token.trim()).await;
    browser.click("#login-form button").await;
    browser
        .wait_for(
            "return [...document.querySelectorAll('#stacks a')].some(a => a.textContent === 'web')",
            "the stack list shows web",
            secs(20),
        )
        .await;
    let url: Value = browser.execute("return location.href", json!([])).await;
    assert!(!url.as_str().unwrap_or("").contains(token.trim()), "the token is never in the URL: {url}");
    let cookies: Value = browser.execute("return document.cookie", json!([])).await;
    assert_eq!(cookies, "", "the session cookie is HttpOnly");

    browser.click("#stacks a").await;
    browser
        .wait_for(
            "return document.querySelectorAll('#graph g.node').length === 8",
            "the graph draws every resource",
            secs(20),
        )
        .await;
    browser.wait_for(&complete("base"), "vm1's agent completes base", secs(30)).await;
    let loaded_at = browser.execute("return window.annealLoadedAt", json!([])).await;
    assert_eq!(browser.execute("return location.pathname", json!([])).await, "/ui/stacks/web");
    // A resource named like markup is drawn as text, and nothing of it runs.
    let hostile = browser
        .execute(
            "return [...document.querySelectorAll('#graph g.node')].map(g => g.getAttribute('data-name'))",
            json!([]),
        )
        .await;
    assert!(hostile.to_string().contains("<img src=x onerror=window.pwned=1>"), "{hostile}");
    assert_eq!(browser.execute("return document.querySelectorAll('#graph img').length", json!([])).await, 0);
    assert_eq!(browser.execute("return window.pwned === undefined", json!([])).await, true);
    assert!(class(&browser, "app").await.contains("phase-in_progress"), "vm2 has no agent yet");
    assert!(class(&browser, "done").await.contains("phase-waiting"));
    std::fs::write(shots.join("web-view-before.png"), browser.screenshot().await).expect("a screenshot");

    for (server, credentials, deployment) in [("vm2", &vm2, "app"), ("vm3", &vm3, "worker")] {
        signal(&shim, server, credentials, deployment).await;
    }
    for name in ["app", "worker"] {
        browser.wait_for(&complete(name), &format!("{name} turns complete live"), secs(20)).await;
    }
    assert_eq!(browser.execute("return window.annealLoadedAt", json!([])).await, loaded_at, "no reload");
    assert!(class(&browser, "done").await.contains("phase-in_progress"), "the wait condition now waits for its handle");

    browser.click("#graph g.node[data-name=\"app\"]").await;
    browser.wait_for("return !document.getElementById('panel').hidden && document.getElementById('panel-name').textContent === 'app'", "the side panel shows app", secs(10)).await;
    let properties = browser.execute("return document.getElementById('panel-properties').textContent", json!([])).await;
    let properties = properties.as_str().unwrap_or("");
    assert!(
        properties.contains("******") && !properties.contains("s3cr3t-value"),
        "the hidden parameter is masked: {properties}"
    );
    // The inputs as vm2 got them: the address from vm1's output, the hidden password masked.
    let inputs = browser.execute("return document.getElementById('panel-inputs').textContent", json!([])).await;
    let inputs = inputs.as_str().unwrap_or("");
    assert!(inputs.contains("address = \"10.0.0.1\"") && inputs.contains("password = \"******\""), "{inputs}");
    assert!(inputs.contains("deploy_signal_id = \"******\"") && !inputs.contains("s3cr3t-value"), "{inputs}");
    let facts = browser.execute("return document.getElementById('panel-facts').textContent", json!([])).await;
    assert!(facts.as_str().unwrap_or("").contains("vm2"), "{facts}");
    std::fs::write(shots.join("web-view-after.png"), browser.screenshot().await).expect("a screenshot");

    browser.click("header nav a[href='/ui/servers']").await;
    browser
        .wait_for(
            "return document.querySelectorAll('#servers tbody tr').length === 3",
            "the servers view lists vm1 to vm3",
            secs(10),
        )
        .await;
    let servers = browser.execute("return document.querySelector('#servers tbody').innerText", json!([])).await;
    let servers = servers.as_str().unwrap_or("");
    assert!(
        servers.contains("web / app") && servers.contains("web / worker") && servers.contains("web / base"),
        "{servers}"
    );

    // A stack's page opens from its own URL too (the session cookie carries over).
    browser.navigate(&format!("{}/ui/stacks/web", shim.url())).await;
    browser.wait_for(&complete("worker"), "the stack's own URL draws its graph", secs(20)).await;

    // Logging out ends the session on the server: a copy of the cookie opens nothing more.
    let session = browser.cookie("anneal_ui").await.expect("the session cookie");
    let copied = format!("anneal_ui={session}");
    let stacks = format!("{}/ui/api/stacks", shim.url());
    let client = anneal_tests::http_client();
    let before = client.get(&stacks).header("cookie", &copied).send().await.expect("the stacks");
    assert_eq!(before.status(), 200, "the copied cookie works while the session lasts");
    browser.click("#logout").await;
    browser.wait_for("return !document.getElementById('login').hidden", "the login form shows again", secs(10)).await;
    let after = client.get(&stacks).header("cookie", &copied).send().await.expect("the stacks");
    assert_eq!(after.status(), 401, "the page's logout revoked the session (its POST passed the cross-site checks)");
    drop(browser);
    drop(fleet);
}

const COMPUTED: &str = r##"
heat_template_version: 2018-08-31
parameters:
  db_password: {type: string, hidden: true, default: C0mputed-Secret}
resources:
  dsn:
    type: OS::Heat::Value
    properties:
      value: {str_replace: {template: "postgres://app:PW@db", params: {PW: {get_param: db_password}}}}
  config:
    type: OS::Heat::SoftwareConfig
    properties:
      group: script
      inputs: [{name: dsn}, {name: note}]
      config: {str_replace: {template: "#!/bin/sh\necho PW\n", params: {PW: {get_param: db_password}}}}
  deploy:
    type: OS::Heat::SoftwareDeployment
    properties:
      config: {get_resource: config}
      server: vm1
      input_values: {dsn: {get_attr: [dsn, value]}, note: plain-note}
"##;

#[tokio::test]
async fn the_view_routes_mask_values_computed_from_a_hidden_parameter() {
    let shim = Shim::start().await;
    shim.cli_ok(&["server", "add", "vm1", "--format", "json"]).await;
    let template = shim.write_template("computed.yaml", COMPUTED);
    shim.cli_ok(&["stack", "create", "computed", "--template", template.to_str().expect("utf-8")]).await;
    let token = std::fs::read_to_string(shim.token_file()).expect("the admin token");
    let client = anneal_tests::http_client();
    let get = |path: String| {
        let request = client.get(format!("{}{path}", shim.url())).bearer_auth(token.trim());
        async move {
            let response = request.send().await.expect(&path);
            assert_eq!(response.status(), 200, "{path}");
            response.text().await.expect("a body")
        }
    };
    let deploy = anneal_tests::wait_until(secs(20), "deploy is published", || async {
        let text = get("/ui/api/stacks/computed/nodes/deploy".to_string()).await;
        text.contains("\"inputs\"").then_some(text)
    })
    .await;
    let detail: Value = serde_json::from_str(&deploy).expect("JSON");
    let inputs: Vec<String> = detail["inputs"]
        .as_array()
        .expect("inputs")
        .iter()
        .map(|input| format!("{} = {}", input["name"].as_str().unwrap_or(""), input["value"]))
        .collect();
    assert!(inputs.contains(&"dsn = \"******\"".to_string()), "{inputs:?}");
    assert!(inputs.contains(&"note = \"plain-note\"".to_string()), "what is not secret is shown: {inputs:?}");
    for path in [
        "/ui/api/stacks/computed/nodes/deploy",
        "/ui/api/stacks/computed/nodes/dsn",
        "/ui/api/stacks/computed/nodes/config",
        "/ui/api/stacks/computed",
        "/v1/stacks/computed",
        "/v1/stacks/computed/events",
    ] {
        let body = get(path.to_string()).await;
        assert!(!body.contains("C0mputed-Secret"), "{path} shows the hidden value: {body}");
    }
    assert!(get("/ui/api/stacks/computed/nodes/dsn".to_string()).await.contains("\"value\":\"******\""));
}

/// A script that is true once the node `name` is drawn complete.
fn complete(name: &str) -> String {
    format!(
        "const node = document.querySelector('#graph g.node[data-name=\"{name}\"]'); \
         return !!node && node.getAttribute('class').includes('phase-complete');"
    )
}

fn secs(seconds: u64) -> Duration {
    Duration::from_secs(seconds)
}

async fn class(browser: &Browser, name: &str) -> String {
    browser.execute(&phase_of(name), json!([])).await.as_str().unwrap_or("").to_string()
}

/// Signals `deployment` as its server's agent would, with the URL from the server's metadata.
async fn signal(shim: &Shim, server: &str, credentials: &Value, deployment: &str) {
    let client = anneal_tests::http_client();
    let token = credentials["token"].as_str().expect("a server token");
    let response = client
        .get(format!("{}/v1/servers/{server}/metadata", shim.url()))
        .bearer_auth(token)
        .send()
        .await
        .expect("metadata");
    let metadata: Value = serde_json::from_str(&response.text().await.expect("a body")).expect("JSON");
    let entry = metadata["deployments"]
        .as_array()
        .and_then(|entries| entries.iter().find(|entry| entry["name"] == deployment))
        .unwrap_or_else(|| panic!("{deployment} in {metadata}"));
    let url = entry["inputs"]
        .as_array()
        .and_then(|inputs| inputs.iter().find(|input| input["name"] == "deploy_signal_id"))
        .and_then(|input| input["value"].as_str())
        .expect("deploy_signal_id");
    let answer =
        client.post(url).body(json!({"deploy_status_code": 0, "deploy_stdout": "ok"}).to_string()).send().await;
    assert_eq!(answer.expect("signal").status(), 200);
}
