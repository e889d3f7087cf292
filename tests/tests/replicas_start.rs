//! Starting a replica on PostgreSQL: what `anneal-shim serve --db postgres://...` refuses, and
//! the secrets every replica must share (docs/cli.md, "Replicas on PostgreSQL").

use std::time::{Duration, Instant};

use anneal_tests::{Postgres, run_command, shim_binary};
use tokio::process::Command;

const TOKEN: &str = "replica-admin-token-0123456789abcdef0123456789";

/// Runs `serve` on `database_url` with `token` as ANNEAL_TOKEN until it exits (it must not
/// start serving: each case here is refused).
async fn refused_start(database_url: &str, token: Option<&str>) -> (i32, String, Duration) {
    let mut command = Command::new(shim_binary());
    command.args(["serve", "--listen", "127.0.0.1:0", "--db", database_url]).env_remove("ANNEAL_TOKEN");
    if let Some(token) = token {
        command.env("ANNEAL_TOKEN", token);
    }
    let started = Instant::now();
    let output = run_command(command, Duration::from_secs(60)).await;
    (output.code, output.stderr, started.elapsed())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_needs_the_shared_admin_token() {
    let postgres = Postgres::start(false);
    let url = postgres.create_database("anneal");
    let (code, stderr, _) = refused_start(&url, None).await;
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("ANNEAL_TOKEN"), "{stderr}");
    let (code, stderr, _) = refused_start(&url, Some("short")).await;
    assert_eq!(code, 2, "a short token is refused: {stderr}");

    // The first replica stores the token's hash (and the token key); a replica given another
    // token refuses to start, naming the table row that fixes it.
    let mut first = Command::new(shim_binary());
    first.args(["serve", "--listen", "127.0.0.1:0", "--db", &url]).env("ANNEAL_TOKEN", TOKEN);
    let directory = tempfile::tempdir().expect("temp dir");
    let mut daemon = anneal_tests::Daemon::spawn(first, &directory.path().join("out"), &directory.path().join("log"));
    anneal_tests::wait_until(Duration::from_secs(20), "the first replica starts", || async {
        std::fs::read_to_string(directory.path().join("out")).ok().filter(|text| text.contains("listening on"))
    })
    .await;
    let stored = postgres.psql("anneal", "SELECT name FROM shared_secrets ORDER BY name");
    assert_eq!(stored.lines().collect::<Vec<_>>(), ["admin_token_hash", "token_key"]);
    assert!(!postgres.psql("anneal", "SELECT value FROM shared_secrets").contains(TOKEN), "only the hash is kept");
    let (code, stderr, _) = refused_start(&url, Some(&format!("{TOKEN}-other"))).await;
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains("admin_token_hash"), "{stderr}");
    daemon.terminate(Duration::from_secs(15)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_or_invalid_database_is_reported_promptly() {
    let postgres = Postgres::start(false);
    let missing = postgres.url("no_such_database");
    let (code, stderr, elapsed) = refused_start(&missing, Some(TOKEN)).await;
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains("cannot connect to PostgreSQL at anneal@"), "{stderr}");
    assert!(elapsed < Duration::from_secs(30), "refused in {elapsed:?}");
    drop(postgres);

    let (code, stderr, _) = refused_start("postgres://user:hunter2@127.0.0.1:notaport/db", Some(TOKEN)).await;
    assert_eq!(code, 1, "{stderr}");
    assert!(
        stderr.contains("cannot use database URL") && !stderr.contains("hunter2"),
        "the password is masked: {stderr}"
    );
}
