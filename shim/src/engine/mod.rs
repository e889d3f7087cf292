//! The engine: implements `model::Service` over a `Store`. Its modules call one way, from the
//! operations down to the store (`scripts/check-layers` checks it):
//!
//! - `service` (the `Service` operations), `signals` (deployment and wait-condition signals),
//!   `sweeper` (deadlines), `removal` (server removal), `sessions` (the web view's logins):
//!   entry points; `detail` (a stack's detail with its outputs evaluated, read-only).
//! - `traversal`: `forward` (create and update, one settle loop) above `reverse` (delete and the
//!   DELETE actions of removed resources, as Heat deletes: dependents first).
//! - `resources`: activation per resource type (a `match` on `ResourceType`).
//! - `node`: a node's typed transitions, which return what became ready instead of acting on
//!   it; `deadlines`: the typed deadline rows the sweeper enforces.
//! - `transact` (the `Engine` and its transactions), `stack_watchers` (who follows which
//!   stack's graph, woken after commits), `context` (what one operation works with),
//!   `derived` (derived configs), `secrets` (tokens), `error`.
//!
//! Every operation is one store transaction (see `transact`).

mod context;
mod deadlines;
mod derived;
mod detail;
mod document;
mod error;
mod failures;
pub(crate) mod graph;
mod hidden;
mod limits;
mod mime;
mod node;
mod plan;
mod plan_changes;
mod published;
mod removal;
pub mod replication;
mod requests;
mod resources;
pub mod retention;
mod rollback;
mod secrets;
mod service;
mod sessions;
mod signals;
mod stack_watchers;
pub mod sweeper;
mod transact;
mod traversal;
mod yaml_dump;

#[cfg(test)]
mod tests;

pub use context::{http_date, now_millis, rfc3339};
pub use error::EngineError;
pub use limits::{MAX_DEPLOYMENT_BYTES, MaxDeploymentBytes, StackActionTimeout};
/// A deployment group's batches, for the differential tests against Heat's planner.
#[doc(hidden)]
pub use resources::batches::{Target as BatchTarget, create_batches, rolling_batches};
pub use secrets::TokenKey;
pub use transact::{Engine, EngineConfig};

pub use crate::error_chain;

#[cfg(test)]
mod batch_tests;
#[cfg(test)]
mod budget_tests;
#[cfg(test)]
mod conditions_tests;
#[cfg(test)]
mod created_server_tests;
#[cfg(test)]
mod deployment_output_tests;
#[cfg(test)]
mod document_tests;
#[cfg(test)]
mod environment_tests;
#[cfg(test)]
mod failure_budget_tests;
#[cfg(test)]
mod failures_tests;
#[cfg(test)]
mod group_tests;
#[cfg(test)]
mod hidden_tests;
#[cfg(test)]
mod plan_tests;
#[cfg(test)]
mod published_tests;
#[cfg(test)]
mod regression_tests;
#[cfg(test)]
mod release_tests;
#[cfg(test)]
mod remove_tests;
#[cfg(test)]
mod rollback_tests;
#[cfg(test)]
mod rollout_tests;
#[cfg(test)]
mod security_tests;
#[cfg(test)]
mod server_tests;
#[cfg(test)]
mod stack_timeout_tests;
#[cfg(test)]
mod value_tests;
#[cfg(test)]
mod wait_update_tests;
