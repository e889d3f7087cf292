//! The resources that only compute: `OS::Heat::None` (completes at once, every attribute
//! null), `OS::Heat::Value` (its `value` property as its `value` attribute) and
//! `OS::Heat::RandomString` (a secret generated once, kept across updates that leave its
//! properties unchanged, as heat.engine.resources.openstack.heat.random_string).

use rand::SeedableRng;
use rand::rngs::StdRng;
use rand::seq::{IndexedRandom, SliceRandom};
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};

use crate::engine::context::Context;
use crate::engine::error::EngineError;
use crate::engine::hidden::{Hidden, refused_as};
use crate::engine::node::{self, Released};
use crate::store::{NodeRecord, NodeRow, StackRow};

/// `OS::Heat::None` and `OS::Heat::Value`: complete at once.
pub fn activate_value(
    ctx: &mut Context<'_>,
    stack: &StackRow,
    mut node: NodeRow,
    properties: &Map<String, Value>,
    has_value: bool,
) -> Result<Released, EngineError> {
    node.record = NodeRecord { id: Some(node::stable_id(&node)), ..NodeRecord::default() };
    node.attributes = json!({}).into();
    if has_value {
        let kind = properties.get("type").and_then(Value::as_str);
        let value = properties.get("value").cloned().unwrap_or(Value::Null);
        // Heat checks the value against `type` but its attribute is the value unconverted
        // (Value._resolve_attribute reads the properties with the untyped class schema).
        match crate::template::value_as_type(kind, value.clone()) {
            Ok(_) => node.attributes = json!({ "value": value }).into(),
            Err(problem) => {
                let problem = match (kind, property_hidden(ctx, stack, &node, "value")) {
                    (Some(kind), true) if crate::template::ParameterType::parse(kind).is_some() => refused_as(kind),
                    _ => problem,
                };
                let reason = format!("property \"value\": {problem}");
                return node::fail(ctx, stack, node, &reason);
            }
        }
    }
    node::complete(ctx, stack, node, "state changed")
}

/// Whether `node`'s stored `property` is a hidden value (a store error counts as hidden).
fn property_hidden(ctx: &mut Context<'_>, stack: &StackRow, node: &NodeRow, property: &str) -> bool {
    let Some(stored) = node.definition.get("properties").and_then(|properties| properties.get(property)) else {
        return false;
    };
    Hidden::new(&mut *ctx.tx, stack).stored(stored).unwrap_or(true)
}

/// `OS::Heat::RandomString`: generates its value unless the previous one was generated from
/// the same properties. The value is its `get_resource` id too (RandomString.get_reference_id);
/// neither is shown by `stack show` or events, only where a template outputs it.
pub fn activate_random_string(
    ctx: &mut Context<'_>,
    stack: &StackRow,
    mut node: NodeRow,
    properties: &Map<String, Value>,
) -> Result<Released, EngineError> {
    let fingerprint = hex(&Sha256::digest(Value::Object(properties.clone()).to_string().as_bytes()));
    let previous = node.attributes.get("value").and_then(Value::as_str).map(str::to_owned);
    let value = match previous {
        Some(value) if node.record.fingerprint.as_deref() == Some(fingerprint.as_str()) => value,
        _ => match generate(&Spec::from_properties(properties)) {
            Ok(value) => value,
            Err(reason) => return node::fail(ctx, stack, node, &reason),
        },
    };
    node.record = NodeRecord { id: Some(value.clone()), fingerprint: Some(fingerprint), ..NodeRecord::default() };
    node.attributes = json!({"value": value}).into();
    node::complete(ctx, stack, node, "state changed")
}

/// What to generate: the length and the character classes with their minimum counts.
#[derive(Debug, Clone, PartialEq)]
pub struct Spec {
    pub length: usize,
    /// Allowed characters and how many of them at least, sequences before classes (as Heat).
    pub classes: Vec<(Vec<char>, usize)>,
}

impl Spec {
    /// Reads validated properties with RandomString's defaults: length 32, classes
    /// `[{class: lettersdigits, min: 1}]`, each `min` 1; the hidden `sequence` property
    /// stands for one class of min 1 (RandomString.translation_rules).
    pub fn from_properties(properties: &Map<String, Value>) -> Spec {
        let length = properties.get("length").and_then(integer).unwrap_or(32);
        let min = |item: &Value| item.get("min").and_then(integer).unwrap_or(1);
        let mut classes = Vec::new();
        for item in properties.get("character_sequences").and_then(Value::as_array).into_iter().flatten() {
            let sequence = item.get("sequence").and_then(Value::as_str).unwrap_or_default();
            classes.push((sequence.chars().collect(), min(item)));
        }
        let named: Vec<(String, usize)> = match (properties.get("character_classes"), properties.get("sequence")) {
            (_, Some(Value::String(sequence))) => vec![(sequence.clone(), 1)],
            (Some(Value::Array(items)), _) => items
                .iter()
                .map(|item| {
                    (item.get("class").and_then(Value::as_str).unwrap_or("lettersdigits").to_owned(), min(item))
                })
                .collect(),
            _ => vec![("lettersdigits".to_owned(), 1)],
        };
        for (class, min) in named {
            classes.push((class_members(&class).chars().collect(), min));
        }
        Spec { length, classes }
    }
}

/// heat.common.password_gen's `_char_class_members`.
pub fn class_members(class: &str) -> &'static str {
    const LOWER: &str = "abcdefghijklmnopqrstuvwxyz";
    match class {
        "letters" => "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ",
        "lowercase" => LOWER,
        "uppercase" => "ABCDEFGHIJKLMNOPQRSTUVWXYZ",
        "digits" => "0123456789",
        "hexdigits" => "0123456789ABCDEF",
        "octdigits" => "01234567",
        _ => "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789",
    }
}

/// As heat.common.password_gen.generate_password: each class's minimum first, the rest from
/// the union of all classes, then shuffled; from a CSPRNG seeded by the OS.
pub fn generate(spec: &Spec) -> Result<String, String> {
    let mut rng = StdRng::try_from_os_rng().map_err(|error| format!("no randomness from the OS: {error}"))?;
    let mut chosen: Vec<char> = Vec::with_capacity(spec.length);
    let mut union: Vec<char> = Vec::new();
    for (members, min) in &spec.classes {
        union.extend(members.iter().copied().filter(|member| !union.contains(member)).collect::<Vec<_>>());
        for _ in 0..*min {
            chosen.push(*members.choose(&mut rng).ok_or("a character sequence is empty")?);
        }
    }
    if chosen.len() > spec.length {
        return Err("Length property cannot be smaller than combined character class and character sequence \
                    minimums"
            .to_owned());
    }
    while chosen.len() < spec.length {
        chosen.push(*union.choose(&mut rng).ok_or("no characters to choose from")?);
    }
    chosen.shuffle(&mut rng);
    Ok(chosen.into_iter().collect())
}

fn integer(value: &Value) -> Option<usize> {
    match value {
        Value::Number(number) => number.as_u64().and_then(|number| usize::try_from(number).ok()),
        Value::String(text) => text.trim().parse().ok(),
        _ => None,
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(properties: Value) -> Spec {
        Spec::from_properties(properties.as_object().unwrap())
    }

    #[test]
    fn defaults_are_32_letters_and_digits() {
        let value = generate(&spec(json!({}))).unwrap();
        assert_eq!(value.len(), 32);
        assert!(value.chars().all(|c| c.is_ascii_alphanumeric()), "{value}");
        assert_ne!(value, generate(&spec(json!({}))).unwrap());
    }

    #[test]
    fn every_class_and_sequence_gets_its_minimum() {
        let properties = json!({"length": 12, "character_classes": [{"class": "digits", "min": 4}, {"class": "uppercase"}],
            "character_sequences": [{"sequence": "!@#", "min": 3}]});
        for _ in 0..50 {
            let value = generate(&spec(properties.clone())).unwrap();
            assert_eq!(value.chars().count(), 12);
            assert!(value.chars().filter(char::is_ascii_digit).count() >= 4, "{value}");
            assert!(value.chars().filter(char::is_ascii_uppercase).count() >= 1, "{value}");
            assert!(value.chars().filter(|c| "!@#".contains(*c)).count() >= 3, "{value}");
            assert!(value.chars().all(|c| c.is_ascii_digit() || c.is_ascii_uppercase() || "!@#".contains(c)));
        }
    }

    #[test]
    fn the_hidden_sequence_property_is_one_class_and_hexdigits_are_upper_case() {
        let value = generate(&spec(json!({"sequence": "hexdigits", "length": 64}))).unwrap();
        assert!(value.chars().all(|c| "0123456789ABCDEF".contains(c)), "{value}");
    }

    #[test]
    fn minimums_over_the_length_are_refused() {
        let error = generate(&spec(json!({"length": 2, "character_classes": [{"class": "digits", "min": 3}]})));
        assert!(error.unwrap_err().contains("Length property cannot be smaller"));
    }
}
