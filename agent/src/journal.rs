//! The durable journal: one JSON file per derived deployment id in `<state_dir>/journal/`
//! (directory 0700, files 0600), each replaced atomically and, from `started` on, fsync'd before
//! the step it records is acted on, so a restarted agent knows exactly what ran, what finished and
//! what was signalled (see docs/journal.md). Beside a running deployment's entry, `<id>.run` names
//! the hook's process (see `orphan`). This module stores and loads entries; it does not decide what
//! to run or when to deliver.

mod entry;

use std::fmt;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use anneal_protocol::deployment::is_safe_id;
use serde::{Deserialize, Serialize};

pub(crate) use entry::Entry;

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
}

impl Journal {
    /// Opens (creating it 0700 if needed) `<state_dir>/journal`.
    pub(crate) fn open(state_dir: &Path) -> Result<Journal, JournalError> {
        let dir = Journal::dir_in(state_dir);
        fsutil::ensure_private_dir(&dir).map_err(|source| JournalError::CreateDir { path: dir.clone(), source })?;
        Ok(Journal { spares: Spares::new(&dir), dir })
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
        Ok(entries)
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
        self.replace(&path, &bytes, durability)
    }

    /// The outbox's write of a delivery attempt over a durable `finished` entry: the file is
    /// fsync'd, the directory is not. A power loss may bring back the `finished` version, and the
    /// signal is then sent again with the same `X-Anneal-Signal-Id`, which the receiver drops;
    /// nothing can bring back less than `finished`. Saves one fsync per deployment.
    pub(crate) fn write_delivery(&self, entry: &Entry) -> Result<(), JournalError> {
        let path = self.path_of(&entry.id)?;
        let bytes =
            serde_json::to_vec_pretty(entry).map_err(|source| JournalError::Encode { id: entry.id.clone(), source })?;
        self.replace(&path, &bytes, Durability::DataOnly)
    }

    fn replace(&self, path: &Path, bytes: &[u8], durability: Durability) -> Result<(), JournalError> {
        let written = match durability {
            Durability::Durable => self.spares.replace_durably(path, bytes, 0o600),
            Durability::DataOnly | Durability::Volatile => fsutil::replace_file(path, bytes, 0o600, durability),
        };
        written.map_err(|source| JournalError::Write { path: path.to_path_buf(), source })
    }

    fn read_entry(&self, id: &str, path: &Path) -> Result<Option<Entry>, JournalError> {
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
mod tests {
    use crate::fsutil::sorted_names as names;
    use std::os::unix::fs::PermissionsExt;

    use anneal_protocol::{Deployment, HookResult};
    use serde_json::json;

    use super::*;

    fn deployment(id: &str) -> Deployment {
        serde_json::from_value(json!({"id": id, "name": format!("n-{id}"), "group": "script", "config": "x"})).unwrap()
    }

    #[test]
    fn open_creates_a_private_directory() {
        let state = tempfile::tempdir().unwrap();
        let journal = Journal::open(&state.path().join("nested")).unwrap();
        assert_eq!(journal.dir(), state.path().join("nested/journal"));
        assert_eq!(fs::metadata(journal.dir()).unwrap().permissions().mode() & 0o777, 0o700);
        assert!(journal.load_all().unwrap().is_empty());
    }

    #[test]
    fn write_then_load_round_trips_atomically() {
        let state = tempfile::tempdir().unwrap();
        let journal = Journal::open(state.path()).unwrap();
        let mut entry = Entry::seen(&deployment("abc-1"), 5);
        journal.write(&entry).unwrap();
        entry.started(6).unwrap();
        entry.finished(HookResult::from_process("ok", "", 0), 7).unwrap();
        journal.write(&entry).unwrap();
        assert_eq!(journal.load("abc-1").unwrap(), Some(entry));
        let path = journal.dir().join("abc-1.json");
        assert_eq!(fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
        assert_eq!(journal.load("other").unwrap(), None);
        // The durable write left its spare file (the previous version's inode) for the next one,
        // and nothing else; the spare goes with the journal.
        let listed = names(journal.dir());
        assert_eq!(listed.len(), 2, "{listed:?}");
        assert!(listed[0].starts_with(fsutil::SPARE_PREFIX) && listed[1] == "abc-1.json", "{listed:?}");
        let dir = journal.dir().to_path_buf();
        drop(journal);
        assert_eq!(names(&dir), ["abc-1.json"], "no temp or spare file is left behind");
    }

    #[test]
    fn unsafe_ids_are_refused() {
        let state = tempfile::tempdir().unwrap();
        let journal = Journal::open(state.path()).unwrap();
        assert!(matches!(journal.load("../etc/passwd"), Err(JournalError::UnsafeId { .. })));
        let mut entry = Entry::seen(&deployment("ok"), 0);
        entry.id = "a/b".into();
        assert!(matches!(journal.write(&entry), Err(JournalError::UnsafeId { .. })));
    }

    #[test]
    fn load_all_orders_skips_temp_files_and_quarantines_corrupt_ones() {
        let state = tempfile::tempdir().unwrap();
        let journal = Journal::open(state.path()).unwrap();
        journal.write(&Entry::seen(&deployment("late"), 20)).unwrap();
        journal.write(&Entry::seen(&deployment("early"), 10)).unwrap();
        let dir = journal.dir();
        fs::write(dir.join(".early.json.tmp.99"), "{half").unwrap();
        fs::write(dir.join("notes.txt"), "hello").unwrap();
        fs::write(dir.join("broken.json"), "{not json").unwrap();
        let misfiled = serde_json::to_vec(&Entry::seen(&deployment("someone-else"), 1)).unwrap();
        fs::write(dir.join("misfiled.json"), misfiled).unwrap();

        let ids: Vec<String> = journal.load_all().unwrap().into_iter().map(|entry| entry.id).collect();
        assert_eq!(ids, ["early", "late"]);
        assert_eq!(
            names(dir),
            [
                ".early.json.tmp.99",
                "broken.json.corrupt",
                "early.json",
                "late.json",
                "misfiled.json.corrupt",
                "notes.txt"
            ]
        );
        assert_eq!(journal.load("broken").unwrap(), None, "a quarantined entry is gone");
    }

    #[test]
    fn load_quarantines_a_corrupt_entry() {
        let state = tempfile::tempdir().unwrap();
        let journal = Journal::open(state.path()).unwrap();
        fs::write(journal.dir().join("x.json"), "[]").unwrap();
        assert_eq!(journal.load("x").unwrap(), None);
        assert!(journal.dir().join("x.json.corrupt").exists());
    }

    #[test]
    fn write_failure_names_the_file_and_keeps_nothing_half_written() {
        let state = tempfile::tempdir().unwrap();
        let journal = Journal::open(state.path()).unwrap();
        // Replacing the directory with a file makes every write fail (root ignores permissions).
        fs::remove_dir(journal.dir()).unwrap();
        fs::write(journal.dir(), "").unwrap();
        let error = journal.write(&Entry::seen(&deployment("d9"), 0)).unwrap_err();
        assert!(matches!(error, JournalError::Write { .. }));
        assert!(error.to_string().contains("journal/d9.json"), "{error}");
    }

    #[test]
    fn state_names() {
        assert_eq!(State::Signalled.to_string(), "signalled");
        assert_eq!(serde_json::to_value(State::Waiting).unwrap(), "waiting");
    }
}
