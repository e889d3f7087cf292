//! A provider property whose value is known only at run time (a `get_attr` of a deployment's
//! output, say), converted as Heat hands it to the nested template's parameter: first as the
//! outer resource's property of the type heat.engine.properties.Schema.from_parameter gives it
//! (Property.get_value; lists and maps with `allow_conversion`; null is the type's empty value),
//! then as heat.engine.resources.template_resource.TemplateResource.child_params passes it (a
//! list joined with commas, a list of maps as `.member.<n>.<key>=<value>`), then parsed by the
//! nested parameter (heat.engine.parameters). The expansion wraps such a value in
//! `Function::NestedParameter` (stored as `NESTED_PARAMETER`); a refusal fails the resource that
//! reads it, with Heat's text (so does `NESTED_FAILURE`, a nested attribute Heat refuses when
//! it is read). The nested parameter's constraints are checked on the converted value, with
//! Heat's texts (heat.engine.constraints). Imports nothing of `expr`, which calls it.

use serde_json::Value;

use anneal_protocol::pyjson;

use crate::template::parameters::check_constraint;
use crate::template::value_type::{shortened, value_as_type};
use crate::template::{Constraint, Parameter, ParameterType};

/// The stored name of the wrapper; only the engine's stored form reads it as a function.
pub const NESTED_PARAMETER: &str = "anneal::nested_parameter";
/// The stored name of a nested attribute Heat refuses only when it is read (a nested output
/// the template lacks, a group member that is not there): `[message, [what it waits for]]`.
pub const NESTED_FAILURE: &str = "anneal::nested_failure";

/// The message a `NESTED_FAILURE` fails with, once what it waits for exists.
pub fn nested_failure(args: &Value) -> String {
    args.get(0).and_then(Value::as_str).unwrap_or("a nested attribute is incorrect").to_owned()
}

/// Where `[type, resource, parameter, hidden, constraints, value]` has `hidden`.
pub const HIDDEN_ARGUMENT: usize = 3;

/// Whether the wrapper's evaluated arguments convert a `hidden` parameter's value (whose
/// refusals do not quote it).
pub fn converts_hidden(args: &Value) -> bool {
    args.get(HIDDEN_ARGUMENT) == Some(&Value::Bool(true))
}

/// Why Heat refuses the value, at which step.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ConversionError {
    /// The outer resource's property refused it (Heat's `StackValidationFailed`).
    #[error("resources.{resource}: Property error: {resource}.Properties.{parameter}: {reason}")]
    Property { resource: String, parameter: String, reason: String },
    /// `child_params` could not pass it (a Python `TypeError`).
    #[error("resources.{resource}: {reason}")]
    Passing { resource: String, reason: String },
    /// The nested parameter refused it.
    #[error("resources.{resource}: {resource}: Parameter '{parameter}' is invalid: {reason}")]
    Parameter { resource: String, parameter: String, reason: String },
    /// The wrapper's own arguments are not `[type, resource, parameter, hidden, constraints,
    /// value]`.
    #[error("{NESTED_PARAMETER}: expected [type, resource, parameter, hidden, constraints, value]")]
    Arguments,
}

/// The wrapper's evaluated arguments `[type, resource, parameter, hidden, constraints, value]`
/// to the value the nested parameter has. The refusal of a `hidden` parameter's value does not
/// show it.
pub fn nested_parameter(args: Value) -> Result<Value, ConversionError> {
    let Value::Array(mut args) = args else { return Err(ConversionError::Arguments) };
    let (Some(value), 6) = (args.pop(), args.len() + 1) else { return Err(ConversionError::Arguments) };
    let text = |value: &Value| value.as_str().map(str::to_owned).ok_or(ConversionError::Arguments);
    let kind = ParameterType::parse(&text(&args[0])?).ok_or(ConversionError::Arguments)?;
    let (resource, parameter) = (text(&args[1])?, text(&args[2])?);
    let Value::Bool(hidden) = args[HIDDEN_ARGUMENT] else { return Err(ConversionError::Arguments) };
    let constraints: Vec<Constraint> =
        serde_json::from_value(args[4].take()).map_err(|_| ConversionError::Arguments)?;
    let shown =
        |reason: String| if hidden { format!("the hidden value is not a valid {}", kind.name()) } else { reason };
    let property = as_property(kind, value).map_err(|reason| ConversionError::Property {
        resource: resource.clone(),
        parameter: parameter.clone(),
        reason: shown(reason),
    })?;
    // The property's schema carries the parameter's constraints (Schema.from_parameter), so
    // Heat refuses there, before passing the value on.
    if let Some((constraint, reason)) =
        constraints.iter().find_map(|constraint| Some((constraint, refusal(constraint, &property)?)))
    {
        // Heat's texts quote the value; a hidden one's refusal says only that a rule refused it.
        let reason = match (hidden, constraint.description()) {
            (true, None) => "the hidden value does not satisfy the parameter's constraints".to_owned(),
            _ => reason,
        };
        return Err(ConversionError::Property { resource, parameter, reason });
    }
    let passed = passed(property).map_err(|reason| ConversionError::Passing { resource: resource.clone(), reason })?;
    as_parameter(kind, passed).map_err(|reason| ConversionError::Parameter {
        resource,
        parameter,
        reason: shown(reason),
    })
}

/// Heat's text when `constraint` refuses `value` (the constraint's description if it has one,
/// else heat.engine.constraints' `_err_msg`); `None` when it accepts it. A custom constraint
/// names what the shim cannot look up, so it accepts (as at validation).
fn refusal(constraint: &Constraint, value: &Value) -> Option<String> {
    check_constraint(constraint, value).err()?;
    if let Some(description) = constraint.description() {
        return Some(description.to_owned());
    }
    let bound = |bound: Option<f64>| match bound {
        None => "None".to_owned(),
        Some(number) if number.fract() == 0.0 && number.abs() < 1e15 => format!("{}", number as i64),
        Some(number) => number.to_string(),
    };
    Some(match constraint {
        Constraint::Range { min, max, .. } => {
            format!("{} is out of range (min: {}, max: {})", pyjson::python_str(value), bound(*min), bound(*max))
        }
        Constraint::Length { min, max, .. } => format!(
            "length ({}) is out of range (min: {}, max: {})",
            length(value),
            bound(min.map(|min| min as f64)),
            bound(max.map(|max| max as f64))
        ),
        Constraint::AllowedValues { values, .. } => {
            let allowed: Vec<String> = values.iter().map(|allowed| pyjson::dumps(allowed, true)).collect();
            format!("{} is not an allowed value [{}]", pyjson::dumps(value, true), allowed.join(", "))
        }
        Constraint::AllowedPattern { pattern, .. } => {
            format!("\"{}\" does not match pattern \"{pattern}\"", pyjson::python_str(value))
        }
        Constraint::Custom { .. } => return None,
    })
}

/// Python's `len()` of a value a length constraint applies to.
fn length(value: &Value) -> usize {
    match value {
        Value::String(text) => text.chars().count(),
        Value::Array(items) => items.len(),
        Value::Object(map) => map.len(),
        _ => 0,
    }
}

/// Step one: the property of the parameter's type (Property.get_value).
fn as_property(kind: ParameterType, value: Value) -> Result<Value, String> {
    match (kind, value) {
        (ParameterType::Number, Value::Null) => Ok(Value::from(0)),
        // Schema.str_to_num: int() of a list or map.
        (ParameterType::Number, value @ (Value::Array(_) | Value::Object(_))) => Err(format!(
            "int() argument must be a string, a bytes-like object or a real number, not '{}'",
            if value.is_array() { "list" } else { "dict" }
        )),
        (ParameterType::CommaDelimitedList, Value::String(text)) => Ok(Value::Array(split(&text))),
        (ParameterType::Json, Value::String(text)) => Ok(Value::String(text)),
        // allow_conversion: a list goes on as its JSON text.
        (ParameterType::Json, Value::Array(items)) => Ok(Value::String(Value::Array(items).to_string())),
        (kind, value) => value_as_type(Some(kind.name()), value),
    }
}

/// Step two: what `child_params` passes (only lists change).
fn passed(value: Value) -> Result<Value, String> {
    let Value::Array(items) = value else { return Ok(value) };
    if items.first().is_some_and(Value::is_object) {
        let mut members = Vec::new();
        for (index, item) in items.iter().enumerate() {
            let Value::Object(entries) = item else {
                return Err(format!("'{}' object has no attribute 'items'", python_type(item)));
            };
            members.extend(entries.iter().map(|(key, value)| format!(".member.{index}.{key}={}", python_str(value))));
        }
        return Ok(Value::String(members.join(",")));
    }
    let mut texts = Vec::with_capacity(items.len());
    for (index, item) in items.iter().enumerate() {
        match item {
            Value::String(text) => texts.push(text.clone()),
            Value::Null => texts.push(String::new()),
            other => {
                return Err(format!("sequence item {index}: expected str instance, {} found", python_type(other)));
            }
        }
    }
    Ok(Value::String(texts.join(",")))
}

/// Step three: the nested parameter's parsing of what was passed.
fn as_parameter(kind: ParameterType, value: Value) -> Result<Value, String> {
    match (kind, value) {
        (ParameterType::CommaDelimitedList, Value::String(text)) => Ok(Value::Array(split(&text))),
        // JsonParam keeps an empty text as it is.
        (ParameterType::Json, Value::String(text)) if text.is_empty() => Ok(Value::String(text)),
        // The parser's detail is not shown: it may quote part of the value.
        (ParameterType::Json, Value::String(text)) => match serde_json::from_str::<Value>(&text) {
            Ok(value @ (Value::Object(_) | Value::Array(_))) => Ok(value),
            Ok(other) => {
                Err(format!("Value must be valid JSON: {} is not a map or list", shortened(&other.to_string())))
            }
            Err(_) => Err("Value must be valid JSON".to_owned()),
        },
        (_, value) => Ok(value),
    }
}

/// heat.common.param_utils.delim_string_to_list: split on commas, items kept as they are.
fn split(text: &str) -> Vec<Value> {
    if text.is_empty() { Vec::new() } else { text.split(',').map(|item| Value::String(item.to_owned())).collect() }
}

/// Python's type name of a JSON value, for its messages.
fn python_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "NoneType",
        Value::Bool(_) => "bool",
        Value::Number(number) if number.is_f64() => "float",
        Value::Number(_) => "int",
        Value::String(_) => "str",
        Value::Array(_) => "list",
        Value::Object(_) => "dict",
    }
}

/// Python's `str()` of a scalar in a `.member` entry (structures as JSON).
fn python_str(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        Value::Bool(flag) => if *flag { "True" } else { "False" }.to_owned(),
        Value::Null => "None".to_owned(),
        other => other.to_string(),
    }
}

/// The wrapper's arguments for the nested parameter `declared`, bound from the property
/// `parameter` of the outer resource `resource`; the value is appended by the caller (an
/// expression).
pub fn arguments(declared: &Parameter, resource: &str, parameter: &str) -> [Value; 5] {
    [
        Value::String(declared.kind.name().to_owned()),
        Value::String(resource.to_owned()),
        Value::String(parameter.to_owned()),
        Value::Bool(declared.hidden),
        serde_json::to_value(&declared.constraints).unwrap_or(Value::Array(Vec::new())),
    ]
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn declared(kind: ParameterType, constraints: Vec<Constraint>) -> Parameter {
        Parameter { kind, default: None, description: None, hidden: false, immutable: false, constraints }
    }

    fn checked(declared: &Parameter, value: Value) -> Result<Value, String> {
        let mut args = arguments(declared, "outer", "p").to_vec();
        args.push(value);
        nested_parameter(Value::Array(args)).map_err(|error| error.to_string())
    }

    fn converted(kind: ParameterType, value: Value) -> Result<Value, String> {
        checked(&declared(kind, Vec::new()), value)
    }

    /// Each expectation is Heat 27's text for the same refusal (heat.engine.constraints).
    #[test]
    fn constraints_refuse_run_time_values_with_heats_texts() {
        use ParameterType::*;
        let range = Constraint::Range { min: None, max: Some(10.0), description: None };
        let length = Constraint::Length { min: Some(2), max: None, description: None };
        let allowed = Constraint::AllowedValues { values: vec![json!("a"), json!("b")], description: None };
        let pattern = Constraint::AllowedPattern { pattern: "[a-z]+".into(), description: None };
        let described = Constraint::Range { min: Some(1.0), max: None, description: Some("at least one".into()) };
        let prefix = "resources.outer: Property error: outer.Properties.p: ";
        let cases = [
            (Number, range.clone(), json!(50), "50 is out of range (min: None, max: 10)"),
            (Number, range, json!("2.5"), ""),
            (String, length.clone(), json!("x"), "length (1) is out of range (min: 2, max: None)"),
            (CommaDelimitedList, length, json!("x"), "length (1) is out of range (min: 2, max: None)"),
            (String, allowed.clone(), json!("c"), "\"c\" is not an allowed value [\"a\", \"b\"]"),
            (CommaDelimitedList, allowed, json!("a,c"), "[\"a\", \"c\"] is not an allowed value [\"a\", \"b\"]"),
            (String, pattern.clone(), json!("A1"), "\"A1\" does not match pattern \"[a-z]+\""),
            (String, pattern, json!("abc"), ""),
            (Number, described, json!(0), "at least one"),
        ];
        for (kind, constraint, value, expected) in cases {
            let found = checked(&declared(kind, vec![constraint]), value.clone());
            match expected {
                "" => assert!(found.is_ok(), "{value}: {found:?}"),
                text => assert_eq!(found, Err(format!("{prefix}{text}")), "{value}"),
            }
        }
        let secret = Parameter {
            hidden: true,
            ..declared(Number, vec![Constraint::Range { min: None, max: Some(1.0), description: None }])
        };
        assert_eq!(
            checked(&secret, json!(7)),
            Err(format!("{prefix}the hidden value does not satisfy the parameter's constraints")),
            "a hidden value is not quoted"
        );
        let custom = Constraint::Custom { name: "nova.flavor".into(), description: None };
        assert_eq!(checked(&declared(String, vec![custom]), json!("m1")), Ok(json!("m1")), "not looked up");
    }

    /// Each expectation is what Heat 27 gave for the same value (tests/tests/heat_nested.rs
    /// checks a few of them against the real engine).
    #[test]
    fn values_are_converted_as_heat_passes_them() {
        use ParameterType::*;
        let cases = [
            (Number, json!("42"), json!(42)),
            (Number, json!("2.5"), json!(2.5)),
            (Number, json!(true), json!(true)),
            (Number, Value::Null, json!(0)),
            (CommaDelimitedList, json!("a, b,c"), json!(["a", " b", "c"])),
            (CommaDelimitedList, json!(""), json!([])),
            (CommaDelimitedList, json!(["x", null]), json!(["x", ""])),
            (CommaDelimitedList, json!([{"a": 1}]), json!([".member.0.a=1"])),
            (Json, json!("{\"k\": 2}"), json!({"k": 2})),
            (Json, json!([1, 2]), json!([1, 2])),
            (Json, json!(""), json!("")),
            (Boolean, json!("TRUE"), json!(true)),
            (String, json!(5), json!("5")),
            (String, json!(true), json!("True")),
        ];
        for (kind, value, expected) in cases {
            assert_eq!(converted(kind, value.clone()), Ok(expected), "{} {value}", kind.name());
        }
    }

    #[test]
    fn refusals_have_heats_text_and_name_the_outer_resource() {
        use ParameterType::*;
        let refused = |kind, value| converted(kind, value).unwrap_err();
        assert_eq!(
            refused(Number, json!("abc")),
            "resources.outer: Property error: outer.Properties.p: could not convert string to float: 'abc'"
        );
        assert!(refused(Number, json!([1])).ends_with("not 'list'"));
        assert_eq!(
            refused(CommaDelimitedList, json!([1, 2])),
            "resources.outer: sequence item 0: expected str instance, int found"
        );
        assert!(refused(CommaDelimitedList, json!(5)).ends_with("\"5\" is not a list"));
        assert_eq!(
            refused(Json, json!("notjson")),
            "resources.outer: outer: Parameter 'p' is invalid: Value must be valid JSON"
        );
        assert!(refused(Json, json!(5)).ends_with("\"5\" is not a map"));
        assert!(refused(Boolean, json!("yes")).ends_with("\"yes\" is not a valid boolean"));
        assert!(refused(String, json!(2.5)).ends_with("Value must be a string; got 2.5"));
        assert_eq!(nested_parameter(json!(["number", "outer"])), Err(ConversionError::Arguments));
        let hidden = nested_parameter(json!(["number", "outer", "p", true, [], "secret"])).unwrap_err().to_string();
        assert_eq!(
            hidden,
            "resources.outer: Property error: outer.Properties.p: the hidden value is not a valid number"
        );
    }
}
