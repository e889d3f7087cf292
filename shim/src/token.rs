//! Bearer tokens: 256 random bits as hex, stored only as their SHA-256 (hex), compared in
//! constant time. Server tokens, signal tokens, wait-condition handle tokens and the admin token
//! all follow these rules. Also the checks that the files holding secrets (`admin.token`,
//! `shim.key`, the database directory) are private, and the admin token's minimum length.
//! See docs/security.md.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use rand::TryRngCore;
use sha2::{Digest, Sha256};

/// A fresh token: 32 random bytes from the OS generator, as 64 hex characters. Fails only when
/// the OS cannot give randomness, in which case no token must be made at all.
pub fn new_token() -> std::io::Result<String> {
    let mut bytes = [0u8; 32];
    rand::rngs::OsRng.try_fill_bytes(&mut bytes).map_err(|error| std::io::Error::other(error.to_string()))?;
    Ok(hex(&bytes))
}

/// What the store keeps instead of the token.
pub fn hash_token(token: &str) -> String {
    hex(&Sha256::digest(token.as_bytes()))
}

/// Whether `token` has the shape of one of ours (cheap pre-check before any lookup).
pub fn is_well_formed(token: &str) -> bool {
    token.len() == 64 && token.bytes().all(|byte| byte.is_ascii_hexdigit())
}

/// Equality whose time does not depend on where the inputs differ.
pub fn constant_time_eq(left: &[u8], right: &[u8]) -> bool {
    if left.len() != right.len() {
        return false;
    }
    left.iter().zip(right).fold(0u8, |difference, (a, b)| difference | (a ^ b)) == 0
}

/// Lower-case hex of `bytes` (hashes, tokens and ids are printed this way on every signal and
/// every publication, so without a `format!` per byte).
pub(crate) fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut text = String::with_capacity(bytes.len() * 2);
    for byte in bytes {
        text.push(char::from(DIGITS[usize::from(byte >> 4)]));
        text.push(char::from(DIGITS[usize::from(byte & 0x0f)]));
    }
    text
}

/// The shortest admin token `serve` accepts from `ANNEAL_TOKEN` (a generated one has 64).
pub const MIN_ADMIN_TOKEN_LEN: usize = 32;

/// A file or directory holding secrets that is not private to the user running the shim.
#[derive(Debug, thiserror::Error)]
pub enum PrivateFileError {
    #[error("cannot inspect {path}")]
    Inspect {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("group or others may {access} {path} (mode {mode:03o}); run `chmod {fix} {path}`")]
    Shared { path: PathBuf, mode: u32, access: &'static str, fix: &'static str },
    #[error("{path} is owned by uid {owner}, not by uid {uid} that runs the shim; run `chown {uid} {path}`")]
    Owner { path: PathBuf, owner: u32, uid: u32 },
    #[error(
        "ANNEAL_TOKEN is {length} characters long; the admin token needs at least {MIN_ADMIN_TOKEN_LEN} (unset it to have a random one made in admin.token)"
    )]
    ShortAdminToken { length: usize },
    #[error("cannot read the metrics token file {path}")]
    ReadMetricsToken {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("the metrics token in {path} is {length} characters long; it needs at least {MIN_ADMIN_TOKEN_LEN}")]
    ShortMetricsToken { path: PathBuf, length: usize },
}

/// Refuses an existing secret file (`admin.token`, `shim.key`, the database) that group or
/// others may read or write: whoever reads one holds the admin API, can forge every signal URL
/// or reads hidden parameters. A missing file is fine (it is created 0600).
pub fn check_private_file(path: &Path) -> Result<(), PrivateFileError> {
    check_private(path, 0o066, "read or write", "600")
}

/// Refuses an existing database directory that group or others may read or write (writing
/// lets them replace the files above; reading lists them and the database's journal files) or
/// that another user owns; a new one is created 0700.
pub fn check_private_directory(path: &Path) -> Result<(), PrivateFileError> {
    check_private(path, 0o077, "read or write", "700")
}

fn check_private(path: &Path, forbidden: u32, access: &'static str, fix: &'static str) -> Result<(), PrivateFileError> {
    let metadata = match std::fs::metadata(path) {
        Ok(metadata) => metadata,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(source) => return Err(PrivateFileError::Inspect { path: path.to_path_buf(), source }),
    };
    let mode = metadata.permissions().mode() & 0o777;
    if mode & forbidden != 0 {
        return Err(PrivateFileError::Shared { path: path.to_path_buf(), mode, access, fix });
    }
    let uid = nix::unistd::geteuid().as_raw();
    if metadata.uid() != uid {
        return Err(PrivateFileError::Owner { path: path.to_path_buf(), owner: metadata.uid(), uid });
    }
    Ok(())
}

/// Refuses an `ANNEAL_TOKEN` too short to resist guessing.
pub fn check_admin_token_length(token: &str) -> Result<(), PrivateFileError> {
    let length = token.chars().count();
    if length < MIN_ADMIN_TOKEN_LEN {
        return Err(PrivateFileError::ShortAdminToken { length });
    }
    Ok(())
}

/// The token in `--metrics-token-file` (surrounding whitespace dropped): a file private to the
/// shim's user, like the admin token's, holding at least 32 characters.
pub fn read_metrics_token(path: &Path) -> Result<String, PrivateFileError> {
    check_private_file(path)?;
    let text = std::fs::read_to_string(path)
        .map_err(|source| PrivateFileError::ReadMetricsToken { path: path.to_path_buf(), source })?;
    let token = text.trim();
    let length = token.chars().count();
    if length < MIN_ADMIN_TOKEN_LEN {
        return Err(PrivateFileError::ShortMetricsToken { path: path.to_path_buf(), length });
    }
    Ok(token.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_random_well_formed_and_hashed() {
        let first = new_token().unwrap();
        let second = new_token().unwrap();
        assert_ne!(first, second);
        assert!(is_well_formed(&first));
        assert!(!is_well_formed("short"));
        assert!(!is_well_formed(&"g".repeat(64)));
        let hash = hash_token(&first);
        assert_eq!(hash.len(), 64);
        assert_ne!(hash, first);
        assert_eq!(hash, hash_token(&first));
    }

    #[test]
    fn hex_and_hashes_print_as_stored_by_earlier_versions() {
        assert_eq!(hex(&[0x00, 0x0f, 0xa5, 0xff]), "000fa5ff");
        // Stored token hashes must not change: SHA-256("abc"), lower-case hex.
        assert_eq!(hash_token("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    }

    #[test]
    fn constant_time_comparison() {
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"abc", b"abd"));
        assert!(!constant_time_eq(b"abc", b"ab"));
    }

    #[test]
    fn secret_files_must_be_private() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("admin.token");
        assert!(check_private_file(&file).is_ok(), "a missing file is created private later");
        std::fs::write(&file, "x").unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
        check_private_file(&file).unwrap();
        for mode in [0o644, 0o640, 0o604, 0o620] {
            std::fs::set_permissions(&file, std::fs::Permissions::from_mode(mode)).unwrap();
            let message = check_private_file(&file).unwrap_err().to_string();
            assert!(message.contains(&file.display().to_string()) && message.contains("chmod 600"), "{message}");
        }
        for mode in [0o775, 0o757, 0o755, 0o750, 0o705] {
            std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(mode)).unwrap();
            let message = check_private_directory(dir.path()).unwrap_err().to_string();
            assert!(message.contains("chmod 700"), "{message}");
        }
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
        check_private_directory(dir.path()).unwrap();
    }

    #[test]
    fn short_admin_tokens_are_refused() {
        let message = check_admin_token_length("short").unwrap_err().to_string();
        assert!(message.contains("ANNEAL_TOKEN") && message.contains("32"), "{message}");
        check_admin_token_length(&"a".repeat(32)).unwrap();
    }

    #[test]
    fn a_metrics_token_file_must_be_private_and_long_enough() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("metrics.token");
        std::fs::write(&path, format!("  {}\n", "m".repeat(40))).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert_eq!(read_metrics_token(&path).unwrap(), "m".repeat(40));
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        let shared = read_metrics_token(&path).unwrap_err().to_string();
        assert!(shared.contains("chmod 600"), "{shared}");
        std::fs::write(&path, "short\n").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        let short = read_metrics_token(&path).unwrap_err().to_string();
        assert!(short.contains("5 characters long") && short.contains("at least 32"), "{short}");
        let missing = read_metrics_token(&dir.path().join("nope")).unwrap_err().to_string();
        assert!(missing.contains("cannot read the metrics token file"), "{missing}");
    }
}
