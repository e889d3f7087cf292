//! Durable file primitives for everything the agent keeps in `state_dir`: private directories
//! (0700) and atomic replacement of a file (write a temp file, fsync, rename, fsync the directory),
//! so a crash or a full disk leaves either the old file or the new one, never a torn one. Files
//! that carry no obligation (a script about to run, a journal entry not yet started) are replaced
//! the same way without the two fsyncs: an agent crash keeps them (the page cache survives it),
//! and a power loss may only lose them, which costs nothing but redoing the step. `Spares` does
//! the durable replacement without creating and freeing an inode each time (the journal's).

mod spares;

use std::fs::{self, DirBuilder, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

#[cfg(test)]
pub(crate) use spares::SPARE_PREFIX;
pub(crate) use spares::Spares;

/// Numbers this process's temp files (with its pid in the name too).
static NEXT_TEMP: AtomicU64 = AtomicU64::new(0);

/// Creates `dir` (and parents) with mode 0700 if missing, and tightens an existing one to 0700.
pub(crate) fn ensure_private_dir(dir: &Path) -> io::Result<()> {
    // The common case, checked with one stat: it exists and is private already (the hook runner
    // asks before every run).
    if fs::metadata(dir).is_ok_and(|metadata| metadata.is_dir() && metadata.permissions().mode() & 0o777 == 0o700) {
        return Ok(());
    }
    DirBuilder::new().recursive(true).mode(0o700).create(dir)?;
    let metadata = fs::metadata(dir)?;
    if metadata.permissions().mode() & 0o777 != 0o700 {
        fs::set_permissions(dir, fs::Permissions::from_mode(0o700))?;
    }
    Ok(())
}

/// Replaces `path` with `contents` atomically and durably; the file gets `mode`.
///
/// The temp file lives in the same directory so the rename never crosses a file system. On any
/// error the temp file is removed and `path` is untouched.
pub(crate) fn write_atomic(path: &Path, contents: &[u8], mode: u32) -> io::Result<()> {
    replace_file(path, contents, mode, Durability::Durable)
}

/// Whether a replacement must survive a power loss.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Durability {
    /// fsync the file before the rename and the directory after it.
    Durable,
    /// fsync the file before the rename, not the directory after it: a power loss keeps either
    /// the previous version or this one, both intact. For a step whose loss only repeats it.
    DataOnly,
    /// Atomic against an agent crash, not against a power loss: only for files whose loss is
    /// harmless (see the module comment).
    Volatile,
}

/// Replaces `path` with `contents` atomically (temp file in the same directory, then rename);
/// the file gets `mode`. On any error the temp file is removed and `path` is untouched. Every
/// call has its own temp file, so concurrent replacements (of different files, or of one file:
/// the last rename wins) never write into each other's.
pub(crate) fn replace_file(path: &Path, contents: &[u8], mode: u32, durability: Durability) -> io::Result<()> {
    let dir = path.parent().filter(|dir| !dir.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let file_name = path.file_name().ok_or_else(|| io::Error::other("path has no file name"))?;
    let serial = NEXT_TEMP.fetch_add(1, Ordering::Relaxed);
    let temp = dir.join(format!(".{}.tmp.{}.{serial}", file_name.to_string_lossy(), std::process::id()));
    let mut result = write_then_rename(&temp, path, contents, mode, durability);
    if result.is_ok() && durability == Durability::Durable {
        result = sync_dir(dir);
    }
    if result.is_err() {
        let _ = fs::remove_file(&temp);
    }
    result
}

fn write_then_rename(temp: &Path, path: &Path, contents: &[u8], mode: u32, durability: Durability) -> io::Result<()> {
    let mut file = OpenOptions::new().write(true).create(true).truncate(true).mode(mode).open(temp)?;
    file.set_permissions(fs::Permissions::from_mode(mode))?;
    file.write_all(contents)?;
    if durability != Durability::Volatile {
        file.sync_all()?;
    }
    drop(file);
    fs::rename(temp, path)
}

/// fsyncs a directory so a rename inside it survives a power loss.
pub(crate) fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

/// The names in `dir`, sorted (tests check what a write leaves behind).
#[cfg(test)]
pub(crate) fn sorted_names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> =
        fs::read_dir(dir).unwrap().map(|item| item.unwrap().file_name().into_string().unwrap()).collect();
    names.sort();
    names
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn atomic_write_replaces_and_sets_mode() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.json");
        write_atomic(&path, b"one", 0o600).unwrap();
        write_atomic(&path, b"two", 0o600).unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"two");
        assert_eq!(fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
        let leftovers: Vec<_> = fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(leftovers.len(), 1, "no temp file left behind");
    }

    #[test]
    fn failed_write_leaves_the_old_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("missing-dir").join("state.json");
        assert!(write_atomic(&path, b"x", 0o600).is_err());
        assert!(!path.exists());
    }

    #[test]
    fn private_dir_is_tightened() {
        let dir = tempfile::tempdir().unwrap();
        let state = dir.path().join("a/b");
        fs::create_dir_all(&state).unwrap();
        fs::set_permissions(&state, fs::Permissions::from_mode(0o755)).unwrap();
        ensure_private_dir(&state).unwrap();
        assert_eq!(fs::metadata(&state).unwrap().permissions().mode() & 0o777, 0o700);
    }
}
