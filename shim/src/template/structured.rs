//! StructuredDeployment's input substitution (Heat's `StructuredDeployment.parse`): every
//! single-key map `{<input_key>: "<name>"}` in a StructuredConfig's config is replaced by that
//! input's value. Pure; the engine calls it when it releases a deployment.

use serde_json::{Map, Value};

/// Replaces `{input_key: name}` maps in `config` with `inputs[name]`. A name with no input
/// becomes `null` (LAX), or is an error naming it when `strict` (STRICT).
pub fn substitute_inputs(
    config: &Value,
    input_key: &str,
    inputs: &Map<String, Value>,
    strict: bool,
) -> Result<Value, String> {
    match config {
        Value::Object(map) => {
            if let Some((key, Value::String(name))) = map.iter().next().filter(|_| map.len() == 1)
                && key == input_key
            {
                return match inputs.get(name) {
                    Some(value) => Ok(value.clone()),
                    None if strict => Err(format!("input \"{name}\" has no value (input_values_validate: STRICT)")),
                    None => Ok(Value::Null),
                };
            }
            let mut substituted = Map::new();
            for (key, item) in map {
                substituted.insert(key.clone(), substitute_inputs(item, input_key, inputs, strict)?);
            }
            Ok(Value::Object(substituted))
        }
        Value::Array(items) => items
            .iter()
            .map(|item| substitute_inputs(item, input_key, inputs, strict))
            .collect::<Result<Vec<_>, _>>()
            .map(Value::Array),
        scalar => Ok(scalar.clone()),
    }
}
