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
use anneal_shim::api::{self, ApiConfig, ConnectionLimits, MIN_OPEN_FILES};
use anneal_shim::client::cli::RetentionArgs;
use anneal_shim::engine::{self, Engine, EngineConfig, MaxDeploymentBytes, StackActionTimeout, TokenKey};
use anneal_shim::store::{self, DatabaseUrl, HistoryRetention, PgStore, SqliteStore, Store};
use anneal_shim::template::MaxResources;
use anneal_shim::token;
use tokio_util::sync::CancellationToken;

use crate::fail;

/// What `serve` reads from the command line and the environment.
pub struct ServeArgs {
    pub listen: String,
    pub database_url: String,
    /// `--public-url`, in order: this replica's own first, then the other replicas'.
    pub public_url: Vec<String>,
    pub tls: Option<TlsFiles>,
    /// `ANNEAL_TOKEN` (wins over the token file; required with PostgreSQL).
    pub environment_token: Option<String>,
    /// `--metrics-token-file`: a token that opens `GET /metrics` only.
    pub metrics_token_file: Option<PathBuf>,
    pub retention: RetentionArgs,
    /// `--max-resources-per-stack` (Heat's max_resources_per_stack).
    pub max_resources: MaxResources,
    /// `--max-deployment-bytes-per-stack`.
    pub max_deployment_bytes: MaxDeploymentBytes,
    /// `--stack-action-timeout-secs` (Heat's stack_action_timeout).
    pub stack_action_timeout: StackActionTimeout,
}

/// The store and the secrets every request is checked with, however the backend keeps them.
struct Opened<S> {
    store: S,
    key: TokenKey,
    admin_token: String,
    /// Where the admin token came from, for the start-up line.
    token_source: String,
}

/// Runs `serve` until SIGTERM/SIGINT.
pub async fn serve(args: ServeArgs) -> ExitCode {
    let database = match store::parse_database_url(&args.database_url) {
        Ok(database) => database,
        Err(error) => return fail(2, &error),
    };
    match database {
        DatabaseUrl::Sqlite(path) => match open_sqlite(&path, args.environment_token.as_deref()) {
            Ok(opened) => run(opened, args).await,
            Err(code) => code,
        },
        DatabaseUrl::Postgres(url) => {
            let environment_token = args.environment_token.clone();
            let opened = tokio::task::spawn_blocking(move || open_postgres(&url, environment_token.as_deref())).await;
            match opened {
                Ok(Ok(opened)) => run(opened, args).await,
                Ok(Err(code)) => code,
                Err(error) => fail(1, &error),
            }
        }
    }
}

/// The SQLite file, with `admin.token` and `shim.key` beside it.
fn open_sqlite(database: &Path, environment_token: Option<&str>) -> Result<Opened<SqliteStore>, ExitCode> {
    let directory = database.parent().map_or_else(|| PathBuf::from("."), Path::to_path_buf);
    check_secret_files(&directory, database, environment_token).map_err(|error| fail(1, &error))?;
    if let Err(error) = std::fs::DirBuilder::new().recursive(true).mode(0o700).create(&directory) {
        eprintln!("anneal-shim: cannot create {}: {error}", directory.display());
        return Err(ExitCode::from(1));
    }
    let store = SqliteStore::open(database).map_err(|error| fail(1, &error))?;
    tracing::info!(schema_version = SqliteStore::schema_version(), "database open, its schema up to date");
    let token_file = directory.join("admin.token");
    let admin_token = admin_token(environment_token, &token_file).map_err(|error| {
        eprintln!("anneal-shim: cannot set up the admin token in {}: {error}", token_file.display());
        ExitCode::from(1)
    })?;
    let key = TokenKey::load_or_create(&directory.join("shim.key")).map_err(|error| fail(1, &error))?;
    let token_source =
        if environment_token.is_some() { "ANNEAL_TOKEN".to_string() } else { token_file.display().to_string() };
    Ok(Opened { store, key, admin_token, token_source })
}

/// The PostgreSQL database, shared by every replica: the token key lives in it (created once by
/// the first replica), and the admin token is `ANNEAL_TOKEN`, which every replica must be given
/// alike (its hash is kept in the database, so a replica given another one refuses to start).
/// See docs/security.md.
fn open_postgres(url: &str, environment_token: Option<&str>) -> Result<Opened<PgStore>, ExitCode> {
    let Some(admin_token) = environment_token.map(str::trim) else {
        eprintln!(
            "anneal-shim: with a PostgreSQL database, set ANNEAL_TOKEN to the admin token (the same on every \
             replica); there is no local token file"
        );
        return Err(ExitCode::from(2));
    };
    token::check_admin_token_length(admin_token).map_err(|error| fail(2, &error))?;
    let store = PgStore::open(url).map_err(|error| fail(1, &error))?;
    tracing::info!(schema_version = PgStore::schema_version(), "database open, its schema up to date");
    let fresh_key = token::new_token().map_err(|error| fail(1, &error))?;
    let key = store.shared_secret(TOKEN_KEY_SECRET, || fresh_key).map_err(|error| fail(1, &error))?;
    if !token::is_well_formed(&key) {
        eprintln!("anneal-shim: the token key stored in {} is not 64 hex digits", store.target());
        return Err(ExitCode::from(1));
    }
    let hash = token::hash_token(admin_token);
    let stored = store.shared_secret(ADMIN_TOKEN_SECRET, || hash.clone()).map_err(|error| fail(1, &error))?;
    if stored != hash {
        eprintln!(
            "anneal-shim: ANNEAL_TOKEN is not the admin token the other replicas of {} use; give every replica \
             the same one (to change it, stop them all and delete the row '{ADMIN_TOKEN_SECRET}' of \
             shared_secrets)",
            store.target()
        );
        return Err(ExitCode::from(1));
    }
    let token_source = format!("ANNEAL_TOKEN (shared by the replicas of {})", store.target());
    Ok(Opened { store, key: TokenKey::from_secret(key.as_bytes()), admin_token: admin_token.to_string(), token_source })
}

/// Names in the PostgreSQL `shared_secrets` table.
const TOKEN_KEY_SECRET: &str = "token_key";
const ADMIN_TOKEN_SECRET: &str = "admin_token_hash";

/// Serves with an opened store until SIGTERM/SIGINT.
async fn run<S: Store>(opened: Opened<S>, args: ServeArgs) -> ExitCode {
    let Opened { store, key, admin_token, token_source } = opened;
    let shutdown = CancellationToken::new();
    cancel_on_signal(shutdown.clone());
    let listen = args.listen.as_str();
    let limits = match connection_limits() {
        Ok(limits) => limits,
        Err(code) => return code,
    };
    let metrics_token_hash = match args.metrics_token_file.as_deref().map(token::read_metrics_token).transpose() {
        Ok(metrics_token) => metrics_token.as_deref().map(token::hash_token),
        Err(error) => return fail(1, &error),
    };
    // TLS (see docs/security.md): the files are read before anything listens.
    let scheme = if args.tls.is_some() { "https" } else { "http" };
    let acceptor = match args.tls.map(|files| tls::start(files, shutdown.clone())).transpose() {
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
    let mut public_urls = args.public_url.into_iter();
    let public_url = public_urls.next().unwrap_or_else(|| format!("{scheme}://{address}"));
    let replica_urls: Vec<String> = public_urls.collect();
    if acceptor.is_some() && !public_url.to_ascii_lowercase().starts_with("https://") {
        eprintln!(
            "anneal-shim: --public-url {public_url} is not https:// but the shim serves TLS (--tls-cert): agents \
             would be sent plain-HTTP signal and handle URLs; give the https:// URL agents reach"
        );
        return ExitCode::from(2);
    }
    if let Some(warning) = tls::plain_http_warning(&public_url) {
        tracing::warn!("{warning}");
    }
    let engine = Engine::new(
        store,
        key,
        EngineConfig {
            replica_urls,
            max_resources: args.max_resources,
            max_deployment_bytes: args.max_deployment_bytes,
            stack_action_timeout: args.stack_action_timeout,
            ..EngineConfig::new(public_url.clone())
        },
    );
    let sweeper = tokio::spawn(engine::sweeper::run(engine.clone(), shutdown.clone()));
    let replication = tokio::spawn(engine::replication::run(engine.clone(), shutdown.clone()));
    let history = tokio::spawn(engine::retention::run(
        engine.clone(),
        history_retention(args.retention),
        engine::retention::RETENTION_INTERVAL,
        shutdown.clone(),
    ));
    println!("anneal-shim listening on {scheme}://{address} (public URL {public_url}); admin token: {token_source}");
    let _ = std::io::stdout().flush();
    let mut config = ApiConfig::new(token::hash_token(&admin_token));
    config.limits = limits;
    config.metrics_token_hash = metrics_token_hash;
    config.secure_cookies = acceptor.is_some();
    config.served_over_https = acceptor.is_some() || public_url.starts_with("https://");
    tracing::info!(
        max_connections = config.limits.max_connections,
        max_connections_per_peer = config.limits.max_connections_per_peer,
        max_long_polls = config.limits.max_long_polls,
        "connection limits"
    );
    // systemd's Type=notify: ready once the socket listens and the database is open.
    let _ = sd_notify::notify(false, &[sd_notify::NotifyState::Ready]);
    let served = api::serve_with_tls(listener, Arc::new(engine), config, acceptor, shutdown.clone()).await;
    let _ = sd_notify::notify(false, &[sd_notify::NotifyState::Stopping]);
    shutdown.cancel();
    let _ = sweeper.await;
    let _ = replication.await;
    let _ = history.await;
    match served {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => fail(1, &error),
    }
}

/// The connection caps fitted to the open-file limit (raised to its hard limit first); refuses
/// to start below `MIN_OPEN_FILES`, and warns when the caps had to be lowered.
fn connection_limits() -> Result<ConnectionLimits, ExitCode> {
    let open_files = raise_open_file_limit();
    if open_files < MIN_OPEN_FILES {
        eprintln!(
            "anneal-shim: the open-file limit is {open_files}; the shim needs at least {MIN_OPEN_FILES} to serve \
             agents and the admin at once (raise it: LimitNOFILE= in the unit, `ulimit -n`)"
        );
        return Err(ExitCode::from(1));
    }
    let wanted = ConnectionLimits::default();
    let limits = wanted.fit_to_open_files(open_files);
    if limits != wanted {
        tracing::warn!(
            open_files,
            max_connections = limits.max_connections,
            max_connections_per_peer = limits.max_connections_per_peer,
            max_long_polls = limits.max_long_polls,
            "the open-file limit lowers the connection caps; raise it (LimitNOFILE=) to serve a large fleet"
        );
    }
    Ok(limits)
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
