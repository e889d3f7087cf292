//! anneal-shim: the engine side of anneal. It takes HOT templates (the software-config subset),
//! tracks the component graph across servers durably, releases each deployment into its server's
//! materialised metadata document when its inputs are ready, takes signals, resolves `get_attr`,
//! and enforces wait conditions and timeouts.
//!
//! `main.rs` is thin: command line, environment, signal handling, exit codes. The HTTP layer
//! (`api`) only parses, authenticates and maps errors; decisions are the engine's (`engine`);
//! all truth is in the store (`store`), behind a trait so PostgreSQL can join SQLite.

pub mod api;
pub mod client;
/// Calendar arithmetic, shared with the agent.
pub use anneal_protocol::dates;
pub mod engine;
pub mod graph;
pub mod metrics;
pub mod model;
pub mod store;
pub mod template;
pub mod token;

/// An error and its causes on one line (`a: b: c`): the one formatter both binaries share.
pub use anneal_protocol::error_chain;
