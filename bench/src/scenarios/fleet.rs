//! Scenario 5, the fleet: 10,000 agents long-polling one shim at once, simulated by one load
//! generator in this process (`load`: one HTTP connection per server, the agent's exact
//! protocol), not by 10,000 processes. The real `anneal-shim serve` runs as a child. Once the
//! shim itself reports every long-poll arrived (each server's `last_seen` moved past a second
//! boundary taken after the first polls), two things are timed, each from just before the
//! create request was sent until the long-poll's answer with the new document was read:
//! a few one-deployment stacks on extra "probe" servers, one at a time, with every other
//! long-poll still parked; then one stack with a SoftwareDeploymentGroup over every fleet
//! server, which wakes them all at once. Also the shim's RSS and CPU time (`procfs`) and the
//! number of connections it held.

mod load;
mod procfs;

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anneal_tests::Shim;
use serde_json::{Map, Value, json};

use self::load::{Admin, Member, Outcome, Parked};
use super::{Context, millis};
use crate::children::tail;
use crate::error::{BenchError, BenchResult, file_error};
use crate::report::{Measurement, ScenarioReport, percentile};

/// Requests in flight while registering servers and while fetching first documents.
const SETUP_CONCURRENCY: usize = 32;
/// Between two long-polls' first requests: 10,000 connections are opened over 2 s.
const STAGGER: Duration = Duration::from_micros(200);
/// How long the shim may take to see every long-poll, and every wake-up may take.
const PARK_LIMIT: Duration = Duration::from_secs(90);
const WAKE_LIMIT: Duration = Duration::from_secs(50);

/// What one run measured.
struct Figures {
    servers: usize,
    registration: Duration,
    parked_by_shim: usize,
    established: usize,
    parked_resident_kib: u64,
    park_cpu_seconds: f64,
    /// Per probe, milliseconds from just before its one-deployment stack's create request was
    /// sent until its long-poll answered, with every other long-poll parked.
    single_change: Vec<f64>,
    template_bytes: usize,
    request_bytes: usize,
    create_request: Duration,
    /// Per server, milliseconds from just before the create request was sent.
    from_sent: Vec<f64>,
    /// Per server, milliseconds from the create response (negative: woken before it came).
    from_response: Vec<f64>,
    wake_cpu_seconds: f64,
    peak_resident_kib: u64,
}

pub async fn run(context: &Context) -> BenchResult<ScenarioReport> {
    let (servers, probes) = if context.smoke { (50, 5) } else { (10_000, 50) };
    let mut report = ScenarioReport::new(
        "fleet",
        "5. Fleet: 10,000 agents long-polling one shim",
        "none (Heat's os-collect-config polls; nothing to hold a long-poll against)",
    );
    // Each long-poll is a socket here and one in the shim (which inherits this limit).
    let open_files = procfs::raise_open_file_limit(servers as u64 + 1024)?;
    let shim = Shim::start().await;
    let token_file = shim.token_file();
    let token = std::fs::read_to_string(&token_file).map_err(file_error(&token_file))?.trim().to_string();
    let admin = Admin { base: shim.url().to_string(), token, http: reqwest::Client::new() };
    report.command("anneal-shim serve --listen 127.0.0.1:0 --db sqlite://$TMP/shim.db");
    report.command(&format!("POST /v1/servers {{name}} x {} ({SETUP_CONCURRENCY} at a time)", servers + probes));
    report.command("GET /v1/servers/<name>/metadata (Bearer), then GET ...?wait=N with If-None-Match, per server");
    report
        .command(&format!("POST /v1/stacks {{name, template: one SoftwareDeployment on a probe}} x {probes}, in turn"));
    report.command("POST /v1/stacks {name, template: one SoftwareDeploymentGroup over every fleet server}");
    let figures = measure(&shim, &admin, servers, probes).await;
    let figures =
        figures.map_err(|error| BenchError::Failed(format!("{error}\nshim log: {}", tail(&shim.log_text()))))?;
    report.measurements = measurements(&figures);
    report.notes.push(format!(
        "{} fleet servers + {probes} probes; open-file limit {open_files}; registration took {:.1} s; template {} KiB, request body {} KiB",
        figures.servers,
        figures.registration.as_secs_f64(),
        figures.template_bytes / 1024,
        figures.request_bytes / 1024,
    ));
    report.notes.push(
        "wake-up = from just before POST /v1/stacks was sent until the long-poll's 200 with the new \
         document was read by the load generator (which shares the 2 cores with the shim)"
            .into(),
    );
    report.notes.push(
        "every server at once: the create is one transaction that expands the group, activates each \
         member (11 store statements) and renders every document before any poll is answered; the \
         engine part alone is timed in-process by `cargo run --release -p anneal-shim --example \
         group_create -- 10000`"
            .into(),
    );
    Ok(report)
}

async fn measure(shim: &Shim, admin: &Admin, servers: usize, probes: usize) -> BenchResult<Figures> {
    let pid = shim.pid().ok_or_else(|| BenchError::Failed("the shim is not running".into()))?;
    let port = shim
        .url()
        .rsplit_once(':')
        .and_then(|(_, port)| port.trim_end_matches('/').parse::<u16>().ok())
        .ok_or_else(|| BenchError::Failed(format!("no port in {}", shim.url())))?;
    let names: Vec<String> = (0..servers).map(|index| format!("fleet-{index:05}")).collect();
    let probe_names: Vec<String> = (0..probes).map(|index| format!("probe-{index:03}")).collect();
    let started = Instant::now();
    let registered = admin.register([names.clone(), probe_names.clone()].concat(), SETUP_CONCURRENCY).await?;
    let registration = started.elapsed();

    let agents = reqwest::Client::builder()
        .tcp_nodelay(true)
        .pool_max_idle_per_host(usize::MAX)
        .build()
        .map_err(|error| BenchError::Failed(format!("cannot build the load generator's client: {error}")))?;
    let park_cpu_before = procfs::cpu_seconds(pid)?;
    let (members, wait_secs) = load::first_polls(&agents, registered, SETUP_CONCURRENCY).await?;
    let ParkedFleet { mut long_polls, by_shim } = park(admin, &agents, members, wait_secs).await?;
    let established = procfs::established_connections(port)?;
    let parked_resident_kib = procfs::status_kib(pid, "VmRSS")?;
    let park_cpu_seconds = procfs::cpu_seconds(pid)? - park_cpu_before;
    let single_change = single_changes(admin, &mut long_polls, servers, &probe_names).await?;

    let template = template(&names);
    let body = json!({"name": "fleet", "template": template});
    let wake_cpu_before = procfs::cpu_seconds(pid)?;
    let sent = Instant::now();
    admin.create_stack(&body).await?;
    let responded = Instant::now();
    let outcome = long_polls.collect(WAKE_LIMIT).await;
    let wake_cpu_seconds = procfs::cpu_seconds(pid)? - wake_cpu_before;
    check_outcome(&outcome, servers)?;
    Ok(Figures {
        servers,
        registration,
        parked_by_shim: by_shim,
        established,
        parked_resident_kib,
        park_cpu_seconds,
        single_change,
        template_bytes: template.len(),
        request_bytes: body.to_string().len(),
        create_request: responded - sent,
        from_sent: outcome.wakeups.iter().map(|wakeup| signed_millis(wakeup.at, sent)).collect(),
        from_response: outcome.wakeups.iter().map(|wakeup| signed_millis(wakeup.at, responded)).collect(),
        wake_cpu_seconds,
        peak_resident_kib: procfs::status_kib(pid, "VmHWM")?,
    })
}

/// One stack per probe server, one after the other, each with one deployment on that server:
/// milliseconds from just before each create request was sent until the probe's long-poll
/// answered, while every other long-poll stays parked. The probes' long-polls follow the
/// fleet's (index `servers + k`).
async fn single_changes(
    admin: &Admin,
    long_polls: &mut Parked,
    servers: usize,
    probe_names: &[String],
) -> BenchResult<Vec<f64>> {
    let mut latencies = Vec::with_capacity(probe_names.len());
    for (offset, probe) in probe_names.iter().enumerate() {
        let template = json!({
            "heat_template_version": "2018-08-31",
            "resources": {
                "config": {"type": "OS::Heat::SoftwareConfig", "properties": {"group": "script", "config": "#!/bin/sh\n"}},
                "deployment": {
                    "type": "OS::Heat::SoftwareDeployment",
                    "properties": {"config": {"get_resource": "config"}, "server": probe},
                },
            },
        });
        let body = json!({"name": probe, "template": template.to_string()});
        let sent = Instant::now();
        admin.create_stack(&body).await?;
        let wakeup = long_polls.wait_for(servers + offset, WAKE_LIMIT).await.map_err(BenchError::Failed)?;
        if !has_deployment(&wakeup.body) {
            return Err(BenchError::Failed(format!("{probe} woke with a document without a deployment")));
        }
        latencies.push(signed_millis(wakeup.at, sent));
    }
    Ok(latencies)
}

/// Milliseconds from `since` to `at`, negative when `at` came first.
fn signed_millis(at: Instant, since: Instant) -> f64 {
    match at.checked_duration_since(since) {
        Some(after) => millis(after),
        None => -millis(since - at),
    }
}

fn has_deployment(body: &[u8]) -> bool {
    let document: Value = serde_json::from_slice(body).unwrap_or_default();
    document["deployments"].as_array().is_some_and(|deployments| !deployments.is_empty())
}

/// The long-polls, once the shim has seen every one of them.
struct ParkedFleet {
    long_polls: Parked,
    /// Servers whose `last_seen` shows their long-poll arrived.
    by_shim: usize,
}

/// Starts the long-polls after the next whole second and waits until the shim's own list of
/// servers shows each one polled at or after that second (the first polls were all before it;
/// `last_seen` has whole seconds). A long-poll that arrived has passed its token check and is
/// then held on its server's watch.
async fn park(
    admin: &Admin,
    agents: &reqwest::Client,
    members: Vec<Member>,
    wait_secs: u64,
) -> BenchResult<ParkedFleet> {
    let servers = members.len();
    let now = epoch_millis();
    let boundary = (now / 1000 + 1) * 1000;
    tokio::time::sleep(Duration::from_millis(boundary - now + 5)).await;
    let threshold = anneal_shim::dates::rfc3339(boundary);
    let long_polls = load::park(agents, members, wait_secs, STAGGER);
    let deadline = Instant::now() + PARK_LIMIT;
    loop {
        tokio::time::sleep(Duration::from_millis(250)).await;
        let listing = admin.servers().await?;
        let by_shim = listing
            .iter()
            .filter(|server| server.last_seen.as_deref().is_some_and(|seen| seen >= threshold.as_str()))
            .count();
        if by_shim == servers && long_polls.sent() == servers {
            return Ok(ParkedFleet { long_polls, by_shim });
        }
        if Instant::now() >= deadline {
            return Err(BenchError::Failed(format!(
                "after {PARK_LIMIT:?} the shim had seen {by_shim} of {servers} long-polls ({} sent)",
                long_polls.sent()
            )));
        }
    }
}

/// Every server woke, with a document that holds a deployment.
fn check_outcome(outcome: &Outcome, servers: usize) -> BenchResult<()> {
    let without_deployment = outcome.wakeups.iter().filter(|wakeup| !has_deployment(&wakeup.body)).count();
    if outcome.wakeups.len() == servers && outcome.failures.is_empty() && without_deployment == 0 {
        return Ok(());
    }
    let first_failures: Vec<&str> = outcome.failures.iter().take(5).map(String::as_str).collect();
    Err(BenchError::Failed(format!(
        "{} of {servers} long-polls woke ({without_deployment} without a deployment), {} failed, {} still \
         held after {WAKE_LIMIT:?}; first failures: {first_failures:?}",
        outcome.wakeups.len(),
        outcome.failures.len(),
        outcome.not_woken,
    )))
}

/// One no-op script config and one SoftwareDeploymentGroup whose members are every server.
fn template(names: &[String]) -> String {
    let servers: Map<String, Value> = names.iter().map(|name| (name.clone(), Value::String(name.clone()))).collect();
    json!({
        "heat_template_version": "2018-08-31",
        "resources": {
            "config": {"type": "OS::Heat::SoftwareConfig", "properties": {"group": "script", "config": "#!/bin/sh\n"}},
            "fleet": {
                "type": "OS::Heat::SoftwareDeploymentGroup",
                "properties": {"config": {"get_resource": "config"}, "servers": servers},
            },
        },
    })
    .to_string()
}

fn measurements(figures: &Figures) -> Vec<Measurement> {
    let mebibytes = |kib: u64| kib as f64 / 1024.0;
    let p99 = percentile(&figures.from_sent, 0.99);
    let single_p99 = percentile(&figures.single_change, 0.99);
    let peak = mebibytes(figures.peak_resident_kib);
    vec![
        Measurement::new("one-server change, p50, with all parked", "ms", percentile(&figures.single_change, 0.5)),
        Measurement::new("one-server change, p99, with all parked", "ms", single_p99)
            .with_target("p99 < 50 ms", single_p99 < 50.0)
            .note(&format!("{} stacks of one deployment, one after the other", figures.single_change.len())),
        Measurement::new("every server at once: wake-up p50", "ms", percentile(&figures.from_sent, 0.5)),
        Measurement::new("every server at once: wake-up p99", "ms", p99).with_target("p99 < 50 ms", p99 < 50.0),
        Measurement::new("every server at once: wake-up max", "ms", percentile(&figures.from_sent, 1.0)),
        Measurement::new("stack create request (POST to its response)", "ms", millis(figures.create_request))
            .note("the wake-ups of every server at once include it"),
        Measurement::new("wake-up p50 after the create response", "ms", percentile(&figures.from_response, 0.5)),
        Measurement::new("wake-up p99 after the create response", "ms", percentile(&figures.from_response, 0.99))
            .note("negative: woken before the response arrived"),
        Measurement::new("shim peak RSS (VmHWM, whole run)", "MiB", peak).with_target("RSS < 256 MiB", peak < 256.0),
        Measurement::new("shim RSS with every long-poll parked", "MiB", mebibytes(figures.parked_resident_kib)),
        Measurement::new("shim CPU, first polls + parking", "s", figures.park_cpu_seconds),
        Measurement::new("shim CPU, stack create + every wake-up", "s", figures.wake_cpu_seconds),
        Measurement::new("long-polls parked (shim's last_seen)", "", figures.parked_by_shim as f64),
        Measurement::new("connections established to the shim", "", figures.established as f64)
            .note("from /proc/net/tcp, while parked; plus the admin client's one"),
    ]
}

fn epoch_millis() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|elapsed| elapsed.as_millis() as u64).unwrap_or_default()
}
