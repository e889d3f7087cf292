//! Scenario 5, the fleet: 10,000 agents long-polling at once, simulated by one load generator
//! in this process (`load`: one HTTP connection per server, the agent's exact protocol), not by
//! 10,000 processes. The real `anneal-shim serve` runs as a child. Once the shims themselves
//! report every long-poll arrived (each server's `last_seen` moved past a second boundary taken
//! after the first polls), two things are timed, each from just before the create request was
//! sent until the long-poll's answer with the new document was read: a few one-deployment
//! stacks on extra "probe" servers, one at a time, with every other long-poll still parked;
//! then one stack with a SoftwareDeploymentGroup over every fleet server, which wakes them all
//! at once. Also the shims' RSS and CPU time (`procfs`) and the number of connections they
//! held. On each store of `--db`, side by side: one shim on SQLite, one replica on PostgreSQL,
//! and three replicas of one PostgreSQL database with server k polling replica k mod 3 while
//! every stack is created through the first, so most wake-ups cross replicas (NOTIFY at commit,
//! re-read, re-render).

mod figures;
mod floor;
mod load;
mod procfs;

use std::collections::HashMap;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::{Map, Value, json};

pub use self::floor::serve as serve_floor;

use self::figures::Figures;
use self::load::{Admin, Member, Outcome, Parked};
use super::backend::{Backend, side_by_side};
use super::shims::Shims;
use super::{Context, millis};
use crate::error::{BenchError, BenchResult};
use crate::report::ScenarioReport;

/// Requests in flight while registering servers and while fetching first documents.
const SETUP_CONCURRENCY: usize = 32;
/// Between two long-polls' first requests: 10,000 connections are opened over 2 s.
const STAGGER: Duration = Duration::from_micros(200);
/// How long the shim may take to see every long-poll, and every wake-up may take.
const PARK_LIMIT: Duration = Duration::from_secs(90);
const WAKE_LIMIT: Duration = Duration::from_secs(50);

pub async fn run(context: &Context) -> BenchResult<ScenarioReport> {
    let (servers, probes) = if context.smoke { (50, 5) } else { (10_000, 50) };
    let backends = context.database.backends();
    let mut report = ScenarioReport::new(
        "fleet",
        "5. Fleet: 10,000 agents long-polling the shim",
        "none (Heat's os-collect-config polls; nothing to hold a long-poll against)",
    );
    // Each long-poll is a socket here and one in the shim (which inherits this limit).
    let open_files = procfs::raise_open_file_limit(servers as u64 + 1024)?;
    commands(&mut report, &backends, servers + probes, probes);
    let postgres = context.postgres(&backends).await?;
    let mut per_backend = Vec::with_capacity(backends.len());
    let mut floor = None;
    for &backend in &backends {
        eprintln!("anneal-bench: fleet on {} ...", backend.label());
        let shims = Shims::start(backend, postgres, &backend.database_name("fleet", None)).await?;
        let figures = measure(backend, &shims, servers, probes)
            .await
            .map_err(|error| BenchError::Failed(format!("{}: {error}\n{}", backend.label(), shims.log_tails())))?;
        per_backend.push(figures.measurements());
        report.notes.push(figures.note(probes));
        drop(shims);
        if floor.is_none() {
            // Right after the first store, before PostgreSQL has had any load to work off.
            floor = Some(delivery_floor(context, servers, figures.document_bytes).await);
        }
    }
    report.measurements = side_by_side(per_backend);
    match floor {
        Some(Ok(floor)) => report.measurements.extend(floor.measurements()),
        // The stores' figures stand without it.
        Some(Err(error)) => report.notes.push(format!("delivery floor not measured: {error}")),
        None => {}
    }
    report.notes.push(format!(
        "open-file limit {open_files}; the load generator's agents connect from {} loopback addresses in turn \
         (127.0.0.1-{}), as a fleet's come from many: from one, the shim's cap of 1024 active connections per \
         address refused some first long-polls on PostgreSQL",
        load::SOURCE_ADDRESSES,
        load::SOURCE_ADDRESSES
    ));
    report.notes.push(
        "wake-up = from just before POST /v1/stacks was sent until the long-poll's 200 with the new \
         document was read by the load generator (which shares the 2 cores with the shim)"
            .into(),
    );
    report.notes.push(
        "every server at once: the create transaction expands the group and writes, activates and \
         publishes its first 2,000 members (about 7 store statements each); the sweeper releases the \
         rest 2,000 per transaction, each chunk's polls answered at its commit; the engine part alone \
         is timed in-process by `cargo run --release -p anneal-shim --example group_create -- 10000`"
            .into(),
    );
    if let Some(postgres) = postgres {
        report.notes.push(format!(
            "{}; its CPU time is not in the shim CPU rows; with 3 replicas the servers are registered and \
             every stack is created through the first replica, and server k long-polls replica k mod 3",
            postgres.describe()
        ));
    }
    Ok(report)
}

async fn delivery_floor(context: &Context, servers: usize, body_bytes: usize) -> BenchResult<floor::Floor> {
    eprintln!("anneal-bench: fleet's delivery floor ...");
    floor::measure(&floor::Setup {
        executable: &context.binaries.bench,
        servers,
        body_bytes,
        concurrency: SETUP_CONCURRENCY,
        stagger: STAGGER,
        park_limit: PARK_LIMIT,
        wake_limit: WAKE_LIMIT,
    })
    .await
}

fn commands(report: &mut ScenarioReport, backends: &[Backend], registered: usize, probes: usize) {
    for &backend in backends {
        for command in Shims::commands(backend) {
            report.command(&command);
        }
    }
    report.command("anneal-bench floor-server --listen 127.0.0.1:$PORT --body-bytes <the shim's document size>");
    report.command(&format!("POST /v1/servers {{name}} x {registered} ({SETUP_CONCURRENCY} at a time)"));
    report.command("GET /v1/servers/<name>/metadata (Bearer), then GET ...?wait=N with If-None-Match, per server");
    report
        .command(&format!("POST /v1/stacks {{name, template: one SoftwareDeployment on a probe}} x {probes}, in turn"));
    report.command("POST /v1/stacks {name, template: one SoftwareDeploymentGroup over every fleet server}");
}

async fn measure(backend: Backend, shims: &Shims, servers: usize, probes: usize) -> BenchResult<Figures> {
    let (pids, ports) = (shims.pids()?, shims.ports()?);
    let admins: Vec<Admin> = shims
        .all()
        .iter()
        .map(|shim| Admin {
            base: shim.url().to_string(),
            token: shims.admin_token().to_string(),
            http: reqwest::Client::new(),
        })
        .collect();
    let admin = &admins[0];
    let names: Vec<String> = (0..servers).map(|index| format!("fleet-{index:05}")).collect();
    let probe_names: Vec<String> = (0..probes).map(|index| format!("probe-{index:03}")).collect();
    let started = Instant::now();
    let registered = admin.register([names.clone(), probe_names.clone()].concat(), SETUP_CONCURRENCY).await?;
    let registration = started.elapsed();
    let registered = spread(shims, registered)?;

    let agents = load::clients()?;
    let park_cpu_before = cpu_seconds(&pids)?;
    let (members, wait_secs) = load::first_polls(&agents, registered, SETUP_CONCURRENCY).await?;
    let ParkedFleet { mut long_polls, by_shim } = park(&admins, &agents, members, wait_secs).await?;
    let established = ports.iter().map(|&port| procfs::established_connections(port)).sum::<BenchResult<usize>>()?;
    let parked_resident_kib = resident_kib(&pids, "VmRSS")?;
    let park_cpu_seconds = cpu_seconds(&pids)? - park_cpu_before;
    let single_change = single_changes(admin, &mut long_polls, servers, &probe_names).await?;

    let template = template(&names);
    let body = json!({"name": "fleet", "template": template});
    let wake_cpu_before = cpu_seconds(&pids)?;
    let sent = Instant::now();
    admin.create_stack(&body).await?;
    let responded = Instant::now();
    let outcome = long_polls.collect(WAKE_LIMIT).await;
    let wake_cpu_seconds = cpu_seconds(&pids)? - wake_cpu_before;
    check_outcome(&outcome, servers)?;
    Ok(Figures {
        backend,
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
        document_bytes: outcome.wakeups.iter().map(|wakeup| wakeup.body.len()).sum::<usize>() / servers.max(1),
        wake_cpu_seconds,
        peak_resident_kib: resident_kib(&pids, "VmHWM")?,
    })
}

/// Server k's agent polls shim k mod N: its metadata URL (which names the first shim, which
/// registered it) is rewritten to name that one.
fn spread(shims: &Shims, registered: Vec<(String, Value)>) -> BenchResult<Vec<(String, Value)>> {
    registered
        .into_iter()
        .enumerate()
        .map(|(index, (name, mut credentials))| {
            let url = credentials["metadata_url"].as_str().unwrap_or_default().to_string();
            credentials["metadata_url"] = Value::String(shims.rebase(&url, index)?);
            Ok((name, credentials))
        })
        .collect()
}

/// User plus system CPU seconds of every process in `pids`.
fn cpu_seconds(pids: &[i32]) -> BenchResult<f64> {
    pids.iter().map(|&pid| procfs::cpu_seconds(pid)).sum()
}

/// A `Vm*` field of every process in `pids`, in KiB.
fn resident_kib(pids: &[i32], field: &str) -> BenchResult<Vec<u64>> {
    pids.iter().map(|&pid| procfs::status_kib(pid, field)).collect()
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

/// Starts the long-polls after the next whole second and waits until the shims' own lists of
/// servers show each one polled at or after that second (the first polls were all before it;
/// `last_seen` has whole seconds, and each replica knows the polls it served). A long-poll that
/// arrived has passed its token check and is then held on its server's watch.
async fn park(
    admins: &[Admin],
    agents: &[reqwest::Client],
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
        let mut seen: HashMap<String, String> = HashMap::new();
        for admin in admins {
            for server in admin.servers().await? {
                let Some(last_seen) = server.last_seen else { continue };
                let latest = seen.entry(server.name).or_default();
                if *latest < last_seen {
                    *latest = last_seen;
                }
            }
        }
        let by_shim = seen.values().filter(|seen| seen.as_str() >= threshold.as_str()).count();
        if by_shim == servers && long_polls.sent() == servers {
            return Ok(ParkedFleet { long_polls, by_shim });
        }
        if Instant::now() >= deadline {
            return Err(BenchError::Failed(format!(
                "after {PARK_LIMIT:?} the shims had seen {by_shim} of {servers} long-polls ({} sent)",
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

fn epoch_millis() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|elapsed| elapsed.as_millis() as u64).unwrap_or_default()
}
