//! anneal-runtime: the process plumbing both binaries share, so the agent and the shim cannot
//! drift apart: how logging is set up from `ANNEAL_LOG` and `--log-format` (`init_logging`), and
//! how SIGTERM/SIGINT become a cancelled shutdown token (`cancel_on_signal`). The binaries' `main`
//! reads the environment and passes the values in; nothing here reads environment variables or
//! exits. The pure part, `error_chain`, lives in `anneal-protocol`. See docs/cli.md.

use tokio_util::sync::CancellationToken;
use tracing_subscriber::filter::{ParseError, Targets};

/// The environment variable both binaries take their log filter from (read by `main`).
pub const LOG_FILTER_VARIABLE: &str = "ANNEAL_LOG";

/// The log line format on stderr (`--log-format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum LogFormat {
    Text,
    Json,
}

/// The filter `requested` names (`info`, `debug`, or per-target levels such as
/// `info,anneal_agent::source=debug`), else `info`. A bad value also comes back as its error so
/// the caller can say so once logging is up.
pub fn log_filter(requested: Option<&str>) -> (Targets, Option<ParseError>) {
    let info = || Targets::new().with_default(tracing::Level::INFO);
    match requested.map(str::parse::<Targets>) {
        Some(Ok(targets)) => (targets, None),
        Some(Err(error)) => (info(), Some(error)),
        None => (info(), None),
    }
}

/// Logs go to stderr, filtered by `requested` (the value of `ANNEAL_LOG`, if set): a bad filter
/// falls back to `info` and says so in a warning.
pub fn init_logging(requested: Option<&str>, format: LogFormat) {
    use tracing_subscriber::prelude::*;
    let (filter, error) = log_filter(requested);
    // Colour only for a person at a terminal; not in files, pipes or the journal.
    let layer = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()));
    match format {
        LogFormat::Text => tracing_subscriber::registry().with(layer.with_filter(filter)).init(),
        LogFormat::Json => tracing_subscriber::registry().with(layer.json().with_filter(filter)).init(),
    }
    if let Some(error) = error {
        tracing::warn!(%error, "{LOG_FILTER_VARIABLE} is not a valid filter; logging at info");
    }
}

/// Registers the SIGTERM/SIGINT handlers now (so a signal that arrives before the runtime polls
/// anything still counts) and cancels `shutdown` when one arrives. Call it inside a tokio runtime.
pub fn cancel_on_signal(shutdown: CancellationToken) {
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

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use tokio_util::sync::CancellationToken;

    use super::*;

    #[test]
    fn no_filter_logs_at_info() {
        let (filter, error) = log_filter(None);
        assert!(error.is_none());
        assert!(filter.would_enable("anneal_agent", &tracing::Level::INFO));
        assert!(!filter.would_enable("anneal_agent", &tracing::Level::DEBUG));
    }

    #[test]
    fn per_target_levels_are_honoured() {
        let (filter, error) = log_filter(Some("warn,anneal_agent::source=debug"));
        assert!(error.is_none());
        assert!(filter.would_enable("anneal_agent::source::poll", &tracing::Level::DEBUG));
        assert!(!filter.would_enable("anneal_shim", &tracing::Level::INFO));
    }

    #[test]
    fn a_bad_filter_falls_back_to_info_and_reports_why() {
        let (filter, error) = log_filter(Some("info,anneal_agent=loud"));
        assert!(error.is_some(), "`loud` is not a level");
        assert!(filter.would_enable("anneal_agent", &tracing::Level::INFO));
        assert!(!filter.would_enable("anneal_agent", &tracing::Level::DEBUG));
    }

    #[tokio::test]
    async fn sigterm_cancels_the_token() {
        let shutdown = CancellationToken::new();
        cancel_on_signal(shutdown.clone());
        send_sigterm_to_self();
        tokio::time::timeout(Duration::from_secs(10), shutdown.cancelled()).await.expect("SIGTERM cancels");
    }

    /// `kill -TERM <own pid>` without a libc dependency: the handler is installed, so the test
    /// process survives and only the token notices.
    fn send_sigterm_to_self() {
        let status = std::process::Command::new("kill")
            .args(["-TERM", &std::process::id().to_string()])
            .status()
            .expect("kill(1) runs");
        assert!(status.success());
    }
}
