//! Heat's server-side merge of environment files (a request's `environment_files`, the names of
//! environments carried in its `files` map, as `openstack stack create -e` sends them): the
//! rules of heat.common.environment_util.merge_environments, including
//! `parameter_merge_strategies` (`overwrite`, `merge`, `deep_merge`). The request's own
//! `environment` is then ignored and its `parameters` are the base the files merge onto, as
//! heat.api.openstack.v1.stacks.InstantiationData.environment builds it. Pure.

use std::collections::{BTreeMap, BTreeSet};

use anneal_protocol::alias_budget::AliasBudget;
use anneal_protocol::pyjson::is_truthy;
use serde_json::{Map, Value};

use super::ParameterType;
use super::environment::{MERGE_STRATEGIES, SECTIONS, parse_environment_within};
use super::yaml;

/// Most names in `environment_files` (each also counts against the `files` map's limits).
pub const MAX_ENVIRONMENT_FILES: usize = 100;

/// The parameter types a merge strategy looks at: the template's and, as
/// heat.engine.template.Template.all_param_schemata, every template in `files` (a text with a
/// template version key); the template's own declarations win. Read from the YAML alone, before
/// any registry applies, so a template that does not validate still has its types.
pub fn parameter_types(template: &str, files: &Map<String, Value>) -> BTreeMap<String, ParameterType> {
    let mut types = BTreeMap::new();
    for text in files.values().filter_map(Value::as_str).chain([template]) {
        let Ok(Value::Object(root)) = yaml::parse_yaml_only(text).map(|root| root.to_value()) else { continue };
        if !TEMPLATE_VERSION_KEYS.iter().any(|key| root.contains_key(*key)) {
            continue;
        }
        let Some(Value::Object(parameters)) = root.get("parameters").or_else(|| root.get("Parameters")) else {
            continue;
        };
        for (name, declaration) in parameters {
            let kind = declaration.get("type").or_else(|| declaration.get("Type")).and_then(Value::as_str);
            if let Some(kind) = kind.and_then(parameter_type) {
                types.insert(name.clone(), kind);
            }
        }
    }
    types
}

/// heat.common.template_format's version keys: a file with one is a template.
const TEMPLATE_VERSION_KEYS: &[&str] =
    &["heat_template_version", "HeatTemplateFormatVersion", "AWSTemplateFormatVersion"];

/// A HOT or CFN parameter type name.
fn parameter_type(name: &str) -> Option<ParameterType> {
    let hot = match name {
        "String" => "string",
        "Number" => "number",
        "Json" => "json",
        "CommaDelimitedList" => "comma_delimited_list",
        "Boolean" => "boolean",
        other => other,
    };
    ParameterType::parse(hot)
}

/// The environment Heat builds for a request with `environment_files`: the sections with their
/// defaults, `parameters` starting as the request's own, then each file merged in order. Every
/// problem names the file.
pub fn merge_environment_files(
    names: &[String],
    files: &Map<String, Value>,
    given: &BTreeMap<String, String>,
    types: &BTreeMap<String, ParameterType>,
) -> Result<Map<String, Value>, String> {
    if names.len() > MAX_ENVIRONMENT_FILES {
        return Err(format!("environment_files: {} names, over the limit of {MAX_ENVIRONMENT_FILES}", names.len()));
    }
    let mut environment = Map::new();
    for section in SECTIONS.iter().filter(|section| **section != "parameter_merge_strategies") {
        let empty = if matches!(*section, "encrypted_param_names" | "event_sinks") {
            Value::Array(vec![])
        } else {
            Value::Object(Map::new())
        };
        environment.insert((*section).to_owned(), empty);
    }
    let parameters = given.iter().map(|(name, value)| (name.clone(), Value::String(value.clone()))).collect();
    environment.insert("parameters".to_owned(), Value::Object(parameters));
    let mut strategies = BTreeMap::new();
    let mut budget = merge_budget(names, files);
    for name in names {
        let Some(text) = files.get(name) else {
            return Err(format!("environment_files: \"{name}\" is not in the request's files"));
        };
        let Some(text) = text.as_str() else {
            return Err(format!("environment_files: \"{name}\": the file's content must be text"));
        };
        let parsed = parse_environment_within(text, &mut budget)
            .map_err(|error| format!("environment file \"{name}\": {error}"))?;
        merge_file(&mut environment, parsed, types, &mut strategies, name)
            .map_err(|problem| format!("environment file \"{name}\": {problem}"))?;
    }
    Ok(environment)
}

/// One alias budget for all the files a merge reads, as large as their texts (each counted
/// once): the merge keeps what each file expanded to, so a file named many times must not get a
/// budget per name.
fn merge_budget(names: &[String], files: &Map<String, Value>) -> AliasBudget {
    let distinct: BTreeSet<&String> = names.iter().collect();
    let text_bytes = distinct.into_iter().filter_map(|name| files.get(name)?.as_str()).map(str::len).sum();
    AliasBudget::for_text(text_bytes)
}

/// One file onto the environment (heat.common.environment_util.merge_environments' loop body).
fn merge_file(
    environment: &mut Map<String, Value>,
    mut parsed: Map<String, Value>,
    types: &BTreeMap<String, ParameterType>,
    strategies: &mut BTreeMap<String, String>,
    file: &str,
) -> Result<(), String> {
    if let Some((section, _)) = parsed.iter().find(|(_, value)| value.is_null()) {
        return Err(format!("environment has empty section \"{section}\""));
    }
    let in_file = match parsed.remove("parameter_merge_strategies") {
        Some(Value::Object(map)) => map,
        Some(_) => return Err("section \"parameter_merge_strategies\" must be a mapping".to_owned()),
        None => Map::new(),
    };
    for (section, value) in parsed {
        if !is_truthy(&value) {
            continue;
        }
        let old = environment.remove(&section).unwrap_or(Value::Null);
        let merged = if section == "parameters" || section == "parameter_defaults" {
            let Value::Object(new) = value else {
                return Err(format!("section \"{section}\" must be a mapping"));
            };
            merge_parameters(old, new, types, &in_file, strategies, file)?
        } else {
            merge_map(old, value, false).map_err(|problem| format!("section \"{section}\": {problem}"))?
        };
        environment.insert(section, merged);
    }
    Ok(())
}

/// heat.common.environment_util.get_param_merge_strategy: the file's entry for the parameter,
/// else the strategy an earlier file gave it, else the file's `default`; a name Heat does not
/// know falls back to the file's default (which merge_parameters then treats as overwrite).
fn strategy_for(in_file: &Map<String, Value>, parameter: &str, strategies: &BTreeMap<String, String>) -> String {
    let text = |value: &Value| value.as_str().map_or_else(|| value.to_string(), str::to_owned);
    let file_default = in_file.get("default").map_or_else(|| "overwrite".to_owned(), text);
    let chosen = in_file
        .get(parameter)
        .map(text)
        .or_else(|| strategies.get(parameter).cloned())
        .unwrap_or_else(|| file_default.clone());
    if MERGE_STRATEGIES.contains(&chosen.as_str()) { chosen } else { file_default }
}

/// heat.common.environment_util.merge_parameters: a parameter keeps the strategy the first file
/// that set it chose; another file asking for a different one is an error.
fn merge_parameters(
    old: Value,
    new: Map<String, Value>,
    types: &BTreeMap<String, ParameterType>,
    in_file: &Map<String, Value>,
    strategies: &mut BTreeMap<String, String>,
    file: &str,
) -> Result<Value, String> {
    let declared = |key: &String, value: &Value| types.contains_key(key) && !value.is_null();
    for key in new.iter().filter(|(key, value)| declared(key, value)).map(|(key, _)| key) {
        let strategy = strategy_for(in_file, key, strategies);
        match strategies.get(key) {
            None => {
                strategies.insert(key.clone(), strategy);
            }
            Some(first) if *first != strategy => {
                return Err(format!("Conflicting merge strategy '{strategy}' for parameter '{key}' in file '{file}'."));
            }
            Some(_) => {}
        }
    }
    let mut old = match old {
        Value::Object(map) if !map.is_empty() => map,
        _ => return Ok(Value::Object(new)),
    };
    for (key, value) in new.into_iter().filter(|(key, value)| declared(key, value)) {
        let kind = types[&key];
        match strategies[&key].as_str() {
            "deep_merge" => merge_parameter(&mut old, key, value, kind, true)?,
            "merge" => merge_parameter(&mut old, key, value, kind, false)?,
            _ => {
                old.insert(key, value);
            }
        }
    }
    Ok(Value::Object(old))
}

/// heat.common.environment_util.merge_parameters' param_merge, with parse_param's checks.
fn merge_parameter(
    old: &mut Map<String, Value>,
    key: String,
    value: Value,
    kind: ParameterType,
    deep: bool,
) -> Result<(), String> {
    let invalid = || format!("Invalid parameter in environment: \"{key}\" cannot be merged");
    let value = match (kind, value) {
        (ParameterType::Json, Value::String(text)) if text.is_empty() => Value::String(text),
        (ParameterType::Json, Value::String(text)) => serde_json::from_str(&text).map_err(|_| invalid())?,
        (ParameterType::Json, value) => value,
        (_, value @ (Value::String(_) | Value::Array(_))) => value,
        _ => return Err(invalid()),
    };
    let previous = old.remove(&key);
    let merged = match kind {
        ParameterType::Json => merge_map(previous.unwrap_or(Value::Object(Map::new())), value, deep)?,
        ParameterType::CommaDelimitedList => merge_list(previous.unwrap_or(Value::Null), value)?,
        ParameterType::String => match (previous, value) {
            (None, Value::String(new)) => Value::String(new),
            (Some(Value::String(before)), Value::String(new)) => Value::String(before + &new),
            _ => return Err(invalid()),
        },
        ParameterType::Number | ParameterType::Boolean => {
            return Err(format!("Invalid merge strategy 'merge' for parameter '{key}'."));
        }
    };
    old.insert(key, merged);
    Ok(())
}

/// heat.common.environment_util.merge_list: a list extends a list, text joins with a comma.
fn merge_list(old: Value, new: Value) -> Result<Value, String> {
    if !is_truthy(&old) {
        return Ok(new);
    }
    match (old, new) {
        (Value::Array(mut before), Value::Array(items)) => {
            before.extend(items);
            Ok(Value::Array(before))
        }
        (Value::String(before), Value::String(text)) => Ok(Value::String(format!("{before},{text}"))),
        _ => Err("a list and a comma-delimited string cannot be merged".to_owned()),
    }
}

/// heat.common.environment_util.merge_map: `deep` merges mappings and lists and concatenates
/// text; otherwise each key of `new` replaces the old one (a null never replaces).
fn merge_map(old: Value, new: Value, deep: bool) -> Result<Value, String> {
    if !is_truthy(&old) {
        return Ok(new);
    }
    let (Value::Object(mut old), Value::Object(new)) = (old, new) else {
        return Err("only mappings can be merged".to_owned());
    };
    for (key, value) in new.into_iter().filter(|(_, value)| !value.is_null()) {
        let previous = old.remove(&key);
        let merged = match (deep, value) {
            (false, value) => value,
            (true, value @ (Value::Object(_) | Value::Array(_))) => match previous {
                Some(previous) if is_truthy(&previous) && value.is_object() => merge_map(previous, value, true)?,
                Some(previous) if is_truthy(&previous) => merge_list(previous, value)?,
                _ => value,
            },
            (true, Value::String(text)) => match previous {
                Some(Value::String(before)) => Value::String(before + &text),
                None => Value::String(text),
                Some(_) => return Err(format!("\"{key}\": text cannot be merged onto a non-text value")),
            },
            (true, value) => value,
        };
        old.insert(key, merged);
    }
    Ok(Value::Object(old))
}
