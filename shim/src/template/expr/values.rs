//! Value helpers every function shares, kept below `evaluate` and `functions` so neither
//! imports the other for them: how Heat renders a value into a string (`render`), how messages
//! name a value's kind without showing it (`kind_name`), Heat's `str_replace` and the result size
//! cap.

use anneal_protocol::pyjson;
use serde_json::Value;

use super::EvalError;

/// Largest string `str_replace` or `list_join` may build.
pub const MAX_RESULT_BYTES: usize = 16 << 20;

/// A value as Heat puts it into a string: `None` is empty, scalars as Python's `str()`,
/// lists and maps as `json.dumps(value, sort_keys=True)`.
pub fn render(value: &Value) -> String {
    match value {
        Value::Null => String::new(),
        Value::String(text) => text.clone(),
        Value::Array(_) | Value::Object(_) => pyjson::dumps(&sort_keys(value), true),
        scalar => pyjson::python_str(scalar),
    }
}

fn sort_keys(value: &Value) -> Value {
    match value {
        Value::Array(items) => Value::Array(items.iter().map(sort_keys).collect()),
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_by(|left, right| left.0.cmp(right.0));
            Value::Object(entries.into_iter().map(|(key, item)| (key.clone(), sort_keys(item))).collect())
        }
        scalar => scalar.clone(),
    }
}

pub(in crate::template) fn too_large(function: &str) -> EvalError {
    invalid(format!("{function}: the result is larger than {MAX_RESULT_BYTES} bytes"))
}

pub(in crate::template) fn str_replace(template: Value, params: Value) -> Result<Value, EvalError> {
    let Value::String(template) = template else {
        return Err(invalid(format!("str_replace: template must be a string, not {}", kind_name(&template))));
    };
    let Value::Object(params) = params else {
        return Err(invalid(format!("str_replace: params must be a map, not {}", kind_name(&params))));
    };
    let mut pairs: Vec<(&str, String)> = params.iter().map(|(key, value)| (key.as_str(), render(value))).collect();
    if pairs.iter().any(|(placeholder, _)| placeholder.is_empty()) {
        return Err(invalid("str_replace: a placeholder must not be empty".into()));
    }
    // Heat replaces the longest placeholders first (a stable sort keeps the given order among
    // equal lengths), so "$var_long" is not eaten by "$var".
    pairs.sort_by_key(|pair| std::cmp::Reverse(pair.0.len()));
    replace_all(&template, &pairs).map(Value::String)
}

/// Heat's recursive `value.join(replace(part, rest) for part in text.split(placeholder))`,
/// iterative so the number of placeholders cannot overflow the stack.
fn replace_all(text: &str, pairs: &[(&str, String)]) -> Result<String, EvalError> {
    enum Work<'a> {
        Piece(&'a str, usize),
        Value(usize),
    }
    let mut out = String::new();
    let mut stack = vec![Work::Piece(text, 0)];
    while let Some(work) = stack.pop() {
        match work {
            Work::Value(index) => out.push_str(&pairs[index].1),
            Work::Piece(piece, level) => match (level..pairs.len()).find(|index| piece.contains(pairs[*index].0)) {
                None => out.push_str(piece),
                Some(index) => {
                    let parts: Vec<&str> = piece.split(pairs[index].0).collect();
                    // Pushed in reverse so they come off the stack in text order.
                    for (position, part) in parts.iter().enumerate().rev() {
                        stack.push(Work::Piece(part, index + 1));
                        if position > 0 {
                            stack.push(Work::Value(index));
                        }
                    }
                }
            },
        }
        if out.len() > MAX_RESULT_BYTES {
            return Err(too_large("str_replace"));
        }
    }
    Ok(out)
}

/// "a string", "a map": how messages name a value's kind without showing the value.
pub fn kind_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "a map",
    }
}

fn invalid(message: String) -> EvalError {
    EvalError::Invalid { message }
}

/// Python's `==` on JSON values: numbers compare by value and booleans are 0 and 1.
pub fn py_eq(left: &Value, right: &Value) -> bool {
    match (left, right) {
        (Value::Array(a), Value::Array(b)) => a.len() == b.len() && a.iter().zip(b).all(|(x, y)| py_eq(x, y)),
        (Value::Object(a), Value::Object(b)) => {
            a.len() == b.len() && a.iter().all(|(key, x)| b.get(key).is_some_and(|y| py_eq(x, y)))
        }
        (Value::Number(_) | Value::Bool(_), Value::Number(_) | Value::Bool(_)) => {
            python_number(left) == python_number(right)
        }
        _ => left == right,
    }
}

/// A JSON number or boolean as Python's arithmetic sees it (`True` is 1).
pub fn python_number(value: &Value) -> Option<f64> {
    match value {
        Value::Bool(flag) => Some(f64::from(u8::from(*flag))),
        Value::Number(number) => number.as_f64(),
        _ => None,
    }
}
