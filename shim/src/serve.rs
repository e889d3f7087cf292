//! `anneal-shim serve` (a module of the binary): wires the service together (store, admin token,
//! token key, engine, sweeper, HTTP API), raises its open-file limit, prints where it listens,
//! and serves until SIGTERM or SIGINT. `main` passes in what it read from the environment. See
//! docs/cli.md.

use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use anneal_runtime::cancel_on_signal;
use anneal_shim::api::tls::{self, TlsFiles};
use anneal_shim::api::{self, ApiConfig};
use anneal_shim::client::cli::RetentionArgs;
use anneal_shim::engine::{self, Engine, EngineConfig, TokenKey};
use anneal_shim::store::{self, HistoryRetention, SqliteStore};
use anneal_shim::token;
use tokio_util::sync::CancellationToken;

use crate::fail;

/// Runs `serve` until SIGTERM/SIGINT; `environment_token` is `ANNEAL_TOKEN` (wins over the file).
pub async fn serve(
    listen: &str,
    database_url: &str,
    public_url: Option<String>,
    tls: Option<TlsFiles>,
    environment_token: Option<String>,
    retention: RetentionArgs,
) -> ExitCode {
    let shutdown = CancellationToken::new();
    cancel_on_signal(shutdown.clone());
    let database = match store::parse_database_url(database_url) {
        Ok(path) => path,
        Err(error) => return fail(2, &error),
    };
    let directory = database.parent().map_or_else(|| PathBuf::from("."), Path::to_path_buf);
    if let Err(error) = check_secret_files(&directory, &database, environment_token.as_deref()) {
        return fail(1, &error);
    }
    if let Err(error) = std::fs::DirBuilder::new().recursive(true).mode(0o700).create(&directory) {
        eprintln!("anneal-shim: cannot create {}: {error}", directory.display());
        return ExitCode::from(1);
    }
    let store = match SqliteStore::open(&database) {
        Ok(store) => store,
        Err(error) => return fail(1, &error),
    };
    let token_file = directory.join("admin.token");
    let admin_token = match admin_token(environment_token.as_deref(), &token_file) {
        Ok(token) => token,
        Err(error) => {
            eprintln!("anneal-shim: cannot set up the admin token in {}: {error}", token_file.display());
            return ExitCode::from(1);
        }
    };
    let key = match TokenKey::load_or_create(&directory.join("shim.key")) {
        Ok(key) => key,
        Err(error) => return fail(1, &error),
    };
    // TLS (see docs/security.md): the files are read before anything listens.
    let scheme = if tls.is_some() { "https" } else { "http" };
    let acceptor = match tls.map(|files| tls::start(files, shutdown.clone())).transpose() {
        Ok(acceptor) => acceptor,
        Err(error) => return fail(1, &error),
    };
    let listener = match tokio::net::TcpListener::bind(listen).await {
        Ok(listener) => listener,
        Err(error) => {
            eprintln!("anneal-shim: cannot listen on {listen}: {error}");
            return ExitCode::from(1);
        }
    };
    let address = listener.local_addr().map(|address| address.to_string()).unwrap_or_else(|_| listen.to_string());
    let public_url = public_url.unwrap_or_else(|| format!("{scheme}://{address}"));
    if let Some(warning) = tls::plain_http_warning(&public_url) {
        tracing::warn!("{warning}");
    }
    let engine = Engine::new(store, key, EngineConfig { public_url: public_url.clone() });
    let sweeper = tokio::spawn(engine::sweeper::run(engine.clone(), shutdown.clone()));
    let history = tokio::spawn(engine::retention::run(
        engine.clone(),
        history_retention(retention),
        engine::retention::RETENTION_INTERVAL,
        shutdown.clone(),
    ));
    let token_source =
        if environment_token.is_some() { "ANNEAL_TOKEN".to_string() } else { token_file.display().to_string() };
    println!("anneal-shim listening on {scheme}://{address} (public URL {public_url}); admin token: {token_source}");
    let _ = std::io::stdout().flush();
    let mut config = ApiConfig::new(token::hash_token(&admin_token));
    config.limits = config.limits.fit_to_open_files(raise_open_file_limit());
    tracing::info!(
        max_connections = config.limits.max_connections,
        max_connections_per_peer = config.limits.max_connections_per_peer,
        max_long_polls = config.limits.max_long_polls,
        "connection limits"
    );
    let served = api::serve_with_tls(listener, Arc::new(engine), config, acceptor, shutdown.clone()).await;
    shutdown.cancel();
    let _ = sweeper.await;
    let _ = history.await;
    match served {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => fail(1, &error),
    }
}

/// Refuses secrets others can read: an existing database, `admin.token` or `shim.key` that is
/// not private to this user, a database directory others may write, and a short
/// `ANNEAL_TOKEN`. See docs/security.md.
fn check_secret_files(
    directory: &Path,
    database: &Path,
    environment_token: Option<&str>,
) -> Result<(), token::PrivateFileError> {
    if let Some(environment_token) = environment_token {
        token::check_admin_token_length(environment_token.trim())?;
    }
    token::check_private_directory(directory)?;
    for file in [database, &directory.join("admin.token"), &directory.join("shim.key")] {
        token::check_private_file(file)?;
    }
    Ok(())
}

/// The store's retention from the flags: 0 keeps everything of that kind.
fn history_retention(args: RetentionArgs) -> HistoryRetention {
    let positive = |value: u64| (value > 0).then_some(value);
    HistoryRetention {
        max_events_per_stack: positive(args.max_events_per_stack),
        deleted_stack_events_ms: positive(args.deleted_stack_events_secs.saturating_mul(1000)),
        retired_signals_ms: positive(args.retired_signals_secs.saturating_mul(1000)),
    }
}

/// ANNEAL_TOKEN, else the token file (created 0600 with a fresh token on first start).
fn admin_token(environment_token: Option<&str>, path: &Path) -> std::io::Result<String> {
    if let Some(token) = environment_token {
        return Ok(token.trim().to_string());
    }
    match std::fs::read_to_string(path) {
        Ok(text) if !text.trim().is_empty() => return Ok(text.trim().to_string()),
        Ok(_) => return Err(std::io::Error::other("the file is empty")),
        Err(error) if error.kind() != std::io::ErrorKind::NotFound => return Err(error),
        Err(_) => {}
    }
    let fresh = token::new_token()?;
    let mut file = std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(path)?;
    file.write_all(fresh.as_bytes())?;
    file.sync_all()?;
    Ok(fresh)
}

/// Raises the soft `RLIMIT_NOFILE` to the hard limit (every held long-poll is a file descriptor,
/// and distributions start services with a soft limit as low as 1024) and returns the soft
/// limit now in force, which the connection caps are fitted under.
fn raise_open_file_limit() -> u64 {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    let (soft, hard) = match getrlimit(Resource::RLIMIT_NOFILE) {
        Ok(limits) => limits,
        Err(error) => {
            tracing::warn!(error = %error, "cannot read the open-file limit; assuming 1024");
            return 1024;
        }
    };
    if soft >= hard {
        tracing::info!(open_files = soft, "open-file limit");
        return soft;
    }
    match setrlimit(Resource::RLIMIT_NOFILE, hard, hard) {
        Ok(()) => {
            tracing::info!(open_files = hard, was = soft, "raised the open-file limit to its hard limit");
            hard
        }
        Err(error) => {
            tracing::warn!(error = %error, open_files = soft, "cannot raise the open-file limit");
            soft
        }
    }
}
