//! What a scenario returns: its measurements (anneal's figure, the peer's when one exists, the
//! ratio measured in the same run, the target and whether it is met) and the commands it ran.

use serde::Serialize;

/// One figure of a scenario.
#[derive(Debug, Clone, Serialize)]
pub struct Measurement {
    pub metric: String,
    pub unit: String,
    pub anneal: f64,
    /// The peer's figure for the same metric in the same run, when a peer exists and ran.
    pub peer: Option<f64>,
    /// How many times better anneal is (peer / anneal for lower-is-better metrics).
    pub ratio: Option<f64>,
    /// The target, in words.
    pub target: Option<String>,
    pub met: Option<bool>,
    pub notes: String,
}

impl Measurement {
    /// A measurement without peer or target.
    pub fn new(metric: &str, unit: &str, anneal: f64) -> Measurement {
        Measurement {
            metric: metric.to_string(),
            unit: unit.to_string(),
            anneal,
            peer: None,
            ratio: None,
            target: None,
            met: None,
            notes: String::new(),
        }
    }

    /// Adds the peer's figure of a lower-is-better metric and the ratio peer / anneal.
    pub fn with_peer(mut self, peer: Option<f64>) -> Measurement {
        self.peer = peer;
        self.ratio = peer.filter(|_| self.anneal > 0.0).map(|peer| peer / self.anneal);
        self
    }

    /// Sets the target and whether it is met.
    pub fn with_target(mut self, target: &str, met: bool) -> Measurement {
        self.target = Some(target.to_string());
        self.met = Some(met);
        self
    }

    /// Appends a note.
    pub fn note(mut self, note: &str) -> Measurement {
        if !self.notes.is_empty() {
            self.notes.push_str("; ");
        }
        self.notes.push_str(note);
        self
    }
}

/// Everything one scenario measured.
#[derive(Debug, Clone, Serialize)]
pub struct ScenarioReport {
    /// The scenario's command-line name, e.g. `footprint`.
    pub name: String,
    pub title: String,
    /// The peer it is compared with, in words.
    pub peer: String,
    /// The commands it ran, as they were run (temp paths shown as `$TMP`).
    pub commands: Vec<String>,
    pub measurements: Vec<Measurement>,
    pub notes: Vec<String>,
    pub seconds: f64,
}

impl ScenarioReport {
    pub fn new(name: &str, title: &str, peer: &str) -> ScenarioReport {
        ScenarioReport {
            name: name.to_string(),
            title: title.to_string(),
            peer: peer.to_string(),
            commands: Vec::new(),
            measurements: Vec::new(),
            notes: Vec::new(),
            seconds: 0.0,
        }
    }

    pub fn command(&mut self, command: &str) {
        if !self.commands.iter().any(|known| known == command) {
            self.commands.push(command.to_string());
        }
    }
}

/// p-th percentile (0.0..=1.0, nearest rank) of `values`, which need not be sorted.
pub fn percentile(values: &[f64], p: f64) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}
