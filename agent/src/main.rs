//! The `anneal-agent` binary: parses the command line (clap types in `cli.rs`), reads the
//! environment, sets up logging and signal handling (anneal-runtime), calls into the library, and
//! maps the outcome to an exit code (0 success, 1 a deployment failed or a signal was not
//! delivered, 2 usage or config error). See docs/cli.md.

use std::io::{IsTerminal, Read, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anneal_agent::cli::{Cli, Command, DEFAULT_CONFIG};
use anneal_agent::config::{self, Config, ConfigError};
use anneal_agent::daemon::{self, DaemonError};
use anneal_agent::error_chain;
use anneal_agent::httpclient::TrustRoots;
use anneal_agent::waitsignal::{WaitSignal, send_wait_signal};
use anneal_agent::{failpoint, hooklist, hooktest, live, selfconfig, status};
use anneal_protocol::Outcome;
use anneal_runtime::{LOG_FILTER_VARIABLE, cancel_on_signal, init_logging};
use clap::Parser;
use tokio_util::sync::CancellationToken;

fn main() -> ExitCode {
    let cli = Cli::parse();
    init_logging(std::env::var(LOG_FILTER_VARIABLE).ok().as_deref(), cli.log_format);
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
        Command::Status { config, json, sources: false, watch: true, interval_secs } => {
            watch_status(&config, json, Duration::from_secs(interval_secs), shutdown).await
        }
        Command::Status { config, json, sources: false, .. } => show_status(&config, json),
        Command::Status { config, json, sources: true, .. } => show_sources(&config, json),
        Command::Bootstrap { from_metadata, config } => bootstrap(&from_metadata, &config),
        Command::Signal { url, status, reason, data, id, aws, retry_for_secs, ca_files, config } => {
            let config = match config.as_deref().map(load_config).transpose() {
                Ok(config) => config,
                Err(code) => return code,
            };
            let roots = match signal_roots(config.as_ref(), &ca_files) {
                Ok(roots) => roots,
                Err(code) => return code,
            };
            let signal = WaitSignal { url, status: status.into(), reason, data, id, aws };
            let retry_for = Duration::from_secs(retry_for_secs);
            match send_wait_signal(&signal, retry_for, &roots, config.as_ref(), &shutdown).await {
                Ok(_) => ExitCode::SUCCESS,
                Err(error) => fail(1, &error),
            }
        }
        Command::Hooks { config, json } => list_hooks(config.as_deref(), json),
        Command::HookTest { group, config, check } => hook_test(&group, config.as_deref(), check, shutdown).await,
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
    // On a terminal, a line shows what runs while the cycle goes on.
    let line = std::io::stderr().is_terminal().then(|| {
        let stop = CancellationToken::new();
        let state_dir = config.agent.state_dir.clone();
        let drawing = stop.clone();
        (stop, tokio::spawn(async move { live::show_once_progress(&state_dir, drawing).await }))
    });
    let finished = daemon::once(&config, hook_base_env(), shutdown).await;
    if let Some((stop, task)) = line {
        stop.cancel();
        let _ = task.await;
    }
    match finished {
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

/// The trust roots of `signal`: the `ca_file`s of `config`'s sources, then `--ca-file`s; a file
/// that cannot be used is a config error.
fn signal_roots(config: Option<&Config>, ca_files: &[PathBuf]) -> Result<TrustRoots, ExitCode> {
    let roots = match config {
        Some(config) => TrustRoots::from_config(config),
        None => Ok(TrustRoots::default()),
    };
    roots.and_then(|roots| roots.with_files("--ca-file", ca_files)).map_err(|error| fail(2, &error))
}

/// A source that cannot be set up (unreadable token or CA file) is a config error.
fn daemon_exit_code(error: &DaemonError) -> u8 {
    match error {
        DaemonError::Source(_) | DaemonError::Trust(_) => 2,
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

async fn watch_status(path: &Path, json: bool, interval: Duration, shutdown: CancellationToken) -> ExitCode {
    let config = match load_config(path) {
        Ok(config) => config,
        Err(code) => return code,
    };
    let format = match (json, std::io::stdout().is_terminal()) {
        (true, _) => live::WatchFormat::Json,
        (false, true) => live::WatchFormat::Terminal,
        (false, false) => live::WatchFormat::Text,
    };
    let mut stdout = std::io::stdout();
    match live::watch_status(&config.agent.state_dir, format, interval, shutdown, &mut stdout).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => fail(1, &error),
    }
}

fn show_sources(path: &Path, json: bool) -> ExitCode {
    let config = match load_config(path) {
        Ok(config) => config,
        Err(code) => return code,
    };
    let rows = match status::read_sources(&config) {
        Ok(rows) => rows,
        Err(error) => return fail(1, &error),
    };
    let text = if json {
        serde_json::to_string_pretty(&rows).map(|text| text + "\n").unwrap_or_default()
    } else {
        status::render_sources(&rows)
    };
    print_stdout(&text)
}

/// `bootstrap --from-metadata FILE`: a file without a usable key is a usage error (2).
fn bootstrap(metadata: &Path, path: &Path) -> ExitCode {
    let config = match load_config(path) {
        Ok(config) => config,
        Err(code) => return code,
    };
    let derived = match selfconfig::from_metadata_file(metadata) {
        Ok(derived) => derived,
        Err(error) => return fail(2, &error),
    };
    // An operator's choice: no source's document can drop these, only a changed key replaces them.
    let persisted = selfconfig::Persisted { config: derived, supplier: selfconfig::Supplier::Bootstrap };
    if let Err(error) = selfconfig::store(&config.agent.state_dir, &persisted) {
        return fail(1, &error);
    }
    let rows = status::self_configured_rows(&persisted.config, config.agent.poll_interval.as_secs());
    let written = selfconfig::file_path(&config.agent.state_dir);
    print_stdout(&format!("wrote {}:\n{}", written.display(), status::render_sources(&rows)))
}

/// The config at `path`, else the default one when it exists, else none.
fn optional_config(path: Option<&Path>) -> Result<Option<Config>, ExitCode> {
    let default_path = Path::new(DEFAULT_CONFIG);
    match path {
        Some(path) => load_config(path).map(Some),
        None if default_path.exists() => load_config(default_path).map(Some),
        None => Ok(None),
    }
}

/// `hooks [--config F] [--json]`: the built-ins and their overrides in the config's hooks_dirs.
fn list_hooks(path: Option<&Path>, json: bool) -> ExitCode {
    let config = match optional_config(path) {
        Ok(config) => config,
        Err(code) => return code,
    };
    let hooks_dirs = match &config {
        Some(config) => config.agent.hooks_dirs.clone(),
        None => anneal_agent::config::default_hooks_dirs(),
    };
    let rows = hooklist::rows(&hooks_dirs);
    print_stdout(&if json { hooklist::render_json(&rows) } else { hooklist::render(&rows) })
}

async fn hook_test(group: &str, path: Option<&Path>, check: bool, shutdown: CancellationToken) -> ExitCode {
    let config = match optional_config(path) {
        Ok(config) => config,
        Err(code) => return code,
    };
    if check {
        return hook_check(group, config.as_ref(), shutdown).await;
    }
    let mut stdin = String::new();
    if let Err(error) = std::io::stdin().read_to_string(&mut stdin) {
        return fail(2, &error);
    }
    let scratch = match hooktest::scratch_dir(&std::env::temp_dir()) {
        Ok(scratch) => scratch,
        Err(error) => return fail(1, &error),
    };
    let (settings, timeout) = hooktest::settings(config.as_ref(), scratch.path(), hook_base_env());
    let result = hooktest::hook_test(group, &stdin, settings, timeout, &shutdown).await;
    let _ = scratch.close();
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

/// `hook-test GROUP --check`: the built-in cases; exit 1 when one shows a protocol violation, 2
/// when GROUP has nothing to check.
async fn hook_check(group: &str, config: Option<&Config>, shutdown: CancellationToken) -> ExitCode {
    let scratch = match hooktest::scratch_dir(&std::env::temp_dir()) {
        Ok(scratch) => scratch,
        Err(error) => return fail(1, &error),
    };
    let (settings, timeout) = hooktest::settings(config, scratch.path(), hook_base_env());
    let result = hooktest::check::check(group, settings, timeout, &shutdown).await;
    let _ = scratch.close();
    match result {
        Ok(report) => {
            let code = print_stdout(&report.render());
            if report.has_violations() { ExitCode::from(1) } else { code }
        }
        Err(error) => fail(if error.is_usage() { 2 } else { 1 }, &error),
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
