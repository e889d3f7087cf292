//! What the real-Heat tests share: create a stack from a fixture, wait for its deployed server,
//! hand the server's metadata to a chain of agents (the stock os-collect-config chain or
//! anneal-agent), and wait for the stack to settle.

#![allow(dead_code)] // each test binary uses its own part

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use anneal_tests::real_heat::{fixture_template, unique_stack_name};
use anneal_tests::{AgentSettings, AnnealServer, HeatApi, RealHeat, StackRef, StockServer, wait_until};
use reqwest::{Method, StatusCode};
use serde_json::Value;

/// How long a deployed server may take to appear (Heat creates its stack user first).
pub const SERVER_LIMIT: Duration = Duration::from_secs(120);
/// How long a stack may take to settle once its server's agents run (the 5-hop chain takes
/// about 25 s with the stock agents on an idle machine).
pub const STACK_LIMIT: Duration = Duration::from_secs(240);

/// Which agents converge the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Chain {
    Stock,
    Anneal,
}

/// The running agents of one server.
pub enum Server {
    Stock(StockServer),
    Anneal(AnnealServer),
}

impl Server {
    pub fn logs(&self) -> String {
        match self {
            Server::Stock(server) => server.logs(),
            Server::Anneal(server) => server.logs(),
        }
    }

    pub fn dir(&self) -> &Path {
        match self {
            Server::Stock(server) => server.dir(),
            Server::Anneal(server) => server.dir(),
        }
    }
}

/// A stack converged by one chain.
pub struct Converged {
    pub heat: RealHeat,
    pub api: HeatApi,
    pub stack: StackRef,
    /// The stack as Heat showed it when it settled.
    pub shown: Value,
    pub outputs: BTreeMap<String, Value>,
    pub server: Server,
    /// From the agents' start to the stack settled.
    pub converge_time: Duration,
    /// What Heat answered for the server's metadata (`{"metadata": {...}}`) when the agents
    /// started.
    pub metadata: Value,
}

impl Converged {
    pub fn status(&self) -> &str {
        self.shown["stack_status"].as_str().unwrap_or_default()
    }

    pub fn reason(&self) -> &str {
        self.shown["stack_status_reason"].as_str().unwrap_or_default()
    }

    /// Everything useful when an assertion fails: the stack, the agents' log, Heat's log tail.
    pub fn context(&self) -> String {
        format!("stack: {}\n{}\n{}", self.shown, self.server.logs(), self.heat.log_tail())
    }

    /// Updates the stack to the same fixture with `parameters` and waits for it to settle. Settled
    /// means no longer `*_IN_PROGRESS` with a status or an `updated_time` other than before the
    /// update: Heat stores both together when an update starts, and a second update ends in the
    /// status the first ended in.
    pub async fn update(&mut self, fixture: &str, parameters: &[(&str, &str)]) {
        let before = self.listed().await;
        self.api.update_stack(&self.stack, &fixture_template(fixture), parameters).await;
        let what = format!("stack {} to settle after the update (from {before:?})", self.stack.name);
        wait_until(STACK_LIMIT, &what, || async {
            tokio::time::sleep(Duration::from_millis(200)).await;
            let now = self.listed().await;
            (!now.0.ends_with("_IN_PROGRESS") && now != before).then_some(())
        })
        .await;
        self.shown = self.api.stack(&self.stack).await;
        self.outputs = self.api.outputs(&self.stack).await;
    }

    /// The stack's status and `updated_time` as the stack list shows them (the list answers while
    /// an update runs; see `HeatApi::stack_status`).
    async fn listed(&self) -> (String, String) {
        let (code, answer) = self.api.call(Method::GET, &format!("stacks?id={}", self.stack.id), None).await;
        assert_eq!(code, StatusCode::OK, "the stack list: {answer}");
        let listed = &answer["stacks"][0];
        let field = |name: &str| listed[name].as_str().unwrap_or_default().to_string();
        (field("stack_status"), field("updated_time"))
    }
}

/// Creates a stack from `fixture` with `parameters`, starts `chain` on its deployed server (named
/// `server`) from the metadata Heat answers, and waits for the stack to settle.
pub async fn converge(chain: Chain, fixture: &str, parameters: &[(&str, &str)]) -> Converged {
    converge_with(chain, fixture, parameters, AgentSettings::default()).await
}

/// `converge`, anneal-agent configured with `settings` (the stock chain ignores them).
pub async fn converge_with(
    chain: Chain,
    fixture: &str,
    parameters: &[(&str, &str)],
    settings: AgentSettings,
) -> Converged {
    let heat = RealHeat::shared().await;
    let api = heat.admin().await;
    let name = unique_stack_name(match chain {
        Chain::Stock => "stock",
        Chain::Anneal => "anneal",
    });
    let stack = api.create_stack(&name, &fixture_template(fixture), parameters).await;
    api.wait_resource_status(&stack, "server", "CREATE_COMPLETE", SERVER_LIMIT).await;
    let metadata = api.resource_metadata(&stack, "server").await;
    assert!(metadata["metadata"]["os-collect-config"].is_object(), "a deployed server's metadata: {metadata}");
    let started = std::time::Instant::now();
    let server = match chain {
        Chain::Stock => Server::Stock(StockServer::start(&metadata).await),
        Chain::Anneal => Server::Anneal(AnnealServer::start(&metadata, settings).await),
    };
    let shown = api.wait_stack_settled(&stack, None, STACK_LIMIT).await;
    let converge_time = started.elapsed();
    let outputs = api.outputs(&stack).await;
    Converged { heat, api, stack, shown, outputs, server, converge_time, metadata }
}

/// The lines a fixture's scripts appended to their `trace` file, sorted.
pub fn trace_lines(trace: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(trace).unwrap_or_default();
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    lines.sort();
    lines
}

/// The peers venv's cfn-signal (heat-cfntools), for the stock chain's wait condition.
pub fn cfn_signal() -> String {
    let cache = anneal_tests::peers::cache(&["venv/bin/cfn-signal"]);
    cache.join("venv/bin/cfn-signal").display().to_string()
}

/// The output of a 5-hop chain whose last hop has `tag`.
pub fn chain_result(tag: &str) -> String {
    format!("start+hop1+hop2+hop3+hop4+hop5{tag}")
}
