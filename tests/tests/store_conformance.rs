//! The store conformance suite: one set of checks of the `Store`/`Tx` contract
//! (shim/src/store/mod.rs) run against both backends, `SqliteStore` and `PgStore` on a real,
//! private PostgreSQL server, so that the engine above them cannot tell which one it runs on.
//! This file owns the harness: the `Backend` trait (what a check may need to know of the backend
//! it runs on), the store each test gets, and the `conformance!` macro that turns each generic
//! check into a test per backend. The checks live in the submodules, one per group of tables or
//! concern; `postgres_only` and `availability` hold what only PostgreSQL has (its migrations, its
//! shared secrets, a server that goes away). What only SQLite has (pragmas, group commit, its
//! migrations, query plans) stays with the SQLite backend's unit tests in shim/src/store/tests/.
//!
//! Each PostgreSQL test starts its own server (`Postgres::start`, about 0.7 s): the tests share
//! nothing, so they run in parallel and a failure names one check on one backend.

#[path = "store_conformance/availability.rs"]
mod availability;
#[path = "store_conformance/contention.rs"]
mod contention;
#[path = "store_conformance/fixtures.rs"]
mod fixtures;
#[path = "store_conformance/graph.rs"]
mod graph;
#[path = "store_conformance/orderings.rs"]
mod orderings;
#[path = "store_conformance/postgres_only.rs"]
mod postgres_only;
#[path = "store_conformance/records.rs"]
mod records;
#[path = "store_conformance/row_cache.rs"]
mod row_cache;
#[path = "store_conformance/servers.rs"]
mod servers;
#[path = "store_conformance/sessions.rs"]
mod sessions;
#[path = "store_conformance/transactions.rs"]
mod transactions;

use anneal_shim::store::{PgStore, SqliteStore, Store};
use anneal_tests::Postgres;

/// What a check may ask of the backend it runs on, beyond `Store`.
pub trait Backend: Store + Sized {
    /// The text the backend keeps of free text that came from outside (a signal's reason, an
    /// event's): SQLite keeps it as it is; PostgreSQL's TEXT cannot hold NUL, so `PgStore`
    /// stores U+FFFD in its place.
    fn stored_text(text: &str) -> String;
    /// Whether a call's other writes stay when its work goes on past a failed statement (an
    /// error it chose not to pass on): SQLite undoes only the statement; PostgreSQL aborts the
    /// whole transaction, so `PgStore` refuses the call with `StoreError::RolledBack`.
    const KEEPS_WRITES_PAST_A_FAILED_STATEMENT: bool;
    /// COMMITs since open.
    fn commits(&self) -> u64;
}

impl Backend for SqliteStore {
    const KEEPS_WRITES_PAST_A_FAILED_STATEMENT: bool = true;
    fn stored_text(text: &str) -> String {
        text.to_owned()
    }
    fn commits(&self) -> u64 {
        SqliteStore::commits(self)
    }
}

impl Backend for PgStore {
    const KEEPS_WRITES_PAST_A_FAILED_STATEMENT: bool = false;
    fn stored_text(text: &str) -> String {
        text.replace('\0', "\u{FFFD}")
    }
    fn commits(&self) -> u64 {
        PgStore::commits(self)
    }
}

/// The database every PostgreSQL check works in (each on its own server).
const DATABASE: &str = "conformance";

/// Runs `check` on a fresh in-memory SQLite store.
pub fn on_sqlite(check: fn(&SqliteStore)) {
    check(&SqliteStore::open_in_memory().unwrap());
}

/// Runs `check` on a fresh PostgreSQL database on a server of its own.
pub fn on_postgres(check: fn(&PgStore)) {
    let postgres = Postgres::start(false);
    let store = PgStore::open(&postgres.create_database(DATABASE)).unwrap();
    check(&store);
    // The store's pooled connections go before the server they are connected to.
    drop(store);
}

/// Runs `check` on two stores opened on one SQLite file: two connections, as two processes
/// would have.
pub fn on_sqlite_twice(check: fn(&SqliteStore, &SqliteStore)) {
    let directory = tempfile::tempdir().unwrap();
    let path = directory.path().join("shim.db");
    check(&SqliteStore::open(&path).unwrap(), &SqliteStore::open(&path).unwrap());
}

/// Runs `check` on two stores opened on one PostgreSQL database, as two replicas would be.
pub fn on_postgres_twice(check: fn(&PgStore, &PgStore)) {
    let postgres = Postgres::start(false);
    let url = postgres.create_database(DATABASE);
    let (first, second) = (PgStore::open(&url).unwrap(), PgStore::open(&url).unwrap());
    check(&first, &second);
    drop((first, second));
}

/// For each generic check `name` of the invoking module, a module `name` holding the tests
/// `on_sqlite` and `on_postgres` (a module because a stable macro cannot join identifiers into
/// `name_on_sqlite`; a function and a module of one name live side by side). `one store:` checks
/// take `&S`, `two stores:` checks take two stores on the same database.
macro_rules! conformance {
    (one store: $($check:ident),+ $(,)?) => {$(
        mod $check {
            #[test]
            fn on_sqlite() {
                crate::on_sqlite(super::$check);
            }

            #[test]
            fn on_postgres() {
                crate::on_postgres(super::$check);
            }
        }
    )+};
    (two stores: $($check:ident),+ $(,)?) => {$(
        mod $check {
            #[test]
            fn on_sqlite() {
                crate::on_sqlite_twice(super::$check);
            }

            #[test]
            fn on_postgres() {
                crate::on_postgres_twice(super::$check);
            }
        }
    )+};
}
pub(crate) use conformance;
