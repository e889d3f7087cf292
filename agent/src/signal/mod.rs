//! Signals of finished deployments, from the journal to the engine: `outcome` is what one
//! delivery attempt became and the signal's idempotency id (all the journal knows of signalling),
//! `send` sends one signal over its transport and classifies the answer, and `outbox` delivers
//! the journal's finished entries until the engine acknowledges them (see docs/journal.md and
//! docs/metadata.md for the transports), to the URL `route` chooses (a newer document's, or the
//! next replica's after a host failed). Only the outbox touches the journal.

pub(crate) mod outbox;
pub(crate) mod outcome;
pub(crate) mod route;
pub(crate) mod send;
