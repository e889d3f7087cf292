//! What the client sends besides the template text: the environments given with `-e`, merged
//! in order as python-heatclient's template_utils.process_multiple_environments_and_files does
//! (later files win, mappings merge key by key), and the `files` map of everything the template's
//! `get_file` names, read relative to the template's directory (a `file://` URL as its path;
//! other URLs are refused: the client fetches nothing from the network). The keys are the
//! strings the template writes, which Heat's GetFile looks up as written; heatclient instead
//! rewrites them into absolute `file://` URLs in the JSON template it sends, which the shim does
//! not do so that its errors keep the template's line numbers.

use std::fs::File;
use std::io::{self, Read};
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use super::ClientError;
use crate::template::yaml::{self, Body, Node};
use crate::template::{self as hot, MAX_FILES, MAX_FILES_BYTES};

/// The template text with its merged environment and files map.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Assembled {
    pub template: String,
    pub environment: Value,
    pub files: Map<String, Value>,
}

/// Reads the template, the environments and the files the template names.
pub(crate) fn assemble(template: &Path, environments: &[PathBuf]) -> Result<Assembled, ClientError> {
    let text = read_text(template, MAX_FILES_BYTES).map_err(|source| ClientError::read_template(template, source))?;
    let mut merged = Map::new();
    for path in environments {
        let environment = read_environment(path)?;
        hot::deep_update(&mut merged, environment);
    }
    let files = template_files(template, &text)?;
    let environment = if merged.is_empty() { Value::Null } else { Value::Object(merged) };
    Ok(Assembled { template: text, environment, files })
}

fn read_environment(path: &Path) -> Result<Map<String, Value>, ClientError> {
    let text = read_text(path, MAX_FILES_BYTES)
        .map_err(|source| ClientError::ReadEnvironment { path: path.to_path_buf(), source })?;
    let environment = hot::parse_environment(&text)
        .map_err(|source| ClientError::BadEnvironment { path: path.to_path_buf(), source })?;
    // heatclient reads provider templates named in the registry; the shim has no nested stacks
    // yet, so name the first one here rather than after a round trip.
    if let Some(Value::Object(registry)) = environment.get("resource_registry")
        && let Some(target) = provider_template(registry)
    {
        return Err(ClientError::Unsupported {
            path: path.to_path_buf(),
            reason: format!(
                "resource_registry maps a type to the template \"{target}\": provider templates (nested stacks) \
                 are not supported yet"
            ),
        });
    }
    Ok(environment)
}

/// The first registry value naming a template file (no `::`), as heatclient's
/// resolve_environment_urls picks the values to fetch.
fn provider_template(registry: &Map<String, Value>) -> Option<String> {
    let nested = registry
        .get("resources")
        .and_then(Value::as_object)
        .into_iter()
        .flat_map(|resources| resources.values().filter_map(Value::as_object).flat_map(|entries| entries.iter()));
    registry
        .iter()
        .filter(|(key, _)| key.as_str() != "base_url" && key.as_str() != "resources")
        .chain(nested.filter(|(key, _)| !matches!(key.as_str(), "hooks" | "restricted_actions" | "base_url")))
        .filter_map(|(_, value)| value.as_str())
        .find(|target| !target.contains("::"))
        .map(str::to_owned)
}

/// Every `get_file` string in the template, read relative to its directory.
fn template_files(template: &Path, text: &str) -> Result<Map<String, Value>, ClientError> {
    // A template that does not parse is sent as it is: the server reports its errors.
    let Ok(root) = yaml::parse(text) else { return Ok(Map::new()) };
    let mut keys = Vec::new();
    get_file_keys(&root, &mut keys);
    let base = template.parent().unwrap_or(Path::new("."));
    let mut files = Map::new();
    let mut total = 0usize;
    for key in keys {
        if files.contains_key(&key) {
            continue;
        }
        if files.len() == MAX_FILES {
            return Err(ClientError::TooManyFiles { limit: MAX_FILES });
        }
        let path = local_path(base, &key)?;
        let content = read_text(&path, MAX_FILES_BYTES - total).map_err(|source| ClientError::ReadFile {
            key: key.clone(),
            path: path.clone(),
            source,
        })?;
        total += content.len();
        files.insert(key, Value::String(content));
    }
    Ok(files)
}

/// The string arguments of every `get_file` in the tree, in document order.
fn get_file_keys(node: &Node, keys: &mut Vec<String>) {
    match &node.body {
        Body::Scalar(_) => {}
        Body::Sequence(items) => items.iter().for_each(|item| get_file_keys(item, keys)),
        Body::Mapping(entries) => {
            for entry in entries {
                match (&entry.key[..], &entry.value.body) {
                    ("get_file", Body::Scalar(Value::String(key))) => keys.push(key.clone()),
                    _ => get_file_keys(&entry.value, keys),
                }
            }
        }
    }
}

/// Where a get_file key points: `file://` URLs by their path, plain paths relative to `base`
/// (heatclient joins them to the template's URL the same way). Other URLs are refused.
fn local_path(base: &Path, key: &str) -> Result<PathBuf, ClientError> {
    if let Some(path) = key.strip_prefix("file://") {
        return Ok(PathBuf::from(path));
    }
    if let Some((scheme, _)) = key.split_once("://") {
        return Err(ClientError::RemoteFile { key: key.to_owned(), scheme: scheme.to_owned() });
    }
    Ok(base.join(key))
}

/// A UTF-8 file of at most `limit` bytes (reading stops past it: a FIFO or /dev/zero is cheap).
fn read_text(path: &Path, limit: usize) -> io::Result<String> {
    let mut bytes = Vec::new();
    File::open(path)?.take(limit as u64 + 1).read_to_end(&mut bytes)?;
    if bytes.len() > limit {
        return Err(io::Error::new(io::ErrorKind::InvalidData, format!("over the {limit}-byte limit")));
    }
    String::from_utf8(bytes)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "not UTF-8 text (binary files are not supported)"))
}

#[cfg(test)]
mod tests {
    use std::fs;

    use serde_json::json;

    use super::*;

    const TEMPLATE: &str = "heat_template_version: 2018-08-31
resources:
  a:
    type: OS::Heat::SoftwareConfig
    properties:
      config: {get_file: scripts/a.sh}
      options: {again: {get_file: scripts/a.sh}, up: {get_file: ../up.txt}}
";

    fn layout() -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let templates = dir.path().join("templates");
        fs::create_dir_all(templates.join("scripts")).unwrap();
        fs::write(templates.join("scripts/a.sh"), "echo a\n").unwrap();
        fs::write(dir.path().join("up.txt"), "up\n").unwrap();
        fs::write(templates.join("t.yaml"), TEMPLATE).unwrap();
        (dir, templates)
    }

    #[test]
    fn files_are_read_relative_to_the_template_and_keyed_as_written() {
        let (_dir, templates) = layout();
        let assembled = assemble(&templates.join("t.yaml"), &[]).unwrap();
        assert_eq!(assembled.template, TEMPLATE);
        assert_eq!(Value::Object(assembled.files), json!({"scripts/a.sh": "echo a\n", "../up.txt": "up\n"}));
        assert_eq!(assembled.environment, Value::Null);
    }

    #[test]
    fn later_environments_win_and_file_urls_are_paths() {
        let (dir, templates) = layout();
        let first = dir.path().join("first.yaml");
        let second = dir.path().join("second.yaml");
        fs::write(&first, "parameters: {a: 1, b: 1}\nresource_registry: {X::Y: OS::Heat::SoftwareConfig}\n").unwrap();
        fs::write(&second, "parameters: {b: 2}\n").unwrap();
        let url = format!("file://{}", dir.path().join("up.txt").display());
        fs::write(templates.join("u.yaml"), format!("outputs: {{o: {{value: {{get_file: \"{url}\"}}}}}}\n")).unwrap();
        let assembled = assemble(&templates.join("u.yaml"), &[first, second]).unwrap();
        assert_eq!(assembled.environment["parameters"], json!({"a": 1, "b": 2}));
        assert_eq!(assembled.environment["resource_registry"], json!({"X::Y": "OS::Heat::SoftwareConfig"}));
        assert_eq!(assembled.files[&url], json!("up\n"));
    }

    #[test]
    fn remote_missing_binary_and_oversized_files_are_refused() {
        let (dir, templates) = layout();
        let write = |text: &str| {
            let path = templates.join("x.yaml");
            fs::write(&path, text).unwrap();
            path
        };
        let remote = assemble(&write("o: {get_file: \"https://example.com/a.sh\"}\n"), &[]).unwrap_err();
        assert!(matches!(&remote, ClientError::RemoteFile { scheme, .. } if scheme == "https"), "{remote}");
        let missing = assemble(&write("o: {get_file: nope.sh}\n"), &[]).unwrap_err();
        assert!(matches!(&missing, ClientError::ReadFile { key, .. } if key == "nope.sh"), "{missing}");
        fs::write(templates.join("bin"), [0xff, 0xfe, 0]).unwrap();
        let binary = assemble(&write("o: {get_file: bin}\n"), &[]).unwrap_err();
        assert!(crate::error_chain(&binary).contains("not UTF-8"), "{}", crate::error_chain(&binary));
        fs::write(templates.join("big"), vec![b'x'; MAX_FILES_BYTES + 1]).unwrap();
        let big = assemble(&write("o: {get_file: big}\n"), &[]).unwrap_err();
        assert!(crate::error_chain(&big).contains("byte limit"), "{}", crate::error_chain(&big));
        let provider = dir.path().join("p.yaml");
        fs::write(&provider, "resource_registry:\n  resources:\n    web: {OS::Nova::Server: server.yaml}\n").unwrap();
        let refused = assemble(&templates.join("t.yaml"), &[provider]).unwrap_err();
        assert!(refused.to_string().contains("\"server.yaml\": provider templates"), "{refused}");
        assert_eq!(refused.exit_code(), 2);
    }
}
