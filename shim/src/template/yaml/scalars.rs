//! Scalar typing as Heat's loader (PyYAML's YAML 1.1 resolvers) does it: plain scalars by the
//! implicit resolvers, quoted and block scalars as strings, core tags forcing a type, and a JSON
//! text's numbers as `json.loads` reads them.

use std::sync::LazyLock;

use regex::Regex;
use serde_json::{Number, Value};
use yaml_rust2::parser::Tag;
use yaml_rust2::scanner::TScalarStyle;

use super::YamlError;

/// The YAML core-schema tag prefix (`!!`).
pub(super) const CORE_TAG: &str = "tag:yaml.org,2002:";

pub(super) fn tag_text(tag: &Tag) -> String {
    if tag.handle == CORE_TAG { format!("!!{}", tag.suffix) } else { format!("{}{}", tag.handle, tag.suffix) }
}

/// A JSON number literal (a plain scalar of a JSON text).
pub(super) fn json_number(text: &str) -> Option<Value> {
    let first = text.bytes().next()?;
    if !(first.is_ascii_digit() || first == b'-') {
        return None;
    }
    // Validate as JSON, then store as serde_json would without arbitrary precision.
    serde_json::from_str::<Number>(text).ok()?;
    if !text.contains(['.', 'e', 'E']) {
        if let Ok(integer) = text.parse::<i64>() {
            return Some(Value::Number(integer.into()));
        }
        if let Ok(integer) = text.parse::<u64>() {
            return Some(Value::Number(integer.into()));
        }
    }
    text.parse::<f64>().ok().and_then(Number::from_f64).map(Value::Number)
}

/// Types one scalar: quoted and block scalars are strings; plain ones follow PyYAML's implicit
/// resolvers; core tags force a type.
pub(super) fn scalar(
    text: String,
    style: TScalarStyle,
    tag: Option<&Tag>,
    line: usize,
    column: usize,
) -> Result<Value, YamlError> {
    let Some(tag) = tag else {
        return Ok(if style == TScalarStyle::Plain { resolve_owned(text) } else { Value::String(text) });
    };
    // "!" alone is YAML's non-specific tag: the value stays a string.
    if tag.handle.is_empty() && tag.suffix == "!" {
        return Ok(Value::String(text));
    }
    let unsupported = || YamlError::UnsupportedTag { tag: tag_text(tag), line, column };
    if tag.handle != CORE_TAG {
        return Err(unsupported());
    }
    let resolved = resolve_plain(&text);
    let accepted = match tag.suffix.as_str() {
        "str" => return Ok(Value::String(text)),
        "int" => resolved.as_i64().is_some() || resolved.as_u64().is_some(),
        "float" => resolved.is_number(),
        "bool" => resolved.is_boolean(),
        "null" => resolved.is_null(),
        _ => false,
    };
    if accepted { Ok(resolved) } else { Err(unsupported()) }
}

/// PyYAML's YAML 1.1 implicit typing of a plain scalar, minus sexagesimal numbers and with
/// timestamps kept as strings (as Heat's loader does). Non-finite floats stay strings because
/// JSON cannot hold them.
pub fn resolve_plain(text: &str) -> Value {
    resolve_owned(text.to_owned())
}

pub(super) fn resolve_owned(text: String) -> Value {
    match text.as_str() {
        "" | "~" | "null" | "Null" | "NULL" => return Value::Null,
        "true" | "True" | "TRUE" | "yes" | "Yes" | "YES" | "on" | "On" | "ON" => return Value::Bool(true),
        "false" | "False" | "FALSE" | "no" | "No" | "NO" | "off" | "Off" | "OFF" => return Value::Bool(false),
        _ => {}
    }
    // Most scalars are words; only these can start a number.
    let numeric_start = text.bytes().next().is_some_and(|first| first.is_ascii_digit() || b"+-.".contains(&first));
    if !numeric_start {
        return Value::String(text);
    }
    if text.contains(':') {
        return resolve_sexagesimal(&text).unwrap_or(Value::String(text));
    }
    resolve_integer(&text).or_else(|| resolve_float(&text)).unwrap_or(Value::String(text))
}

/// YAML 1.1's base 60 (PyYAML's resolver: ints `[-+]?[1-9][0-9_]*(:[0-5]?[0-9])+`, floats
/// `[-+]?[0-9][0-9_]*(:[0-5]?[0-9])+\.[0-9_]*`), so `1:30` is 90 as Heat reads it.
fn resolve_sexagesimal(text: &str) -> Option<Value> {
    let (negative, unsigned) = match text.as_bytes().first() {
        Some(b'-') => (true, &text[1..]),
        Some(b'+') => (false, &text[1..]),
        _ => (false, text),
    };
    let (digits, fraction) = match unsigned.split_once('.') {
        Some((digits, fraction)) => (digits, Some(fraction)),
        None => (unsigned, None),
    };
    let mut parts = digits.split(':');
    let first = parts.next()?;
    let leading_ok = match fraction {
        None => first.starts_with(|ch: char| ('1'..='9').contains(&ch)),
        Some(_) => first.starts_with(|ch: char| ch.is_ascii_digit()),
    };
    if !leading_ok || !first.chars().all(|ch| ch.is_ascii_digit() || ch == '_') {
        return None;
    }
    let mut value: f64 = first.replace('_', "").parse().ok()?;
    for part in parts {
        let sixty = (1..=2).contains(&part.len())
            && part.chars().all(|ch| ch.is_ascii_digit())
            && (part.len() == 1 || part.as_bytes()[0] <= b'5');
        if !sixty {
            return None;
        }
        value = value * 60.0 + part.parse::<f64>().ok()?;
    }
    let sign = if negative { -1.0 } else { 1.0 };
    match fraction {
        None if value < 9.0e15 => Some(Value::Number(((value as i64) * sign as i64).into())),
        None => None,
        Some(fraction) if fraction.chars().all(|ch| ch.is_ascii_digit() || ch == '_') => {
            let fraction: f64 = format!("0.{}", fraction.replace('_', "")).parse().ok()?;
            Number::from_f64(sign * (value + fraction)).map(Value::Number)
        }
        Some(_) => None,
    }
}

fn resolve_integer(text: &str) -> Option<Value> {
    let (negative, unsigned) = match text.as_bytes().first() {
        Some(b'-') => (true, &text[1..]),
        Some(b'+') => (false, &text[1..]),
        _ => (false, text),
    };
    let (radix, digits) = if let Some(rest) = unsigned.strip_prefix("0b") {
        (2, rest)
    } else if let Some(rest) = unsigned.strip_prefix("0x") {
        (16, rest)
    } else if unsigned.len() > 1 && unsigned.starts_with('0') {
        (8, &unsigned[1..])
    } else {
        (10, unsigned)
    };
    // PyYAML allows `_` as a digit separator but not as the first character of the digits.
    if digits.is_empty() || digits.starts_with('_') {
        return None;
    }
    let clean: String = digits.chars().filter(|ch| *ch != '_').collect();
    if clean.is_empty() || !clean.chars().all(|ch| ch.is_digit(radix)) {
        return None;
    }
    let magnitude = u128::from_str_radix(&clean, radix).ok()?;
    if negative {
        let value = i64::try_from(magnitude).ok().and_then(i64::checked_neg).or_else(|| {
            // i64::MIN has no positive counterpart in i64.
            (magnitude == 1u128 << 63).then_some(i64::MIN)
        })?;
        Some(Value::Number(value.into()))
    } else if let Ok(value) = u64::try_from(magnitude) {
        Some(Value::Number(value.into()))
    } else {
        Number::from_f64(magnitude as f64).map(Value::Number)
    }
}

/// PyYAML's float resolver without the base-60, infinity and NaN forms: a point is required,
/// a sign only before a leading digit (`-.5` is a string), an exponent only with its own sign
/// (`1.0e3` is a string, `1.0e+3` a number).
fn resolve_float(text: &str) -> Option<Value> {
    static FLOAT: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r"^(?:[-+]?[0-9][0-9_]*\.[0-9_]*(?:[eE][-+][0-9]+)?|\.[0-9][0-9_]*(?:[eE][-+][0-9]+)?)$")
            .expect("a valid pattern")
    });
    if !FLOAT.is_match(text) {
        return None;
    }
    let clean: String = text.chars().filter(|ch| *ch != '_').collect();
    let float: f64 = clean.parse().ok()?;
    Number::from_f64(float).map(Value::Number)
}
