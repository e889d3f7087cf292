//! How an input value becomes an environment variable for the built-in `script` hook:
//! heat-agents' rule (dicts and lists as `json.dumps` text, strings unchanged) made total, since
//! heat-agents crashes on non-string scalars (bug 1333992): numbers and booleans become their JSON
//! text and null or a missing value becomes the empty string.

use serde_json::Value;

use crate::pyjson;

/// The environment value for an input whose value is `value` (`None` when the key is absent).
pub fn input_env_value(value: Option<&Value>) -> String {
    match value {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(text)) => text.clone(),
        Some(Value::Bool(flag)) => flag.to_string(),
        Some(other) => pyjson::dumps(other, true),
    }
}

/// Whether `name` can be passed to `execve` as a variable name (no `=`, no NUL, not empty).
pub fn is_valid_env_name(name: &str) -> bool {
    !name.is_empty() && !name.contains('=') && !name.contains('\0')
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn encodes_like_heat_agents_and_stringifies_scalars() {
        assert_eq!(input_env_value(Some(&json!("bar"))), "bar");
        assert_eq!(input_env_value(Some(&json!("{\"key\": \"value\"}"))), "{\"key\": \"value\"}");
        assert_eq!(input_env_value(Some(&json!({"key": "value"}))), "{\"key\": \"value\"}");
        assert_eq!(input_env_value(Some(&json!(["v1", 12]))), "[\"v1\", 12]");
        assert_eq!(input_env_value(Some(&json!(5))), "5");
        assert_eq!(input_env_value(Some(&json!(2.5))), "2.5");
        assert_eq!(input_env_value(Some(&json!(true))), "true");
        assert_eq!(input_env_value(Some(&json!(null))), "");
        assert_eq!(input_env_value(None), "");
    }

    #[test]
    fn env_names_that_execve_rejects() {
        assert!(is_valid_env_name("foo"));
        assert!(!is_valid_env_name("a=b"));
        assert!(!is_valid_env_name(""));
        assert!(!is_valid_env_name("a\0b"));
    }
}
