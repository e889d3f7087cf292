//! The `anneal-shim` binary: parses the command line, reads the environment (ANNEAL_TOKEN,
//! ANNEAL_URL, ANNEAL_LOG), installs signal handlers, wires `serve` together (store, token key,
//! engine, sweeper, HTTP API) or runs a client command, and maps the outcome to an exit code.

use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use anneal_shim::api::{self, ApiConfig};
use anneal_shim::client::{self, Cli, ClientCommand, ClientContext, Command, LogFormat};
use anneal_shim::engine::{self, Engine, EngineConfig, TokenKey};
use anneal_shim::store::{self, SqliteStore};
use anneal_shim::{error_chain, token};
use clap::Parser;
use tokio_util::sync::CancellationToken;

/// The blocking pool's size: a full group-commit batch plus a few for the sweeper and clients.
const BLOCKING_THREADS: usize = store::BATCH_LIMIT + 8;

fn main() -> ExitCode {
    let cli = Cli::parse();
    init_logging(cli.log_format);
    let _ = rustls::crypto::ring::default_provider().install_default();
    // Every engine operation runs on the blocking pool, and the store runs them one at a time
    // (group commit, batches of up to 64). Threads beyond that would only queue, each with a
    // stack and a malloc arena of its own: tokio's default of 512 let 10,000 first polls of a
    // fleet start about 200 of them.
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .max_blocking_threads(BLOCKING_THREADS)
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("anneal-shim: cannot start the async runtime: {error}");
            return ExitCode::from(1);
        }
    };
    match cli.command {
        Command::Serve { listen, db, public_url } => runtime.block_on(serve(&listen, &db, public_url)),
        Command::Server { command } => runtime.block_on(client_main(command.into())),
        Command::Stack { command } => runtime.block_on(client_main(command.into())),
    }
}

async fn client_main(command: ClientCommand) -> ExitCode {
    let context =
        ClientContext::new(command.connection(), std::env::var("ANNEAL_URL").ok(), std::env::var("ANNEAL_TOKEN").ok());
    let mut stdout = std::io::stdout();
    match client::run(command, context, &mut stdout).await {
        Ok(status) => ExitCode::from(status.code()),
        Err(error) => {
            eprintln!("anneal-shim: {}", error.report());
            ExitCode::from(error.exit_code())
        }
    }
}

async fn serve(listen: &str, database_url: &str, public_url: Option<String>) -> ExitCode {
    let shutdown = CancellationToken::new();
    cancel_on_signal(shutdown.clone());
    let database = match store::parse_database_url(database_url) {
        Ok(path) => path,
        Err(error) => return fail(2, &error),
    };
    let directory = database.parent().map_or_else(|| PathBuf::from("."), Path::to_path_buf);
    if let Err(error) = std::fs::DirBuilder::new().recursive(true).mode(0o700).create(&directory) {
        eprintln!("anneal-shim: cannot create {}: {error}", directory.display());
        return ExitCode::from(1);
    }
    let store = match SqliteStore::open(&database) {
        Ok(store) => store,
        Err(error) => return fail(1, &error),
    };
    let token_file = directory.join("admin.token");
    let admin_token = match admin_token(&token_file) {
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
    let listener = match tokio::net::TcpListener::bind(listen).await {
        Ok(listener) => listener,
        Err(error) => {
            eprintln!("anneal-shim: cannot listen on {listen}: {error}");
            return ExitCode::from(1);
        }
    };
    let address = listener.local_addr().map(|address| address.to_string()).unwrap_or_else(|_| listen.to_string());
    let public_url = public_url.unwrap_or_else(|| format!("http://{address}"));
    let engine = Engine::new(store, key, EngineConfig { public_url: public_url.clone() });
    let sweeper = tokio::spawn(engine::sweeper::run(engine.clone(), shutdown.clone()));
    let token_source = if std::env::var("ANNEAL_TOKEN").is_ok() {
        "ANNEAL_TOKEN".to_string()
    } else {
        token_file.display().to_string()
    };
    println!("anneal-shim listening on http://{address} (public URL {public_url}); admin token: {token_source}");
    let _ = std::io::stdout().flush();
    let config = ApiConfig::new(token::hash_token(&admin_token));
    let served = api::serve(listener, Arc::new(engine), config, shutdown.clone()).await;
    shutdown.cancel();
    let _ = sweeper.await;
    match served {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => fail(1, &error),
    }
}

/// ANNEAL_TOKEN, else the token file (created 0600 with a fresh token on first start).
fn admin_token(path: &Path) -> std::io::Result<String> {
    if let Ok(token) = std::env::var("ANNEAL_TOKEN") {
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

/// Registers SIGTERM/SIGINT now and cancels `shutdown` when one arrives.
fn cancel_on_signal(shutdown: CancellationToken) {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut terminate), Ok(mut interrupt)) = (signal(SignalKind::terminate()), signal(SignalKind::interrupt()))
    else {
        tracing::error!("cannot install SIGTERM/SIGINT handlers");
        return;
    };
    tokio::spawn(async move {
        tokio::select! {
            _ = terminate.recv() => tracing::info!("SIGTERM received"),
            _ = interrupt.recv() => tracing::info!("SIGINT received"),
        }
        shutdown.cancel();
    });
}

fn init_logging(format: LogFormat) {
    use tracing_subscriber::filter::Targets;
    use tracing_subscriber::prelude::*;
    let filter = std::env::var("ANNEAL_LOG")
        .ok()
        .and_then(|text| text.parse::<Targets>().ok())
        .unwrap_or_else(|| Targets::new().with_default(tracing::Level::INFO));
    // Colour only for a person at a terminal; not in files, pipes or the journal.
    let layer = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()));
    match format {
        LogFormat::Text => tracing_subscriber::registry().with(layer.with_filter(filter)).init(),
        LogFormat::Json => tracing_subscriber::registry().with(layer.json().with_filter(filter)).init(),
    }
}

fn fail(code: u8, error: &dyn std::error::Error) -> ExitCode {
    eprintln!("anneal-shim: {}", error_chain(error));
    ExitCode::from(code)
}
