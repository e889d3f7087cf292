//! Wire types shared by anneal-agent and anneal-shim: the Heat deployment document, hook results
//! and their signal bodies, Heat's failure rule, and wait-condition signal bodies. Serde types with
//! validation and Python-compatible encodings; this crate does no I/O and has no async runtime.

pub mod deployment;
pub mod env;
pub mod pyjson;
pub mod result;
pub mod signal;
pub mod waitcondition;

pub use deployment::{Deployment, HttpVerb, Input, OnInterrupt, Options, OutputDecl, SignalTransport};
pub use result::{Evaluation, HookResult, Outcome, evaluate};
