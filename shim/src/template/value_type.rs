//! `OS::Heat::Value`'s `type`: its `value` property read as a property of that type, with the
//! conversions and refusals of heat.engine.properties.Property (`_get_string`, `_get_number`,
//! `_get_list`, `_get_map`, `_get_bool`), as heat.engine.resources.openstack.heat.value.Value
//! declares it. Pure; used by validation (a literal value) and by the engine (a computed one).

use serde_json::{Number, Value};

use super::ParameterType;

/// The value as Heat's `type` makes it, or Heat's reason for refusing it. `kind` is the `type`
/// property (`None`: any value, unchanged).
pub fn value_as_type(kind: Option<&str>, value: Value) -> Result<Value, String> {
    match kind {
        None => Ok(value),
        Some("string") => match value {
            Value::String(_) => Ok(value),
            // Python's str() of a bool or an int; a float is not taken.
            Value::Bool(flag) => Ok(Value::String(if flag { "True" } else { "False" }.to_owned())),
            Value::Number(number) if number.is_i64() || number.is_u64() => Ok(Value::String(number.to_string())),
            Value::Null => Ok(Value::String(String::new())),
            other => Err(format!("Value must be a string; got {}", short(&other))),
        },
        Some("number") => match value {
            Value::Number(_) | Value::Bool(_) => Ok(value),
            Value::String(text) => number(&text),
            other => Err(format!("{} is not a number", short(&other))),
        },
        Some("comma_delimited_list") => match value {
            Value::Array(_) => Ok(value),
            Value::Null => Ok(Value::Array(vec![])),
            // Heat shows the list's refusal with repr: a text in quotes.
            other => Err(format!("\"{}\" is not a list", shortened(&python_repr(&other)))),
        },
        Some("json") => match value {
            Value::Object(_) => Ok(value),
            Value::Null => Ok(Value::Object(serde_json::Map::new())),
            other => Err(format!("\"{}\" is not a map", short(&other))),
        },
        Some("boolean") => match value {
            Value::Bool(_) => Ok(value),
            Value::Null => Ok(Value::Bool(false)),
            Value::String(text) => match text.to_lowercase().as_str() {
                "true" => Ok(Value::Bool(true)),
                "false" => Ok(Value::Bool(false)),
                lowered => Err(format!("\"{}\" is not a valid boolean", short(&Value::String(lowered.to_owned())))),
            },
            other => Err(format!("\"{}\" is not a valid boolean", short(&other))),
        },
        Some(other) => Err(format!("unknown type \"{other}\" (string, number, comma_delimited_list, json, boolean)")),
    }
}

/// The refusal of a value of `kind` computed from a hidden parameter (or, in the engine, a
/// random string), instead of the one `value_as_type` gives, which quotes the value.
pub fn hidden_refusal(kind: &str) -> String {
    format!("a value derived from a hidden parameter is not a valid {kind}")
}

/// heat.engine.constraints.Schema.str_to_num: an int if the text is one, else a float.
fn number(text: &str) -> Result<Value, String> {
    let trimmed = text.trim();
    if let Ok(integer) = trimmed.parse::<i64>() {
        return Ok(Value::Number(integer.into()));
    }
    match trimmed.parse::<f64>().ok().filter(|float| float.is_finite()).and_then(Number::from_f64) {
        Some(float) => Ok(Value::Number(float)),
        None => Err(format!("could not convert string to float: '{}'", short(&Value::String(text.to_owned())))),
    }
}

/// A value for an error message as Python's `str()` shows it (text as is, others as `repr`),
/// shortened.
fn short(value: &Value) -> String {
    match value {
        Value::String(text) => shortened(text),
        other => shortened(&python_repr(other)),
    }
}

/// Python's `repr` of a JSON value, as Heat's messages show values (`{'k': 'v'}`, `None`).
/// Depth is bounded by the parsers the value came through.
fn python_repr(value: &Value) -> String {
    match value {
        Value::Null => "None".to_owned(),
        Value::Bool(flag) => if *flag { "True" } else { "False" }.to_owned(),
        Value::Number(number) => number.to_string(),
        Value::String(text) => format!("'{}'", text.replace('\\', "\\\\").replace('\'', "\\'")),
        Value::Array(items) => format!("[{}]", items.iter().map(python_repr).collect::<Vec<_>>().join(", ")),
        Value::Object(map) => {
            let entries: Vec<String> = map
                .iter()
                .map(|(key, item)| format!("{}: {}", python_repr(&Value::String(key.clone())), python_repr(item)))
                .collect();
            format!("{{{}}}", entries.join(", "))
        }
    }
}

/// A text from the input as a message shows it: at most 80 characters, so that a hostile value
/// cannot flood the output.
pub(crate) fn shortened(text: &str) -> String {
    const SHOWN: usize = 80;
    match text.char_indices().nth(SHOWN) {
        Some((end, _)) => format!("{}...", &text[..end]),
        None => text.to_owned(),
    }
}

/// The value a parameter is given where a real one is not known (`template validate` without
/// `--param`, a nested parameter known only at run time): one that passes the checks a real
/// value would, a non-empty string (an empty one is an empty server name) and a positive number
/// (timeouts and counts must be at least 1).
pub fn parameter_placeholder(kind: ParameterType) -> Value {
    match kind {
        ParameterType::String => Value::String("validate".to_owned()),
        ParameterType::Number => Value::from(1),
        ParameterType::Json => Value::Object(serde_json::Map::new()),
        ParameterType::CommaDelimitedList => Value::Array(Vec::new()),
        ParameterType::Boolean => Value::Bool(false),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn conversions_follow_heats_properties() {
        let ok = |kind: &str, value: Value| value_as_type(Some(kind), value).unwrap();
        assert_eq!(ok("number", json!("42")), json!(42));
        assert_eq!(ok("number", json!(" 2.5 ")), json!(2.5));
        assert_eq!(ok("string", json!(7)), json!("7"));
        assert_eq!(ok("string", json!(true)), json!("True"));
        assert_eq!(ok("boolean", json!("TRUE")), json!(true));
        assert_eq!(ok("comma_delimited_list", json!(["a", 1])), json!(["a", 1]));
        assert_eq!(value_as_type(None, json!({"any": 1})).unwrap(), json!({"any": 1}));
    }

    #[test]
    fn refusals_name_the_value() {
        let error = |kind: &str, value: Value| value_as_type(Some(kind), value).unwrap_err();
        assert_eq!(error("number", json!("abc")), "could not convert string to float: 'abc'");
        assert_eq!(error("boolean", json!("yes")), "\"yes\" is not a valid boolean");
        assert_eq!(error("boolean", json!(1)), "\"1\" is not a valid boolean");
        assert_eq!(error("comma_delimited_list", json!("a,b")), "\"'a,b'\" is not a list");
        assert_eq!(error("comma_delimited_list", json!({"k": "v"})), "\"{'k': 'v'}\" is not a list");
        assert_eq!(error("string", json!({"a": [1, null]})), "Value must be a string; got {'a': [1, None]}");
        assert!(error("json", json!("{}")).contains("is not a map"));
        assert!(error("string", json!(2.5)).contains("Value must be a string"));
        assert!(error("number", json!("nan")).contains("could not convert"));
        assert!(error("number", json!("x".repeat(1000))).len() < 200);
    }
}
