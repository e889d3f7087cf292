//! What the client sends besides the template text: the environments given with `-e`, merged
//! in order as python-heatclient's template_utils.process_multiple_environments_and_files does
//! (later files win, mappings merge key by key), and the `files` map of everything the template's
//! `get_file` names and every provider template (a resource type or a registry target ending
//! in .yaml or .template, and what those name in turn), read relative to the directory of the
//! file that names it (a `file://` URL as its path;
//! other URLs are refused: the client fetches nothing from the network). The keys are the
//! strings the template writes, which Heat's GetFile looks up as written; heatclient instead
//! rewrites them into absolute `file://` URLs in the JSON template it sends, which the shim does
//! not do so that its errors keep the template's line numbers. Like openstackclient, the client
//! also sends each environment file itself (`environment_files`, its content in `files`), which
//! the server merges as Heat does; the merged `environment` goes along, as openstackclient's does.

use std::fs::File;
use std::io::{self, Read};
use std::path::{Path, PathBuf};

use base64::Engine as _;

use serde_json::{Map, Value};

use super::ClientError;
use crate::template::yaml::{self, Body, Node};
use crate::template::{self as hot, MAX_FILES, MAX_FILES_BYTES};

/// The template text with its merged environment and files map.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Assembled {
    pub template: String,
    pub environment: Value,
    /// Each environment's `file://` URL, in order, as openstackclient sends them; `files` holds
    /// each one's content (the parsed environment as JSON) under that URL.
    pub environment_files: Vec<String>,
    pub files: Map<String, Value>,
}

/// Reads the template, the environments and the files they name.
pub(crate) fn assemble(template: &Path, environments: &[PathBuf]) -> Result<Assembled, ClientError> {
    let text = read_text(template, MAX_FILES_BYTES).map_err(|source| ClientError::read_template(template, source))?;
    let mut merged = Map::new();
    let mut wanted = Vec::new();
    let mut environment_files = Vec::new();
    let mut environment_texts = Vec::new();
    named_files(template, &text, &mut wanted);
    for path in environments {
        let environment = read_environment(path)?;
        if let Some(Value::Object(registry)) = environment.get("resource_registry") {
            let base = path.parent().unwrap_or(Path::new("."));
            wanted.extend(provider_templates(registry).into_iter().map(|key| (base.to_path_buf(), key)));
        }
        // heatclient's process_environment_and_files(include_env_in_files=True): the parsed
        // environment as JSON, so the server reads it with the client's YAML 1.1 reading.
        let url = file_url(path).map_err(|source| ClientError::ReadEnvironment { path: path.to_path_buf(), source })?;
        environment_texts.push((url.clone(), Value::String(Value::Object(environment.clone()).to_string())));
        environment_files.push(url);
        hot::deep_update(&mut merged, environment);
    }
    let mut files = read_files(wanted)?;
    for (url, text) in environment_texts {
        if files.len() == MAX_FILES {
            return Err(ClientError::TooManyFiles { limit: MAX_FILES });
        }
        files.insert(url, text);
    }
    let environment = if merged.is_empty() { Value::Null } else { Value::Object(merged) };
    Ok(Assembled { template: text, environment, environment_files, files })
}

/// heatclient's utils.normalise_file_path_to_url: `file://` and the absolute path (not
/// resolving links, as os.path.abspath), percent-encoded as urllib's pathname2url does.
pub(crate) fn file_url(path: &Path) -> io::Result<String> {
    let absolute = std::path::absolute(path)?;
    let mut url = String::from("file://");
    for byte in absolute.as_os_str().as_encoded_bytes() {
        match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'_' | b'.' | b'-' | b'~' | b'/' => url.push(char::from(*byte)),
            other => url.push_str(&format!("%{other:02X}")),
        }
    }
    Ok(url)
}

fn read_environment(path: &Path) -> Result<Map<String, Value>, ClientError> {
    let text = read_text(path, MAX_FILES_BYTES)
        .map_err(|source| ClientError::ReadEnvironment { path: path.to_path_buf(), source })?;
    hot::parse_environment(&text).map_err(|source| ClientError::BadEnvironment { path: path.to_path_buf(), source })
}

/// Every registry value naming a template file, as heatclient's resolve_environment_urls
/// picks the values to fetch.
fn provider_templates(registry: &Map<String, Value>) -> Vec<String> {
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
        .filter(|target| hot::is_template_name(target))
        .map(str::to_owned)
        .collect()
}

/// Reads each wanted key relative to the directory of the file that named it, then what the
/// provider templates among them name in turn (each key once; the limits bound the walk).
fn read_files(mut wanted: Vec<(PathBuf, String)>) -> Result<Map<String, Value>, ClientError> {
    wanted.reverse();
    let mut files = Map::new();
    let mut total = 0usize;
    while let Some((base, key)) = wanted.pop() {
        if files.contains_key(&key) {
            continue;
        }
        if files.len() == MAX_FILES {
            return Err(ClientError::TooManyFiles { limit: MAX_FILES });
        }
        let path = local_path(&base, &key)?;
        // A provider template must be text; a get_file file that is not UTF-8 is sent base64
        // encoded, as heatclient's read_url_content sends it.
        let template = hot::is_template_name(&key);
        let read = if template { read_text } else { read_content };
        let content = read(&path, MAX_FILES_BYTES - total).map_err(|source| ClientError::ReadFile {
            key: key.clone(),
            path: path.clone(),
            source,
        })?;
        total += content.len();
        if template {
            let mut more = Vec::new();
            named_files(&path, &content, &mut more);
            wanted.extend(more.into_iter().rev());
        }
        files.insert(key, Value::String(content));
    }
    Ok(files)
}

/// What a template names, relative to its directory: `get_file` strings and resource types
/// that are template files. A template that does not parse names nothing: the server reports
/// its errors.
fn named_files(template: &Path, text: &str, wanted: &mut Vec<(PathBuf, String)>) {
    let Ok(root) = yaml::parse(text) else { return };
    let base = template.parent().unwrap_or(Path::new(".")).to_path_buf();
    let mut keys = Vec::new();
    get_file_keys(&root, &mut keys);
    provider_types(&root, &mut keys);
    wanted.extend(keys.into_iter().map(|key| (base.clone(), key)));
}

/// The `type` of each resource that names a template file (or a ResourceGroup member's).
fn provider_types(root: &Node, keys: &mut Vec<String>) {
    let Body::Mapping(sections) = &root.body else { return };
    let Some(resources) = sections.iter().find(|section| section.key == "resources") else { return };
    let Body::Mapping(resources) = &resources.value.body else { return };
    for resource in resources {
        let Body::Mapping(fields) = &resource.value.body else { continue };
        let text = |node: &Node, key: &str| match &node.body {
            Body::Mapping(fields) => {
                fields.iter().find(|field| field.key == key).and_then(|field| match &field.value.body {
                    Body::Scalar(Value::String(text)) => Some(text.clone()),
                    _ => None,
                })
            }
            _ => None,
        };
        let member = fields
            .iter()
            .find(|field| field.key == "properties")
            .and_then(|properties| match &properties.value.body {
                Body::Mapping(properties) => properties.iter().find(|property| property.key == "resource_def"),
                _ => None,
            })
            .and_then(|definition| text(&definition.value, "type"));
        keys.extend(text(&resource.value, "type").into_iter().chain(member).filter(|kind| hot::is_template_name(kind)));
    }
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
    String::from_utf8(read_bytes(path, limit)?)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "not UTF-8 text (a template must be text)"))
}

/// A get_file file's content: its text, or, for bytes that are not UTF-8, their base64 in lines
/// of 76 characters each ending in a newline (Python's base64.encodebytes, which heatclient
/// uses); the encoded text must fit in `limit` too.
fn read_content(path: &Path, limit: usize) -> io::Result<String> {
    let bytes = read_bytes(path, limit)?;
    let bytes = match String::from_utf8(bytes) {
        Ok(text) => return Ok(text),
        Err(error) => error.into_bytes(),
    };
    let encoded = base64::engine::general_purpose::STANDARD.encode(&bytes);
    let mut lines = String::with_capacity(encoded.len() + encoded.len() / 76 + 1);
    for chunk in encoded.as_bytes().chunks(76) {
        lines.push_str(std::str::from_utf8(chunk).unwrap_or_default());
        lines.push('\n');
    }
    if lines.len() > limit {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("over the {limit}-byte limit once base64-encoded"),
        ));
    }
    Ok(lines)
}

fn read_bytes(path: &Path, limit: usize) -> io::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    File::open(path)?.take(limit as u64 + 1).read_to_end(&mut bytes)?;
    if bytes.len() > limit {
        return Err(io::Error::new(io::ErrorKind::InvalidData, format!("over the {limit}-byte limit")));
    }
    Ok(bytes)
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
    fn remote_missing_and_oversized_files_are_refused_and_binary_ones_encoded() {
        let (_dir, templates) = layout();
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
        let binary = assemble(&write("o: {get_file: bin}\n"), &[]).unwrap();
        assert_eq!(binary.files["bin"], json!("//4A\n"), "base64 as Python's base64.encodebytes");
        fs::write(templates.join("long.bin"), vec![0xffu8; 100]).unwrap();
        let long = assemble(&write("o: {get_file: long.bin}\n"), &[]).unwrap();
        let lines: Vec<&str> = long.files["long.bin"].as_str().unwrap().split_terminator('\n').collect();
        assert_eq!(lines.iter().map(|line| line.len()).collect::<Vec<_>>(), vec![76, 60], "76-character lines");
        fs::write(templates.join("bad.yaml"), [0xff, 0xfe, 0]).unwrap();
        let template = assemble(&write("resources:\n  r: {type: bad.yaml}\n"), &[]).unwrap_err();
        assert!(crate::error_chain(&template).contains("not UTF-8"), "{}", crate::error_chain(&template));
        fs::write(templates.join("big"), vec![b'x'; MAX_FILES_BYTES + 1]).unwrap();
        let big = assemble(&write("o: {get_file: big}\n"), &[]).unwrap_err();
        assert!(crate::error_chain(&big).contains("byte limit"), "{}", crate::error_chain(&big));
    }

    #[test]
    fn environment_urls_are_absolute_and_quoted_as_heatclient_quotes_them() {
        assert_eq!(file_url(Path::new("/srv/my env/a+b.yaml")).unwrap(), "file:///srv/my%20env/a%2Bb.yaml");
        let relative = file_url(Path::new("env.yaml")).unwrap();
        let here = std::env::current_dir().unwrap();
        assert_eq!(relative, format!("file://{}/env.yaml", here.display()), "relative to the working directory");
    }

    #[test]
    fn provider_templates_are_read_from_types_and_the_registry_relative_to_their_namer() {
        let (dir, templates) = layout();
        fs::create_dir_all(templates.join("nested/scripts")).unwrap();
        fs::write(
            templates.join("top.yaml"),
            "resources:\n  a: {type: nested/inner.yaml}\n  g:\n    type: OS::Heat::ResourceGroup\n    \
             properties: {resource_def: {type: member.yaml}}\n",
        )
        .unwrap();
        fs::write(
            templates.join("nested/inner.yaml"),
            "resources:\n  b: {properties: {c: {get_file: scripts/b.sh}}}\n",
        )
        .unwrap();
        fs::write(templates.join("nested/scripts/b.sh"), "echo b\n").unwrap();
        fs::write(templates.join("member.yaml"), "resources: {}\n").unwrap();
        fs::write(dir.path().join("server.yaml"), "resources: {}\n").unwrap();
        let environment = dir.path().join("env.yaml");
        fs::write(&environment, "resource_registry:\n  resources:\n    web: {OS::Nova::Server: server.yaml}\n")
            .unwrap();
        let assembled = assemble(&templates.join("top.yaml"), std::slice::from_ref(&environment)).unwrap();
        // The environment itself too, under its file:// URL, as openstackclient sends it.
        let url = file_url(&environment).unwrap();
        assert_eq!(assembled.environment_files, std::slice::from_ref(&url));
        let sent: Value = serde_json::from_str(assembled.files[&url].as_str().unwrap()).unwrap();
        assert_eq!(sent, assembled.environment);
        let mut keys: Vec<&String> = assembled.files.keys().filter(|key| **key != url).collect();
        keys.sort();
        assert_eq!(keys, ["member.yaml", "nested/inner.yaml", "scripts/b.sh", "server.yaml"]);
        assert_eq!(assembled.files["scripts/b.sh"], json!("echo b\n"), "read relative to the nested template");
        assert_eq!(assembled.files["server.yaml"], json!("resources: {}\n"), "read relative to the environment");
    }
}
