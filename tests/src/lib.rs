//! anneal-tests: the harness for end-to-end tests across processes. Everything runs the real
//! binaries (found by `binaries`, built by `cargo build -p anneal-agent -p anneal-shim`), on
//! loopback only, in temp dirs only, each process in its own process group that is stopped when
//! its handle drops (also when a test panics).
//!
//! - `Shim::start()`: `anneal-shim serve` on 127.0.0.1:0 with a temp SQLite db; `cli`,
//!   `cli_ok`, `cli_json` run its CLI with `--url` and `--token-file`; `restart` keeps the port;
//!   `stack_show`, `stack_status`, `stack_outputs`, `stack_resources`, `settled` read a stack.
//! - `Fleet::start(&shim, &["vm1", "vm2"], &AgentSettings::default())`: registers each server
//!   (`server add NAME --format json`), writes its agent config (http source, own state and
//!   hooks dirs, 1 s poll) and starts `anneal-agent run`. `Agent` has the paths, `status()`,
//!   `stop()`, `crash()`, `start()`, `command(&["once"])`; `Agent::standalone` takes any
//!   `[[source]]` tables instead of registering with a shim.
//! - `Postgres::start(fsync)`: a private PostgreSQL server (initdb in a temp dir, a Unix socket
//!   only), `create_database` → URL, `restart`; stopped when it drops.
//! - `wait_until` / `eventually`: poll with a deadline.
//! - `run_command`, `Daemon`: any other process, in its own group, with a deadline.
//! - `RealHeat::shared()`: a real OpenStack Keystone + Heat (from PyPI, tests/peers/real-heat),
//!   started once per test run and shared; `RealHeat::admin()` → `HeatApi` (create, update and
//!   read stacks). `StockServer`: a deployed server run by the stock os-collect-config chain;
//!   `AnnealServer`: one run by anneal-agent, configured by `bootstrap --from-metadata`.
//! - `SwitchableServer`: an in-process HTTP source or signal receiver the test takes down and
//!   brings back, recording every request. `metadata`: deployment entries for it, and the
//!   agent's journal files as JSON.
//! - `evaluation`: templates that make the shim evaluate a lot, and a process's peak memory.

pub mod anneal_server;
pub mod binaries;
pub mod browser;
pub mod evaluation;
pub mod fleet;
pub mod metadata;
pub mod peers;
pub mod postgres;
pub mod process;
pub mod real_heat;
pub mod shim;
pub mod stock_chain;
pub mod switchable;
pub mod wait;

pub use anneal_server::AnnealServer;
pub use binaries::{BUILD_COMMAND, agent_binary, shim_binary};
pub use fleet::{Agent, AgentSettings, Fleet, toml_string};
pub use metadata::read_json;
pub use postgres::Postgres;
pub use process::{CommandOutput, Daemon, run_command, status_kib};
pub use real_heat::{HeatApi, RealHeat, StackRef};
pub use shim::{Replica, Shim, alias_bomb_template, capability_token};
pub use stock_chain::StockServer;
pub use switchable::{Request, SwitchableServer};
pub use wait::{eventually, wait_until};

/// A temp dir only its owner may enter (0700), as `anneal-shim serve` requires of its database
/// directory (docs/security.md); tempfile makes them 0755.
pub fn private_temp_dir(prefix: &str) -> tempfile::TempDir {
    use std::os::unix::fs::PermissionsExt as _;
    let dir = tempfile::Builder::new().prefix(prefix).tempdir().expect("temp dir");
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700)).expect("chmod 700 a temp dir");
    dir
}

/// An HTTP client for talking to the shim from a test (reqwest is built without a default
/// rustls crypto provider: ring is installed first, once per process).
pub fn http_client() -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder().no_proxy().build().expect("an HTTP client")
}
