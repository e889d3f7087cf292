//! Files as heat-agents' hooks write and read them: directories made the way `os.makedirs(path,
//! 0o700)` makes them (the mode on the last one only, Python 3.7+), files created with the hook's
//! mode, and output files read as Python's text mode reads them (newlines translated). Unlike
//! heat-agents, a rewritten file is always truncated: several hooks open without `O_TRUNC` and
//! leave the tail of a longer earlier file behind.

use std::fs::{self, DirBuilder, File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use anneal_protocol::OutputDecl;
use serde_json::{Map, Value};
use tracing::warn;

use crate::HookError;

/// heat-agents' `prepare_dir`: `if not os.path.isdir(path): os.makedirs(path, mode)`.
pub(crate) fn prepare_dir(path: &Path, mode: u32) -> Result<(), HookError> {
    if path.as_os_str().is_empty() || path.is_dir() {
        return Ok(());
    }
    let io_error = |source| HookError::Io { action: "create directory", path: path.to_path_buf(), source };
    if let Some(parent) = path.parent().filter(|parent| !parent.as_os_str().is_empty()) {
        fs::create_dir_all(parent).map_err(io_error)?;
    }
    DirBuilder::new().mode(mode).create(path).map_err(io_error)
}

/// Writes `contents` to `path`, created with `mode` if new (an existing file keeps its mode, as
/// with Python's `os.open(..., mode)`), truncated.
pub(crate) fn write_file(path: &Path, contents: &[u8], mode: u32) -> Result<(), HookError> {
    let io_error = |source| HookError::Io { action: "write", path: path.to_path_buf(), source };
    let mut file =
        OpenOptions::new().write(true).create(true).truncate(true).mode(mode).open(path).map_err(io_error)?;
    file.write_all(contents).map_err(io_error)
}

/// `os.path.isfile(path) and os.access(path, os.X_OK)` as root sees it (any execute bit), as
/// Python's `Popen` and os-apply-config test a program.
pub fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    fs::metadata(path).is_ok_and(|metadata| metadata.is_file() && metadata.permissions().mode() & 0o111 != 0)
}

/// Removes `path`; one that is not there is no error.
pub(crate) fn remove_if_present(path: &Path) -> Result<(), HookError> {
    match fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(error) if error.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(source) => Err(HookError::Io { action: "remove", path: path.to_path_buf(), source }),
    }
}

/// `'%s.%s' % (heat_outputs_path, name)`.
pub(crate) fn output_file(outputs_path: &Path, name: &str) -> PathBuf {
    let mut file = outputs_path.as_os_str().to_owned();
    file.push(".");
    file.push(name);
    PathBuf::from(file)
}

/// Each declared output whose file `<outputs_path>.<name>` exists, read whole as text, in
/// declaration order (heat-agents' loop over `c['outputs']`). Names that would leave the outputs
/// directory are not read; a file beyond `limit` bytes keeps its start.
pub(crate) fn read_outputs(outputs_path: &Path, outputs: &[OutputDecl], limit: usize) -> Map<String, Value> {
    let mut response = Map::new();
    for output in outputs.iter().filter(|output| is_safe_output_name(&output.name)) {
        let path = output_file(outputs_path, &output.name);
        match read_text(&path, limit) {
            Ok(Some(text)) => {
                response.insert(output.name.clone(), Value::String(text));
            }
            Ok(None) => {}
            // heat-agents' hooks skip an output they cannot open (IOError); say why.
            Err(error) => {
                warn!(output = %output.name, path = %path.display(), %error, "cannot read output file; output omitted")
            }
        }
    }
    response
}

/// Output names that address a file next to `heat_outputs_path`, not elsewhere.
pub(crate) fn is_safe_output_name(name: &str) -> bool {
    !name.contains('/') && !name.contains('\0') && name != "." && name != ".."
}

/// `open(path).read()`: the text with `\r\n` and `\r` read as `\n`; `None` when it is missing.
pub(crate) fn read_text(path: &Path, limit: usize) -> io::Result<Option<String>> {
    let file = match File::open(path) {
        Ok(file) => file,
        Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(error) => return Err(error),
    };
    let mut bytes = Vec::new();
    if file.take(limit as u64 + 1).read_to_end(&mut bytes)? > limit {
        bytes.truncate(limit);
        warn!(path = %path.display(), limit, "output file is larger than the limit; keeping its start");
    }
    Ok(Some(universal_newlines(&String::from_utf8_lossy(&bytes))))
}

fn universal_newlines(text: &str) -> String {
    if !text.contains('\r') {
        return text.to_string();
    }
    text.replace("\r\n", "\n").replace('\r', "\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn mode(path: &Path) -> u32 {
        fs::metadata(path).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn only_the_last_directory_gets_the_mode() {
        let root = tempfile::tempdir().unwrap();
        let leaf = root.path().join("a/b/c");
        prepare_dir(&leaf, 0o700).unwrap();
        assert_eq!(mode(&leaf), 0o700);
        assert_ne!(mode(&root.path().join("a/b")), 0o700);
        // An existing directory is left as it is.
        fs::set_permissions(&leaf, fs::Permissions::from_mode(0o755)).unwrap();
        prepare_dir(&leaf, 0o700).unwrap();
        assert_eq!(mode(&leaf), 0o755);
    }

    #[test]
    fn a_rewritten_file_is_truncated_and_keeps_its_mode() {
        let root = tempfile::tempdir().unwrap();
        let path = root.path().join("f");
        write_file(&path, b"long contents", 0o600).unwrap();
        assert_eq!(mode(&path), 0o600);
        fs::set_permissions(&path, fs::Permissions::from_mode(0o640)).unwrap();
        write_file(&path, b"short", 0o700).unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"short");
        assert_eq!(mode(&path), 0o640);
    }

    #[test]
    fn outputs_are_read_as_python_text_mode_reads_them() {
        let root = tempfile::tempdir().unwrap();
        let base = root.path().join("id1");
        fs::write(output_file(&base, "first"), "a\r\nb\rc\n").unwrap();
        fs::write(root.path().join("secret"), "no").unwrap();
        let outputs: Vec<OutputDecl> = serde_json::from_value(serde_json::json!([
            {"name": "first"}, {"name": "missing"}, {"name": "/../secret"}
        ]))
        .unwrap();
        let read = read_outputs(&base, &outputs, 1024);
        assert_eq!(Value::Object(read), serde_json::json!({"first": "a\nb\nc\n"}));
        fs::write(output_file(&base, "first"), "0123456789").unwrap();
        assert_eq!(read_text(&output_file(&base, "first"), 4).unwrap().as_deref(), Some("0123"));
    }
}
