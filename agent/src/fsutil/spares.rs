//! Durable replacement without a new inode per write. The classic temp-file-and-rename creates
//! an inode for the temp file and frees the one it replaces, every time. On ext4 without a
//! journal that is the expensive part of a durable write: the fsync of a fresh inode also writes
//! its bitmap and group descriptor, and each creation scans past every inode freed in the last
//! few seconds (`recently_deleted`), so the cost grows with the churn. Here the new content goes
//! into a spare file that already exists (overwritten in place, fsync'd), the spare and the
//! target swap names in one `renameat2(RENAME_EXCHANGE)`, and the directory is fsync'd; the spare
//! name now holds the previous inode, which serves the next write.
//!
//! Safety rests on one rule: a displaced inode is reused only after the directory fsync that
//! made the exchange durable. Before it, a power loss could bring back the old name for that
//! inode, and overwriting it would put another file's content under that name. That is why only
//! durable writes (which fsync the directory anyway) use spares. Anything unusual (no spare, no
//! exchange support, the target missing, an error) takes the classic path or consumes the spare,
//! never anything weaker.

use std::fs::{self, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};

use super::{Durability, create_new_file, replace_file, sync_dir};

/// Spare files kept per directory: enough for the writes that run at once (the executor and a
/// few delivery threads), few enough that an idle agent keeps next to nothing.
const MAX_SPARES: usize = 4;
/// Spare file names start with this (a dot, so the journal never reads them as entries).
pub(crate) const SPARE_PREFIX: &str = ".spare.";

/// Numbers spare files across the process (every pool's names differ, even for one directory).
static NEXT_SPARE: AtomicU64 = AtomicU64::new(0);

/// The spare files of one directory.
#[derive(Debug)]
pub(crate) struct Spares {
    dir: PathBuf,
    ready: Mutex<Vec<PathBuf>>,
    /// Set when the file system refused an exchange: from then on, the classic path only.
    unsupported: AtomicBool,
}

impl Spares {
    /// An empty pool for `dir`; spares are made as writes need them.
    pub(crate) fn new(dir: &Path) -> Spares {
        Spares { dir: dir.to_path_buf(), ready: Mutex::new(Vec::new()), unsupported: AtomicBool::new(false) }
    }

    /// Removes spare files another process left in `dir` (it died holding them); only for the
    /// one process that writes the directory, before it writes there.
    pub(crate) fn remove_stale(dir: &Path) {
        let Ok(items) = fs::read_dir(dir) else { return };
        let own = format!("{SPARE_PREFIX}{}.", std::process::id());
        for item in items.flatten() {
            let name = item.file_name();
            let Some(name) = name.to_str() else { continue };
            if name.starts_with(SPARE_PREFIX) && !name.starts_with(&own) {
                let _ = fs::remove_file(item.path());
            }
        }
    }

    /// Replaces `path` (in this pool's directory) with `contents` atomically and durably, like
    /// `replace_file(.., Durability::Durable)`: the content is fsync'd before it takes the name,
    /// and the directory after. On error `path` keeps its old content or the new one, whole.
    pub(crate) fn replace_durably(&self, path: &Path, contents: &[u8], mode: u32) -> io::Result<()> {
        if self.unsupported.load(Ordering::Relaxed) || path.parent() != Some(self.dir.as_path()) {
            return replace_file(path, contents, mode, Durability::Durable);
        }
        let (spare, fresh) = self.take();
        match write_synced(&spare, fresh, contents, mode).and_then(|()| self.swap_in(&spare, path)) {
            Ok(Swapped::Exchanged) => {
                self.put_back(spare);
                Ok(())
            }
            Ok(Swapped::Consumed) => Ok(()),
            Err(error) => {
                // The spare's name or content is uncertain now; it is not reused.
                let _ = fs::remove_file(&spare);
                Err(error)
            }
        }
    }

    /// A spare from the pool, or a new name (`true`: the file is to be created).
    fn take(&self) -> (PathBuf, bool) {
        let pooled = self.ready.lock().unwrap_or_else(PoisonError::into_inner).pop();
        match pooled {
            Some(spare) => (spare, false),
            None => {
                let serial = NEXT_SPARE.fetch_add(1, Ordering::Relaxed);
                (self.dir.join(format!("{SPARE_PREFIX}{}.{serial}", std::process::id())), true)
            }
        }
    }

    fn put_back(&self, spare: PathBuf) {
        let mut ready = self.ready.lock().unwrap_or_else(PoisonError::into_inner);
        if ready.len() < MAX_SPARES {
            ready.push(spare);
        } else {
            drop(ready);
            let _ = fs::remove_file(&spare);
        }
    }

    /// Gives the written `spare` the name `path` and fsyncs the directory.
    fn swap_in(&self, spare: &Path, path: &Path) -> io::Result<Swapped> {
        let swapped = match exchange(spare, path) {
            Ok(()) => Swapped::Exchanged,
            Err(error) => {
                if error.kind() != io::ErrorKind::NotFound {
                    // EINVAL, EOPNOTSUPP or ENOSYS: this file system (or kernel) cannot exchange,
                    // and will not later; the classic path from now on.
                    self.unsupported.store(true, Ordering::Relaxed);
                    tracing::debug!(dir = %self.dir.display(), %error, "no RENAME_EXCHANGE here; using temp files");
                }
                // The target does not exist (or cannot be exchanged with): the spare becomes it.
                fs::rename(spare, path)?;
                Swapped::Consumed
            }
        };
        sync_dir(&self.dir)?;
        Ok(swapped)
    }
}

/// Writes `contents` into `spare` (created exclusively when `fresh`, else the pooled file this
/// pool made) and fsyncs it. Never through a symbolic link.
fn write_synced(spare: &Path, fresh: bool, contents: &[u8], mode: u32) -> io::Result<()> {
    // No O_TRUNC: truncating to zero makes ext4 flush the file at close (auto_da_alloc), and a
    // longer old content is cut below.
    let pooled =
        if fresh { None } else { Some(OpenOptions::new().write(true).custom_flags(nix::libc::O_NOFOLLOW).open(spare)) };
    let mut file = match pooled {
        Some(Ok(file)) => file,
        // Fresh, or a pooled spare that is gone: made anew.
        Some(Err(error)) if error.kind() != io::ErrorKind::NotFound => return Err(error),
        _ => create_new_file(spare, mode)?,
    };
    file.set_permissions(fs::Permissions::from_mode(mode))?;
    file.write_all(contents)?;
    file.set_len(contents.len() as u64)?;
    file.sync_all()
}

impl Drop for Spares {
    /// A spare holds an old version of some file; none is left behind by a process that ends.
    fn drop(&mut self) {
        for spare in self.ready.get_mut().unwrap_or_else(PoisonError::into_inner).drain(..) {
            let _ = fs::remove_file(spare);
        }
    }
}

/// What became of the spare.
enum Swapped {
    /// It now holds the target's previous inode, reusable once the directory fsync returned.
    Exchanged,
    /// It became the target (which did not exist); a new spare is made next time.
    Consumed,
}

/// Swaps the names `a` and `b` atomically.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn exchange(a: &Path, b: &Path) -> io::Result<()> {
    use nix::fcntl::{AT_FDCWD, RenameFlags, renameat2};
    renameat2(AT_FDCWD, a, AT_FDCWD, b, RenameFlags::RENAME_EXCHANGE).map_err(io::Error::from)
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn exchange(_a: &Path, _b: &Path) -> io::Result<()> {
    Err(io::Error::from(io::ErrorKind::Unsupported))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fsutil::sorted_names as names;

    #[test]
    fn replaces_in_place_and_recycles_one_spare() {
        let dir = tempfile::tempdir().unwrap();
        let spares = Spares::new(dir.path());
        let path = dir.path().join("entry.json");
        spares.replace_durably(&path, b"first, the longest version", 0o600).unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"first, the longest version");
        for text in ["second", "third version"] {
            spares.replace_durably(&path, text.as_bytes(), 0o600).unwrap();
            assert_eq!(fs::read_to_string(&path).unwrap(), text, "a longer old content is cut");
        }
        assert_eq!(fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
        let listed = names(dir.path());
        assert_eq!(listed.len(), 2, "the entry and one spare: {listed:?}");
        assert!(listed[0].starts_with(SPARE_PREFIX));
        drop(spares);
        assert_eq!(names(dir.path()), ["entry.json"], "spares go with the pool");
    }

    #[test]
    fn a_missing_target_consumes_the_spare() {
        let dir = tempfile::tempdir().unwrap();
        let spares = Spares::new(dir.path());
        spares.replace_durably(&dir.path().join("a"), b"x", 0o600).unwrap();
        spares.replace_durably(&dir.path().join("b"), b"y", 0o600).unwrap();
        assert_eq!(names(dir.path()), ["a", "b"]);
    }

    #[test]
    fn a_failed_write_leaves_the_old_file_and_no_spare() {
        let dir = tempfile::tempdir().unwrap();
        let spares = Spares::new(dir.path());
        let path = dir.path().join("entry.json");
        spares.replace_durably(&path, b"old", 0o600).unwrap();
        spares.replace_durably(&path, b"newer", 0o600).unwrap();
        let spare = spares.ready.lock().unwrap()[0].clone();
        // A directory where the spare should be makes the write fail after the take.
        fs::remove_file(&spare).unwrap();
        fs::create_dir(&spare).unwrap();
        assert!(spares.replace_durably(&path, b"never", 0o600).is_err());
        assert_eq!(fs::read(&path).unwrap(), b"newer");
        fs::remove_dir(&spare).unwrap();
        assert_eq!(names(dir.path()), ["entry.json"]);
    }

    #[test]
    fn stale_spares_are_removed() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join(format!("{SPARE_PREFIX}1.0")), "old entry").unwrap();
        fs::write(dir.path().join("keep.json"), "{}").unwrap();
        Spares::remove_stale(dir.path());
        assert_eq!(names(dir.path()), ["keep.json"]);
    }
}
