//! A real OpenStack Heat + Keystone for the tests, and Heat's REST API as its admin.
//!
//! `RealHeat::shared()` runs `tests/peers/real-heat/ctl.py start <target>/real-heat/shared`
//! with the python3 of the heat venv (`tests/peers/real-heat/install.sh`): one Keystone and one
//! Heat process (engine, heat-api and heat-api-cfn together) on loopback ports picked at start,
//! shared by every test of a run: the first test starts them, the others find them healthy
//! through the state file and reuse them (ctl.py holds a lock while it decides). scripts/test
//! stops them with `tests/peers/real-heat/ctl.sh stop-all` when the tests end.
//! `RealHeat::private()` is an instance of one test alone, for a test that takes a service down.
//! `RealHeat::admin()` is a Keystone token of the bootstrap admin and the orchestration endpoint
//! of its project; `HeatApi` creates, updates and reads stacks with it. Every wait has a deadline
//! and names what it waited for.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use tokio::process::Command;

use crate::peers;
use crate::process::run_command;
use crate::wait::wait_until;

/// How long a fresh start may take (measured: 19 s on an idle 2-core machine).
const START_LIMIT: Duration = Duration::from_secs(420);
/// Each request to Heat or Keystone.
const REQUEST_LIMIT: Duration = Duration::from_secs(60);
/// How many times a read is tried before its answer fails the test (see `HeatApi::expect`).
const READ_ATTEMPTS: u32 = 6;

/// The running instance, as ctl.py's state file describes it.
#[derive(Debug, Clone)]
pub struct RealHeat {
    state: Value,
}

impl RealHeat {
    /// The run's shared instance, started when no healthy one is running.
    pub async fn shared() -> RealHeat {
        RealHeat::start_in(&state_dir().join("shared")).await
    }

    /// An instance of the calling test alone (for a test that stops or pauses a service), in
    /// `<target>/real-heat/private-<name>`; stopped when the value drops (and by `ctl.sh stop-all`).
    pub async fn private(name: &str) -> PrivateRealHeat {
        let dir = state_dir().join(format!("private-{name}"));
        PrivateRealHeat { heat: RealHeat::start_in(&dir).await, dir }
    }

    async fn start_in(dir: &Path) -> RealHeat {
        let output = run_command(ctl_command("start", dir), START_LIMIT).await;
        let stdout = output.expect_success("tests/peers/real-heat/ctl.py start (a real Keystone + Heat)");
        let state: Value = serde_json::from_str(&stdout)
            .unwrap_or_else(|error| panic!("ctl.py start printed no state ({error}): {stdout}"));
        RealHeat { state }
    }

    /// The process id of `service` (`keystone` or `heat`), the leader of its own process group.
    pub fn pid(&self, service: &str) -> i32 {
        let pid = self.state["pids"][service].as_i64();
        pid.unwrap_or_else(|| panic!("ctl.py's state has no pid of {service}: {}", self.state)) as i32
    }

    fn field(&self, name: &str) -> &str {
        self.state[name].as_str().unwrap_or_else(|| panic!("ctl.py's state has no {name}: {}", self.state))
    }

    /// Keystone's v3 URL (`http://127.0.0.1:PORT/v3`).
    pub fn keystone_url(&self) -> &str {
        self.field("keystone_url")
    }

    /// heat-api's root (`http://127.0.0.1:PORT`).
    pub fn heat_api_url(&self) -> &str {
        self.field("heat_api_url")
    }

    /// heat-api-cfn's root (`http://127.0.0.1:PORT`).
    pub fn heat_cfn_url(&self) -> &str {
        self.field("heat_cfn_url")
    }

    /// The directory of the services' logs.
    pub fn logs_dir(&self) -> PathBuf {
        PathBuf::from(self.field("logs"))
    }

    /// The last lines of Heat's and Keystone's logs, for a failure message.
    pub fn log_tail(&self) -> String {
        let mut text = String::new();
        for name in ["heat.log", "keystone.log"] {
            let log = std::fs::read_to_string(self.logs_dir().join(name)).unwrap_or_default();
            let lines: Vec<&str> = log.lines().collect();
            let tail = lines[lines.len().saturating_sub(40)..].join("\n");
            text.push_str(&format!("----- {name} (tail) -----\n{tail}\n"));
        }
        text
    }

    /// A Keystone token of the bootstrap admin, scoped to its project, and Heat's API for it.
    pub async fn admin(&self) -> HeatApi {
        let admin = &self.state["admin"];
        let client = client();
        let body = json!({"auth": {
            "identity": {"methods": ["password"], "password": {"user": {
                "name": admin["user"], "domain": {"name": admin["domain"]}, "password": admin["password"]}}},
            "scope": {"project": {"name": admin["project"], "domain": {"name": admin["domain"]}}}}});
        let url = format!("{}/auth/tokens", self.keystone_url());
        let response = client.post(&url).json_body(&body).send().await.unwrap_or_else(|error| panic!("{url}: {error}"));
        assert_eq!(response.status(), StatusCode::CREATED, "keystone refused the admin's password");
        let token = response.headers()["x-subject-token"].to_str().expect("an ASCII token").to_string();
        let answer: Value = read_json(response).await;
        let project = answer["token"]["project"]["id"].as_str().expect("a project-scoped token").to_string();
        let endpoint = catalog_endpoint(&answer, "orchestration")
            .unwrap_or_else(|| panic!("no public orchestration endpoint in the catalog: {answer}"));
        HeatApi { client, token, endpoint, project }
    }
}

/// An instance of one test alone; `ctl.py stop` when dropped (also when the test panics).
pub struct PrivateRealHeat {
    heat: RealHeat,
    dir: PathBuf,
}

impl PrivateRealHeat {
    /// SIGKILL of `service`'s process group (`keystone` or `heat`), waited for.
    pub async fn kill(&self, service: &str) {
        let pid = self.heat.pid(service);
        let _ = nix::sys::signal::killpg(nix::unistd::Pid::from_raw(pid), nix::sys::signal::Signal::SIGKILL);
        let gone = || !Path::new(&format!("/proc/{pid}/cmdline")).exists() || is_zombie(pid);
        crate::wait::eventually(Duration::from_secs(10), &format!("{service} (pid {pid}) to die"), gone).await;
    }

    /// Starts again, on its port, each service that no longer runs (`ctl.py revive`).
    pub async fn revive(&mut self) {
        let output = run_command(ctl_command("revive", &self.dir), START_LIMIT).await;
        let stdout = output.expect_success("tests/peers/real-heat/ctl.py revive");
        self.heat.state = serde_json::from_str(&stdout)
            .unwrap_or_else(|error| panic!("ctl.py revive printed no state ({error}): {stdout}"));
    }
}

fn is_zombie(pid: i32) -> bool {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    stat.rsplit(')').next().is_some_and(|rest| rest.trim_start().starts_with('Z'))
}

impl std::ops::Deref for PrivateRealHeat {
    type Target = RealHeat;
    fn deref(&self) -> &RealHeat {
        &self.heat
    }
}

impl Drop for PrivateRealHeat {
    fn drop(&mut self) {
        // A SIGSTOPped service would not see the TERM: let it run again first.
        for service in ["keystone", "heat"] {
            let group = nix::unistd::Pid::from_raw(self.heat.pid(service));
            let _ = nix::sys::signal::killpg(group, nix::sys::signal::Signal::SIGCONT);
        }
        let mut stop = ctl_command("stop", &self.dir).into_std();
        stop.stdin(std::process::Stdio::null()).stdout(std::process::Stdio::null());
        if let Err(error) = stop.status() {
            eprintln!("cannot run ctl.py stop for {}: {error}", self.dir.display());
        }
    }
}

/// `ctl.py COMMAND DIR` with the heat venv's python3.
fn ctl_command(command: &str, dir: &Path) -> Command {
    let cache = peers::cache(&["heat-venv/bin/python3"]);
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("peers/real-heat/ctl.py");
    let mut ctl = Command::new(cache.join("heat-venv/bin/python3"));
    ctl.arg(script).arg(command).arg(dir);
    ctl
}

/// `<cargo target dir>/real-heat`, from the test executable's path
/// (`<target>/<profile>/deps/<test>`).
fn state_dir() -> PathBuf {
    let executable = std::env::current_exe().expect("the test executable's path");
    let mut directory = executable.parent().expect("the test executable's directory").to_path_buf();
    if directory.ends_with("deps") {
        directory.pop();
    }
    directory.parent().expect("the target directory").join("real-heat")
}

fn catalog_endpoint(token: &Value, service_type: &str) -> Option<String> {
    let catalog = token["token"]["catalog"].as_array()?;
    let service = catalog.iter().find(|service| service["type"] == service_type)?;
    let endpoints = service["endpoints"].as_array()?;
    let public = endpoints.iter().find(|endpoint| endpoint["interface"] == "public")?;
    Some(public["url"].as_str()?.trim_end_matches('/').to_string())
}

fn client() -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder().no_proxy().timeout(REQUEST_LIMIT).build().expect("an HTTP client")
}

trait JsonBody {
    fn json_body(self, body: &Value) -> Self;
}

impl JsonBody for reqwest::RequestBuilder {
    fn json_body(self, body: &Value) -> Self {
        self.header("content-type", "application/json").body(body.to_string())
    }
}

async fn read_json(response: reqwest::Response) -> Value {
    let bytes = response.bytes().await.expect("a response body");
    serde_json::from_slice(&bytes)
        .unwrap_or_else(|error| panic!("not JSON ({error}): {}", String::from_utf8_lossy(&bytes)))
}

/// A stack Heat created: its name and id, which together name it in every URL.
#[derive(Debug, Clone)]
pub struct StackRef {
    pub name: String,
    pub id: String,
}

impl StackRef {
    fn path(&self) -> String {
        format!("stacks/{}/{}", self.name, self.id)
    }
}

/// Heat's orchestration API with an admin token.
#[derive(Debug, Clone)]
pub struct HeatApi {
    client: reqwest::Client,
    token: String,
    endpoint: String,
    project: String,
}

impl HeatApi {
    /// The admin's project id (the project stacks are created in).
    pub fn project_id(&self) -> &str {
        &self.project
    }

    /// The orchestration endpoint, `http://127.0.0.1:PORT/v1/<project>`.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// Sends `method` to `<endpoint>/<path>`; returns the status and the JSON body (`Null` when
    /// empty).
    pub async fn call(&self, method: Method, path: &str, body: Option<&Value>) -> (StatusCode, Value) {
        let url = format!("{}/{path}", self.endpoint);
        let mut request = self.client.request(method.clone(), &url).header("x-auth-token", &self.token);
        request = request.header("accept", "application/json");
        if let Some(body) = body {
            request = request.json_body(body);
        }
        let response = request.send().await.unwrap_or_else(|error| panic!("{method} {url}: {error}"));
        let status = response.status();
        let bytes = response.bytes().await.expect("a response body");
        let value = if bytes.is_empty() {
            Value::Null
        } else {
            serde_json::from_slice(&bytes).unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into()))
        };
        (status, value)
    }

    /// `call`, panicking unless the answer is `expected`. A GET is retried a few times first:
    /// while Heat's convergence engine updates a stack, reading it can briefly answer 404
    /// ("ResourcePropertiesData with id ... not found") or 500 for an object being replaced.
    async fn expect(&self, method: Method, path: &str, body: Option<&Value>, expected: StatusCode) -> Value {
        let attempts = if method == Method::GET { READ_ATTEMPTS } else { 1 };
        let mut answer = (StatusCode::OK, Value::Null);
        for attempt in 1..=attempts {
            answer = self.call(method.clone(), path, body).await;
            if answer.0 == expected {
                return answer.1;
            }
            if attempt < attempts {
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        }
        panic!("{method} {path}: {} (expected {expected}): {}", answer.0, answer.1)
    }

    /// Creates a stack from a YAML template and string parameters (202, not waited for).
    pub async fn create_stack(&self, name: &str, template: &str, parameters: &[(&str, &str)]) -> StackRef {
        let body = json!({"stack_name": name, "template": template, "parameters": parameter_map(parameters)});
        let answer = self.expect(Method::POST, "stacks", Some(&body), StatusCode::CREATED).await;
        let id = answer["stack"]["id"].as_str().unwrap_or_else(|| panic!("no stack id in {answer}"));
        StackRef { name: name.to_string(), id: id.to_string() }
    }

    /// Updates a stack to `template` with `parameters` (PUT: the whole template; 202).
    pub async fn update_stack(&self, stack: &StackRef, template: &str, parameters: &[(&str, &str)]) {
        let body = json!({"template": template, "parameters": parameter_map(parameters)});
        self.expect(Method::PUT, &stack.path(), Some(&body), StatusCode::ACCEPTED).await;
    }

    /// `GET stacks/<name>/<id>`: the `stack` object (status, reason, outputs).
    pub async fn stack(&self, stack: &StackRef) -> Value {
        self.expect(Method::GET, &stack.path(), None, StatusCode::OK).await["stack"].take()
    }

    /// The stack's status and reason as the stack list shows them. Unlike the stack's own page,
    /// the list resolves no outputs, so it answers while a deployment updates (heat 27's show
    /// answers 404 "ResourcePropertiesData ... not found" then).
    pub async fn stack_status(&self, stack: &StackRef) -> (String, String) {
        let answer = self.expect(Method::GET, &format!("stacks?id={}", stack.id), None, StatusCode::OK).await;
        let listed = answer["stacks"].as_array().and_then(|stacks| stacks.first()).cloned();
        let listed = listed.unwrap_or_else(|| panic!("stack {} is not listed: {answer}", stack.name));
        let field = |name: &str| listed[name].as_str().unwrap_or_default().to_string();
        (field("stack_status"), field("stack_status_reason"))
    }

    /// Waits until the stack's status no longer ends in `_IN_PROGRESS` and differs from
    /// `previous` (an update starts from the create's status); returns the `stack` object.
    pub async fn wait_stack_settled(&self, stack: &StackRef, previous: Option<&str>, limit: Duration) -> Value {
        let what = format!("stack {} to settle (leave {previous:?} and *_IN_PROGRESS)", stack.name);
        wait_until(limit, &what, || async {
            tokio::time::sleep(Duration::from_millis(200)).await;
            let (status, _) = self.stack_status(stack).await;
            (!status.ends_with("_IN_PROGRESS") && Some(status.as_str()) != previous).then_some(())
        })
        .await;
        self.stack(stack).await
    }

    /// `GET .../resources/<name>`: the `resource` object.
    pub async fn resource(&self, stack: &StackRef, name: &str) -> Value {
        let path = format!("{}/resources/{name}", stack.path());
        self.expect(Method::GET, &path, None, StatusCode::OK).await["resource"].take()
    }

    /// Waits until resource `name` has `status` (e.g. `CREATE_COMPLETE`); panics early when
    /// it reaches a `_FAILED` status instead.
    pub async fn wait_resource_status(&self, stack: &StackRef, name: &str, status: &str, limit: Duration) -> Value {
        let what = format!("resource {name} of stack {} to reach {status}", stack.name);
        wait_until(limit, &what, || async {
            tokio::time::sleep(Duration::from_millis(200)).await;
            let (code, answer) = self.call(Method::GET, &format!("{}/resources/{name}", stack.path()), None).await;
            if code == StatusCode::NOT_FOUND {
                return None;
            }
            let resource = answer["resource"].clone();
            let now = resource["resource_status"].as_str().unwrap_or_default();
            assert!(now == status || !now.ends_with("_FAILED"), "{name} failed: {resource}");
            (now == status).then_some(resource)
        })
        .await
    }

    /// What `GET .../resources/<name>/metadata` answers (`{"metadata": {...}}`).
    pub async fn resource_metadata(&self, stack: &StackRef, name: &str) -> Value {
        let path = format!("{}/resources/{name}/metadata", stack.path());
        self.expect(Method::GET, &path, None, StatusCode::OK).await
    }

    /// One attribute of a resource (`?with_attr=`), as Heat resolves it for a resource show.
    /// (Heat 27 shows a software deployment's `deploy_stdout` there as null: read those from
    /// `deployment_output_values`.)
    pub async fn resource_attribute(&self, stack: &StackRef, name: &str, attribute: &str) -> Value {
        let path = format!("{}/resources/{name}?with_attr={attribute}", stack.path());
        let resource = self.expect(Method::GET, &path, None, StatusCode::OK).await;
        let attributes = &resource["resource"]["attributes"];
        attributes.get(attribute).cloned().unwrap_or_else(|| panic!("no attribute {attribute} in {resource}"))
    }

    /// What a software deployment's signal gave Heat (`deploy_stdout`, `deploy_stderr`,
    /// `deploy_status_code` and the config's outputs): its `output_values` attribute.
    pub async fn deployment_output_values(&self, stack: &StackRef, name: &str) -> Value {
        self.resource(stack, name).await["attributes"]["output_values"].take()
    }

    /// The stack's outputs by key (`output_value`; an output Heat could not resolve shows its
    /// `output_error` as `{"error": ...}`).
    pub async fn outputs(&self, stack: &StackRef) -> BTreeMap<String, Value> {
        let shown = self.stack(stack).await;
        let outputs = shown["outputs"].as_array().cloned().unwrap_or_default();
        outputs
            .into_iter()
            .map(|output| {
                let key = output["output_key"].as_str().expect("an output key").to_string();
                let value = match output.get("output_error") {
                    Some(error) => json!({ "error": error }),
                    None => output["output_value"].clone(),
                };
                (key, value)
            })
            .collect()
    }

    /// The stack's events, oldest first (at most Heat's default page).
    pub async fn events(&self, stack: &StackRef) -> Vec<Value> {
        let path = format!("{}/events?sort_dir=asc", stack.path());
        let answer = self.expect(Method::GET, &path, None, StatusCode::OK).await;
        answer["events"].as_array().cloned().unwrap_or_default()
    }

    /// Deletes a stack (204; not waited for).
    pub async fn delete_stack(&self, stack: &StackRef) {
        self.expect(Method::DELETE, &stack.path(), None, StatusCode::NO_CONTENT).await;
    }
}

fn parameter_map(parameters: &[(&str, &str)]) -> Value {
    Value::Object(parameters.iter().map(|(key, value)| (key.to_string(), Value::String(value.to_string()))).collect())
}

/// A stack name unique in the run: `prefix` and the test process's id and clock.
pub fn unique_stack_name(prefix: &str) -> String {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).expect("clock").subsec_nanos();
    format!("{prefix}-{}-{nanos:x}", std::process::id())
}

/// A template of `tests/fixtures/real-heat/`.
pub fn fixture_template(name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/real-heat").join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|error| panic!("{}: {error}", path.display()))
}
