//! What scenario 6 measured of one graph size on one store (`Converged`) and the rows it
//! becomes: per variant, the converge time, signals per second, store statements and commits
//! per signal, statements per deployment (create and signals together), and how the last
//! grows from the smallest converged size to the largest.

use std::time::Duration;

use super::TARGET_SIZE;
use crate::report::Measurement;
use crate::scenarios::backend::{Backend, metric, side_by_side};

/// One graph size's figures on one store.
pub struct Converged {
    pub backend: Backend,
    pub deployments: usize,
    pub servers: usize,
    pub edges: usize,
    pub max_fan_out: usize,
    pub depth: usize,
    pub template_bytes: usize,
    pub create: Duration,
    /// From create_stack to the last signal, or to the converge limit.
    pub elapsed: Duration,
    pub signalled: usize,
    pub create_statements: u64,
    pub signal_statements: u64,
    pub create_commits: u64,
    pub signal_commits: u64,
}

impl Converged {
    pub fn finished(&self) -> bool {
        self.signalled == self.deployments
    }

    /// The create's statements per deployment plus the signals' per deployment signalled (the
    /// same as all statements over all deployments when the graph converged).
    pub fn statements_per_deployment(&self) -> f64 {
        self.create_statements as f64 / self.deployments as f64 + self.statements_per_signal()
    }

    /// Statements from the create's return to the last signal, per signal: the signals'
    /// transactions, the document reads of the simulated agents and, on PostgreSQL, the
    /// replication tasks' re-reads after each NOTIFY.
    pub fn statements_per_signal(&self) -> f64 {
        self.signal_statements as f64 / self.signalled.max(1) as f64
    }

    pub fn commits_per_signal(&self) -> f64 {
        self.signal_commits as f64 / self.signalled.max(1) as f64
    }

    pub fn signal_rate(&self) -> f64 {
        self.signalled as f64 / self.elapsed.saturating_sub(self.create).as_secs_f64().max(1e-9)
    }

    pub fn note(&self) -> String {
        format!(
            "{}: {} deployments over {} servers: {} get_attr edges (largest fan-out {}), longest path {} deployments, \
             template {:.1} MB; create {:.2} s ({:.1} statements/deployment, {} commit(s)), then {} signals at {:.0}/s \
             ({:.1} statements and {:.2} commits each)",
            self.backend.label(),
            self.deployments,
            self.servers,
            self.edges,
            self.max_fan_out,
            self.depth,
            self.template_bytes as f64 / 1e6,
            self.create.as_secs_f64(),
            self.create_statements as f64 / self.deployments as f64,
            self.create_commits,
            self.signalled,
            self.signal_rate(),
            self.statements_per_signal(),
            self.commits_per_signal(),
        )
    }

    /// Why a partial size's per-signal figures are not comparable; `None` when it converged.
    fn partial(&self) -> Option<String> {
        (!self.finished()).then(|| {
            format!(
                "partial ({} of {} signalled), not comparable: the first signals of a graph release fewer successors",
                self.signalled, self.deployments
            )
        })
    }
}

/// Every variant's rows, the variants' figures of one metric and size side by side.
pub fn measurements(results: &[Converged], backends: &[Backend], limit: Duration) -> Vec<Measurement> {
    let per_backend = backends
        .iter()
        .map(|&backend| {
            let own: Vec<&Converged> = results.iter().filter(|result| result.backend == backend).collect();
            backend_rows(&own, backend, limit)
        })
        .collect();
    side_by_side(per_backend)
}

/// One variant's rows: each metric over the sizes, then the growth.
fn backend_rows(results: &[&Converged], backend: Backend, limit: Duration) -> Vec<Measurement> {
    let mut rows: Vec<Measurement> = results.iter().map(|result| converge_row(result, limit)).collect();
    for result in results {
        let name = metric(&format!("signals per second, {}", result.deployments), backend);
        rows.push(with_partial(Measurement::new(&name, "signals/s", result.signal_rate()), result));
    }
    for result in results {
        let name = metric(&format!("store statements per signal, {}", result.deployments), backend);
        let row = Measurement::new(&name, "statements", result.statements_per_signal())
            .note(&format!("{} statements / {} signals", result.signal_statements, result.signalled));
        rows.push(with_partial(row, result));
    }
    for result in results {
        let name = metric(&format!("commits per signal, {}", result.deployments), backend);
        let row = Measurement::new(&name, "commits", result.commits_per_signal()).note(&format!(
            "{} commits / {} signals; the create: {} commit(s)",
            result.signal_commits, result.signalled, result.create_commits
        ));
        rows.push(with_partial(row, result));
    }
    for result in results {
        let name = metric(&format!("store statements per deployment, {}", result.deployments), backend);
        rows.push(with_partial(Measurement::new(&name, "statements", result.statements_per_deployment()), result));
    }
    rows.extend(growth_row(results, backend));
    rows
}

fn converge_row(result: &Converged, limit: Duration) -> Measurement {
    let name =
        metric(&format!("converge, {} deployments / {} servers", result.deployments, result.servers), result.backend);
    let seconds = result.elapsed.as_secs_f64();
    let mut row = Measurement::new(&name, "s", seconds);
    if !result.finished() {
        row = row.note(&format!(
            "NOT converged: stopped {} s after the create returned, with {} of {} signalled",
            limit.as_secs(),
            result.signalled,
            result.deployments
        ));
    }
    if result.deployments == TARGET_SIZE {
        row = row.with_target("< 10 s", result.finished() && seconds < 10.0);
    }
    row
}

fn with_partial(row: Measurement, result: &Converged) -> Measurement {
    match result.partial() {
        Some(why) => row.note(&why),
        None => row,
    }
}

/// Statements per deployment of the largest converged size over the smallest's.
fn growth_row(results: &[&Converged], backend: Backend) -> Option<Measurement> {
    let converged: Vec<&&Converged> = results.iter().filter(|result| result.finished()).collect();
    let [smallest, .., largest] = converged[..] else { return None };
    let growth = largest.statements_per_deployment() / smallest.statements_per_deployment();
    let name =
        metric(&format!("statements per deployment, {} vs {}", largest.deployments, smallest.deployments), backend);
    let mut row = Measurement::new(&name, "x", growth)
        .with_target("bounded by a constant (≤ 1.1x)", growth <= 1.1)
        .note("every statement counts, BEGIN and COMMIT included");
    if backend != Backend::Sqlite {
        row = row.note("but those of read-only transactions (replication's re-reads), which PgStore does not count");
    }
    if converged.len() < results.len() {
        row = row.note("only the sizes that converged are compared");
    }
    Some(row)
}
