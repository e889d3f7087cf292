//! anneal-bench: runs the benchmark scenarios of anneal against the OpenStack peers, side by
//! side (`all`, one scenario by name, or a fast `smoke` run for CI) and, for `all`, writes
//! `bench/results/<date>.json` and `bench/RESULTS.md`. Benchmarks, not tests: it exits non-zero
//! only when the harness breaks (a scenario errors), never on a missed target. Every child runs
//! in its own process group in a temp dir, on loopback only.

mod binaries;
mod children;
mod error;
mod peers;
mod receiver;
mod report;
mod results;
mod scenarios;

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context as _, bail};
use clap::Parser;

use crate::binaries::Binaries;
use crate::peers::Peers;
use crate::results::{Machine, Run};
use crate::scenarios::backend::Database;
use crate::scenarios::{Context, Scenario};

#[derive(Debug, Parser)]
#[command(name = "anneal-bench", about = "anneal's benchmarks, side by side with the OpenStack peers")]
struct Cli {
    #[command(subcommand)]
    mode: Mode,
    /// Use the binaries next to this executable as they are (do not run `cargo build` first).
    #[arg(long, global = true)]
    no_build: bool,
    /// The stores scenarios 5 (fleet), 6 (graph) and 7 (throughput) measure, side by side:
    /// SQLite, PostgreSQL with 1 and with 3 replicas, or all of them.
    #[arg(long = "db", value_enum, global = true, default_value_t = Database::All)]
    database: Database,
}

#[derive(Debug, clap::Subcommand)]
enum Mode {
    /// Every scenario at full size; writes bench/results/<date>.json and bench/RESULTS.md.
    All,
    /// Every scenario at tiny sizes (CI); prints the tables, writes nothing.
    Smoke,
    /// One scenario at full size; prints its table, writes nothing.
    Run {
        #[arg(value_enum)]
        scenario: Scenario,
    },
    /// Scenario 5's delivery floor: a long-poll server that only answers (started by the
    /// scenario itself; serves until killed).
    #[command(hide = true)]
    FloorServer {
        #[arg(long)]
        listen: String,
        #[arg(long)]
        body_bytes: usize,
    },
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let _ = rustls::crypto::ring::default_provider().install_default();
    let cargo = std::env::var_os("CARGO").map(PathBuf::from);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("cannot start the tokio runtime")?;
    if let Mode::FloorServer { listen, body_bytes } = &cli.mode {
        return runtime.block_on(scenarios::serve_floor(listen, *body_bytes)).context("floor server");
    }
    runtime.block_on(run(cli, cargo.as_deref()))
}

async fn run(cli: Cli, cargo: Option<&Path>) -> anyhow::Result<()> {
    let started = Instant::now();
    let binaries = Binaries::locate(cargo, !cli.no_build)?;
    let (scenarios, smoke, label): (Vec<Scenario>, bool, String) = match &cli.mode {
        Mode::All => (Scenario::ALL.to_vec(), false, "all".into()),
        Mode::Smoke => (Scenario::ALL.to_vec(), true, "smoke".into()),
        Mode::Run { scenario } => (vec![*scenario], false, format!("run {scenario:?}").to_lowercase()),
        Mode::FloorServer { .. } => bail!("floor-server is started by scenario 5 itself"),
    };
    let release = if binaries.profile == "release" { " --release" } else { "" };
    let database = match cli.database {
        Database::All => String::new(),
        chosen => format!(" --db {}", chosen.name()),
    };
    let command = format!("cargo run{release} -p anneal-bench -- {label}{database}");
    let context = Context::new(binaries, Peers::locate(), smoke, cli.database);
    let mut record = Run {
        date: results::today(),
        command,
        profile: context.binaries.profile.clone(),
        machine: Machine::probe(),
        seconds: 0.0,
        scenarios: Vec::new(),
        errors: Vec::new(),
    };
    for scenario in scenarios {
        eprintln!("anneal-bench: {scenario:?} ...");
        match scenario.run(&context).await {
            Ok(report) => record.scenarios.push(report),
            Err(error) => record.errors.push(format!("{scenario:?}: {error}")),
        }
    }
    record.seconds = started.elapsed().as_secs_f64();
    let markdown = results::markdown(&record);
    println!("{markdown}");
    if matches!(cli.mode, Mode::All) {
        let bench_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
        results::write(&record, bench_dir).context("cannot write the results")?;
        eprintln!("anneal-bench: wrote {}/results/{}.json and RESULTS.md", bench_dir.display(), record.date);
    }
    if !record.errors.is_empty() {
        bail!("{} scenario(s) broke:\n{}", record.errors.len(), record.errors.join("\n"));
    }
    Ok(())
}
