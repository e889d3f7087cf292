//! The index of undelivered signals: the ids of the journal's `finished` entries, so the outbox
//! reads those entries and no others on each pass instead of parsing the whole journal (see
//! docs/journal.md, "The outbox").
//!
//! It lives in memory only; the entry files stay the one durable record. Why no signal can be
//! lost at any crash point:
//! - a process fills the index from a full scan of the journal (the executor's start-up load, or
//!   the outbox's first pass when nothing loaded the journal before), so every entry a previous
//!   process left `finished` on disk is found again, whatever moment that process died at;
//! - within a process, every write records the entry's new state here only after the file holds
//!   it, and the write that makes an entry `finished` is followed by the outbox's wake-up. A scan
//!   only ever adds ids: one that saw an entry as `finished` just before the outbox delivered it
//!   costs the outbox one more read, never a lost id;
//! - an id leaves the index only once its file was read back (or written) in a state that owes
//!   nothing: `signalled`, or `finished` with a permanent refusal (kept apart, for `once`'s count).

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use super::{Entry, State};

/// What the journal owes for one undelivered entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Owed {
    /// A signal to (re)send, when due.
    Signal,
    /// A signal the engine refused for good: never sent again, but still undelivered.
    Refused,
}

#[derive(Debug, Default)]
struct Inner {
    owed: HashMap<String, Owed>,
    /// Whether a full scan of the journal has run in this process.
    scanned: bool,
}

/// The undelivered entries of one journal.
#[derive(Debug, Default)]
pub(super) struct Undelivered {
    inner: Mutex<Inner>,
}

impl Undelivered {
    /// Records `entry`'s state as just written (or read back by the outbox).
    pub(super) fn record(&self, entry: &Entry) {
        let mut inner = self.lock();
        match owed_by(entry) {
            Some(owed) => {
                inner.owed.insert(entry.id.clone(), owed);
            }
            None => {
                inner.owed.remove(&entry.id);
            }
        }
    }

    /// Adds what a full scan found; never removes (see the module comment).
    pub(super) fn record_scan<'a>(&self, entries: impl IntoIterator<Item = &'a Entry>) {
        let mut inner = self.lock();
        for entry in entries {
            if let Some(owed) = owed_by(entry) {
                inner.owed.entry(entry.id.clone()).or_insert(owed);
            }
        }
        inner.scanned = true;
    }

    /// Forgets `id`, whose file is gone.
    pub(super) fn forget(&self, id: &str) {
        self.lock().owed.remove(id);
    }

    pub(super) fn scanned(&self) -> bool {
        self.lock().scanned
    }

    /// The ids owing `owed`, sorted so passes go in a stable order.
    pub(super) fn ids(&self, owed: Owed) -> Vec<String> {
        let inner = self.lock();
        let mut ids: Vec<String> =
            inner.owed.iter().filter(|(_, kind)| **kind == owed).map(|(id, _)| id.clone()).collect();
        ids.sort();
        ids
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        // The map is consistent after every statement; a panic elsewhere cannot tear it.
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

pub(super) fn owed_by(entry: &Entry) -> Option<Owed> {
    if entry.state != State::Finished {
        return None;
    }
    Some(if entry.permanently_failed() { Owed::Refused } else { Owed::Signal })
}
