//! `stack create/update/delete` without `--wait` and `server delete`: the request each sends,
//! what it prints, and the local checks (template file, parameters) that come before any request.

use serde_json::{Value, json};
use wiremock::matchers::{body_json, header, method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

use super::*;

const TEMPLATE: &str = "heat_template_version: 2018-08-31\nresources: {}\n";

#[tokio::test]
async fn create_posts_the_template_parameters_and_timeout() {
    let server = MockServer::start().await;
    let dir = tempfile::tempdir().unwrap();
    let template = write_file(dir.path(), "web.yaml", TEMPLATE);
    Mock::given(method("POST"))
        .and(path("/v1/stacks"))
        .and(header("authorization", BEARER))
        .and(header("content-type", "application/json"))
        .and(body_json(json!({
            "name": "web", "template": TEMPLATE,
            "parameters": {"server": "web1", "url": "http://x/?a=b"}, "timeout_secs": 600, "disable_rollback": true,
        })))
        .respond_with(ResponseTemplate::new(201).set_body_json(summary("web", "CREATE_IN_PROGRESS", "")))
        .expect(1)
        .mount(&server)
        .await;
    let arguments = [
        "stack",
        "create",
        "web",
        "--template",
        &template,
        "--param",
        "server=web1",
        "--param",
        "url=http://x/?a=b",
        "--timeout",
        "600",
    ];
    let (result, out) = run_against(&server, &arguments).await;
    assert_eq!(result.unwrap(), ExitStatus::Success);
    assert_eq!(out, "stack web: CREATE_IN_PROGRESS (id 6f1c)\n");
}

#[tokio::test]
async fn create_json_prints_the_api_answer() {
    let server = MockServer::start().await;
    let dir = tempfile::tempdir().unwrap();
    let template = write_file(dir.path(), "web.yaml", TEMPLATE);
    Mock::given(method("POST"))
        .and(path("/v1/stacks"))
        .and(body_json(json!({"name": "web", "template": TEMPLATE, "parameters": {}, "disable_rollback": true})))
        .respond_with(ResponseTemplate::new(201).set_body_json(summary("web", "CREATE_IN_PROGRESS", "")))
        .expect(1)
        .mount(&server)
        .await;
    let (result, out) = run_against(&server, &["stack", "create", "web", "--template", &template, "--json"]).await;
    assert_eq!(result.unwrap(), ExitStatus::Success);
    assert_eq!(serde_json::from_str::<Value>(&out).unwrap(), summary("web", "CREATE_IN_PROGRESS", ""));
}

#[tokio::test]
async fn update_puts_without_a_name() {
    let server = MockServer::start().await;
    let dir = tempfile::tempdir().unwrap();
    let template = write_file(dir.path(), "web.yaml", TEMPLATE);
    Mock::given(method("PUT"))
        .and(path("/v1/stacks/web"))
        .and(header("authorization", BEARER))
        .and(body_json(json!({"template": TEMPLATE, "parameters": {"n": "2"}})))
        .respond_with(ResponseTemplate::new(202).set_body_json(summary("web", "UPDATE_IN_PROGRESS", "")))
        .expect(1)
        .mount(&server)
        .await;
    let (result, out) =
        run_against(&server, &["stack", "update", "web", "--template", &template, "--param", "n=2"]).await;
    assert_eq!(result.unwrap(), ExitStatus::Success);
    assert_eq!(out, "stack web: UPDATE_IN_PROGRESS (id 6f1c)\n");
}

#[tokio::test]
async fn delete_sends_delete() {
    let server = MockServer::start().await;
    Mock::given(method("DELETE"))
        .and(path("/v1/stacks/web"))
        .and(header("authorization", BEARER))
        .respond_with(ResponseTemplate::new(202).set_body_json(summary("web", "DELETE_IN_PROGRESS", "")))
        .expect(1)
        .mount(&server)
        .await;
    let (result, out) = run_against(&server, &["stack", "delete", "web"]).await;
    assert_eq!(result.unwrap(), ExitStatus::Success);
    assert_eq!(out, "stack web: DELETE_IN_PROGRESS (id 6f1c)\n");
}

#[tokio::test]
async fn server_delete_sends_delete_and_reports_refusals() {
    let server = MockServer::start().await;
    Mock::given(method("DELETE"))
        .and(path("/v1/servers/web1"))
        .and(header("authorization", BEARER))
        .respond_with(ResponseTemplate::new(204))
        .expect(1)
        .mount(&server)
        .await;
    for (name, status, message) in
        [("gone", 404, "server gone not found"), ("busy", 409, "server busy is used by stack(s) app")]
    {
        Mock::given(method("DELETE"))
            .and(path(format!("/v1/servers/{name}")))
            .respond_with(
                ResponseTemplate::new(status).set_body_json(json!({"error": {"code": status, "message": message}})),
            )
            .mount(&server)
            .await;
    }
    let (result, out) = run_against(&server, &["server", "delete", "web1"]).await;
    assert_eq!(result.unwrap(), ExitStatus::Success);
    assert_eq!(out, "server web1 deleted\n");
    for (name, message) in [("gone", "server gone not found"), ("busy", "server busy is used by stack(s) app")] {
        let (result, out) = run_against(&server, &["server", "delete", name]).await;
        let error = result.unwrap_err();
        assert_eq!((error.report().as_str(), error.exit_code()), (message, 1));
        assert_eq!(out, "");
    }
}

#[tokio::test]
async fn template_problems_are_listed() {
    let server = MockServer::start().await;
    let dir = tempfile::tempdir().unwrap();
    let template = write_file(dir.path(), "web.yaml", TEMPLATE);
    let problems = ["resource deploy: property \"server\": required", "dependency cycle: a -> b -> a"];
    Mock::given(method("POST"))
        .and(path("/v1/stacks"))
        .respond_with(ResponseTemplate::new(400).set_body_json(json!({"error": {
            "code": 400, "message": format!("template is invalid: {}", problems.join("; ")), "problems": problems,
        }})))
        .mount(&server)
        .await;
    let (result, out) = run_against(&server, &["stack", "create", "web", "--template", &template]).await;
    let error = result.unwrap_err();
    assert_eq!(error.exit_code(), 1);
    assert_eq!(
        error.report(),
        "template is invalid: resource deploy: property \"server\": required; dependency cycle: a -> b -> a\n  \
         - resource deploy: property \"server\": required\n  - dependency cycle: a -> b -> a"
    );
    assert_eq!(out, "");
}

#[tokio::test]
async fn conflict_is_reported() {
    let server = MockServer::start().await;
    let dir = tempfile::tempdir().unwrap();
    let template = write_file(dir.path(), "web.yaml", TEMPLATE);
    Mock::given(method("POST"))
        .and(path("/v1/stacks"))
        .respond_with(
            ResponseTemplate::new(409)
                .set_body_json(json!({"error": {"code": 409, "message": "stack web already exists"}})),
        )
        .mount(&server)
        .await;
    let error = run_against(&server, &["stack", "create", "web", "--template", &template]).await.0.unwrap_err();
    assert_eq!((error.report(), error.exit_code()), ("stack web already exists".to_string(), 1));
}

#[tokio::test]
async fn local_problems_stop_before_any_request() {
    // No mock is mounted: any request would get wiremock's 404 instead of these errors.
    let server = MockServer::start().await;
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.yaml");
    let missing = missing.to_str().unwrap();
    let error = run_against(&server, &["stack", "create", "web", "--template", missing]).await.0.unwrap_err();
    assert_eq!(error.exit_code(), 2);
    assert!(error.report().starts_with(&format!("cannot read template file {missing}: ")), "{}", error.report());

    let template = write_file(dir.path(), "web.yaml", TEMPLATE);
    let arguments = ["stack", "update", "web", "--template", &template, "--param", "a=1", "--param", "a=2"];
    let error = run_against(&server, &arguments).await.0.unwrap_err();
    assert_eq!((error.report(), error.exit_code()), ("parameter a is given more than once".to_string(), 2));
    assert!(server.received_requests().await.unwrap().is_empty());
}
