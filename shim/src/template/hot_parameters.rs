//! The `parameters` and `parameter_groups` sections of a HOT document: each parameter's
//! declaration (type, default, constraints, flags) and Heat's checks of the groups. Part of
//! `hot`'s reading of the tree; parameter values are `parameters`'s concern.

use serde_json::Value;

use super::checks::Incomplete;
use super::fields::{definition, text_value};
use super::parameters::parse_constraints;
use super::yaml::{Body, Entry, Node};
use super::{Parameter, ParameterType, Template};

/// `parameter_groups`: a list of groups, each with a `parameters` list naming declared
/// parameters, no parameter in two groups (Heat's texts from heat.engine.parameter_groups).
pub(super) fn parameter_groups(node: &Node, template: &Template, incomplete: &Incomplete, problems: &mut Vec<String>) {
    let groups = match &node.body {
        Body::Sequence(groups) => groups,
        Body::Scalar(Value::Null) => return,
        _ => {
            return problems
                .push(format!("Parameter Groups error: The parameter_groups should be a list. (line {})", node.line));
        }
    };
    let mut grouped: Vec<&str> = Vec::new();
    for group in groups {
        let error = |message: String| format!("Parameter Groups error: {message} (line {})", group.line);
        let Body::Mapping(fields) = &group.body else {
            problems.push(error("each parameter group must be a mapping.".to_owned()));
            continue;
        };
        let parameters = fields.iter().find(|field| field.key == "parameters").map(|field| &field.value.body);
        let names = match parameters {
            None | Some(Body::Scalar(Value::Null)) => {
                problems.push(error("The parameters must be provided for each parameter group.".to_owned()));
                continue;
            }
            Some(Body::Sequence(names)) => names,
            Some(_) => {
                problems.push(error("The parameters of parameter group should be a list.".to_owned()));
                continue;
            }
        };
        for name in names {
            let Body::Scalar(Value::String(name)) = &name.body else {
                problems.push(error("a grouped parameter must be a parameter name.".to_owned()));
                continue;
            };
            if grouped.contains(&name.as_str()) {
                problems.push(error(format!("The {name} parameter must be assigned to one parameter group only.")));
            } else {
                grouped.push(name);
            }
            if template.parameter(name).is_none() && !incomplete.parameters.contains(name) {
                problems.push(error(format!("The grouped parameter {name} does not reference a valid parameter.")));
            }
        }
    }
}

pub(super) fn parse_parameter(entry: &Entry, problems: &mut Vec<String>) -> Option<Parameter> {
    let name = &entry.key;
    let fields = definition(entry, "parameter", problems)?;
    let before = problems.len();
    let mut kind = None;
    let mut parameter = Parameter {
        kind: ParameterType::String,
        default: None,
        description: None,
        hidden: false,
        immutable: false,
        constraints: vec![],
    };
    let mut constraints = None;
    for field in fields {
        let context = || format!("parameter \"{name}\": {} (line {})", field.key, field.line);
        match field.key.as_str() {
            "type" => match &field.value.body {
                Body::Scalar(Value::String(text)) => match ParameterType::parse(text) {
                    Some(parsed) => kind = Some(parsed),
                    None => problems.push(format!(
                        "parameter \"{name}\": unknown type \"{text}\" (one of string, number, json, \
                         comma_delimited_list, boolean) (line {})",
                        field.line
                    )),
                },
                _ => problems.push(format!("{} must be a string", context())),
            },
            "default" => parameter.default = Some(field.value.to_value()).filter(|value| !value.is_null()),
            "description" => parameter.description = text_value(&field.value, &context(), problems),
            "hidden" => match flag(&field.value) {
                Some(hidden) => parameter.hidden = hidden,
                None => problems.push(format!("{} must be true or false", context())),
            },
            "constraints" => constraints = Some(&field.value),
            "immutable" => match flag(&field.value) {
                Some(immutable) => parameter.immutable = immutable,
                None => problems.push(format!("{} must be true or false", context())),
            },
            // UI hints with no effect on deployment here.
            "label" | "tags" => {}
            other => problems.push(format!("parameter \"{name}\": unknown key \"{other}\" (line {})", field.line)),
        }
    }
    let Some(kind) = kind else {
        if problems.len() == before {
            problems.push(format!("parameter \"{name}\": type is required (line {})", entry.line));
        }
        return None;
    };
    parameter.kind = kind;
    if let Some(node) = constraints {
        parameter.constraints = parse_constraints(name, kind, node, problems);
    }
    (problems.len() == before).then_some(parameter)
}

/// A boolean written as YAML boolean or as the string "true"/"false".
pub(super) fn flag(node: &Node) -> Option<bool> {
    match &node.body {
        Body::Scalar(Value::Bool(flag)) => Some(*flag),
        Body::Scalar(Value::String(text)) => match text.to_ascii_lowercase().as_str() {
            "true" => Some(true),
            "false" => Some(false),
            _ => None,
        },
        _ => None,
    }
}
