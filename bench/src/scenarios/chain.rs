//! Scenario 4, cross-server chain: a real shim and one real `anneal-agent run` per server
//! (long-polling over HTTP); each stack is a chain of deployments, one per server, each taking
//! the previous one's output through `get_attr`. It measures stack create → CREATE_COMPLETE wall
//! time and subtracts the scripts' own run time (recorded by each script with `$EPOCHREALTIME`);
//! what is left is anneal's overhead: long-poll wake-ups, journal writes, hook spawns, signals
//! and the shim's releases, once per hop.

use std::path::Path;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anneal_tests::{Agent, AgentSettings, Daemon, Shim};
use serde_json::{Map, Value, json};
use tokio::process::Command;

use super::{Context, millis, temp_dir};
use crate::children::tail;
use crate::error::{BenchError, BenchResult, create_dir, file_error, http_error};
use crate::report::{Measurement, ScenarioReport, percentile};

/// The target for the whole chain's overhead.
const TARGET_MS: f64 = 1000.0;

/// The shim, its admin token, an HTTP client, and where the scripts write their times.
struct Chain<'a> {
    shim: &'a Shim,
    admin: String,
    http: reqwest::Client,
    times: &'a Path,
    hops: usize,
}

/// One stack's run. Times in seconds since the epoch (the scripts record theirs with
/// `$EPOCHREALTIME`, on the same clock).
struct Round {
    wall: Duration,
    sent: f64,
    completed: f64,
    /// Each hop's script: first line, last line.
    scripts: Vec<(f64, f64)>,
}

impl Round {
    fn script_time(&self) -> Duration {
        Duration::from_secs_f64(self.scripts.iter().map(|(started, finished)| (finished - started).max(0.0)).sum())
    }

    fn overhead_ms(&self) -> f64 {
        millis(self.wall.saturating_sub(self.script_time()))
    }

    /// From one script's end to the next one's start: the agent's signal, the shim's release,
    /// the next agent's long-poll wake-up and hook start.
    fn handoffs_ms(&self) -> impl Iterator<Item = f64> + '_ {
        self.scripts.windows(2).map(|pair| (pair[1].0 - pair[0].1) * 1000.0)
    }
}

pub async fn run(context: &Context) -> BenchResult<ScenarioReport> {
    let (hops, stacks) = if context.smoke { (3, 1) } else { (20, 5) };
    let mut report =
        ScenarioReport::new("chain", "4. Cross-server chain", "none (Heat's engine and heat-agents are not run here)");
    report.command("anneal-shim serve --listen 127.0.0.1:0 --db sqlite://$TMP/shim.db");
    report.command(&format!(
        "{hops} x anneal-agent run --config $TMP/hopNN/agent.toml   # one server each, http source (long-poll)"
    ));
    report.command(&format!(
        "POST /v1/stacks {{template: {hops} deployments dNN on server hopNN, input_values {{previous: {{get_attr: [dNN-1, out]}}}}}}; poll GET /v1/stacks/<name> every 5 ms until CREATE_COMPLETE"
    ));
    let shim = Shim::start().await;
    let token_file = shim.token_file();
    let admin = std::fs::read_to_string(&token_file).map_err(file_error(&token_file))?.trim().to_string();
    let dir = temp_dir("anneal-bench-chain-")?;
    let times = dir.path().join("times");
    create_dir(&times)?;
    let mut agents = Vec::with_capacity(hops);
    for hop in 0..hops {
        agents.push(start_agent(context, &shim, dir.path(), hop).await);
    }
    let chain = Chain { shim: &shim, admin, http: reqwest::Client::new(), times: &times, hops };
    let mut rounds = Vec::with_capacity(stacks);
    // Round 0 is a warm-up (every agent's first long-poll may not be in place yet): not counted.
    for round in 0..=stacks {
        let measured = chain.round(&format!("chain-{round}")).await.map_err(|error| with_logs(error, &agents))?;
        if round > 0 {
            rounds.push(measured);
        }
    }
    report.measurements = measurements(&rounds, hops);
    report.notes.push(format!(
        "{hops} agents, a {hops}-hop chain, {stacks} stacks one after the other (plus one warm-up stack not counted); \
         each hop's script is bash writing its output to $heat_outputs_path.out"
    ));
    report.notes.push(
        "overhead = wall time from POST /v1/stacks to CREATE_COMPLETE seen, minus the sum of the scripts' own time \
         (first to last line of each script); the 5 ms status poll is included in the overhead"
            .into(),
    );
    if context.binaries.profile != "release" {
        report.notes.push(format!("{} build: the figures are not representative", context.binaries.profile));
    }
    Ok(report)
}

fn measurements(rounds: &[Round], hops: usize) -> Vec<Measurement> {
    let walls: Vec<f64> = rounds.iter().map(|round| millis(round.wall)).collect();
    let overheads: Vec<f64> = rounds.iter().map(Round::overhead_ms).collect();
    let scripts: Vec<f64> = rounds.iter().map(|round| millis(round.script_time())).collect();
    let handoffs: Vec<f64> = rounds.iter().flat_map(Round::handoffs_ms).collect();
    let first: Vec<f64> = rounds
        .iter()
        .filter_map(|round| round.scripts.first().map(|(started, _)| (started - round.sent) * 1000.0))
        .collect();
    let last: Vec<f64> = rounds
        .iter()
        .filter_map(|round| round.scripts.last().map(|(_, finished)| (round.completed - finished) * 1000.0))
        .collect();
    let (median, max) = (percentile(&overheads, 0.5), percentile(&overheads, 1.0));
    let target = "overhead < 1 s";
    vec![
        Measurement::new(&format!("{hops}-hop chain, create to complete, median"), "ms", percentile(&walls, 0.5))
            .note(&format!("max {:.0} ms over {} stacks", percentile(&walls, 1.0), rounds.len())),
        Measurement::new("overhead beyond the scripts' time, median", "ms", median)
            .with_target(target, median < TARGET_MS),
        Measurement::new("overhead beyond the scripts' time, max", "ms", max).with_target(target, max < TARGET_MS),
        Measurement::new("overhead per hop, median", "ms", median / hops as f64)
            .note("document release, long-poll wake-up, journal, hook spawn, signal"),
        Measurement::new("scripts' own time, sum over the chain, median", "ms", percentile(&scripts, 0.5))
            .note("recorded by each script with $EPOCHREALTIME"),
        Measurement::new("create to the first hook's start, median", "ms", percentile(&first, 0.5))
            .note("POST /v1/stacks, the shim's release, the first agent's wake-up and hook spawn"),
        Measurement::new("one hook's end to the next hook's start, median", "ms", percentile(&handoffs, 0.5)).note(
            &format!(
                "p90 {:.1} ms over {} hand-offs: signal, release, long-poll wake-up, journal, hook spawn",
                percentile(&handoffs, 0.9),
                handoffs.len()
            ),
        ),
        Measurement::new("last hook's end to CREATE_COMPLETE seen, median", "ms", percentile(&last, 0.5))
            .note("the last signal and the 5 ms status poll"),
    ]
}

async fn start_agent(context: &Context, shim: &Shim, parent: &Path, hop: usize) -> (Agent, Daemon) {
    let agent = Agent::register(shim, parent, &server(hop), &AgentSettings::default()).await;
    let mut command = Command::new(&context.binaries.agent);
    command.arg("run").arg("--config").arg(agent.config_path()).env("ANNEAL_LOG", "info");
    let daemon = Daemon::spawn(command, &agent.dir().join("agent.out"), &agent.log_path());
    (agent, daemon)
}

fn server(hop: usize) -> String {
    format!("hop{hop:02}")
}

/// Appends the agents' log tails to a failure.
fn with_logs(error: BenchError, agents: &[(Agent, Daemon)]) -> BenchError {
    let mut text = error.to_string();
    for (agent, daemon) in agents {
        text.push_str(&format!("\n--- {} log:\n{}", agent.name(), tail(&daemon.log_text())));
    }
    BenchError::Failed(text)
}

impl Chain<'_> {
    /// Creates stack `name`, waits for CREATE_COMPLETE and checks the output went through every hop.
    async fn round(&self, name: &str) -> BenchResult<Round> {
        let template = self.template(name);
        let (started, sent) = (Instant::now(), epoch_seconds());
        let response = self
            .http
            .post(format!("{}/v1/stacks", self.shim.url()))
            .bearer_auth(&self.admin)
            .json(&json!({"name": name, "template": template.to_string()}))
            .send()
            .await
            .map_err(http_error("POST /v1/stacks"))?;
        if !response.status().is_success() {
            let status = response.status();
            let text = response.text().await.unwrap_or_default();
            return Err(BenchError::Failed(format!("POST /v1/stacks: {status}: {text}")));
        }
        let detail = self.wait_complete(name, Duration::from_secs(120)).await?;
        let (wall, completed) = (started.elapsed(), epoch_seconds());
        let expected: String =
            std::iter::once("start".to_string()).chain((0..self.hops).map(server)).collect::<Vec<_>>().join("-");
        let result =
            detail["outputs"].as_array().and_then(|outputs| outputs.iter().find(|output| output["name"] == "result"));
        if result.map(|output| &output["value"]) != Some(&json!(expected)) {
            return Err(BenchError::Failed(format!(
                "stack {name}: output result is {result:?}, expected {expected:?}"
            )));
        }
        Ok(Round { wall, sent, completed, scripts: self.script_times(name)? })
    }

    /// One config shared by every hop; deployment N takes deployment N-1's `out` as `previous`.
    fn template(&self, name: &str) -> Value {
        let script = format!(
            "#!/bin/bash\nstarted=$EPOCHREALTIME\nprintf '%s-%s' \"$previous\" \"$hop\" > \"$heat_outputs_path.out\"\n\
             echo \"$started $EPOCHREALTIME\" > {}/{name}-$hop\n",
            self.times.display()
        );
        let mut resources = Map::new();
        resources.insert(
            "config".into(),
            json!({"type": "OS::Heat::SoftwareConfig", "properties": {
                "group": "script", "config": script,
                "inputs": [{"name": "previous"}, {"name": "hop"}], "outputs": [{"name": "out"}],
            }}),
        );
        for hop in 0..self.hops {
            let previous =
                if hop == 0 { json!("start") } else { json!({"get_attr": [format!("d{:02}", hop - 1), "out"]}) };
            resources.insert(
                format!("d{hop:02}"),
                json!({"type": "OS::Heat::SoftwareDeployment", "properties": {
                    "config": {"get_resource": "config"}, "server": server(hop),
                    "input_values": {"previous": previous, "hop": server(hop)},
                }}),
            );
        }
        let last = format!("d{:02}", self.hops - 1);
        json!({
            "heat_template_version": "2018-08-31",
            "resources": resources,
            "outputs": {"result": {"value": {"get_attr": [last, "out"]}}},
        })
    }

    async fn wait_complete(&self, name: &str, limit: Duration) -> BenchResult<Value> {
        super::wait_stack_complete(&self.http, self.shim.url(), &self.admin, name, limit).await
    }

    /// Each hop's script's first and last timestamps, in hop order.
    fn script_times(&self, name: &str) -> BenchResult<Vec<(f64, f64)>> {
        let mut times = Vec::with_capacity(self.hops);
        for hop in 0..self.hops {
            let path = self.times.join(format!("{name}-{}", server(hop)));
            let text = std::fs::read_to_string(&path).map_err(file_error(&path))?;
            let stamps: Vec<f64> =
                text.split_whitespace().filter_map(|stamp| stamp.replace(',', ".").parse().ok()).collect();
            let [started, finished] = stamps[..] else {
                return Err(BenchError::Failed(format!("{}: expected two timestamps, got {text:?}", path.display())));
            };
            times.push((started, finished));
        }
        Ok(times)
    }
}

fn epoch_seconds() -> f64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|elapsed| elapsed.as_secs_f64()).unwrap_or_default()
}
