//! The `local` source: every regular, non-hidden `*.json` file of a directory, read in file-name
//! (byte) order and merged into one document, as os-collect-config's `local` collector does:
//! `deployments` lists are concatenated, other top-level keys are replaced by later files. A
//! directory or file that someone other than root or the agent's user owns or may write is
//! refused: it would let that user choose what runs as root (see docs/security.md).

use std::fs::{self, File, Metadata};
use std::io::{ErrorKind, Read};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use super::{Fetched, MAX_DOCUMENT_BYTES, SourceError, parse_document};
use crate::fsutil::{UnsafePath, check_trusted, check_trusted_path};

#[derive(Debug)]
pub(crate) struct LocalSource {
    name: String,
    path: PathBuf,
}

impl LocalSource {
    pub(crate) fn new(name: String, path: PathBuf) -> LocalSource {
        LocalSource { name, path }
    }

    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Reads and merges the directory. A missing directory is an empty document.
    pub(crate) fn fetch(&self) -> Result<Fetched, SourceError> {
        let metadata = match fs::metadata(&self.path) {
            Ok(metadata) => metadata,
            Err(error) if error.kind() == ErrorKind::NotFound => {
                tracing::debug!(source = %self.name, path = %self.path.display(), "local directory is missing");
                return Ok(Fetched::Document(Value::Object(Map::new())));
            }
            Err(source) => return Err(self.read_error(&self.path, source)),
        };
        self.check_directory(&metadata)?;
        let mut merged = Map::new();
        for file in self.json_files()? {
            let document = read_json_file(&self.name, &file)?;
            merge_into(&mut merged, document, &self.name, &file)?;
        }
        Ok(Fetched::Document(Value::Object(merged)))
    }

    /// The directory, and every one above what it resolves to, is owned by root or the agent's
    /// user and writable by nobody else.
    fn check_directory(&self, metadata: &Metadata) -> Result<(), SourceError> {
        if !metadata.is_dir() {
            return Err(self.unsafe_error(&self.path, "not a directory".to_string()));
        }
        check_trusted_path(&self.path).map_err(|problem| unsafe_path(&self.name, problem))
    }

    /// The directory's regular, non-hidden `*.json` files, sorted by file name bytes.
    fn json_files(&self) -> Result<Vec<PathBuf>, SourceError> {
        let entries = fs::read_dir(&self.path).map_err(|source| self.read_error(&self.path, source))?;
        let mut files = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|source| self.read_error(&self.path, source))?;
            let file_name = entry.file_name();
            let bytes = file_name.as_bytes();
            if bytes.starts_with(b".") || !bytes.ends_with(b".json") {
                continue;
            }
            let path = entry.path();
            // Follows symlinks, as os-collect-config does: a link to a regular file is read.
            let metadata = fs::metadata(&path).map_err(|source| self.read_error(&path, source))?;
            if metadata.is_file() {
                files.push(path);
            }
        }
        files.sort_by(|left, right| left.as_os_str().as_bytes().cmp(right.as_os_str().as_bytes()));
        Ok(files)
    }

    fn read_error(&self, path: &Path, source: std::io::Error) -> SourceError {
        SourceError::ReadFile { source_name: self.name.clone(), path: path.to_path_buf(), source }
    }

    fn unsafe_error(&self, path: &Path, reason: String) -> SourceError {
        SourceError::Unsafe { source_name: self.name.clone(), path: path.to_path_buf(), reason }
    }
}

/// The refusal of a path someone else could write.
fn unsafe_path(source_name: &str, problem: UnsafePath) -> SourceError {
    SourceError::Unsafe {
        source_name: source_name.to_string(),
        path: problem.path,
        reason: format!("it {}; refusing to use it", problem.problem),
    }
}

/// Reads one JSON object file, refusing oversized files and files that someone other than root
/// or the agent's user owns or may write (checked on the open file, so it is the file read).
///
/// Shared with the heat-local source.
pub(super) fn read_json_file(source_name: &str, path: &Path) -> Result<Value, SourceError> {
    let read_error =
        |source| SourceError::ReadFile { source_name: source_name.to_string(), path: path.to_path_buf(), source };
    let file = File::open(path).map_err(read_error)?;
    let metadata = file.metadata().map_err(read_error)?;
    check_trusted(path, &metadata).map_err(|problem| unsafe_path(source_name, problem))?;
    let what = path.display().to_string();
    let too_large = || SourceError::TooLarge {
        source_name: source_name.to_string(),
        what: what.clone(),
        limit: MAX_DOCUMENT_BYTES,
    };
    if metadata.len() > MAX_DOCUMENT_BYTES as u64 {
        return Err(too_large());
    }
    // The file may grow between the size check and the read.
    let mut bytes = Vec::new();
    file.take(MAX_DOCUMENT_BYTES as u64 + 1).read_to_end(&mut bytes).map_err(read_error)?;
    if bytes.len() > MAX_DOCUMENT_BYTES {
        return Err(too_large());
    }
    parse_document(source_name, &what, &bytes)
}

/// Adds one file's document to the merged one: `deployments` lists are concatenated, any other
/// key is replaced.
fn merge_into(
    merged: &mut Map<String, Value>,
    document: Value,
    source_name: &str,
    file: &Path,
) -> Result<(), SourceError> {
    let Value::Object(document) = document else {
        return Ok(());
    };
    for (key, value) in document {
        if key != "deployments" {
            merged.insert(key, value);
            continue;
        }
        let Value::Array(mut entries) = value else {
            return Err(SourceError::BadFile {
                source_name: source_name.to_string(),
                path: file.to_path_buf(),
                reason: "\"deployments\" is not a list".to_string(),
            });
        };
        match merged.entry("deployments").or_insert_with(|| Value::Array(Vec::new())) {
            Value::Array(existing) => existing.append(&mut entries),
            // Unreachable: only lists are ever stored under `deployments`.
            other => *other = Value::Array(entries),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fsutil::effective_uid;
    use serde_json::json;
    use std::os::unix::fs::PermissionsExt;

    fn private_dir() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o700)).unwrap();
        dir
    }

    fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
        let path = dir.join(name);
        fs::write(&path, text).unwrap();
        fs::set_permissions(&path, fs::Permissions::from_mode(0o600)).unwrap();
        path
    }

    fn document(source: &LocalSource) -> Value {
        match source.fetch().unwrap() {
            Fetched::Document(document) => document,
            other => panic!("expected a document, got {other:?}"),
        }
    }

    #[test]
    fn files_merge_in_name_order() {
        let dir = private_dir();
        write(dir.path(), "b.json", r#"{"deployments": [{"id": "b1"}], "k": "from b", "only_b": 1}"#);
        write(dir.path(), "a.json", r#"{"deployments": [{"id": "a1"}, {"id": "a2"}], "k": "from a"}"#);
        write(dir.path(), "C.json", r#"{"k": "from C"}"#);
        write(dir.path(), "c.json", r#"{"deployments": [{"id": "c1"}]}"#);
        write(dir.path(), ".hidden.json", r#"{"k": "hidden"}"#);
        write(dir.path(), "notes.txt", "not json");
        write(dir.path(), "d.json.bak", "not json either");
        fs::create_dir(dir.path().join("sub.json")).unwrap();
        let source = LocalSource::new("source[0] local".to_string(), dir.path().to_path_buf());
        // Byte order: "C.json" < "a.json" < "b.json" < "c.json".
        assert_eq!(
            document(&source),
            json!({
                "k": "from b",
                "deployments": [{"id": "a1"}, {"id": "a2"}, {"id": "b1"}, {"id": "c1"}],
                "only_b": 1
            })
        );
    }

    #[test]
    fn missing_directory_is_an_empty_document() {
        let dir = private_dir();
        let source = LocalSource::new("s".to_string(), dir.path().join("absent"));
        assert_eq!(document(&source), json!({}));
    }

    #[test]
    fn empty_directory_is_an_empty_document() {
        let dir = private_dir();
        assert_eq!(document(&LocalSource::new("s".to_string(), dir.path().to_path_buf())), json!({}));
    }

    #[test]
    fn world_writable_directory_or_file_is_refused() {
        let dir = private_dir();
        let file = write(dir.path(), "a.json", "{}");
        let source = LocalSource::new("s".to_string(), dir.path().to_path_buf());
        fs::set_permissions(&file, fs::Permissions::from_mode(0o646)).unwrap();
        let error = source.fetch().unwrap_err();
        assert!(matches!(&error, SourceError::Unsafe { path, .. } if *path == file), "{error:?}");
        fs::set_permissions(&file, fs::Permissions::from_mode(0o644)).unwrap();
        fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o777)).unwrap();
        let error = source.fetch().unwrap_err();
        assert!(error.to_string().contains("world-writable"), "{error}");
    }

    #[test]
    fn directory_owned_by_someone_else_is_refused() {
        let dir = private_dir();
        let source = LocalSource::new("s".to_string(), dir.path().to_path_buf());
        if effective_uid() == 0 {
            std::os::unix::fs::chown(dir.path(), Some(65534), None).unwrap();
            let error = source.fetch().unwrap_err();
            assert!(error.to_string().contains("owned by uid 65534"), "{error}");
        } else {
            // Only root can give a directory away; as another user, check our own is accepted.
            source.fetch().unwrap();
        }
    }

    #[test]
    fn group_writable_or_foreign_files_are_refused() {
        let dir = private_dir();
        let file = write(dir.path(), "a.json", "{}");
        let source = LocalSource::new("s".to_string(), dir.path().to_path_buf());
        fs::set_permissions(&file, fs::Permissions::from_mode(0o664)).unwrap();
        let error = source.fetch().unwrap_err();
        assert_eq!(
            error.to_string(),
            format!("s: {}: it is group-writable (mode 0664); refusing to use it", file.display())
        );
        fs::set_permissions(&file, fs::Permissions::from_mode(0o644)).unwrap();
        fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o770)).unwrap();
        let error = source.fetch().unwrap_err();
        assert!(error.to_string().contains("is group-writable (mode 0770)"), "{error}");
        fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o755)).unwrap();
        if effective_uid() == 0 {
            std::os::unix::fs::chown(&file, Some(65534), None).unwrap();
            let error = source.fetch().unwrap_err();
            assert!(error.to_string().contains("it is owned by uid 65534, not by root"), "{error}");
        }
    }

    #[test]
    fn invalid_json_names_the_file() {
        let dir = private_dir();
        write(dir.path(), "a.json", "{}");
        let bad = write(dir.path(), "b.json", "{\"deployments\": ");
        let error = LocalSource::new("s".to_string(), dir.path().to_path_buf()).fetch().unwrap_err();
        assert!(matches!(error, SourceError::InvalidJson { .. }), "{error:?}");
        assert!(error.to_string().contains(&bad.display().to_string()), "{error}");
    }

    #[test]
    fn non_object_and_bad_deployments_are_refused() {
        let dir = private_dir();
        let file = write(dir.path(), "a.json", "[1]");
        let source = LocalSource::new("s".to_string(), dir.path().to_path_buf());
        assert!(matches!(source.fetch(), Err(SourceError::NotObject { found: "array", .. })));
        fs::write(&file, r#"{"deployments": {"id": "x"}}"#).unwrap();
        let error = source.fetch().unwrap_err();
        assert!(error.to_string().contains("\"deployments\" is not a list"), "{error}");
    }

    #[test]
    fn a_file_path_is_not_a_directory() {
        let dir = private_dir();
        let file = write(dir.path(), "a.json", "{}");
        let error = LocalSource::new("s".to_string(), file).fetch().unwrap_err();
        assert!(error.to_string().contains("not a directory"), "{error}");
    }

    #[test]
    fn oversized_files_are_refused() {
        let dir = private_dir();
        let file = dir.path().join("big.json");
        File::create(&file).unwrap().set_len(MAX_DOCUMENT_BYTES as u64 + 1).unwrap();
        let error = LocalSource::new("s".to_string(), dir.path().to_path_buf()).fetch().unwrap_err();
        assert!(matches!(error, SourceError::TooLarge { .. }), "{error:?}");
    }
}
