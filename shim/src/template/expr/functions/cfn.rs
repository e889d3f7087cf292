//! The CloudFormation functions Heat accepts in early HOT versions (heat.engine.cfn.functions):
//! `Fn::Select` (until 2015-04-30), `Fn::Join`, `Fn::Split`, `Fn::Replace`, `Fn::MemberListToMap`
//! (2013-05-23 only).
//! `Fn::Base64` is the identity, as in Heat, and lives in `apply.rs`. Also `str_replace` and
//! `list_join` as templates before 2015-10-15 have them, which Fn::Replace and Fn::Join share.

use std::collections::HashMap;

use serde_json::Value;

use super::{invalid, rename};
use crate::template::expr::EvalError;
use crate::template::expr::values::{MAX_RESULT_BYTES, kind_name, str_replace};

/// As heat.engine.cfn.functions.Select.
pub(super) fn select(args: Value) -> Result<Value, EvalError> {
    let Value::Array(items) = args else {
        return Err(invalid("Arguments to \"Fn::Select\" must be of the form [index, collection]"));
    };
    let [index, collection] = <[Value; 2]>::try_from(items)
        .map_err(|_| invalid("Arguments to \"Fn::Select\" must be of the form [index, collection]"))?;
    let collection = match collection {
        Value::String(text) if text.is_empty() => return Ok(Value::String(String::new())),
        Value::String(text) => {
            serde_json::from_str(&text).map_err(|error| invalid(format!("\"Fn::Select\": {error}")))?
        }
        other => other,
    };
    match collection {
        Value::Object(map) => match index {
            Value::String(key) => Ok(map.get(&key).cloned().unwrap_or_else(|| Value::String(String::new()))),
            _ => Err(invalid("Index to \"Fn::Select\" must be a string")),
        },
        Value::Array(list) => {
            let position = match &index {
                Value::Number(number) => number.as_i64(),
                Value::String(text) => text.trim().parse::<i64>().ok(),
                Value::Bool(flag) => Some(i64::from(*flag)),
                _ => None,
            };
            let Some(position) = position else { return Err(invalid("Index to \"Fn::Select\" must be an integer")) };
            let item = if position < 0 {
                list.len().checked_sub(position.unsigned_abs() as usize).and_then(|at| list.get(at))
            } else {
                list.get(position as usize)
            };
            Ok(item.cloned().unwrap_or_else(|| Value::String(String::new())))
        }
        Value::Null => Ok(Value::String(String::new())),
        _ => Err(invalid("Arguments to Fn::Select not fully resolved")),
    }
}

const CFN_JOIN_USAGE: &str =
    "Incorrect arguments to \"Fn::Join\" should be: \"Fn::Join\" : [ \" \", [ \"str1\", \"str2\"]]";

/// As heat.engine.hot.functions.Join (one list of strings), which Fn::Join is.
pub(super) fn cfn_join(args: Value) -> Result<Value, EvalError> {
    let Value::Array(items) = args else { return Err(invalid(CFN_JOIN_USAGE)) };
    let [delimiter, strings] = <[Value; 2]>::try_from(items).map_err(|_| invalid(CFN_JOIN_USAGE))?;
    let strings = match strings {
        Value::Null => Vec::new(),
        Value::Array(strings) => strings,
        _ => return Err(invalid("\"Fn::Join\" must operate on a list")),
    };
    let Value::String(delimiter) = delimiter else { return Err(invalid("\"Fn::Join\" delimiter must be a string")) };
    let mut parts = Vec::with_capacity(strings.len());
    let mut size = 0usize;
    for item in strings {
        let text = match item {
            Value::Null => String::new(),
            Value::String(text) => text,
            other => return Err(invalid(format!("Items to join must be strings not {}", kind_name(&other)))),
        };
        size = size.saturating_add(text.len() + delimiter.len());
        if size > MAX_RESULT_BYTES {
            return Err(invalid(format!("Fn::Join: the result is larger than {MAX_RESULT_BYTES} bytes")));
        }
        parts.push(text);
    }
    Ok(Value::String(parts.join(&delimiter)))
}

pub(super) fn cfn_split(args: Value) -> Result<Value, EvalError> {
    let usage = "Incorrect arguments to \"Fn::Split\" should be: \"Fn::Split\" : [ \",\", \"str1,str2\"]]";
    let Value::Array(items) = args else { return Err(invalid(usage)) };
    let [delimiter, text] = <[Value; 2]>::try_from(items).map_err(|_| invalid(usage))?;
    let Value::String(delimiter) = delimiter else { return Err(invalid("Delimiter for Fn::Split must be string")) };
    let Value::String(text) = text else { return Err(invalid("String to split must be string")) };
    if delimiter.is_empty() {
        return Err(invalid("Fn::Split: empty separator"));
    }
    Ok(Value::Array(text.split(delimiter.as_str()).map(|part| Value::String(part.to_owned())).collect()))
}

/// `str_replace` before 2015-10-15 (heat.engine.hot.functions.Replace).
pub(super) fn legacy_replace(args: Value) -> Result<Value, EvalError> {
    let Value::Object(mut args) = args else { return Err(invalid("Arguments to \"str_replace\" must be a map")) };
    let template = args.remove("template").unwrap_or(Value::Null);
    let params = args.remove("params").unwrap_or(Value::Null);
    scalar_params("str_replace", &params)?;
    str_replace(template, params)
}

/// `list_join` before 2015-10-15 (heat.engine.hot.functions.Join): Fn::Join's rules.
pub(super) fn legacy_join(args: Value) -> Result<Value, EvalError> {
    cfn_join(args).map_err(|error| match error {
        EvalError::Invalid { message } => invalid(message.replace("Fn::Join", "list_join")),
        other => other,
    })
}

fn scalar_params(name: &str, params: &Value) -> Result<(), EvalError> {
    if let Value::Object(map) = params
        && let Some((key, _)) = map.iter().find(|(_, value)| matches!(value, Value::Array(_) | Value::Object(_)))
    {
        return Err(invalid(format!("\"{name}\" params must be strings or numbers, param {key} is not valid")));
    }
    Ok(())
}

/// As heat.engine.cfn.functions.Replace: `[params, template]`, params strings or numbers.
pub(super) fn cfn_replace(args: Value) -> Result<Value, EvalError> {
    let usage = "Incorrect arguments to \"Fn::Replace\" should be: {\"Fn::Replace\": [ {\"$var1\": \"foo\", \"%var2%\": \"bar\"}, \"$var1 is %var2%\"]}";
    let Value::Array(items) = args else { return Err(invalid(usage)) };
    let [params, template] = <[Value; 2]>::try_from(items).map_err(|_| invalid(usage))?;
    scalar_params("Fn::Replace", &params)?;
    str_replace(template, params).map_err(|error| rename(error, "Fn::Replace"))
}

const MEMBER_LIST_USAGE: &str = "Wrong Arguments try: \"{'Fn::MemberListToMap': ['Name', 'Value', ['.member.0.Name=key', '.member.0.Value=door']]}\"";

/// As heat.engine.cfn.functions.MemberListToMap: `[key_name, value_name, members]`, each member
/// a `<path>=<value>` string (a later path wins); the paths `.member.<N>.<field>` are grouped
/// by N in numeric order (heat.api.aws.utils.extract_param_pairs) and each group with both
/// fields gives one entry `{<key_name field>: <value_name field>}`, a later group winning.
pub(super) fn member_list_to_map(args: Value) -> Result<Value, EvalError> {
    let Value::Array(items) = args else { return Err(invalid(MEMBER_LIST_USAGE)) };
    let [key_name, value_name, members] = <[Value; 3]>::try_from(items).map_err(|_| invalid(MEMBER_LIST_USAGE))?;
    let Value::String(key_name) = key_name else {
        return Err(invalid("Fn::MemberListToMap Key Name must be a string"));
    };
    let Value::String(value_name) = value_name else {
        return Err(invalid("Fn::MemberListToMap Value Name must be a string"));
    };
    // What Python iterates: a list's items, a map's keys, a string's characters.
    let members: Vec<Value> = match members {
        Value::Array(items) => items,
        Value::Object(map) => map.into_iter().map(|(key, _)| Value::String(key)).collect(),
        Value::String(text) => text.chars().map(|character| Value::String(character.to_string())).collect(),
        _ => return Err(invalid("Member list must be a list")),
    };
    let mut groups: Vec<(String, HashMap<String, String>)> = Vec::new();
    // Indexes looked up by hash: a template may list tens of thousands of members.
    let mut places = HashMap::new();
    for (path, value) in member_partials(&members)? {
        let Some((index, field)) = member_path(&path) else { continue };
        match places.get(&index).and_then(|place: &usize| groups.get_mut(*place)) {
            Some((_, fields)) => {
                fields.insert(field, value);
            }
            None => {
                places.insert(index.clone(), groups.len());
                groups.push((index, HashMap::from([(field, value)])));
            }
        }
    }
    // A stable sort by the index's numeric value (its digits without leading zeros).
    groups.sort_by(|(left, _), (right, _)| left.len().cmp(&right.len()).then_with(|| left.cmp(right)));
    let mut map = serde_json::Map::new();
    for (_, fields) in groups {
        if let (Some(key), Some(value)) = (fields.get(&key_name), fields.get(&value_name)) {
            map.insert(key.clone(), Value::String(value.clone()));
        }
    }
    Ok(Value::Object(map))
}

/// Each member split at its first `=`, a repeated path keeping its first place and last value.
fn member_partials(members: &[Value]) -> Result<Vec<(String, String)>, EvalError> {
    let mut partials = Vec::new();
    let mut places = HashMap::new();
    for (position, member) in members.iter().enumerate() {
        let Value::String(text) = member else { return Err(invalid("Member list items must be strings")) };
        let Some((path, value)) = text.split_once('=') else {
            return Err(invalid(format!("dictionary update sequence element #{position} has length 1; 2 is required")));
        };
        match places.get(path) {
            Some(&place) => set_at(&mut partials, place, value),
            None => {
                places.insert(path.to_owned(), partials.len());
                partials.push((path.to_owned(), value.to_owned()));
            }
        }
    }
    Ok(partials)
}

fn set_at(partials: &mut [(String, String)], place: usize, value: &str) {
    if let Some(entry) = partials.get_mut(place) {
        entry.1 = value.to_owned();
    }
}

/// `.member.<digits>.<field>` as Python's `re.match(r"\.member\.([0-9]+)\.(.*)", path)` reads
/// it: the index (digits without leading zeros) and the field up to the first newline.
fn member_path(path: &str) -> Option<(String, String)> {
    let rest = path.strip_prefix(".member.")?;
    let digits = rest.len() - rest.trim_start_matches(|character: char| character.is_ascii_digit()).len();
    let field = rest[digits..].strip_prefix('.')?;
    if digits == 0 {
        return None;
    }
    let index = rest[..digits].trim_start_matches('0');
    let index = if index.is_empty() { "0" } else { index };
    let field = field.split('\n').next().unwrap_or_default();
    Some((index.to_owned(), field.to_owned()))
}
