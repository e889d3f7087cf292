//! The whole check of a template, as `stack create|update` and `template validate` run it, with
//! every stage's problems together: parsing (environment and files applied), parameter values,
//! nested stacks, conditions, references, property schemas and registered servers. Only an
//! oversized text or a YAML syntax error stops it (there is nothing to check then); a part
//! that is broken is reported once and the rest is still checked (`Incomplete`). The problems
//! come back each once, located (the template line, and the resource, parameter or output),
//! sorted by line, at most `MAX_PROBLEMS` of them. A template that passes comes back with the
//! warnings its text was accepted with (duplicate keys, which Heat reads without a word).

use std::collections::{BTreeMap, HashMap, HashSet};

use serde_json::{Map, Value};

use super::environment::Environment;
use super::evaluate::ParameterScope;
use super::expr::budget::Budget;
use super::hot::{Parsed, parse_collecting};
use super::nested::MaxResources;
use super::servers::{ServerAddresses, check_server_attributes};
use super::validate::{Plan, apply_conditions, validate_incomplete};
use super::yaml::{Body, Node};
use super::{Template, nested, parameter_placeholder, resolve_parameters};

/// Most problems reported for one template; the rest are counted ("... and N more problems").
/// Reporting stays linear in the template's size either way; this keeps the answer readable.
pub const MAX_PROBLEMS: usize = 100;

/// What the check knows about servers.
pub enum Servers<'a> {
    /// The registered servers: a server name's addresses, `None` when it is not registered.
    Registered(&'a dyn Fn(&str) -> Option<ServerAddresses>),
    /// No registry (`template validate`): every server name is accepted, and a parameter
    /// without any value is checked with a placeholder of its type instead of being an error
    /// (Heat's validate does not ask for values).
    Offline,
}

/// A template to check, with what comes beside it.
pub struct Request<'a> {
    pub text: &'a str,
    pub environment: &'a Environment,
    /// Problems the environment had (`Environment::from_value_collecting`), reported with the rest.
    pub environment_problems: Vec<String>,
    pub files: &'a Map<String, Value>,
    /// The parameter values as texts, from the parsed template (`parameter_texts`).
    pub texts: &'a dyn Fn(&Template) -> BTreeMap<String, String>,
    /// The pseudo parameters' values (`OS::stack_name`, `OS::stack_id`, `OS::project_id`).
    pub pseudo: &'a [(&'a str, Value)],
    pub servers: Servers<'a>,
    /// Heat's `max_resources_per_stack`.
    pub max_resources: MaxResources,
    /// The evaluation budget (`EVALUATION_BUDGET`): the nested stacks' copies and what the
    /// parameters determine are checked within it.
    pub evaluation_budget: usize,
}

/// A template that passed every check.
#[derive(Debug, Clone)]
pub struct Checked {
    /// As parsed: the declared parameters, the resources before nested stacks are expanded.
    pub parsed: Template,
    /// The parameter values as texts (`Request::texts`).
    pub texts: BTreeMap<String, String>,
    /// With nested stacks expanded, when it had some.
    pub expanded: Option<Template>,
    /// Expanded, with conditions decided: what the engine stores and runs.
    pub template: Template,
    pub parameters: BTreeMap<String, Value>,
    pub plan: Plan,
    /// The template as JSON text when the environment or files changed it.
    pub resolved: Option<String>,
    /// The stack's resources, nested stacks counted as Heat counts them; deployment group
    /// members are not (they are counted when their group expands).
    pub resources: usize,
    /// What expanding the nested stacks spent of the evaluation budget (their copies are
    /// stored as the definitions of the resources they made).
    pub expansion_bytes: usize,
    /// What the template text was accepted with, one line each: its duplicate keys
    /// (`yaml::Document::warnings`), which Heat accepts without a word.
    pub warnings: Vec<String>,
}

/// Checks a template; every problem found, located and sorted, when it does not pass.
pub fn check_template(request: Request) -> Result<Checked, Vec<String>> {
    let Parsed { template: parsed, resolved, root, mut problems, mut incomplete, warnings } =
        parse_collecting(request.text, request.environment, request.files).map_err(|error| error.problems())?;
    problems.splice(0..0, request.environment_problems);
    let texts = (request.texts)(&parsed);
    let offline = matches!(request.servers, Servers::Offline);
    let template = if offline { with_placeholders(&parsed, &texts) } else { parsed.clone() };
    if offline {
        // Heat's validate checks no value: what a placeholder gives is not checked as one.
        let unvalued = parsed
            .parameters
            .iter()
            .filter(|(name, parameter)| parameter.default.is_none() && !texts.contains_key(name));
        incomplete.unvalued.extend(unvalued.map(|(name, _)| name.clone()));
    }
    let (mut parameters, found) = resolve(&template, &texts);
    problems.extend(found);
    parameters.extend(request.pseudo.iter().map(|(name, value)| ((*name).to_owned(), value.clone())));
    // One budget for the whole check: the nested stacks' copies, then what parameters determine.
    let budget = Budget::new(request.evaluation_budget);
    let limits = nested::Limits { max_resources: request.max_resources, budget: &budget };
    let (expanded, resources) =
        match nested::expand_within(&template, request.environment, request.files, &parameters, limits) {
            Ok(Some(expansion)) => (Some(expansion.template), expansion.resources),
            Ok(None) => (None, template.resources.len()),
            Err(found) => {
                problems.extend(found);
                // Reported: references to them are accepted, the rest is still checked.
                let unexpanded = template.resources.iter().filter(|(_, resource)| resource.nested.is_some());
                incomplete.resources.extend(unexpanded.map(|(name, _)| name.clone()));
                (None, template.resources.len())
            }
        };
    let expansion_bytes = budget.used();
    let base = expanded.as_ref().unwrap_or(&template);
    // When conditions cannot be decided, `validate` reports why with every other problem.
    let decided = apply_conditions(base, &parameters).unwrap_or_else(|_| base.clone());
    problems.extend(duplicate_names(&template, &decided));
    let (is_registered, attributes) = match request.servers {
        Servers::Registered(lookup) => {
            let attributes = check_server_attributes(&decided, &parameters, lookup);
            (Box::new(move |name: &str| lookup(name).is_some()) as Box<dyn Fn(&str) -> bool>, attributes)
        }
        Servers::Offline => (Box::new(|_: &str| true) as Box<dyn Fn(&str) -> bool>, Vec::new()),
    };
    let members = known_group_members(&decided, &parameters, &budget);
    if !request.max_resources.allows(resources.saturating_add(members)) {
        problems.push(request.max_resources.exceeded(Some(resources.saturating_add(members))));
    }
    match validate_incomplete(&decided, &parameters, &*is_registered, &incomplete, &budget) {
        Ok(plan) if problems.is_empty() && attributes.is_empty() => Ok(Checked {
            parsed,
            texts,
            expanded,
            template: decided,
            parameters,
            plan,
            resolved,
            resources,
            expansion_bytes,
            warnings,
        }),
        validated => {
            problems.extend(validated.err().unwrap_or_default());
            problems.extend(attributes);
            Err(report(&root, problems))
        }
    }
}

/// The members of the deployment groups whose `servers` parameters alone determine (a nested
/// stack each in Heat, counted against `max_resources_per_stack`); the others are counted when
/// their group expands.
fn known_group_members(template: &Template, parameters: &BTreeMap<String, Value>, budget: &Budget) -> usize {
    let scope = ParameterScope { parameters, budget: Some(budget) };
    let groups = template.resources.iter().filter(|(_, resource)| resource.kind.group_member().is_some());
    let servers = groups.filter_map(|(_, resource)| resource.property("servers")?.evaluate(&scope).ok());
    servers.filter_map(|servers| servers.as_object().map(Map::len)).fold(0, usize::saturating_add)
}

/// Typed values for the parameters: all of them, or the problems and the values of the
/// parameters that are fine on their own (what depends on the others stays unknown).
fn resolve(template: &Template, texts: &BTreeMap<String, String>) -> (BTreeMap<String, Value>, Vec<String>) {
    let problems = match resolve_parameters(template, texts) {
        Ok(values) => return (values, Vec::new()),
        Err(problems) => problems,
    };
    let mut values = BTreeMap::new();
    for (name, parameter) in &template.parameters {
        let alone = Template {
            version: template.version.clone(),
            description: None,
            parameters: vec![(name.clone(), parameter.clone())],
            resources: Vec::new(),
            outputs: Vec::new(),
        };
        let given: BTreeMap<String, String> =
            texts.get(name).map(|text| (name.clone(), text.clone())).into_iter().collect();
        if let Ok(mut value) = resolve_parameters(&alone, &given) {
            values.extend(value.remove(name).map(|value| (name.clone(), value)));
        }
    }
    (values, problems)
}

/// `template` with a placeholder default (`parameter_placeholder`) for each parameter that
/// has no value, its constraints dropped.
fn with_placeholders(template: &Template, texts: &BTreeMap<String, String>) -> Template {
    let mut placeholders = template.clone();
    for (name, parameter) in &mut placeholders.parameters {
        if parameter.default.is_none() && !texts.contains_key(name) {
            parameter.default = Some(parameter_placeholder(parameter.kind));
            parameter.constraints.clear();
        }
    }
    placeholders
}

/// The problems as a user reads them: each once, the ones that name a resource, parameter or
/// output of the template given the line of its name (unless they carry a line already),
/// sorted by that line, then by the line they carry (a problem of a nested stack's resource,
/// `outer/inner`, by the line of `outer`; problems of the whole template first), at most
/// `MAX_PROBLEMS`.
fn report(root: &Node, problems: Vec<String>) -> Vec<String> {
    let lines = declaration_lines(root);
    let mut seen = HashSet::new();
    let mut located: Vec<((usize, usize), String)> = problems
        .into_iter()
        .filter(|problem| seen.insert(problem.clone()))
        .map(|problem| {
            let declared = subject(&problem).and_then(|(kind, name)| {
                let outer = name.split('/').next().unwrap_or(name);
                let line = *lines.get(&(kind, outer.to_owned()))?;
                // A root resource's property problem: the line of the property.
                let property =
                    property_name(&problem).and_then(|property| lines.get(&(PROPERTY, format!("{outer}/{property}"))));
                Some((line, outer.len() == name.len(), property.copied()))
            });
            let written = written_line(&problem);
            match (declared, written) {
                (Some((line, true, property)), None) => {
                    let shown = property.unwrap_or(line);
                    ((line, shown), format!("{problem} (line {shown})"))
                }
                (Some((line, _, _)), written) => ((line, written.unwrap_or(line)), problem),
                (None, written) => ((written.unwrap_or(0), 0), problem),
            }
        })
        .collect();
    located.sort_by_key(|(line, _)| *line);
    let mut sorted: Vec<String> = located.into_iter().map(|(_, problem)| problem).collect();
    if sorted.len() > MAX_PROBLEMS {
        let more = sorted.len() - MAX_PROBLEMS;
        sorted.truncate(MAX_PROBLEMS);
        sorted.push(format!("... and {more} more problems"));
    }
    sorted
}

/// What a problem names: `resource NAME:` (or `resource "NAME":`), `parameter "NAME":`,
/// `output NAME:`.
fn subject(problem: &str) -> Option<(&'static str, &str)> {
    for kind in ["resource", "parameter", "output"] {
        let Some(rest) = problem.strip_prefix(kind).and_then(|rest| rest.strip_prefix(' ')) else { continue };
        let name = match rest.strip_prefix('"') {
            Some(quoted) => quoted.split_once("\":").map(|(name, _)| name),
            None => rest.split_once(':').map(|(name, _)| name),
        };
        return name.map(|name| (kind, name));
    }
    None
}

/// The property a resource's problem names: `resource NAME: property "PROPERTY": ...`.
fn property_name(problem: &str) -> Option<&str> {
    let (_, rest) = problem.split_once(": property \"")?;
    rest.split_once('"').map(|(property, _)| property)
}

/// The line a problem already states, `(line N)`.
fn written_line(problem: &str) -> Option<usize> {
    let (_, after) = problem.rsplit_once("(line ")?;
    after.split_once(')')?.0.parse().ok()
}

/// The kind under which `declaration_lines` keeps a resource's property, as `resource/property`.
const PROPERTY: &str = "property";

/// The line of each resource, parameter and output name in the template, and of each
/// resource's property names.
fn declaration_lines(root: &Node) -> HashMap<(&'static str, String), usize> {
    let mut lines = HashMap::new();
    let Body::Mapping(sections) = &root.body else { return lines };
    for section in sections {
        let kind = match section.key.as_str() {
            "resources" => "resource",
            "parameters" => "parameter",
            "outputs" => "output",
            _ => continue,
        };
        let Body::Mapping(items) = &section.value.body else { continue };
        for item in items {
            lines.insert((kind, item.key.clone()), item.line);
            let Body::Mapping(fields) = &item.value.body else { continue };
            let properties = fields.iter().filter(|field| kind == "resource" && field.key == "properties");
            for field in properties {
                let Body::Mapping(properties) = &field.value.body else { continue };
                let named = properties
                    .iter()
                    .map(|property| ((PROPERTY, format!("{}/{}", item.key, property.key)), property.line));
                lines.extend(named);
            }
        }
    }
    lines
}

/// Heat's Stack.validate: a resource may not share its name with a parameter (its message
/// prints the Python set of the names; sorted here).
fn duplicate_names(template: &Template, decided: &Template) -> Option<String> {
    let parameters: std::collections::BTreeSet<&str> =
        template.parameters.iter().map(|(name, _)| name.as_str()).collect();
    let duplicates: std::collections::BTreeSet<&str> =
        decided.resources.iter().map(|(name, _)| name.as_str()).filter(|name| parameters.contains(name)).collect();
    let quoted: Vec<String> = duplicates.iter().map(|name| format!("'{name}'")).collect();
    (!quoted.is_empty()).then(|| format!("Duplicate names {{{}}}", quoted.join(", ")))
}
