//! The per-source cache of the last good document: `<state_dir>/sources/<sanitised name>.json`
//! (0600 in a 0700 directory, replaced atomically), with the HTTP validators so the first request
//! after a restart can be answered with 304, and so a source that is down at boot still has its
//! last document. A cache is only an optimisation: a corrupt or foreign one is logged and ignored.

use std::fs;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{SourceError, Validators};
use crate::fsutil::{ensure_private_dir, write_atomic};

/// One cache file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct CachedDocument {
    /// The source's name, for people reading the file.
    pub(crate) source: String,
    /// `Source::identity()`: a cache written for another URL or path is not used.
    pub(crate) identity: String,
    pub(crate) document: Value,
    #[serde(default)]
    pub(crate) validators: Validators,
    /// When the document was fetched, in unix milliseconds.
    pub(crate) fetched_at: u64,
}

/// The cache directory.
#[derive(Debug, Clone)]
pub(crate) struct Cache {
    dir: PathBuf,
}

impl Cache {
    /// Creates `<state_dir>/sources` (0700) if needed.
    pub(crate) fn open(state_dir: &Path) -> Result<Cache, SourceError> {
        let dir = state_dir.join("sources");
        ensure_private_dir(&dir).map_err(|source| SourceError::Cache { path: dir.clone(), source })?;
        Ok(Cache { dir })
    }

    #[cfg(test)]
    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    pub(crate) fn path_for(&self, source_name: &str) -> PathBuf {
        self.dir.join(format!("{}.json", sanitise(source_name)))
    }

    /// The cached document of `source_name` if there is a usable one for `identity`.
    pub(crate) fn load(&self, source_name: &str, identity: &str) -> Option<CachedDocument> {
        let path = self.path_for(source_name);
        let bytes = match fs::read(&path) {
            Ok(bytes) => bytes,
            Err(error) if error.kind() == ErrorKind::NotFound => return None,
            Err(error) => {
                tracing::warn!(path = %path.display(), %error, "cannot read the source cache; ignoring it");
                return None;
            }
        };
        let cached = match serde_json::from_slice::<CachedDocument>(&bytes) {
            Ok(cached) if cached.document.is_object() => cached,
            Ok(_) => {
                tracing::warn!(path = %path.display(), "cached document is not an object; ignoring the cache");
                return None;
            }
            Err(error) => {
                tracing::warn!(path = %path.display(), %error, "source cache is corrupt; ignoring it");
                return None;
            }
        };
        if cached.identity != identity {
            tracing::info!(path = %path.display(), "source cache was written for another URL or path; ignoring it");
            return None;
        }
        Some(cached)
    }

    /// Replaces the cache file of `cached.source` atomically.
    pub(crate) fn store(&self, cached: &CachedDocument) -> Result<(), SourceError> {
        let path = self.path_for(&cached.source);
        let bytes = serde_json::to_vec(cached)
            .map_err(|error| SourceError::Cache { path: path.clone(), source: std::io::Error::other(error) })?;
        write_atomic(&path, &bytes, 0o600).map_err(|source| SourceError::Cache { path, source })
    }
}

/// A source name as a file name: runs of characters outside `[A-Za-z0-9_-]` become one `-`
/// (`source[0] http` -> `source-0-http`).
pub(crate) fn sanitise(source_name: &str) -> String {
    let mut sanitised = String::with_capacity(source_name.len());
    for character in source_name.chars() {
        if character.is_ascii_alphanumeric() || character == '_' || character == '-' {
            sanitised.push(character);
        } else if !sanitised.ends_with('-') {
            sanitised.push('-');
        }
    }
    let trimmed = sanitised.trim_matches('-');
    if trimmed.is_empty() { "source".to_string() } else { trimmed.to_string() }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::os::unix::fs::PermissionsExt;

    fn entry(name: &str) -> CachedDocument {
        CachedDocument {
            source: name.to_string(),
            identity: "id-1".to_string(),
            document: json!({"deployments": [{"id": "d1"}]}),
            validators: Validators { etag: Some("\"v1\"".to_string()), last_modified: None },
            fetched_at: 1_700_000_000_000,
        }
    }

    #[test]
    fn round_trip_with_private_modes() {
        let state = tempfile::tempdir().unwrap();
        let cache = Cache::open(state.path()).unwrap();
        let stored = entry("source[0] http");
        cache.store(&stored).unwrap();
        let path = state.path().join("sources/source-0-http.json");
        assert_eq!(cache.path_for("source[0] http"), path);
        assert_eq!(fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
        assert_eq!(fs::metadata(cache.dir()).unwrap().permissions().mode() & 0o777, 0o700);
        assert_eq!(cache.load("source[0] http", "id-1"), Some(stored));
        assert_eq!(cache.load("source[1] http", "id-1"), None, "missing file");
    }

    #[test]
    fn corrupt_or_foreign_caches_are_ignored() {
        let state = tempfile::tempdir().unwrap();
        let cache = Cache::open(state.path()).unwrap();
        cache.store(&entry("source[0] http")).unwrap();
        assert_eq!(cache.load("source[0] http", "another-url"), None);
        fs::write(cache.path_for("source[0] http"), "{\"source\": tru").unwrap();
        assert_eq!(cache.load("source[0] http", "id-1"), None);
        let mut not_object = entry("source[0] http");
        not_object.document = json!([1]);
        fs::write(cache.path_for("source[0] http"), serde_json::to_vec(&not_object).unwrap()).unwrap();
        assert_eq!(cache.load("source[0] http", "id-1"), None);
    }

    #[test]
    fn sanitised_names() {
        assert_eq!(sanitise("source[0] http"), "source-0-http");
        assert_eq!(sanitise("source[12] heat-local"), "source-12-heat-local");
        assert_eq!(sanitise("../../etc"), "etc");
        assert_eq!(sanitise("///"), "source");
    }

    #[test]
    fn open_fails_on_an_unusable_state_dir() {
        let state = tempfile::tempdir().unwrap();
        let file = state.path().join("file");
        fs::write(&file, "x").unwrap();
        assert!(matches!(Cache::open(&file), Err(SourceError::Cache { .. })));
    }
}
