//! `--wait`: progress lines on status changes, exit status on COMPLETE / FAILED / timeout,
//! delete ending in 404, an update not mistaken for done by the previous CREATE_COMPLETE, brief
//! outages ridden out, and `--json` printing only the final stack.

use serde_json::{Value, json};
use wiremock::matchers::{header, method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

use super::*;

const TEMPLATE: &str = "heat_template_version: 2018-08-31\n";

/// Answers the next `times` polls of `/v1/stacks/web` with `body` (mount in the order wanted).
async fn poll_answers(server: &MockServer, status: u16, body: Value, times: u64) {
    Mock::given(method("GET"))
        .and(path("/v1/stacks/web"))
        .and(header("authorization", BEARER))
        .respond_with(ResponseTemplate::new(status).set_body_json(body))
        .up_to_n_times(times)
        .mount(server)
        .await;
}

async fn accept(server: &MockServer, verb: &str, route: &str, status: &str) {
    Mock::given(method(verb))
        .and(path(route))
        .respond_with(ResponseTemplate::new(202).set_body_json(summary("web", status, "")))
        .expect(1)
        .mount(server)
        .await;
}

async fn create_and_wait(server: &MockServer, extra: &[&str]) -> (Result<ExitStatus, ClientError>, String) {
    let dir = tempfile::tempdir().unwrap();
    let template = write_file(dir.path(), "web.yaml", TEMPLATE);
    let mut arguments = vec!["stack", "create", "web", "--template", &template, "--wait"];
    arguments.extend_from_slice(extra);
    run_against(server, &arguments).await
}

#[tokio::test]
async fn create_wait_prints_changes_and_succeeds_on_complete() {
    let server = MockServer::start().await;
    accept(&server, "POST", "/v1/stacks", "CREATE_IN_PROGRESS").await;
    let starting =
        [("db_deploy", "CREATE_IN_PROGRESS", "", "05:00:01"), ("app_deploy", "INIT_COMPLETE", "", "05:00:00")];
    poll_answers(&server, 200, detail("web", "CREATE_IN_PROGRESS", "", &starting), 2).await;
    let db_done =
        [("db_deploy", "CREATE_COMPLETE", "ok", "05:00:03"), ("app_deploy", "CREATE_IN_PROGRESS", "", "05:00:03")];
    poll_answers(&server, 200, detail("web", "CREATE_IN_PROGRESS", "", &db_done), 1).await;
    let all_done =
        [("db_deploy", "CREATE_COMPLETE", "ok", "05:00:03"), ("app_deploy", "CREATE_COMPLETE", "ok", "05:00:08")];
    poll_answers(&server, 200, detail("web", "CREATE_COMPLETE", "Stack CREATE completed successfully", &all_done), 1)
        .await;
    let (result, out) = create_and_wait(&server, &[]).await;
    assert_eq!(result.unwrap(), ExitStatus::Success);
    assert_eq!(
        out,
        "05:00:09 web CREATE_IN_PROGRESS\n\
         05:00:01 db_deploy CREATE_IN_PROGRESS\n\
         05:00:00 app_deploy INIT_COMPLETE\n\
         05:00:03 db_deploy CREATE_COMPLETE\n\
         05:00:03 app_deploy CREATE_IN_PROGRESS\n\
         05:00:08 app_deploy CREATE_COMPLETE\n\
         05:00:09 web CREATE_COMPLETE\n"
    );
}

#[tokio::test]
async fn create_wait_fails_with_the_reasons() {
    let server = MockServer::start().await;
    accept(&server, "POST", "/v1/stacks", "CREATE_IN_PROGRESS").await;
    let failed = [(
        "app_deploy",
        "CREATE_FAILED",
        "deploy_status_code : Deployment exited with non-zero status code: 1",
        "05:00:05",
    )];
    poll_answers(&server, 200, detail("web", "CREATE_FAILED", "Resource CREATE failed: app_deploy", &failed), 1).await;
    let (result, out) = create_and_wait(&server, &[]).await;
    assert_eq!(result.unwrap(), ExitStatus::Failed);
    assert_eq!(
        out,
        "05:00:05 app_deploy CREATE_FAILED: deploy_status_code : Deployment exited with non-zero status code: 1\n\
         05:00:09 web CREATE_FAILED: Resource CREATE failed: app_deploy\n"
    );
}

#[tokio::test]
async fn create_wait_times_out() {
    let server = MockServer::start().await;
    accept(&server, "POST", "/v1/stacks", "CREATE_IN_PROGRESS").await;
    poll_answers(&server, 200, detail("web", "CREATE_IN_PROGRESS", "", &[]), u64::MAX).await;
    let started = std::time::Instant::now();
    let (result, out) = create_and_wait(&server, &["--timeout", "1"]).await;
    assert_eq!(result.unwrap(), ExitStatus::Failed);
    assert!(started.elapsed() < Duration::from_secs(3), "{:?}", started.elapsed());
    assert_eq!(
        out,
        "05:00:09 web CREATE_IN_PROGRESS\ntimed out after 1 s waiting for stack web (last status CREATE_IN_PROGRESS)\n"
    );
}

#[tokio::test]
async fn update_wait_ignores_the_previous_action() {
    let server = MockServer::start().await;
    accept(&server, "PUT", "/v1/stacks/web", "UPDATE_IN_PROGRESS").await;
    poll_answers(&server, 200, detail("web", "CREATE_COMPLETE", "", &[]), 1).await;
    poll_answers(&server, 200, detail("web", "UPDATE_COMPLETE", "", &[]), 1).await;
    let dir = tempfile::tempdir().unwrap();
    let template = write_file(dir.path(), "web.yaml", TEMPLATE);
    let (result, out) = run_against(&server, &["stack", "update", "web", "--template", &template, "--wait"]).await;
    assert_eq!(result.unwrap(), ExitStatus::Success);
    assert_eq!(out, "05:00:09 web CREATE_COMPLETE\n05:00:09 web UPDATE_COMPLETE\n");
}

#[tokio::test]
async fn delete_wait_treats_404_as_complete() {
    let server = MockServer::start().await;
    accept(&server, "DELETE", "/v1/stacks/web", "DELETE_IN_PROGRESS").await;
    poll_answers(
        &server,
        200,
        detail("web", "DELETE_IN_PROGRESS", "", &[("db_deploy", "DELETE_IN_PROGRESS", "", "05:00:10")]),
        1,
    )
    .await;
    poll_answers(&server, 404, json!({"error": {"code": 404, "message": "stack web not found"}}), 1).await;
    let (result, out) = run_against(&server, &["stack", "delete", "web", "--wait"]).await;
    assert_eq!(result.unwrap(), ExitStatus::Success);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[..2], ["05:00:09 web DELETE_IN_PROGRESS", "05:00:10 db_deploy DELETE_IN_PROGRESS"]);
    assert_eq!(lines.len(), 3, "{out}");
    assert!(lines[2].ends_with(" web DELETE_COMPLETE") && lines[2].len() == "hh:mm:ss web DELETE_COMPLETE".len());
}

#[tokio::test]
async fn delete_wait_fails_on_delete_failed() {
    let server = MockServer::start().await;
    accept(&server, "DELETE", "/v1/stacks/web", "DELETE_IN_PROGRESS").await;
    poll_answers(&server, 200, detail("web", "DELETE_FAILED", "timed out", &[]), 1).await;
    let (result, out) = run_against(&server, &["stack", "delete", "web", "--wait", "--timeout", "5"]).await;
    assert_eq!(result.unwrap(), ExitStatus::Failed);
    assert_eq!(out, "05:00:09 web DELETE_FAILED: timed out\n");
}

#[tokio::test]
async fn wait_rides_out_a_server_error() {
    let server = MockServer::start().await;
    accept(&server, "POST", "/v1/stacks", "CREATE_IN_PROGRESS").await;
    poll_answers(&server, 503, json!({"error": {"code": 503, "message": "shutting down"}}), 2).await;
    poll_answers(&server, 200, detail("web", "CREATE_COMPLETE", "", &[]), 1).await;
    let (result, out) = create_and_wait(&server, &[]).await;
    assert_eq!(result.unwrap(), ExitStatus::Success);
    assert_eq!(out, "05:00:09 web CREATE_COMPLETE\n");
}

#[tokio::test]
async fn wait_stops_on_a_client_error() {
    let server = MockServer::start().await;
    accept(&server, "POST", "/v1/stacks", "CREATE_IN_PROGRESS").await;
    poll_answers(&server, 403, json!({"error": {"code": 403, "message": "forbidden"}}), 1).await;
    let (result, _) = create_and_wait(&server, &[]).await;
    let error = result.unwrap_err();
    assert_eq!((error.report(), error.exit_code()), ("forbidden".to_string(), 1));
}

#[tokio::test]
async fn wait_json_prints_only_the_final_stack() {
    let server = MockServer::start().await;
    accept(&server, "POST", "/v1/stacks", "CREATE_IN_PROGRESS").await;
    poll_answers(&server, 200, detail("web", "CREATE_IN_PROGRESS", "", &[]), 1).await;
    let done = detail("web", "CREATE_COMPLETE", "", &[("db_deploy", "CREATE_COMPLETE", "", "05:00:03")]);
    poll_answers(&server, 200, done.clone(), 1).await;
    let (result, out) = create_and_wait(&server, &["--json"]).await;
    assert_eq!(result.unwrap(), ExitStatus::Success);
    assert_eq!(serde_json::from_str::<Value>(&out).unwrap(), done);
}
