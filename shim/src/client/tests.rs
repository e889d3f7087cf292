//! Tests of the client commands against wiremock servers on 127.0.0.1: each command's request
//! (method, path, bearer header, body) and its printed output, the `--wait` loop, error
//! reporting and exit codes, and the agent config formats.

mod formats;
mod reads;
mod waiting;
mod writes;

use std::path::Path;
use std::time::Duration;

use clap::Parser;
use serde_json::{Value, json};
use wiremock::MockServer;

use super::cli::{Cli, ClientCommand, Command};
use super::{ClientContext, ClientError, ExitStatus, commands};

const ADMIN_TOKEN: &str = "admintoken";
const BEARER: &str = "Bearer admintoken";
/// `--wait` polls this fast in tests.
const TEST_INTERVAL: Duration = Duration::from_millis(10);

/// Parses `arguments` (after `anneal-shim`) as a client command.
fn client_command(arguments: &[&str]) -> ClientCommand {
    let cli = Cli::try_parse_from(std::iter::once("anneal-shim").chain(arguments.iter().copied()))
        .unwrap_or_else(|error| panic!("{arguments:?}: {error}"));
    match cli.command {
        Command::Server { command } => command.into(),
        Command::Stack { command } => command.into(),
        Command::Serve { .. } | Command::Template { .. } => panic!("not a client command"),
    }
}

fn context(url: &str) -> ClientContext {
    ClientContext {
        url: url.to_string(),
        token: Some(ADMIN_TOKEN.to_string()),
        token_file: "/nonexistent".into(),
        ca_file: None,
    }
}

/// Runs a command against `server` with the admin token from the context; returns the result and stdout.
async fn run_against(server: &MockServer, arguments: &[&str]) -> (Result<ExitStatus, ClientError>, String) {
    run_with(&context(&server.uri()), arguments).await
}

async fn run_with(context: &ClientContext, arguments: &[&str]) -> (Result<ExitStatus, ClientError>, String) {
    let mut out = Vec::new();
    let result = commands::execute(client_command(arguments), context, TEST_INTERVAL, &mut out).await;
    (result, String::from_utf8(out).unwrap())
}

fn write_file(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.to_str().unwrap().to_string()
}

fn summary(name: &str, status: &str, reason: &str) -> Value {
    json!({
        "name": name, "id": "6f1c", "status": status, "status_reason": reason,
        "created_at": "2026-11-21T05:00:00Z", "updated_at": "2026-11-21T05:00:09Z",
    })
}

/// A resource as `(name, status, reason, updated_at time of day)`.
type ResourceFixture<'a> = (&'a str, &'a str, &'a str, &'a str);

fn detail(name: &str, status: &str, reason: &str, resources: &[ResourceFixture<'_>]) -> Value {
    let mut value = summary(name, status, reason);
    let resources: Vec<Value> = resources
        .iter()
        .map(|(resource, status, reason, time)| {
            json!({
                "name": resource, "resource_type": "OS::Heat::SoftwareDeployment", "status": status,
                "status_reason": reason, "server": "web1", "updated_at": format!("2026-11-21T{time}Z"),
            })
        })
        .collect();
    value["parameters"] = json!({"server": "web1", "db_password": "******"});
    value["resources"] = Value::Array(resources);
    value["outputs"] = json!([{"name": "result", "description": "stdout", "value": "hello\nworld"}]);
    value
}

#[test]
fn exit_codes_separate_usage_from_server_problems() {
    let usage = ClientError::DuplicateParameter { name: "a".to_string() };
    assert_eq!(usage.exit_code(), 2);
    let server = ClientError::Api { status: 409, message: "stack web already exists".to_string(), problems: vec![] };
    assert_eq!(server.exit_code(), 1);
    let unreachable = ClientError::Connect { url: "http://x".to_string(), reason: "refused".to_string() };
    assert_eq!(unreachable.exit_code(), 1);
    assert_eq!(ExitStatus::Success.code(), 0);
    assert_eq!(ExitStatus::Failed.code(), 1);
}

#[test]
fn report_lists_template_problems_one_per_line() {
    let error = ClientError::Api {
        status: 400,
        message: "template is invalid: a; b".to_string(),
        problems: vec!["resource a: bad".to_string(), "resource b:\nworse".to_string()],
    };
    assert_eq!(error.report(), "template is invalid: a; b\n  - resource a: bad\n  - resource b:\\nworse");
}

#[test]
fn report_includes_the_cause_chain() {
    let error = ClientError::ReadTemplate {
        path: "/tmp/missing.yaml".into(),
        source: std::io::Error::new(std::io::ErrorKind::NotFound, "No such file or directory"),
    };
    assert_eq!(error.report(), "cannot read template file /tmp/missing.yaml: No such file or directory");
}

#[test]
fn context_prefers_flags_then_environment_then_defaults() {
    use super::cli::ConnectionArgs;
    let flags = ConnectionArgs { url: Some("http://flag:1".to_string()), token_file: "/t".into(), tls_ca: None };
    let context = ClientContext::new(&flags, Some("http://env:2".to_string()), Some(" tok \n".to_string()));
    assert_eq!((context.url.as_str(), context.token.as_deref()), ("http://flag:1", Some("tok")));
    let no_flag = ConnectionArgs { url: None, token_file: "/t".into(), tls_ca: None };
    let context = ClientContext::new(&no_flag, Some("http://env:2".to_string()), Some(String::new()));
    assert_eq!((context.url.as_str(), context.token), ("http://env:2", None));
    let context = ClientContext::new(&no_flag, None, None);
    assert_eq!(context.url, super::cli::DEFAULT_URL);
}
