//! The `heat-local` source: the `cfn-init-data` file Heat writes through cloud-init at boot
//! (os-collect-config's `heat_local` collector). A missing file is an empty document; a
//! world-writable one is refused (Heat writes it 0600 or 0640, so group-readable is fine).

use std::io::ErrorKind;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use super::local::read_json_file;
use super::{Fetched, SourceError};

#[derive(Debug)]
pub(crate) struct HeatLocalSource {
    name: String,
    path: PathBuf,
}

impl HeatLocalSource {
    pub(crate) fn new(name: String, path: PathBuf) -> HeatLocalSource {
        HeatLocalSource { name, path }
    }

    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    pub(crate) fn fetch(&self) -> Result<Fetched, SourceError> {
        match read_json_file(&self.name, &self.path) {
            Ok(document) => Ok(Fetched::Document(document)),
            Err(SourceError::ReadFile { source, .. }) if source.kind() == ErrorKind::NotFound => {
                tracing::debug!(source = %self.name, path = %self.path.display(), "heat-local file is missing");
                Ok(Fetched::Document(Value::Object(Map::new())))
            }
            Err(error) => Err(error),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::fs;
    use std::os::unix::fs::PermissionsExt;

    fn source(path: PathBuf) -> HeatLocalSource {
        HeatLocalSource::new("source[0] heat-local".to_string(), path)
    }

    #[test]
    fn reads_the_document() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cfn-init-data");
        fs::write(&path, r#"{"deployments": [{"id": "d1", "group": "script"}], "os-collect-config": {}}"#).unwrap();
        fs::set_permissions(&path, fs::Permissions::from_mode(0o640)).unwrap();
        let expected = json!({"deployments": [{"id": "d1", "group": "script"}], "os-collect-config": {}});
        assert_eq!(source(path).fetch().unwrap(), Fetched::Document(expected));
    }

    #[test]
    fn missing_file_is_an_empty_document() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(source(dir.path().join("absent")).fetch().unwrap(), Fetched::Document(json!({})));
    }

    #[test]
    fn invalid_json_names_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cfn-init-data");
        fs::write(&path, "{not json").unwrap();
        let error = source(path.clone()).fetch().unwrap_err();
        assert!(matches!(error, SourceError::InvalidJson { .. }), "{error:?}");
        assert!(error.to_string().contains(&path.display().to_string()), "{error}");
    }

    #[test]
    fn world_writable_is_refused_and_non_objects_rejected() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cfn-init-data");
        fs::write(&path, "{}").unwrap();
        fs::set_permissions(&path, fs::Permissions::from_mode(0o666)).unwrap();
        assert!(matches!(source(path.clone()).fetch(), Err(SourceError::Unsafe { .. })));
        fs::set_permissions(&path, fs::Permissions::from_mode(0o600)).unwrap();
        fs::write(&path, "\"text\"").unwrap();
        assert!(matches!(source(path).fetch(), Err(SourceError::NotObject { found: "string", .. })));
    }
}
