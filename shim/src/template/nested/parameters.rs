//! A provider template's parameters bound to the outer resource's properties, as
//! heat.engine.resources.template_resource.TemplateResource.child_params passes them: a
//! property the template does not declare is an error, a required parameter without a
//! property is an error, and a value known now is converted to the parameter's type and
//! checked against its constraints; a value known only at run time is converted when it is
//! read (`convert`).
//! Also where provider templates are read from `files` (each parsed once per request).

use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;

use serde_json::Value;

use super::{Child, Expander, FACADE_PARAMETER, NestedError, convert, hidden_value, report};
use crate::template::expr::Expr;
use crate::template::expr::functions::Function;
use crate::template::hot;
use crate::template::yaml::{self, Body, Node};
use crate::template::{Parameter, ParameterType, Template, parameter_placeholder, resolve_parameters};

/// The nested parameters as expressions of the root's namespace.
pub(super) fn bind(
    ex: &mut Expander,
    child: &Child,
    file: &str,
    nested: &Template,
) -> Result<BTreeMap<String, Expr>, NestedError> {
    let mut problems = Vec::new();
    for (property, _) in &child.properties {
        if nested.parameter(property).is_none() {
            problems.push(NestedError::UnknownProperty {
                resource: child.flat.clone(),
                property: property.clone(),
                file: file.to_owned(),
            });
        }
    }
    let given = |name: &str| {
        child
            .properties
            .iter()
            .find(|(property, _)| property == name)
            .map(|(_, expr)| expr)
            .filter(|expr| !matches!(expr, Expr::Literal(Value::Null)))
    };
    let mut shape = Template { resources: Vec::new(), outputs: Vec::new(), ..nested.clone() };
    let mut texts = BTreeMap::new();
    let mut at_run_time = BTreeMap::new();
    // Known values to keep marked: a `hidden` parameter's, or one given a hidden value.
    let mut hidden = BTreeSet::new();
    for (name, parameter) in &mut shape.parameters {
        let (given, given_hidden) = unmarked(given(name));
        // A parameter given a hidden value is hidden too: its refusals must not quote it.
        parameter.hidden |= given_hidden || given.is_some_and(|expr| ex.reads_hidden(expr));
        if parameter.hidden {
            hidden.insert(name.clone());
        }
        match given {
            None if parameter.default.is_none() => {
                let problem = format!("Property error: Property {name} not assigned");
                problems.push(NestedError::Parameter { resource: child.flat.clone(), problem });
                parameter.default = Some(parameter_placeholder(parameter.kind));
                parameter.constraints.clear();
            }
            None => {}
            Some(Expr::Literal(value)) => match text(value, parameter.kind) {
                Ok(text) => {
                    texts.insert(name.clone(), text);
                }
                Err(problem) => {
                    let problem = match parameter.hidden {
                        true => format!("the hidden value is not a valid {}", parameter.kind.name()),
                        false => problem,
                    };
                    let problem = format!("Property error: {name}: {problem}");
                    problems.push(NestedError::Parameter { resource: child.flat.clone(), problem });
                }
            },
            Some(expr) => {
                at_run_time.insert(name.clone(), converted_at_run_time(parameter, &child.flat, name, expr));
                parameter.default = Some(parameter_placeholder(parameter.kind));
                parameter.constraints.clear();
            }
        }
    }
    match resolve_parameters(&shape, &texts) {
        Ok(values) if problems.is_empty() => {
            let mut binding: BTreeMap<String, Expr> = values
                .into_iter()
                .map(|(name, value)| {
                    let bound =
                        if hidden.contains(&name) { hidden_value(Expr::Literal(value)) } else { Expr::Literal(value) };
                    (name, bound)
                })
                .collect();
            binding.extend(at_run_time);
            Ok(binding)
        }
        Ok(_) => Err(report(ex, problems)),
        Err(found) => {
            problems.extend(
                found.into_iter().map(|problem| NestedError::Parameter { resource: child.flat.clone(), problem }),
            );
            Err(report(ex, problems))
        }
    }
}

/// A property given a value the expansion marked hidden (`hidden_value`) is known now all the
/// same: the value without its mark, and whether it had one.
fn unmarked(given: Option<&Expr>) -> (Option<&Expr>, bool) {
    match given {
        Some(Expr::Call { function: Function::HiddenValue, args }) if matches!(**args, Expr::Literal(_)) => {
            (Some(&**args), true)
        }
        other => (other, false),
    }
}

/// A value known only at run time, converted to the parameter's type when it is read
/// (`convert`): the wrapper's arguments are `[type, resource, parameter, hidden, constraints,
/// value]`; the constraints are checked then, as Heat checks the nested parameter.
fn converted_at_run_time(declared: &Parameter, resource: &str, parameter: &str, value: &Expr) -> Expr {
    let arguments = convert::arguments(declared, resource, parameter);
    let mut args: Vec<Expr> = arguments.into_iter().map(Expr::Literal).collect();
    args.push(value.clone());
    Expr::Call { function: Function::NestedParameter, args: Box::new(Expr::List(args)) }
}

/// A known property value as the parameter text Heat's child_params would pass: a list for
/// a comma_delimited_list joins with commas; other structures go as JSON.
fn text(value: &Value, kind: ParameterType) -> Result<String, String> {
    Ok(match (value, kind) {
        (Value::String(text), _) => text.clone(),
        // heat.engine.properties.Property._get_string: str() of a bool or number.
        (Value::Bool(flag), ParameterType::String) => if *flag { "True" } else { "False" }.to_owned(),
        (Value::Array(_) | Value::Object(_), ParameterType::String) => {
            return Err(format!("Value must be a string; got {value}"));
        }
        (Value::Array(items), ParameterType::CommaDelimitedList) => items
            .iter()
            .map(|item| match item {
                Value::String(text) => text.clone(),
                Value::Null => String::new(),
                other => other.to_string(),
            })
            .collect::<Vec<_>>()
            .join(","),
        (other, _) => other.to_string(),
    })
}

impl Expander<'_> {
    /// The provider template `file`, parsed with its own version once per request.
    pub(super) fn provider_template(&mut self, resource: &str, file: &str) -> Result<Rc<Template>, NestedError> {
        if !self.parsed.contains_key(file) {
            let parsed = match self.files.get(file).and_then(Value::as_str) {
                None => Err(vec![]),
                Some(text) => parse_provider(text, self).map(Rc::new),
            };
            self.parsed.insert(file.to_owned(), parsed);
        }
        match &self.parsed[file] {
            Ok(template) => Ok(template.clone()),
            Err(problems) if problems.is_empty() => {
                Err(NestedError::MissingTemplate { resource: resource.to_owned(), file: file.to_owned() })
            }
            Err(problems) => {
                let mut errors: Vec<NestedError> = problems
                    .iter()
                    .map(|problem| NestedError::Template {
                        resource: resource.to_owned(),
                        file: file.to_owned(),
                        problem: problem.clone(),
                    })
                    .collect();
                let last = errors.pop().unwrap_or(NestedError::TooLarge);
                self.problems.extend(errors);
                Err(last)
            }
        }
    }
}

fn parse_provider(text: &str, ex: &Expander) -> Result<Template, Vec<String>> {
    let mut root = yaml::parse(text).map_err(|error| vec![error.to_string()])?;
    let mut problems = Vec::new();
    // 2013-05-23 also has the CloudFormation spelling (later versions refuse it as Removed).
    let with_cfn = match &root.body {
        Body::Mapping(entries) => entries.iter().any(|entry| {
            entry.key == "heat_template_version" && entry.value.body == Body::Scalar(Value::from("2013-05-23"))
        }),
        _ => false,
    };
    facade_to_parameter(&mut root, with_cfn, &mut problems);
    match hot::parse_tree_in(&mut root, ex.environment, ex.files) {
        Ok(template) if problems.is_empty() => Ok(template),
        Ok(_) => Err(problems),
        Err(error) => {
            problems.extend(error.problems());
            Err(problems)
        }
    }
}

/// `{resource_facade: metadata}` becomes `{get_param: "anneal::resource_facade::metadata"}`,
/// which the rewrite answers from the outer resource (its argument checked there); with
/// `with_cfn`, `{Fn::ResourceFacade: Metadata}` too (heat.engine.cfn.functions.ResourceFacade:
/// `Metadata`, `DeletionPolicy`, `UpdatePolicy`). Depth is bounded by the YAML parser's.
fn facade_to_parameter(node: &mut Node, with_cfn: bool, problems: &mut Vec<String>) {
    match &mut node.body {
        Body::Scalar(_) => {}
        Body::Sequence(items) => items.iter_mut().for_each(|item| facade_to_parameter(item, with_cfn, problems)),
        Body::Mapping(entries)
            if entries.len() == 1
                && (entries[0].key == "resource_facade" || with_cfn && entries[0].key == "Fn::ResourceFacade") =>
        {
            let entry = &mut entries[0];
            let which = match (&entry.value.body, entry.key.as_str()) {
                (Body::Scalar(Value::String(which)), "resource_facade") => Some(which.clone()),
                (Body::Scalar(Value::String(which)), _) => cfn_facade(which).map(str::to_owned),
                _ => None,
            };
            match which {
                Some(which) => {
                    entry.key = "get_param".to_owned();
                    entry.value.body = Body::Scalar(Value::String(format!("{FACADE_PARAMETER}{which}")));
                }
                None => {
                    problems.push(match entry.key.as_str() {
                        "resource_facade" => {
                            format!("resource_facade: the argument must be a string (line {})", entry.line)
                        }
                        _ => format!(
                            "Incorrect arguments to \"Fn::ResourceFacade\" should be one of: Metadata, DeletionPolicy, UpdatePolicy (line {})",
                            entry.line
                        ),
                    });
                    node.body = Body::Scalar(Value::Null);
                }
            }
        }
        Body::Mapping(entries) => {
            entries.iter_mut().for_each(|entry| facade_to_parameter(&mut entry.value, with_cfn, problems))
        }
    }
}

/// `Fn::ResourceFacade`'s argument as `resource_facade` spells it.
fn cfn_facade(which: &str) -> Option<&'static str> {
    match which {
        "Metadata" => Some("metadata"),
        "DeletionPolicy" => Some("deletion_policy"),
        "UpdatePolicy" => Some("update_policy"),
        _ => None,
    }
}
