//! `repeat`, as heat.engine.hot.functions.Repeat, RepeatWithMap (2016-10-14+) and
//! RepeatWithNestedLoop (2017-09-01+), bounded in items and estimated size.

use serde_json::{Map, Value};

use super::{MAX_LIST_ITEMS, invalid};
use crate::template::expr::EvalError;
use crate::template::expr::values::{MAX_RESULT_BYTES, kind_name};

/// As heat.engine.hot.functions.Repeat and its subclasses: a cartesian product (or a zip
/// with `permutations: false`) of the `for_each` lists, each placeholder replaced in every
/// string (keys included) of `template`.
pub(super) fn repeat(args: Value, with_maps: bool, with_permutations: bool) -> Result<Value, EvalError> {
    let Value::Object(mut args) = args else { return Err(invalid("Arguments to \"repeat\" must be a map")) };
    let (Some(for_each), Some(template)) = (args.remove("for_each"), args.remove("template")) else {
        return Err(invalid("\"repeat\" syntax should be {template: ..., for_each: {%var%: [...]}}"));
    };
    let nested = match args.remove("permutations") {
        Some(Value::Bool(flag)) if with_permutations => flag,
        Some(_) if with_permutations => {
            return Err(invalid("\"permutations\" should be boolean type for repeat function."));
        }
        _ => true,
    };
    let Value::Object(for_each) = for_each else {
        return Err(invalid("The \"for_each\" argument to \"repeat\" must contain a map"));
    };
    if for_each.is_empty() {
        // Heat's `zip(*for_each.items())` cannot unpack nothing.
        return Err(invalid("repeat: not enough values to unpack (the for_each map is empty)"));
    }
    let mut keys = Vec::new();
    let mut lists: Vec<Vec<Value>> = Vec::new();
    for (key, value) in for_each {
        let items = match value {
            Value::Null => Vec::new(),
            Value::Array(items) => items,
            Value::Object(map) if with_maps && nested => map.keys().cloned().map(Value::String).collect(),
            _ if with_maps && nested => {
                return Err(invalid("The values of the \"for_each\" argument to \"repeat\" must be lists or maps"));
            }
            _ => return Err(invalid("The values of the \"for_each\" argument to \"repeat\" must be lists")),
        };
        keys.push(key);
        lists.push(items);
    }
    let rows = combinations(&lists, nested, template_weight(&template))?;
    rows.into_iter().map(|row| replace_in(&template, &keys, &row)).collect::<Result<Vec<_>, _>>().map(Value::Array)
}

fn template_weight(template: &Value) -> usize {
    serde_json::to_string(template).map_or(1, |text| text.len().max(1))
}

/// The rows `repeat` makes, bounded in count and in estimated result size.
fn combinations(lists: &[Vec<Value>], nested: bool, weight: usize) -> Result<Vec<Vec<&Value>>, EvalError> {
    let count = if nested {
        lists.iter().try_fold(1usize, |count, list| count.checked_mul(list.len()))
    } else {
        let lengths: Vec<usize> = lists.iter().map(Vec::len).filter(|length| *length > 0).collect();
        if lengths.windows(2).any(|pair| pair[0] != pair[1]) {
            return Err(invalid("For repeat, the length of for_each values should be equal if no nested loop."));
        }
        Some(lists.iter().map(Vec::len).min().unwrap_or(0))
    };
    let too_many = |count: usize| count > MAX_LIST_ITEMS || count.saturating_mul(weight) > MAX_RESULT_BYTES;
    let Some(count) = count.filter(|count| !too_many(*count)) else {
        return Err(invalid(format!(
            "repeat: the result would have more than {MAX_LIST_ITEMS} items or {MAX_RESULT_BYTES} bytes"
        )));
    };
    if !nested {
        return Ok((0..count).map(|index| lists.iter().map(|list| &list[index]).collect()).collect());
    }
    let mut rows: Vec<Vec<&Value>> = vec![Vec::new()];
    for list in lists {
        rows =
            rows.into_iter().flat_map(|row| list.iter().map(move |item| [row.clone(), vec![item]].concat())).collect();
    }
    Ok(rows)
}

fn replace_in(template: &Value, keys: &[String], row: &[&Value]) -> Result<Value, EvalError> {
    let replace = |text: &str| -> Result<String, EvalError> {
        let mut text = text.to_owned();
        for (key, value) in keys.iter().zip(row) {
            let Value::String(value) = value else {
                return Err(invalid(format!("repeat: replace() argument 2 must be str, not {}", kind_name(value))));
            };
            text = text.replace(key.as_str(), value);
        }
        Ok(text)
    };
    match template {
        Value::String(text) => replace(text).map(Value::String),
        Value::Array(items) => {
            items.iter().map(|item| replace_in(item, keys, row)).collect::<Result<_, _>>().map(Value::Array)
        }
        Value::Object(map) => {
            let mut out = Map::new();
            for (key, item) in map {
                out.insert(replace(key)?, replace_in(item, keys, row)?);
            }
            Ok(Value::Object(out))
        }
        scalar => Ok(scalar.clone()),
    }
}
