//! anneal-agent as a drop-in for the stock OpenStack agents on a real Heat + Keystone
//! (tests/peers/real-heat): each test converges the same fixture twice at once, one stack by the
//! stock os-collect-config chain and one by anneal-agent configured only from its server's
//! metadata (`anneal-agent bootstrap --from-metadata`, then `run`), and checks that Heat reports
//! the same thing for both: status, reason, outputs and what each deployment signalled. Both use
//! heat-agents' hook-script.py as the `script` hook, so a difference is the agents'. The last test
//! takes Keystone down on an instance of its own while anneal-agent makes its first
//! authentication. One test compares the engines instead: the same wait-condition stack on Heat
//! and on the shim (each converged by anneal-agent), created and updated twice, shows the same
//! wait-condition data after each step; another, the same outputs when a hook answers an output
//! its config does not declare; and `preview`, the same resource changes in the shim's plan as
//! in Heat's preview-update, group members included.

#[path = "real_heat_anneal/preview.rs"]
mod preview;
mod real_heat_support;

use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

use anneal_tests::real_heat::{fixture_template, unique_stack_name};
use anneal_tests::{AgentSettings, AnnealServer, Fleet, RealHeat, Shim, agent_binary, wait_until};
use real_heat_support::{
    Chain, Converged, SERVER_LIMIT, STACK_LIMIT, Server, cfn_signal, chain_result, converge, converge_with, trace_lines,
};
use serde_json::{Map, Value, json};

/// Converges `fixture` with both chains at once; `parameters` gets each chain's extra parameters.
async fn both(fixture: &str, stock: &[(&str, &str)], anneal: &[(&str, &str)]) -> (Converged, Converged) {
    tokio::join!(converge(Chain::Stock, fixture, stock), converge(Chain::Anneal, fixture, anneal))
}

/// Both runs' logs, for a failure message.
fn context(stock: &Converged, anneal: &Converged) -> String {
    format!("=== anneal ===\n{}\n=== stock ===\n{}", anneal.context(), stock.context())
}

async fn deployment_signals(run: &Converged, names: &[&str]) -> Vec<Value> {
    let mut signals = Vec::new();
    for name in names {
        signals.push(run.api.deployment_output_values(&run.stack, name).await);
    }
    signals
}

fn anneal_agent(run: &Converged) -> &anneal_tests::AnnealServer {
    match &run.server {
        Server::Anneal(server) => server,
        Server::Stock(_) => panic!("not an anneal run"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_heat_anneal_poll_server_heat_with_heat_signal_matches_the_stock_chain() {
    let parameters = [("transport", "POLL_SERVER_HEAT"), ("signal", "HEAT_SIGNAL")];
    let (stock, anneal) = both("one.yaml", &parameters, &parameters).await;
    assert_eq!(stock.status(), "CREATE_COMPLETE", "{}", context(&stock, &anneal));
    assert_eq!(anneal.status(), "CREATE_COMPLETE", "{}", context(&stock, &anneal));
    assert_eq!(anneal.outputs, stock.outputs, "{}", context(&stock, &anneal));
    assert_eq!(anneal.outputs["stdout"], json!("greeting is hello\n"), "{}", context(&stock, &anneal));
    let signals = deployment_signals(&anneal, &["deployment"]).await;
    assert_eq!(signals, deployment_signals(&stock, &["deployment"]).await, "what the deployment signalled");

    // bootstrap kept the heat collector's credentials in state_dir, readable by the agent only.
    let derived = anneal_agent(&anneal).derived_sources_file();
    let mode = std::fs::metadata(&derived).expect("bootstrap wrote the derived sources").permissions().mode();
    assert_eq!(mode & 0o777, 0o600, "{}", derived.display());
    let text = std::fs::read_to_string(&derived).expect("read the derived sources");
    assert!(text.contains("kind = \"heat\""), "a heat source from the metadata: {text}");
    let password = anneal.metadata["metadata"]["os-collect-config"]["heat"]["password"].as_str();
    let password = password.expect("the heat collector's password in the server's metadata");
    assert_secret_not_logged(&anneal, password);
}

/// The agent's debug log never shows a credential it was given.
fn assert_secret_not_logged(run: &Converged, secret: &str) {
    let server = anneal_agent(run);
    let log = server.agent().log_text();
    assert!(!log.is_empty(), "the agent logged at debug level");
    assert!(!log.contains(secret), "a credential from the metadata is in the agent's log:\n{log}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_heat_anneal_poll_server_cfn_with_cfn_signal_runs_the_chain_as_the_stock_chain() {
    let parameters = [("transport", "POLL_SERVER_CFN"), ("signal", "CFN_SIGNAL")];
    let (stock, anneal) = both("chain5.yaml", &parameters, &parameters).await;
    println!(
        "5-hop chain, agents' start to settled: stock {:?}, anneal {:?}",
        stock.converge_time, anneal.converge_time
    );
    assert_eq!(stock.status(), "CREATE_COMPLETE", "{}", context(&stock, &anneal));
    assert_eq!(anneal.status(), "CREATE_COMPLETE", "{}", context(&stock, &anneal));
    assert_eq!(anneal.outputs["result"], json!(chain_result("v1")), "{}", context(&stock, &anneal));
    assert_eq!(anneal.outputs, stock.outputs, "{}", context(&stock, &anneal));
    let hops = ["hop1", "hop2", "hop3", "hop4", "hop5"];
    assert_eq!(deployment_signals(&anneal, &hops).await, deployment_signals(&stock, &hops).await);

    let derived = std::fs::read_to_string(anneal_agent(&anneal).derived_sources_file()).expect("derived sources");
    assert!(derived.contains("kind = \"cfn\""), "a cfn source from the metadata: {derived}");
    let secret = anneal.metadata["metadata"]["os-collect-config"]["cfn"]["secret_access_key"].as_str();
    assert_secret_not_logged(&anneal, secret.expect("the cfn collector's secret key in the server's metadata"));
}

/// At the documented default `poll_interval_secs` (30), the 5-hop chain on POLL_SERVER_CFN +
/// CFN_SIGNAL still takes seconds per hop, not an interval: after each delivered signal the agent
/// reads the cfn source again after about 1 s, then 2, 4, ... s (fast-follow, docs/metadata.md),
/// and Heat has released the next hop by then. Waiting for the plain poll would take about 30 s
/// per hop, 150 s for the chain.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_heat_anneal_cfn_chain_fast_follows_at_the_default_poll_interval() {
    let parameters = [("transport", "POLL_SERVER_CFN"), ("signal", "CFN_SIGNAL")];
    let settings = AgentSettings::default().line("poll_interval_secs = 30");
    let anneal = converge_with(Chain::Anneal, "chain5.yaml", &parameters, settings).await;
    println!("5-hop chain at poll_interval_secs = 30, agent's start to settled: {:?}", anneal.converge_time);
    let context = || anneal.context();
    assert_eq!(anneal.status(), "CREATE_COMPLETE", "{}", context());
    assert_eq!(anneal.outputs["result"], json!(chain_result("v1")), "{}", context());
    let limit = Duration::from_secs(60);
    assert!(anneal.converge_time < limit, "{:?}, not within {limit:?}\n{}", anneal.converge_time, context());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_heat_anneal_poll_server_cfn_with_no_signal_runs_the_deployment_as_the_stock_chain() {
    let traces = tempfile::tempdir().expect("temp dir");
    let (stock_trace, anneal_trace) = (traces.path().join("stock"), traces.path().join("anneal"));
    let (stock_path, anneal_path) = (stock_trace.display().to_string(), anneal_trace.display().to_string());
    let parameters = [("transport", "POLL_SERVER_CFN"), ("signal", "NO_SIGNAL")];
    let stock_parameters = [parameters[0], parameters[1], ("trace", stock_path.as_str())];
    let anneal_parameters = [parameters[0], parameters[1], ("trace", anneal_path.as_str())];
    let (stock, anneal) = both("one.yaml", &stock_parameters, &anneal_parameters).await;
    assert_eq!(anneal.status(), "CREATE_COMPLETE", "{}", context(&stock, &anneal));
    assert_eq!(anneal.outputs, stock.outputs, "{}", context(&stock, &anneal));
    for trace in [&stock_trace, &anneal_trace] {
        let ran = wait_until(Duration::from_secs(60), "both chains ran the NO_SIGNAL deployment", || async {
            let lines = trace_lines(trace);
            (!lines.is_empty()).then_some(lines)
        })
        .await;
        assert_eq!(ran, ["deployment CREATE hello"], "{}: {}", trace.display(), context(&stock, &anneal));
    }
    // The script's trace line comes before the hook's end: wait for the journal to settle.
    let agent = anneal_agent(&anneal).agent();
    let status = wait_until(Duration::from_secs(30), "the NO_SIGNAL deployment's outcome", || async {
        let status = agent.status().await;
        status.iter().all(|row| !row["outcome"].is_null()).then_some(status)
    })
    .await;
    assert_eq!(status.len(), 1, "{status:?}");
    assert_eq!(status[0]["outcome"], "COMPLETE", "{status:?}");
    assert!(status[0]["signal"].as_str().unwrap_or_default().contains("NO_SIGNAL"), "{status:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_heat_anneal_update_reruns_only_the_changed_deployment() {
    let traces = tempfile::tempdir().expect("temp dir");
    let (stock_trace, anneal_trace) = (traces.path().join("stock"), traces.path().join("anneal"));
    let (stock_path, anneal_path) = (stock_trace.display().to_string(), anneal_trace.display().to_string());
    let base = [("transport", "POLL_SERVER_HEAT"), ("signal", "HEAT_SIGNAL")];
    let stock_parameters = [base[0], base[1], ("trace", stock_path.as_str())];
    let anneal_parameters = [base[0], base[1], ("trace", anneal_path.as_str())];
    let (mut stock, mut anneal) = both("chain5.yaml", &stock_parameters, &anneal_parameters).await;
    assert_eq!(anneal.status(), "CREATE_COMPLETE", "{}", context(&stock, &anneal));

    let stock_update = [stock_parameters[0], stock_parameters[1], stock_parameters[2], ("tag", "v2")];
    let anneal_update = [anneal_parameters[0], anneal_parameters[1], anneal_parameters[2], ("tag", "v2")];
    tokio::join!(stock.update("chain5.yaml", &stock_update), anneal.update("chain5.yaml", &anneal_update));
    assert_eq!(stock.status(), "UPDATE_COMPLETE", "{}", context(&stock, &anneal));
    assert_eq!(anneal.status(), "UPDATE_COMPLETE", "{}", context(&stock, &anneal));
    assert_eq!(anneal.outputs["result"], json!(chain_result("v2")), "{}", context(&stock, &anneal));
    assert_eq!(anneal.outputs, stock.outputs, "{}", context(&stock, &anneal));
    let mut expected: Vec<String> = (1..=5).map(|hop| format!("hop{hop} CREATE")).collect();
    expected.push("hop5 UPDATE".to_string());
    expected.sort();
    assert_eq!(trace_lines(&anneal_trace), expected, "only hop5 ran again\n{}", context(&stock, &anneal));
    assert_eq!(trace_lines(&stock_trace), expected, "the stock chain too\n{}", context(&stock, &anneal));

    // The journal: one run per hop, and a second one for hop5 only (a new derived config).
    let status = anneal_agent(&anneal).agent().status().await;
    let runs = |name: &str| status.iter().filter(|row| row["name"] == name).count();
    assert_eq!([runs("hop1"), runs("hop2"), runs("hop3"), runs("hop4"), runs("hop5")], [1, 1, 1, 1, 2], "{status:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_heat_anneal_failing_deployment_gives_heats_create_failed_reason_as_the_stock_chain() {
    let parameters = [("transport", "POLL_SERVER_HEAT"), ("signal", "HEAT_SIGNAL")];
    let (stock, anneal) = both("failing.yaml", &parameters, &parameters).await;
    assert_eq!(stock.status(), "CREATE_FAILED", "{}", context(&stock, &anneal));
    assert_eq!(anneal.status(), "CREATE_FAILED", "{}", context(&stock, &anneal));
    assert_eq!(anneal.reason(), stock.reason(), "Heat's reason\n{}", context(&stock, &anneal));
    assert!(anneal.reason().contains("non-zero status code: 3"), "{}", context(&stock, &anneal));
    let deployment = anneal.api.resource(&anneal.stack, "deployment").await;
    let reference = stock.api.resource(&stock.stack, "deployment").await;
    assert_eq!(deployment["resource_status_reason"], reference["resource_status_reason"]);
    let signals = deployment_signals(&anneal, &["deployment"]).await;
    assert_eq!(signals, deployment_signals(&stock, &["deployment"]).await, "what the failure signalled");
    assert_eq!(failure_events(&anneal).await, failure_events(&stock).await, "the deployment's events");
}

/// The deployment's events as Heat recorded them: status and reason (its id, which differs
/// between the stacks, replaced by `<id>`), oldest first.
async fn failure_events(run: &Converged) -> Vec<(String, String)> {
    let deployment = run.api.resource(&run.stack, "deployment").await;
    let id = deployment["physical_resource_id"].as_str().expect("the deployment's id").to_string();
    let events = run.api.events(&run.stack).await;
    let text = |value: &Value| value.as_str().unwrap_or_default().replace(&id, "<id>");
    events
        .iter()
        .filter(|event| event["resource_name"] == "deployment")
        .map(|event| (text(&event["resource_status"]), text(&event["resource_status_reason"])))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_heat_anneal_wait_condition_is_signalled_by_anneal_agent_signal() {
    let (cfn, agent) = (cfn_signal(), agent_binary().display().to_string());
    let base = [("transport", "POLL_SERVER_CFN"), ("signal", "CFN_SIGNAL")];
    let stock_parameters = [base[0], base[1], ("signal_tool", cfn.as_str())];
    let anneal_parameters = [base[0], base[1], ("signal_tool", agent.as_str())];
    let (stock, anneal) = both("waitcondition.yaml", &stock_parameters, &anneal_parameters).await;
    assert_eq!(stock.status(), "CREATE_COMPLETE", "{}", context(&stock, &anneal));
    assert_eq!(anneal.status(), "CREATE_COMPLETE", "{}", context(&stock, &anneal));
    assert_eq!(anneal.outputs, stock.outputs, "the wait condition's data and the deployment's stdout");
    let data: Value =
        serde_json::from_str(anneal.outputs["wait_data"].as_str().unwrap_or_default()).unwrap_or_default();
    assert_eq!(data, json!({"server1": "ready from the server"}), "{}", context(&stock, &anneal));
}

/// The shim's side of the engine differential: a shim and an anneal-agent registered with it as
/// `server` (the name the fixture's DeployedServer binds to).
struct ShimStack {
    shim: Shim,
    fleet: Fleet,
    template: String,
}

impl ShimStack {
    const NAME: &str = "waitdata";

    /// Creates the stack from `fixture` with `value` and waits until it settles.
    async fn create(fixture: &str, value: &str) -> ShimStack {
        let shim = Shim::start().await;
        let fleet = Fleet::start(&shim, &["server"], &AgentSettings::default()).await;
        let template = shim.write_template(fixture, &fixture_template(fixture)).display().to_string();
        let stack = ShimStack { shim, fleet, template };
        stack.run("create", value).await;
        stack
    }

    /// `stack create` or `stack update` with `value`, waited for (`--wait`).
    async fn run(&self, command: &str, value: &str) {
        let parameter = format!("value={value}");
        let arguments = ["stack", command, Self::NAME, "--template", &self.template, "--param", &parameter];
        let done = self.shim.cli(&[&arguments[..], &["--wait", "--timeout", "120"]].concat()).await;
        assert_eq!(done.code, 0, "stack {command} with {parameter}: {done:?}\n{}", self.fleet.logs());
    }

    async fn outputs(&self) -> Map<String, Value> {
        self.shim.stack_outputs(Self::NAME).await
    }
}

/// The wait condition's data as each engine shows it: its `data` attribute (Heat's resource show;
/// the shim's `wait_data` output is that attribute) and the outputs built from it.
async fn wait_condition_data(heat: &Converged, shim: &ShimStack) -> (Value, Value) {
    let heat_attribute = heat.api.resource_attribute(&heat.stack, "wait", "data").await;
    assert_eq!(heat.outputs["wait_data"], heat_attribute, "Heat's output is its attribute");
    let on_heat = json!({"data": heat_attribute, "summary": heat.outputs["summary"]});
    let outputs = shim.outputs().await;
    (on_heat, json!({"data": outputs["wait_data"], "summary": outputs["summary"]}))
}

/// Heat's WaitConditionHandle merges every signal into its metadata by id (a known id is
/// overwritten) and its WaitCondition's `data` reads that metadata, so after an update whose
/// deployment signals the same id with new data, Heat shows the new data. The shim answered such a
/// signal `stale` once the wait condition had completed and kept the first value.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_heat_anneal_wait_condition_data_follows_updates_as_heat_shows_it() {
    const FIXTURE: &str = "waitcondition_updates.yaml";
    let parameters = |value| [("transport", "POLL_SERVER_HEAT"), ("signal", "HEAT_SIGNAL"), ("value", value)];
    let created = parameters("v1");
    let (mut heat, shim) = tokio::join!(converge(Chain::Anneal, FIXTURE, &created), ShimStack::create(FIXTURE, "v1"));
    let context = |heat: &Converged, shim: &ShimStack| {
        format!("=== shim ===\n{}\n{}\n=== heat ===\n{}", shim.shim.log_text(), shim.fleet.logs(), heat.context())
    };
    assert_eq!(heat.status(), "CREATE_COMPLETE", "{}", context(&heat, &shim));
    for (step, value) in ["create", "update 1", "update 2"].into_iter().zip(["v1", "v2", "v3"]) {
        if step != "create" {
            let updated = parameters(value);
            tokio::join!(heat.update(FIXTURE, &updated), shim.run("update", value));
            assert_eq!(heat.status(), "UPDATE_COMPLETE", "{step}: {}", context(&heat, &shim));
        }
        let (on_heat, on_shim) = wait_condition_data(&heat, &shim).await;
        println!("after {step}: Heat {on_heat}, the shim {on_shim}");
        let data = format!("{{\"1\": \"{value}\"}}");
        assert_eq!(on_heat, json!({"data": data, "summary": format!("data={data}")}), "{step}: Heat");
        assert_eq!(on_shim, on_heat, "{step}: the shim shows what Heat shows\n{}", context(&heat, &shim));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_heat_anneal_rides_out_keystone_down_at_its_first_authentication() {
    // An instance of its own: Keystone goes down here, which would fail the other tests.
    let mut heat = RealHeat::private("keystone-down").await;
    let api = heat.admin().await;
    let parameters = [("transport", "POLL_SERVER_HEAT"), ("signal", "HEAT_SIGNAL")];
    let stack = api.create_stack(&unique_stack_name("outage"), &fixture_template("chain5.yaml"), &parameters).await;
    api.wait_resource_status(&stack, "server", "CREATE_COMPLETE", SERVER_LIMIT).await;
    // Heat's own Keystone work for hop1 (its signal user) ends before hop1 is in the server's
    // metadata; from then on Heat only waits for the agent.
    let metadata = wait_until(SERVER_LIMIT, "hop1 in the server's metadata", || async {
        let metadata = api.resource_metadata(&stack, "server").await;
        let deployments = metadata["metadata"]["deployments"].as_array().cloned().unwrap_or_default();
        deployments.iter().any(|deployment| deployment["name"] == "hop1").then_some(metadata)
    })
    .await;

    // Keystone is down (connections refused) while the agent bootstraps and tries its first
    // authentication, then comes back on the same port.
    heat.kill("keystone").await;
    let mut server = AnnealServer::start(&metadata, AgentSettings::default()).await;
    tokio::time::sleep(Duration::from_secs(6)).await;
    assert!(server.agent_mut().is_alive(), "the agent runs through the outage:\n{}", server.logs());
    let log = server.agent().log_text();
    assert!(log.contains("Connection refused"), "the agent met Keystone down:\n{log}");
    heat.revive().await;

    let shown = api.wait_stack_settled(&stack, None, STACK_LIMIT).await;
    let context = || format!("stack: {shown}\n{}\n{}", server.logs(), heat.log_tail());
    assert_eq!(shown["stack_status"], "CREATE_COMPLETE", "{}", context());
    let outputs = api.outputs(&stack).await;
    assert_eq!(outputs["result"], json!(chain_result("v1")), "{}", context());
    let status = server.agent().status().await;
    let runs = |name: &str| status.iter().filter(|row| row["name"] == name).count();
    assert_eq!([runs("hop1"), runs("hop2"), runs("hop3"), runs("hop4"), runs("hop5")], [1, 1, 1, 1, 1], "{status:?}");
}

/// A hook that answers, besides what heat-config's hooks always answer, the output its config
/// declares (`declared`) and one it does not (`result`, as heat-agents' atomic and docker-compose
/// hooks answer).
const RESULT_HOOK: &str = "#!/bin/sh\ncat >/dev/null\nprintf '%s' '{\"deploy_stdout\": \"ran\", \"deploy_stderr\": \"\", \
                           \"deploy_status_code\": 0, \"declared\": \"D\", \"result\": \"R\"}'\n";

/// `converge` on Heat for a fixture whose configs are of the `returns-result` group: the hook is
/// installed before anneal-agent starts.
async fn converge_with_result_hook(fixture: &str) -> Converged {
    let heat = RealHeat::shared().await;
    let api = heat.admin().await;
    let parameters = [("transport", "POLL_SERVER_HEAT"), ("signal", "HEAT_SIGNAL")];
    let stack = api.create_stack(&unique_stack_name("undeclared"), &fixture_template(fixture), &parameters).await;
    api.wait_resource_status(&stack, "server", "CREATE_COMPLETE", SERVER_LIMIT).await;
    let metadata = api.resource_metadata(&stack, "server").await;
    let started = std::time::Instant::now();
    let mut server = AnnealServer::prepare(AgentSettings::default());
    server.agent().install_hook("returns-result", RESULT_HOOK);
    let bootstrap = server.bootstrap_from(&metadata).await;
    assert_eq!(bootstrap.code, 0, "anneal-agent bootstrap --from-metadata: {bootstrap:?}");
    server.agent_mut().start();
    let shown = api.wait_stack_settled(&stack, None, STACK_LIMIT).await;
    let outputs = api.outputs(&stack).await;
    let server = Server::Anneal(server);
    Converged { heat, api, stack, shown, outputs, server, converge_time: started.elapsed(), metadata }
}

/// The shim's side: the same fixture created on a shim whose agent has the hook, waited for;
/// the outputs as Heat's (`HeatApi::outputs`) shows them, an error as `{"error": ...}`.
async fn shim_outputs_with_result_hook(fixture: &str) -> (Value, Shim, Fleet) {
    let shim = Shim::start().await;
    let fleet = Fleet::start(&shim, &["server"], &AgentSettings::default()).await;
    fleet.agent("server").install_hook("returns-result", RESULT_HOOK);
    let template = shim.write_template(fixture, &fixture_template(fixture)).display().to_string();
    let created =
        shim.cli(&["stack", "create", "undeclared", "--template", &template, "--wait", "--timeout", "120"]).await;
    assert_eq!(created.code, 0, "stack create: {created:?}\n{}", fleet.logs());
    let listed = shim.cli_json(&["stack", "outputs", "undeclared", "--json"]).await;
    let outputs: Map<String, Value> = listed
        .as_array()
        .expect("a list of outputs")
        .iter()
        .map(|output| {
            let value = match output.get("error") {
                Some(error) => json!({ "error": error }),
                None => output["value"].clone(),
            };
            (output["name"].as_str().expect("an output name").to_string(), value)
        })
        .collect();
    (Value::Object(outputs), shim, fleet)
}

/// Heat 27 accepts a `get_attr` of a deployment output its config does not declare, keeps only
/// the declared outputs of the signal (heat.engine.service_software_config
/// .signal_software_deployment) and refuses the other name when it is read
/// (SoftwareDeployment.get_attribute), so a stack output shows the error and no value, for a
/// deployment and for a deployment group; a declared output the hook never returned is null.
/// The shim refused such a template at validation.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_heat_anneal_an_undeclared_deployment_output_is_refused_when_read_as_heat_refuses_it() {
    const FIXTURE: &str = "undeclared_outputs.yaml";
    let (heat, (on_shim, shim, fleet)) =
        tokio::join!(converge_with_result_hook(FIXTURE), shim_outputs_with_result_hook(FIXTURE));
    let context = || format!("=== shim ===\n{}\n{}\n=== heat ===\n{}", shim.log_text(), fleet.logs(), heat.context());
    assert_eq!(heat.status(), "CREATE_COMPLETE", "{}", context());
    let refused = |key: &str| json!({"error": format!("The Referenced Attribute ({key}) is incorrect.")});
    let expected = json!({
        "result": refused("deployment result"),
        "result_path": refused("deployment ('result', 'key', 0)"),
        "declared": "D",
        "missing": null,
        "stdout": "ran",
        "group_result": refused("group result"),
        "group_declared": {"one": "D"},
        "group_stdouts": {"one": "ran"},
    });
    let on_heat = serde_json::to_value(&heat.outputs).expect("Heat's outputs as JSON");
    assert_eq!(on_heat, expected, "what Heat shows\n{}", context());
    assert_eq!(on_shim, on_heat, "the shim shows what Heat shows\n{}", context());
    let kept = heat.api.deployment_output_values(&heat.stack, "deployment").await;
    assert_eq!(kept.get("result"), None, "Heat kept the undeclared output: {kept}");
}

/// A deployment group whose `servers` are a key of a `json` parameter, and the same with a
/// mistake that needs no parameter value to be seen.
const SERVERS_FROM_JSON: &str = "heat_template_version: 2016-10-14
parameters:
  servers: {type: json}
resources:
  config:
    type: OS::Heat::SoftwareConfig
    properties: {group: script, config: echo}
  deploy:
    type: OS::Heat::SoftwareDeploymentGroup
    properties:
      config: {get_resource: config}
      servers: {get_param: [servers, Controller]}
      MISTAKE
";

/// `template validate` asks for no parameter values, as Heat's validate (`POST /validate`): what
/// needs a value is not checked (Heat validates with `strict_validate=False`), what does not
/// still is. Both accept the group whose `servers` come from a parameter without a value, and
/// both refuse it with an unknown property.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_heat_anneal_template_validate_without_values_refuses_what_heats_validate_refuses() {
    let heat = RealHeat::shared().await;
    let api = heat.admin().await;
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("servers_from_json.yaml");
    for (mistake, accepted) in [("", true), ("colour: red", false)] {
        let text = SERVERS_FROM_JSON.replace("MISTAKE", mistake);
        let body = json!({"template": text});
        let (code, answer) = api.call(reqwest::Method::POST, "validate", Some(&body)).await;
        assert_eq!(code == reqwest::StatusCode::OK, accepted, "Heat's validate with {mistake:?}: {code} {answer}");
        std::fs::write(&path, &text).expect("write the template");
        let mut command = tokio::process::Command::new(anneal_tests::shim_binary());
        command.args(["template", "validate", "--template"]).arg(&path);
        command.env_remove("ANNEAL_URL").env_remove("ANNEAL_TOKEN");
        let validated = anneal_tests::run_command(command, Duration::from_secs(30)).await;
        assert_eq!(validated.code == 0, accepted, "template validate with {mistake:?}: {validated:?}");
    }
}
