//! os-apply-config 14.1.0 natively, for when the image has none: the metadata (`OS_CONFIG_FILES`
//! as `collect_config` reads and deep-merges it, else the agent's merged metadata) renders every
//! file of the templates tree (`OS_CONFIG_APPLIER_TEMPLATES`) to the same path under the output
//! root (`ANNEAL_APPLY_CONFIG_OUTPUT`, default `/`): executables through the hook's tools with the
//! metadata as JSON on stdin, the rest as Mustache (`render`). Every template renders before any
//! file is written, as in os-apply-config; a failure is its `ConfigException`: status 1 with the
//! message in `deploy_stderr`.

use std::fs;
use std::path::{Path, PathBuf};

use anneal_protocol::pyjson;
use serde_json::{Map, Value};

use super::control::{self, Control, Outcome};
use super::render;
use crate::files::is_executable;
use crate::{HookError, Invocation, Run, ToolError, Tools};

const DEFAULT_TEMPLATES_DIR: &str = "/usr/libexec/os-apply-config/templates";
/// `--fallback-metadata`'s default: read (when present) before `OS_CONFIG_FILES`.
const FALLBACK_METADATA: [&str; 3] = [
    "/var/cache/heat-cfntools/last_metadata",
    "/var/lib/heat-cfntools/cfn-init-data",
    "/var/lib/cloud/data/cfn-init-data",
];

/// Why a native run failed as os-apply-config's would (status 1), or a tool error the agent
/// must see (a deadline, a shutdown).
enum Failure {
    Config(String),
    Tool(ToolError),
}

impl From<String> for Failure {
    fn from(message: String) -> Failure {
        Failure::Config(message)
    }
}

/// One rendered output file.
struct Output {
    relative: PathBuf,
    body: Vec<u8>,
    control: Control,
}

/// Renders natively; the response of an os-apply-config run (its log in `deploy_stderr`).
pub(crate) async fn run<T: Tools>(run: &mut Run<'_, T>) -> Result<Map<String, Value>, HookError> {
    let mut log = String::new();
    let status = match apply(run, &mut log).await {
        Ok(()) => {
            log.push_str("[INFO] success\n");
            0
        }
        Err(Failure::Config(message)) => {
            log.push_str(&format!("[ERROR] {message}\n"));
            1
        }
        Err(Failure::Tool(error)) => return Err(HookError::Tool(error)),
    };
    let mut response = Map::new();
    response.insert("deploy_stdout".into(), Value::String(String::new()));
    response.insert("deploy_stderr".into(), Value::String(log));
    response.insert("deploy_status_code".into(), Value::from(status));
    Ok(response)
}

async fn apply<T: Tools>(run: &mut Run<'_, T>, log: &mut String) -> Result<(), Failure> {
    let config = collect(run)?;
    let templates = templates_dir(run.env.get("OS_CONFIG_APPLIER_TEMPLATES"));
    let output_root = PathBuf::from(run.env.get_or("ANNEAL_APPLY_CONFIG_OUTPUT", "/"));
    let mut paths = Vec::new();
    template_paths(&templates, Path::new(""), &mut paths)?;
    let mut outputs = Vec::with_capacity(paths.len());
    for relative in paths {
        let template = templates.join(&relative);
        let with_template = |message: String| format!("{message} (template {})", template.display());
        let body = render_template(run, &template, &config).await?;
        let control = control::load(&template).map_err(with_template)?;
        outputs.push(Output { relative, body, control });
    }
    for output in outputs {
        let path = output_root.join(&output.relative);
        let written = control::write(&path, &output.body, &output.control)
            .map_err(|error| format!("cannot write {}: {error}", path.display()))?;
        let line = match written {
            Outcome::Deleted => "deleting",
            Outcome::NotCreated => "not creating empty",
            Outcome::Written => "writing",
        };
        log.push_str(&format!("[INFO] {line} {}\n", path.display()));
    }
    Ok(())
}

/// The metadata: `OS_CONFIG_FILES` (after the fallback files), else the agent's.
fn collect<T>(run: &Run<'_, T>) -> Result<Value, Failure> {
    let Some(files) = run.env.get("OS_CONFIG_FILES") else {
        return match run.metadata {
            Some(Value::Object(map)) => Ok(Value::Object(map.clone())),
            Some(_) => Ok(Value::Object(Map::new())),
            None => Err(Failure::Config(
                "no metadata: OS_CONFIG_FILES is not set in the hook environment and the agent passed none".into(),
            )),
        };
    };
    let paths = FALLBACK_METADATA.iter().copied().chain(files.split(':')).filter(|path| !path.is_empty());
    let mut merged = Map::new();
    for path in paths {
        if fs::metadata(path).is_err() {
            continue;
        }
        let text = fs::read_to_string(path).map_err(|error| format!("Could not open {path} for reading. {error}"))?;
        let parsed: Value =
            serde_json::from_str(&text).map_err(|_| format!("Could not parse metadata file: {path}"))?;
        if let Value::Object(map) = parsed {
            deep_merge(&mut merged, map);
        }
    }
    Ok(Value::Object(merged))
}

/// `collect_config._deep_merge_dict`: maps merge key by key (new keys after the old ones), any
/// other value replaces.
pub(crate) fn deep_merge(base: &mut Map<String, Value>, overlay: Map<String, Value>) {
    for (key, value) in overlay {
        match value {
            Value::Object(new) if matches!(base.get(&key), Some(Value::Object(_))) => {
                if let Some(Value::Object(old)) = base.get_mut(&key) {
                    deep_merge(old, new);
                }
            }
            value => {
                base.insert(key, value);
            }
        }
    }
}

/// `apply_config.templates_dir()`: the setting, else the default unless only one of the old
/// /opt/stack directories exists.
fn templates_dir(setting: Option<&str>) -> PathBuf {
    if let Some(dir) = setting {
        return PathBuf::from(dir);
    }
    let mut old = Path::new("/opt/stack/os-apply-config/templates");
    if !old.is_dir() {
        old = Path::new("/opt/stack/os-config-applier/templates");
    }
    if old.is_dir() && !Path::new(DEFAULT_TEMPLATES_DIR).is_dir() {
        return old.to_path_buf();
    }
    PathBuf::from(DEFAULT_TEMPLATES_DIR)
}

/// `template_paths`: every file under `root` but `*.oac`, relative to it, walked as `os.walk`
/// walks (symbolic links to directories not followed); sorted by name, directory by directory. A
/// missing root has no templates.
fn template_paths(root: &Path, relative: &Path, paths: &mut Vec<PathBuf>) -> Result<(), String> {
    let dir = root.join(relative);
    let entries = match fs::read_dir(&dir) {
        Ok(entries) => entries,
        Err(_) if relative.as_os_str().is_empty() => return Ok(()),
        Err(error) => return Err(format!("cannot list {}: {error}", dir.display())),
    };
    let mut names: Vec<_> = entries.filter_map(Result::ok).map(|entry| entry.file_name()).collect();
    names.sort();
    let mut subdirs = Vec::new();
    for name in names {
        let path = dir.join(&name);
        if fs::metadata(&path).is_ok_and(|meta| meta.is_dir()) {
            if !fs::symlink_metadata(&path).is_ok_and(|meta| meta.file_type().is_symlink()) {
                subdirs.push(relative.join(&name));
            }
        } else if !name.as_encoded_bytes().ends_with(b".oac") {
            paths.push(relative.join(&name));
        }
    }
    for subdir in subdirs {
        template_paths(root, &subdir, paths)?;
    }
    Ok(())
}

/// `render_template`: an executable's stdout, or the Mustache template rendered.
async fn render_template<T: Tools>(run: &mut Run<'_, T>, template: &Path, config: &Value) -> Result<Vec<u8>, Failure> {
    if is_executable(template) {
        return render_executable(run, template, config).await;
    }
    let could_not = || format!("could not render moustache template {}", template.display());
    let bytes = fs::read(template).map_err(|_| could_not())?;
    let text = String::from_utf8(bytes).map_err(|_| could_not())?;
    let text = if text.contains('\r') { text.replace("\r\n", "\n").replace('\r', "\n") } else { text };
    let rendered = render::render(&text, config).map_err(|error| format!("{}: {error}", could_not()))?;
    Ok(rendered.into_bytes())
}

/// `render_executable`: the script run with the metadata's `json.dumps` on stdin; its stdout.
async fn render_executable<T: Tools>(run: &mut Run<'_, T>, script: &Path, config: &Value) -> Result<Vec<u8>, Failure> {
    let program = script.display().to_string();
    let invocation = Invocation {
        program: program.clone(),
        args: Vec::new(),
        env: run.env.variables().to_vec(),
        cwd: run.cwd.to_path_buf(),
    };
    let stdin = pyjson::dumps(config, true).into_bytes();
    let output = match run.tools.run_with_stdin(invocation, stdin).await {
        Ok(output) => output,
        Err(error @ (ToolError::TimedOut { .. } | ToolError::Cancelled { .. })) => return Err(Failure::Tool(error)),
        Err(error) => return Err(Failure::Config(format!("config script failed: {program}: {}", error_chain(&error)))),
    };
    if output.status_code != 0 {
        let mut all = output.stdout.clone();
        all.extend_from_slice(&output.stderr);
        let all = String::from_utf8_lossy(&all);
        return Err(Failure::Config(format!("config script failed: {program}\n\nwith output:\n\n{all}")));
    }
    Ok(output.stdout)
}

fn error_chain(error: &ToolError) -> String {
    match std::error::Error::source(error) {
        Some(source) => format!("{error}: {source}"),
        None => error.to_string(),
    }
}
