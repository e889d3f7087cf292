//! What one run of scenario 5 measured on one store (`Figures`) and the rows it becomes. With
//! several replicas, resident sizes are the largest replica's (the target is per process) with
//! the sum in the notes, CPU times and connections are summed over the replicas.

use std::time::Duration;

use crate::report::{Measurement, percentile};
use crate::scenarios::backend::{Backend, metric};
use crate::scenarios::millis;

/// What one run measured.
pub struct Figures {
    pub backend: Backend,
    pub servers: usize,
    pub registration: Duration,
    pub parked_by_shim: usize,
    pub established: usize,
    /// Per replica, VmRSS with every long-poll parked.
    pub parked_resident_kib: Vec<u64>,
    pub park_cpu_seconds: f64,
    /// Per probe, milliseconds from just before its one-deployment stack's create request was
    /// sent until its long-poll answered, with every other long-poll parked.
    pub single_change: Vec<f64>,
    pub template_bytes: usize,
    pub request_bytes: usize,
    pub create_request: Duration,
    /// Per server, milliseconds from just before the create request was sent.
    pub from_sent: Vec<f64>,
    /// Per server, milliseconds from the create response (negative: woken before it came).
    pub from_response: Vec<f64>,
    /// The mean size of the documents that woke the long-polls.
    pub document_bytes: usize,
    pub wake_cpu_seconds: f64,
    /// Per replica, VmHWM at the end.
    pub peak_resident_kib: Vec<u64>,
}

impl Figures {
    pub fn note(&self, probes: usize) -> String {
        format!(
            "{}: {} fleet servers + {probes} probes; registration took {:.1} s; template {} KiB, request body {} KiB",
            self.backend.label(),
            self.servers,
            self.registration.as_secs_f64(),
            self.template_bytes / 1024,
            self.request_bytes / 1024,
        )
    }

    pub fn measurements(&self) -> Vec<Measurement> {
        let name = |text: &str| metric(text, self.backend);
        let p99 = percentile(&self.from_sent, 0.99);
        let single_p99 = percentile(&self.single_change, 0.99);
        let peak = mebibytes(largest(&self.peak_resident_kib));
        let rows = vec![
            Measurement::new(
                &name("one-server change, p50, with all parked"),
                "ms",
                percentile(&self.single_change, 0.5),
            ),
            Measurement::new(&name("one-server change, p99, with all parked"), "ms", single_p99)
                .with_target("p99 < 50 ms", single_p99 < 50.0)
                .note(&format!("{} stacks of one deployment, one after the other", self.single_change.len())),
            Measurement::new(&name("every server at once: wake-up p50"), "ms", percentile(&self.from_sent, 0.5)),
            Measurement::new(&name("every server at once: wake-up p99"), "ms", p99)
                .with_target("p99 < 50 ms", p99 < 50.0),
            Measurement::new(&name("every server at once: wake-up max"), "ms", percentile(&self.from_sent, 1.0)),
            Measurement::new(&name("stack create request (POST to its response)"), "ms", millis(self.create_request))
                .note("the wake-ups of every server at once include it"),
            Measurement::new(
                &name("wake-up p50 after the create response"),
                "ms",
                percentile(&self.from_response, 0.5),
            ),
            Measurement::new(
                &name("wake-up p99 after the create response"),
                "ms",
                percentile(&self.from_response, 0.99),
            )
            .note("negative: woken before the response arrived"),
            self.per_replica(
                Measurement::new(&name("shim peak RSS (VmHWM, whole run)"), "MiB", peak),
                &self.peak_resident_kib,
            )
            .with_target("RSS < 256 MiB", peak < 256.0),
            self.per_replica(
                Measurement::new(
                    &name("shim RSS with every long-poll parked"),
                    "MiB",
                    mebibytes(largest(&self.parked_resident_kib)),
                ),
                &self.parked_resident_kib,
            ),
            Measurement::new(&name("shim CPU, first polls + parking"), "s", self.park_cpu_seconds),
            Measurement::new(&name("shim CPU, stack create + every wake-up"), "s", self.wake_cpu_seconds),
            Measurement::new(&name("long-polls parked (shim's last_seen)"), "", self.parked_by_shim as f64),
            Measurement::new(&name("connections established to the shim"), "", self.established as f64)
                .note("from /proc/net/tcp, while parked; plus the admin client's one"),
        ];
        if self.backend.replicas() == 1 {
            return rows;
        }
        rows.into_iter().map(|row| self.summed(row)).collect()
    }

    /// A resident size row of several replicas: the largest, with every replica's in the note.
    fn per_replica(&self, row: Measurement, kib: &[u64]) -> Measurement {
        if kib.len() < 2 {
            return row;
        }
        let each: Vec<String> = kib.iter().map(|kib| format!("{:.0}", mebibytes(*kib))).collect();
        row.note(&format!(
            "the largest replica; each: {} MiB, {:.0} MiB in all",
            each.join(" / "),
            mebibytes(kib.iter().sum())
        ))
    }

    /// Notes how a row of several replicas combines theirs.
    fn summed(&self, row: Measurement) -> Measurement {
        let replicas = self.backend.replicas();
        if row.metric.starts_with("shim CPU") || row.metric.starts_with("connections established") {
            row.note(&format!("summed over the {replicas} replicas"))
        } else if row.metric.starts_with("long-polls parked") {
            row.note(&format!("servers in any of the {replicas} replicas' lists, each replica knowing its own polls"))
        } else {
            row
        }
    }
}

fn largest(kib: &[u64]) -> u64 {
    kib.iter().copied().max().unwrap_or(0)
}

fn mebibytes(kib: u64) -> f64 {
    kib as f64 / 1024.0
}
