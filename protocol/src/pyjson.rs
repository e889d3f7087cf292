//! Python's view of JSON values, where compatibility depends on it: `json.dumps` text with its
//! default separators (`", "`, `": "`) and `ensure_ascii`, `str()` of a value for Heat's reason
//! strings, and truthiness for Heat's failure rule. Hook authors compare these bytes (heat-agents'
//! script hook passes dict inputs through `json.dumps`), so they must match exactly.

use serde_json::Value;

/// `json.dumps(value)` with Python's default separators; `ensure_ascii` escapes every non-ASCII
/// character as `\uXXXX` (surrogate pairs beyond the BMP), as Python does by default.
pub fn dumps(value: &Value, ensure_ascii: bool) -> String {
    let mut out = String::new();
    write_value(&mut out, value, ensure_ascii);
    out
}

/// Python's `str()` of a JSON-decoded value, as Heat formats it into status reasons.
pub fn python_str(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        other => python_repr(other),
    }
}

/// Python truthiness of a JSON-decoded value.
pub fn is_truthy(value: &Value) -> bool {
    match value {
        Value::Null => false,
        Value::Bool(flag) => *flag,
        Value::Number(number) => number.as_f64().is_some_and(|n| n != 0.0),
        Value::String(text) => !text.is_empty(),
        Value::Array(items) => !items.is_empty(),
        Value::Object(map) => !map.is_empty(),
    }
}

/// Python's `repr()` of a JSON-decoded value (dicts and lists as Python literals).
fn python_repr(value: &Value) -> String {
    match value {
        Value::Null => "None".into(),
        Value::Bool(true) => "True".into(),
        Value::Bool(false) => "False".into(),
        Value::Number(_) => number_text(value),
        Value::String(text) => format!("'{}'", text.replace('\\', "\\\\").replace('\'', "\\'")),
        Value::Array(items) => {
            let parts: Vec<String> = items.iter().map(python_repr).collect();
            format!("[{}]", parts.join(", "))
        }
        Value::Object(map) => {
            let parts: Vec<String> =
                map.iter().map(|(key, item)| format!("'{}': {}", key, python_repr(item))).collect();
            format!("{{{}}}", parts.join(", "))
        }
    }
}

/// `json.dump(value, indent=N, sort_keys=..., separators=(',', ': '))` with `ensure_ascii`, the
/// form heat-agents' json-file and hiera hooks write files in (chef's node file without sorting).
pub fn dumps_indented(value: &Value, indent: usize, sort_keys: bool) -> String {
    let mut out = String::new();
    let format = Format { ensure_ascii: true, indent: Some(indent), sort_keys };
    write_formatted(&mut out, value, &format, 0);
    out
}

/// How `json.dumps` was asked to write.
struct Format {
    ensure_ascii: bool,
    /// `None`: one line with `", "` between items; `Some(n)`: n spaces per level and `","`.
    indent: Option<usize>,
    sort_keys: bool,
}

fn write_value(out: &mut String, value: &Value, ensure_ascii: bool) {
    write_formatted(out, value, &Format { ensure_ascii, indent: None, sort_keys: false }, 0);
}

/// The separator before item `index` of a container at `depth`, and the newline before its close.
fn item_break(out: &mut String, format: &Format, index: usize, depth: usize) {
    match format.indent {
        None if index > 0 => out.push_str(", "),
        None => {}
        Some(width) => {
            if index > 0 {
                out.push(',');
            }
            out.push('\n');
            out.push_str(&" ".repeat(width * (depth + 1)));
        }
    }
}

fn close_break(out: &mut String, format: &Format, depth: usize) {
    if let Some(width) = format.indent {
        out.push('\n');
        out.push_str(&" ".repeat(width * depth));
    }
}

fn write_formatted(out: &mut String, value: &Value, format: &Format, depth: usize) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(flag) => out.push_str(if *flag { "true" } else { "false" }),
        // Python writes a float beyond f64 (`1e999`) as `Infinity`, which is not JSON and which
        // the shim refuses: such a number keeps its own digits, so the text stays JSON.
        Value::Number(number) if !number.as_f64().is_some_and(f64::is_finite) => out.push_str(&number.to_string()),
        Value::Number(_) => out.push_str(&number_text(value)),
        Value::String(text) => write_string(out, text, format.ensure_ascii),
        Value::Array(items) if items.is_empty() => out.push_str("[]"),
        Value::Array(items) => {
            out.push('[');
            for (index, item) in items.iter().enumerate() {
                item_break(out, format, index, depth);
                write_formatted(out, item, format, depth + 1);
            }
            close_break(out, format, depth);
            out.push(']');
        }
        Value::Object(map) if map.is_empty() => out.push_str("{}"),
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            if format.sort_keys {
                entries.sort_by(|left, right| left.0.cmp(right.0));
            }
            out.push('{');
            for (index, (key, item)) in entries.into_iter().enumerate() {
                item_break(out, format, index, depth);
                write_string(out, key, format.ensure_ascii);
                out.push_str(": ");
                write_formatted(out, item, format, depth + 1);
            }
            close_break(out, format, depth);
            out.push('}');
        }
    }
}

fn write_string(out: &mut String, text: &str, ensure_ascii: bool) {
    out.push('"');
    for ch in text.chars() {
        match ch {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{08}' => out.push_str("\\b"),
            '\u{0c}' => out.push_str("\\f"),
            ch if (ch as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", ch as u32)),
            ch if ensure_ascii && !ch.is_ascii() => {
                let mut units = [0u16; 2];
                for unit in ch.encode_utf16(&mut units) {
                    out.push_str(&format!("\\u{unit:04x}"));
                }
            }
            ch => out.push(ch),
        }
    }
    out.push('"');
}

/// A number as Python prints it: integers as digits, floats as `repr(float)` (`1.0`, `1e+16`,
/// `1e-05`, `0.0001`).
fn number_text(value: &Value) -> String {
    let Value::Number(number) = value else { return String::new() };
    let text = number.to_string();
    // An integer keeps every digit (Python's ints are unbounded; serde_json keeps the text).
    if number.is_i64() || number.is_u64() || !text.contains(['.', 'e', 'E']) {
        return text;
    }
    float_repr(number.as_f64().unwrap_or(f64::NAN))
}

fn float_repr(float: f64) -> String {
    if float.is_nan() {
        return "NaN".into();
    }
    if float.is_infinite() {
        return if float > 0.0 { "Infinity".into() } else { "-Infinity".into() };
    }
    if float == 0.0 {
        return if float.is_sign_negative() { "-0.0".into() } else { "0.0".into() };
    }
    // `{:e}` gives Rust's shortest round-trip digits, the same digits Python's repr chooses.
    let scientific = format!("{float:e}");
    let (mantissa, exponent) = scientific.split_once('e').unwrap_or((&scientific, "0"));
    let exponent: i32 = exponent.parse().unwrap_or(0);
    let negative = mantissa.starts_with('-');
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    let sign = if negative { "-" } else { "" };
    // Python switches to exponent notation when the decimal exponent is < -4 or >= 16.
    if !(-4..16).contains(&exponent) {
        let (head, tail) = digits.split_at(1);
        let fraction = if tail.is_empty() { String::new() } else { format!(".{tail}") };
        let exponent_sign = if exponent < 0 { '-' } else { '+' };
        return format!("{sign}{head}{fraction}e{exponent_sign}{:02}", exponent.abs());
    }
    let point = exponent + 1;
    let text = if point <= 0 {
        format!("0.{}{}", "0".repeat((-point) as usize), digits)
    } else if point as usize >= digits.len() {
        format!("{}{}.0", digits, "0".repeat(point as usize - digits.len()))
    } else {
        let (whole, fraction) = digits.split_at(point as usize);
        format!("{whole}.{fraction}")
    };
    format!("{sign}{text}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn dumps_uses_python_default_separators() {
        assert_eq!(dumps(&json!({"key": "value"}), true), r#"{"key": "value"}"#);
        assert_eq!(dumps(&json!(["v1", 12]), true), r#"["v1", 12]"#);
        assert_eq!(dumps(&json!({"a": [1, {"b": null}], "c": true}), true), r#"{"a": [1, {"b": null}], "c": true}"#);
        assert_eq!(dumps(&json!({}), true), "{}");
        assert_eq!(dumps(&json!([]), true), "[]");
    }

    #[test]
    fn indented_dumps_match_python_json_dump_with_indent() {
        // python3 -c 'import json; print(json.dumps(v, indent=4, sort_keys=True, separators=(",", ": ")))'
        let value = json!({"b": [1, {"z": null, "a": "é"}], "a": {}, "c": []});
        let expected = "{\n    \"a\": {},\n    \"b\": [\n        1,\n        {\n            \"a\": \"\\u00e9\",\n            \"z\": null\n        }\n    ],\n    \"c\": []\n}";
        assert_eq!(dumps_indented(&value, 4, true), expected);
        assert_eq!(dumps_indented(&json!({"command": "foo"}), 4, true), "{\n    \"command\": \"foo\"\n}");
        assert_eq!(dumps_indented(&json!({"b": 1, "a": 2}), 2, false), "{\n  \"b\": 1,\n  \"a\": 2\n}");
        assert_eq!(dumps_indented(&json!("x"), 4, true), "\"x\"");
    }

    #[test]
    fn dumps_escapes_like_python() {
        assert_eq!(dumps(&json!("é"), true), r#""\u00e9""#);
        assert_eq!(dumps(&json!("é"), false), "\"é\"");
        assert_eq!(dumps(&json!("😀"), true), r#""\ud83d\ude00""#);
        assert_eq!(dumps(&json!("a\"b\\c\n\u{1}"), true), r#""a\"b\\c\n\u0001""#);
    }

    #[test]
    fn floats_print_as_python_repr() {
        let cases = [
            (1.0, "1.0"),
            (1.5, "1.5"),
            (-2.25, "-2.25"),
            (1e16, "1e+16"),
            (1.5e16, "1.5e+16"),
            (123456789012345.0, "123456789012345.0"),
            (0.0001, "0.0001"),
            (0.00001, "1e-05"),
            (0.1, "0.1"),
            (1e300, "1e+300"),
            (-0.0, "-0.0"),
        ];
        for (float, expected) in cases {
            assert_eq!(dumps(&json!(float), true), expected, "{float}");
        }
    }

    #[test]
    fn numbers_beyond_f64_stay_json() {
        // Found by the signal_body fuzz target: `Infinity` made the signal undeliverable.
        let value: Value = serde_json::from_str(r#"{"big": 3e3333, "small": -1.5e999}"#).unwrap();
        let text = dumps(&value, true);
        assert_eq!(text, r#"{"big": 3e+3333, "small": -1.5e+999}"#);
        assert!(serde_json::from_str::<Value>(&text).is_ok());
    }

    #[test]
    fn integers_keep_every_digit() {
        let big: Value = serde_json::from_str("[12345678901234567890123, -9223372036854775809]").unwrap();
        assert_eq!(dumps(&big, true), "[12345678901234567890123, -9223372036854775809]");
    }

    #[test]
    fn python_str_and_truthiness() {
        assert_eq!(python_str(&json!("x")), "x");
        assert_eq!(python_str(&json!(null)), "None");
        assert_eq!(python_str(&json!(false)), "False");
        assert_eq!(python_str(&json!({"a": 1})), "{'a': 1}");
        assert_eq!(python_str(&json!(["x", 2])), "['x', 2]");
        assert!(is_truthy(&json!(-1)));
        assert!(!is_truthy(&json!(0.0)));
        assert!(!is_truthy(&json!({})));
    }
}
