//! Parameters: reading `constraints` from the template, and turning the strings a user passes
//! (`--param K=V`) or the template's defaults into typed values that satisfy the constraints.
//! A hidden parameter's value never appears in a message; constraint messages never show
//! values at all (a constraint's `description`, when given, is the message, as in Heat).

pub(super) mod pattern;

use std::collections::BTreeMap;

use serde_json::{Number, Value};

use super::evaluate::render;
use super::yaml::{Body, Node};
use super::{Constraint, Parameter, ParameterType, Template};
use pattern::{Pattern, PatternError};

/// Typed values for every declared parameter, from `given` (strings) or the defaults.
/// Errors: one message per problem, each naming the parameter.
pub fn resolve_parameters(
    template: &Template,
    given: &BTreeMap<String, String>,
) -> Result<BTreeMap<String, Value>, Vec<String>> {
    let mut problems = Vec::new();
    for name in given.keys() {
        if !template.parameters.iter().any(|(declared, _)| declared == name) {
            problems.push(format!("unknown parameter \"{name}\""));
        }
    }
    let mut values = BTreeMap::new();
    for (name, parameter) in &template.parameters {
        let converted = match (given.get(name), &parameter.default) {
            (Some(text), _) => convert_text(parameter.kind, text).map_err(|reason| (reason, "the value")),
            (None, Some(default)) => convert_default(parameter.kind, default).map_err(|reason| (reason, "the default")),
            (None, None) => {
                problems.push(format!("parameter \"{name}\": no value"));
                continue;
            }
        };
        match converted {
            Ok(value) => {
                problems.extend(parameter.constraints.iter().filter_map(|constraint| {
                    check(constraint, &value).err().map(|refusal| constraint_message(name, constraint, refusal))
                }));
                if given.contains_key(name) {
                    problems.extend(default_problems(name, parameter));
                }
                values.insert(name.clone(), value);
            }
            Err((reason, subject)) => {
                problems.push(conversion_message(name, parameter, subject, given.get(name), &reason))
            }
        }
    }
    if problems.is_empty() { Ok(values) } else { Err(problems) }
}

/// Heat checks a default against the constraints even when a value is given (its
/// `Schema.validate` reads the default before the value): "Invalid default".
fn default_problems(name: &str, parameter: &Parameter) -> Vec<String> {
    let Some(default) = parameter.default.as_ref().and_then(|default| convert_default(parameter.kind, default).ok())
    else {
        return Vec::new();
    };
    let failed =
        parameter.constraints.iter().filter_map(|constraint| Some((constraint, check(constraint, &default).err()?)));
    failed
        .map(|(constraint, refusal)| {
            format!("parameter \"{name}\": invalid default: {}", constraint_reason(constraint, refusal))
        })
        .collect()
}

fn conversion_message(
    name: &str,
    parameter: &Parameter,
    subject: &str,
    given: Option<&String>,
    reason: &str,
) -> String {
    let shown = match (parameter.hidden, given, &parameter.default) {
        (true, _, _) => subject.to_owned(),
        (false, Some(text), _) => quote(text),
        (false, None, Some(default)) => format!("the default {}", quote(&render(default))),
        (false, None, None) => subject.to_owned(),
    };
    format!("parameter \"{name}\": {shown} {reason}")
}

/// A value quoted for a message, shortened so a huge value cannot flood the output.
fn quote(text: &str) -> String {
    const LIMIT: usize = 100;
    if text.chars().count() > LIMIT {
        let head: String = text.chars().take(LIMIT).collect();
        format!("\"{head}...\"")
    } else {
        format!("\"{text}\"")
    }
}

/// A constraint's description replaces the reason a value does not meet it; a pattern that
/// could not be decided within anneal's bounds says so whatever the description.
fn constraint_message(name: &str, constraint: &Constraint, refusal: Refusal) -> String {
    format!("parameter \"{name}\": {}", constraint_reason(constraint, refusal))
}

fn constraint_reason(constraint: &Constraint, refusal: Refusal) -> String {
    match (refusal, constraint.description()) {
        (Refusal::Unmet(_), Some(description)) => description.to_owned(),
        (Refusal::Unmet(reason) | Refusal::Undecided(reason), _) => reason,
    }
}

/// Why a value fails a constraint.
enum Refusal {
    /// It does not meet it (the text is the default message, without the value).
    Unmet(String),
    /// Whether it meets it is not known: a pattern past a backtracking bound.
    Undecided(String),
}

/// A user-supplied string as a value of `kind`.
pub fn convert_text(kind: ParameterType, text: &str) -> Result<Value, String> {
    match kind {
        ParameterType::String => Ok(Value::String(text.to_owned())),
        ParameterType::Number => parse_number(text),
        ParameterType::Boolean => parse_boolean(text),
        ParameterType::Json => parse_json(text),
        ParameterType::CommaDelimitedList if text.is_empty() => Ok(Value::Array(Vec::new())),
        // Items are not trimmed: Heat's param_utils.delim_string_to_list splits at each comma.
        ParameterType::CommaDelimitedList => {
            Ok(Value::Array(text.split(',').map(|item| Value::String(item.to_owned())).collect()))
        }
    }
}

/// A template default (already typed by YAML) as a value of `kind`.
pub fn convert_default(kind: ParameterType, value: &Value) -> Result<Value, String> {
    match (kind, value) {
        (_, Value::String(text)) => convert_text(kind, text),
        (ParameterType::String, Value::Number(_) | Value::Bool(_)) => Ok(Value::String(render(value))),
        (ParameterType::Number, Value::Number(_)) => Ok(value.clone()),
        (ParameterType::Boolean, Value::Bool(_)) => Ok(value.clone()),
        (ParameterType::Boolean, Value::Number(number)) => match number.as_f64() {
            Some(0.0) => Ok(Value::Bool(false)),
            Some(1.0) => Ok(Value::Bool(true)),
            _ => Err("is not a boolean".into()),
        },
        // JsonParam.parse round-trips a non-string default through JSON: any value stays.
        (ParameterType::Json, _) => Ok(value.clone()),
        (ParameterType::CommaDelimitedList, Value::Array(items)) => items
            .iter()
            .map(|item| match item {
                Value::Array(_) | Value::Object(_) => Err("is not a list of strings".to_owned()),
                // Heat's `str(item)`: null is `None`, booleans `True` and `False`.
                Value::Null => Ok(Value::String("None".to_owned())),
                scalar => Ok(Value::String(render(scalar))),
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Value::Array),
        (kind, _) => Err(format!("is not a valid {}", kind.name())),
    }
}

fn parse_number(text: &str) -> Result<Value, String> {
    let trimmed = text.trim();
    if let Ok(integer) = trimmed.parse::<i64>() {
        return Ok(Value::Number(integer.into()));
    }
    if let Ok(integer) = trimmed.parse::<u64>() {
        return Ok(Value::Number(integer.into()));
    }
    // Rust also reads "inf" and "NaN"; `from_f64` refuses them, as a JSON number must.
    trimmed.parse::<f64>().ok().and_then(Number::from_f64).map(Value::Number).ok_or_else(|| "is not a number".into())
}

/// As oslo_utils.strutils.bool_from_string(strict=True), which BooleanParam uses.
fn parse_boolean(text: &str) -> Result<Value, String> {
    match text.trim().to_lowercase().as_str() {
        "1" | "t" | "true" | "on" | "y" | "yes" => Ok(Value::Bool(true)),
        "0" | "f" | "false" | "off" | "n" | "no" => Ok(Value::Bool(false)),
        _ => Err("is not a boolean (true/false, yes/no, on/off, y/n, t/f, 1/0)".into()),
    }
}

/// As JsonParam.parse: any JSON value (maps and lists, but scalars too); an empty text is kept
/// as the empty string, as Heat keeps it.
fn parse_json(text: &str) -> Result<Value, String> {
    if text.is_empty() {
        return Ok(Value::String(String::new()));
    }
    // The parser's message is not shown: it may quote part of a hidden value.
    serde_json::from_str::<Value>(text).map_err(|_| "is not valid JSON".to_owned())
}

/// Checks one constraint; the error is the default message (without the value), or why the
/// pattern could not be decided.
pub fn check_constraint(constraint: &Constraint, value: &Value) -> Result<(), String> {
    check(constraint, value).map_err(|(Refusal::Unmet(reason) | Refusal::Undecided(reason))| reason)
}

fn check(constraint: &Constraint, value: &Value) -> Result<(), Refusal> {
    match constraint {
        Constraint::AllowedPattern { pattern, .. } => check_pattern(pattern, value),
        other => check_plain(other, value).map_err(Refusal::Unmet),
    }
}

/// Heat's AllowedPattern on a string, or on each item of a list (an item that is not a string
/// does not match).
fn check_pattern(pattern: &str, value: &Value) -> Result<(), Refusal> {
    let undecided = |error: PatternError| Refusal::Undecided(error.to_string());
    let compiled = Pattern::compile(pattern).map_err(undecided)?;
    let items = match value {
        Value::Array(items) => items.as_slice(),
        single => std::slice::from_ref(single),
    };
    for item in items {
        let matched = match item.as_str() {
            Some(text) => compiled.matches(text).map_err(undecided)?,
            None => false,
        };
        if !matched {
            return Err(Refusal::Unmet(format!("the value must match the pattern \"{pattern}\"")));
        }
    }
    Ok(())
}

fn check_plain(constraint: &Constraint, value: &Value) -> Result<(), String> {
    match constraint {
        Constraint::Length { min, max, .. } => {
            let length = match value {
                Value::String(text) => text.chars().count(),
                Value::Array(items) => items.len(),
                Value::Object(map) => map.len(),
                _ => return Ok(()),
            } as u64;
            let low = min.is_some_and(|min| length < min);
            let high = max.is_some_and(|max| length > max);
            if low || high {
                Err(format!("the length {}", bounds(min.map(|v| v as f64), max.map(|v| v as f64))))
            } else {
                Ok(())
            }
        }
        Constraint::Range { min, max, .. } => {
            let Some(number) = value.as_f64() else { return Ok(()) };
            let low = min.is_some_and(|min| number < min);
            let high = max.is_some_and(|max| number > max);
            if low || high { Err(format!("the value {}", bounds(*min, *max))) } else { Ok(()) }
        }
        Constraint::AllowedValues { values, .. } => {
            let allowed = |item: &Value| values.iter().any(|candidate| same_value(candidate, item));
            let valid = match value {
                Value::Array(items) => items.iter().all(allowed),
                single => allowed(single),
            };
            let listed: Vec<String> = values.iter().map(render).collect();
            if valid { Ok(()) } else { Err(format!("the value must be one of: {}", listed.join(", "))) }
        }
        // Checked by `check_pattern`.
        Constraint::AllowedPattern { .. } => Ok(()),
        // Needs what the shim knows about servers; `validate` checks the ones it can.
        Constraint::Custom { .. } => Ok(()),
    }
}

fn bounds(min: Option<f64>, max: Option<f64>) -> String {
    match (min, max) {
        (Some(min), Some(max)) => format!("must be in the range {} to {}", render(&number(min)), render(&number(max))),
        (Some(min), None) => format!("must be at least {}", render(&number(min))),
        (None, Some(max)) => format!("must be no greater than {}", render(&number(max))),
        (None, None) => "is out of range".into(),
    }
}

/// Shows whole numbers without a fractional part ("8", not "8.0").
fn number(value: f64) -> Value {
    if value.fract() == 0.0 && value.abs() < 9e15 {
        Value::Number((value as i64).into())
    } else {
        Number::from_f64(value).map_or(Value::Null, Value::Number)
    }
}

/// Equality as Heat compares allowed values: numbers numerically, booleans as booleans,
/// everything else by its string form (`allowed_values: [1, 2]` admits the string "1").
fn same_value(candidate: &Value, value: &Value) -> bool {
    match value {
        Value::Number(number) => {
            let wanted = number.as_f64();
            let offered = match candidate {
                Value::Number(candidate) => candidate.as_f64(),
                Value::String(text) => text.trim().parse().ok(),
                _ => None,
            };
            wanted.is_some() && wanted == offered
        }
        Value::Bool(flag) => match candidate {
            Value::Bool(candidate) => candidate == flag,
            Value::String(text) => parse_boolean(text).ok() == Some(Value::Bool(*flag)),
            _ => false,
        },
        other => render(candidate) == render(other),
    }
}

/// Reads a parameter's `constraints` list, checking each applies to the parameter's type.
pub(super) fn parse_constraints(
    name: &str,
    kind: ParameterType,
    node: &Node,
    problems: &mut Vec<String>,
) -> Vec<Constraint> {
    let items = match &node.body {
        Body::Sequence(items) => items.as_slice(),
        Body::Scalar(Value::Null) => &[],
        _ => {
            problems.push(format!("parameter \"{name}\": constraints must be a list (line {})", node.line));
            return Vec::new();
        }
    };
    let mut constraints = Vec::new();
    for item in items {
        match parse_constraint(item) {
            Ok(constraint) if applies(&constraint, kind) => constraints.push(constraint),
            Ok(constraint) => problems.push(format!(
                "parameter \"{name}\": constraint {} does not apply to a {} parameter (line {})",
                constraint_name(&constraint),
                kind.name(),
                item.line
            )),
            Err(problem) => problems.push(format!("parameter \"{name}\": {problem} (line {})", item.line)),
        }
    }
    constraints
}

fn constraint_name(constraint: &Constraint) -> &'static str {
    match constraint {
        Constraint::Length { .. } => "length",
        Constraint::Range { .. } => "range",
        Constraint::AllowedValues { .. } => "allowed_values",
        Constraint::AllowedPattern { .. } => "allowed_pattern",
        Constraint::Custom { .. } => "custom_constraint",
    }
}

fn applies(constraint: &Constraint, kind: ParameterType) -> bool {
    use ParameterType::{Boolean, CommaDelimitedList, Json, Number, String};
    match constraint {
        Constraint::Length { .. } => matches!(kind, String | CommaDelimitedList | Json),
        Constraint::Range { .. } => kind == Number,
        Constraint::AllowedValues { .. } => matches!(kind, String | Number | CommaDelimitedList | Boolean),
        Constraint::AllowedPattern { .. } => matches!(kind, String | CommaDelimitedList),
        Constraint::Custom { .. } => true,
    }
}

fn parse_constraint(item: &Node) -> Result<Constraint, String> {
    let Body::Mapping(fields) = &item.body else { return Err("each constraint must be a mapping".into()) };
    let mut description = None;
    let mut rule = None;
    for field in fields {
        match field.key.as_str() {
            "description" => match &field.value.body {
                Body::Scalar(Value::String(text)) => description = Some(text.clone()),
                _ => return Err("a constraint description must be a string".into()),
            },
            "length" | "range" | "allowed_values" | "allowed_pattern" | "custom_constraint" if rule.is_some() => {
                return Err("each constraint must have exactly one rule".into());
            }
            "length" | "range" | "allowed_values" | "allowed_pattern" | "custom_constraint" => rule = Some(field),
            unsupported @ "modulo" => {
                return Err(format!("the {unsupported} constraint is not supported"));
            }
            other => return Err(format!("unknown constraint \"{other}\"")),
        }
    }
    let Some(rule) = rule else {
        return Err("a constraint needs a rule (length, range, allowed_values or allowed_pattern)".into());
    };
    match rule.key.as_str() {
        "length" => {
            let (min, max) = bounds_of(&rule.value, "length")?;
            let whole = |bound: Option<f64>| match bound {
                Some(value) if value < 0.0 || value.fract() != 0.0 => {
                    Err("length bounds must be non-negative integers".to_owned())
                }
                other => Ok(other.map(|value| value as u64)),
            };
            Ok(Constraint::Length { min: whole(min)?, max: whole(max)?, description })
        }
        "range" => {
            let (min, max) = bounds_of(&rule.value, "range")?;
            Ok(Constraint::Range { min, max, description })
        }
        "allowed_values" => match &rule.value.body {
            Body::Sequence(values) if !values.is_empty() => {
                let values: Vec<Value> = values.iter().map(Node::to_value).collect();
                if values.iter().any(|value| value.is_array() || value.is_object()) {
                    return Err("allowed_values must be a list of scalars".into());
                }
                Ok(Constraint::AllowedValues { values, description })
            }
            _ => Err("allowed_values must be a non-empty list".into()),
        },
        "custom_constraint" => match &rule.value.body {
            Body::Scalar(Value::String(name)) if !name.is_empty() => {
                Ok(Constraint::Custom { name: name.clone(), description })
            }
            _ => Err("custom_constraint must be a constraint name".into()),
        },
        _ => match &rule.value.body {
            // Heat compiles the pattern when it reads the schema: a bad one refuses the template.
            Body::Scalar(Value::String(pattern)) => {
                Pattern::compile(pattern).map_err(|error| error.to_string())?;
                Ok(Constraint::AllowedPattern { pattern: pattern.clone(), description })
            }
            _ => Err("allowed_pattern must be a string".into()),
        },
    }
}

/// The `min`/`max` of a length or range rule: at least one, numbers, min not above max.
fn bounds_of(node: &Node, rule: &str) -> Result<(Option<f64>, Option<f64>), String> {
    let Body::Mapping(fields) = &node.body else { return Err(format!("{rule} must be a mapping with min and/or max")) };
    let (mut min, mut max) = (None, None);
    for field in fields {
        let bound = match &field.value.body {
            Body::Scalar(Value::Number(number)) => number.as_f64(),
            Body::Scalar(Value::String(text)) => text.trim().parse::<f64>().ok().filter(|value| value.is_finite()),
            _ => None,
        };
        let bound = bound.ok_or_else(|| format!("{rule} {} must be a number", field.key))?;
        match field.key.as_str() {
            "min" => min = Some(bound),
            "max" => max = Some(bound),
            other => return Err(format!("{rule} has an unknown key \"{other}\"")),
        }
    }
    match (min, max) {
        (None, None) => Err(format!("{rule} needs min and/or max")),
        (Some(low), Some(high)) if low > high => Err(format!("{rule} min is greater than max")),
        bounds => Ok(bounds),
    }
}
