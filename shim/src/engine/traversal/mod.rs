//! Stack operations as traversals of the node graph: `forward` (create and update: a node
//! activates once its predecessors are complete) and `reverse` (delete, as Heat deletes: a
//! resource's DELETE action runs once everything that depends on it is gone). `forward` uses
//! `reverse` for the resources an update removes; never the other way round.

pub mod forward;
pub mod reverse;
