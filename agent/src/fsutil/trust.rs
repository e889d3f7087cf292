//! Who could change a file or directory the agent is about to reuse or run. The agent usually runs
//! as root and acts on what it finds on disk (its own state, hooks, local metadata), so anything
//! another local user could write, or swap for a symbolic link, is refused with an error naming
//! the path and the problem (see docs/security.md#refusals-that-protect-the-machine).

use std::fs::{self, Metadata};
use std::io;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// Group- and other-write bits.
const WRITABLE_BY_OTHERS: u32 = 0o022;
/// The sticky bit: in such a directory only an entry's owner may rename or remove it (`/tmp`).
const STICKY: u32 = 0o1000;

/// An existing path the agent refuses to use, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{path} {problem}; refusing to use it")]
pub struct UnsafePath {
    pub path: PathBuf,
    pub problem: String,
}

impl UnsafePath {
    fn new(path: &Path, problem: String) -> UnsafePath {
        UnsafePath { path: path.to_path_buf(), problem }
    }
}

impl From<UnsafePath> for io::Error {
    fn from(unsafe_path: UnsafePath) -> io::Error {
        io::Error::new(io::ErrorKind::PermissionDenied, unsafe_path)
    }
}

/// The agent's effective uid. Read once from `/proc/self/status` (nix's `geteuid` needs its
/// `user` feature, which this crate does not enable); `u32::MAX` (nobody owns that) when unreadable.
pub(crate) fn effective_uid() -> u32 {
    static EUID: OnceLock<u32> = OnceLock::new();
    *EUID.get_or_init(|| read_effective_uid().unwrap_or(u32::MAX))
}

fn read_effective_uid() -> io::Result<u32> {
    let status = fs::read_to_string("/proc/self/status")?;
    status
        .lines()
        .find_map(|line| line.strip_prefix("Uid:"))
        .and_then(|ids| ids.split_whitespace().nth(1))
        .and_then(|euid| euid.parse().ok())
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "no effective uid in /proc/self/status"))
}

/// Checks a directory of the agent's own (`state_dir` and the directories under it) that already
/// exists, from its `symlink_metadata`: a real directory (not a symbolic link), owned by the
/// agent's user, writable by nobody else.
pub(crate) fn check_own_dir(path: &Path, metadata: &Metadata) -> Result<(), UnsafePath> {
    if metadata.file_type().is_symlink() {
        return Err(UnsafePath::new(path, "is a symbolic link (name the directory it points to)".to_string()));
    }
    if !metadata.is_dir() {
        return Err(UnsafePath::new(path, "is not a directory".to_string()));
    }
    let euid = effective_uid();
    if metadata.uid() != euid {
        return Err(UnsafePath::new(
            path,
            format!("is owned by uid {}, not by the agent (uid {euid})", metadata.uid()),
        ));
    }
    match writable_by_others(metadata) {
        Some(problem) => Err(UnsafePath::new(path, problem)),
        None => Ok(()),
    }
}

/// Checks something the agent reads or runs but does not own (a hook, a metadata file or
/// directory): owned by root or by the agent's user, and neither group- nor world-writable.
pub(crate) fn check_trusted(path: &Path, metadata: &Metadata) -> Result<(), UnsafePath> {
    let euid = effective_uid();
    if metadata.uid() != 0 && metadata.uid() != euid {
        let owners = if euid == 0 { "root".to_string() } else { format!("root or the agent (uid {euid})") };
        return Err(UnsafePath::new(path, format!("is owned by uid {}, not by {owners}", metadata.uid())));
    }
    match writable_by_others(metadata) {
        Some(problem) => Err(UnsafePath::new(path, problem)),
        None => Ok(()),
    }
}

/// Checks the file `path` leads to (symbolic links followed) and every directory above the
/// file it resolves to: someone who may write any of them could swap the file. A world-writable
/// directory with the sticky bit (`/tmp`) passes, since nobody else may rename what is in it.
pub(crate) fn check_trusted_path(path: &Path) -> Result<(), UnsafePath> {
    let unreadable = |error: io::Error| UnsafePath::new(path, format!("cannot be checked ({error})"));
    let resolved = fs::canonicalize(path).map_err(unreadable)?;
    let metadata = fs::metadata(&resolved).map_err(unreadable)?;
    check_trusted(&resolved, &metadata).map_err(|problem| via(path, &resolved, problem))?;
    for dir in resolved.ancestors().skip(1) {
        let metadata = fs::metadata(dir).map_err(unreadable)?;
        let sticky = metadata.permissions().mode() & STICKY != 0;
        match check_trusted(dir, &metadata) {
            Err(_) if sticky && (metadata.uid() == 0 || metadata.uid() == effective_uid()) => {}
            Err(problem) => return Err(via(path, dir, problem)),
            Ok(()) => {}
        }
    }
    Ok(())
}

/// Names `path` too when the problem is on what it resolves to.
fn via(path: &Path, resolved: &Path, problem: UnsafePath) -> UnsafePath {
    if path == resolved {
        return problem;
    }
    UnsafePath::new(path, format!("resolves through {}, which {}", resolved.display(), problem.problem))
}

/// "is group-writable (mode 0775)" and the like, `None` when only the owner may write.
fn writable_by_others(metadata: &Metadata) -> Option<String> {
    let mode = metadata.permissions().mode() & 0o7777;
    let who = match mode & WRITABLE_BY_OTHERS {
        0 => return None,
        0o020 => "group-writable",
        0o002 => "world-writable",
        _ => "group- and world-writable",
    };
    Some(format!("is {who} (mode {mode:04o})"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::{chown, symlink};

    fn set_mode(path: &Path, mode: u32) {
        fs::set_permissions(path, fs::Permissions::from_mode(mode)).unwrap();
    }

    #[test]
    fn effective_uid_matches_the_owner_of_what_we_create() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(effective_uid(), fs::metadata(dir.path()).unwrap().uid());
    }

    #[test]
    fn own_dirs_must_be_real_owned_and_private() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("state");
        fs::create_dir(&dir).unwrap();
        set_mode(&dir, 0o755);
        check_own_dir(&dir, &fs::symlink_metadata(&dir).unwrap()).unwrap();
        set_mode(&dir, 0o775);
        let error = check_own_dir(&dir, &fs::symlink_metadata(&dir).unwrap()).unwrap_err();
        assert_eq!(error.to_string(), format!("{} is group-writable (mode 0775); refusing to use it", dir.display()));
        let link = root.path().join("link");
        symlink(&dir, &link).unwrap();
        let error = check_own_dir(&link, &fs::symlink_metadata(&link).unwrap()).unwrap_err();
        assert!(error.problem.contains("symbolic link"), "{error}");
        if effective_uid() == 0 {
            set_mode(&dir, 0o700);
            chown(&dir, Some(65534), None).unwrap();
            let error = check_own_dir(&dir, &fs::symlink_metadata(&dir).unwrap()).unwrap_err();
            assert_eq!(error.problem, "is owned by uid 65534, not by the agent (uid 0)");
        }
    }

    #[test]
    fn trusted_paths_are_checked_through_links_and_parents() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("hooks");
        fs::create_dir(&dir).unwrap();
        set_mode(&dir, 0o755);
        let hook = dir.join("puppet");
        fs::write(&hook, "#!/bin/sh\n").unwrap();
        set_mode(&hook, 0o755);
        check_trusted_path(&hook).unwrap();
        set_mode(&hook, 0o757);
        let error = check_trusted_path(&hook).unwrap_err();
        assert_eq!(error.problem, "is world-writable (mode 0757)");
        set_mode(&hook, 0o755);
        set_mode(&dir, 0o775);
        let error = check_trusted_path(&hook).unwrap_err();
        assert!(error.problem.contains(&format!("resolves through {}", dir.display())), "{error}");
        assert!(error.problem.ends_with("is group-writable (mode 0775)"), "{error}");
        set_mode(&dir, 0o1777);
        check_trusted_path(&hook).unwrap();
        let link = root.path().join("link");
        symlink(&hook, &link).unwrap();
        set_mode(&hook, 0o775);
        let error = check_trusted_path(&link).unwrap_err();
        assert_eq!(error.path, link);
        assert!(error.problem.contains(&hook.display().to_string()), "{error}");
    }
}
