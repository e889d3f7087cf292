//! Admin routes: the auth matrix, each route's status and body, the ServiceError mapping and
//! axum's own rejections (unknown route, wrong method, unreadable bodies) as JSON errors.

use reqwest::Method;
use serde_json::{Value, json};

use super::*;

#[tokio::test]
async fn admin_auth_matrix() {
    let server = TestServer::start().await;
    let response = server.get("/v1/stacks").send().await.unwrap();
    assert_eq!(response.headers()["www-authenticate"], "Bearer");
    let message = error_of(response, 401).await;
    assert!(message.contains("Bearer <token>"), "{message}");
    for malformed in ["Basic YWRtaW46YWRtaW4=", "Bearer", "Bearer ", "Bearer a b", ADMIN_TOKEN] {
        let response = server.get("/v1/stacks").header("authorization", malformed).send().await.unwrap();
        error_of(response, 401).await;
    }
    for wrong in [WEB_TOKEN, UNKNOWN_TOKEN, "not-even-hex"] {
        let response = server.get("/v1/stacks").bearer_auth(wrong).send().await.unwrap();
        let message = error_of(response, 403).await;
        assert!(message.contains("admin"), "{message}");
    }
    let response = server.get("/v1/stacks").header("authorization", format!("bearer  {ADMIN_TOKEN}")).send();
    assert_eq!(response.await.unwrap().status(), 200);
    for (method, path) in [
        (Method::POST, "/v1/servers"),
        (Method::GET, "/v1/servers"),
        (Method::DELETE, "/v1/servers/web"),
        (Method::POST, "/v1/stacks"),
        (Method::GET, "/v1/stacks/one"),
        (Method::PUT, "/v1/stacks/one"),
        (Method::DELETE, "/v1/stacks/one"),
        (Method::GET, "/v1/stacks/one/events"),
    ] {
        let response = server.request(method.clone(), path).send().await.unwrap();
        assert_eq!(response.status(), 401, "{method} {path}");
        let response = server.request(method.clone(), path).bearer_auth(WEB_TOKEN).send().await.unwrap();
        assert_eq!(response.status(), 403, "{method} {path}");
    }
}

#[tokio::test]
async fn authentication_comes_before_the_body() {
    let server = TestServer::start().await;
    let huge = vec![b'x'; 2 * 1024 * 1024];
    let response = server.request(Method::POST, "/v1/stacks").body(huge).send().await.unwrap();
    error_of(response, 401).await;
}

#[tokio::test]
async fn servers_add_and_list() {
    let server = TestServer::start().await;
    let response = server.admin(Method::POST, "/v1/servers").body(r#"{"name": "app"}"#).send().await.unwrap();
    let (status, body) = json_of(response).await;
    assert_eq!(status, 201);
    assert_eq!(body["name"], "app");
    assert_eq!(body["token"], UNKNOWN_TOKEN);
    assert_eq!(body["metadata_url"], "http://127.0.0.1:8080/v1/servers/app/metadata");
    let response = server.admin(Method::POST, "/v1/servers").body(r#"{"name": "web"}"#).send().await.unwrap();
    assert_eq!(error_of(response, 409).await, "server web already exists");
    let (status, body) = json_of(server.admin(Method::GET, "/v1/servers").send().await.unwrap()).await;
    assert_eq!(status, 200);
    let names: Vec<&str> = body.as_array().unwrap().iter().map(|entry| entry["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["db", "web"]);
    assert_eq!(body[0]["metadata_version"], 1);
}

#[tokio::test]
async fn servers_delete_revokes_the_token_and_refuses_unknown_or_used_servers() {
    let server = TestServer::start().await;
    let response = server.admin(Method::DELETE, "/v1/servers/web").send().await.unwrap();
    assert_eq!(response.status(), 204);
    assert!(response.text().await.unwrap().is_empty());
    let response = server.admin(Method::DELETE, "/v1/servers/web").send().await.unwrap();
    assert_eq!(error_of(response, 404).await, "server web not found");
    let response = server.admin(Method::DELETE, "/v1/servers/db").send().await.unwrap();
    assert_eq!(error_of(response, 409).await, "server db is used by stack(s) app");
    // The removed server's token now gets exactly what a token nobody holds gets.
    for token in [WEB_TOKEN, UNKNOWN_TOKEN] {
        let response = server.get("/v1/servers/web/metadata").bearer_auth(token).send().await.unwrap();
        assert_eq!(error_of(response, 403).await, "the token does not grant access to the metadata of server web");
        let response = server.get(&format!("/v1/metadata/{token}")).send().await.unwrap();
        assert_eq!(error_of(response, 404).await, "metadata not found");
    }
    let response = server.get("/v1/servers/db/metadata").bearer_auth(DB_TOKEN).send().await.unwrap();
    assert_eq!(response.status(), 200, "the refused removal changed nothing");
    let (status, body) = json_of(server.admin(Method::GET, "/v1/servers").send().await.unwrap()).await;
    assert_eq!((status, body.as_array().unwrap().len()), (200, 1));
}

#[tokio::test]
async fn bad_json_bodies_name_the_problem() {
    let server = TestServer::start().await;
    let cases = [
        ("", "request body is empty"),
        ("  \n", "request body is empty"),
        ("{nope", "invalid request body: key must be a string"),
        (r#"{"name": "a", "colour": "red"}"#, "unknown field `colour`"),
        (r#"{"name": 7}"#, "invalid type: integer `7`"),
        ("[]", "invalid request body"),
    ];
    for (body, expected) in cases {
        let response = server.admin(Method::POST, "/v1/servers").body(body).send().await.unwrap();
        let message = error_of(response, 400).await;
        assert!(message.contains(expected), "{body:?}: {message}");
    }
    let response = server.admin(Method::POST, "/v1/stacks").body(r#"{"name": "s"}"#).send().await.unwrap();
    let message = error_of(response, 400).await;
    assert!(message.contains("missing field `template`"), "{message}");
    let response = server.admin(Method::POST, "/v1/stacks").body(vec![b' '; 1024 * 1024 + 1]).send().await.unwrap();
    assert_eq!(error_of(response, 413).await, "request body is larger than 1048576 bytes");
}

#[tokio::test]
async fn stack_create_list_show_events() {
    let server = TestServer::start().await;
    let request = json!({"name": "one", "template": "heat_template_version: 2018-08-31", "parameters": {"k": "v=w"}});
    let response = server.admin(Method::POST, "/v1/stacks").body(request.to_string()).send().await.unwrap();
    let (status, body) = json_of(response).await;
    assert_eq!((status, &body["status"]), (201, &json!("CREATE_IN_PROGRESS")));
    let received = server.service.calls(|calls| calls.stack_requests[0].1.clone());
    assert_eq!(received.parameters["k"], "v=w");
    assert_eq!(received.timeout_secs, None);

    let (status, body) = json_of(server.admin(Method::GET, "/v1/stacks").send().await.unwrap()).await;
    assert_eq!((status, body.as_array().unwrap().len()), (200, 2));
    let (status, body) = json_of(server.admin(Method::GET, "/v1/stacks/one").send().await.unwrap()).await;
    assert_eq!(status, 200);
    assert_eq!(body["name"], "one", "summary is flattened: {body}");
    assert_eq!(body["parameters"]["password"], "******");
    let (status, body) = json_of(server.admin(Method::GET, "/v1/stacks/one/events").send().await.unwrap()).await;
    assert_eq!((status, &body[0]["reason"]), (200, &json!("Stack CREATE started")));
}

/// `?resolve_outputs=false` (Heat's parameter, any case) shows the stack without evaluating its
/// outputs; another value is 400 with Heat's text.
#[tokio::test]
async fn stack_show_resolves_outputs_unless_asked_not_to() {
    let server = TestServer::start().await;
    let outputs = |body: &serde_json::Value| body["outputs"].as_array().map(Vec::len);
    for (query, count) in [("", Some(1)), ("?resolve_outputs=true", Some(1)), ("?resolve_outputs=False", Some(0))] {
        let path = format!("/v1/stacks/one{query}");
        let (status, body) = json_of(server.admin(Method::GET, &path).send().await.unwrap()).await;
        assert_eq!((status, outputs(&body)), (200, count), "{query}: {body}");
    }
    let response = server.admin(Method::GET, "/v1/stacks/one?resolve_outputs=no").send().await.unwrap();
    assert_eq!(error_of(response, 400).await, "Invalid value 'no' specified for 'resolve_outputs'");
}

/// Heat's stack-create body fields `environment` and `files` reach the engine as sent; the
/// 1 MiB body limit covers them with the template.
#[tokio::test]
async fn stack_create_takes_heat_environment_and_files() {
    let server = TestServer::start().await;
    let environment = json!({"resource_registry": {"My::Config": "OS::Heat::SoftwareConfig"}});
    let request = json!({"name": "one", "template": "t", "environment": environment, "files": {"a.sh": "x"}});
    let response = server.admin(Method::POST, "/v1/stacks").body(request.to_string()).send().await.unwrap();
    assert_eq!(json_of(response).await.0, 201);
    let received = server.service.calls(|calls| calls.stack_requests[0].1.clone());
    assert_eq!((received.environment, received.files["a.sh"].clone()), (environment, json!("x")));
    let files = json!({"big": "x".repeat(1024 * 1024)});
    let request = json!({"name": "two", "template": "t", "files": files});
    let response = server.admin(Method::POST, "/v1/stacks").body(request.to_string()).send().await.unwrap();
    assert_eq!(error_of(response, 413).await, "request body is larger than 1048576 bytes");
}

#[tokio::test]
async fn stack_create_needs_a_name() {
    let server = TestServer::start().await;
    for body in [json!({"template": "t"}), json!({"name": "", "template": "t"})] {
        let response = server.admin(Method::POST, "/v1/stacks").body(body.to_string()).send().await.unwrap();
        let message = error_of(response, 400).await;
        assert!(message.contains("stack name is required"), "{message}");
    }
    assert!(server.service.calls(|calls| calls.stack_requests.is_empty()));
}

#[tokio::test]
async fn stack_update_and_delete() {
    let server = TestServer::start().await;
    for body in [json!({"template": "t"}), json!({"name": "one", "template": "t", "timeout_secs": 60})] {
        let response = server.admin(Method::PUT, "/v1/stacks/one").body(body.to_string()).send().await.unwrap();
        let (status, body) = json_of(response).await;
        assert_eq!((status, &body["status"]), (202, &json!("UPDATE_IN_PROGRESS")));
    }
    let requests = server.service.calls(|calls| calls.stack_requests.clone());
    assert!(requests.iter().all(|(name, request)| name == "one" && request.name.as_deref() == Some("one")));
    assert_eq!(requests[1].1.timeout_secs, Some(60));

    let body = json!({"name": "two", "template": "t"}).to_string();
    let response = server.admin(Method::PUT, "/v1/stacks/one").body(body).send().await.unwrap();
    let message = error_of(response, 400).await;
    assert_eq!(message, r#"the body names stack "two" but the URL names "one""#);

    let response = server.admin(Method::DELETE, "/v1/stacks/one").send().await.unwrap();
    let (status, body) = json_of(response).await;
    assert_eq!((status, &body["status"]), (202, &json!("DELETE_IN_PROGRESS")));
}

#[tokio::test]
async fn service_errors_map_to_statuses() {
    let server = TestServer::start().await;
    let response = server.admin(Method::GET, "/v1/stacks/missing").send().await.unwrap();
    assert_eq!(error_of(response, 404).await, "stack missing not found");
    let response = server.admin(Method::DELETE, "/v1/stacks/missing").send().await.unwrap();
    error_of(response, 404).await;
    let response = server.admin(Method::GET, "/v1/stacks/missing/events").send().await.unwrap();
    error_of(response, 404).await;
    let create = |name: &str| json!({"name": name, "template": "t"}).to_string();
    let response = server.admin(Method::POST, "/v1/stacks").body(create("taken")).send().await.unwrap();
    assert_eq!(error_of(response, 409).await, "stack taken already exists");
    let response = server.admin(Method::POST, "/v1/stacks").body(create("bad")).send().await.unwrap();
    assert_eq!(error_of(response, 400).await, "stack name must be short");
    let response = server.admin(Method::POST, "/v1/stacks").body(create("broken")).send().await.unwrap();
    assert_eq!(error_of(response, 500).await, "storage failure");

    let response = server.admin(Method::PUT, "/v1/stacks/invalid").body(create("invalid")).send().await.unwrap();
    let (status, body) = json_of(response).await;
    assert_eq!(status, 400);
    assert_eq!(
        body,
        json!({"error": {
            "code": 400,
            "message": "template is invalid: resource a: unknown type; dependency cycle: a -> a",
            "problems": ["resource a: unknown type", "dependency cycle: a -> a"],
        }})
    );
}

#[tokio::test]
async fn unknown_routes_and_methods_answer_json() {
    let server = TestServer::start().await;
    for path in ["/", "/v1", "/v2/stacks", "/v1/stacks/one/two/three", "/v1/signals/", "/v1/servers/web/metadata/x"] {
        let response = server.admin(Method::GET, path).send().await.unwrap();
        assert_eq!(error_of(response, 404).await, "route not found", "{path}");
    }
    let response = server.admin(Method::PATCH, "/v1/stacks/one").send().await.unwrap();
    let allow = response.headers()["allow"].to_str().unwrap().to_string();
    assert!(allow.contains("GET") && allow.contains("PUT") && allow.contains("DELETE"), "{allow}");
    assert_eq!(error_of(response, 405).await, "method PATCH is not allowed here");
    for (method, path) in [
        (Method::DELETE, "/v1/servers"),
        (Method::POST, "/v1/servers/web/metadata"),
        (Method::GET, "/v1/signals/x"),
        (Method::DELETE, "/v1/waitconditions/x"),
        (Method::POST, "/v1/metadata/x"),
    ] {
        let response = server.request(method.clone(), path).send().await.unwrap();
        error_of(response, 405).await;
    }
}

#[tokio::test]
async fn success_bodies_are_json() {
    let server = TestServer::start().await;
    let response = server.admin(Method::GET, "/v1/stacks").send().await.unwrap();
    assert_eq!(response.headers()["content-type"], "application/json");
    let body: Value = serde_json::from_str(&response.text().await.unwrap()).unwrap();
    assert!(body.is_array());
}

#[tokio::test]
async fn stack_events_page_with_limit_marker_and_sort_dir_as_heat() {
    let server = TestServer::start().await;
    let page = |query: &'static str| {
        let request = server.admin(Method::GET, &format!("/v1/stacks/many/events{query}"));
        async move {
            let (status, body) = json_of(request.send().await.unwrap()).await;
            assert_eq!(status, 200, "{query}: {body}");
            body.as_array().unwrap().iter().map(|event| event["id"].as_u64().unwrap()).collect::<Vec<u64>>()
        }
    };
    assert_eq!(page("").await, [1, 2, 3, 4, 5, 6, 7], "no limit: everything, oldest first");
    assert_eq!(page("?limit=3").await, [1, 2, 3]);
    assert_eq!(page("?limit=3&marker=3").await, [4, 5, 6]);
    assert_eq!(page("?limit=3&marker=6").await, [7]);
    assert_eq!(page("?limit=3&marker=7").await, Vec::<u64>::new());
    assert_eq!(page("?sort_dir=desc&limit=2").await, [7, 6]);
    assert_eq!(page("?sort_dir=desc&limit=2&marker=6").await, [5, 4]);
    assert_eq!(page("?limit=0").await, Vec::<u64>::new());
    assert_eq!(page("?marker=5&nested_depth=1").await, [6, 7], "parameters it does not know are ignored");
    for (query, expected) in [
        ("?limit=-1", "limit must be a non-negative integer"),
        ("?marker=abc", "marker must be a non-negative integer"),
        ("?sort_dir=up", "sort_dir must be asc or desc"),
    ] {
        let response = server.admin(Method::GET, &format!("/v1/stacks/many/events{query}")).send().await.unwrap();
        let message = error_of(response, 400).await;
        assert!(message.contains(expected), "{query}: {message}");
    }
}
