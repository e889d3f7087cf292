//! yaql's binary operators on evaluated operands, with the overloads yaql's standard library
//! registers: numbers (booleans are not numbers here), strings, lists and maps, `null` in
//! comparisons, Python's floor division and modulo, and `=~` / `!~` regular expressions.

use serde_json::Value;

use super::super::YaqlError;
use super::{Evaluator, Item, Number, equal, float, number, regex};
use crate::template::expr::values::py_eq;

pub(super) fn binary(evaluator: &mut Evaluator, operator: &str, left: Item, right: Item) -> Result<Item, YaqlError> {
    let value = match operator {
        "=" => Value::Bool(equal(&left, &right)),
        "!=" => Value::Bool(!equal(&left, &right)),
        "<" | ">" | "<=" | ">=" => compare(operator, &left.value, &right.value)?,
        "in" => contains(&right, &left.value).map(Value::Bool).ok_or_else(|| no_match(operator))?,
        "+" => return plus(evaluator, left, right),
        "-" | "*" | "/" | "mod" => return arithmetic(operator, left, right),
        "=~" | "!~" => {
            let (Value::String(text), Value::String(pattern)) = (&left.value, &right.value) else {
                return Err(no_match(operator));
            };
            let found = regex(pattern)?.is_match(text);
            Value::Bool(found == (operator == "=~"))
        }
        _ => return Err(no_match(operator)),
    };
    Ok(Item::plain(value))
}

pub(super) fn no_match(operator: &str) -> YaqlError {
    YaqlError::Evaluation(format!("No function \"#operator_{operator}\" matches supplied arguments"))
}

/// `value in collection`: a substring of a string or an item of a list (not a map's key).
pub(super) fn contains(collection: &Item, value: &Value) -> Option<bool> {
    match (&collection.value, value) {
        (Value::String(text), Value::String(needle)) => Some(text.contains(needle.as_str())),
        (Value::Array(items), _) => Some(items.iter().any(|item| py_eq(item, value))),
        _ => None,
    }
}

fn compare(operator: &str, left: &Value, right: &Value) -> Result<Value, YaqlError> {
    use std::cmp::Ordering;
    let ordering = match (left, right) {
        (Value::Null, Value::Null) => Ordering::Equal,
        (Value::Null, _) => Ordering::Less,
        (_, Value::Null) => Ordering::Greater,
        (Value::String(a), Value::String(b)) => a.chars().cmp(b.chars()),
        _ => match (number(left), number(right)) {
            (Some(a), Some(b)) => as_float(a).partial_cmp(&as_float(b)).unwrap_or(Ordering::Equal),
            _ => return Err(no_match(operator)),
        },
    };
    let result = match operator {
        "<" => ordering.is_lt(),
        ">" => ordering.is_gt(),
        "<=" => ordering.is_le(),
        _ => ordering.is_ge(),
    };
    // yaql: null < null and null > null are false, null <= null and null >= null true.
    Ok(Value::Bool(result))
}

fn as_float(number: Number) -> f64 {
    match number {
        Number::Integer(value) => value as f64,
        Number::Float(value) => value,
    }
}

fn plus(evaluator: &mut Evaluator, left: Item, right: Item) -> Result<Item, YaqlError> {
    match (left.value, right.value) {
        (Value::String(mut a), Value::String(b)) => {
            a.push_str(&b);
            Ok(Item::plain(Value::String(a)))
        }
        (Value::Array(mut a), Value::Array(b)) => {
            evaluator.step(a.len() + b.len())?;
            a.extend(b);
            Item::iterator(a)
        }
        (Value::Object(mut a), Value::Object(b)) => {
            a.extend(b);
            Ok(Item::plain(Value::Object(a)))
        }
        (a, b) => arithmetic("+", Item::plain(a), Item::plain(b)),
    }
}

fn arithmetic(operator: &str, left: Item, right: Item) -> Result<Item, YaqlError> {
    if operator == "*"
        && let Some(repeated) = repeat(&left, &right).or_else(|| repeat(&right, &left))
    {
        return repeated.map(Item::plain);
    }
    let (Some(a), Some(b)) = (number(&left.value), number(&right.value)) else { return Err(no_match(operator)) };
    let value = match (a, b) {
        (Number::Integer(a), Number::Integer(b)) => integer_arithmetic(operator, a, b)?,
        _ => float_arithmetic(operator, as_float(a), as_float(b))?,
    };
    Ok(Item::plain(value))
}

/// `list * n` and `string * n` (Python's repetition; a negative count gives an empty value).
fn repeat(sequence: &Item, count: &Item) -> Option<Result<Value, YaqlError>> {
    let Some(Number::Integer(times)) = number(&count.value) else { return None };
    let times = usize::try_from(times).unwrap_or(0);
    match &sequence.value {
        Value::Array(items) if sequence.is_sequence() => {
            if items.len().saturating_mul(times) > super::super::LIMIT_ITERATORS {
                return Some(Err(YaqlError::CollectionTooLarge));
            }
            Some(Ok(Value::Array(items.iter().cloned().cycle().take(items.len() * times).collect())))
        }
        Value::String(text) => {
            if text.len().saturating_mul(times) > super::super::MEMORY_QUOTA {
                return Some(Err(YaqlError::MemoryQuotaExceeded));
            }
            Some(Ok(Value::String(text.repeat(times))))
        }
        _ => None,
    }
}

fn integer_arithmetic(operator: &str, a: i64, b: i64) -> Result<Value, YaqlError> {
    let overflow = || YaqlError::Evaluation("integer overflow".into());
    if matches!(operator, "/" | "mod") && b == 0 {
        return Err(YaqlError::Evaluation("ZeroDivisionError: integer division or modulo by zero".into()));
    }
    let result = match operator {
        "+" => a.checked_add(b),
        "-" => a.checked_sub(b),
        "*" => a.checked_mul(b),
        // Python's // and %: rounded towards negative infinity.
        "/" => a.checked_div(b).map(|quotient| if a % b != 0 && (a < 0) != (b < 0) { quotient - 1 } else { quotient }),
        _ => a.checked_rem(b).map(|rest| if rest != 0 && (rest < 0) != (b < 0) { rest + b } else { rest }),
    };
    result.map(Value::from).ok_or_else(overflow)
}

fn float_arithmetic(operator: &str, a: f64, b: f64) -> Result<Value, YaqlError> {
    if matches!(operator, "/" | "mod") && b == 0.0 {
        return Err(YaqlError::Evaluation("ZeroDivisionError: float division by zero".into()));
    }
    let result = match operator {
        "+" => a + b,
        "-" => a - b,
        "*" => a * b,
        "/" => a / b,
        _ => {
            let rest = a % b;
            if rest != 0.0 && (rest < 0.0) != (b < 0.0) { rest + b } else { rest }
        }
    };
    if result.is_finite() { Ok(float(result)) } else { Err(YaqlError::Evaluation("float overflow".into())) }
}

/// `left operator right` for `<`, `>`, `<=`, `>=` as a boolean (`max` and `min` use it).
pub(super) fn binary_compare(operator: &str, left: &Value, right: &Value) -> Result<bool, YaqlError> {
    Ok(compare(operator, left, right)? == Value::Bool(true))
}

/// `left + right` on numbers only (`sum`).
pub(super) fn add_numbers(left: Item, right: Item) -> Result<Item, YaqlError> {
    arithmetic("+", left, right)
}
