//! yaql's collection methods (yaql.standard_library.queries and collections) on lists and
//! query results: `select`, `where`, `selectMany`, `reduce`, `groupBy`, `toDict`, `distinct`,
//! `any`, `all`, `first`, `last`, `zip`, `flatten`, `contains`, `repeat`, `sum`, `max`, `min`.
//! A collection argument holds at most `LIMIT_ITERATORS` items (Heat's `limit_iterators`);
//! every item visited counts against the step budget.

use serde_json::{Map, Value};

use super::super::{LIMIT_ITERATORS, YaqlError};
use super::{
    Args, Evaluator, Item, MethodCall, Number, Scope, map_key, no_match, number, operators, truthy, type_name,
};
use crate::template::expr::values::py_eq;

const METHODS: &[&str] = &[
    "select",
    "where",
    "selectMany",
    "reduce",
    "groupBy",
    "toDict",
    "distinct",
    "any",
    "all",
    "first",
    "last",
    "zip",
    "flatten",
    "contains",
    "repeat",
    "sum",
    "max",
    "min",
];

/// The items of a collection argument: a list or a query result (not a map or a string).
pub(super) fn collection(function: &str, item: Item) -> Result<Vec<Value>, YaqlError> {
    match item.value {
        Value::Array(items) if items.len() > LIMIT_ITERATORS => Err(YaqlError::CollectionTooLarge),
        Value::Array(items) => Ok(items),
        other => Err(YaqlError::Evaluation(format!(
            "No method \"{function}\" for receiver of type {} matches supplied arguments",
            type_name(&other)
        ))),
    }
}

pub(super) fn lambda_method(evaluator: &mut Evaluator, call: MethodCall) -> Option<Result<Item, YaqlError>> {
    let MethodCall { scope, receiver, name, args } = call;
    if !METHODS.contains(&name) || (name == "repeat") {
        return (name == "repeat").then(|| repeat(evaluator, scope, receiver, args));
    }
    Some(collection(name, receiver.clone()).and_then(|items| {
        evaluator.step(items.len())?;
        method(evaluator, call, items)
    }))
}

/// The lambda argument at `index` or named `key`, required: a call without it matches nothing.
fn required_lambda<'n>(call: &MethodCall<'_, '_, 'n>, index: usize, key: &str) -> Result<&'n Node, YaqlError> {
    call.args.node(index, key).ok_or_else(|| no_match(call.name))
}

use super::super::parser::Node;

/// A collection method on the receiver's `items`.
fn method(evaluator: &mut Evaluator, call: MethodCall, items: Vec<Value>) -> Result<Item, YaqlError> {
    let MethodCall { scope, name, args, .. } = call;
    match name {
        "select" | "where" | "selectMany" => select(evaluator, call, items),
        "reduce" => reduce(evaluator, call, items),
        "groupBy" => group_by(evaluator, scope, items, args),
        "toDict" => to_dict(evaluator, call, items),
        "distinct" => distinct(evaluator, call, items),
        "any" | "all" => any_or_all(evaluator, call, items),
        "first" | "last" => {
            args.at_most(name, 1, &["default"])?;
            let default = args.value(evaluator, scope, 0, "default")?;
            let found = if name == "first" { items.into_iter().next() } else { items.into_iter().next_back() };
            found
                .or(default)
                .map(Item::plain)
                .ok_or_else(|| YaqlError::Evaluation("StopIteration: the collection is empty".into()))
        }
        _ => {
            let values =
                args.positional.iter().map(|node| evaluator.evaluate(node, scope)).collect::<Result<Vec<_>, _>>()?;
            if !args.pairs.is_empty() {
                return Err(no_match(name));
            }
            apply(evaluator, name, Item::plain(Value::Array(items)), values)
        }
    }
}

/// `select(selector)`, `where(predicate)`, `selectMany(selector)`.
fn select(evaluator: &mut Evaluator, call: MethodCall, items: Vec<Value>) -> Result<Item, YaqlError> {
    let name = call.name;
    call.args.at_most(name, 1, &["selector", "predicate"])?;
    let body = required_lambda(&call, 0, if name == "where" { "predicate" } else { "selector" })?;
    let mut output = Vec::new();
    for item in items {
        let result = evaluator.call_lambda(body, call.scope, std::slice::from_ref(&item))?;
        match name {
            "select" => output.push(result),
            "where" if truthy(&result) => output.push(item),
            "where" => {}
            _ => match result {
                Value::Array(inner) => output.extend(inner),
                other => output.push(other),
            },
        }
        if output.len() > LIMIT_ITERATORS {
            return Err(YaqlError::CollectionTooLarge);
        }
    }
    Item::iterator(output)
}

/// `reduce(selector, seed)`: Python's functools.reduce.
fn reduce(evaluator: &mut Evaluator, call: MethodCall, items: Vec<Value>) -> Result<Item, YaqlError> {
    call.args.at_most(call.name, 2, &["selector", "seed"])?;
    let body = required_lambda(&call, 0, "selector")?;
    let mut items = items.into_iter();
    let seed = call.args.value(evaluator, call.scope, 1, "seed")?;
    let Some(mut accumulator) = seed.or_else(|| items.next()) else {
        return Err(YaqlError::Evaluation("TypeError: reduce() of empty iterable with no initial value".into()));
    };
    for item in items {
        accumulator = evaluator.call_lambda(body, call.scope, &[accumulator, item])?;
    }
    Ok(Item::plain(accumulator))
}

/// `toDict(keySelector, valueSelector)`: a later key replaces an earlier one.
fn to_dict(evaluator: &mut Evaluator, call: MethodCall, items: Vec<Value>) -> Result<Item, YaqlError> {
    call.args.at_most(call.name, 2, &["keySelector", "valueSelector"])?;
    let key_body = required_lambda(&call, 0, "keySelector")?;
    let value_body = call.args.node(1, "valueSelector");
    let mut map = Map::new();
    for item in items {
        let key = map_key(evaluator.call_lambda(key_body, call.scope, std::slice::from_ref(&item))?)?;
        let value = match value_body {
            Some(body) => evaluator.call_lambda(body, call.scope, std::slice::from_ref(&item))?,
            None => item,
        };
        map.insert(key, value);
    }
    Ok(Item::plain(Value::Object(map)))
}

/// `distinct(keySelector)`: the first item of each value (or key), in order.
fn distinct(evaluator: &mut Evaluator, call: MethodCall, items: Vec<Value>) -> Result<Item, YaqlError> {
    call.args.at_most(call.name, 1, &["keySelector"])?;
    let Some(body) = call.args.node(0, "keySelector") else {
        return Item::iterator(distinct_values(evaluator, items)?);
    };
    let mut keys: Vec<Value> = Vec::new();
    let mut output = Vec::new();
    for item in items {
        let key = evaluator.call_lambda(body, call.scope, std::slice::from_ref(&item))?;
        if !keys.iter().any(|seen| py_eq(seen, &key)) {
            keys.push(key);
            output.push(item);
        }
    }
    Item::iterator(output)
}

/// `any(predicate)` and `all(predicate)`, stopping at the first item that decides.
fn any_or_all(evaluator: &mut Evaluator, call: MethodCall, items: Vec<Value>) -> Result<Item, YaqlError> {
    call.args.at_most(call.name, 1, &["predicate"])?;
    let body = call.args.node(0, "predicate");
    let all = call.name == "all";
    let mut found = all;
    for item in items {
        let test = match body {
            Some(body) => truthy(&evaluator.call_lambda(body, call.scope, std::slice::from_ref(&item))?),
            None => truthy(&item),
        };
        if test != all {
            found = !found;
            break;
        }
    }
    Ok(Item::plain(Value::Bool(found)))
}

/// `groupBy(keySelector, valueSelector)`: `[key, [values...]]` in first-seen key order.
fn group_by(evaluator: &mut Evaluator, scope: &Scope, items: Vec<Value>, args: &Args) -> Result<Item, YaqlError> {
    args.at_most("groupBy", 2, &["keySelector", "valueSelector"])?;
    let key_body = args.node(0, "keySelector").ok_or_else(|| no_match("groupBy"))?;
    let value_body = args.node(1, "valueSelector");
    let mut groups: Vec<(Value, Vec<Value>)> = Vec::new();
    for item in items {
        let key = evaluator.call_lambda(key_body, scope, std::slice::from_ref(&item))?;
        let value = match value_body {
            Some(body) => evaluator.call_lambda(body, scope, std::slice::from_ref(&item))?,
            None => item,
        };
        match groups.iter_mut().find(|(seen, _)| py_eq(seen, &key)) {
            Some((_, values)) => values.push(value),
            None => groups.push((key, vec![value])),
        }
    }
    Item::iterator(groups.into_iter().map(|(key, values)| Value::Array(vec![key, Value::Array(values)])).collect())
}

pub(super) fn distinct_values(evaluator: &mut Evaluator, items: Vec<Value>) -> Result<Vec<Value>, YaqlError> {
    evaluator.step(items.len().saturating_mul(items.len()) / 8 + 1)?;
    let mut output: Vec<Value> = Vec::new();
    for item in items {
        if !output.iter().any(|seen| py_eq(seen, &item)) {
            output.push(item);
        }
    }
    if output.len() > LIMIT_ITERATORS {
        return Err(YaqlError::CollectionTooLarge);
    }
    Ok(output)
}

/// `value.repeat(times)`: a list of `times` copies (no count: endless, so refused).
fn repeat(evaluator: &mut Evaluator, scope: &Scope, receiver: &Item, args: &Args) -> Result<Item, YaqlError> {
    args.at_most("repeat", 1, &["times"])?;
    let times = match args.value(evaluator, scope, 0, "times")?.as_ref().and_then(number) {
        None if args.node(0, "times").is_none() => return Err(YaqlError::CollectionTooLarge),
        Some(Number::Integer(times)) => usize::try_from(times).unwrap_or(0),
        _ => return Err(no_match("repeat")),
    };
    if times > LIMIT_ITERATORS {
        return Err(YaqlError::CollectionTooLarge);
    }
    evaluator.step(times)?;
    Item::iterator(vec![receiver.value.clone(); times])
}

/// The collection functions on evaluated values: receiver first.
pub(super) fn apply(evaluator: &mut Evaluator, name: &str, receiver: Item, args: Vec<Item>) -> Result<Item, YaqlError> {
    match (name, args.len()) {
        ("max" | "min", 1) => {
            let mut pair = vec![receiver.value, args.into_iter().next().map(|item| item.value).unwrap_or(Value::Null)];
            let picked = extreme(name, &mut pair)?;
            Ok(Item::plain(picked))
        }
        ("max" | "min" | "sum" | "flatten" | "distinct" | "any" | "all", 0) => {
            let mut items = collection(name, receiver)?;
            evaluator.step(items.len())?;
            match name {
                "max" | "min" => extreme(name, &mut items).map(Item::plain),
                "sum" => sum(items).map(Item::plain),
                "flatten" => Item::iterator(flatten(evaluator, items)?),
                "distinct" => Item::iterator(distinct_values(evaluator, items)?),
                "any" => Ok(Item::plain(Value::Bool(items.iter().any(truthy)))),
                _ => Ok(Item::plain(Value::Bool(items.iter().all(truthy)))),
            }
        }
        ("contains", 1) => {
            let value = args.into_iter().next().map(|item| item.value).unwrap_or(Value::Null);
            let items = Item::plain(Value::Array(collection(name, receiver)?));
            Ok(Item::plain(Value::Bool(operators::contains(&items, &value).unwrap_or(false))))
        }
        ("zip", _) if !args.is_empty() => {
            let mut lists = vec![collection(name, receiver)?];
            for arg in args {
                lists.push(collection(name, arg)?);
            }
            let shortest = lists.iter().map(Vec::len).min().unwrap_or(0);
            let rows = (0..shortest).map(|index| Value::Array(lists.iter().map(|list| list[index].clone()).collect()));
            Item::iterator(rows.collect())
        }
        _ => Err(no_match(name)),
    }
}

fn extreme(name: &str, items: &mut [Value]) -> Result<Value, YaqlError> {
    let mut best: Option<Value> = None;
    for item in items.iter_mut() {
        let item = std::mem::take(item);
        best = Some(match best {
            None => item,
            Some(current) => {
                let operator = if name == "max" { ">" } else { "<" };
                let better = operators::binary_compare(operator, &item, &current)?;
                if better { item } else { current }
            }
        });
    }
    best.ok_or_else(|| YaqlError::Evaluation(format!("TypeError: {name}() of an empty collection")))
}

fn sum(items: Vec<Value>) -> Result<Value, YaqlError> {
    let mut total = Item::plain(Value::from(0));
    let mut evaluator_free = Vec::new();
    for item in items {
        if number(&item).is_none() {
            return Err(no_match("sum"));
        }
        evaluator_free.push(item);
    }
    for item in evaluator_free {
        total = operators::add_numbers(total, Item::plain(item))?;
    }
    Ok(total.value)
}

/// Nested lists expanded in place, recursively; maps and strings are items.
fn flatten(evaluator: &mut Evaluator, items: Vec<Value>) -> Result<Vec<Value>, YaqlError> {
    let mut output = Vec::new();
    let mut stack: Vec<std::vec::IntoIter<Value>> = vec![items.into_iter()];
    while let Some(top) = stack.last_mut() {
        let Some(item) = top.next() else {
            stack.pop();
            continue;
        };
        evaluator.step(1)?;
        match item {
            Value::Array(inner) => stack.push(inner.into_iter()),
            other => {
                output.push(other);
                if output.len() > LIMIT_ITERATORS {
                    return Err(YaqlError::CollectionTooLarge);
                }
            }
        }
    }
    Ok(output)
}
