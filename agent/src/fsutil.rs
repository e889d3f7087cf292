//! Durable file primitives for everything the agent keeps in `state_dir`: private directories
//! (0700) and atomic replacement of a file (write a temp file, fsync, rename, fsync the directory),
//! so a crash or a full disk leaves either the old file or the new one, never a torn one. Files
//! that carry no obligation (a script about to run, a journal entry not yet started) are replaced
//! the same way without the two fsyncs: an agent crash keeps them (the page cache survives it),
//! and a power loss may only lose them, which costs nothing but redoing the step. `Spares` does
//! the durable replacement without creating and freeing an inode each time (the journal's).
//!
//! Nothing here follows a symbolic link it did not expect or writes into a file someone else
//! could have prepared: a new file is created with `O_EXCL | O_NOFOLLOW`, and a directory that
//! already exists is reused only when it is a real directory of the agent's own that nobody else
//! may write (`trust`; see docs/security.md).

mod spares;
mod trust;

use std::fs::{self, DirBuilder, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

#[cfg(test)]
pub(crate) use spares::SPARE_PREFIX;
pub(crate) use spares::Spares;
pub use trust::UnsafePath;
pub(crate) use trust::{check_trusted, check_trusted_path, effective_uid};

/// Numbers this process's temp files (with its pid in the name too).
static NEXT_TEMP: AtomicU64 = AtomicU64::new(0);

/// Creates `dir` (and parents) with mode 0700 if missing, and tightens an existing one to 0700.
/// An existing `dir` (or one that appeared between the look and the creation) must be a real
/// directory owned by the agent's user that nobody else may write; otherwise the error (kind
/// `PermissionDenied`) is an [`UnsafePath`] naming it and the problem.
pub(crate) fn ensure_private_dir(dir: &Path) -> io::Result<()> {
    let metadata = match fs::symlink_metadata(dir) {
        Ok(metadata) => metadata,
        Err(error) if error.kind() == io::ErrorKind::NotFound => {
            DirBuilder::new().recursive(true).mode(0o700).create(dir)?;
            fs::symlink_metadata(dir)?
        }
        Err(error) => return Err(error),
    };
    // The common case, checked with the one stat: it is ours and private already (the hook
    // runner asks before every run).
    let private = metadata.is_dir() && metadata.permissions().mode() & 0o777 == 0o700;
    if private && !metadata.file_type().is_symlink() && metadata.uid() == effective_uid() {
        return Ok(());
    }
    trust::check_own_dir(dir, &metadata)?;
    fs::set_permissions(dir, fs::Permissions::from_mode(0o700))
}

/// Creates the new file `path` for writing with `mode`: never an existing file and never through
/// a symbolic link (`O_EXCL | O_NOFOLLOW`), so a name someone else prepared cannot redirect the
/// write.
pub(crate) fn create_new_file(path: &Path, mode: u32) -> io::Result<File> {
    OpenOptions::new().write(true).create_new(true).custom_flags(nix::libc::O_NOFOLLOW).mode(mode).open(path)
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
    let (temp, mut file) = create_temp(dir, &file_name.to_string_lossy(), mode)?;
    let mut result = write_then_rename(&mut file, &temp, path, contents, mode, durability);
    if result.is_ok() && durability == Durability::Durable {
        result = sync_dir(dir);
    }
    if result.is_err() {
        let _ = fs::remove_file(&temp);
    }
    result
}

/// How many temp names are tried before giving up (a name is taken only by a dead process with
/// this pid, or by someone preparing a trap).
const TEMP_ATTEMPTS: u32 = 8;

/// A new temp file beside `file_name` in `dir`, created exclusively.
fn create_temp(dir: &Path, file_name: &str, mode: u32) -> io::Result<(std::path::PathBuf, File)> {
    let mut attempt = 0;
    loop {
        let serial = NEXT_TEMP.fetch_add(1, Ordering::Relaxed);
        let temp = dir.join(format!(".{file_name}.tmp.{}.{serial}", std::process::id()));
        match create_new_file(&temp, mode) {
            Err(error) if error.kind() == io::ErrorKind::AlreadyExists && attempt + 1 < TEMP_ATTEMPTS => attempt += 1,
            Err(error) => return Err(error),
            Ok(file) => return Ok((temp, file)),
        }
    }
}

fn write_then_rename(
    file: &mut File,
    temp: &Path,
    path: &Path,
    contents: &[u8],
    mode: u32,
    durability: Durability,
) -> io::Result<()> {
    file.set_permissions(fs::Permissions::from_mode(mode))?;
    file.write_all(contents)?;
    if durability != Durability::Volatile {
        file.sync_all()?;
    }
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

    #[test]
    fn an_existing_dir_someone_else_could_write_is_refused_untouched() {
        let root = tempfile::tempdir().unwrap();
        let shared = root.path().join("shared");
        fs::create_dir(&shared).unwrap();
        fs::set_permissions(&shared, fs::Permissions::from_mode(0o777)).unwrap();
        let error = ensure_private_dir(&shared).unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::PermissionDenied);
        assert!(error.to_string().contains("is group- and world-writable (mode 0777)"), "{error}");
        assert_eq!(fs::metadata(&shared).unwrap().permissions().mode() & 0o777, 0o777, "left as found");
        let link = root.path().join("link");
        std::os::unix::fs::symlink(&shared, &link).unwrap();
        let error = ensure_private_dir(&link).unwrap_err();
        assert!(error.to_string().starts_with(&format!("{} is a symbolic link", link.display())), "{error}");
        if effective_uid() == 0 {
            let foreign = root.path().join("foreign");
            fs::create_dir(&foreign).unwrap();
            std::os::unix::fs::chown(&foreign, Some(65534), None).unwrap();
            let error = ensure_private_dir(&foreign).unwrap_err();
            assert!(error.to_string().contains("is owned by uid 65534, not by the agent (uid 0)"), "{error}");
        }
    }

    #[test]
    fn temp_files_never_follow_a_planted_link() {
        let root = tempfile::tempdir().unwrap();
        let victim = root.path().join("victim");
        fs::write(&victim, "precious").unwrap();
        let planted = root.path().join("planted");
        std::os::unix::fs::symlink(&victim, &planted).unwrap();
        assert!(create_new_file(&planted, 0o700).is_err());
        fs::remove_file(&planted).unwrap();
        fs::write(&planted, "someone else's").unwrap();
        assert_eq!(create_new_file(&planted, 0o700).unwrap_err().kind(), io::ErrorKind::AlreadyExists);
        assert_eq!(fs::read_to_string(&victim).unwrap(), "precious");
        assert_eq!(fs::metadata(&victim).unwrap().permissions().mode() & 0o777, 0o644);
    }
}
