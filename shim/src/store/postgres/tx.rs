//! `Tx` for `PgTx`: one line per method, handing over to the module that owns the table
//! (written once for both backends: see `store::dispatch`). The row cache every backend shares
//! wraps it: see `store::cache`.

use super::access::PgTx;
use super::{nodes, records, servers, sessions, stacks};

crate::store::dispatch::impl_tx!(PgTx<'_, '_>);
