//! The checks behind anneal's fuzz targets, one function per target. Each takes arbitrary bytes,
//! feeds them to a parser the way the binaries do, and panics only when an invariant breaks
//! (a rejection is a normal outcome; a panic, a hang or an accepted value that breaks the
//! parser's own promises is a finding). The libFuzzer entries in `fuzz_targets/` are one line
//! each; `tests/tests/hostile_parsers.rs` includes this file on stable and replays the
//! committed corpora and crash cases through the same functions.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::OnceLock;

use anneal_protocol::deployment::{deployments_from_document, is_safe_id};
use anneal_protocol::signal::signal_body as encode_signal_body;
use anneal_protocol::waitcondition::{AwsWaitSignal, HeatWaitSignal, WaitStatus};
use anneal_protocol::{Deployment, HookResult, OutputDecl, evaluate};
use anneal_shim::api::signal_details;
use anneal_shim::engine::{Engine, EngineConfig, TokenKey};
use anneal_shim::model::{AddServer, Service, ServiceError, SignalAck, StackRequest, WaitConditionSignal};
use anneal_shim::store::SqliteStore;
use anneal_shim::template::{
    Environment, MAX_NESTED_DEPTH, MAX_RESOURCES, deep_update, expand_nested, flattened_text, merge_environment_files,
    parameter_placeholder, parameter_types, parse_environment, parse_stored_template, parse_template,
    parse_template_in, resolve_parameters, validate,
};
use serde_json::Value;

/// A metadata document (as the agent's sources parse it) through `deployments_from_document`:
/// every accepted deployment has a safe id, survives a serialise/parse round trip unchanged
/// (the agent journals and hands hooks the serialised form), and answers the transport and
/// component questions without panicking.
pub fn deployments(data: &[u8]) {
    let Ok(document) = serde_json::from_slice::<Value>(data) else { return };
    let (accepted, rejected) = deployments_from_document(&document);
    let entries = document.get("deployments").and_then(Value::as_array).map_or(0, Vec::len);
    assert!(accepted.len() + rejected.len() <= entries.max(1), "more results than entries");
    for rejection in &rejected {
        assert!(!rejection.reason.is_empty(), "a rejection without a reason");
    }
    for deployment in &accepted {
        assert!(is_safe_id(&deployment.id), "accepted unsafe id {:?}", deployment.id);
        let text = serde_json::to_string(deployment).expect("a deployment serialises");
        let again: Deployment = serde_json::from_str(&text).expect("a serialised deployment parses");
        assert_eq!(&again, deployment, "round trip changed the deployment");
        let _ = deployment.signal_transport();
        if let Ok(Some(resolved)) = deployment.resolve_component() {
            assert_eq!(resolved.id, deployment.id);
        }
    }
}

/// A HOT template through parse, parameter resolution (defaults only) and validation, as
/// `stack create` does: errors must name something, and a plan lists every resource once,
/// each after the resources it depends on.
pub fn template(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let template = match parse_template(text) {
        Ok(template) => template,
        Err(error) => {
            assert!(error.problems().iter().all(|problem| !problem.is_empty()), "an empty problem");
            return;
        }
    };
    let Ok(parameters) = resolve_parameters(&template, &BTreeMap::new()) else { return };
    let Ok(plan) = validate(&template, &parameters, &|name| name.starts_with("vm")) else { return };
    assert_eq!(plan.nodes.len(), template.resources.len(), "the plan lost or added resources");
    let mut placed = BTreeSet::new();
    for node in &plan.nodes {
        for dependency in &node.depends_on {
            assert!(placed.contains(dependency.as_str()), "{} is planned before {dependency}", node.name);
        }
        assert!(placed.insert(node.name.as_str()), "{} is planned twice", node.name);
    }
}

/// An environment and a template (the bytes before and after the first NUL; without one, the
/// whole input is the template), with a files map naming every line of the environment text:
/// environments parse and merge without panicking, a merge with itself changes nothing, and a
/// template accepted with the environment stores a resolved text that parses to the same
/// template (lines aside: the stored text is JSON on one line). The environment text also goes
/// through Heat's server-side merge of `environment_files`, twice in a row, without panicking.
pub fn environment(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let (environment_text, template_text) = text.split_once('\0').unwrap_or(("", text));
    let environment_files: serde_json::Map<String, Value> =
        [("env".to_owned(), Value::String(environment_text.to_owned()))].into_iter().collect();
    let types = parameter_types(template_text, &environment_files);
    let names = ["env".to_owned(), "env".to_owned()];
    let _ = merge_environment_files(&names, &environment_files, &Default::default(), &types);
    let Ok(sections) = parse_environment(environment_text) else { return };
    let mut merged = sections.clone();
    deep_update(&mut merged, sections.clone());
    assert_eq!(merged, sections, "merging an environment with itself changed it");
    let Ok(environment) = Environment::from_value(&Value::Object(sections)) else { return };
    let files: serde_json::Map<String, Value> =
        environment_text.lines().map(|line| (line.to_owned(), Value::String(line.repeat(2)))).collect();
    let Ok((template, resolved)) = parse_template_in(template_text, &environment, &files) else { return };
    let Some(resolved) = resolved else { return };
    let mut stored = parse_stored_template(&resolved).expect("the resolved text parses");
    for ((_, resource), (_, original)) in stored.resources.iter_mut().zip(&template.resources) {
        resource.line = original.line;
    }
    assert_eq!(stored, template, "the stored text is another template");
}

/// A template, an environment and provider templates (the input split at NUL bytes: the
/// template, the environment, then files named `f1.yaml`, `f2.yaml`, ...) through what
/// `template validate` does: parse with the environment and files, parameters from defaults or
/// placeholders, `expand_nested`, `validate`. Errors must name something; an expansion keeps the
/// limits (at most MAX_RESOURCES resources, names at most MAX_NESTED_DEPTH levels below the
/// root's, each once, nothing left to expand), and its stored form reads back the same outputs.
pub fn nested(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let mut parts = text.split('\0');
    let template_text = parts.next().unwrap_or_default();
    let environment_text = parts.next().unwrap_or_default();
    let files: serde_json::Map<String, Value> = parts
        .enumerate()
        .map(|(index, file)| (format!("f{}.yaml", index + 1), Value::String(file.to_owned())))
        .collect();
    let Ok(sections) = parse_environment(environment_text) else { return };
    let Ok(environment) = Environment::from_value(&Value::Object(sections)) else { return };
    let Ok((mut template, _)) = parse_template_in(template_text, &environment, &files) else { return };
    for (_, parameter) in &mut template.parameters {
        if parameter.default.is_none() {
            parameter.default = Some(parameter_placeholder(parameter.kind));
            parameter.constraints.clear();
        }
    }
    let Ok(mut parameters) = resolve_parameters(&template, &BTreeMap::new()) else { return };
    for (pseudo, value) in [("OS::stack_name", "fuzz"), ("OS::stack_id", "fuzz-id"), ("OS::project_id", "anneal")] {
        parameters.insert(pseudo.to_owned(), Value::String(value.to_owned()));
    }
    let flat = match expand_nested(&template, &environment, &files, &parameters) {
        Ok(Some(flat)) => flat,
        Ok(None) => return,
        Err(problems) => {
            assert!(!problems.is_empty() && problems.iter().all(|problem| !problem.is_empty()), "{problems:?}");
            return;
        }
    };
    assert!(flat.resources.len() <= MAX_RESOURCES, "{} resources", flat.resources.len());
    let mut names = BTreeSet::new();
    for (name, resource) in &flat.resources {
        assert!(name.split('/').count() <= MAX_NESTED_DEPTH + 1, "{name} is nested too deep");
        assert!(names.insert(name.as_str()), "{name} twice");
        assert!(resource.nested.is_none(), "{name} is left to expand");
    }
    let stored = parse_stored_template(&flattened_text(&flat)).expect("the stored form parses");
    assert_eq!(stored.outputs, flat.outputs, "the stored form is other outputs");
    if let Err(problems) = validate(&flat, &parameters, &|_| true) {
        assert!(problems.iter().all(|problem| !problem.is_empty()), "an empty problem");
    }
}

/// Content types a signal arrives with; the first input byte picks one.
const CONTENT_TYPES: [Option<&str>; 6] = [
    None,
    Some("application/json"),
    Some("text/plain; charset=utf-8"),
    Some(""),
    Some("application/xml"),
    Some("JSON"),
];

/// The shim's reading of signal bodies (Heat's acceptance rule, both wait-condition styles) and
/// the agent's side (a hook result evaluated by Heat's failure rule, encoded within a size limit
/// chosen by the second byte).
pub fn signal_body(data: &[u8]) {
    let Some((&selector, rest)) = data.split_first() else { return };
    let content_type = CONTENT_TYPES[usize::from(selector) % CONTENT_TYPES.len()];
    if let Ok(details) = signal_details(content_type, rest) {
        assert!(details.is_object(), "signal details must be an object: {details}");
    }
    let _ = HeatWaitSignal::from_body(rest);
    let _ = serde_json::from_slice::<AwsWaitSignal>(rest);
    let Some((&limit, body)) = rest.split_first() else { return };
    let Ok(result) = serde_json::from_slice::<HookResult>(body) else { return };
    let declarations: Vec<OutputDecl> = result
        .0
        .keys()
        .take(3)
        .map(|name| OutputDecl { name: name.clone(), error_output: false, extra: Default::default() })
        .collect();
    let _ = evaluate(&result, &declarations);
    let max_chars = 64 + usize::from(limit) * 16;
    let encoded = encode_signal_body(&result, max_chars);
    assert!(encoded.starts_with('{'), "a signal body must start with {{: {encoded}");
    let parsed: Value = serde_json::from_str(&encoded).expect("the encoded signal is JSON");
    let oversized = parsed["deploy_stderr"].as_str().is_some_and(|text| text.contains("does not fit"));
    assert!(encoded.len() <= max_chars || oversized, "{} characters over the {max_chars} limit", encoded.len());
}

/// Agent config text through `config::parse`: every error names the file, and an accepted
/// config keeps the promises the daemon relies on.
pub fn agent_config(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let path = Path::new("/fuzz/agent.toml");
    match anneal_agent::config::parse(text, path) {
        Ok(config) => {
            assert!(!config.sources.is_empty(), "a config without sources was accepted");
            assert!((1..=64).contains(&config.agent.parallel));
            assert!(config.agent.state_dir.is_absolute());
            assert!(config.agent.poll_interval.as_secs() >= 1);
        }
        Err(error) => {
            assert!(error.to_string().starts_with("/fuzz/agent.toml"), "error does not name the file: {error}")
        }
    }
}

/// A server's metadata (as `bootstrap --from-metadata` and every source read it) through the
/// self-configuration of its `os-collect-config` key: an accepted key gives one to four sources
/// of the four derived kinds with distinct names and an interval in range; a refused one says
/// which part of the key is wrong.
pub fn self_config(data: &[u8]) {
    use anneal_agent::selfconfig::{derive, key_of_metadata};
    let Ok(metadata) = serde_json::from_slice::<Value>(data) else { return };
    let Some(key) = key_of_metadata(&metadata) else { return };
    match derive(key) {
        Ok(derived) => {
            let names = derived.source_names();
            assert!((1..=4).contains(&names.len()), "{names:?}");
            assert_eq!(names.iter().collect::<BTreeSet<_>>().len(), names.len(), "names are distinct: {names:?}");
            if let Some(interval) = derived.poll_interval {
                assert!((1..=86_400).contains(&interval.as_secs()), "{interval:?}");
            }
        }
        Err(error) => {
            let text = error.to_string();
            assert!(text.starts_with("the os-collect-config key") || text.starts_with("os-collect-config."), "{text}");
        }
    }
}

/// What `signal_engine` signals: one engine on an in-memory store, with a server, a stack whose
/// wait condition never completes, and a deployment that is re-published when a signal
/// completes it.
struct Fixture {
    runtime: tokio::runtime::Runtime,
    engine: Engine<SqliteStore>,
    /// The wait handle's token and the update round, refreshed by `republish`.
    state: std::sync::Mutex<(String, u64)>,
}

const ENGINE_TEMPLATE: &str = r##"
heat_template_version: 2018-08-31
parameters:
  round: {type: string, default: "0"}
resources:
  handle: {type: OS::Heat::WaitConditionHandle}
  wait:
    type: OS::Heat::WaitCondition
    properties: {handle: {get_resource: handle}, timeout: 43200, count: 1000000000}
  config:
    type: OS::Heat::SoftwareConfig
    properties:
      group: script
      inputs: [{name: round}]
      outputs: [{name: result}, {name: broken, error_output: true}]
      config: "#!/bin/sh\ntrue\n"
  deploy:
    type: OS::Heat::SoftwareDeployment
    properties:
      config: {get_resource: config}
      server: vm1
      actions: [CREATE, UPDATE]
      input_values: {round: {get_param: round}}
outputs:
  endpoint: {value: {get_attr: [handle, endpoint]}}
"##;

fn fixture() -> &'static Fixture {
    static FIXTURE: OnceLock<Fixture> = OnceLock::new();
    FIXTURE.get_or_init(|| {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
        let store = SqliteStore::open_in_memory().expect("in-memory store");
        let config = EngineConfig::new("http://127.0.0.1:9");
        let engine = Engine::new(store, TokenKey::from_secret(b"fuzz key"), config);
        let handle_token = runtime.block_on(async {
            engine.add_server(AddServer { name: "vm1".into(), ..AddServer::default() }).await.expect("add server");
            engine.create_stack(stack_request(Some("fuzz"), 0)).await.expect("create stack");
            handle_token(&engine).await
        });
        Fixture { runtime, engine, state: std::sync::Mutex::new((handle_token, 0)) }
    })
}

fn stack_request(name: Option<&str>, round: u64) -> StackRequest {
    StackRequest {
        name: name.map(str::to_string),
        template: ENGINE_TEMPLATE.into(),
        parameters: BTreeMap::from([("round".to_string(), round.to_string())]),
        ..Default::default()
    }
}

/// The wait handle's token, from the stack's `endpoint` output.
async fn handle_token(engine: &Engine<SqliteStore>) -> String {
    let detail = engine.show_stack("fuzz").await.expect("show stack");
    let endpoint = detail.outputs.iter().find(|output| output.name == "endpoint").expect("endpoint output");
    let endpoint = endpoint.value.as_str().expect("endpoint is a string");
    endpoint.rsplit('/').next().expect("token segment").to_string()
}

/// The deployment's current signal token, from its server's document.
async fn deployment_token(engine: &Engine<SqliteStore>) -> Option<String> {
    let document = engine.metadata("vm1").await.ok()?;
    let document: Value = serde_json::from_str(&document.body).ok()?;
    let deployment = document["deployments"].as_array()?.last()?.clone();
    let deployment: Deployment = serde_json::from_value(deployment).ok()?;
    let url = deployment.input_str("deploy_signal_id")?;
    url.rsplit('/').next().map(str::to_string)
}

/// Signal bodies through the engine in-process (scrubbing, Heat's rules, the conditional
/// write): `TOKEN` in the input is replaced by the wait handle's real token first, so echoed
/// tokens are exercised. Afterwards no event reason holds that token in clear and the engine
/// still answers reads.
pub fn signal_engine(data: &[u8]) {
    let fixture = fixture();
    let Ok(text) = std::str::from_utf8(data) else { return };
    let handle = fixture.state.lock().expect("fixture state").0.clone();
    let body = text.replace("TOKEN", &handle);
    fixture.runtime.block_on(async {
        let engine = &fixture.engine;
        if let Ok(signal) = HeatWaitSignal::from_body(body.as_bytes()) {
            let signal = WaitConditionSignal {
                success: signal.status == WaitStatus::Success,
                reason: signal.reason,
                data: signal.data,
                id: signal.id,
            };
            // Ids and data keys are scrubbed too (a fuzz finding: they once went to the store
            // and the event in clear).
            match engine.wait_condition_signal(&handle, signal).await {
                // Over a size or count limit (docs/http-api.md): refused, nothing stored.
                Err(ServiceError::Invalid { .. }) => {}
                answer => assert!(answer.expect("wait signal").is_some(), "the handle token is known"),
            }
            assert_no_clear_token(engine, &handle).await;
        }
        let mut completed = false;
        if let Ok(details) = signal_details(None, body.as_bytes()) {
            if let Some(token) = deployment_token(engine).await {
                let ack = engine.deployment_signal(&token, details, None).await.expect("deployment signal");
                completed = ack == Some(SignalAck::Applied);
            }
        }
        let stacks = engine.list_stacks().await.expect("the engine still answers");
        if completed
            || stacks.iter().any(|stack| stack.status != "CREATE_IN_PROGRESS" && stack.status != "UPDATE_IN_PROGRESS")
        {
            republish(fixture).await;
        }
    });
}

async fn assert_no_clear_token(engine: &Engine<SqliteStore>, token: &str) {
    let events = engine.stack_events("fuzz").await.expect("events");
    if let Some(event) = events.iter().find(|event| event.reason.contains(token)) {
        panic!("an event holds the handle token in clear: {event:?}");
    }
}

/// Starts a new round after the deployment completed or failed: an update with a new input
/// value publishes a new derived config (and a failed stack is updated back into progress).
async fn republish(fixture: &Fixture) {
    let round = fixture.state.lock().expect("fixture state").1 + 1;
    fixture.engine.update_stack("fuzz", stack_request(None, round)).await.expect("update stack");
    let token = handle_token(&fixture.engine).await;
    *fixture.state.lock().expect("fixture state") = (token, round);
}
