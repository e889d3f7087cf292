//! Heat environments and the `files` map, server side and pure: reading an environment text
//! (the sections heat.common.environment_format accepts), merging several as python-heatclient's
//! `template_utils.deep_update` does, and applying one to a template's YAML tree before HOT
//! parsing: `resource_registry` type aliases (global and per resource) and `get_file`, which Heat
//! resolves from the request's `files` map. Provider templates (a type mapped to a template file,
//! i.e. a nested stack) are refused by name. Parameter values are `parameters`'s concern: this
//! module only hands them over.

use std::collections::BTreeMap;

use anneal_protocol::alias_budget::AliasBudget;
use serde_json::{Map, Value};

use super::yaml::{self, Body, Entry, Node, YamlError};
use super::{ParameterType, Template};

/// The sections heat.common.environment_format.SECTIONS accepts; any other is refused.
pub const SECTIONS: &[&str] = &[
    "parameters",
    "resource_registry",
    "parameter_defaults",
    "encrypted_param_names",
    "event_sinks",
    "parameter_merge_strategies",
];
/// heat.common.environment_util.ALLOWED_PARAM_MERGE_STRATEGIES.
pub const MERGE_STRATEGIES: &[&str] = &["overwrite", "merge", "deep_merge"];
/// Most entries in a `files` map.
pub const MAX_FILES: usize = 1000;
/// Longest `files` key (a path or URL).
pub const MAX_FILE_KEY_BYTES: usize = 4096;
/// Total bytes of the `files` contents, and also the most `get_file` may add to a template
/// (one file named many times must not multiply a request into gigabytes).
pub const MAX_FILES_BYTES: usize = 1 << 20;
/// Longest chain of registry aliases followed (`A: B`, `B: C`, ...).
const MAX_ALIAS_HOPS: usize = 16;

/// Why an environment text is not an acceptable environment.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum EnvironmentError {
    #[error(transparent)]
    Yaml(#[from] YamlError),
    #[error("the environment is not a YAML mapping")]
    NotMapping,
    #[error("environment has wrong section \"{section}\" (one of {})", SECTIONS.join(", "))]
    UnknownSection { section: String },
    #[error("environment has empty section \"{section}\"")]
    EmptySection { section: String },
}

/// An environment ready to apply: the merged sections, checked.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Environment {
    /// `parameters`: values as if given with `--param` (the request's own parameters win).
    pub parameters: Map<String, Value>,
    /// `parameter_defaults`: new defaults for the parameters the template declares.
    pub parameter_defaults: Map<String, Value>,
    registry: Registry,
}

/// `resource_registry`: type aliases, global (with `Prefix*` wildcards) and per resource name
/// (exact names, as Heat looks them up).
#[derive(Debug, Clone, Default, PartialEq)]
struct Registry {
    global: Vec<(String, String)>,
    resources: Vec<(String, Vec<(String, String)>)>,
    /// Keys whose entry was refused (reported), with the resource for a per-resource entry.
    refused: Vec<(Option<String>, String)>,
}

/// Parses one environment text as heatclient.common.environment_format.parse: a mapping (empty
/// text is an empty environment) whose sections are known. A null section is kept: the merge
/// may fill it, and the server refuses one still null (`Environment::from_value`, as
/// heat.common.environment_format.validate).
pub fn parse_environment(text: &str) -> Result<Map<String, Value>, EnvironmentError> {
    parse_environment_within(text, &mut AliasBudget::for_text(text.len()))
}

/// `parse_environment` with its anchors and aliases charged to `budget` (`yaml::parse_yaml_only_within`).
pub fn parse_environment_within(text: &str, budget: &mut AliasBudget) -> Result<Map<String, Value>, EnvironmentError> {
    let root = match yaml::parse_yaml_only_within(text, budget) {
        Ok(root) => root,
        Err(YamlError::Empty) => return Ok(Map::new()),
        Err(error) => return Err(error.into()),
    };
    match root.to_value() {
        Value::Object(map) => match map.keys().find(|section| !SECTIONS.contains(&section.as_str())) {
            Some(section) => Err(EnvironmentError::UnknownSection { section: section.clone() }),
            None => Ok(map),
        },
        Value::Null => Ok(Map::new()),
        _ => Err(EnvironmentError::NotMapping),
    }
}

fn check_sections(map: &Map<String, Value>) -> Result<(), EnvironmentError> {
    for (section, value) in map {
        if !SECTIONS.contains(&section.as_str()) {
            return Err(EnvironmentError::UnknownSection { section: section.clone() });
        }
        if value.is_null() {
            return Err(EnvironmentError::EmptySection { section: section.clone() });
        }
    }
    Ok(())
}

/// Merges `new` into `old` as heatclient's template_utils.deep_update: mappings merge key by
/// key, a null never replaces a mapping, anything else replaces.
pub fn deep_update(old: &mut Map<String, Value>, new: Map<String, Value>) {
    for (key, value) in new {
        match value {
            Value::Object(inner) => {
                let slot = old.entry(key).or_insert_with(|| Value::Object(Map::new()));
                if !slot.is_object() {
                    *slot = Value::Object(Map::new());
                }
                if let Value::Object(existing) = slot {
                    deep_update(existing, inner);
                }
            }
            Value::Null if old.get(&key).is_some_and(Value::is_object) => {}
            other => {
                old.insert(key, other);
            }
        }
    }
}

impl Environment {
    /// Checks a (merged) environment as the API receives it: every problem, each naming the
    /// section and entry. `Null` is the empty environment.
    pub fn from_value(value: &Value) -> Result<Environment, Vec<String>> {
        let (environment, problems) = Environment::from_value_collecting(value);
        if problems.is_empty() { Ok(environment) } else { Err(problems) }
    }

    /// `from_value` that keeps what it could read: the sections that are well-formed (every
    /// other section's problem reported), so that the template can still be checked with them.
    pub fn from_value_collecting(value: &Value) -> (Environment, Vec<String>) {
        let map = match value {
            Value::Null => return (Environment::default(), Vec::new()),
            Value::Object(map) => map,
            _ => return (Environment::default(), vec!["the environment must be a mapping".to_owned()]),
        };
        let mut problems = Vec::new();
        if let Err(error) = check_sections(map) {
            problems.push(error.to_string());
        }
        let mut environment = Environment::default();
        // A null section is reported by `check_sections`.
        for (section, value) in map.iter().filter(|(_, value)| !value.is_null()) {
            match section.as_str() {
                "parameters" => environment.parameters = mapping(section, value, &mut problems),
                "parameter_defaults" => environment.parameter_defaults = mapping(section, value, &mut problems),
                "resource_registry" => environment.registry = Registry::parse(value, &mut problems),
                "parameter_merge_strategies" => check_merge_strategies(value, &mut problems),
                // Which parameters Heat encrypts at rest and where it sends events: the shim
                // already masks hidden parameters and keeps its own events.
                known if SECTIONS.contains(&known) && !value.is_array() => {
                    problems.push(format!("environment section \"{section}\" must be a list"))
                }
                // A list, or an unknown section, which `check_sections` reported.
                _ => {}
            }
        }
        (environment, problems)
    }

    /// Whether applying this environment changes nothing (the template text can be kept).
    pub fn is_empty(&self) -> bool {
        self.parameters.is_empty() && self.parameter_defaults.is_empty() && self.registry == Registry::default()
    }

    /// The type a resource of `name` declared as `declared` has under this registry.
    pub fn resolve_type(&self, name: &str, declared: &str) -> Result<String, String> {
        self.registry.resolve(name, declared)
    }

    /// Whether the registry entry for `kind` (global, or the resource's own) was refused: the
    /// refusal is the problem to report, not the type it left unmapped.
    pub fn refused_mapping(&self, resource: &str, kind: &str) -> bool {
        self.registry
            .refused
            .iter()
            .any(|(owner, key)| key == kind && owner.as_deref().is_none_or(|owner| owner == resource))
    }
}

fn mapping(section: &str, value: &Value, problems: &mut Vec<String>) -> Map<String, Value> {
    match value {
        Value::Object(map) => map.clone(),
        _ => {
            problems.push(format!("environment section \"{section}\" must be a mapping"));
            Map::new()
        }
    }
}

/// `parameter_merge_strategies` only matters when Heat merges environment files itself
/// (heat.common.environment_util.merge_environments); the client-side merge here overwrites.
/// The values are still checked against what Heat knows.
fn check_merge_strategies(value: &Value, problems: &mut Vec<String>) {
    let Value::Object(map) = value else {
        problems.push("environment section \"parameter_merge_strategies\" must be a mapping".to_owned());
        return;
    };
    for (parameter, strategy) in map {
        if !strategy.as_str().is_some_and(|strategy| MERGE_STRATEGIES.contains(&strategy)) {
            problems.push(format!(
                "parameter_merge_strategies: \"{parameter}\": the strategy must be one of {}",
                MERGE_STRATEGIES.join(", ")
            ));
        }
    }
}

impl Registry {
    fn parse(value: &Value, problems: &mut Vec<String>) -> Registry {
        let mut registry = Registry::default();
        let Value::Object(map) = value else {
            problems.push("environment section \"resource_registry\" must be a mapping".to_owned());
            return registry;
        };
        for (key, value) in map {
            match (key.as_str(), value) {
                // Where heatclient looked for provider templates; nothing to map.
                ("base_url", Value::String(_)) => {}
                ("resources", Value::Object(resources)) => {
                    for (resource, entries) in resources {
                        let (mapped, refused) = resource_entries(resource, entries, problems);
                        registry.refused.extend(refused.into_iter().map(|key| (Some(resource.clone()), key)));
                        registry.resources.push((resource.clone(), mapped));
                    }
                }
                _ => match alias(key, value, "resource_registry", problems) {
                    Some(alias) => registry.global.push(alias),
                    None => registry.refused.push((None, key.clone())),
                },
            }
        }
        registry
    }

    /// heat.engine.environment.ResourceRegistry.get_resource_info: the resource's own entry
    /// first, then the global exact and wildcard keys in key order (Heat sorts them by path);
    /// the target is looked up again until nothing maps it.
    fn resolve(&self, name: &str, declared: &str) -> Result<String, String> {
        let own = self.resources.iter().filter(|(resource, _)| resource == name).flat_map(|(_, entries)| entries);
        let own: Vec<&(String, String)> = own.collect();
        let mut current = declared.to_owned();
        for _ in 0..MAX_ALIAS_HOPS {
            let target = match own.iter().find(|(key, _)| *key == current) {
                Some((_, target)) => Some(target.clone()),
                None => self.global_target(&current),
            };
            match target {
                Some(target) if target != current => current = target,
                _ => return Ok(current),
            }
        }
        Err(format!("resource {name}: the resource_registry aliases of \"{declared}\" form a loop"))
    }

    /// The first global key (in key order) that is `kind` or a `Prefix*` matching it, and what
    /// it maps `kind` to (heat.engine.environment.GlobResourceInfo: `Prefix*: Other*` keeps the
    /// suffix, `Prefix*: Type` maps many to one and never matches its own target).
    fn global_target(&self, kind: &str) -> Option<String> {
        let mut candidates: Vec<&(String, String)> = self
            .global
            .iter()
            .filter(|(key, target)| match key.strip_suffix('*') {
                Some(prefix) => kind.starts_with(prefix) && kind != target,
                None => key == kind,
            })
            .collect();
        candidates.sort_by(|left, right| left.0.cmp(&right.0));
        let (key, target) = candidates.first()?;
        match (key.strip_suffix('*'), target.strip_suffix('*')) {
            (Some(prefix), Some(replacement)) => Some(format!("{replacement}{}", &kind[prefix.len()..])),
            _ => Some(target.clone()),
        }
    }
}

/// A per-resource override's entries: aliases, plus Heat's `hooks` and `restricted_actions`
/// (breakpoints and protections of the resource, which the shim does not have).
fn resource_entries(
    resource: &str,
    entries: &Value,
    problems: &mut Vec<String>,
) -> (Vec<(String, String)>, Vec<String>) {
    let Value::Object(entries) = entries else {
        problems.push(format!("resource_registry: resources: \"{resource}\" must be a mapping"));
        return (Vec::new(), Vec::new());
    };
    let mut aliases = Vec::new();
    let mut refused = Vec::new();
    for (key, value) in entries {
        match key.as_str() {
            "hooks" | "restricted_actions" => problems.push(format!(
                "resource_registry: resources: \"{resource}\": \"{key}\" is not supported (the shim has no \
                 breakpoints or protected actions)"
            )),
            _ => match alias(key, value, &format!("resource_registry: resources: {resource}"), problems) {
                Some(alias) => aliases.push(alias),
                None => refused.push(key.clone()),
            },
        }
    }
    (aliases, refused)
}

/// One `Type: Target` entry. A target ending in .yaml or .template is a provider template, as
/// heat.engine.environment.ResourceRegistry reads it (expanded by `nested`).
fn alias(key: &str, value: &Value, context: &str, problems: &mut Vec<String>) -> Option<(String, String)> {
    let Value::String(target) = value else {
        problems.push(format!("{context}: \"{key}\" must map to a resource type name"));
        return None;
    };
    if super::provider::is_template_name(target) {
        return Some((key.to_owned(), target.clone()));
    }
    if !target.contains("::") {
        problems.push(format!(
            "{context}: \"{key}\" maps to \"{target}\", neither a resource type nor a template file \
             (.yaml, .template)"
        ));
        return None;
    }
    if target.ends_with('*') && !key.ends_with('*') {
        problems.push(format!("{context}: \"{key}\": only a wildcard key maps to a wildcard"));
        return None;
    }
    Some((key.to_owned(), target.clone()))
}

/// Checks a request's `files` map against the limits; every problem.
pub fn check_files(files: &Map<String, Value>) -> Result<(), Vec<String>> {
    let mut problems = Vec::new();
    if files.len() > MAX_FILES {
        problems.push(format!("files: {} entries, over the limit of {MAX_FILES}", files.len()));
    }
    let mut total = 0usize;
    for (key, value) in files {
        if key.is_empty() || key.len() > MAX_FILE_KEY_BYTES || key.chars().any(char::is_control) {
            let shown: String = key.chars().take(80).collect();
            problems.push(format!(
                "files: the key {shown:?} must be 1 to {MAX_FILE_KEY_BYTES} bytes without control characters"
            ));
        }
        match value {
            Value::String(content) => total = total.saturating_add(content.len()),
            _ => problems.push(format!("files: \"{key}\": the content must be a string")),
        }
    }
    if total > MAX_FILES_BYTES {
        problems.push(format!("files: {total} bytes in all, over the limit of {MAX_FILES_BYTES}"));
    }
    if problems.is_empty() { Ok(()) } else { Err(problems) }
}

/// Applies the registry to the `resources` section's `type` values and replaces each
/// `{get_file: KEY}` under `resources` and `outputs` with `files[KEY]` (heat.engine.hot.functions
/// .GetFile: the key is looked up as written). Every problem is reported, with its line.
pub fn apply(root: &mut Node, environment: &Environment, files: &Map<String, Value>) -> Vec<String> {
    let mut problems = Vec::new();
    let Body::Mapping(sections) = &mut root.body else { return problems };
    let mut budget = MAX_FILES_BYTES;
    for section in sections.iter_mut() {
        let what = match section.key.as_str() {
            "resources" => "resource",
            "outputs" => "output",
            _ => continue,
        };
        let Body::Mapping(items) = &mut section.value.body else { continue };
        for item in items.iter_mut() {
            if what == "resource" {
                retype(item, environment, &mut problems);
            }
            let mut found = Vec::new();
            substitute_files(&mut item.value, files, &mut budget, &mut found);
            problems.extend(found.into_iter().map(|problem| format!("{what} {}: {problem}", item.key)));
        }
    }
    problems
}

fn retype(resource: &mut Entry, environment: &Environment, problems: &mut Vec<String>) {
    let Body::Mapping(fields) = &mut resource.value.body else { return };
    let Some(field) = fields.iter_mut().find(|field| field.key == "type") else { return };
    let Body::Scalar(Value::String(declared)) = &field.value.body else { return };
    match environment.resolve_type(&resource.key, declared) {
        Ok(resolved) => field.value.body = Body::Scalar(Value::String(resolved)),
        Err(problem) => problems.push(format!("{problem} (line {})", field.line)),
    }
}

/// Depth is bounded by the YAML parser's `MAX_DEPTH`, so the recursion is too.
fn substitute_files(node: &mut Node, files: &Map<String, Value>, budget: &mut usize, problems: &mut Vec<String>) {
    match &mut node.body {
        Body::Scalar(_) => {}
        Body::Sequence(items) => items.iter_mut().for_each(|item| substitute_files(item, files, budget, problems)),
        Body::Mapping(entries) if entries.len() == 1 && entries[0].key == "get_file" => {
            let line = entries[0].line;
            let Body::Scalar(Value::String(key)) = &entries[0].value.body else {
                problems.push(format!("get_file: the argument must be a string (line {line})"));
                // Reported once here: the function checks later must not report it again.
                node.body = Body::Scalar(Value::Null);
                return;
            };
            let problem = match files.get(key).and_then(Value::as_str) {
                Some(content) if content.len() <= *budget => {
                    *budget -= content.len();
                    node.body = Body::Scalar(Value::String(content.to_owned()));
                    return;
                }
                Some(_) => format!(
                    "get_file: \"{key}\": the files named by get_file add up to more than {MAX_FILES_BYTES} bytes \
                     (line {line})"
                ),
                None => format!(
                    "get_file: no file \"{key}\" in the request's files (the client reads it relative to the \
                     template) (line {line})"
                ),
            };
            problems.push(problem);
            node.body = Body::Scalar(Value::Null);
        }
        Body::Mapping(entries) => {
            entries.iter_mut().for_each(|entry| substitute_files(&mut entry.value, files, budget, problems))
        }
    }
}

/// `parameter_defaults` replace the defaults of the parameters the template declares; the
/// others are ignored (Heat keeps them for nested stacks). A null one leaves the template's
/// default, as heat.engine.parameters.Parameter.default ignores a `user_default` of None.
pub fn apply_parameter_defaults(template: &mut Template, environment: &Environment) {
    for (name, parameter) in &mut template.parameters {
        if let Some(value) = environment.parameter_defaults.get(name.as_str()).filter(|value| !value.is_null()) {
            parameter.default = Some(value.clone());
        }
    }
}

/// The environment's `parameters` as the text `--param` would give, under the request's own
/// `given` (which win, as heat.api.openstack.v1.stacks.InstantiationData.environment merges
/// them). A list for a comma_delimited_list joins with commas; other structures are JSON.
pub fn parameter_texts(
    template: &Template,
    environment: &Environment,
    given: &BTreeMap<String, String>,
) -> BTreeMap<String, String> {
    let mut texts = given.clone();
    for (name, value) in &environment.parameters {
        if texts.contains_key(name) {
            continue;
        }
        let kind = template.parameter(name).map(|parameter| parameter.kind);
        let text = match (value, kind) {
            (Value::String(text), _) => text.clone(),
            (Value::Array(items), Some(ParameterType::CommaDelimitedList)) => items
                .iter()
                .map(|item| item.as_str().map_or_else(|| item.to_string(), str::to_owned))
                .collect::<Vec<_>>()
                .join(","),
            (Value::Null, _) => String::new(),
            (other, _) => other.to_string(),
        };
        texts.insert(name.clone(), text);
    }
    texts
}
