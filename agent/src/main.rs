//! The `anneal-agent` binary: parses the command line, reads the environment, sets up logging and
//! signal handling, calls into the library, and maps the outcome to an exit code (0 success,
//! 1 a deployment failed or a signal was not delivered, 2 usage or config error).

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anneal_agent::config::{self, Config, ConfigError};
use anneal_agent::daemon::{self, DaemonError};
use anneal_agent::error_chain;
use anneal_agent::waitsignal::{WaitSignal, send_wait_signal};
use anneal_agent::{failpoint, hooktest, status};
use anneal_protocol::Outcome;
use anneal_protocol::waitcondition::WaitStatus;
use clap::{Parser, Subcommand, ValueEnum};
use tokio_util::sync::CancellationToken;

const DEFAULT_CONFIG: &str = "/etc/anneal/agent.toml";

#[derive(Parser)]
#[command(
    name = "anneal-agent",
    version,
    about = "Runs Heat software deployments on this machine and signals their results"
)]
struct Cli {
    /// Log line format on stderr.
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Text)]
    log_format: LogFormat,
    #[command(subcommand)]
    command: Command,
}

#[derive(Clone, Copy, ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

#[derive(Subcommand)]
enum Command {
    /// Run as a daemon: collect metadata, run deployments, deliver signals, until SIGTERM.
    Run {
        #[arg(long, default_value = DEFAULT_CONFIG)]
        config: PathBuf,
    },
    /// One cycle: collect, run what is due, deliver signals, exit (0 ok, 1 failure, 2 config error).
    Once {
        #[arg(long, default_value = DEFAULT_CONFIG)]
        config: PathBuf,
    },
    /// Show every deployment the journal knows: state, exit code, duration, signal state.
    Status {
        #[arg(long, default_value = DEFAULT_CONFIG)]
        config: PathBuf,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Signal a wait condition handle, retrying until acknowledged (replaces cfn-signal and curl_cli).
    Signal {
        /// The handle URL (its signal endpoint or pre-signed URL).
        url: String,
        #[arg(long, value_enum, default_value_t = StatusArg::Success)]
        status: StatusArg,
        #[arg(long)]
        reason: Option<String>,
        #[arg(long)]
        data: Option<String>,
        /// Unique id of this signal (default: a counter chosen by Heat; the hostname with --aws).
        #[arg(long)]
        id: Option<String>,
        /// Send the AWS::CloudFormation::WaitConditionHandle body with PUT, as cfn-signal does.
        #[arg(long)]
        aws: bool,
        /// Give up after retrying for this long.
        #[arg(long, default_value_t = 300)]
        retry_for_secs: u64,
    },
    /// Run one deployment (JSON on stdin) through the hook for GROUP and print the signal payload.
    HookTest {
        group: String,
        /// Agent config whose hooks_dirs and hook_env to use (default: /etc/anneal/agent.toml if present).
        #[arg(long)]
        config: Option<PathBuf>,
    },
}

#[derive(Clone, Copy, ValueEnum)]
#[value(rename_all = "UPPER")]
enum StatusArg {
    Success,
    Failure,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    init_logging(cli.log_format);
    if let Err(code) = arm_failpoint() {
        return code;
    }
    // The agent watches a handful of descriptors; tokio's default buffer for 1,024 epoll events
    // per tick is 12 KiB of heap for nothing.
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().max_io_events_per_tick(64).build();
    let runtime = match runtime {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("anneal-agent: cannot start the async runtime: {error}");
            return ExitCode::from(1);
        }
    };
    runtime.block_on(dispatch(cli.command))
}

/// `ANNEAL_FAILPOINT` (crash-safety tests): armed in debug builds (or with the `failpoints` feature),
/// refused in others so a test can never silently run without its crash.
fn arm_failpoint() -> Result<(), ExitCode> {
    let Some(value) = std::env::var_os("ANNEAL_FAILPOINT") else { return Ok(()) };
    let value = value.to_string_lossy();
    if !failpoint::COMPILED_IN {
        eprintln!("anneal-agent: ANNEAL_FAILPOINT={value} needs a debug build or the failpoints feature");
        return Err(ExitCode::from(2));
    }
    match value.parse() {
        Ok(armed) => {
            failpoint::arm(armed);
            Ok(())
        }
        Err(error) => {
            eprintln!("anneal-agent: ANNEAL_FAILPOINT: {error}");
            Err(ExitCode::from(2))
        }
    }
}

async fn dispatch(command: Command) -> ExitCode {
    let shutdown = CancellationToken::new();
    cancel_on_signal(shutdown.clone());
    match command {
        Command::Run { config } => run(&config, shutdown).await,
        Command::Once { config } => once(&config, shutdown).await,
        Command::Status { config, json } => show_status(&config, json),
        Command::Signal { url, status, reason, data, id, aws, retry_for_secs } => {
            let status = match status {
                StatusArg::Success => WaitStatus::Success,
                StatusArg::Failure => WaitStatus::Failure,
            };
            let signal = WaitSignal { url, status, reason, data, id, aws };
            match send_wait_signal(&signal, Duration::from_secs(retry_for_secs), &shutdown).await {
                Ok(_) => ExitCode::SUCCESS,
                Err(error) => fail(1, &error),
            }
        }
        Command::HookTest { group, config } => hook_test(&group, config.as_deref(), shutdown).await,
    }
}

async fn run(path: &Path, shutdown: CancellationToken) -> ExitCode {
    let config = match load_config(path) {
        Ok(config) => config,
        Err(code) => return code,
    };
    let ready = || {
        let _ = sd_notify::notify(false, &[sd_notify::NotifyState::Ready]);
    };
    let result = daemon::run(&config, hook_base_env(), shutdown, ready).await;
    let _ = sd_notify::notify(false, &[sd_notify::NotifyState::Stopping]);
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => fail(daemon_exit_code(&error), &error),
    }
}

async fn once(path: &Path, shutdown: CancellationToken) -> ExitCode {
    let config = match load_config(path) {
        Ok(config) => config,
        Err(code) => return code,
    };
    match daemon::once(&config, hook_base_env(), shutdown).await {
        Ok(report) => {
            tracing::info!(
                ran = report.counts.ran,
                failed = report.counts.failed,
                waiting = report.waiting,
                signals_delivered = report.signals.delivered,
                signals_pending = report.signals.pending,
                signals_failed = report.signals.permanent,
                "cycle done"
            );
            if report.succeeded() { ExitCode::SUCCESS } else { ExitCode::from(1) }
        }
        Err(error) => fail(daemon_exit_code(&error), &error),
    }
}

/// A source that cannot be set up (unreadable token or CA file) is a config error.
fn daemon_exit_code(error: &DaemonError) -> u8 {
    match error {
        DaemonError::Source(_) => 2,
        _ => 1,
    }
}

fn show_status(path: &Path, json: bool) -> ExitCode {
    let config = match load_config(path) {
        Ok(config) => config,
        Err(code) => return code,
    };
    let rows = match status::read_status(&config.agent.state_dir) {
        Ok(rows) => rows,
        Err(error) => return fail(1, &error),
    };
    let text = if json {
        serde_json::to_string_pretty(&rows).map(|text| text + "\n").unwrap_or_default()
    } else {
        status::render_text(&rows)
    };
    print_stdout(&text)
}

async fn hook_test(group: &str, path: Option<&Path>, shutdown: CancellationToken) -> ExitCode {
    let default_path = Path::new(DEFAULT_CONFIG);
    let config = match path {
        Some(path) => load_config(path).map(Some),
        None if default_path.exists() => load_config(default_path).map(Some),
        None => Ok(None),
    };
    let config = match config {
        Ok(config) => config,
        Err(code) => return code,
    };
    let mut stdin = String::new();
    if let Err(error) = std::io::stdin().read_to_string(&mut stdin) {
        return fail(2, &error);
    }
    let scratch = std::env::temp_dir().join(format!("anneal-hook-test-{}", std::process::id()));
    let (settings, timeout) = match &config {
        Some(config) => {
            let mut settings = daemon::hook_settings(config, hook_base_env());
            settings.work_dir = scratch.join("script");
            settings.outputs_dir = scratch.join("outputs");
            // hook-test runs outside the journal: no run marker either.
            settings.run_markers_dir = None;
            (settings, config.agent.hook_timeout)
        }
        None => (hooktest::default_settings(&scratch, hook_base_env()), Duration::from_secs(3600)),
    };
    let result = hooktest::hook_test(group, &stdin, settings, timeout, &shutdown).await;
    let _ = std::fs::remove_dir_all(&scratch);
    match result {
        Ok(report) => {
            let code = print_stdout(&format!("{}\n", report.signal_body));
            if let Outcome::Failed { reason } = report.outcome {
                eprintln!("anneal-agent: Heat would mark this deployment FAILED: {reason}");
                return ExitCode::from(1);
            }
            code
        }
        Err(error) => fail(1, &error),
    }
}

fn load_config(path: &Path) -> Result<Config, ExitCode> {
    config::load(path).map_err(|error: ConfigError| fail(2, &error))
}

/// The environment every hook starts from: PATH, LANG and HOME, never the agent's whole
/// environment (config adds `[agent.hook_env]`).
fn hook_base_env() -> Vec<(String, String)> {
    let get = |name: &str, default: &str| std::env::var(name).unwrap_or_else(|_| default.to_string());
    vec![
        ("PATH".into(), get("PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")),
        ("LANG".into(), get("LANG", "C.UTF-8")),
        ("HOME".into(), get("HOME", "/root")),
    ]
}

/// Registers the SIGTERM/SIGINT handlers now (so a signal that arrives before the runtime
/// polls anything still counts) and cancels `shutdown` when one arrives.
fn cancel_on_signal(shutdown: CancellationToken) {
    use tokio::signal::unix::{SignalKind, signal};
    let (mut terminate, mut interrupt) = match (signal(SignalKind::terminate()), signal(SignalKind::interrupt())) {
        (Ok(terminate), Ok(interrupt)) => (terminate, interrupt),
        _ => {
            tracing::error!("cannot install SIGTERM/SIGINT handlers");
            return;
        }
    };
    tokio::spawn(async move {
        tokio::select! {
            _ = terminate.recv() => tracing::info!("SIGTERM received"),
            _ = interrupt.recv() => tracing::info!("SIGINT received"),
        }
        shutdown.cancel();
    });
}

/// Logs go to stderr; `ANNEAL_LOG` takes `info`, `debug`, or per-target levels such as
/// `info,anneal_agent::source=debug` (a bad value falls back to `info` and says so).
fn init_logging(format: LogFormat) {
    use tracing_subscriber::filter::Targets;
    use tracing_subscriber::prelude::*;
    let requested = std::env::var("ANNEAL_LOG").ok();
    let parsed = requested.as_deref().map(str::parse::<Targets>);
    let filter = match &parsed {
        Some(Ok(targets)) => targets.clone(),
        _ => Targets::new().with_default(tracing::Level::INFO),
    };
    // Colour only for a person at a terminal; not in files, pipes or the journal.
    let layer = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()));
    match format {
        LogFormat::Text => tracing_subscriber::registry().with(layer.with_filter(filter)).init(),
        LogFormat::Json => tracing_subscriber::registry().with(layer.json().with_filter(filter)).init(),
    }
    if let Some(Err(error)) = parsed {
        tracing::warn!(%error, "ANNEAL_LOG is not a valid filter; logging at info");
    }
}

fn print_stdout(text: &str) -> ExitCode {
    let mut stdout = std::io::stdout().lock();
    match stdout.write_all(text.as_bytes()).and_then(|()| stdout.flush()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => fail(1, &error),
    }
}

fn fail(code: u8, error: &dyn std::error::Error) -> ExitCode {
    eprintln!("anneal-agent: {}", error_chain(error));
    ExitCode::from(code)
}
