//! The functions and methods of the supported yaql subset and how they are called: which
//! names exist as functions (`len(x)`), as methods (`x.len()`) or both, as yaql's standard
//! library declares them; the argument conventions (positional, `name => value` keyword
//! arguments, lambdas evaluated per item); and the functions that are not about collections
//! or text: `coalesce`, `let`, `switch`, `dict`, `list`, `len`, `int`, `range`, `isList`,
//! `isDict`, `isString` and the map methods. Collections are `queries.rs`, text `text.rs`.

use serde_json::{Map, Value};

use super::super::LIMIT_ITERATORS;
use super::super::YaqlError;
use super::super::parser::Argument;
use super::{Args, Evaluator, Item, Kind, MethodCall, Number, Scope, map_key, number, type_name};
use super::{no_match, queries, text};

/// How a library name may be called.
#[derive(Clone, Copy, PartialEq)]
enum Form {
    Function,
    Method,
    Both,
}

const LIBRARY: &[(&str, Form)] = &[
    ("coalesce", Form::Function),
    ("dict", Form::Function),
    ("let", Form::Function),
    ("list", Form::Function),
    ("int", Form::Function),
    ("str", Form::Function),
    ("switch", Form::Function),
    ("range", Form::Function),
    ("regex", Form::Function),
    ("isDict", Form::Function),
    ("isList", Form::Function),
    ("isString", Form::Function),
    ("len", Form::Both),
    ("concat", Form::Both),
    ("distinct", Form::Both),
    ("any", Form::Both),
    ("all", Form::Both),
    ("max", Form::Both),
    ("min", Form::Both),
    ("isEmpty", Form::Both),
    ("items", Form::Method),
    ("keys", Form::Method),
    ("values", Form::Method),
    ("get", Form::Method),
    ("containsKey", Form::Method),
    ("mergeWith", Form::Method),
    ("deleteAll", Form::Method),
    ("first", Form::Method),
    ("last", Form::Method),
    ("select", Form::Method),
    ("where", Form::Method),
    ("selectMany", Form::Method),
    ("flatten", Form::Method),
    ("reduce", Form::Method),
    ("zip", Form::Method),
    ("groupBy", Form::Method),
    ("toDict", Form::Method),
    ("contains", Form::Method),
    ("repeat", Form::Method),
    ("sum", Form::Method),
    ("join", Form::Method),
    ("split", Form::Method),
    ("rightSplit", Form::Method),
    ("replace", Form::Method),
    ("toUpper", Form::Method),
    ("toLower", Form::Method),
    ("startsWith", Form::Method),
    ("endsWith", Form::Method),
    ("trim", Form::Method),
    ("matches", Form::Method),
    ("search", Form::Method),
];

fn form(name: &str) -> Option<Form> {
    LIBRARY.iter().find(|(known, _)| *known == name).map(|(_, form)| *form)
}

pub(crate) fn is_function(name: &str) -> bool {
    matches!(form(name), Some(Form::Function | Form::Both))
}

pub(crate) fn is_method(name: &str) -> bool {
    matches!(form(name), Some(Form::Method | Form::Both))
}

pub(super) fn call_function(
    evaluator: &mut Evaluator,
    scope: &Scope,
    name: &str,
    args: &[Argument],
) -> Result<Item, YaqlError> {
    if !is_function(name) {
        return Err(YaqlError::Evaluation(format!("Unknown function \"{name}\"")));
    }
    let args = Args::new(args);
    match name {
        "coalesce" => coalesce(evaluator, scope, &args),
        "let" => Err(YaqlError::Evaluation("let(...) must be followed by -> and an expression".into())),
        "switch" => switch(evaluator, scope, &args),
        "dict" => dict(evaluator, scope, &args),
        "list" => list(evaluator, scope, &args),
        "range" => range(evaluator, scope, &args),
        "regex" => Err(YaqlError::Evaluation("regex(...) is supported only with a method: regex(p).replace(...), .search(...), .split(...), .matches(...)".into())),
        _ => {
            let mut values = args.positional.iter().map(|node| evaluator.evaluate(node, scope)).collect::<Result<Vec<_>, _>>()?;
            if !args.pairs.is_empty() {
                return Err(no_match(name));
            }
            if values.is_empty() {
                return Err(no_match(name));
            }
            let receiver = values.remove(0);
            apply(evaluator, name, receiver, values)
        }
    }
}

/// The methods of one kind of receiver: `None` when the method is not one of them.
type MethodFamily = fn(&mut Evaluator, MethodCall) -> Option<Result<Item, YaqlError>>;

pub(super) fn call_method(
    evaluator: &mut Evaluator,
    scope: &Scope,
    receiver: Item,
    name: &str,
    args: &[Argument],
) -> Result<Item, YaqlError> {
    if !is_method(name) {
        return Err(YaqlError::Evaluation(format!("Unknown method \"{name}\"")));
    }
    let args = Args::new(args);
    let call = MethodCall { scope, receiver: &receiver, name, args: &args };
    let families: [MethodFamily; 3] = [queries::lambda_method, text::method, map_method];
    for family in families {
        if let Some(result) = family(evaluator, call) {
            return result;
        }
    }
    if !args.pairs.is_empty() {
        return Err(no_match(name));
    }
    let values = args.positional.iter().map(|node| evaluator.evaluate(node, scope)).collect::<Result<Vec<_>, _>>()?;
    apply(evaluator, name, receiver, values)
}

/// The functions and methods that take evaluated values only (the first is the receiver).
fn apply(evaluator: &mut Evaluator, name: &str, receiver: Item, args: Vec<Item>) -> Result<Item, YaqlError> {
    let value = match (name, args.len()) {
        ("len", 0) => len(&receiver.value)?,
        ("int", 0) => int(&receiver.value)?,
        ("str", 0) => Value::String(text::to_str(&receiver.value)?),
        ("isList", 0) => Value::Bool(receiver.is_sequence()),
        ("isDict", 0) => Value::Bool(receiver.value.is_object()),
        ("isString", 0) => Value::Bool(receiver.value.is_string()),
        ("isEmpty", 0) => return text::is_empty(&receiver.value).map(Item::plain),
        ("concat", _) => return concat(evaluator, receiver, args),
        _ => return queries::apply(evaluator, name, receiver, args),
    };
    Ok(Item::plain(value))
}

fn coalesce(evaluator: &mut Evaluator, scope: &Scope, args: &Args) -> Result<Item, YaqlError> {
    args.at_most("coalesce", usize::MAX, &[])?;
    for node in &args.positional {
        let item = evaluator.evaluate(node, scope)?;
        if !item.value.is_null() {
            return Ok(item);
        }
    }
    Ok(Item::plain(Value::Null))
}

/// `let(a, b, name => value)`: `$1`, `$2`, `$name` for the expression after `->`.
pub(super) fn let_variables(
    evaluator: &mut Evaluator,
    scope: &Scope,
    args: &[Argument],
) -> Result<Vec<(String, Value)>, YaqlError> {
    let args = Args::new(args);
    if args.pairs.len() > args.named.len() {
        return Err(no_match("let"));
    }
    let mut variables = Vec::new();
    for (index, node) in args.positional.iter().enumerate() {
        variables.push(((index + 1).to_string(), evaluator.value(node, scope)?));
    }
    for (name, node) in &args.named {
        variables.push(((*name).to_owned(), evaluator.value(node, scope)?));
    }
    Ok(variables)
}

/// `switch(condition => value, ...)`: the value of the first true condition, else null.
fn switch(evaluator: &mut Evaluator, scope: &Scope, args: &Args) -> Result<Item, YaqlError> {
    if !args.positional.is_empty() {
        return Err(no_match("switch"));
    }
    for (condition, value) in &args.pairs {
        if super::truthy(&evaluator.value(condition, scope)?) {
            return evaluator.evaluate(value, scope);
        }
    }
    Ok(Item::plain(Value::Null))
}

/// `dict(key => value, ...)` or `dict(collection of [key, value] pairs)`.
fn dict(evaluator: &mut Evaluator, scope: &Scope, args: &Args) -> Result<Item, YaqlError> {
    let mut map = Map::new();
    match (args.positional.as_slice(), args.pairs.is_empty()) {
        ([], _) => {
            for (key, value) in &args.pairs {
                let key = map_key(evaluator.value(key, scope)?)?;
                map.insert(key, evaluator.value(value, scope)?);
            }
        }
        ([items], true) => {
            let items = queries::collection("dict", evaluator.evaluate(items, scope)?)?;
            for pair in items {
                let Value::Array(mut pair) = pair else { return Err(no_match("dict")) };
                if pair.len() != 2 {
                    return Err(YaqlError::Evaluation("dict: each item must be a [key, value] pair".into()));
                }
                let value = pair.pop().unwrap_or(Value::Null);
                map.insert(map_key(pair.pop().unwrap_or(Value::Null))?, value);
            }
        }
        _ => return Err(no_match("dict")),
    }
    Ok(Item::plain(Value::Object(map)))
}

/// `list(a, b, ...)`: the arguments as a list, iterators expanded into it.
fn list(evaluator: &mut Evaluator, scope: &Scope, args: &Args) -> Result<Item, YaqlError> {
    if !args.pairs.is_empty() {
        return Err(no_match("list"));
    }
    let mut items = Vec::new();
    for node in &args.positional {
        let item = evaluator.evaluate(node, scope)?;
        match item.value {
            Value::Array(inner) if item.kind == Kind::Iterator => items.extend(inner),
            other => items.push(other),
        }
        if items.len() > LIMIT_ITERATORS {
            return Err(YaqlError::CollectionTooLarge);
        }
    }
    Ok(Item::plain(Value::Array(items)))
}

/// `range(stop)` or `range(start, stop, step)`; more than `LIMIT_ITERATORS` numbers is refused.
fn range(evaluator: &mut Evaluator, scope: &Scope, args: &Args) -> Result<Item, YaqlError> {
    args.at_most("range", 3, &[])?;
    let mut bounds = Vec::new();
    for node in &args.positional {
        match number(&evaluator.value(node, scope)?) {
            Some(Number::Integer(bound)) => bounds.push(bound),
            _ => return Err(no_match("range")),
        }
    }
    let (start, stop, step) = match bounds.as_slice() {
        [stop] => (0, *stop, 1),
        [start, stop] => (*start, *stop, 1),
        [start, stop, step] if *step != 0 => (*start, *stop, *step),
        [_, _, _] => return Err(YaqlError::Evaluation("ValueError: range() arg 3 must not be zero".into())),
        _ => return Err(no_match("range")),
    };
    let span = if step > 0 { stop.saturating_sub(start) } else { start.saturating_sub(stop) };
    let count = if span <= 0 { 0 } else { (span.unsigned_abs() - 1) / step.unsigned_abs() + 1 };
    if count > LIMIT_ITERATORS as u64 {
        return Err(YaqlError::CollectionTooLarge);
    }
    let values = (0..count as i64).map(|index| Value::from(start + index * step)).collect();
    evaluator.step(count as usize)?;
    Item::iterator(values)
}

fn len(value: &Value) -> Result<Value, YaqlError> {
    let length = match value {
        Value::String(text) => text.chars().count(),
        Value::Array(items) => items.len(),
        Value::Object(map) => map.len(),
        _ => return Err(no_match("len")),
    };
    Ok(Value::from(length))
}

/// Python's `int()`: numbers truncate, strings parse (surrounding spaces allowed), null is 0.
fn int(value: &Value) -> Result<Value, YaqlError> {
    let parsed = match value {
        Value::Null => Some(0),
        Value::Bool(flag) => Some(i64::from(*flag)),
        Value::String(text) => {
            let trimmed = text.trim();
            let digits = trimmed.strip_prefix('+').unwrap_or(trimmed);
            if digits.starts_with(['+']) { None } else { digits.parse::<i64>().ok() }
        }
        Value::Number(_) => match number(value) {
            Some(Number::Integer(integer)) => Some(integer),
            Some(Number::Float(float)) if float.is_finite() && float.abs() < 9.2e18 => Some(float.trunc() as i64),
            _ => None,
        },
        _ => return Err(no_match("int")),
    };
    parsed.map(Value::from).ok_or_else(|| {
        YaqlError::Evaluation(format!(
            "ValueError: invalid literal for int() with base 10: {}",
            text::python_repr(value)
        ))
    })
}

/// `concat(strings...)` joins strings; `concat(collections...)` chains lists.
fn concat(evaluator: &mut Evaluator, receiver: Item, args: Vec<Item>) -> Result<Item, YaqlError> {
    let all: Vec<Item> = std::iter::once(receiver).chain(args).collect();
    if all.iter().all(|item| item.value.is_string()) {
        let joined: String = all.iter().filter_map(|item| item.value.as_str()).collect();
        return Ok(Item::plain(Value::String(joined)));
    }
    let mut items = Vec::new();
    for item in all {
        items.extend(queries::collection("concat", item)?);
        evaluator.step(1)?;
    }
    Item::iterator(items)
}

/// The map methods: `get`, `keys`, `values`, `items`, `containsKey`, `mergeWith`, `deleteAll`.
fn map_method(evaluator: &mut Evaluator, call: MethodCall) -> Option<Result<Item, YaqlError>> {
    let MethodCall { scope, receiver, name, args } = call;
    if !matches!(name, "get" | "keys" | "values" | "items" | "containsKey" | "mergeWith" | "deleteAll") {
        return None;
    }
    let Value::Object(map) = &receiver.value else {
        return Some(Err(YaqlError::Evaluation(format!(
            "No method \"{name}\" for receiver of type {} matches supplied arguments",
            type_name(&receiver.value)
        ))));
    };
    Some(map_method_on(evaluator, scope, map, name, args))
}

fn map_method_on(
    evaluator: &mut Evaluator,
    scope: &Scope,
    map: &Map<String, Value>,
    name: &str,
    args: &Args,
) -> Result<Item, YaqlError> {
    evaluator.step(map.len())?;
    match name {
        "get" => {
            args.at_most(name, 2, &["key", "default"])?;
            let key = args.value(evaluator, scope, 0, "key")?.ok_or_else(|| no_match(name))?;
            let default = args.value(evaluator, scope, 1, "default")?.unwrap_or(Value::Null);
            Ok(Item::plain(key.as_str().and_then(|key| map.get(key)).cloned().unwrap_or(default)))
        }
        "keys" => Item::view(map.keys().cloned().map(Value::String).collect()),
        "values" => Item::view(map.values().cloned().collect()),
        "items" => Item::view(
            map.iter().map(|(key, value)| Value::Array(vec![Value::String(key.clone()), value.clone()])).collect(),
        ),
        "containsKey" => {
            args.at_most(name, 1, &["key"])?;
            let key = args.value(evaluator, scope, 0, "key")?.ok_or_else(|| no_match(name))?;
            Ok(Item::plain(Value::Bool(key.as_str().is_some_and(|key| map.contains_key(key)))))
        }
        "mergeWith" => {
            args.at_most(name, 1, &["another"])?;
            let Some(Value::Object(other)) = args.value(evaluator, scope, 0, "another")? else {
                return Err(no_match(name));
            };
            merge(evaluator, map, &other).map(|merged| Item::plain(Value::Object(merged)))
        }
        _ => {
            args.at_most(name, 1, &["keys"])?;
            let keys = args.item(evaluator, scope, 0, "keys")?.ok_or_else(|| no_match(name))?;
            let keys = queries::collection(name, keys)?;
            let kept = map.iter().filter(|(key, _)| !keys.iter().any(|gone| gone.as_str() == Some(key.as_str())));
            Ok(Item::plain(Value::Object(kept.map(|(key, value)| (key.clone(), value.clone())).collect())))
        }
    }
}

/// yaql's `mergeWith` with its defaults: maps merge deeply, lists become `distinct(a + b)`,
/// other values are replaced; a map or list meeting another kind is a TypeError.
fn merge(
    evaluator: &mut Evaluator,
    left: &Map<String, Value>,
    right: &Map<String, Value>,
) -> Result<Map<String, Value>, YaqlError> {
    evaluator.step(left.len() + right.len())?;
    let mut result = Map::new();
    for (key, value) in left {
        let merged = match (value, right.get(key)) {
            (_, None) => value.clone(),
            (Value::Object(a), Some(Value::Object(b))) => Value::Object(merge(evaluator, a, b)?),
            (Value::Array(a), Some(Value::Array(b))) => {
                Value::Array(queries::distinct_values(evaluator, a.iter().chain(b).cloned().collect())?)
            }
            (_, Some(other @ (Value::Object(_) | Value::Array(_)))) => {
                return Err(YaqlError::Evaluation(format!(
                    "TypeError: Cannot merge {} with {}",
                    type_name(value),
                    type_name(other)
                )));
            }
            (_, Some(other)) => other.clone(),
        };
        result.insert(key.clone(), merged);
    }
    for (key, value) in right {
        if !result.contains_key(key) {
            result.insert(key.clone(), value.clone());
        }
    }
    if result.len() > LIMIT_ITERATORS * LIMIT_ITERATORS {
        return Err(YaqlError::CollectionTooLarge);
    }
    Ok(result)
}
