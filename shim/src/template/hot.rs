//! The HOT document structure: from the YAML tree to `Template`. It owns which top-level,
//! parameter, resource and output keys exist and which are rejected as unsupported; it
//! collects every structural problem (with its line) instead of stopping at the first, and
//! (`parse_collecting`) keeps what it could read of a broken template so the rest can still be
//! checked (`Incomplete`).
//! Cross-resource checks (references, properties, cycles) are `validate`'s.

use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::{Map, Value};

use super::checks::Incomplete;
use super::environment::{self, Environment};
use super::expr::functions::Version;
use super::expr::functions::conditions::Conditions;
use super::expr::{Dialect, Expr, Names};
use super::fields::{definition, text_value};
use super::hot_parameters::{parameter_groups, parse_parameter};
use super::policy::{self, Policies};
use super::provider::NestedKind;
use super::type_names;
use super::yaml::{self, Body, Entry, Node};
use super::{Output, Resource, ResourceType, Template, TemplateError};
use super::{provider, stored};

/// Largest template text accepted (unless `raise_template_limit` raised it in this process).
pub const MAX_TEMPLATE_BYTES: usize = 1 << 20;

/// The limit in force: `MAX_TEMPLATE_BYTES`, or more after `raise_template_limit`.
static TEMPLATE_LIMIT: AtomicUsize = AtomicUsize::new(MAX_TEMPLATE_BYTES);

/// Raises the template size limit for this whole process (never lowers it). Only the graph-scale
/// benchmark calls it: it drives the engine in-process with one template of up to 50,000
/// deployments (about 15 MB). The shim binary never does, and its HTTP API's 1 MiB body limit
/// stays in force either way.
#[doc(hidden)]
pub fn raise_template_limit(bytes: usize) {
    TEMPLATE_LIMIT.fetch_max(bytes, Ordering::Relaxed);
}

/// `heat_template_version` values Heat knows (dates and release names).
pub const SUPPORTED_VERSIONS: &[&str] = &[
    "2013-05-23",
    "2014-10-16",
    "2015-04-30",
    "2015-10-15",
    "2016-04-08",
    "2016-10-14",
    "newton",
    "2017-02-24",
    "ocata",
    "2017-09-01",
    "pike",
    "2018-03-02",
    "queens",
    "2018-08-31",
    "rocky",
    "2021-04-16",
    "wallaby",
];

/// Parses a HOT template (YAML, or JSON, which is YAML). Syntax errors carry line and column;
/// structural problems are all reported together in `TemplateError::Invalid`.
pub fn parse_template(text: &str) -> Result<Template, TemplateError> {
    let limit = TEMPLATE_LIMIT.load(Ordering::Relaxed);
    if text.len() > limit {
        return Err(TemplateError::TooLarge { size: text.len(), limit });
    }
    parse_template_in(text, &Environment::default(), &Map::new()).map(|(template, _)| template)
}

/// Parses a template with an environment and a `files` map applied to its tree first (see
/// `environment::apply`). Also returns the resolved template as JSON text when the environment
/// or files changed it: the engine stores that, so a later parse needs neither.
pub fn parse_template_in(
    text: &str,
    environment: &Environment,
    files: &Map<String, Value>,
) -> Result<(Template, Option<String>), TemplateError> {
    let parsed = parse_collecting(text, environment, files)?;
    if !parsed.problems.is_empty() {
        return Err(TemplateError::Invalid { problems: parsed.problems });
    }
    Ok((parsed.template, parsed.resolved))
}

/// A template read as far as it can be: what `parse_collecting` gives.
#[derive(Debug, Clone)]
pub struct Parsed {
    /// Every readable part; the broken ones as `incomplete` says.
    pub template: Template,
    /// The resolved template as JSON text, when the environment or files changed it.
    pub resolved: Option<String>,
    /// The tree after the environment and files were applied (for the lines of problems).
    pub root: Node,
    /// Every structural problem (environment application included), each with its line.
    pub problems: Vec<String>,
    pub incomplete: Incomplete,
    /// What the text was accepted with (`yaml::Document::warnings`: keys written twice).
    pub warnings: Vec<String>,
}

/// `parse_template_in` that goes on past structural problems, so that the rest of the template
/// can still be checked: only an oversized text or a YAML syntax error stops it.
pub fn parse_collecting(
    text: &str,
    environment: &Environment,
    files: &Map<String, Value>,
) -> Result<Parsed, TemplateError> {
    let limit = TEMPLATE_LIMIT.load(Ordering::Relaxed);
    if text.len() > limit {
        return Err(TemplateError::TooLarge { size: text.len(), limit });
    }
    let document = yaml::parse_with_warnings(text)?;
    let warnings = document.warnings();
    let mut root = document.root;
    let mut problems = environment::apply(&mut root, environment, files);
    let (mut template, found, incomplete) = from_tree_collecting(&root);
    let echoes = refused_mapping_echoes(&root, environment);
    problems.extend(found.into_iter().filter(|problem| !echoes.contains(problem)));
    environment::apply_parameter_defaults(&mut template, environment);
    let changed = !environment.is_empty() || !files.is_empty();
    let resolved = changed.then(|| root.to_value().to_string());
    Ok(Parsed { template, resolved, root, problems, incomplete, warnings })
}

/// The unknown-type problems that only repeat a refused `resource_registry` entry (the type it
/// meant to map), exactly as `resource_type` words them: the refusal is reported instead.
fn refused_mapping_echoes(root: &Node, environment: &Environment) -> Vec<String> {
    let Body::Mapping(sections) = &root.body else { return Vec::new() };
    let resources = sections.iter().filter(|section| section.key == "resources");
    let items = resources.filter_map(|section| match &section.value.body {
        Body::Mapping(items) => Some(items),
        _ => None,
    });
    let mut echoes = Vec::new();
    for item in items.flatten() {
        let Body::Mapping(fields) = &item.value.body else { continue };
        for field in fields.iter().filter(|field| field.key == "type") {
            if let Body::Scalar(Value::String(kind)) = &field.value.body
                && environment.refused_mapping(&item.key, kind)
            {
                echoes.push(format!("{} (line {})", type_names::unknown_type(&item.key, kind), field.value.line));
            }
        }
    }
    echoes
}

/// `parse_template_in` on a parsed tree (which the environment and files change); provider
/// templates are parsed this way too, each with its own version.
pub(super) fn parse_tree_in(
    root: &mut Node,
    environment: &Environment,
    files: &Map<String, Value>,
) -> Result<Template, TemplateError> {
    let mut problems = environment::apply(root, environment, files);
    let mut template = match from_tree(root) {
        Ok(template) if problems.is_empty() => template,
        Ok(_) => return Err(TemplateError::Invalid { problems }),
        Err(TemplateError::Invalid { problems: more }) => {
            problems.extend(more);
            return Err(TemplateError::Invalid { problems });
        }
        Err(other) => return Err(other),
    };
    environment::apply_parameter_defaults(&mut template, environment);
    Ok(template)
}

/// Parses a template the engine stored (`parse_template_in`'s resolved text may be larger than
/// the template limit by what get_file added), or the flattened form of one with nested
/// stacks (`nested::stored`).
pub fn parse_stored_template(text: &str) -> Result<Template, TemplateError> {
    let root = yaml::parse(text)?;
    stored::read(&root).unwrap_or_else(|| from_tree(&root))
}

/// The template, or every structural problem.
fn from_tree(root: &Node) -> Result<Template, TemplateError> {
    let (template, problems, _) = from_tree_collecting(root);
    if problems.is_empty() { Ok(template) } else { Err(TemplateError::Invalid { problems }) }
}

/// The template as far as it can be read, every structural problem, and what is incomplete.
fn from_tree_collecting(root: &Node) -> (Template, Vec<String>, Incomplete) {
    let mut template =
        Template { version: String::new(), description: None, parameters: vec![], resources: vec![], outputs: vec![] };
    let mut incomplete = Incomplete::default();
    let Body::Mapping(entries) = &root.body else {
        let problem = "the template must be a YAML mapping (or a JSON object)".to_owned();
        return (template, vec![problem], incomplete);
    };
    let mut problems = Vec::new();
    // Functions and conditions depend on the version, wherever in the document it is written.
    let version = entries
        .iter()
        .find(|entry| entry.key == "heat_template_version")
        .and_then(|entry| parse_version(&entry.value).ok())
        .and_then(|version| Version::parse(&version))
        .unwrap_or(Version::LATEST);
    let conditions = conditions_section(entries, version, &mut problems);
    let names = (version == Version::V2013_05_23).then(|| ref_names(entries));
    let dialect = Dialect { version, conditions: Some(&conditions), stored: false, names: names.as_ref() };
    let groups = sections(entries, &dialect, &mut template, &mut incomplete, &mut problems);
    if let Some(groups) = groups {
        parameter_groups(groups, &template, &incomplete, &mut problems);
    }
    if !entries.iter().any(|entry| entry.key == "heat_template_version") {
        problems.insert(0, "heat_template_version is required".to_owned());
    }
    (template, problems, incomplete)
}

/// Reads each top-level section into `template`; returns `parameter_groups`, which is checked
/// once the parameters are known. A parameter or resource whose definition is broken is
/// recorded in `incomplete` (a resource is kept as far as it could be read).
fn sections<'a>(
    entries: &'a [Entry],
    dialect: &Dialect,
    template: &mut Template,
    incomplete: &mut Incomplete,
    problems: &mut Vec<String>,
) -> Option<&'a Node> {
    let mut groups = None;
    for entry in entries {
        match entry.key.as_str() {
            "heat_template_version" => match parse_version(&entry.value) {
                Ok(version) => template.version = version,
                Err(problem) => problems.push(problem),
            },
            "description" => template.description = text_value(&entry.value, "description", problems),
            "parameters" => {
                let parse = |item: &Entry, problems: &mut Vec<String>| {
                    let parsed = parse_parameter(item, problems);
                    if parsed.is_none() {
                        incomplete.parameters.insert(item.key.clone());
                    }
                    parsed
                };
                template.parameters = section(entry, parse, problems)
            }
            "resources" => {
                let parse = |item: &Entry, problems: &mut Vec<String>| {
                    let (resource, complete) = parse_resource(item, dialect, problems);
                    if !complete {
                        incomplete.resources.insert(item.key.clone());
                    }
                    resource
                };
                template.resources = section(entry, parse, problems)
            }
            "outputs" => {
                template.outputs = section(entry, |item, problems| parse_output(item, dialect, problems), problems)
            }
            // A UI hint, but checked as heat.engine.parameter_groups.ParameterGroups.validate.
            "parameter_groups" => groups = Some(&entry.value),
            // Read before the resources and outputs that name them.
            "conditions" => {}
            "AWSTemplateFormatVersion" => {
                problems.push("only HOT templates are supported, not CloudFormation ones".to_owned())
            }
            other => problems.push(format!("unknown top-level key \"{other}\" (line {})", entry.line)),
        }
    }
    groups
}

/// The resource and parameter names 2013-05-23's `Ref` tells apart.
fn ref_names(entries: &[Entry]) -> Names {
    let keys = |section: &str| -> std::collections::BTreeSet<String> {
        match entries.iter().find(|entry| entry.key == section).map(|entry| &entry.value.body) {
            Some(Body::Mapping(items)) => items.iter().map(|item| item.key.clone()).collect(),
            _ => Default::default(),
        }
    };
    let mut parameters = keys("parameters");
    parameters.extend(super::PSEUDO_PARAMETERS.iter().map(|name| (*name).to_owned()));
    Names { resources: keys("resources"), parameters }
}

fn parse_version(node: &Node) -> Result<String, String> {
    match &node.body {
        Body::Scalar(Value::String(version)) if SUPPORTED_VERSIONS.contains(&version.as_str()) => Ok(version.clone()),
        _ => {
            Err(format!("heat_template_version must be one of {} (line {})", SUPPORTED_VERSIONS.join(", "), node.line))
        }
    }
}

/// A top-level mapping of named items (null counts as empty), parsed item by item.
fn section<T>(
    entry: &Entry,
    mut parse: impl FnMut(&Entry, &mut Vec<String>) -> Option<T>,
    problems: &mut Vec<String>,
) -> Vec<(String, T)> {
    match &entry.value.body {
        Body::Scalar(Value::Null) => Vec::new(),
        Body::Mapping(items) => {
            items.iter().filter_map(|item| parse(item, problems).map(|parsed| (item.key.clone(), parsed))).collect()
        }
        _ => {
            problems.push(format!("{} must be a mapping (line {})", entry.key, entry.value.line));
            Vec::new()
        }
    }
}

/// A resource as far as it can be read, and whether it is complete: one whose type is unknown
/// or whose properties could not all be read is kept (as an `OS::Heat::None` placeholder when
/// its type is unknown) so that its references are still checked, but it is not complete
/// (`Incomplete`). A misnamed one, or one that is no mapping, is not kept.
fn parse_resource(entry: &Entry, dialect: &Dialect, problems: &mut Vec<String>) -> (Option<Resource>, bool) {
    let name = &entry.key;
    let well_named = !name.is_empty() && !name.contains('/');
    if !well_named {
        problems.push(format!(
            "resource \"{name}\": a resource name must be non-empty and contain no \"/\" (line {})",
            entry.line
        ));
    }
    let Some(fields) = definition(entry, "resource", problems) else { return (None, false) };
    let mut resource = Resource {
        kind: ResourceType::SoftwareConfig,
        properties: vec![],
        depends_on: vec![],
        condition: None,
        line: entry.line,
        nested: None,
        policies: Policies::default(),
        stack: None,
    };
    let mut kind = None;
    let mut written = policy::Written { deletion_policy: None, update_policy: None, metadata: None };
    for field in fields {
        match field.key.as_str() {
            "type" => match provider::nested_type(&field.value) {
                // A placeholder kind: `nested::expand` replaces the resource by what it holds.
                Some(nested) => {
                    kind = Some(ResourceType::None);
                    resource.nested = Some(Box::new(provider::definition(nested, name, fields, dialect, problems)));
                }
                None => kind = resource_type(name, &field.value, problems),
            },
            "properties" => resource.properties = properties(name, &field.value, dialect, problems),
            "condition" => resource.condition = condition(&format!("resource {name}"), field, dialect, problems),
            "depends_on" => resource.depends_on = depends_on(name, &field.value, problems),
            // Heat allows a description on a resource; it has no effect.
            "description" => {}
            // Accepted and kept out of the deployment: the shim publishes no resource metadata.
            // Its `anneal` key holds anneal's extensions (`policy::check`).
            "metadata" => {
                mapping_key(name, "metadata", &field.value, problems);
                written.metadata = Some(&field.value);
            }
            // Checked once the type is known (`policy::check`).
            "update_policy" => written.update_policy = Some(&field.value),
            "deletion_policy" => written.deletion_policy = Some(&field.value),
            "external_id" => problems.push(format!(
                "resource {name}: \"external_id\" is not supported: anneal-shim creates no physical resources \
                 to adopt (line {})",
                field.line
            )),
            other => problems.push(format!("resource {name}: unknown key \"{other}\" (line {})", field.line)),
        }
    }
    match kind {
        Some(kind) => resource.kind = kind,
        None if !fields.iter().any(|field| field.key == "type") => {
            problems.push(format!("resource {name}: type is required (line {})", entry.line))
        }
        None => {}
    }
    if kind.is_none() {
        resource.kind = ResourceType::None;
    }
    resource.policies = policies(name, kind, &resource, &written, dialect, problems);
    let complete = kind.is_some() && properties_read(fields, &resource) && well_named;
    (well_named.then_some(resource), complete)
}

/// The resource's update and deletion policies, checked once its type is known. An unknown
/// type is refused already; its policies are not checked against a guess.
fn policies(
    name: &str,
    kind: Option<ResourceType>,
    resource: &Resource,
    written: &policy::Written<'_>,
    dialect: &Dialect,
    problems: &mut Vec<String>,
) -> Policies {
    let group = resource.nested.as_ref().is_some_and(|nested| nested.kind == NestedKind::Group);
    let own_kind = if resource.nested.is_some() { None } else { kind };
    if own_kind.is_none() && resource.nested.is_none() {
        return Policies::default();
    }
    policy::check(name, own_kind, group, written, dialect, problems)
}

/// Whether every property the definition writes was read (none failed to parse).
fn properties_read(fields: &[Entry], resource: &Resource) -> bool {
    fields.iter().filter(|field| field.key == "properties").all(|field| match &field.value.body {
        Body::Mapping(items) => items.len() == resource.properties.len(),
        body => matches!(body, Body::Scalar(Value::Null)),
    })
}

fn resource_type(name: &str, node: &Node, problems: &mut Vec<String>) -> Option<ResourceType> {
    let Body::Scalar(Value::String(text)) = &node.body else {
        problems.push(format!("resource {name}: type must be a string (line {})", node.line));
        return None;
    };
    let kind = ResourceType::parse(text);
    if kind.is_none() {
        problems.push(format!("{} (line {})", type_names::unknown_type(name, text), node.line));
    }
    kind
}

/// `metadata` must be a mapping (null counts as absent).
fn mapping_key(name: &str, key: &str, node: &Node, problems: &mut Vec<String>) {
    if !matches!(node.body, Body::Mapping(_) | Body::Scalar(Value::Null)) {
        problems.push(format!("resource {name}: {key} must be a mapping (line {})", node.line));
    }
}

fn properties(name: &str, node: &Node, dialect: &Dialect, problems: &mut Vec<String>) -> Vec<(String, Expr)> {
    let fields = match &node.body {
        Body::Mapping(fields) => fields,
        Body::Scalar(Value::Null) => return Vec::new(),
        _ => {
            problems.push(format!("resource {name}: properties must be a mapping (line {})", node.line));
            return Vec::new();
        }
    };
    let mut parsed = Vec::new();
    for field in fields {
        match Expr::parse(&field.value.to_value(), dialect) {
            Ok(expr) => parsed.push((field.key.clone(), expr)),
            Err(error) => {
                problems.push(format!("resource {name}: property \"{}\": {error} (line {})", field.key, field.line))
            }
        }
    }
    parsed
}

fn depends_on(name: &str, node: &Node, problems: &mut Vec<String>) -> Vec<String> {
    let names: Option<Vec<String>> = match &node.body {
        Body::Scalar(Value::String(text)) => Some(vec![text.clone()]),
        Body::Scalar(Value::Null) => Some(Vec::new()),
        Body::Sequence(items) => items
            .iter()
            .map(|item| match &item.body {
                Body::Scalar(Value::String(text)) => Some(text.clone()),
                _ => None,
            })
            .collect(),
        _ => None,
    };
    let Some(names) = names else {
        problems.push(format!(
            "resource {name}: depends_on must be a resource name or a list of names (line {})",
            node.line
        ));
        return Vec::new();
    };
    let mut unique: Vec<String> = Vec::new();
    for dependency in names {
        if !unique.contains(&dependency) {
            unique.push(dependency);
        }
    }
    unique
}

fn parse_output(entry: &Entry, dialect: &Dialect, problems: &mut Vec<String>) -> Option<Output> {
    let name = &entry.key;
    let fields = definition(entry, "output", problems)?;
    let before = problems.len();
    let mut output = Output { description: None, value: Expr::Literal(Value::Null) };
    let mut has_value = false;
    let mut output_condition = None;
    for field in fields {
        match field.key.as_str() {
            "value" => {
                has_value = true;
                match Expr::parse(&field.value.to_value(), dialect) {
                    Ok(expr) => output.value = expr,
                    Err(error) => problems.push(format!("output {name}: {error} (line {})", field.line)),
                }
            }
            "description" => {
                output.description = text_value(&field.value, &format!("output {name}: description"), problems)
            }
            "condition" => output_condition = condition(&format!("output {name}"), field, dialect, problems),
            other => problems.push(format!("output {name}: unknown key \"{other}\" (line {})", field.line)),
        }
    }
    if !has_value {
        problems.push(format!("output {name}: value is required (line {})", entry.line));
    }
    // Heat gives an output whose condition is false no value (template_common.outputs).
    if let Some(condition) = output_condition {
        let value = std::mem::replace(&mut output.value, Expr::Literal(Value::Null));
        output.value = Expr::If {
            condition: Box::new(condition),
            then: Box::new(value),
            otherwise: Some(Box::new(Expr::Literal(Value::Null))),
        };
    }
    (problems.len() == before).then_some(output)
}

/// The `conditions` section (2016-10-14+), each definition resolved; problems reported.
fn conditions_section(entries: &[Entry], version: Version, problems: &mut Vec<String>) -> Conditions {
    let Some(entry) = entries.iter().find(|entry| entry.key == "conditions") else { return Conditions::default() };
    if !version.has_conditions() {
        // As Heat's template validation names an unknown section.
        problems.push(format!("The template section is invalid: conditions (line {})", entry.line));
        return Conditions::default();
    }
    match entry.value.to_value() {
        Value::Null => Conditions::default(),
        Value::Object(section) => {
            let (conditions, found) = Conditions::parse(&section, version);
            problems.extend(found.into_iter().map(|problem| format!("{problem} (line {})", entry.line)));
            conditions
        }
        _ => {
            problems.push(format!("conditions must be a mapping (line {})", entry.value.line));
            Conditions::default()
        }
    }
}

/// A resource's or output's `condition` (2016-10-14+): a name, a boolean or a condition function.
fn condition(owner: &str, field: &Entry, dialect: &Dialect, problems: &mut Vec<String>) -> Option<Expr> {
    if !dialect.version.has_conditions() {
        problems.push(format!(
            "{owner}: \"condition\" needs heat_template_version 2016-10-14 or later (line {})",
            field.line
        ));
        return None;
    }
    let value = field.value.to_value();
    let parsed = match (&value, dialect.conditions) {
        (Value::String(_) | Value::Bool(_) | Value::Object(_), Some(conditions)) => {
            conditions.condition(&value, dialect.version)
        }
        _ => Err(format!("Invalid condition {value}")),
    };
    parsed.map_err(|problem| problems.push(format!("{owner}: condition: {problem} (line {})", field.line))).ok()
}
