//! What `GET /metrics` reports, in the Prometheus (OpenMetrics) text format: counters and
//! histograms the API and engine update as they work (signals by outcome, held long-polls,
//! wake-up and store transaction latency, sweeper firings), and gauges set from a snapshot of
//! the store at each scrape (stacks by status, resources by kind and phase, how long ago each
//! server's agent was last seen). One `Metrics` per engine, shared with the HTTP layer.

use std::sync::Mutex;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// The store at one moment, for the gauges.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Snapshot {
    /// (stack status, count), e.g. `("CREATE_COMPLETE", 3)`.
    pub stacks: Vec<(String, u64)>,
    /// (kind, phase, count), as the graph names them (`deployment`, `in_progress`).
    pub resources: Vec<(String, String, u64)>,
    /// (server, seconds since its agent last asked for metadata; `None`: never).
    pub servers: Vec<(String, Option<f64>)>,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StatusLabel {
    status: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResourceLabels {
    kind: String,
    phase: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ServerLabel {
    server: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct SignalLabels {
    /// `deployment` or `wait_condition`.
    route: String,
    /// What came of it: `applied`, `duplicate`, `stale`, or why it was rejected
    /// (`unknown_token`, `bad_body`, `too_large`, `too_slow`, `unavailable`, `error`).
    outcome: String,
}

pub struct Metrics {
    registry: Registry,
    stacks: Family<StatusLabel, Gauge>,
    resources: Family<ResourceLabels, Gauge>,
    server_last_seen_age: Family<ServerLabel, Gauge<f64, AtomicU64>>,
    servers_never_seen: Gauge,
    signals: Family<SignalLabels, Counter>,
    long_polls_held: Gauge,
    wakeup_seconds: Histogram,
    transaction_seconds: Histogram,
    sweeper_firings: Counter,
    /// One scrape at a time sets the snapshot gauges and encodes them.
    scrape: Mutex<()>,
}

impl Default for Metrics {
    fn default() -> Metrics {
        Metrics::new()
    }
}

impl Metrics {
    pub fn new() -> Metrics {
        let mut registry = Registry::with_prefix("anneal_shim");
        let stacks = Family::<StatusLabel, Gauge>::default();
        registry.register("stacks", "Stacks by status", stacks.clone());
        let resources = Family::<ResourceLabels, Gauge>::default();
        registry.register("resources", "Resources by kind (deployment, config, ...) and phase", resources.clone());
        let server_last_seen_age = Family::<ServerLabel, Gauge<f64, AtomicU64>>::default();
        registry.register(
            "server_last_seen_age_seconds",
            "Seconds since each server's agent last asked for its metadata",
            server_last_seen_age.clone(),
        );
        let servers_never_seen = Gauge::default();
        registry.register(
            "servers_never_seen",
            "Registered servers whose agent has never asked for metadata",
            servers_never_seen.clone(),
        );
        let signals = Family::<SignalLabels, Counter>::default();
        registry.register("signals", "Signals received, by route and outcome", signals.clone());
        let long_polls_held = Gauge::default();
        registry.register("long_polls_held", "Metadata long-polls held now", long_polls_held.clone());
        // 1 ms to ~33 s.
        let wakeup_seconds = Histogram::new(exponential_buckets(0.001, 2.0, 16));
        registry.register(
            "wakeup_seconds",
            "From a server's document changing to its held long-poll answering",
            wakeup_seconds.clone(),
        );
        // 0.1 ms to ~3 s.
        let transaction_seconds = Histogram::new(exponential_buckets(0.0001, 2.0, 16));
        registry.register(
            "store_transaction_seconds",
            "Engine write transactions, start to commit",
            transaction_seconds.clone(),
        );
        let sweeper_firings = Counter::default();
        registry.register(
            "sweeper_firings",
            "Deadlines the sweeper acted on (timeouts, batch pauses)",
            sweeper_firings.clone(),
        );
        Metrics {
            registry,
            stacks,
            resources,
            server_last_seen_age,
            servers_never_seen,
            signals,
            long_polls_held,
            wakeup_seconds,
            transaction_seconds,
            sweeper_firings,
            scrape: Mutex::new(()),
        }
    }

    pub fn signal(&self, route: &str, outcome: &str) {
        self.signals.get_or_create(&SignalLabels { route: route.into(), outcome: outcome.into() }).inc();
    }

    /// Counts a held long-poll until the returned guard drops.
    pub fn hold_long_poll(&self) -> LongPollHeld<'_> {
        self.long_polls_held.inc();
        LongPollHeld(&self.long_polls_held)
    }

    pub fn wakeup(&self, latency: Duration) {
        self.wakeup_seconds.observe(latency.as_secs_f64());
    }

    pub fn transaction(&self, took: Duration) {
        self.transaction_seconds.observe(took.as_secs_f64());
    }

    pub fn sweeper_fired(&self, count: u64) {
        self.sweeper_firings.inc_by(count);
    }

    /// The text to answer a scrape with, the gauges set from `snapshot`.
    pub fn render(&self, snapshot: &Snapshot) -> String {
        let _one_at_a_time = self.scrape.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        // Label sets of stacks, phases or servers that are gone must not linger.
        self.stacks.clear();
        self.resources.clear();
        self.server_last_seen_age.clear();
        for (status, count) in &snapshot.stacks {
            self.stacks.get_or_create(&StatusLabel { status: status.clone() }).set(gauge_value(*count));
        }
        for (kind, phase, count) in &snapshot.resources {
            let labels = ResourceLabels { kind: kind.clone(), phase: phase.clone() };
            self.resources.get_or_create(&labels).set(gauge_value(*count));
        }
        let mut never = 0;
        for (server, age) in &snapshot.servers {
            match age {
                Some(age) => {
                    self.server_last_seen_age.get_or_create(&ServerLabel { server: server.clone() }).set(*age);
                }
                None => never += 1,
            }
        }
        self.servers_never_seen.set(never);
        let mut text = String::new();
        // Writing to a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut text, &self.registry);
        text
    }
}

fn gauge_value(count: u64) -> i64 {
    i64::try_from(count).unwrap_or(i64::MAX)
}

/// A held long-poll, counted in `long_polls_held` while it lives.
pub struct LongPollHeld<'a>(&'a Gauge);

impl Drop for LongPollHeld<'_> {
    fn drop(&mut self) {
        self.0.dec();
    }
}

/// The content type of `render`'s text.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

#[cfg(test)]
mod tests;
