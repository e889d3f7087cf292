//! Several `anneal-shim serve` replicas on one PostgreSQL database (no load balancer): any
//! replica takes any call, a commit on one wakes the long-polls held by the others, a killed
//! replica (kill -9) loses nothing and the stack completes through the others, and a replica
//! restarted with an empty memory catches up. Agents list every replica (`server add` prints
//! them) and fail over between them; each deployment runs exactly once (the scripts' runs log).

mod replicas_support;
mod seed_case;

use std::time::Duration;

use anneal_tests::{AgentSettings, Fleet, wait_until};
use replicas_support::{
    Cluster, STACK, WAIT_TIMEOUT_TEMPLATE, chain_result, chain_template, runs, unanswered_deployment_template,
    with_extra_deployment, with_wait_condition, write,
};

const CONVERGE_LIMIT: Duration = Duration::from_secs(120);

fn settings(log: &std::path::Path) -> AgentSettings {
    AgentSettings::default()
        .hook_env("RUNS_LOG", &log.display().to_string())
        .hook_env("ANNEAL_AGENT", &anneal_tests::agent_binary().display().to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn any_replica_serves_and_commits_wake_the_others() {
    let cluster = Cluster::start(3).await;
    let names: Vec<String> = (0..6).map(|index| format!("vm{index}")).collect();
    let name_refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let log = cluster.replicas[0].dir().join("runs.log");
    // vm0 polls replica 0, vm1 replica 1, ...: every step of the chain crosses replicas.
    let fleet = Fleet::start_across(&cluster.shims(), &name_refs, &settings(&log)).await;
    let template = write(cluster.replicas[2].dir(), "chain.yaml", &chain_template(&names, "0"));
    let created = cluster.replicas[2]
        .cli(&["stack", "create", STACK, "--template", template.to_str().unwrap(), "--wait", "--timeout", "60"])
        .await;
    assert_eq!(created.code, 0, "stack create --wait through replica 2: {created:?}\n{}", fleet.logs());
    for replica in &cluster.replicas {
        assert_eq!(replica.stack_status(STACK).await, "CREATE_COMPLETE");
        assert_eq!(replica.stack_outputs(STACK).await["result"], chain_result(&names));
        let servers = replica.cli_json(&["server", "list", "--json"]).await;
        assert_eq!(servers.as_array().map(Vec::len), Some(6), "every replica sees every server: {servers}");
    }
    let counts = runs(&log);
    assert_eq!(counts.len(), 6, "{counts:?}");
    assert!(counts.values().all(|count| *count == 1), "each deployment ran once: {counts:?}");
    // An agent's document names the replica that served it in its signal URL.
    let status = fleet.agent("vm1").status().await;
    assert!(!status.is_empty(), "vm1 ran its deployment");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_replicas_lose_nothing_and_a_restarted_one_catches_up() {
    let mut cluster = Cluster::start(3).await;
    // 30 servers; replica 0 gets the most long-polls (every other server, then a third of the rest).
    let names: Vec<String> = (0..30).map(|index| format!("vm{index:02}")).collect();
    let name_refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let log = cluster.replicas[0].dir().join("runs.log");
    let (first, rest) = name_refs.split_at(12);
    let shims = cluster.shims();
    let fleet = Fleet::start_across(&[shims[0]], first, &settings(&log)).await;
    let others = Fleet::start_across(&[shims[1], shims[2]], rest, &settings(&log)).await;
    // A wait condition in the middle of the chain, and a stack timeout that must not fire.
    let chain = with_wait_condition(&chain_template(&names, "0.3"), 5, "vm05");
    let template = write(cluster.replicas[1].dir(), "chain.yaml", &chain);
    // Created through replica 1, without --wait: the test kills replicas while it runs.
    let arguments = ["stack", "create", STACK, "--template", template.to_str().unwrap(), "--timeout", "300"];
    let created = cluster.replicas[1].cli(&arguments).await;
    assert_eq!(created.code, 0, "stack create through replica 1: {created:?}");

    wait_for_runs(&log, 8).await;
    cluster.replicas[0].crash().await; // the one holding the most long-polls
    wait_for_runs(&log, 16).await;
    cluster.replicas[1].crash().await; // the one that created the stack
    wait_for_runs(&log, 22).await;
    cluster.replicas[0].start_again().await; // empty memory

    let survivor = &cluster.replicas[2];
    let settled = settle_or_explain(&cluster, STACK, &[&fleet, &others], &log).await;
    assert_eq!(settled["status"], "CREATE_COMPLETE", "{settled}");
    let outputs = survivor.stack_outputs(STACK).await;
    assert_eq!(outputs["result"], chain_result(&names));
    assert_eq!(outputs["waited"], r#"{"one": "ready"}"#, "the wait condition's signal");
    let counts = runs(&log);
    assert_eq!(counts.len(), 31, "the chain and notify: {counts:?}");
    assert!(counts.values().all(|count| *count == 1), "each deployment ran exactly once: {counts:?}");

    // The restarted replica answers as the survivor does, documents included.
    let restarted = &cluster.replicas[0];
    assert_eq!(restarted.stack_status(STACK).await, "CREATE_COMPLETE");
    let agent = fleet.agent("vm00");
    let through_restarted = metadata_version(restarted.url(), agent).await;
    let through_survivor = metadata_version(survivor.url(), agent).await;
    assert_eq!(through_restarted, through_survivor, "the restarted replica serves the current document");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stack_update_racing_signals_on_other_replicas_completes_once() {
    let cluster = Cluster::start(3).await;
    let names: Vec<String> = (0..9).map(|index| format!("vm{index}")).collect();
    let name_refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let log = cluster.replicas[0].dir().join("runs.log");
    let fleet = Fleet::start_across(&cluster.shims(), &name_refs, &settings(&log)).await;
    let chain = chain_template(&names, "0.3");
    let template = write(cluster.replicas[0].dir(), "chain.yaml", &chain);
    let created = cluster.replicas[0].cli(&["stack", "create", STACK, "--template", template.to_str().unwrap()]).await;
    assert_eq!(created.code, 0, "{created:?}");
    wait_for_runs(&log, 3).await;
    // The update goes through replica 2 while the signals of the create reach replicas 0 and 1.
    let updated = write(cluster.replicas[2].dir(), "chain2.yaml", &with_extra_deployment(&chain, "vm4"));
    let update = cluster.replicas[2]
        .cli(&["stack", "update", STACK, "--template", updated.to_str().unwrap(), "--wait", "--timeout", "90"])
        .await;
    assert_eq!(update.code, 0, "stack update --wait: {update:?}\n{}", fleet.logs());
    assert_eq!(cluster.replicas[1].stack_status(STACK).await, "UPDATE_COMPLETE");
    assert_eq!(cluster.replicas[1].stack_outputs(STACK).await["result"], chain_result(&names));
    let counts = runs(&log);
    assert_eq!(counts.len(), 10, "the chain and the extra deployment: {counts:?}");
    assert!(counts.values().all(|count| *count == 1), "each deployment ran exactly once: {counts:?}");
}

/// The convergence seed case (see `seed_case`) on three replicas: the rollout runs on the
/// replicas' sweepers, the second update goes to another replica than the first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_update_on_another_replica_keeps_the_rollout_and_changes_the_other_role_at_once() {
    let cluster = Cluster::start(3).await;
    let log = cluster.replicas[0].dir().join("roles.log");
    let settings = AgentSettings::default().hook_env("ANNEAL_TEST_LOG", &log.display().to_string());
    let fleet = Fleet::start_across(&cluster.shims(), &seed_case::SERVERS, &settings).await;
    seed_case::run(&cluster.replicas[0], &cluster.replicas[2], &log, || fleet.logs()).await;
}

/// A failing rolling update with rollback on three replicas: the replica that took the update
/// is killed (SIGKILL) once the rollback runs; the others finish it, and every server's last
/// run is the previous config.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rollback_survives_the_replica_that_started_it() {
    let mut cluster = Cluster::start(3).await;
    let log = cluster.replicas[0].dir().join("runs.log");
    let settings = AgentSettings::default().hook_env("ANNEAL_TEST_LOG", &log.display().to_string());
    let fleet = Fleet::start_across(&cluster.shims(), &["vm1", "vm2", "vm3"], &settings).await;
    let template = write(cluster.replicas[0].dir(), "rollback.yaml", seed_case::ROLLBACK_TEMPLATE);
    let template = template.to_str().expect("a UTF-8 path");
    let create = ["stack", "create", "rb", "--template", template, "--param", "message=one", "--enable-rollback"];
    let created = cluster.replicas[0].cli(&[&create[..], &["--wait", "--timeout", "60"]].concat()).await;
    assert_eq!(created.code, 0, "{created:?}\n{}", fleet.logs());
    cluster.replicas[0].cli_ok(&["stack", "update", "rb", "--template", template, "--param", "message=bad"]).await;
    let survivor = &cluster.replicas[2];
    wait_until(CONVERGE_LIMIT, "the rollback starts", || async {
        (survivor.stack_status("rb").await == "ROLLBACK_IN_PROGRESS").then_some(())
    })
    .await;
    cluster.replicas[0].crash().await;
    let settled = cluster.replicas[2].settled("rb", CONVERGE_LIMIT).await;
    assert_eq!(settled["status"], "ROLLBACK_COMPLETE", "{settled}\n{}", fleet.logs());
    let expected =
        [("vm1", "one"), ("vm2", "one"), ("vm3", "one")].map(|(server, message)| (server.into(), message.into()));
    assert_eq!(seed_case::last_messages(&log), expected, "{:#?}", seed_case::logged(&log));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deadlines_fire_once_whichever_replica_is_alive() {
    let mut cluster = Cluster::start(3).await;
    // A registered server without an agent: its deployment is never signalled.
    cluster.replicas[0].cli_ok(&["server", "add", "silent", "--format", "json"]).await;
    let waiting = write(cluster.replicas[0].dir(), "wait.yaml", WAIT_TIMEOUT_TEMPLATE);
    let unanswered = write(cluster.replicas[0].dir(), "silent.yaml", &unanswered_deployment_template("silent"));
    let creator = &cluster.replicas[0];
    creator.cli_ok(&["stack", "create", "waiting", "--template", waiting.to_str().unwrap()]).await;
    creator.cli_ok(&["stack", "create", "silent", "--template", unanswered.to_str().unwrap(), "--timeout", "4"]).await;
    // The replica that wrote both deadlines dies before they fall due; the others fire them.
    cluster.replicas[0].crash().await;
    let survivor = &cluster.replicas[1];
    for stack in ["waiting", "silent"] {
        let settled = survivor.settled(stack, CONVERGE_LIMIT).await;
        assert_eq!(settled["status"], "CREATE_FAILED", "{stack}: {settled}");
    }
    // Give every sweeper (each runs every 500 ms) time to fire a second time if it could.
    tokio::time::sleep(Duration::from_secs(2)).await;
    // Each failure is one event of the resource that timed out (the stack's own event quotes it).
    let failures = |events: &serde_json::Value, resource: &str, needle: &str| {
        let events = events.as_array().expect("events");
        events
            .iter()
            .filter(|event| event["resource"] == resource && event["status"] == "CREATE_FAILED")
            .filter(|event| event["reason"].as_str().unwrap_or_default().contains(needle))
            .count()
    };
    let events = survivor.cli_json(&["stack", "events", "waiting", "--json"]).await;
    assert_eq!(failures(&events, "wait", "WaitConditionTimeout"), 1, "the wait condition timed out once: {events}");
    let events = cluster.replicas[2].cli_json(&["stack", "events", "silent", "--json"]).await;
    assert_eq!(failures(&events, "silent", "Timed out"), 1, "the stack timed out once: {events}");
}

/// Waits for the stack to settle on the last replica; when it does not in time, panics with
/// what explains it: the resources still in progress, the runs so far, the replicas' logs and
/// the logs of the agents whose deployments are unfinished.
async fn settle_or_explain(
    cluster: &Cluster,
    stack: &str,
    fleets: &[&Fleet],
    log: &std::path::Path,
) -> serde_json::Value {
    let survivor = cluster.replicas.last().expect("a replica");
    let deadline = std::time::Instant::now() + CONVERGE_LIMIT;
    loop {
        let show = survivor.stack_show(stack).await;
        if !show["status"].as_str().unwrap_or_default().ends_with("IN_PROGRESS") {
            return show;
        }
        if std::time::Instant::now() > deadline {
            let unfinished: Vec<&serde_json::Value> = show["resources"]
                .as_array()
                .map(|resources| resources.iter().filter(|resource| resource["status"] != "CREATE_COMPLETE").collect())
                .unwrap_or_default();
            let mut report = format!(
                "stack {stack} did not settle in {CONVERGE_LIMIT:?}\nunfinished: {unfinished:#?}\nruns: {:?}\n",
                runs(log)
            );
            for (index, replica) in cluster.replicas.iter().enumerate() {
                report.push_str(&format!("--- replica {index} ---\n{}\n", tail(&replica.log_text(), 40)));
            }
            for fleet in fleets {
                for agent in fleet.agents() {
                    let text = agent.log_text();
                    if unfinished.iter().any(|resource| resource.to_string().contains(agent.name()))
                        || text.contains("WARN")
                    {
                        report.push_str(&format!("--- agent {} ---\n{}\n", agent.name(), tail(&text, 30)));
                    }
                }
            }
            panic!("{report}");
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

async fn wait_for_runs(log: &std::path::Path, count: usize) {
    let what = format!("{count} deployments ran");
    wait_until(CONVERGE_LIMIT, &what, || async { (runs(log).len() >= count).then_some(()) }).await;
}

/// The document version a replica serves to the agent's server.
async fn metadata_version(base: &str, agent: &anneal_tests::Agent) -> u64 {
    let token = std::fs::read_to_string(agent.token_file()).expect("token");
    let response = http_client()
        .get(format!("{base}/v1/servers/{}/metadata", agent.name()))
        .bearer_auth(token.trim())
        .send()
        .await
        .expect("GET metadata");
    assert!(response.status().is_success(), "{}", response.status());
    let text = response.text().await.expect("a body");
    let document: serde_json::Value = serde_json::from_str(&text).expect("a JSON document");
    document["anneal"]["version"].as_u64().expect("a version")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_restart_mid_traversal_loses_no_acknowledged_write() {
    let mut cluster = Cluster::start(2).await;
    let names: Vec<String> = (0..10).map(|index| format!("vm{index}")).collect();
    let name_refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let log = cluster.replicas[0].dir().join("runs.log");
    let fleet = Fleet::start_across(&cluster.shims(), &name_refs, &settings(&log)).await;
    let template = write(cluster.replicas[0].dir(), "chain.yaml", &chain_template(&names, "0.3"));
    let created = cluster.replicas[0].cli(&["stack", "create", STACK, "--template", template.to_str().unwrap()]).await;
    assert_eq!(created.code, 0, "{created:?}");
    wait_for_runs(&log, 3).await;

    cluster.postgres.stop_fast();
    // An admin call while the database is down is answered, 503 with Retry-After, not held.
    let started = std::time::Instant::now();
    let token = std::fs::read_to_string(cluster.replicas[1].token_file()).expect("token");
    let response = http_client()
        .get(format!("{}/v1/stacks", cluster.replicas[1].url()))
        .bearer_auth(token.trim())
        .timeout(Duration::from_secs(30))
        .send()
        .await
        .expect("an answer while the database is down");
    let retry_after = response.headers().get("retry-after").cloned();
    assert_eq!(response.status().as_u16(), 503, "{:?}", response.text().await);
    assert!(retry_after.is_some(), "a 503 says when to retry");
    assert!(started.elapsed() < Duration::from_secs(15), "answered in {:?}", started.elapsed());
    cluster.postgres.start_again();

    let settled = cluster.replicas[1].settled(STACK, CONVERGE_LIMIT).await;
    assert_eq!(settled["status"], "CREATE_COMPLETE", "{settled}\n{}", fleet.logs());
    assert_eq!(cluster.replicas[0].stack_outputs(STACK).await["result"], chain_result(&names));
    let counts = runs(&log);
    assert!(counts.len() == 10 && counts.values().all(|count| *count == 1), "each ran once: {counts:?}");
}

/// A plain HTTP client (reqwest is built without a default TLS provider).
fn http_client() -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::new()
}

/// The web view across replicas: a session opened on one replica is a session on the others, a
/// logout on any ends it on all, and a live stream held by one replica follows a change
/// committed through another (PostgreSQL announces the stacks a commit changed).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn web_view_sessions_and_live_streams_hold_across_replicas() {
    let cluster = Cluster::start(2).await;
    let (first, second) = (&cluster.replicas[0], &cluster.replicas[1]);
    let vm1 = first.cli_json(&["server", "add", "vm1", "--format", "json"]).await;
    let template = write(first.dir(), "lonely.yaml", &unanswered_deployment_template("vm1"));
    first.cli_ok(&["stack", "create", "lonely", "--template", template.to_str().unwrap()]).await;
    let client = http_client();
    let login = client
        .post(format!("{}/ui/login", second.url()))
        .body(serde_json::json!({"token": replicas_support::ADMIN_TOKEN}).to_string())
        .send()
        .await
        .expect("a login");
    assert_eq!(login.status(), 204);
    let cookie = login.headers()["set-cookie"].to_str().unwrap().split(';').next().unwrap().to_string();
    let stacks = |replica: &anneal_tests::Shim| format!("{}/ui/api/stacks", replica.url());
    let on_first = client.get(stacks(first)).header("cookie", &cookie).send().await.expect("stacks");
    assert_eq!(on_first.status(), 200, "a session opened on replica 2 is one on replica 1");

    let mut stream = client
        .get(format!("{}/ui/api/stacks/lonely/watch", second.url()))
        .header("cookie", &cookie)
        .timeout(Duration::from_secs(60))
        .send()
        .await
        .expect("a stream");
    assert_eq!(stream.status(), 200);
    let mut seen = String::new();
    let mut read_until = async |wanted: &str, seen: &mut String| {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        while !seen.contains(wanted) {
            match tokio::time::timeout_at(deadline, stream.chunk()).await {
                Ok(Ok(Some(bytes))) => seen.push_str(&String::from_utf8_lossy(&bytes)),
                other => panic!("{wanted:?} never came on replica 2's stream ({other:?}): {seen}"),
            }
        }
    };
    read_until("CREATE_IN_PROGRESS", &mut seen).await;
    // The deployment's signal, through replica 1 (its document names that replica).
    let document = client
        .get(vm1["metadata_url"].as_str().unwrap())
        .bearer_auth(vm1["token"].as_str().unwrap())
        .send()
        .await
        .expect("vm1's metadata");
    let document: serde_json::Value = serde_json::from_str(&document.text().await.unwrap()).unwrap();
    let inputs = document["deployments"][0]["inputs"].as_array().cloned().unwrap_or_default();
    let signal = inputs.iter().find(|input| input["name"] == "deploy_signal_id").expect("a signal URL");
    let answer = client
        .post(signal["value"].as_str().unwrap())
        .body(serde_json::json!({"deploy_status_code": 0}).to_string())
        .send()
        .await
        .expect("a signal");
    assert_eq!(answer.status(), 200);
    seen.clear();
    read_until("CREATE_COMPLETE", &mut seen).await;

    let logout = client.post(format!("{}/ui/logout", first.url())).header("cookie", &cookie).send().await;
    assert_eq!(logout.expect("a logout").status(), 204);
    let on_second = client.get(stacks(second)).header("cookie", &cookie).send().await.expect("stacks");
    assert_eq!(on_second.status(), 401, "a logout through replica 1 ends the session on replica 2");
}
