//! Wire types shared by anneal-agent and anneal-shim: the Heat deployment document, hook results
//! and their signal bodies, Heat's failure rule, wait-condition signal bodies, how an error
//! prints on one line (`error_chain`) and the budget both YAML readers charge anchors and aliases
//! against (`alias_budget`). Serde types with validation and Python-compatible encodings; this
//! crate does no I/O and has no async runtime.

pub mod alias_budget;
pub mod dates;
pub mod deployment;
pub mod env;
pub mod error;
pub mod pyjson;
pub mod result;
pub mod signal;
pub mod waitcondition;

pub use deployment::{Deployment, HttpVerb, Input, KeystoneInputs, OnInterrupt, Options, OutputDecl, SignalTransport};
pub use error::error_chain;
pub use result::{Evaluation, HookResult, Outcome, evaluate};
