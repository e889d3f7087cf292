//! Access and tokens at rest: every route the shim serves × every kind of credential, against a
//! real shim with a real agent (vm1) and a registered server whose agent is not running (vm2, so
//! its deployment waits for a signal the matrix sends). Then the SQLite files (database, WAL,
//! shared memory) are searched for every token in clear.
//!
//! Expected statuses, from docs/http-api.md (authentication) and docs/security.md; the routes and
//! the credential each takes are the API's own table, `anneal_shim::api::ROUTES`:
//! - admin routes: 401 without an `Authorization: Bearer <token>` header (none, another scheme,
//!   an empty bearer, a bare token); 403 for any bearer token that is not the admin's (garbage
//!   included: it is in the bearer form, and the metrics token); the route's own status for the
//!   admin token. `GET /metrics` answers the metrics token (`serve --metrics-token-file`) too.
//! - `GET|HEAD /v1/servers/{name}/metadata`: 401 as above; 403 for every token but `name`'s own,
//!   the admin's included (the route takes the server token only), and for a server that does
//!   not exist (a 404 would tell a stranger which servers exist).
//! - capability routes (`/v1/metadata/{server token}`, `/v1/signals/{signal token}`,
//!   `/v1/waitconditions/{handle token}`): the path token is the credential and an
//!   Authorization header grants nothing; 404 for any token that is not one of that route's
//!   kind (the URL reveals nothing), whatever its shape.
//! - admin routes for a stack that does not exist: 404 only for the admin; others get 403, so
//!   names do not leak.
//!
//! A revoked server: vm3 is registered, holds a long-poll and is removed with `anneal-shim
//! server delete vm3` before the matrix runs (the poll must then answer 403, and the CLI refuses
//! to remove vm1, which a stack uses); its token is the revoked credential and must get what a
//! stranger's gets, even after the matrix registers vm3 again.
use std::collections::BTreeSet;
use std::time::Duration;

use anneal_shim::api::{Credential as RouteCredential, ROUTES};
use anneal_tests::{Agent, AgentSettings, Shim, capability_token, wait_until};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

const TEMPLATE: &str = r##"
heat_template_version: 2018-08-31
resources:
  handle: {type: OS::Heat::WaitConditionHandle}
  wait:
    type: OS::Heat::WaitCondition
    properties: {handle: {get_resource: handle}, count: 1, timeout: 600}
  config:
    type: OS::Heat::SoftwareConfig
    properties: {group: script, config: "#!/bin/sh\necho configured\n"}
  on_vm1:
    type: OS::Heat::SoftwareDeployment
    properties: {config: {get_resource: config}, server: vm1}
  on_vm2:
    type: OS::Heat::SoftwareDeployment
    properties: {config: {get_resource: config}, server: vm2}
outputs:
  endpoint: {value: {get_attr: [handle, endpoint]}}
"##;

/// The stack the admin routes of the matrix create, update and delete.
const SCRATCH_TEMPLATE: &str =
    "heat_template_version: 2018-08-31\nresources:\n  c: {type: OS::Heat::SoftwareConfig, properties: {config: x}}\n";

/// Who a credential (its bearer header, or the token in a capability route's path) is.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Holder {
    /// Not in the `Bearer <token>` form, or nothing at all.
    Nobody,
    /// In the right form, but a token the shim does not know for anything.
    Stranger,
    Server(&'static str),
    /// The signal token of a deployment (its name).
    Signal(&'static str),
    Handle,
    /// The token of `serve --metrics-token-file`.
    Metrics,
    Admin,
}

struct Credential {
    label: &'static str,
    header: Option<String>,
    header_holder: Holder,
    path_token: String,
    path_holder: Holder,
}

/// Who may use a route.
#[derive(Debug, Clone, Copy)]
enum Access {
    Admin,
    /// `GET /metrics`: the metrics token or the admin token.
    Metrics,
    /// The web view's data: the admin bearer token (or its session cookie, which the matrix
    /// never sends), so the admin's expectations.
    AdminSession,
    /// Anyone: the same answer whatever the credential.
    Public,
    ServerMetadata(&'static str),
    ServerToken,
    SignalToken,
    HandleToken,
}

impl Access {
    /// The credential the API's route table declares for a route with this access.
    fn declared(self) -> RouteCredential {
        match self {
            Access::Admin => RouteCredential::Admin,
            Access::Metrics => RouteCredential::Metrics,
            Access::AdminSession => RouteCredential::AdminSession,
            Access::Public => RouteCredential::Public,
            Access::ServerMetadata(_) => RouteCredential::ServerBearer,
            Access::ServerToken => RouteCredential::ServerTokenInPath,
            Access::SignalToken => RouteCredential::SignalTokenInPath,
            Access::HandleToken => RouteCredential::HandleTokenInPath,
        }
    }
}

#[derive(Clone)]
struct Route {
    method: &'static str,
    /// As written in `ROUTES`, for the coverage check.
    pattern: &'static str,
    /// What is requested; `{token}` is the credential's path token.
    path: String,
    body: Option<String>,
    access: Access,
    /// The status for the credential that may use it.
    granted: u16,
}

/// The tokens the matrix uses as credentials.
struct Tokens {
    admin: String,
    vm1: String,
    vm2: String,
    signal_vm1: String,
    signal_vm2: String,
    handle: String,
    /// The token of vm3, a server removed before the matrix runs.
    revoked: String,
    metrics: String,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_route_answers_every_credential_as_designed_and_no_token_is_stored_in_clear() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut shim = Shim::start().await;
    let fleet_dir = tempfile::Builder::new().prefix("anneal-access-").tempdir().expect("temp dir");
    let mut vm1 = Agent::register(&shim, fleet_dir.path(), "vm1", &AgentSettings::default()).await;
    let vm2 = Agent::register(&shim, fleet_dir.path(), "vm2", &AgentSettings::default()).await;
    vm1.start();
    let template = shim.write_template("access.yaml", TEMPLATE);
    shim.cli_ok(&["stack", "create", "access", "--template", template.to_str().expect("utf-8")]).await;
    wait_for_resource(&shim, "on_vm1", "CREATE_COMPLETE").await;
    let revoked = revoke_a_server(&shim).await;
    let tokens = find_tokens(&shim, &vm1, &vm2, revoked).await;

    signal_tokens_move_only_their_own_deployment(&shim, &tokens).await;
    let (failures, issued) = run_matrix(&shim, &tokens).await;
    assert!(failures.is_empty(), "{} unexpected statuses:\n{}", failures.len(), failures.join("\n"));
    wait_for_stack(&shim, "access", "CREATE_COMPLETE").await;

    let mut secrets = vec![&tokens.admin, &tokens.vm1, &tokens.vm2, &tokens.signal_vm1, &tokens.signal_vm2];
    secrets.extend([&tokens.handle, &tokens.revoked, &tokens.metrics, &issued]);
    assert_no_token_in_database(&shim, &secrets, &tokens.vm1, "while the shim runs");
    shim.stop().await;
    assert_no_token_in_database(&shim, &secrets, &tokens.vm1, "after a clean stop");
}

/// The matrix sends every route of the API's table (when one is added there, add its rows to
/// `routes()` below), and expects of each the credential the table declares.
#[test]
fn the_matrix_covers_every_route_the_shim_serves() {
    let served: BTreeSet<(&str, &str)> = ROUTES.iter().map(|route| (route.method.as_str(), route.path)).collect();
    let listed = routes();
    let tested: Vec<&Route> = listed.iter().filter(|route| route.method != "HEAD").collect();
    let covered: BTreeSet<(&str, &str)> = tested.iter().map(|route| (route.method, route.pattern)).collect();
    assert_eq!(covered, served, "tests/tests/access.rs `routes()` must list every route of anneal_shim::api::ROUTES");
    for route in tested {
        let declared =
            ROUTES.iter().find(|served| (served.method.as_str(), served.path) == (route.method, route.pattern));
        let declared = declared.expect("covered above").credential;
        assert_eq!(
            route.access.declared(),
            declared,
            "{} {}: the matrix expects another credential",
            route.method,
            route.pattern
        );
    }
}

/// A token names one deployment: vm1's signal token, even with a FAILURE body, never moves vm2's
/// deployment (and, being late for a finished one, changes nothing at all).
async fn signal_tokens_move_only_their_own_deployment(shim: &Shim, tokens: &Tokens) {
    let client = reqwest::Client::new();
    let url = format!("{}/v1/signals/{}", shim.url(), tokens.signal_vm1);
    let failure = json!({"deploy_status_code": 1, "deploy_stderr": "aimed at on_vm2"}).to_string();
    let response = client.post(&url).body(failure).send().await.expect("signal");
    assert_eq!(response.status().as_u16(), 200, "a repeated signal answers 2xx");
    assert_eq!(resource_status(shim, "on_vm2").await, "CREATE_IN_PROGRESS");
    assert_eq!(resource_status(shim, "on_vm1").await, "CREATE_COMPLETE");
}

/// Sends every route × credential; returns the unexpected answers and the token the admin's
/// `POST /v1/servers` got.
async fn run_matrix(shim: &Shim, tokens: &Tokens) -> (Vec<String>, String) {
    let client = reqwest::Client::new();
    let credentials = credentials(tokens);
    // The web view's login throttles failures per address (5 a minute): each credential's
    // wrong login comes from an address of its own (127.0.0.10 and up), so each is answered 403.
    let login_clients: Vec<reqwest::Client> = (0..credentials.len())
        .map(|index| {
            let address = std::net::IpAddr::from([127, 0, 0, 10 + u8::try_from(index).expect("few credentials")]);
            reqwest::Client::builder().local_address(address).build().expect("a client")
        })
        .collect();
    let mut failures = Vec::new();
    let mut issued = String::new();
    for route in routes() {
        for (index, credential) in credentials.iter().enumerate() {
            let path = route.path.replace("{token}", &credential.path_token);
            let method = reqwest::Method::from_bytes(route.method.as_bytes()).expect("method");
            let client = if route.pattern == "/ui/login" { &login_clients[index] } else { &client };
            let mut request = client.request(method, format!("{}{path}", shim.url()));
            if let Some(header) = &credential.header {
                request = request.header("authorization", header);
            }
            if let Some(body) = &route.body {
                request = request.header("content-type", "application/json").body(body.clone());
            }
            let response = request.send().await.expect("the shim answers");
            let status = response.status().as_u16();
            // An event stream (the web view's watch) never ends: its head is the answer.
            let streaming = response
                .headers()
                .get("content-type")
                .is_some_and(|value| value.as_bytes().starts_with(b"text/event-stream"));
            let text = if streaming { String::new() } else { response.text().await.unwrap_or_default() };
            let expected = expected_status(&route, credential);
            let echoed = credential.path_token.len() > 8 && text.contains(&credential.path_token);
            if echoed && status != route.granted {
                failures.push(format!(
                    "{} {path} with {}: the error echoes the token: {text}",
                    route.method, credential.label
                ));
            }
            if status != expected {
                failures.push(format!(
                    "{} {path} with {}: {status}, expected {expected}: {text}",
                    route.method, credential.label
                ));
            } else if route.pattern == "/v1/servers" && route.method == "POST" && status == route.granted {
                let body: Value = serde_json::from_str(&text).expect("credentials are JSON");
                issued = body["token"].as_str().expect("a token").to_string();
            }
        }
    }
    (failures, issued)
}

fn expected_status(route: &Route, credential: &Credential) -> u16 {
    let holder = match route.access {
        Access::Public => return route.granted,
        Access::Admin | Access::Metrics | Access::AdminSession | Access::ServerMetadata(_) => &credential.header_holder,
        Access::ServerToken | Access::SignalToken | Access::HandleToken => &credential.path_holder,
    };
    match (route.access, holder) {
        (Access::Admin | Access::Metrics | Access::AdminSession | Access::ServerMetadata(_), Holder::Nobody) => 401,
        (Access::Admin | Access::Metrics | Access::AdminSession, Holder::Admin) => route.granted,
        (Access::Metrics, Holder::Metrics) => route.granted,
        (Access::ServerMetadata(owner), Holder::Server(server)) if owner == *server => route.granted,
        (Access::Admin | Access::Metrics | Access::AdminSession | Access::ServerMetadata(_), _) => 403,
        (Access::ServerToken, Holder::Server(_)) => route.granted,
        (Access::SignalToken, Holder::Signal(_)) => route.granted,
        (Access::HandleToken, Holder::Handle) => route.granted,
        (Access::ServerToken | Access::SignalToken | Access::HandleToken, _) => 404,
        (Access::Public, _) => route.granted,
    }
}

/// Each kind of credential: none, malformed (garbage, wrong scheme, empty bearer, a
/// bare token), each server's token (one is "another server's" on the other's routes), each
/// deployment's signal token, the handle token, a revoked server's, the admin token.
fn credentials(tokens: &Tokens) -> Vec<Credential> {
    let bearer = |token: &str| Some(format!("Bearer {token}"));
    let almost = "ab".repeat(31) + "a";
    let credential = |label, header, header_holder, path_token: &str, path_holder| Credential {
        label,
        header,
        header_holder,
        path_token: path_token.to_string(),
        path_holder,
    };
    vec![
        credential("no credentials", None, Holder::Nobody, "", Holder::Nobody),
        credential("a garbage bearer", bearer("not-a-token"), Holder::Stranger, "not-a-token", Holder::Nobody),
        credential("another scheme", Some("Basic dm0xOnNlY3JldA==".into()), Holder::Nobody, &almost, Holder::Nobody),
        credential("an empty bearer", Some("Bearer ".into()), Holder::Nobody, "-", Holder::Nobody),
        // The path token: vm1's in upper case, well-formed but not the token that was issued.
        credential(
            "vm1's token without a scheme",
            Some(tokens.vm1.clone()),
            Holder::Nobody,
            &tokens.vm1.to_uppercase(),
            Holder::Stranger,
        ),
        credential("vm1's token", bearer(&tokens.vm1), Holder::Server("vm1"), &tokens.vm1, Holder::Server("vm1")),
        credential("vm2's token", bearer(&tokens.vm2), Holder::Server("vm2"), &tokens.vm2, Holder::Server("vm2")),
        credential(
            "on_vm1's signal token",
            bearer(&tokens.signal_vm1),
            Holder::Signal("on_vm1"),
            &tokens.signal_vm1,
            Holder::Signal("on_vm1"),
        ),
        credential(
            "on_vm2's signal token",
            bearer(&tokens.signal_vm2),
            Holder::Signal("on_vm2"),
            &tokens.signal_vm2,
            Holder::Signal("on_vm2"),
        ),
        credential("the handle token", bearer(&tokens.handle), Holder::Handle, &tokens.handle, Holder::Handle),
        credential(
            "a revoked server's token",
            bearer(&tokens.revoked),
            Holder::Stranger,
            &tokens.revoked,
            Holder::Stranger,
        ),
        credential("the metrics token", bearer(&tokens.metrics), Holder::Metrics, &tokens.metrics, Holder::Stranger),
        credential("the admin token", bearer(&tokens.admin), Holder::Admin, &tokens.admin, Holder::Stranger),
    ]
}

/// Every route of `anneal_shim::api::ROUTES`, in an order whose admin successes build on each other
/// (vm3 is registered again, its token rotated, then removed; the scratch stack is created, read, updated, and
/// deleted last), and `HEAD` before each `GET`.
fn routes() -> Vec<Route> {
    let server = json!({"name": "vm3"}).to_string();
    let scratch = json!({"name": "scratch", "template": SCRATCH_TEMPLATE}).to_string();
    let update = json!({"template": SCRATCH_TEMPLATE}).to_string();
    let result = json!({"deploy_status_code": 0, "deploy_stdout": "from the matrix"}).to_string();
    let heat_style = json!({"status": "SUCCESS", "reason": "matrix", "data": "ok", "id": "matrix"}).to_string();
    let aws_style = json!({"Status": "SUCCESS", "Reason": "matrix", "UniqueId": "aws", "Data": "ok"}).to_string();
    let route = |method, pattern, path: &str, body: Option<&String>, access, granted| Route {
        method,
        pattern,
        path: path.to_string(),
        body: body.cloned(),
        access,
        granted,
    };
    let (servers, named_server, server_metadata, url_metadata) =
        ("/v1/servers", "/v1/servers/{name}", "/v1/servers/{name}/metadata", "/v1/metadata/{token}");
    let (stacks, stack, events) = ("/v1/stacks", "/v1/stacks/{name}", "/v1/stacks/{name}/events");
    let graph = "/v1/stacks/{name}/graph";
    let (template, environment) = ("/v1/stacks/{name}/template", "/v1/stacks/{name}/environment");
    let (cancel, cancel_body) = ("/v1/stacks/{name}/cancel", json!({"rollback": true}).to_string());
    let (failures, preview) = ("/v1/stacks/{name}/failures", "/v1/stacks/{name}/preview");
    let (mark, mark_body) = ("/v1/stacks/{name}/resources/{resource}/mark-unhealthy", json!({}).to_string());
    let (signals, waitconditions) = ("/v1/signals/{token}", "/v1/waitconditions/{token}");
    let (rotate, rotation) = ("/v1/servers/{name}/token", json!({"grace_secs": 60}).to_string());
    let ui_login = json!({"token": "not-the-admin-token"}).to_string();
    let listed = vec![
        route("POST", servers, servers, Some(&server), Access::Admin, 201),
        route("GET", servers, servers, None, Access::Admin, 200),
        route("GET", server_metadata, "/v1/servers/vm1/metadata", None, Access::ServerMetadata("vm1"), 200),
        // No credential holds a server that does not exist: everyone gets what a foreign
        // server's route answers.
        route("GET", server_metadata, "/v1/servers/nosuch/metadata", None, Access::ServerMetadata("nosuch"), 200),
        route("GET", url_metadata, url_metadata, None, Access::ServerToken, 200),
        // vm3 again, with a token no credential holds: its revoked token opens nothing.
        route("GET", server_metadata, "/v1/servers/vm3/metadata", None, Access::ServerMetadata("vm3"), 200),
        route("POST", rotate, "/v1/servers/vm3/token", Some(&rotation), Access::Admin, 200),
        route("POST", rotate, "/v1/servers/nosuch/token", Some(&rotation), Access::Admin, 404),
        route("DELETE", named_server, "/v1/servers/vm3", None, Access::Admin, 204),
        route("DELETE", named_server, "/v1/servers/nosuch", None, Access::Admin, 404),
        // The stack `access` deploys to vm1.
        route("DELETE", named_server, "/v1/servers/vm1", None, Access::Admin, 409),
        route("POST", stacks, stacks, Some(&scratch), Access::Admin, 201),
        route("GET", stacks, stacks, None, Access::Admin, 200),
        route("GET", stack, "/v1/stacks/scratch", None, Access::Admin, 200),
        route("GET", stack, "/v1/stacks/nosuch", None, Access::Admin, 404),
        route("PUT", stack, "/v1/stacks/scratch", Some(&update), Access::Admin, 202),
        route("GET", events, "/v1/stacks/scratch/events", None, Access::Admin, 200),
        route("GET", graph, "/v1/stacks/scratch/graph", None, Access::Admin, 200),
        route("GET", graph, "/v1/stacks/nosuch/graph", None, Access::Admin, 404),
        route("GET", template, "/v1/stacks/scratch/template", None, Access::Admin, 200),
        route("GET", template, "/v1/stacks/nosuch/template", None, Access::Admin, 404),
        route("GET", environment, "/v1/stacks/scratch/environment", None, Access::Admin, 200),
        route("GET", environment, "/v1/stacks/nosuch/environment", None, Access::Admin, 404),
        route("POST", cancel, "/v1/stacks/nosuch/cancel", Some(&cancel_body), Access::Admin, 404),
        route("GET", failures, "/v1/stacks/scratch/failures", None, Access::Admin, 200),
        route("GET", failures, "/v1/stacks/nosuch/failures", None, Access::Admin, 404),
        route("POST", mark, "/v1/stacks/nosuch/resources/deploy/mark-unhealthy", Some(&mark_body), Access::Admin, 404),
        route("POST", preview, "/v1/stacks/fresh/preview", Some(&scratch), Access::Admin, 400),
        route("PUT", preview, "/v1/stacks/scratch/preview", Some(&update), Access::Admin, 200),
        route("PUT", preview, "/v1/stacks/nosuch/preview", Some(&update), Access::Admin, 404),
        route("GET", "/metrics", "/metrics", None, Access::Metrics, 200),
        route("GET", "/ui/", "/ui/", None, Access::Public, 200),
        route("GET", "/ui/stacks/{name}", "/ui/stacks/access", None, Access::Public, 200),
        route("GET", "/ui/servers", "/ui/servers", None, Access::Public, 200),
        route("GET", "/ui/assets/{file}", "/ui/assets/app.js", None, Access::Public, 200),
        route("GET", "/ui/assets/{file}", "/ui/assets/..%2F..%2Fv1%2Fstacks", None, Access::Public, 404),
        // The body's token is not the admin's: refused whatever the header says.
        route("POST", "/ui/login", "/ui/login", Some(&ui_login), Access::Public, 403),
        route("POST", "/ui/logout", "/ui/logout", None, Access::Public, 204),
        route("GET", "/ui/api/stacks", "/ui/api/stacks", None, Access::AdminSession, 200),
        route("GET", "/ui/api/stacks/{name}", "/ui/api/stacks/access", None, Access::AdminSession, 200),
        route("GET", "/ui/api/stacks/{name}", "/ui/api/stacks/nosuch", None, Access::AdminSession, 404),
        route(
            "GET",
            "/ui/api/stacks/{name}/nodes/{node}",
            "/ui/api/stacks/access/nodes/on_vm1",
            None,
            Access::AdminSession,
            200,
        ),
        route(
            "GET",
            "/ui/api/stacks/{name}/nodes/{node}",
            "/ui/api/stacks/access/nodes/nosuch",
            None,
            Access::AdminSession,
            404,
        ),
        route("GET", "/ui/api/stacks/{name}/watch", "/ui/api/stacks/access/watch", None, Access::AdminSession, 200),
        // A plan of `stack update --existing`, computed and discarded: it changes nothing.
        route("GET", "/ui/api/stacks/{name}/plan", "/ui/api/stacks/access/plan", None, Access::AdminSession, 200),
        route("GET", "/ui/api/stacks/{name}/plan", "/ui/api/stacks/nosuch/plan", None, Access::AdminSession, 404),
        route("GET", "/ui/api/servers", "/ui/api/servers", None, Access::AdminSession, 200),
        route("DELETE", stack, "/v1/stacks/scratch", None, Access::Admin, 202),
        route("POST", signals, signals, Some(&result), Access::SignalToken, 200),
        route("PUT", signals, signals, Some(&result), Access::SignalToken, 200),
        route("POST", waitconditions, waitconditions, Some(&heat_style), Access::HandleToken, 200),
        route("PUT", waitconditions, waitconditions, Some(&aws_style), Access::HandleToken, 200),
    ];
    let mut with_head = Vec::with_capacity(listed.len() * 2);
    for route in listed {
        if route.method == "GET" {
            with_head.push(Route { method: "HEAD", ..route.clone() });
        }
        with_head.push(route);
    }
    with_head
}

/// Registers vm3, holds a long-poll with its token, removes it with the CLI and checks that
/// the poll answers 403 and the token is dead; also that the CLI refuses to remove vm1, which
/// the stack uses. Returns vm3's (now revoked) token.
async fn revoke_a_server(shim: &Shim) -> String {
    let credentials = shim.cli_json(&["server", "add", "vm3", "--format", "json"]).await;
    let token = credentials["token"].as_str().expect("a server token").to_string();
    let client = reqwest::Client::new();
    let url = format!("{}/v1/servers/vm3/metadata", shim.url());
    let first = client.get(&url).bearer_auth(&token).send().await.expect("metadata");
    assert_eq!(first.status().as_u16(), 200, "vm3's token works before the removal");
    let etag = first.headers()["etag"].clone();
    // Held (the document does not change) until the removal ends it. If the delete lands
    // before the poll is held, the poll is refused on arrival: 403 either way, never a 304.
    let poll =
        tokio::spawn(client.get(format!("{url}?wait=60")).bearer_auth(&token).header("if-none-match", etag).send());

    let refused = shim.cli(&["server", "delete", "vm1"]).await;
    assert_eq!(refused.code, 1, "vm1 is in use: {refused:?}");
    assert!(refused.stderr.contains("server vm1 is used by stack(s) access"), "{}", refused.stderr);
    assert_eq!(shim.cli_ok(&["server", "delete", "vm3"]).await, "server vm3 deleted\n");
    let answered = tokio::time::timeout(Duration::from_secs(30), poll).await.expect("the held poll answers");
    assert_eq!(answered.expect("poll task").expect("poll").status().as_u16(), 403);
    let after = client.get(&url).bearer_auth(&token).send().await.expect("metadata");
    assert_eq!(after.status().as_u16(), 403, "the token is dead");
    let log = shim.log_text();
    assert!(log.lines().any(|line| line.contains("server removed") && line.contains("vm3")), "{log}");
    let gone = shim.cli(&["server", "delete", "vm3"]).await;
    assert!(gone.code == 1 && gone.stderr.contains("server vm3 not found"), "{gone:?}");
    token
}

/// The tokens the matrix uses: the admin's (its file), the servers' (from `server add`), both
/// deployments' signal tokens (from each server's document, read with its own token), the
/// handle's (from the stack output) and `revoked`.
async fn find_tokens(shim: &Shim, vm1: &Agent, vm2: &Agent, revoked: String) -> Tokens {
    let admin = std::fs::read_to_string(shim.token_file()).expect("admin token file").trim().to_string();
    let token_of = |agent: &Agent| agent.credentials()["token"].as_str().expect("a server token").to_string();
    let (vm1_token, vm2_token) = (token_of(vm1), token_of(vm2));
    let signal_vm1 = signal_token(vm1, &vm1_token, "on_vm1").await;
    let signal_vm2 = signal_token(vm2, &vm2_token, "on_vm2").await;
    let endpoint = wait_until(Duration::from_secs(30), "the handle's endpoint output", || async {
        let outputs = shim.cli_json(&["stack", "outputs", "access", "--json"]).await;
        let endpoint = outputs.as_array()?.iter().find(|output| output["name"] == "endpoint")?;
        endpoint["value"].as_str().map(str::to_string)
    })
    .await;
    let handle = capability_token(&endpoint);
    let metrics = shim.metrics_token().to_string();
    Tokens { admin, vm1: vm1_token, vm2: vm2_token, signal_vm1, signal_vm2, handle, revoked, metrics }
}

/// The token in the `deploy_signal_id` of `deployment` in `agent`'s metadata document.
async fn signal_token(agent: &Agent, token: &str, deployment: &str) -> String {
    let client = reqwest::Client::new();
    let what = format!("{deployment} in the metadata of {}", agent.name());
    let url = wait_until(Duration::from_secs(30), &what, || async {
        let response = client.get(agent.metadata_url()).bearer_auth(token).send().await.ok()?;
        let document: Value = serde_json::from_str(&response.text().await.ok()?).ok()?;
        let entry = document["deployments"].as_array()?.iter().find(|entry| entry["name"] == deployment)?.clone();
        let inputs = entry["inputs"].as_array()?.clone();
        let input = inputs.into_iter().find(|input| input["name"] == "deploy_signal_id")?;
        input["value"].as_str().map(str::to_string)
    })
    .await;
    capability_token(&url)
}

async fn resource_status(shim: &Shim, resource: &str) -> String {
    let resources = shim.stack_resources("access").await;
    resources.get(resource).and_then(|entry| entry["status"].as_str()).unwrap_or_default().to_string()
}

async fn wait_for_resource(shim: &Shim, resource: &str, status: &str) {
    let what = format!("{resource} reaches {status}");
    wait_until(Duration::from_secs(60), &what, || async {
        (resource_status(shim, resource).await == status).then_some(())
    })
    .await;
}

async fn wait_for_stack(shim: &Shim, stack: &str, status: &str) {
    let what = format!("stack {stack} reaches {status}");
    wait_until(Duration::from_secs(60), &what, || async { (shim.stack_status(stack).await == status).then_some(()) })
        .await;
}

/// No token appears in `shim.db`, `shim.db-wal` or `shim.db-shm`, neither as the hex text it
/// is handed out as (either case) nor as its 32 raw bytes. The SHA-256 of `known` (vm1's
/// token) must be there: it proves the right files were read and that the check can fail.
fn assert_no_token_in_database(shim: &Shim, tokens: &[&String], known: &str, when: &str) {
    let mut stored = Vec::new();
    for suffix in ["", "-wal", "-shm"] {
        if let Ok(bytes) = std::fs::read(shim.dir().join(format!("shim.db{suffix}"))) {
            stored.extend(bytes);
        }
    }
    let known_hash: String = Sha256::digest(known.as_bytes()).iter().map(|byte| format!("{byte:02x}")).collect();
    assert!(contains(&stored, known_hash.as_bytes()), "{when}: the database holds vm1's token hash");
    assert!(contains(&stored, b"@@anneal-token:signal:"), "{when}: signal URLs are stored as placeholders");
    for token in tokens {
        assert_eq!(token.len(), 64, "a token: {token}");
        let raw: Vec<u8> = (0..32).map(|at| u8::from_str_radix(&token[at * 2..at * 2 + 2], 16).expect("hex")).collect();
        for (form, needle) in
            [("hex", token.as_bytes().to_vec()), ("upper-case hex", token.to_uppercase().into_bytes()), ("raw", raw)]
        {
            assert!(!contains(&stored, &needle), "{when}: a token is stored in clear ({form}): {token}");
        }
    }
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|window| window == needle)
}
