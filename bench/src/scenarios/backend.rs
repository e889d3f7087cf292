//! The stores the scenarios 5, 6 and 7 compare side by side: SQLite (one shim, one file) and
//! PostgreSQL with one and with three replicas sharing one database (see ARCHITECTURE.md
//! "Replicas on PostgreSQL: the concurrency model"). `Database` is the `--db` choice, `Backend`
//! one variant measured, and `PostgresServer` the private PostgreSQL server of the run (the
//! tests' harness: `initdb` in a temp dir, a Unix socket only), started when a scenario first
//! measures a PostgreSQL variant (`Context::postgres`); every scenario, variant and size gets
//! a fresh database on it.

use std::path::Path;

use anneal_tests::Postgres;

use crate::error::{BenchError, BenchResult};
use crate::report::Measurement;

/// The replica counts measured on PostgreSQL.
pub const REPLICA_COUNTS: [usize; 2] = [1, 3];

/// Which stores a run measures (`--db`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Database {
    /// SQLite only.
    Sqlite,
    /// PostgreSQL only, with 1 and with 3 replicas.
    Postgres,
    /// Both, side by side in one table.
    #[default]
    All,
}

impl Database {
    /// The variants measured, in the order their rows appear.
    pub fn backends(self) -> Vec<Backend> {
        let postgres = REPLICA_COUNTS.iter().map(|&replicas| Backend::Postgres { replicas });
        match self {
            Database::Sqlite => vec![Backend::Sqlite],
            Database::Postgres => postgres.collect(),
            Database::All => std::iter::once(Backend::Sqlite).chain(postgres).collect(),
        }
    }

    /// The flag's value as typed.
    pub fn name(self) -> &'static str {
        match self {
            Database::Sqlite => "sqlite",
            Database::Postgres => "postgres",
            Database::All => "all",
        }
    }
}

/// One store variant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    /// `replicas` shims (or in-process engines, each with its own `PgStore`) on one database.
    Postgres {
        replicas: usize,
    },
}

impl Backend {
    /// How rows name it.
    pub fn label(self) -> String {
        match self {
            Backend::Sqlite => "SQLite".into(),
            Backend::Postgres { replicas: 1 } => "PostgreSQL, 1 replica".into(),
            Backend::Postgres { replicas } => format!("PostgreSQL, {replicas} replicas"),
        }
    }

    /// Shims or engines sharing the store.
    pub fn replicas(self) -> usize {
        match self {
            Backend::Sqlite => 1,
            Backend::Postgres { replicas } => replicas,
        }
    }

    /// A database name for this variant: `<scenario>_r<replicas>[_<size>]`.
    pub fn database_name(self, scenario: &str, size: Option<usize>) -> String {
        let size = size.map(|size| format!("_{size}")).unwrap_or_default();
        format!("{scenario}_r{}{size}", self.replicas())
    }
}

/// `metric (backend)`: the rows of every variant carry the same metric names, told apart by
/// the variant.
pub fn metric(metric: &str, backend: Backend) -> String {
    format!("{metric} ({})", backend.label())
}

/// Each variant's rows, interleaved so that the variants' figures of one metric are adjacent
/// (row `i` of every variant, then row `i + 1`, ...).
pub fn side_by_side(per_backend: Vec<Vec<Measurement>>) -> Vec<Measurement> {
    let longest = per_backend.iter().map(Vec::len).max().unwrap_or(0);
    let mut columns: Vec<std::vec::IntoIter<Measurement>> = per_backend.into_iter().map(Vec::into_iter).collect();
    let mut rows = Vec::new();
    for _ in 0..longest {
        rows.extend(columns.iter_mut().filter_map(Iterator::next));
    }
    rows
}

/// The run's private PostgreSQL server, stopped when it drops.
pub struct PostgresServer {
    server: Option<Postgres>,
    version: String,
    fsync: bool,
}

impl PostgresServer {
    /// Starts a fresh server; `fsync` as PostgreSQL's setting.
    pub fn start(fsync: bool) -> BenchResult<PostgresServer> {
        installed()?;
        // The harness blocks (initdb, waiting for the socket) and panics on failure; the
        // binaries were checked just above, so a panic here is a broken install.
        let server = tokio::task::block_in_place(|| Postgres::start(fsync));
        let version = tokio::task::block_in_place(|| server.psql("postgres", "SHOW server_version"));
        Ok(PostgresServer { server: Some(server), version, fsync })
    }

    /// Creates an empty database named `name`; returns its URL.
    pub fn create_database(&self, name: &str) -> BenchResult<String> {
        let server = self.server.as_ref().ok_or_else(|| BenchError::Failed("the PostgreSQL server is gone".into()))?;
        Ok(tokio::task::block_in_place(|| server.create_database(name)))
    }

    /// For the notes: version and durability.
    pub fn describe(&self) -> String {
        let fsync = if self.fsync { "fsync on" } else { "fsync off (smoke)" };
        format!(
            "PostgreSQL {} (a private server started for the run: initdb, Unix socket only, {fsync}, \
             synchronous_commit on; the server runs on the same cores as everything else)",
            self.version
        )
    }
}

impl std::fmt::Debug for PostgresServer {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.debug_struct("PostgresServer").field("version", &self.version).field("fsync", &self.fsync).finish()
    }
}

impl Drop for PostgresServer {
    fn drop(&mut self) {
        // Stopping waits for the server's exit: off the async worker.
        if let Some(server) = self.server.take() {
            tokio::task::block_in_place(|| drop(server));
        }
    }
}

/// Whether the harness will find PostgreSQL's server binaries, checked before it is asked to:
/// it panics when they are missing, and the release profile aborts on a panic, which would end
/// the whole run instead of failing this scenario with a message.
fn installed() -> BenchResult<()> {
    let has_initdb = |dir: &Path| dir.join("initdb").is_file();
    let on_path = std::env::var_os("PATH").is_some_and(|path| std::env::split_paths(&path).any(|dir| has_initdb(&dir)));
    let debian = std::fs::read_dir("/usr/lib/postgresql")
        .is_ok_and(|entries| entries.filter_map(Result::ok).any(|entry| has_initdb(&entry.path().join("bin"))));
    if on_path || debian || std::env::var_os("ANNEAL_POSTGRES_BIN").is_some() {
        return Ok(());
    }
    Err(BenchError::Failed(
        "PostgreSQL's server binaries (initdb, postgres, pg_isready, psql) are not installed: on Debian or Ubuntu \
         `apt-get install postgresql`, or set ANNEAL_POSTGRES_BIN to their directory; or measure SQLite only \
         with `--db sqlite`"
            .into(),
    ))
}

/// A fresh admin token for replicas (`ANNEAL_TOKEN`, the same on each): 32 random bytes in hex.
pub fn admin_token() -> BenchResult<String> {
    use std::io::Read as _;
    let mut bytes = [0u8; 32];
    let path = Path::new("/dev/urandom");
    std::fs::File::open(path)
        .and_then(|mut file| file.read_exact(&mut bytes))
        .map_err(crate::error::file_error(path))?;
    Ok(bytes.iter().map(|byte| format!("{byte:02x}")).collect())
}

/// A loopback port free now: replicas must know one another's URLs before they start.
pub fn free_port() -> BenchResult<u16> {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|address| address.port())
        .map_err(|source| BenchError::Process { what: "find a free loopback port".into(), source })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn all_puts_sqlite_first_then_each_replica_count() {
        assert_eq!(
            Database::All.backends(),
            vec![Backend::Sqlite, Backend::Postgres { replicas: 1 }, Backend::Postgres { replicas: 3 }]
        );
        assert_eq!(Database::Sqlite.backends(), vec![Backend::Sqlite]);
        assert_eq!(Backend::Postgres { replicas: 3 }.database_name("graph", Some(200)), "graph_r3_200");
    }

    #[test]
    fn side_by_side_interleaves_the_variants_rows() {
        let rows = |label: &str| {
            vec![Measurement::new(&format!("a {label}"), "", 0.0), Measurement::new(&format!("b {label}"), "", 0.0)]
        };
        let merged = side_by_side(vec![rows("x"), rows("y")]);
        let names: Vec<&str> = merged.iter().map(|row| row.metric.as_str()).collect();
        assert_eq!(names, ["a x", "a y", "b x", "b y"]);
    }
}
