//! The real `anneal-shim` binary on a loopback port with a temp database, administered through
//! its own CLI and driven by HTTP clients acting as agents: a stack over three servers (db ->
//! app via get_attr -> web, web signalling a wait condition with the handle's `curl_cli` run in a
//! shell) converges; the shim restarts in the middle and loses nothing; an update reruns only
//! the changed deployment; delete removes the stack. Also `--version` and a refused downgrade.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

const BINARY: &str = env!("CARGO_BIN_EXE_anneal-shim");

const TEMPLATE: &str = r##"
heat_template_version: 2018-08-31
parameters:
  web_message: {type: string, default: hello}
resources:
  db_config:
    type: OS::Heat::SoftwareConfig
    properties: {group: script, outputs: [{name: db_host}], config: "#!/bin/sh\n"}
  db_deploy:
    type: OS::Heat::SoftwareDeployment
    properties: {config: {get_resource: db_config}, server: db1, actions: [CREATE, UPDATE, DELETE]}
  app_config:
    type: OS::Heat::SoftwareConfig
    properties: {group: script, inputs: [{name: db_host}], outputs: [{name: app_url}], config: "#!/bin/sh\n"}
  app_deploy:
    type: OS::Heat::SoftwareDeployment
    properties:
      config: {get_resource: app_config}
      server: app1
      input_values: {db_host: {get_attr: [db_deploy, db_host]}}
  handle: {type: OS::Heat::WaitConditionHandle}
  wait:
    type: OS::Heat::WaitCondition
    properties: {handle: {get_resource: handle}, timeout: 600}
  web_config:
    type: OS::Heat::SoftwareConfig
    properties:
      group: script
      inputs: [{name: app_url}, {name: wc_notify}]
      config: {str_replace: {template: "#!/bin/sh\necho MSG\n", params: {MSG: {get_param: web_message}}}}
  web_deploy:
    type: OS::Heat::SoftwareDeployment
    properties:
      config: {get_resource: web_config}
      server: web1
      input_values: {app_url: {get_attr: [app_deploy, app_url]}, wc_notify: {get_attr: [handle, curl_cli]}}
outputs:
  app_url: {value: {get_attr: [app_deploy, app_url]}}
"##;

/// A running shim; its process group is killed when dropped.
struct Shim {
    child: Child,
    url: String,
}

impl Shim {
    async fn start(dir: &Path) -> Shim {
        // serve refuses a database directory others may enter (docs/security.md).
        std::fs::set_permissions(dir, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
        let mut child = Command::new(BINARY)
            .args(["serve", "--listen", "127.0.0.1:0", "--db"])
            .arg(format!("sqlite://{}", dir.join("shim.db").display()))
            .env_remove("ANNEAL_TOKEN")
            .stdout(Stdio::piped())
            .stderr(Stdio::from(std::fs::File::create(dir.join("shim.log")).unwrap()))
            .process_group(0)
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let mut lines = BufReader::new(stdout).lines();
        let line = tokio::time::timeout(Duration::from_secs(30), lines.next_line()).await.unwrap().unwrap().unwrap();
        let url = line.split_whitespace().find(|word| word.starts_with("http://")).unwrap().to_string();
        assert!(line.contains(&dir.join("admin.token").display().to_string()), "serve prints the token file: {line}");
        Shim { child, url }
    }

    async fn stop(mut self) {
        let pid = nix::unistd::Pid::from_raw(self.child.id().unwrap() as i32);
        nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).unwrap();
        let status = tokio::time::timeout(Duration::from_secs(15), self.child.wait()).await.unwrap().unwrap();
        assert!(status.success(), "clean shutdown on SIGTERM: {status:?}");
    }
}

impl Drop for Shim {
    fn drop(&mut self) {
        if let Some(pid) = self.child.id() {
            let _ = nix::sys::signal::killpg(nix::unistd::Pid::from_raw(pid as i32), nix::sys::signal::Signal::SIGKILL);
        }
    }
}

/// Runs the shim's CLI against `shim`; returns (exit code, stdout, stderr).
async fn cli(shim: &Shim, dir: &Path, args: &[&str]) -> (i32, String, String) {
    let output = Command::new(BINARY)
        .args(args)
        .args(["--url", &shim.url, "--token-file"])
        .arg(dir.join("admin.token"))
        .env_remove("ANNEAL_TOKEN")
        .env_remove("ANNEAL_URL")
        .process_group(0)
        .kill_on_drop(true)
        .output();
    let output = tokio::time::timeout(Duration::from_secs(60), output).await.unwrap().unwrap();
    let text = |bytes: &[u8]| String::from_utf8_lossy(bytes).into_owned();
    (output.status.code().unwrap_or(-1), text(&output.stdout), text(&output.stderr))
}

/// An agent's view: the server's credentials and an HTTP client.
struct Agent {
    credentials: Value,
    http: reqwest::Client,
}

impl Agent {
    async fn register(shim: &Shim, dir: &Path, name: &str) -> Agent {
        let (code, stdout, stderr) = cli(shim, dir, &["server", "add", name, "--format", "json"]).await;
        assert_eq!(code, 0, "{stderr}");
        let _ = rustls::crypto::ring::default_provider().install_default();
        Agent { credentials: serde_json::from_str(&stdout).unwrap(), http: reqwest::Client::new() }
    }

    fn metadata_url(&self, base: &str) -> String {
        rebase(self.credentials["metadata_url"].as_str().unwrap(), base)
    }

    async fn fetch(&self, base: &str, etag: Option<&str>, wait: Option<u64>) -> reqwest::Response {
        let mut url = self.metadata_url(base);
        if let Some(wait) = wait {
            url.push_str(&format!("?wait={wait}"));
        }
        let mut request = self.http.get(url).bearer_auth(self.credentials["token"].as_str().unwrap());
        if let Some(etag) = etag {
            request = request.header("If-None-Match", etag);
        }
        request.send().await.unwrap()
    }

    async fn deployments(&self, shim: &Shim) -> Vec<Value> {
        let body: Value = serde_json::from_str(&self.fetch(&shim.url, None, None).await.text().await.unwrap()).unwrap();
        body["deployments"].as_array().unwrap().clone()
    }

    async fn signal(&self, shim: &Shim, deployment: &Value, body: Value) {
        let url = rebase(input(deployment, "deploy_signal_id").as_str().unwrap(), &shim.url);
        let response =
            self.http.post(url).header("Content-Type", "application/json").body(body.to_string()).send().await.unwrap();
        assert!(response.status().is_success(), "{}", response.status());
    }
}

/// A URL the shim printed before a restart (old port) moved onto `base`, keeping its path.
fn rebase(url: &str, base: &str) -> String {
    format!("{base}{}", &url[url.find("/v1/").unwrap()..])
}

fn input<'a>(deployment: &'a Value, name: &str) -> &'a Value {
    deployment["inputs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|input| input["name"] == name)
        .map(|input| &input["value"])
        .unwrap()
}

fn write_template(dir: &Path) -> PathBuf {
    let path = dir.join("stack.yaml");
    std::fs::write(&path, TEMPLATE).unwrap();
    path
}

#[tokio::test]
async fn three_server_stack_through_the_real_binary_with_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let shim = Shim::start(root).await;
    let db = Agent::register(&shim, root, "db1").await;
    let app = Agent::register(&shim, root, "app1").await;
    let web = Agent::register(&shim, root, "web1").await;
    let template = write_template(root);
    let template_arg = template.to_str().unwrap();
    let (code, _, stderr) = cli(&shim, root, &["stack", "create", "s", "--template", template_arg]).await;
    assert_eq!(code, 0, "{stderr}");

    // app1 long-polls while db1 signals: it wakes with its new deployment.
    let first = app.fetch(&shim.url, None, None).await;
    let etag = first.headers()["etag"].to_str().unwrap().to_string();
    assert_eq!(first.headers()["x-anneal-long-poll"], "60");
    let shim_url = shim.url.clone();
    let waiting = tokio::spawn({
        let app_credentials = app.credentials.clone();
        let etag = etag.clone();
        async move {
            let agent = Agent { credentials: app_credentials, http: reqwest::Client::new() };
            let response = agent.fetch(&shim_url, Some(&etag), Some(30)).await;
            (response.status().as_u16(), Instant::now(), response.text().await.unwrap())
        }
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    let db_deployments = db.deployments(&shim).await;
    let signalled = Instant::now();
    db.signal(&shim, &db_deployments[0], json!({"db_host": "10.0.0.5", "deploy_status_code": 0})).await;
    let (status, woke, body) = waiting.await.unwrap();
    assert_eq!(status, 200, "the long-poll answered with the change");
    assert!(
        woke.duration_since(signalled) < Duration::from_secs(2),
        "woke {:?} after the signal",
        woke.duration_since(signalled)
    );
    let body: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(input(&body["deployments"][0], "db_host"), "10.0.0.5");

    // Restart the shim in the middle: everything continues from the store.
    shim.stop().await;
    let shim = Shim::start(root).await;
    let app_deployments = app.deployments(&shim).await;
    assert_eq!(app_deployments.len(), 1);
    app.signal(&shim, &app_deployments[0], json!({"app_url": "http://app1:80"})).await;
    let web_deployments = web.deployments(&shim).await;
    let printed = input(&web_deployments[0], "wc_notify").as_str().unwrap();
    let (command, endpoint) = printed.split_at(printed.find("http://").unwrap());
    let curl_cli = format!("{command}{}", rebase(endpoint, &shim.url));
    let shell = format!("{curl_cli} --silent --fail --data-binary '{{\"status\": \"SUCCESS\", \"data\": \"ready\"}}'");
    let curl = Command::new("sh").args(["-c", &shell]).output().await.unwrap();
    assert!(curl.status.success(), "curl_cli works pasted into a shell: {}", String::from_utf8_lossy(&curl.stderr));
    web.signal(&shim, &web_deployments[0], json!({"deploy_status_code": 0})).await;

    let (code, stdout, stderr) = cli(&shim, root, &["stack", "show", "s", "--json"]).await;
    assert_eq!(code, 0, "{stderr}");
    let detail: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(detail["status"], "CREATE_COMPLETE", "{detail}");
    assert_eq!(detail["outputs"][0]["value"], "http://app1:80");

    // Update: only the changed deployment gets a new derived id.
    let ids = |deployments: &[Value]| deployments.iter().map(|d| d["id"].clone()).collect::<Vec<_>>();
    let (db_before, app_before) = (ids(&db.deployments(&shim).await), ids(&app.deployments(&shim).await));
    let (code, _, stderr) =
        cli(&shim, root, &["stack", "update", "s", "--template", template_arg, "--param", "web_message=bye"]).await;
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(ids(&db.deployments(&shim).await), db_before);
    assert_eq!(ids(&app.deployments(&shim).await), app_before);
    let web_deployments = web.deployments(&shim).await;
    assert_eq!(input(&web_deployments[0], "deploy_action"), "UPDATE");
    web.signal(&shim, &web_deployments[0], json!({})).await;
    let (code, stdout, _) = cli(&shim, root, &["stack", "show", "s", "--json"]).await;
    assert_eq!(code, 0);
    assert_eq!(serde_json::from_str::<Value>(&stdout).unwrap()["status"], "UPDATE_COMPLETE");

    // Delete with --wait: db1 gets its DELETE action; signalling it finishes the delete.
    let deleting = tokio::spawn({
        let url = shim.url.clone();
        let token_file = root.join("admin.token");
        async move {
            let output = Command::new(BINARY)
                .args(["stack", "delete", "s", "--wait", "--timeout", "60", "--url", &url, "--token-file"])
                .arg(token_file)
                .process_group(0)
                .kill_on_drop(true)
                .output()
                .await
                .unwrap();
            output.status.code()
        }
    });
    let mut delete_action = None;
    for _ in 0..100 {
        let deployments = db.deployments(&shim).await;
        delete_action = deployments.into_iter().find(|d| input(d, "deploy_action") == "DELETE");
        if delete_action.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    db.signal(&shim, &delete_action.expect("DELETE action published"), json!({})).await;
    assert_eq!(tokio::time::timeout(Duration::from_secs(60), deleting).await.unwrap().unwrap(), Some(0));
    assert!(db.deployments(&shim).await.is_empty());
    shim.stop().await;
}

#[tokio::test]
async fn access_is_checked_and_bad_input_gets_a_clear_4xx() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let shim = Shim::start(root).await;
    let db = Agent::register(&shim, root, "db1").await;
    let other = Agent::register(&shim, root, "app1").await;
    let http = reqwest::Client::new();
    let metadata = db.metadata_url(&shim.url);
    let status = |response: reqwest::Response| response.status().as_u16();
    assert_eq!(status(http.get(&metadata).send().await.unwrap()), 401);
    let foreign = http.get(&metadata).bearer_auth(other.credentials["token"].as_str().unwrap()).send().await.unwrap();
    assert_eq!(status(foreign), 403, "a server token reads only its own document");
    let stock = http.get(db.credentials["request_url"].as_str().unwrap()).send().await.unwrap();
    assert_eq!(stock.status().as_u16(), 200, "the os-collect-config request URL serves the document");
    assert!(stock.headers().contains_key("last-modified"));
    assert_eq!(status(http.get(format!("{}/v1/stacks", shim.url)).send().await.unwrap()), 401);

    let bad = root.join("bad.yaml");
    std::fs::write(&bad, "heat_template_version: 2018-08-31\nresources:\n  x: {type: OS::Nova::Server}\n").unwrap();
    let (code, _, stderr) = cli(&shim, root, &["stack", "create", "b", "--template", bad.to_str().unwrap()]).await;
    assert_eq!(code, 1);
    assert!(stderr.contains("OS::Nova::Server"), "the error names the problem: {stderr}");
    let broken = root.join("broken.yaml");
    std::fs::write(&broken, "heat_template_version: 2018-08-31\nresources:\n  x: [unclosed\n").unwrap();
    let (code, _, stderr) = cli(&shim, root, &["stack", "create", "b", "--template", broken.to_str().unwrap()]).await;
    assert_eq!(code, 1);
    assert!(stderr.contains("line"), "YAML errors give the line: {stderr}");
    let token = std::fs::read_to_string(root.join("admin.token")).unwrap();
    let huge = http
        .post(format!("{}/v1/stacks", shim.url))
        .bearer_auth(token.trim())
        .body(vec![b' '; 2 * 1024 * 1024])
        .send()
        .await
        .unwrap();
    assert_eq!(huge.status().as_u16(), 413);
    // Heat's show_nested is true or false; anything else is refused naming it, before a plan.
    let body = json!({"template": "heat_template_version: 2018-08-31\n"}).to_string();
    let preview = format!("{}/v1/stacks/fresh/preview?show_nested=maybe", shim.url);
    // A client of its own: the shim closed the connection the refused 2 MiB body came on.
    let fresh = reqwest::Client::new();
    let refused = fresh.post(&preview).bearer_auth(token.trim()).body(body).send().await.unwrap();
    assert_eq!(refused.status().as_u16(), 400);
    let answer: Value = serde_json::from_str(&refused.text().await.unwrap()).unwrap();
    let message = answer["error"]["message"].as_str().unwrap_or_default();
    assert!(message.starts_with("Unrecognized value \"maybe\" for \"show_nested\""), "{answer}");
    shim.stop().await;
}

/// A bad `ANNEAL_LOG` is not silently ignored: the shim warns exactly as the agent does (both set
/// logging up through anneal-runtime), logs at info, and the command still runs.
#[tokio::test]
async fn a_bad_log_filter_warns_and_logs_at_info() {
    let output = Command::new(BINARY)
        .args(["server", "list", "--url", "http://127.0.0.1:1"])
        .env("ANNEAL_LOG", "info,anneal_shim=loud")
        .env("ANNEAL_TOKEN", "not-a-real-token")
        .env_remove("ANNEAL_URL")
        .process_group(0)
        .kill_on_drop(true)
        .output();
    let output = tokio::time::timeout(Duration::from_secs(60), output).await.unwrap().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "nothing listens on port 1: {stderr}");
    assert!(stderr.contains("ANNEAL_LOG is not a valid filter; logging at info"), "{stderr}");
    assert!(stderr.contains("cannot reach anneal-shim"), "{stderr}");
}

#[test]
fn version_names_the_release_the_commit_and_the_database_schemas() {
    let output = std::process::Command::new(BINARY).arg("--version").output().expect("run --version");
    assert!(output.status.success());
    let text = String::from_utf8_lossy(&output.stdout);
    let release = format!("anneal-shim {} (commit ", env!("CARGO_PKG_VERSION"));
    let schemas = format!(
        "; database schema {} on SQLite, {} on PostgreSQL)",
        anneal_shim::store::SqliteStore::schema_version(),
        anneal_shim::store::PgStore::schema_version()
    );
    assert!(text.starts_with(&release) && text.trim_end().ends_with(&schemas), "{text}");
}

/// A downgrade: `serve` on a database a newer anneal-shim migrated refuses to start (exit 1),
/// naming both schema versions and this release, and leaves the database as it was.
#[test]
fn serve_refuses_a_database_a_newer_release_migrated() {
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::set_permissions(dir.path(), std::os::unix::fs::PermissionsExt::from_mode(0o700)).expect("chmod");
    let database = dir.path().join("shim.db");
    drop(anneal_shim::store::SqliteStore::open(&database).expect("a current database"));
    let newer = anneal_shim::store::SqliteStore::schema_version() + 1;
    let connection = rusqlite::Connection::open(&database).expect("open it");
    connection.execute("INSERT INTO schema_version (version, applied_at) VALUES (?1, 0)", [newer]).expect("newer");
    drop(connection);
    let output = std::process::Command::new(BINARY)
        .args(["serve", "--listen", "127.0.0.1:0", "--db"])
        .arg(format!("sqlite://{}", database.display()))
        .env_remove("ANNEAL_TOKEN")
        .output()
        .expect("run serve");
    let said = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{said}");
    let expected = format!(
        "cannot use database schema version {newer}: a newer anneal-shim wrote it, and this one ({}) knows schema \
         versions up to {}; downgrading is not supported",
        env!("CARGO_PKG_VERSION"),
        newer - 1
    );
    assert!(said.contains(&expected), "{said}");
    let connection = rusqlite::Connection::open(&database).expect("open it again");
    let kept: u32 = connection.query_row("SELECT MAX(version) FROM schema_version", [], |row| row.get(0)).unwrap();
    assert_eq!(kept, newer, "left as it was");
}

const HIDDEN_TEMPLATE: &str = r##"heat_template_version: 2018-08-31
# Comments and layout survive: `stack template` prints the text as sent.
parameters:
  db_password: {type: string, hidden: true}
  greeting: {type: string, default: hello}
resources:
  config:
    type: OS::Heat::SoftwareConfig
    properties:
      group: script
      config: {str_replace: {template: "#!/bin/sh\necho GREETING PASSWORD\n", params: {GREETING: {get_param: greeting}, PASSWORD: {get_param: db_password}}}}
  deploy:
    type: OS::Heat::SoftwareDeployment
    properties: {config: {get_resource: config}, server: db1}
"##;

/// Runs the CLI and expects exit 0; answers stdout.
async fn cli_ok(shim: &Shim, dir: &Path, args: &[&str]) -> String {
    let (code, stdout, stderr) = cli(shim, dir, args).await;
    assert_eq!(code, 0, "{args:?}: {stderr}");
    stdout
}

async fn stack_status(shim: &Shim, dir: &Path, name: &str) -> Value {
    serde_json::from_str::<Value>(&cli_ok(shim, dir, &["stack", "show", name, "--json"]).await).unwrap()["status"]
        .clone()
}

/// `stack template` prints the stored template (byte for byte as sent, or resolved by the
/// environment as JSON), `stack environment` the values in effect with the hidden one masked;
/// both read back into an update that changes nothing. Unknown stacks: 404, exit 1.
#[tokio::test]
async fn stack_template_and_environment_read_back_into_an_update_that_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let shim = Shim::start(root).await;
    let db = Agent::register(&shim, root, "db1").await;
    std::fs::write(root.join("t.yaml"), HIDDEN_TEMPLATE).unwrap();
    let template = root.join("t.yaml");
    let template = template.to_str().unwrap();
    let params = ["--param", "db_password=s3cret", "--param", "greeting=hi"];
    cli_ok(&shim, root, &[&["stack", "create", "s", "--template", template][..], &params].concat()).await;
    let deployments = db.deployments(&shim).await;
    db.signal(&shim, &deployments[0], json!({"deploy_status_code": 0})).await;
    assert_eq!(stack_status(&shim, root, "s").await, "CREATE_COMPLETE");

    let printed = cli_ok(&shim, root, &["stack", "template", "s"]).await;
    assert_eq!(printed, HIDDEN_TEMPLATE, "the text as sent, byte for byte");
    let environment: Value = serde_json::from_str(&cli_ok(&shim, root, &["stack", "environment", "s"]).await).unwrap();
    assert_eq!(environment, json!({"parameters": {"db_password": "******", "greeting": "hi"}}));
    let token = std::fs::read_to_string(root.join("admin.token")).unwrap();
    let http = reqwest::Client::new();
    let raw = http.get(format!("{}/v1/stacks/s/environment", shim.url)).bearer_auth(token.trim()).send().await.unwrap();
    assert!(!raw.text().await.unwrap().contains("s3cret"), "the API never answers the hidden value");
    let api = http.get(format!("{}/v1/stacks/s/template", shim.url)).bearer_auth(token.trim()).send().await.unwrap();
    let api: Value = serde_json::from_str(&api.text().await.unwrap()).unwrap();
    assert_eq!(api, json!({"template": HIDDEN_TEMPLATE}));

    // The printed template, with the hidden value given again, updates to no change.
    std::fs::write(root.join("back.yaml"), &printed).unwrap();
    let back = root.join("back.yaml");
    let update = ["stack", "update", "s", "--template", back.to_str().unwrap()];
    cli_ok(&shim, root, &[&update[..], &params].concat()).await;
    assert_eq!(stack_status(&shim, root, "s").await, "UPDATE_COMPLETE", "nothing to run: complete at once");
    assert_eq!(db.deployments(&shim).await, deployments, "the same deployment, not published again");

    // With an environment (`-e`) the template it resolved is stored, as JSON: it updates too,
    // and the environment's hidden value is masked as well.
    let registry = "resource_registry:\n  My::Config: OS::Heat::SoftwareConfig\nparameters: {db_password: x}\n";
    std::fs::write(root.join("registry.yaml"), registry).unwrap();
    let aliased = HIDDEN_TEMPLATE.replace("OS::Heat::SoftwareConfig", "My::Config").replace("db1", "app1");
    std::fs::write(root.join("aliased.yaml"), &aliased).unwrap();
    let app = Agent::register(&shim, root, "app1").await;
    let (aliased, registry) = (root.join("aliased.yaml"), root.join("registry.yaml"));
    let (aliased, registry) = (aliased.to_str().unwrap(), registry.to_str().unwrap());
    cli_ok(&shim, root, &["stack", "create", "a", "--template", aliased, "-e", registry]).await;
    let app_deployments = app.deployments(&shim).await;
    app.signal(&shim, &app_deployments[0], json!({"deploy_status_code": 0})).await;
    let environment: Value = serde_json::from_str(&cli_ok(&shim, root, &["stack", "environment", "a"]).await).unwrap();
    assert_eq!(environment, json!({"parameters": {"db_password": "******", "greeting": "hello"}}));
    let resolved = cli_ok(&shim, root, &["stack", "template", "a"]).await;
    let resolved_json: Value = serde_json::from_str(&resolved).expect("the resolved template is JSON");
    assert_eq!(resolved_json["resources"]["config"]["type"], "OS::Heat::SoftwareConfig");
    std::fs::write(root.join("resolved.json"), &resolved).unwrap();
    let resolved = root.join("resolved.json");
    let update = ["stack", "update", "a", "--template", resolved.to_str().unwrap(), "--param", "db_password=x"];
    cli_ok(&shim, root, &update).await;
    assert_eq!(stack_status(&shim, root, "a").await, "UPDATE_COMPLETE");
    assert_eq!(app.deployments(&shim).await, app_deployments);

    // Nested stacks and resource groups run expanded: the template as sent is printed, never
    // the expansion.
    let group = "heat_template_version: 2018-08-31\nresources:\n  g:\n    type: OS::Heat::ResourceGroup\n    \
                 properties: {count: 1, resource_def: {type: OS::Heat::SoftwareConfig, properties: {config: x}}}\n";
    std::fs::write(root.join("group.yaml"), group).unwrap();
    cli_ok(&shim, root, &["stack", "create", "g", "--template", root.join("group.yaml").to_str().unwrap()]).await;
    assert_eq!(cli_ok(&shim, root, &["stack", "template", "g"]).await, group);

    for command in ["template", "environment"] {
        let (code, stdout, stderr) = cli(&shim, root, &["stack", command, "nosuch"]).await;
        assert_eq!((code, stdout.as_str()), (1, ""), "{stderr}");
        assert!(stderr.contains("stack nosuch not found"), "{stderr}");
    }
    shim.stop().await;
}
