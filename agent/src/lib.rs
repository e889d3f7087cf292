//! anneal-agent: the in-VM half of anneal. It collects Heat-format metadata from its sources,
//! runs each deployment once through its hook, journals every step durably, and signals results
//! through an outbox that retries until the engine acknowledges them.
//!
//! The binary (`main.rs`) is thin: it parses the command line, reads the environment, installs
//! signal handlers and maps errors to exit codes. Everything else lives here and takes its
//! shutdown as a `CancellationToken`.

mod backoff;
pub mod cli;
mod clock;
pub mod config;
pub mod daemon;
pub(crate) mod executor;
pub mod failpoint;
pub(crate) mod fsutil;
pub(crate) mod hook;
pub mod hooklist;
pub mod hooktest;
pub mod httpclient;
pub(crate) mod journal;
pub(crate) mod keystone;
pub mod live;
pub(crate) mod metrics;
pub(crate) mod orphan;
pub(crate) mod schedule;
pub(crate) mod secret;
pub mod selfconfig;
pub(crate) mod signal;
pub(crate) mod source;
pub mod status;
pub mod waitsignal;

/// An error and its causes on one line (`a: b: c`): the one formatter both binaries share.
pub use anneal_protocol::error_chain;
