//! A provider property whose value is known only at run time (a `get_attr` of a deployment's
//! output, say), converted as Heat hands it to the nested template's parameter: first as the
//! outer resource's property of the type heat.engine.properties.Schema.from_parameter gives it
//! (Property.get_value; lists and maps with `allow_conversion`; null is the type's empty value),
//! then as heat.engine.resources.template_resource.TemplateResource.child_params passes it (a
//! list joined with commas, a list of maps as `.member.<n>.<key>=<value>`), then parsed by the
//! nested parameter (heat.engine.parameters). The expansion wraps such a value in
//! `Function::NestedParameter` (stored as `NESTED_PARAMETER`); a refusal fails the resource that
//! reads it, with Heat's text (so does `NESTED_FAILURE`, a nested attribute Heat refuses when
//! it is read). The parameter's constraints are checked only for a value known
//! when the stack is validated. Imports nothing of `expr`, which calls it.

use serde_json::Value;

use crate::template::ParameterType;
use crate::template::value_type::{shortened, value_as_type};

/// The stored name of the wrapper; only the engine's stored form reads it as a function.
pub const NESTED_PARAMETER: &str = "anneal::nested_parameter";
/// The stored name of a nested attribute Heat refuses only when it is read (a nested output
/// the template lacks, a group member that is not there): `[message, [what it waits for]]`.
pub const NESTED_FAILURE: &str = "anneal::nested_failure";

/// The message a `NESTED_FAILURE` fails with, once what it waits for exists.
pub fn nested_failure(args: &Value) -> String {
    args.get(0).and_then(Value::as_str).unwrap_or("a nested attribute is incorrect").to_owned()
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
    /// The wrapper's own arguments are not `[type, resource, parameter, hidden, value]`.
    #[error("{NESTED_PARAMETER}: expected [type, resource, parameter, hidden, value]")]
    Arguments,
}

/// The wrapper's evaluated arguments `[type, resource, parameter, hidden, value]` to the value
/// the nested parameter has. The refusal of a `hidden` parameter's value does not show it.
pub fn nested_parameter(args: Value) -> Result<Value, ConversionError> {
    let Value::Array(mut args) = args else { return Err(ConversionError::Arguments) };
    let (Some(value), 5) = (args.pop(), args.len() + 1) else { return Err(ConversionError::Arguments) };
    let text = |value: &Value| value.as_str().map(str::to_owned).ok_or(ConversionError::Arguments);
    let kind = ParameterType::parse(&text(&args[0])?).ok_or(ConversionError::Arguments)?;
    let (resource, parameter) = (text(&args[1])?, text(&args[2])?);
    let Value::Bool(hidden) = args[3] else { return Err(ConversionError::Arguments) };
    let shown =
        |reason: String| if hidden { format!("the hidden value is not a valid {}", kind.name()) } else { reason };
    let property = as_property(kind, value).map_err(|reason| ConversionError::Property {
        resource: resource.clone(),
        parameter: parameter.clone(),
        reason: shown(reason),
    })?;
    let passed = passed(property).map_err(|reason| ConversionError::Passing { resource: resource.clone(), reason })?;
    as_parameter(kind, passed).map_err(|reason| ConversionError::Parameter {
        resource,
        parameter,
        reason: shown(reason),
    })
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

/// The wrapper's arguments for a parameter of `kind` of the outer resource `resource`; the
/// value is appended by the caller (an expression).
pub fn arguments(kind: ParameterType, resource: &str, parameter: &str, hidden: bool) -> [Value; 4] {
    [
        Value::String(kind.name().to_owned()),
        Value::String(resource.to_owned()),
        Value::String(parameter.to_owned()),
        Value::Bool(hidden),
    ]
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn converted(kind: ParameterType, value: Value) -> Result<Value, String> {
        let mut args = arguments(kind, "outer", "p", false).to_vec();
        args.push(value);
        nested_parameter(Value::Array(args)).map_err(|error| error.to_string())
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
        let hidden = nested_parameter(json!(["number", "outer", "p", true, "secret"])).unwrap_err().to_string();
        assert_eq!(
            hidden,
            "resources.outer: Property error: outer.Properties.p: the hidden value is not a valid number"
        );
    }
}
