//! `Tx` for `SqliteTx`: one line per method, handing over to the module that owns the table
//! (written once for both backends: see `store::dispatch`). The row cache every backend shares
//! wraps it: see `store::cache`.

use super::access::SqliteTx;
use super::{nodes, records, servers, sessions, stacks};

crate::store::dispatch::impl_tx!(SqliteTx<'_>);
