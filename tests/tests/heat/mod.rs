//! Helpers for feeding anneal-agent Heat-shaped documents it did not produce: the fixtures of
//! `tests/fixtures/heat/`, every URL in them moved onto a loopback receiver (tests never
//! contact 192.0.2.x), the receiver's captured signals, Python's `json.dumps` bytes (computed
//! by python3 itself) and Heat's failure rule (docs/metadata.md "How Heat (and the shim) read a
//! result").

#![allow(dead_code)]

use std::path::PathBuf;
use std::time::Duration;

use anneal_tests::run_command;
use serde_json::Value;
use tokio::process::Command;
use wiremock::matchers::method;
use wiremock::{Mock, MockServer, Request, ResponseTemplate};

/// The hook heat-agents' tests call `hook-fake.py`, rewritten: outputs are the inputs of the same
/// name, the `deploy_*` keys come from the inputs or default to stdout/stderr/"0".
pub const FAKE_HOOK: &str = r#"#!/usr/bin/env python3
import json, sys
deployment = json.load(sys.stdin)
inputs = {item["name"]: item.get("value", "") for item in deployment["inputs"]}
response = {}
for output in deployment.get("outputs") or []:
    response[output["name"]] = inputs.get(output["name"], "")
response.update({
    "deploy_stdout": inputs.get("deploy_stdout", "stdout"),
    "deploy_stderr": inputs.get("deploy_stderr", "stderr"),
    "deploy_status_code": inputs.get("deploy_status_code", "0"),
})
json.dump(response, sys.stdout)
"#;

/// A hook that crashes with a traceback (heat-agents' `hook-fake-raises.py`).
pub const RAISING_HOOK: &str = "#!/usr/bin/env python3\nraise OSError('Something bad happened!')\n";

/// A hook that prints its input `emit` verbatim: whatever stdout a test needs.
pub const EMIT_HOOK: &str = r#"#!/usr/bin/env python3
import json, sys
deployment = json.load(sys.stdin)
inputs = {item["name"]: item.get("value") for item in deployment["inputs"]}
sys.stdout.write(inputs["emit"])
"#;

pub fn fixture_path(name: &str) -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/heat")).join(name)
}

pub fn fixture(name: &str) -> Value {
    let path = fixture_path(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|error| panic!("{}: {error}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|error| panic!("{}: {error}", path.display()))
}

/// Replaces the scheme and authority of every URL in `value` by `base` + `/from/<authority>`
/// (`:` as `_`), keeping path and query byte for byte: `http://192.0.2.5:8000/v1/x?q` becomes
/// `<base>/from/192.0.2.5_8000/v1/x?q`.
pub fn to_loopback(value: &mut Value, base: &str) {
    match value {
        Value::String(text) => {
            if let Some(scheme_end) = text.find("://").filter(|index| text[..*index].chars().all(char::is_alphabetic)) {
                let rest = &text[scheme_end + 3..];
                let authority_end = rest.find('/').unwrap_or(rest.len());
                let authority = rest[..authority_end].replace(':', "_");
                *text = format!("{base}/from/{authority}{}", &rest[authority_end..]);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|item| to_loopback(item, base)),
        Value::Object(map) => map.values_mut().for_each(|item| to_loopback(item, base)),
        _ => {}
    }
}

/// Every string in `value` that looks like a URL, for checking that all are loopback.
pub fn urls(value: &Value) -> Vec<String> {
    match value {
        Value::String(text) if text.contains("://") => vec![text.clone()],
        Value::Array(items) => items.iter().flat_map(urls).collect(),
        Value::Object(map) => map.values().flat_map(urls).collect(),
        _ => Vec::new(),
    }
}

/// A loopback server answering 200 to every POST and PUT.
pub async fn receiver() -> MockServer {
    let server = MockServer::start().await;
    for verb in ["POST", "PUT"] {
        Mock::given(method(verb)).respond_with(ResponseTemplate::new(200)).mount(&server).await;
    }
    server
}

/// Everything `server` received, in arrival order.
pub async fn received(server: &MockServer) -> Vec<Request> {
    server.received_requests().await.unwrap_or_default()
}

/// The request whose path and query are `target` (panics unless exactly one).
pub fn request_to<'a>(requests: &'a [Request], target: &str) -> &'a Request {
    let matching: Vec<&Request> = requests.iter().filter(|request| path_and_query(request) == target).collect();
    assert_eq!(
        matching.len(),
        1,
        "one request to {target}: {:?}",
        requests.iter().map(path_and_query).collect::<Vec<_>>()
    );
    matching[0]
}

pub fn path_and_query(request: &Request) -> String {
    match request.url.query() {
        Some(query) => format!("{}?{query}", request.url.path()),
        None => request.url.path().to_string(),
    }
}

/// Asserts what heat-config-notify does on the wire (docs/metadata.md "The HTTP signal"): the verb, `content-type:
/// application/json`, and a body that is exactly Python's `json.dumps` of itself.
pub async fn assert_notify_shape(requests: &[&Request], verb: &str) {
    let bodies: Vec<String> = requests
        .iter()
        .map(|request| String::from_utf8(request.body.clone()).expect("an ASCII body (ensure_ascii)"))
        .collect();
    let dumped = python_json_dumps(&bodies).await;
    for ((request, body), dumped) in requests.iter().zip(&bodies).zip(&dumped) {
        assert_eq!(request.method.as_str(), verb, "verb for {}", request.url);
        let content_type = request.headers.get("content-type").map(|value| value.to_str().unwrap_or_default());
        assert_eq!(content_type, Some("application/json"), "content-type for {}", request.url);
        assert_eq!(body, dumped, "the body is json.dumps bytes for {}", request.url);
    }
}

/// `json.dumps(json.loads(text))` of each text, as python3 computes it (one process for all).
pub async fn python_json_dumps(texts: &[String]) -> Vec<String> {
    let program =
        "import json, sys\nprint(json.dumps([json.dumps(json.loads(text)) for text in json.loads(sys.argv[1])]))";
    let mut command = Command::new("python3");
    command.args(["-c", program]).arg(serde_json::to_string(texts).expect("json"));
    let stdout =
        run_command(command, Duration::from_secs(20)).await.expect_success("python3 json.dumps (python3 is required)");
    serde_json::from_str(&stdout).unwrap_or_else(|error| panic!("python3 printed {stdout:?}: {error}"))
}

/// Heat's failure rule (docs/hook-protocol.md "The failure rule"): FAILED iff `deploy_status_code` is truthy and its `str()` is not
/// `"0"`, or an output declared `error_output: true` is present. Only the string `"0"` is both
/// truthy and `"0"` when printed, so the first half is "truthy and not the string 0".
pub fn heat_fails(body: &Value, outputs: &[Value]) -> bool {
    let code = body.get("deploy_status_code").unwrap_or(&Value::Null);
    let truthy = match code {
        Value::Null => false,
        Value::Bool(flag) => *flag,
        Value::Number(number) => number.as_f64() != Some(0.0),
        Value::String(text) => !text.is_empty(),
        Value::Array(items) => !items.is_empty(),
        Value::Object(map) => !map.is_empty(),
    };
    let code_fails = truthy && code != "0";
    let error_output = outputs.iter().any(|output| {
        output["error_output"] == true && output["name"].as_str().is_some_and(|name| body.get(name).is_some())
    });
    code_fails || error_output
}
