//! `EngineError`: what an engine operation reports. The HTTP layer sees it as a `ServiceError`
//! (the conversion below), which maps each kind to a status code.

use crate::model::ServiceError;
use crate::store::StoreError;

#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("{what} not found")]
    NotFound { what: String },
    #[error("{what} already exists")]
    Conflict { what: String },
    #[error("{message}")]
    InUse { message: String },
    #[error("{message}")]
    Invalid { message: String },
    #[error("template is invalid: {}", problems.join("; "))]
    Template { problems: Vec<String> },
    #[error("cannot run the engine's worker thread: {detail}")]
    Worker { detail: String },
    /// A transaction rolled back on purpose (`Engine::transact_discarded`); never seen outside.
    #[error("the transaction was discarded")]
    Discarded,
}

impl From<EngineError> for ServiceError {
    fn from(error: EngineError) -> ServiceError {
        match error {
            EngineError::NotFound { what } => ServiceError::NotFound { what },
            EngineError::Conflict { what } => ServiceError::Conflict { what },
            EngineError::InUse { message } => ServiceError::InUse { message },
            EngineError::Invalid { message } => ServiceError::Invalid { message },
            EngineError::Template { problems } => ServiceError::Template { problems },
            EngineError::Store(error @ StoreError::Unavailable { .. }) => ServiceError::Unavailable(Box::new(error)),
            other => ServiceError::Store(Box::new(other)),
        }
    }
}
