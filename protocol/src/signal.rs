//! The body of a deployment signal sent over HTTP: heat-config-notify's
//! `json.dumps(payload, ensure_ascii=True)` kept under Heat's size limit by trimming the heads of
//! `deploy_stdout` and `deploy_stderr` proportionally (heat-config-notify intends this and crashes
//! on Python 3 instead; see docs/metadata.md "The HTTP signal"). A body that still cannot fit becomes a failure the engine
//! can read, never a silently dropped signal.

use serde_json::{Map, Value};

use crate::pyjson;
use crate::result::{DEPLOY_STATUS_CODE, DEPLOY_STDERR, DEPLOY_STDOUT, HookResult};

/// heat-config-notify's `MAX_RESPONSE_SIZE`, in characters, below Heat's 1 MiB body limit.
pub const MAX_SIGNAL_CHARS: usize = 950_000;

/// The exact request body for `result`, at most `max_chars` characters, always starting with `{`.
pub fn signal_body(result: &HookResult, max_chars: usize) -> String {
    let body = pyjson::dumps(&Value::Object(result.0.clone()), true);
    if body.len() <= max_chars {
        return body;
    }
    let mut trimmed = result.0.clone();
    // Escaping makes characters cost more than one byte in the body, so trim again until it fits.
    for _ in 0..8 {
        let body = pyjson::dumps(&Value::Object(trimmed.clone()), true);
        if body.len() <= max_chars {
            return body;
        }
        if !trim_streams(&mut trimmed, body.len() - max_chars) {
            break;
        }
    }
    oversized_failure(result, max_chars)
}

/// Removes at least `excess` body characters from the heads of stdout and stderr, shared in
/// proportion to their encoded lengths; false when there is nothing left to remove.
fn trim_streams(payload: &mut Map<String, Value>, excess: usize) -> bool {
    let encoded = |key: &str| payload.get(key).and_then(Value::as_str).map_or(0, encoded_len);
    let total = encoded(DEPLOY_STDOUT) + encoded(DEPLOY_STDERR);
    if total == 0 {
        return false;
    }
    for key in [DEPLOY_STDOUT, DEPLOY_STDERR] {
        let Some(text) = payload.get(key).and_then(Value::as_str) else { continue };
        // Round up so a pass always makes progress.
        let share = (encoded_len(text) * excess).div_ceil(total);
        let mut removed = 0;
        let cut = text
            .char_indices()
            .find(|(_, ch)| {
                let done = removed >= share;
                removed += encoded_char_len(*ch);
                done
            })
            .map_or(text.len(), |(offset, _)| offset);
        payload.insert(key.to_string(), Value::String(text[cut..].to_string()));
    }
    true
}

/// Characters `text` takes inside a `json.dumps(..., ensure_ascii=True)` string.
fn encoded_len(text: &str) -> usize {
    text.chars().map(encoded_char_len).sum()
}

fn encoded_char_len(ch: char) -> usize {
    match ch {
        '"' | '\\' | '\n' | '\r' | '\t' | '\u{08}' | '\u{0c}' => 2,
        ch if (ch as u32) < 0x20 => 6,
        ch if ch.is_ascii() => 1,
        ch => 6 * ch.len_utf16(),
    }
}

/// The signal for a result whose outputs alone exceed the limit: a failure that says so.
fn oversized_failure(result: &HookResult, max_chars: usize) -> String {
    let names: Vec<&str> = result
        .0
        .keys()
        .map(String::as_str)
        .filter(|key| ![DEPLOY_STDOUT, DEPLOY_STDERR, DEPLOY_STATUS_CODE].contains(key))
        .collect();
    let mut failure = Map::new();
    failure.insert(DEPLOY_STDOUT.into(), Value::String(String::new()));
    failure.insert(
        DEPLOY_STDERR.into(),
        Value::String(format!(
            "anneal: the result does not fit in a {max_chars}-character signal even with deploy_stdout \
             and deploy_stderr emptied; outputs dropped: {}",
            names.join(", ")
        )),
    );
    failure.insert(DEPLOY_STATUS_CODE.into(), Value::from(1));
    pyjson::dumps(&Value::Object(failure), true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn result(value: Value) -> HookResult {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn small_body_is_python_json_dumps() {
        let body = signal_body(&result(json!({"foo": "bar"})), MAX_SIGNAL_CHARS);
        assert_eq!(body, r#"{"foo": "bar"}"#);
        assert_eq!(signal_body(&HookResult::default(), MAX_SIGNAL_CHARS), "{}");
    }

    #[test]
    fn oversized_body_keeps_the_tails_of_stdout_and_stderr() {
        let stdout = format!("{}END-OUT", "o".repeat(600_000));
        let stderr = format!("{}END-ERR", "e".repeat(600_000));
        let payload =
            result(json!({"deploy_stdout": stdout, "deploy_stderr": stderr, "deploy_status_code": 0, "out": "x"}));
        let body = signal_body(&payload, MAX_SIGNAL_CHARS);
        assert!(body.len() <= MAX_SIGNAL_CHARS, "{}", body.len());
        assert!(body.starts_with('{'));
        let parsed: Value = serde_json::from_str(&body).unwrap();
        let out = parsed["deploy_stdout"].as_str().unwrap();
        let err = parsed["deploy_stderr"].as_str().unwrap();
        assert!(out.ends_with("END-OUT") && err.ends_with("END-ERR"));
        assert!(out.len() > 400_000 && err.len() > 400_000, "shared proportionally: {} {}", out.len(), err.len());
        assert_eq!(parsed["out"], "x");
        assert_eq!(parsed["deploy_status_code"], 0);
    }

    #[test]
    fn escaped_characters_are_counted_after_escaping() {
        let stdout = "é".repeat(400_000); // 6 body characters each
        let body = signal_body(&result(json!({"deploy_stdout": stdout, "deploy_stderr": ""})), MAX_SIGNAL_CHARS);
        assert!(body.len() <= MAX_SIGNAL_CHARS);
        let parsed: Value = serde_json::from_str(&body).unwrap();
        assert!(parsed["deploy_stdout"].as_str().unwrap().chars().count() > 100_000);
    }

    #[test]
    fn outputs_too_large_become_a_readable_failure() {
        let payload = result(json!({"big": "x".repeat(1_000_000), "deploy_status_code": 0}));
        let body = signal_body(&payload, MAX_SIGNAL_CHARS);
        let parsed: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(parsed["deploy_status_code"], 1);
        assert!(parsed["deploy_stderr"].as_str().unwrap().contains("outputs dropped: big"));
    }
}
