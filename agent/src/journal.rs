//! The durable journal: one JSON file per derived deployment id in `<state_dir>/journal/`
//! (directory 0700, files 0600), each replaced atomically and, from `started` on, fsync'd before
//! the step it records is acted on, so a restarted agent knows exactly what ran, what finished and
//! what was signalled (see docs/journal.md). Beside a running deployment's entry, `<id>.run` names
//! the hook's process (see `orphan`). This module stores and loads entries, keeps the index of
//! undelivered signals (`index`) and removes the entries retention gives up (`retention`); it does
//! not decide what to run or when to deliver.

pub(crate) mod entry;
mod index;
pub(crate) mod retention;

use std::fmt;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use anneal_protocol::deployment::is_safe_id;
use serde::{Deserialize, Serialize};

pub(crate) use entry::Entry;
pub(crate) use index::Owed;

use crate::fsutil::{self, Durability, Spares};

/// Where a deployment is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum State {
    /// In the metadata, not started yet.
    Seen,
    /// Not runnable yet (missing hook, unfinished dependencies); `waiting_reason` says why.
    Waiting,
    /// The hook was started; a restart finding this state knows the run was interrupted.
    Started,
    /// The result is recorded and waits for delivery.
    Finished,
    /// The engine acknowledged the signal (or no signal was wanted).
    Signalled,
    /// Deliberately not run (e.g. `os-apply-config`).
    Skipped,
}

impl State {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            State::Seen => "seen",
            State::Waiting => "waiting",
            State::Started => "started",
            State::Finished => "finished",
            State::Signalled => "signalled",
            State::Skipped => "skipped",
        }
    }
}

impl fmt::Display for State {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(self.as_str())
    }
}

#[derive(Debug, thiserror::Error)]
pub enum JournalError {
    #[error("cannot create journal directory {path}")]
    CreateDir {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("cannot list journal directory {path}")]
    ReadDir {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("cannot read journal entry {path}")]
    Read {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("cannot remove journal entry {path}")]
    Remove {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("cannot write journal entry {path}")]
    Write {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("cannot encode the journal entry of deployment {id}")]
    Encode {
        id: String,
        #[source]
        source: serde_json::Error,
    },
    #[error("cannot use deployment id {id:?} as a file name")]
    UnsafeId { id: String },
    #[error("deployment {id}: cannot go from {from} to {to}")]
    IllegalTransition { id: String, from: State, to: State },
    #[error("cannot finish a journal write: its task failed: {detail}")]
    Writer { detail: String },
}

/// The journal directory. Writes are not serialised: each goes through its own temp file (see
/// `fsutil::replace_file`), so the outbox's fsyncs and the executor's overlap. One entry is
/// never written from two places at once: the executor owns it up to `finished`, the outbox
/// from then on.
#[derive(Debug)]
pub(crate) struct Journal {
    dir: PathBuf,
    /// Durable writes go through spare files (see `fsutil::Spares`).
    spares: Spares,
    /// The entries that still owe a signal, so the outbox reads only those (see `index`).
    undelivered: index::Undelivered,
    /// How many entry files were read, for the tests that check the outbox reads only its own.
    reads: AtomicUsize,
}

impl Journal {
    /// Opens (creating it 0700 if needed) `<state_dir>/journal`.
    pub(crate) fn open(state_dir: &Path) -> Result<Journal, JournalError> {
        let dir = Journal::dir_in(state_dir);
        fsutil::ensure_private_dir(&dir).map_err(|source| JournalError::CreateDir { path: dir.clone(), source })?;
        Ok(Journal {
            spares: Spares::new(&dir),
            dir,
            undelivered: index::Undelivered::default(),
            reads: AtomicUsize::new(0),
        })
    }

    /// Where the journal of `state_dir` lives.
    pub(crate) fn dir_in(state_dir: &Path) -> PathBuf {
        state_dir.join("journal")
    }

    /// The journal directory.
    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    /// The file of `id` (which must be a safe id).
    pub(crate) fn path_of(&self, id: &str) -> Result<PathBuf, JournalError> {
        if !is_safe_id(id) {
            return Err(JournalError::UnsafeId { id: id.to_string() });
        }
        Ok(self.dir.join(format!("{id}.json")))
    }

    /// Every readable entry, oldest first (by `seen_at`, then id). Temp files and other names are
    /// ignored; a corrupt file is renamed to `<id>.json.corrupt` and reported, never fatal.
    pub(crate) fn load_all(&self) -> Result<Vec<Entry>, JournalError> {
        let read_error = |source| JournalError::ReadDir { path: self.dir.clone(), source };
        let mut entries = Vec::new();
        for item in fs::read_dir(&self.dir).map_err(read_error)? {
            let item = item.map_err(read_error)?;
            let file_name = item.file_name();
            // Temp files start with '.', which is_safe_id refuses, so they are skipped here.
            let Some(id) = file_name.to_str().and_then(|name| name.strip_suffix(".json")) else {
                continue;
            };
            if !is_safe_id(id) || !item.file_type().map_err(read_error)?.is_file() {
                continue;
            }
            if let Some(entry) = self.read_entry(id, &item.path())? {
                entries.push(entry);
            }
        }
        entries.sort_by(|left, right| (left.seen_at, &left.id).cmp(&(right.seen_at, &right.id)));
        self.undelivered.record_scan(&entries);
        Ok(entries)
    }

    /// The entries that owe `owed` (see `index`), in id order, read from their files: only these
    /// files are read, once the journal was scanned in this process (a first call scans it).
    pub(crate) fn load_undelivered(&self, owed: Owed) -> Result<Vec<Entry>, JournalError> {
        if !self.undelivered.scanned() {
            self.load_all()?;
        }
        let mut entries = Vec::new();
        for id in self.undelivered.ids(owed) {
            let path = self.path_of(&id)?;
            match self.read_entry(&id, &path)? {
                Some(entry) => {
                    // Corrects the index should the file say otherwise (it never should).
                    self.undelivered.record(&entry);
                    if index::owed_by(&entry) == Some(owed) {
                        entries.push(entry);
                    }
                }
                None => self.undelivered.forget(&id),
            }
        }
        Ok(entries)
    }

    /// How many signals the engine refused for good (entries `finished` with a permanent failure).
    pub(crate) fn refused_count(&self) -> Result<usize, JournalError> {
        if !self.undelivered.scanned() {
            self.load_all()?;
        }
        Ok(self.undelivered.ids(Owed::Refused).len())
    }

    /// Removes the entry of `id` and its run marker, if any (see `retention` for which entries
    /// may go). Not fsync'd: a power loss can only bring the entry back, to be removed again.
    pub(crate) fn remove(&self, id: &str) -> Result<(), JournalError> {
        let entry = self.path_of(id)?;
        let marker = self.dir.join(format!("{id}.run"));
        for path in [entry, marker] {
            match fs::remove_file(&path) {
                Ok(()) => {}
                Err(error) if error.kind() == io::ErrorKind::NotFound => {}
                Err(source) => return Err(JournalError::Remove { path, source }),
            }
        }
        self.undelivered.forget(id);
        Ok(())
    }

    /// How many entry files this journal has read so far.
    #[cfg(test)]
    pub(crate) fn entries_read(&self) -> usize {
        self.reads.load(Ordering::Relaxed)
    }

    /// The entry of `id`, `None` if there is none (or it was corrupt and has been quarantined).
    /// The agent always reads the whole journal; tests look at one entry.
    #[cfg(test)]
    pub(crate) fn load(&self, id: &str) -> Result<Option<Entry>, JournalError> {
        let path = self.path_of(id)?;
        self.read_entry(id, &path)
    }

    /// Replaces the entry's file atomically (temp file, rename) and, from `started` on, durably
    /// (the new content fsync'd in a spare file, exchanged with the entry's, the directory
    /// fsync'd: see `fsutil::Spares`). A seen, waiting or skipped entry carries no obligation
    /// (losing it to a power loss only means deciding again) and is only ever written over another
    /// such entry, so it skips the two fsyncs. A full disk surfaces as an error naming the file,
    /// and the previous version stays intact.
    pub(crate) fn write(&self, entry: &Entry) -> Result<(), JournalError> {
        let path = self.path_of(&entry.id)?;
        let bytes =
            serde_json::to_vec_pretty(entry).map_err(|source| JournalError::Encode { id: entry.id.clone(), source })?;
        let durability = match entry.state {
            State::Seen | State::Waiting | State::Skipped => Durability::Volatile,
            State::Started | State::Finished | State::Signalled => Durability::Durable,
        };
        self.replace(&path, &bytes, durability)?;
        self.undelivered.record(entry);
        Ok(())
    }

    /// The outbox's write of a delivery attempt over a durable `finished` entry: the file is
    /// fsync'd, the directory is not. A power loss may bring back the `finished` version, and the
    /// signal is then sent again with the same `X-Anneal-Signal-Id`, which the receiver drops;
    /// nothing can bring back less than `finished`. Saves one fsync per deployment.
    pub(crate) fn write_delivery(&self, entry: &Entry) -> Result<(), JournalError> {
        let path = self.path_of(&entry.id)?;
        let bytes =
            serde_json::to_vec_pretty(entry).map_err(|source| JournalError::Encode { id: entry.id.clone(), source })?;
        self.replace(&path, &bytes, Durability::DataOnly)?;
        self.undelivered.record(entry);
        Ok(())
    }

    fn replace(&self, path: &Path, bytes: &[u8], durability: Durability) -> Result<(), JournalError> {
        let written = match durability {
            Durability::Durable => self.spares.replace_durably(path, bytes, 0o600),
            Durability::DataOnly | Durability::Volatile => fsutil::replace_file(path, bytes, 0o600, durability),
        };
        written.map_err(|source| JournalError::Write { path: path.to_path_buf(), source })
    }

    fn read_entry(&self, id: &str, path: &Path) -> Result<Option<Entry>, JournalError> {
        self.reads.fetch_add(1, Ordering::Relaxed);
        let bytes = match fs::read(path) {
            Ok(bytes) => bytes,
            Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(source) => {
                return Err(JournalError::Read { path: path.to_path_buf(), source });
            }
        };
        match serde_json::from_slice::<Entry>(&bytes) {
            Ok(entry) if entry.id == id => Ok(Some(entry)),
            Ok(entry) => {
                quarantine(path, &format!("it records deployment {:?}, not {id:?}", entry.id));
                Ok(None)
            }
            Err(error) => {
                quarantine(path, &error.to_string());
                Ok(None)
            }
        }
    }
}

/// Moves a corrupt entry aside so it is kept for inspection but no longer read.
fn quarantine(path: &Path, reason: &str) {
    let mut target = path.as_os_str().to_owned();
    target.push(".corrupt");
    let target = PathBuf::from(target);
    match fs::rename(path, &target) {
        Ok(()) => tracing::error!(
            path = %path.display(),
            moved_to = %target.display(),
            reason,
            "corrupt journal entry quarantined; its deployment is treated as never seen"
        ),
        Err(error) => tracing::error!(
            path = %path.display(),
            reason,
            error = %error,
            "corrupt journal entry could not be quarantined; ignoring it"
        ),
    }
}

#[cfg(test)]
mod tests;
