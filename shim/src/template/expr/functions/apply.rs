//! What each `Function` computes from its evaluated arguments, with Heat's semantics and
//! error texts (heat.engine.hot.functions and heat.engine.cfn.functions, named per function).
//! Python's equality (`1 == 1.0 == True`) decides `equals`, `contains`, `filter` and
//! `list_concat_unique`. Results are bounded: `repeat` and the list functions by
//! `MAX_LIST_ITEMS`, strings by `MAX_RESULT_BYTES`.

use serde_json::{Map, Value};
use sha2::Digest as _;

use super::{Function, MAX_LIST_ITEMS, invalid, rename};
use crate::template::expr::EvalError;
use crate::template::expr::values::{MAX_RESULT_BYTES, kind_name, py_eq, python_number, str_replace};

/// Applies `function` to its evaluated arguments.
pub fn apply(function: Function, args: Value) -> Result<Value, EvalError> {
    match function {
        Function::Repeat { with_maps, with_permutations } => super::repeat::repeat(args, with_maps, with_permutations),
        Function::Digest => digest(args),
        Function::StrSplit => str_split(args),
        Function::StrReplaceStrict { empty_allowed } => str_replace_strict(args, empty_allowed),
        Function::MapMerge => map_merge(args),
        Function::MapReplace => map_replace(args),
        Function::ListConcat { unique } => list_concat(args, unique),
        Function::Contains => contains(args),
        Function::Filter => filter(args),
        Function::MakeUrl => super::url::make_url(args),
        Function::Equals => match args {
            Value::Array(pair) if pair.len() == 2 => Ok(Value::Bool(py_eq(&pair[0], &pair[1]))),
            _ => Err(invalid("Arguments to \"equals\" must be of the form: [value_1, value_2]")),
        },
        Function::Not => Ok(Value::Bool(!condition("not", &args)?)),
        Function::And | Function::Or => boolean(function, args),
        Function::Select => super::cfn::select(args),
        Function::CfnJoin => super::cfn::cfn_join(args),
        Function::CfnSplit => super::cfn::cfn_split(args),
        Function::CfnReplace => super::cfn::cfn_replace(args),
        Function::LegacyReplace => super::cfn::legacy_replace(args),
        Function::LegacyJoin => super::cfn::legacy_join(args),
        Function::Yaql => super::yaql::apply(args),
        // Heat asks Nova (Stack.get_availability_zones); a cloud without zones configured
        // answers Nova's default zone, as Heat's GetAZs does with no stack. The region is ignored.
        Function::GetAzs => Ok(Value::Array(vec![Value::String("nova".to_owned())])),
        Function::MemberListToMap => super::cfn::member_list_to_map(args),
        Function::NestedParameter => {
            use crate::template::nested::convert::{converts_hidden, nested_parameter};
            let hidden = converts_hidden(&args);
            nested_parameter(args).map_err(|error| match hidden {
                true => EvalError::HiddenInvalid { message: error.to_string() },
                false => invalid(error.to_string()),
            })
        }
        Function::NestedFailure => Err(invalid(crate::template::nested::convert::nested_failure(&args))),
        Function::HiddenValue => Ok(args),
        Function::Base64 => match args {
            Value::String(text) => Ok(Value::String(text)),
            _ => Err(invalid("\"Fn::Base64\" argument must be a string")),
        },
    }
}

/// A condition operand: after `conditions.rs` inlined condition names, a boolean.
fn condition(function: &str, value: &Value) -> Result<bool, EvalError> {
    match value {
        Value::Bool(flag) => Ok(*flag),
        other => Err(invalid(format!("{function}: a condition must be a boolean, not {}", kind_name(other)))),
    }
}

fn boolean(function: Function, args: Value) -> Result<Value, EvalError> {
    let name = function.name();
    let Value::Array(items) = args else {
        return Err(invalid(format!("Arguments to \"{name}\" must be a list of conditions")));
    };
    if items.len() < 2 {
        return Err(invalid(format!("The minimum number of condition arguments to \"{name}\" is 2.")));
    }
    let flags = items.iter().map(|item| condition(name, item)).collect::<Result<Vec<_>, _>>()?;
    let result =
        if function == Function::And { flags.iter().all(|flag| *flag) } else { flags.iter().any(|flag| *flag) };
    Ok(Value::Bool(result))
}

/// As heat.engine.hot.functions.Digest: MD5, SHA-1 and the SHA-2 family (the algorithms every
/// hashlib has; OpenSSL extras such as sha3_256 or blake2b are refused naming the algorithm).
fn digest(args: Value) -> Result<Value, EvalError> {
    let strings: Option<Vec<&str>> = match &args {
        Value::Array(items) => items.iter().map(Value::as_str).collect(),
        _ => None,
    };
    let Some(strings) = strings else {
        return Err(invalid("Argument to function \"digest\" must be a list of strings"));
    };
    let [algorithm, value] = strings.as_slice() else {
        return Err(invalid("Function \"digest\" usage: [\"<algorithm>\", \"<value>\"]"));
    };
    // Heat encodes the value as latin-1, so a character above U+00FF cannot be hashed.
    let bytes: Option<Vec<u8>> = value.chars().map(|c| u8::try_from(u32::from(c)).ok()).collect();
    let Some(bytes) = bytes else { return Err(invalid("digest: the value is not latin-1 text")) };
    let hex = match algorithm.to_ascii_lowercase().as_str() {
        "md5" => hex(&md5::Md5::digest(&bytes)),
        "sha1" => hex(&sha1::Sha1::digest(&bytes)),
        "sha224" => hex(&sha2::Sha224::digest(&bytes)),
        "sha256" => hex(&sha2::Sha256::digest(&bytes)),
        "sha384" => hex(&sha2::Sha384::digest(&bytes)),
        "sha512" => hex(&sha2::Sha512::digest(&bytes)),
        other => {
            return Err(invalid(format!(
                "digest: algorithm \"{other}\" is not supported (md5, sha1, sha224, sha256, sha384, sha512)"
            )));
        }
    };
    Ok(Value::String(hex))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

const STR_SPLIT_USAGE: &str =
    "Incorrect arguments to \"str_split\" should be: \"str_split\" : [ \",\", \"apples,pears\", <index>]";

/// As heat.engine.hot.functions.StrSplit (Python's `str.split` and indexing).
fn str_split(args: Value) -> Result<Value, EvalError> {
    let Value::Array(items) = args else { return Err(invalid(STR_SPLIT_USAGE)) };
    let (Some(delimiter), Some(text)) = (items.first(), items.get(1)) else { return Err(invalid(STR_SPLIT_USAGE)) };
    let text = match text {
        Value::Null => return Ok(Value::Null),
        Value::String(text) => text,
        other => {
            return Err(invalid(format!("str_split: the string to split must be a string, not {}", kind_name(other))));
        }
    };
    let parts: Vec<&str> = match delimiter {
        Value::String(delimiter) if !delimiter.is_empty() => text.split(delimiter.as_str()).collect(),
        Value::String(_) => return Err(invalid("str_split: empty separator")),
        other => return Err(invalid(format!("str_split: the delimiter must be a string, not {}", kind_name(other)))),
    };
    let Some(index) = items.get(2) else {
        return Ok(Value::Array(parts.into_iter().map(|part| Value::String(part.to_owned())).collect()));
    };
    let index = match index {
        Value::Number(number) => number.as_i64().or_else(|| number.as_f64().map(|float| float.trunc() as i64)),
        Value::String(text) => text.trim().parse::<i64>().ok(),
        Value::Bool(flag) => Some(i64::from(*flag)),
        _ => None,
    };
    let Some(index) = index else { return Err(invalid(STR_SPLIT_USAGE.replace("arguments", "index"))) };
    let position =
        if index < 0 { parts.len().checked_sub(index.unsigned_abs() as usize) } else { Some(index as usize) };
    match position.and_then(|position| parts.get(position)) {
        Some(part) => Ok(Value::String((*part).to_owned())),
        None => {
            Err(invalid(format!("Incorrect index to \"str_split\" should be between 0 and {}", parts.len() as i64 - 1)))
        }
    }
}

/// As heat.engine.hot.functions.ReplaceJsonStrict / ReplaceJsonVeryStrict.
fn str_replace_strict(args: Value, empty_allowed: bool) -> Result<Value, EvalError> {
    let name = if empty_allowed { "str_replace_strict" } else { "str_replace_vstrict" };
    let Value::Object(mut args) = args else { return Err(invalid(format!("Arguments to \"{name}\" must be a map"))) };
    let (Some(template), Some(params)) = (args.remove("template"), args.remove("params")) else {
        return Err(invalid(format!("\"{name}\" syntax should be {{template: ..., params: {{...}}}}")));
    };
    if let (Value::String(text), Value::Object(params)) = (&template, &params) {
        if !empty_allowed && let Some((key, _)) = params.iter().find(|(_, value)| is_empty(value)) {
            return Err(invalid(format!(
                "{name} has an undefined or empty value for param {key}, must be a defined non-empty value"
            )));
        }
        let missing = unreplaced(text, params);
        if !missing.is_empty() {
            return Err(invalid(format!("The following params were not found in the template: {}", missing.join(","))));
        }
    }
    str_replace(template, params).map_err(|error| rename(error, name))
}

fn is_empty(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::String(text) => text.is_empty(),
        Value::Array(items) => items.is_empty(),
        Value::Object(map) => map.is_empty(),
        _ => false,
    }
}

/// Placeholders Heat's strict replace does not find: each is looked for in what the longer
/// ones left, longest first (ties lexically), and listed in that order.
fn unreplaced(text: &str, params: &Map<String, Value>) -> Vec<String> {
    let mut keys: Vec<&String> = params.keys().collect();
    keys.sort();
    keys.sort_by_key(|key| std::cmp::Reverse(key.len()));
    let mut fragments: Vec<&str> = vec![text];
    let mut missing = Vec::new();
    for key in keys {
        if key.is_empty() || !fragments.iter().any(|fragment| fragment.contains(key.as_str())) {
            missing.push(key.clone());
            continue;
        }
        fragments = fragments.iter().flat_map(|fragment| fragment.split(key.as_str())).collect();
    }
    missing
}

fn map_merge(args: Value) -> Result<Value, EvalError> {
    let Value::Array(items) = args else {
        return Err(invalid(
            "Incorrect arguments to \"map_merge\" should be: \"map_merge\" : [ { \"key1\": \"val1\" }, { \"key2\": \"val2\" } ]",
        ));
    };
    let mut merged = Map::new();
    for item in items {
        match item {
            Value::Null => {}
            Value::Object(map) => merged.extend(map),
            other => {
                return Err(invalid(format!(
                    "Incorrect arguments: Items to merge must be maps. {} is not a map",
                    kind_name(&other)
                )));
            }
        }
    }
    Ok(Value::Object(merged))
}

const MAP_REPLACE_USAGE: &str = "Incorrect arguments to \"map_replace\" should be: \"map_replace\" : [ { \"key1\": \"val1\" }, {\"keys\": {\"key1\": \"key2\"}, \"values\": {\"val1\": \"val2\"}}]";

fn ensure_map(value: Value) -> Result<Map<String, Value>, EvalError> {
    match value {
        Value::Null => Ok(Map::new()),
        Value::Object(map) => Ok(map),
        _ => Err(invalid(
            "Incorrect arguments: to \"map_replace\", arguments must be a list of maps. Example:  \"map_replace\" : [ { \"key1\": \"val1\" }, {\"keys\": {\"key1\": \"key2\"}, \"values\": {\"val1\": \"val2\"}}]",
        )),
    }
}

/// As heat.engine.hot.functions.MapReplace: keys renamed (collisions refused), values
/// replaced where they are scalars equal to a `values` key.
fn map_replace(args: Value) -> Result<Value, EvalError> {
    let Value::Array(items) = args else { return Err(invalid(MAP_REPLACE_USAGE)) };
    let [input, replacements] = <[Value; 2]>::try_from(items).map_err(|_| invalid(MAP_REPLACE_USAGE))?;
    let input = ensure_map(input)?;
    let mut replacements = ensure_map(replacements)?;
    if replacements.keys().any(|key| key != "keys" && key != "values") {
        return Err(invalid(MAP_REPLACE_USAGE));
    }
    let keys = ensure_map(replacements.remove("keys").unwrap_or(Value::Null))?;
    let values = ensure_map(replacements.remove("values").unwrap_or(Value::Null))?;
    let mut output = Map::new();
    for (key, value) in &input {
        let new_key = match keys.get(key) {
            None | Some(Value::Null) => key.clone(),
            Some(Value::String(new_key)) if input.contains_key(new_key) && new_key != key => {
                return Err(invalid(format!("key replacement {new_key} collides with a key in the input map")));
            }
            Some(Value::String(new_key)) if output.contains_key(new_key) => {
                return Err(invalid(format!("key replacement {new_key} collides with a key in the output map")));
            }
            Some(Value::String(new_key)) => new_key.clone(),
            Some(other) => {
                return Err(invalid(format!(
                    "map_replace: a key replacement must be a string, not {}",
                    kind_name(other)
                )));
            }
        };
        output.insert(new_key, replace_value(value, &values));
    }
    Ok(Value::Object(output))
}

/// `repl_values.get(v, v)`: a value found among the (string) keys is replaced; Python
/// hashes `1` and `"1"` differently, so only strings can match.
fn replace_value(value: &Value, values: &Map<String, Value>) -> Value {
    match value {
        Value::String(text) => values.get(text).cloned().unwrap_or_else(|| value.clone()),
        other => other.clone(),
    }
}

fn list_concat(args: Value, unique: bool) -> Result<Value, EvalError> {
    let name = if unique { "list_concat_unique" } else { "list_concat" };
    let Value::Array(items) = args else {
        return Err(invalid(format!(
            "Incorrect arguments to \"{name}\" should be: \"{name}\" : [ [ <value 1>, <value 2> ], [ <value 3>, <value 4> ] ]"
        )));
    };
    let mut joined: Vec<Value> = Vec::new();
    // The same large list may be named many times: the size is bounded, not only the count.
    let mut bytes = 0usize;
    for item in items {
        match item {
            Value::Null => {}
            Value::Array(list) => {
                bytes = bytes.saturating_add(serde_json::to_string(&list).map_or(usize::MAX, |text| text.len()));
                if bytes > MAX_RESULT_BYTES {
                    return Err(invalid(format!("{name}: the result is larger than {MAX_RESULT_BYTES} bytes")));
                }
                joined.extend(list);
            }
            other => {
                return Err(invalid(format!(
                    "Incorrect arguments: Items to concat must be lists. An item is {}",
                    kind_name(&other)
                )));
            }
        }
        if joined.len() > MAX_LIST_ITEMS {
            return Err(invalid(format!("{name}: the result would have more than {MAX_LIST_ITEMS} items")));
        }
    }
    if !unique {
        return Ok(Value::Array(joined));
    }
    let mut distinct: Vec<Value> = Vec::new();
    for item in joined {
        if !distinct.iter().any(|seen| py_eq(seen, &item)) {
            distinct.push(item);
        }
    }
    Ok(Value::Array(distinct))
}

fn contains(args: Value) -> Result<Value, EvalError> {
    let Value::Array(items) = args else {
        return Err(invalid(
            "Incorrect arguments to \"contains\" should be: \"contains\" : [ \"value1\", [ \"value1\", \"value2\"]]",
        ));
    };
    let [value, sequence] = items.as_slice() else {
        return Err(invalid("Arguments to \"contains\" must be of the form: [value1, [value1, value2]]"));
    };
    match (value, sequence) {
        (_, Value::Array(list)) => Ok(Value::Bool(list.iter().any(|item| py_eq(item, value)))),
        // A Python string is a sequence too: `in` is a substring test.
        (Value::String(needle), Value::String(text)) => Ok(Value::Bool(text.contains(needle.as_str()))),
        (_, Value::String(_)) => Err(invalid("contains: 'in <string>' requires string as left operand")),
        _ => Err(invalid("Second argument to \"contains\" should be a sequence.")),
    }
}

fn truthy(value: &Value) -> bool {
    match value {
        Value::Null => false,
        Value::Bool(flag) => *flag,
        Value::Number(_) => python_number(value).is_some_and(|number| number != 0.0),
        Value::String(text) => !text.is_empty(),
        Value::Array(items) => !items.is_empty(),
        Value::Object(map) => !map.is_empty(),
    }
}

fn filter(args: Value) -> Result<Value, EvalError> {
    let Value::Array(items) = args else { return Err(invalid("Argument to \"filter\" must be a list")) };
    let [values, sequence] = <[Value; 2]>::try_from(items).map_err(|items| {
        invalid(format!(
            "\"filter\" expected 2 arguments of the form [values, sequence] but got {} arguments instead",
            items.len()
        ))
    })?;
    if !truthy(&sequence) {
        return Ok(sequence);
    }
    let Value::Array(sequence) = sequence else { return Err(invalid("\"filter\" only works with lists")) };
    if !truthy(&values) {
        return Ok(Value::Array(sequence));
    }
    let Value::Array(values) = values else { return Err(invalid("\"filter\" filters a list of values")) };
    Ok(Value::Array(sequence.into_iter().filter(|item| !values.iter().any(|value| py_eq(value, item))).collect()))
}
