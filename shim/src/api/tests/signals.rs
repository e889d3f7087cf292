//! Signal routes: Heat's body acceptance rule for deployment signals, the body limit, the
//! acknowledgements, and both wait-condition body styles.

use reqwest::Method;
use serde_json::{Value, json};

use super::*;

fn signal_path(token: &str) -> String {
    format!("/v1/signals/{token}")
}

/// Posts `body` with `content_type` (None: no header) and returns what the engine received.
async fn received_details(server: &TestServer, content_type: Option<&str>, body: &str) -> Value {
    let mut request = server.request(Method::POST, &signal_path(APPLIED_TOKEN)).body(body.to_string());
    if let Some(content_type) = content_type {
        request = request.header("content-type", content_type);
    }
    let (status, answer) = json_of(request.send().await.unwrap()).await;
    assert_eq!((status, answer), (200, json!({"result": "applied"})), "{content_type:?} {body:?}");
    server.service.calls(|calls| calls.deployment_signals.last().unwrap().1.clone())
}

#[tokio::test]
async fn json_content_types_are_parsed() {
    let server = TestServer::start().await;
    let body = r#"{"deploy_status_code": 1, "deploy_stdout": "out"}"#;
    for content_type in
        [None, Some(""), Some("application/json"), Some("application/json; charset=utf-8"), Some("JSON")]
    {
        assert_eq!(received_details(&server, content_type, body).await["deploy_status_code"], 1, "{content_type:?}");
    }
    for content_type in ["text/plain", "text/plain; charset=UTF-8", "Application/JSON"] {
        assert_eq!(received_details(&server, Some(content_type), body).await["deploy_stdout"], "out");
    }
    let padded = format!(" \n\t{body}");
    assert_eq!(received_details(&server, Some("application/json"), &padded).await["deploy_stdout"], "out");
}

#[tokio::test]
async fn other_bodies_count_as_empty_like_heat() {
    let server = TestServer::start().await;
    let body = r#"{"deploy_status_code": 1}"#;
    for content_type in ["application/x-www-form-urlencoded", "application/xml", "text/html"] {
        assert_eq!(received_details(&server, Some(content_type), body).await, json!({}), "{content_type}");
    }
    for body in ["", "[1, 2]", "\"text\"", "deploy_status_code=1", "null", "not json {"] {
        assert_eq!(received_details(&server, Some("application/json"), body).await, json!({}), "{body:?}");
    }
}

#[tokio::test]
async fn malformed_json_is_400() {
    let server = TestServer::start().await;
    for body in ["{", r#"{"deploy_status_code": }"#, r#"{"a": 1} trailing"#] {
        let request = server.request(Method::POST, &signal_path(APPLIED_TOKEN)).body(body);
        let message = error_of(request.header("content-type", "application/json").send().await.unwrap(), 400).await;
        assert!(message.starts_with("signal body is not valid JSON: "), "{message}");
        assert!(message.contains("line 1 column"), "{message}");
    }
    assert!(server.service.calls(|calls| calls.deployment_signals.is_empty()));
}

#[tokio::test]
async fn body_limit_is_one_mebibyte() {
    let server = TestServer::start().await;
    let limit = 1024 * 1024;
    let fits = format!("{{\"deploy_stdout\": \"{}\"}}", "x".repeat(limit - 21));
    assert_eq!(fits.len(), limit);
    let details = received_details(&server, Some("application/json"), &fits).await;
    assert_eq!(details["deploy_stdout"].as_str().unwrap().len(), limit - 21);
    let too_big = format!("{fits} ");
    let request = server.request(Method::POST, &signal_path(APPLIED_TOKEN)).body(too_big);
    let message = error_of(request.send().await.unwrap(), 413).await;
    assert_eq!(message, "request body is larger than 1048576 bytes");
    let request = server.request(Method::PUT, &format!("/v1/waitconditions/{APPLIED_TOKEN}"));
    error_of(request.body(vec![b'{'; limit + 1]).send().await.unwrap(), 413).await;
}

#[tokio::test]
async fn acknowledgements_ids_and_verbs() {
    let server = TestServer::start().await;
    let cases = [(Method::POST, DUPLICATE_TOKEN, "duplicate"), (Method::PUT, STALE_TOKEN, "stale")];
    for (method, token, result) in cases {
        let response = server.request(method, &signal_path(token)).body("{}").send().await.unwrap();
        assert_eq!(json_of(response).await, (200, json!({ "result": result })));
    }
    let request = server.request(Method::PUT, &signal_path(APPLIED_TOKEN)).header("x-anneal-signal-id", "d1-3f2a");
    assert_eq!(request.body("{}").send().await.unwrap().status(), 200);
    let ids: Vec<Option<String>> =
        server.service.calls(|calls| calls.deployment_signals.iter().map(|signal| signal.2.clone()).collect());
    assert_eq!(ids, [None, None, Some("d1-3f2a".to_string())]);
    let request = server
        .request(Method::POST, &signal_path(APPLIED_TOKEN))
        .header("x-anneal-signal-id", reqwest::header::HeaderValue::from_bytes(b"caf\xe9").unwrap());
    let message = error_of(request.body("{}").send().await.unwrap(), 400).await;
    assert_eq!(message, "X-Anneal-Signal-Id must be visible ASCII");
}

#[tokio::test]
async fn unknown_signal_tokens_are_404() {
    let server = TestServer::start().await;
    for token in [UNKNOWN_TOKEN, WEB_TOKEN, "short", "ZZ"] {
        let response = server.request(Method::POST, &signal_path(token)).body("{}").send().await.unwrap();
        assert_eq!(error_of(response, 404).await, "signal token not found", "{token}");
        let path = format!("/v1/waitconditions/{token}");
        let response = server.request(Method::POST, &path).send().await.unwrap();
        assert_eq!(error_of(response, 404).await, "wait condition handle token not found");
    }
}

fn wait_path() -> String {
    format!("/v1/waitconditions/{APPLIED_TOKEN}")
}

async fn last_wait_signal(server: &TestServer) -> WaitConditionSignal {
    server.service.calls(|calls| calls.wait_signals.last().unwrap().1.clone())
}

#[tokio::test]
async fn heat_style_wait_condition_bodies() {
    let server = TestServer::start().await;
    for body in ["", "  ", "{}"] {
        let response = server.request(Method::POST, &wait_path()).body(body).send().await.unwrap();
        assert_eq!(json_of(response).await, (200, json!({"result": "applied"})));
        let expected = WaitConditionSignal { success: true, reason: None, data: None, id: None };
        assert_eq!(last_wait_signal(&server).await, expected, "{body:?}");
    }
    let body = json!({"status": "FAILURE", "reason": "disk full", "data": {"free": 0}, "id": 7});
    let response = server.request(Method::POST, &wait_path()).body(body.to_string()).send().await.unwrap();
    assert_eq!(response.status(), 200);
    let expected = WaitConditionSignal {
        success: false,
        reason: Some("disk full".to_string()),
        data: Some(json!({"free": 0})),
        id: Some("7".to_string()),
    };
    assert_eq!(last_wait_signal(&server).await, expected);
    let response = server.request(Method::POST, &format!("/v1/waitconditions/{STALE_TOKEN}")).send().await.unwrap();
    assert_eq!(json_of(response).await, (200, json!({"result": "stale"})));
}

#[tokio::test]
async fn aws_style_wait_condition_bodies() {
    let server = TestServer::start().await;
    let body = json!({"Status": "SUCCESS", "Reason": "Configuration Complete", "UniqueId": "i-1", "Data": "done"});
    // cfn-signal sends `Content-Type:` empty; curl drops the header entirely.
    let response = server.request(Method::PUT, &wait_path()).body(body.to_string()).send().await.unwrap();
    assert_eq!(json_of(response).await, (200, json!({"result": "applied"})));
    let expected = WaitConditionSignal {
        success: true,
        reason: Some("Configuration Complete".to_string()),
        data: Some(json!("done")),
        id: Some("i-1".to_string()),
    };
    assert_eq!(last_wait_signal(&server).await, expected);
    let body = json!({"Status": "FAILURE", "Reason": "r", "UniqueId": 5, "Data": null});
    let response = server.request(Method::PUT, &wait_path()).body(body.to_string()).send().await.unwrap();
    assert_eq!(response.status(), 200);
    let signal = last_wait_signal(&server).await;
    assert_eq!((signal.success, signal.id.as_deref(), signal.data), (false, Some("5"), Some(Value::Null)));
}

#[tokio::test]
async fn invalid_wait_condition_bodies_are_400() {
    let server = TestServer::start().await;
    let cases = [
        (Method::POST, r#"{"status": "SUCCESS", "x": 1}"#, "unknown field `x`"),
        (Method::POST, r#"{"status": "DONE"}"#, "unknown variant `DONE`"),
        (Method::POST, r#"{"Status": "SUCCESS"}"#, "unknown field `Status`"),
        (Method::POST, "[]", "must be a JSON object"),
        (Method::POST, "\"SUCCESS\"", "must be a JSON object"),
        (Method::PUT, r#"["SUCCESS", "r", "u", "d"]"#, "must be a JSON object"),
        (Method::POST, "{", "EOF while parsing"),
        (Method::PUT, "", "EOF while parsing"),
        (Method::PUT, "{}", "missing field `Status`"),
        (Method::PUT, r#"{"Status": "SUCCESS", "Reason": "r", "UniqueId": "u"}"#, "missing field `Data`"),
        (Method::PUT, r#"{"Status": "SUCCESS", "Reason": "r", "UniqueId": "u", "Data": 1, "X": 2}"#, "unknown field"),
        (Method::PUT, r#"{"status": "SUCCESS"}"#, "unknown field `status`"),
    ];
    for (method, body, expected) in cases {
        let response = server.request(method.clone(), &wait_path()).body(body).send().await.unwrap();
        let message = error_of(response, 400).await;
        assert!(message.starts_with("Metadata format invalid: "), "{message}");
        assert!(message.contains(expected), "{method} {body}: {message}");
    }
    assert!(server.service.calls(|calls| calls.wait_signals.is_empty()));
}
