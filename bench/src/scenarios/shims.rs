//! The `anneal-shim serve` processes of one store variant, for the scenarios that run the real
//! binary (5 and 7): one shim on a SQLite file, or N replicas of one PostgreSQL database
//! (`ANNEAL_TOKEN` the same on each, every replica told every replica's URL, its own first), on
//! loopback ports chosen before they start. Work spread "across replicas" goes to replica
//! `k mod N` for the k-th agent or sender.

use anneal_tests::{Replica, Shim};

use super::backend::{Backend, PostgresServer, admin_token, free_port};
use crate::children::tail;
use crate::error::{BenchError, BenchResult, file_error};

/// What every shim of the benchmarks is started with besides its store: no limit on a stack's
/// resources (the fleet's groups have 10,000 members, the throughput's stacks 2,000
/// deployments, over Heat's default of 1,000) nor on what its deployments publish (10,000
/// copies of the fleet's 19 KB script are 190 MB, over the default 128 MiB).
pub const SERVE_ARGS: &[&str] = &["--max-resources-per-stack", "-1", "--max-deployment-bytes-per-stack", "-1"];

/// The running shims of one variant; stopped when dropped.
pub struct Shims {
    shims: Vec<Shim>,
    admin_token: String,
}

impl Shims {
    /// Starts the shims of `backend`; on PostgreSQL, on a fresh database `database` of
    /// `postgres`.
    pub async fn start(backend: Backend, postgres: Option<&PostgresServer>, database: &str) -> BenchResult<Shims> {
        let Backend::Postgres { replicas } = backend else {
            let shim = Shim::start_with(SERVE_ARGS).await;
            let token_file = shim.token_file();
            let admin_token = std::fs::read_to_string(&token_file).map_err(file_error(&token_file))?.trim().to_string();
            return Ok(Shims { shims: vec![shim], admin_token });
        };
        let postgres = postgres.ok_or_else(|| BenchError::Failed("no PostgreSQL server".into()))?;
        let database_url = postgres.create_database(database)?;
        let admin_token = admin_token()?;
        let ports = (0..replicas).map(|_| free_port()).collect::<BenchResult<Vec<u16>>>()?;
        let urls: Vec<String> = ports.iter().map(|port| format!("http://127.0.0.1:{port}")).collect();
        let mut shims = Vec::with_capacity(replicas);
        for (index, port) in ports.iter().enumerate() {
            let others = urls.iter().enumerate().filter(|(other, _)| *other != index).map(|(_, url)| url.clone());
            let public_urls = std::iter::once(urls[index].clone()).chain(others).collect();
            let replica = Replica { database_url: database_url.clone(), admin_token: admin_token.clone(), public_urls };
            shims.push(Shim::start_replica_with(&format!("127.0.0.1:{port}"), replica, SERVE_ARGS).await);
        }
        Ok(Shims { shims, admin_token })
    }

    /// The command lines, as the report shows them.
    pub fn commands(backend: Backend) -> Vec<String> {
        match backend {
            Backend::Sqlite => vec![format!(
                "anneal-shim serve --listen 127.0.0.1:0 {} --db sqlite://$TMP/shim.db",
                SERVE_ARGS.join(" ")
            )],
            Backend::Postgres { replicas } => (0..replicas)
                .map(|index| {
                    let others: String = (0..replicas)
                        .filter(|other| *other != index)
                        .map(|other| format!(" --public-url http://127.0.0.1:$PORT{other}"))
                        .collect();
                    format!(
                        "ANNEAL_TOKEN=$TOKEN anneal-shim serve --listen 127.0.0.1:$PORT{index} {} --db \
                         postgres://$PG/<db> --public-url http://127.0.0.1:$PORT{index}{others}",
                        SERVE_ARGS.join(" ")
                    )
                })
                .collect(),
        }
    }

    /// Shim `index` modulo their number.
    pub fn get(&self, index: usize) -> &Shim {
        &self.shims[index % self.shims.len()]
    }

    pub fn all(&self) -> &[Shim] {
        &self.shims
    }

    pub fn admin_token(&self) -> &str {
        &self.admin_token
    }

    /// Every shim's process id.
    pub fn pids(&self) -> BenchResult<Vec<i32>> {
        self.shims
            .iter()
            .map(|shim| {
                shim.pid().ok_or_else(|| BenchError::Failed(format!("the shim at {} is not running", shim.url())))
            })
            .collect()
    }

    /// Every shim's port.
    pub fn ports(&self) -> BenchResult<Vec<u16>> {
        self.shims
            .iter()
            .map(|shim| {
                shim.url()
                    .rsplit_once(':')
                    .and_then(|(_, port)| port.trim_end_matches('/').parse::<u16>().ok())
                    .ok_or_else(|| BenchError::Failed(format!("no port in {}", shim.url())))
            })
            .collect()
    }

    /// The last lines of every shim's log, for an error.
    pub fn log_tails(&self) -> String {
        self.shims
            .iter()
            .map(|shim| format!("shim {} log: {}", shim.url(), tail(&shim.log_text())))
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// `url` (which names shim 0) rewritten to name shim `index`: a signal or metadata URL
    /// handed out by one replica is served by any (same path, same token).
    pub fn rebase(&self, url: &str, index: usize) -> BenchResult<String> {
        let first = self.shims[0].url();
        let rest = url
            .strip_prefix(first)
            .ok_or_else(|| BenchError::Failed(format!("{url} is not a URL of the shim at {first}")))?;
        Ok(format!("{}{rest}", self.get(index).url()))
    }
}
