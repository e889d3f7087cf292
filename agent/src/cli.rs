//! The command line of `anneal-agent` as clap types (in the library so that the man page and
//! shell completions are generated from it, see packaging/gen):
//! `run`, `once`, `status`, `bootstrap`, `signal` and `hook-test`, and the global `--log-format`. Parsing only:
//! nothing here reads files or environment variables. See docs/cli.md.

use std::path::PathBuf;

use anneal_protocol::waitcondition::WaitStatus;
use anneal_runtime::LogFormat;
use clap::{Parser, Subcommand, ValueEnum};

pub const DEFAULT_CONFIG: &str = "/etc/anneal/agent.toml";

#[derive(Parser)]
#[command(
    name = "anneal-agent",
    version = concat!(env!("CARGO_PKG_VERSION"), " (commit ", env!("ANNEAL_COMMIT"), ")"),
    about = "Runs Heat software deployments on this machine and signals their results"
)]
pub struct Cli {
    /// Log line format on stderr.
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand)]
pub enum Command {
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
        /// Show the metadata sources in use (agent.toml's and the self-configured ones) instead
        /// of the deployments; credentials are never shown.
        #[arg(long, conflicts_with = "watch")]
        sources: bool,
        /// Show the deployments again every --interval-secs until Ctrl-C: on a terminal the table
        /// is redrawn in place, otherwise printed anew (with --json, one JSON array per line).
        #[arg(long)]
        watch: bool,
        /// Seconds between rounds of --watch.
        #[arg(long, default_value_t = 2, requires = "watch", value_parser = clap::value_parser!(u64).range(1..=3600))]
        interval_secs: u64,
    },
    /// Configure the metadata sources from a server's Heat metadata (its os-collect-config key),
    /// for a server Heat did not boot: writes STATE_DIR/os-collect-config.toml.
    Bootstrap {
        /// The server's metadata as JSON: the bare object or Heat's `{"metadata": {...}}` answer.
        #[arg(long, value_name = "FILE")]
        from_metadata: PathBuf,
        #[arg(long, default_value = DEFAULT_CONFIG)]
        config: PathBuf,
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
        /// A PEM bundle of extra trust roots for an https URL, added to the system's (repeatable).
        #[arg(long = "ca-file", value_name = "FILE")]
        ca_files: Vec<PathBuf>,
        /// Also trust the ca_file of every http source of this agent config, and retry a failing
        /// handle on the next replica of the http source whose origin it has.
        #[arg(long, value_name = "FILE")]
        config: Option<PathBuf>,
    },
    /// List the built-in hooks and the installed hook files that run instead of them.
    Hooks {
        /// Agent config whose hooks_dirs to search (default: /etc/anneal/agent.toml if present).
        #[arg(long)]
        config: Option<PathBuf>,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Run one deployment (JSON on stdin) through the hook for GROUP and print the signal payload;
    /// with --check, run a built-in set of deployments and report protocol violations.
    HookTest {
        group: String,
        /// Agent config whose hooks_dirs, hook_env and hook_timeout_secs to use (default:
        /// /etc/anneal/agent.toml if present).
        #[arg(long)]
        config: Option<PathBuf>,
        /// Instead of reading stdin, run the built-in cases (create, input-types, outputs,
        /// error-output, failure, plain-stdout, timeout, update, delete) one after another and
        /// print, per case, what Heat would record, the signal body and any protocol violation.
        /// Exit 0 when no case shows a violation, 1 otherwise, 2 when GROUP has no hook.
        ///
        /// The hook really runs. The checker cannot know a group's config language: for script,
        /// Heat::Ungrouped and component the config is a #!/bin/sh script per case (echoing its
        /// inputs, writing outputs, failing or overrunning a 2 s options.timeout on purpose) and
        /// the result is checked against what the script does; every other group gets an empty
        /// config (an empty map for cfn-init, docker-cmd, docker-compose, hiera, json-file and
        /// kubelet). Built-in hooks write where they always do (their HEAT_* settings).
        #[arg(long, verbatim_doc_comment)]
        check: bool,
    },
}

#[derive(Clone, Copy, ValueEnum)]
#[value(rename_all = "UPPER")]
pub enum StatusArg {
    Success,
    Failure,
}

impl From<StatusArg> for WaitStatus {
    fn from(status: StatusArg) -> Self {
        match status {
            StatusArg::Success => WaitStatus::Success,
            StatusArg::Failure => WaitStatus::Failure,
        }
    }
}
