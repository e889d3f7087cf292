//! `server add/list` and the read-only stack commands: requests, table and JSON output, the
//! admin token's sources, and how errors are reported.

use serde_json::{Value, json};
use wiremock::matchers::{body_json, header, method, path, query_param, query_param_is_missing};
use wiremock::{Mock, MockServer, ResponseTemplate};

use super::*;
use crate::client::commands::EVENTS_PAGE;

fn credentials_json(server: &MockServer) -> Value {
    json!({
        "name": "web1", "token": "srv_tok",
        "metadata_url": format!("{}/v1/servers/web1/metadata", server.uri()),
        "request_url": format!("{}/v1/metadata/srv_tok", server.uri()),
    })
}

async fn mount_server_add(server: &MockServer) {
    Mock::given(method("POST"))
        .and(path("/v1/servers"))
        .and(header("authorization", BEARER))
        .and(header("content-type", "application/json"))
        .and(body_json(json!({"name": "web1"})))
        .respond_with(ResponseTemplate::new(201).set_body_json(credentials_json(server)))
        .expect(1)
        .mount(server)
        .await;
}

#[tokio::test]
async fn server_add_prints_toml_by_default() {
    let server = MockServer::start().await;
    mount_server_add(&server).await;
    let (result, out) = run_against(&server, &["server", "add", "web1"]).await;
    assert_eq!(result.unwrap(), ExitStatus::Success);
    assert!(out.contains("[[source]]\nkind = \"http\"\n"), "{out}");
    assert!(out.contains(&format!("url = \"{}/v1/servers/web1/metadata\"", server.uri())), "{out}");
    assert!(out.ends_with("# token: write srv_tok to /etc/anneal/token (mode 0600)\n"), "{out}");
}

#[tokio::test]
async fn server_add_prints_json_and_cloud_init() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/servers"))
        .respond_with(ResponseTemplate::new(201).set_body_json(credentials_json(&server)))
        .expect(2)
        .mount(&server)
        .await;
    let (result, out) = run_against(&server, &["server", "add", "web1", "--format", "json"]).await;
    assert_eq!(result.unwrap(), ExitStatus::Success);
    assert_eq!(serde_json::from_str::<Value>(&out).unwrap(), credentials_json(&server));
    let (result, out) = run_against(&server, &["server", "add", "web1", "--format", "cloud-init"]).await;
    assert_eq!(result.unwrap(), ExitStatus::Success);
    assert!(out.starts_with("#cloud-config\n") && out.contains("content: \"srv_tok\\n\""), "{out}");
}

#[tokio::test]
async fn server_add_sends_addresses_and_networks_in_order() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/servers"))
        .and(body_json(json!({"name": "web1", "addresses": ["203.0.113.9"],
            "networks": {"ctlplane": ["192.0.2.10", "192.0.2.11"], "a=b": ["2001:db8::1"]}})))
        .respond_with(ResponseTemplate::new(201).set_body_json(credentials_json(&server)))
        .expect(1)
        .mount(&server)
        .await;
    let arguments = [
        "server",
        "add",
        "web1",
        "--address",
        "203.0.113.9",
        "--network",
        "ctlplane=192.0.2.10",
        "--network",
        "a=b=2001:db8::1",
        "--network",
        "ctlplane=192.0.2.11",
    ];
    let (result, out) = run_against(&server, &arguments).await;
    assert_eq!(result.unwrap(), ExitStatus::Success, "{out}");
    let missing_name = Cli::try_parse_from(["anneal-shim", "server", "add", "web1", "--network", "192.0.2.10"]);
    assert!(missing_name.unwrap_err().to_string().contains("expected NET=IP"));
}

#[tokio::test]
async fn server_list_table_and_json() {
    let server = MockServer::start().await;
    let servers = json!([
        {"name": "web1", "created_at": "2026-11-21T05:00:00Z", "metadata_version": 3, "last_seen": "2026-11-21T06:00:00Z"},
        {"name": "db", "created_at": "2026-11-21T05:00:01Z", "metadata_version": 0, "last_seen": null},
    ]);
    Mock::given(method("GET"))
        .and(path("/v1/servers"))
        .and(header("authorization", BEARER))
        .respond_with(ResponseTemplate::new(200).set_body_json(&servers))
        .mount(&server)
        .await;
    let (result, out) = run_against(&server, &["server", "list"]).await;
    assert_eq!(result.unwrap(), ExitStatus::Success);
    assert_eq!(
        out,
        "NAME  CREATED               METADATA VERSION  LAST SEEN\n\
         web1  2026-11-21T05:00:00Z  3                 2026-11-21T06:00:00Z\n\
         db    2026-11-21T05:00:01Z  0                 -\n"
    );
    let (_, out) = run_against(&server, &["server", "list", "--json"]).await;
    assert_eq!(serde_json::from_str::<Value>(&out).unwrap(), servers);
}

#[tokio::test]
async fn stack_list_table_and_json() {
    let server = MockServer::start().await;
    let stacks = json!([summary("web", "CREATE_COMPLETE", "Stack CREATE completed successfully")]);
    Mock::given(method("GET"))
        .and(path("/v1/stacks"))
        .and(header("authorization", BEARER))
        .respond_with(ResponseTemplate::new(200).set_body_json(&stacks))
        .mount(&server)
        .await;
    let (result, out) = run_against(&server, &["stack", "list"]).await;
    assert_eq!(result.unwrap(), ExitStatus::Success);
    assert_eq!(
        out,
        "NAME  STATUS           CREATED               UPDATED               REASON\n\
         web   CREATE_COMPLETE  2026-11-21T05:00:00Z  2026-11-21T05:00:09Z  Stack CREATE completed successfully\n"
    );
    let (_, out) = run_against(&server, &["stack", "list", "--json"]).await;
    assert_eq!(serde_json::from_str::<Value>(&out).unwrap(), stacks);
}

#[tokio::test]
async fn stack_show_lists_resources_then_outputs() {
    let server = MockServer::start().await;
    let stack = detail(
        "web",
        "CREATE_FAILED",
        "Resource CREATE failed",
        &[
            ("config_deploy", "CREATE_COMPLETE", "state changed", "05:00:03"),
            ("app_deploy", "CREATE_FAILED", "deploy_status_code : 1", "05:00:08"),
        ],
    );
    Mock::given(method("GET"))
        .and(path("/v1/stacks/web"))
        .and(header("authorization", BEARER))
        .respond_with(ResponseTemplate::new(200).set_body_json(&stack))
        .mount(&server)
        .await;
    let (result, out) = run_against(&server, &["stack", "show", "web"]).await;
    assert_eq!(result.unwrap(), ExitStatus::Success);
    let expected = "\
Stack:   web
ID:      6f1c
Status:  CREATE_FAILED
Reason:  Resource CREATE failed
Created: 2026-11-21T05:00:00Z
Updated: 2026-11-21T05:00:09Z

Parameters:
NAME         VALUE
db_password  ******
server       web1

Resources:
NAME           TYPE                          STATUS           SERVER  REASON
config_deploy  OS::Heat::SoftwareDeployment  CREATE_COMPLETE  web1    state changed
app_deploy     OS::Heat::SoftwareDeployment  CREATE_FAILED    web1    deploy_status_code : 1

Outputs:
NAME    VALUE
result  hello\\nworld
";
    assert_eq!(out, expected);
    let (_, out) = run_against(&server, &["stack", "show", "web", "--json"]).await;
    assert_eq!(serde_json::from_str::<Value>(&out).unwrap(), stack);
}

#[tokio::test]
async fn stack_events_table_and_json() {
    let server = MockServer::start().await;
    let events = json!([
        {"id": 1, "time": "2026-11-21T05:00:00Z", "resource": "web", "status": "CREATE_IN_PROGRESS", "reason": "Stack CREATE started"},
        {"id": 2, "time": "2026-11-21T05:00:01Z", "resource": "app_deploy", "status": "CREATE_IN_PROGRESS", "reason": "state changed"},
    ]);
    Mock::given(method("GET"))
        .and(path("/v1/stacks/web/events"))
        .and(header("authorization", BEARER))
        .respond_with(ResponseTemplate::new(200).set_body_json(&events))
        .mount(&server)
        .await;
    let (result, out) = run_against(&server, &["stack", "events", "web"]).await;
    assert_eq!(result.unwrap(), ExitStatus::Success);
    assert_eq!(
        out,
        "TIME                  RESOURCE    STATUS              REASON\n\
         2026-11-21T05:00:00Z  web         CREATE_IN_PROGRESS  Stack CREATE started\n\
         2026-11-21T05:00:01Z  app_deploy  CREATE_IN_PROGRESS  state changed\n"
    );
    let (_, out) = run_against(&server, &["stack", "events", "web", "--json"]).await;
    assert_eq!(serde_json::from_str::<Value>(&out).unwrap(), events);
}

#[tokio::test]
async fn stack_events_follows_the_pages_of_the_events_route() {
    let server = MockServer::start().await;
    let event = |id: usize| json!({"id": id, "time": "t", "resource": "web", "status": "S", "reason": id.to_string()});
    let total = EVENTS_PAGE * 2 + 3;
    let events: Vec<Value> = (1..=total).map(event).collect();
    // Pages as the shim serves them: after the marker, at most `limit`.
    let pages = [(None, 0), (Some(EVENTS_PAGE), EVENTS_PAGE), (Some(EVENTS_PAGE * 2), EVENTS_PAGE * 2)];
    for (marker, start) in pages {
        let mut mock = Mock::given(method("GET"))
            .and(path("/v1/stacks/web/events"))
            .and(query_param("limit", EVENTS_PAGE.to_string()));
        mock = match marker {
            Some(marker) => mock.and(query_param("marker", marker.to_string())),
            None => mock.and(query_param_is_missing("marker")),
        };
        let page = &events[start..(start + EVENTS_PAGE).min(total)];
        mock.respond_with(ResponseTemplate::new(200).set_body_json(page)).expect(1).mount(&server).await;
    }
    let (result, out) = run_against(&server, &["stack", "events", "web", "--json"]).await;
    assert_eq!(result.unwrap(), ExitStatus::Success);
    assert_eq!(serde_json::from_str::<Value>(&out).unwrap(), Value::Array(events), "every page, in order");
}

#[tokio::test]
async fn stack_outputs_table_and_json() {
    let server = MockServer::start().await;
    let mut stack = detail("web", "CREATE_IN_PROGRESS", "", &[]);
    stack["outputs"] = json!([
        {"name": "ip", "value": "10.0.0.5"},
        {"name": "ports", "value": [80, 443]},
        {"name": "stdout", "value": null, "error": "app_deploy is not COMPLETE"},
        {"name": "later", "value": null},
    ]);
    Mock::given(method("GET"))
        .and(path("/v1/stacks/web"))
        .respond_with(ResponseTemplate::new(200).set_body_json(&stack))
        .mount(&server)
        .await;
    let (result, out) = run_against(&server, &["stack", "outputs", "web"]).await;
    assert_eq!(result.unwrap(), ExitStatus::Success);
    assert_eq!(
        out,
        "NAME    VALUE\nip      10.0.0.5\nports   [80,443]\n\
         stdout  (not available: app_deploy is not COMPLETE)\nlater   (not available yet)\n"
    );
    let (_, out) = run_against(&server, &["stack", "outputs", "web", "--json"]).await;
    assert_eq!(serde_json::from_str::<Value>(&out).unwrap(), stack["outputs"]);
}

#[tokio::test]
async fn api_errors_carry_the_servers_message() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/v1/stacks/nope"))
        .respond_with(
            ResponseTemplate::new(404)
                .set_body_json(json!({"error": {"code": 404, "message": "stack nope not found"}})),
        )
        .mount(&server)
        .await;
    let (result, out) = run_against(&server, &["stack", "show", "nope"]).await;
    let error = result.unwrap_err();
    assert!(error.is_not_found());
    assert_eq!((error.report(), error.exit_code(), out.as_str()), ("stack nope not found".to_string(), 1, ""));
}

#[tokio::test]
async fn non_json_answers_are_reported() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/v1/stacks"))
        .respond_with(ResponseTemplate::new(502).set_body_string("bad gateway"))
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path("/v1/servers"))
        .respond_with(ResponseTemplate::new(200).set_body_string("<html>"))
        .mount(&server)
        .await;
    let error = run_against(&server, &["stack", "list"]).await.0.unwrap_err();
    assert_eq!(error.report(), "HTTP 502 Bad Gateway: bad gateway");
    let error = run_against(&server, &["server", "list"]).await.0.unwrap_err();
    assert!(matches!(error, ClientError::Response { .. }), "{error:?}");
    assert_eq!(error.exit_code(), 1);
}

#[tokio::test]
async fn unreachable_server_is_a_connection_error() {
    // Bind then drop a listener: nothing listens on that port any more.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let url = format!("http://127.0.0.1:{port}");
    let (result, _) = run_with(&context(&url), &["stack", "list"]).await;
    let error = result.unwrap_err();
    assert!(error.report().starts_with(&format!("cannot reach anneal-shim at {url}: ")), "{}", error.report());
    assert_eq!(error.exit_code(), 1);
}

#[tokio::test]
async fn token_comes_from_the_file_when_the_environment_has_none() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/v1/stacks"))
        .and(header("authorization", "Bearer filetoken"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!([])))
        .expect(1)
        .mount(&server)
        .await;
    let dir = tempfile::tempdir().unwrap();
    let token_file = write_file(dir.path(), "admin.token", "  filetoken\n");
    let context = ClientContext { url: server.uri(), token: None, token_file: token_file.into(), ca_file: None };
    let (result, out) = run_with(&context, &["stack", "list"]).await;
    assert_eq!(result.unwrap(), ExitStatus::Success);
    assert_eq!(out, "NAME  STATUS  CREATED  UPDATED  REASON\n");
}

#[tokio::test]
async fn token_problems_are_configuration_errors_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.token");
    let context = ClientContext {
        url: "http://127.0.0.1:9".to_string(),
        token: None,
        token_file: missing.clone(),
        ca_file: None,
    };
    let error = run_with(&context, &["stack", "list"]).await.0.unwrap_err();
    assert_eq!(error.exit_code(), 2);
    assert!(error.report().contains(missing.to_str().unwrap()), "{}", error.report());
    let empty = write_file(dir.path(), "empty.token", "\n");
    let context = ClientContext { token_file: empty.clone().into(), ..context };
    let error = run_with(&context, &["stack", "list"]).await.0.unwrap_err();
    assert_eq!(error.exit_code(), 2);
    assert!(error.report().contains(&empty), "{}", error.report());
}

#[tokio::test]
async fn bad_url_is_a_configuration_error() {
    let (result, _) = run_with(&context("localhost:8080"), &["stack", "list"]).await;
    assert_eq!(result.unwrap_err().exit_code(), 2);
}

#[tokio::test]
async fn names_are_one_path_segment_and_a_base_path_is_kept() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/anneal/v1/stacks/a%2Fb%3Fc/events"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!([])))
        .expect(1)
        .mount(&server)
        .await;
    let url = format!("{}/anneal/", server.uri());
    let (result, _) = run_with(&context(&url), &["stack", "events", "a/b?c"]).await;
    assert_eq!(result.unwrap(), ExitStatus::Success);
}
