//! yaql's string functions (yaql.standard_library.strings and regex) with Python's `str`
//! semantics: `str()` as yaql renders values (`null`, `true`), `join`, `split` / `rightSplit`
//! (Python's `split` / `rsplit`, whitespace runs when no separator is given), `replace`,
//! `toUpper`, `toLower`, `startsWith`, `endsWith`, `trim`, `isEmpty`, `matches`, and the
//! methods of `regex(pattern)`: `replace` (Python's `re.sub` group references), `search`,
//! `split` (captured groups included, as `re.split`) and `matches`. Regular expressions are
//! the `regex` crate's dialect (no look-around or back-references), with a size limit.

use serde_json::Value;

use super::super::parser::Argument;
use super::super::{MEMORY_QUOTA, YaqlError};
use super::{Args, Evaluator, Item, MethodCall, Number, Scope, no_match, number, queries, regex};

/// yaql's `str()`: `null`, `true`, `false`, numbers as Python prints them; collections are
/// refused (Heat would print Python's representation of them).
pub(super) fn to_str(value: &Value) -> Result<String, YaqlError> {
    match value {
        Value::Null => Ok("null".into()),
        Value::Bool(flag) => Ok(flag.to_string()),
        Value::String(text) => Ok(text.clone()),
        Value::Number(_) => Ok(match number(value) {
            Some(Number::Integer(integer)) => integer.to_string(),
            Some(Number::Float(float)) => python_float(float),
            None => value.to_string(),
        }),
        Value::Array(_) | Value::Object(_) => Err(YaqlError::Evaluation(
            "str() of a list or map is not in the supported yaql subset (Heat gives Python's representation)".into(),
        )),
    }
}

/// Python's `repr` of a float.
pub(super) fn python_float(value: f64) -> String {
    if value.is_nan() {
        return "nan".into();
    }
    if value.is_infinite() {
        return if value > 0.0 { "inf".into() } else { "-inf".into() };
    }
    let magnitude = value.abs();
    if magnitude != 0.0 && !(1e-4..1e16).contains(&magnitude) {
        let text = format!("{value:e}");
        let (mantissa, exponent) = text.split_once('e').unwrap_or((&text, "0"));
        let exponent: i32 = exponent.parse().unwrap_or(0);
        let sign = if exponent < 0 { '-' } else { '+' };
        return format!("{mantissa}e{sign}{:02}", exponent.abs());
    }
    if value.fract() == 0.0 { format!("{value:.1}") } else { format!("{value}") }
}

/// A value as Python's `repr` shows it in an error message.
pub(super) fn python_repr(value: &Value) -> String {
    match value {
        Value::String(text) => format!("'{text}'"),
        other => to_str(other).unwrap_or_else(|_| other.to_string()),
    }
}

pub(super) fn is_empty(value: &Value) -> Result<Value, YaqlError> {
    match value {
        Value::Null => Ok(Value::Bool(true)),
        Value::String(text) => Ok(Value::Bool(text.trim().is_empty())),
        _ => Err(no_match("isEmpty")),
    }
}

const METHODS: &[&str] = &[
    "join",
    "split",
    "rightSplit",
    "replace",
    "toUpper",
    "toLower",
    "startsWith",
    "endsWith",
    "trim",
    "matches",
    "search",
];

pub(super) fn method(evaluator: &mut Evaluator, call: MethodCall) -> Option<Result<Item, YaqlError>> {
    let MethodCall { scope, receiver, name, args } = call;
    if !METHODS.contains(&name) {
        return None;
    }
    if name == "join" {
        return Some(join(evaluator, scope, receiver, args));
    }
    let Value::String(text) = &receiver.value else { return Some(Err(no_match(name))) };
    Some(string_method(evaluator, scope, text, name, args).map(Item::plain))
}

fn string_argument(
    evaluator: &mut Evaluator,
    scope: &Scope,
    args: &Args,
    index: usize,
    key: &str,
) -> Result<Option<String>, YaqlError> {
    match args.value(evaluator, scope, index, key)? {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(text)) => Ok(Some(text)),
        Some(_) => Err(no_match(key)),
    }
}

fn integer_argument(
    evaluator: &mut Evaluator,
    scope: &Scope,
    args: &Args,
    index: usize,
    key: &str,
    default: i64,
) -> Result<i64, YaqlError> {
    match args.value(evaluator, scope, index, key)? {
        None => Ok(default),
        Some(value) => match number(&value) {
            Some(Number::Integer(integer)) => Ok(integer),
            _ => Err(no_match(key)),
        },
    }
}

fn string_method(
    evaluator: &mut Evaluator,
    scope: &Scope,
    text: &str,
    name: &str,
    args: &Args,
) -> Result<Value, YaqlError> {
    let strings = |values: Vec<String>| Value::Array(values.into_iter().map(Value::String).collect());
    match name {
        "split" | "rightSplit" => {
            args.at_most(name, 2, &["separator", "maxSplits"])?;
            let separator = string_argument(evaluator, scope, args, 0, "separator")?;
            let most = integer_argument(evaluator, scope, args, 1, "maxSplits", -1)?;
            let parts = python_split(text, separator.as_deref(), most, name == "rightSplit")?;
            if parts.len() > super::super::LIMIT_ITERATORS {
                return Err(YaqlError::CollectionTooLarge);
            }
            Ok(strings(parts))
        }
        "replace" => replace(evaluator, scope, text, args),
        "toUpper" | "toLower" | "trim" => {
            args.at_most(name, 0, &[])?;
            Ok(Value::String(match name {
                "toUpper" => text.to_uppercase(),
                "toLower" => text.to_lowercase(),
                _ => text.trim().to_owned(),
            }))
        }
        "startsWith" | "endsWith" => {
            if args.positional.is_empty() || !args.pairs.is_empty() {
                return Err(no_match(name));
            }
            let mut found = false;
            for index in 0..args.positional.len() {
                let affix = string_argument(evaluator, scope, args, index, "")?.ok_or_else(|| no_match(name))?;
                found |= if name == "startsWith" { text.starts_with(&affix) } else { text.ends_with(&affix) };
            }
            Ok(Value::Bool(found))
        }
        "matches" => {
            args.at_most(name, 1, &["regexp"])?;
            let pattern = string_argument(evaluator, scope, args, 0, "regexp")?.ok_or_else(|| no_match(name))?;
            Ok(Value::Bool(regex(&pattern)?.is_match(text)))
        }
        _ => Err(no_match(name)),
    }
}

/// `text.replace(old, new, count)`: Python's `str.replace` (a negative count: every one).
fn replace(evaluator: &mut Evaluator, scope: &Scope, text: &str, args: &Args) -> Result<Value, YaqlError> {
    args.at_most("replace", 3, &["old", "new", "count"])?;
    let (Some(old), Some(new)) =
        (string_argument(evaluator, scope, args, 0, "old")?, string_argument(evaluator, scope, args, 1, "new")?)
    else {
        return Err(no_match("replace"));
    };
    let count = integer_argument(evaluator, scope, args, 2, "count", -1)?;
    let occurrences = if old.is_empty() { text.chars().count() + 1 } else { text.matches(old.as_str()).count() };
    if text.len().saturating_add(occurrences.saturating_mul(new.len())) > MEMORY_QUOTA {
        return Err(YaqlError::MemoryQuotaExceeded);
    }
    let replaced = if count < 0 { text.replace(&old, &new) } else { text.replacen(&old, &new, count as usize) };
    Ok(Value::String(replaced))
}

/// `collection.join(separator)` or `separator.join(collection)`: items as `str()` renders them.
fn join(evaluator: &mut Evaluator, scope: &Scope, receiver: &Item, args: &Args) -> Result<Item, YaqlError> {
    args.at_most("join", 1, &["separator", "sequence"])?;
    let other = args.item(evaluator, scope, 0, "separator")?.ok_or_else(|| no_match("join"))?;
    let (items, separator) = match (&receiver.value, &other.value) {
        (Value::Array(_), Value::String(separator)) => (receiver.clone(), separator.clone()),
        (Value::String(separator), Value::Array(_)) => (other.clone(), separator.clone()),
        _ => return Err(no_match("join")),
    };
    let items = queries::collection("join", items)?;
    evaluator.step(items.len())?;
    let parts = items.iter().map(to_str).collect::<Result<Vec<_>, _>>()?;
    let size = parts.iter().map(String::len).sum::<usize>() + separator.len() * parts.len();
    if size > MEMORY_QUOTA {
        return Err(YaqlError::MemoryQuotaExceeded);
    }
    Ok(Item::plain(Value::String(parts.join(&separator))))
}

/// Python's `str.split` / `str.rsplit`.
fn python_split(text: &str, separator: Option<&str>, most: i64, from_right: bool) -> Result<Vec<String>, YaqlError> {
    let limit = usize::try_from(most).ok();
    let Some(separator) = separator else { return Ok(whitespace_split(text, limit, from_right)) };
    if separator.is_empty() {
        return Err(YaqlError::Evaluation("ValueError: empty separator".into()));
    }
    let parts: Vec<String> = match (limit, from_right) {
        (None, _) => text.split(separator).map(str::to_owned).collect(),
        (Some(limit), false) => text.splitn(limit + 1, separator).map(str::to_owned).collect(),
        (Some(limit), true) => {
            let mut parts: Vec<String> = text.rsplitn(limit + 1, separator).map(str::to_owned).collect();
            parts.reverse();
            parts
        }
    };
    Ok(parts)
}

fn whitespace_split(text: &str, limit: Option<usize>, from_right: bool) -> Vec<String> {
    let Some(limit) = limit else { return text.split_whitespace().map(str::to_owned).collect() };
    let mut parts = Vec::new();
    let mut rest = if from_right { text.trim_end() } else { text.trim_start() };
    while parts.len() < limit && !rest.is_empty() {
        if from_right {
            let Some((index, space)) = rest.char_indices().rev().find(|(_, c)| c.is_whitespace()) else { break };
            parts.push(rest[index + space.len_utf8()..].to_owned());
            rest = rest[..index].trim_end();
        } else {
            let Some((index, _)) = rest.char_indices().find(|(_, c)| c.is_whitespace()) else { break };
            parts.push(rest[..index].to_owned());
            rest = rest[index..].trim_start();
        }
    }
    if !rest.is_empty() {
        parts.push(rest.to_owned());
    }
    if from_right {
        parts.reverse();
    }
    parts
}

/// The methods of `regex(pattern, ...)`: `replace`, `search`, `split`, `matches`.
pub(super) fn regex_method(
    evaluator: &mut Evaluator,
    scope: &Scope,
    regex_args: &[Argument],
    name: &str,
    args: &Args,
) -> Result<Item, YaqlError> {
    let [Argument::Positional(pattern)] = regex_args else {
        return Err(YaqlError::Evaluation("regex(): only a pattern argument is in the supported yaql subset".into()));
    };
    let Value::String(pattern) = evaluator.value(pattern, scope)? else { return Err(no_match("regex")) };
    let compiled = regex(&pattern)?;
    let subject = string_argument(evaluator, scope, args, 0, "string")?.ok_or_else(|| no_match(name))?;
    let value = match name {
        "matches" => {
            args.at_most(name, 1, &["string"])?;
            Value::Bool(compiled.is_match(&subject))
        }
        "search" => {
            args.at_most(name, 1, &["string"])?;
            compiled.find(&subject).map_or(Value::Null, |found| Value::String(found.as_str().to_owned()))
        }
        "split" => {
            args.at_most(name, 2, &["string", "maxSplit"])?;
            let most = integer_argument(evaluator, scope, args, 1, "maxSplit", 0)?;
            regex_split(&compiled, &subject, most)?
        }
        "replace" => {
            args.at_most(name, 3, &["string", "repl", "count"])?;
            let replacement = string_argument(evaluator, scope, args, 1, "repl")?.ok_or_else(|| no_match(name))?;
            let count = integer_argument(evaluator, scope, args, 2, "count", 0)?;
            Value::String(substitute(&compiled, &subject, &replacement, count)?)
        }
        _ => {
            return Err(YaqlError::Evaluation(format!(
                "No method \"{name}\" for a regex in the supported yaql subset"
            )));
        }
    };
    Ok(Item::plain(value))
}

/// Python's `re.split`: the text between matches, each captured group after its match.
fn regex_split(compiled: &regex::Regex, subject: &str, most: i64) -> Result<Value, YaqlError> {
    let mut parts = Vec::new();
    let mut last = 0;
    for (count, captures) in compiled.captures_iter(subject).enumerate() {
        if most > 0 && count as i64 >= most {
            break;
        }
        let Some(whole) = captures.get(0) else { continue };
        parts.push(Value::String(subject[last..whole.start()].to_owned()));
        for group in captures.iter().skip(1) {
            parts.push(group.map_or(Value::Null, |group| Value::String(group.as_str().to_owned())));
        }
        last = whole.end();
        if parts.len() > super::super::LIMIT_ITERATORS {
            return Err(YaqlError::CollectionTooLarge);
        }
    }
    parts.push(Value::String(subject[last..].to_owned()));
    Ok(Value::Array(parts))
}

/// A piece of a `re.sub` replacement: literal text or a group's text.
enum Piece {
    Text(String),
    Group(usize),
}

/// Python's `re.sub(pattern, replacement, subject, count)` (count 0: every match), with its
/// replacement syntax: `\\1`, `\\g<1>`, `\\g<name>` and the character escapes.
fn substitute(compiled: &regex::Regex, subject: &str, replacement: &str, count: i64) -> Result<String, YaqlError> {
    let pieces = replacement_pieces(compiled, replacement)?;
    let mut output = String::new();
    let mut last = 0;
    for (done, captures) in compiled.captures_iter(subject).enumerate() {
        if count > 0 && done as i64 >= count {
            break;
        }
        let Some(whole) = captures.get(0) else { continue };
        output.push_str(&subject[last..whole.start()]);
        for piece in &pieces {
            match piece {
                Piece::Text(text) => output.push_str(text),
                Piece::Group(index) => output.push_str(captures.get(*index).map_or("", |group| group.as_str())),
            }
        }
        last = whole.end();
        if output.len() > MEMORY_QUOTA {
            return Err(YaqlError::MemoryQuotaExceeded);
        }
    }
    output.push_str(&subject[last..]);
    Ok(output)
}

fn replacement_pieces(compiled: &regex::Regex, replacement: &str) -> Result<Vec<Piece>, YaqlError> {
    let bad = |what: String| YaqlError::Evaluation(format!("re.error: {what} in replacement {replacement:?}"));
    let group = |index: usize| group_number(compiled, index).map_err(bad);
    let chars: Vec<char> = replacement.chars().collect();
    let mut pieces = Vec::new();
    let mut literal = String::new();
    let mut index = 0;
    while index < chars.len() {
        let c = chars[index];
        if c != '\\' || index + 1 == chars.len() {
            literal.push(c);
            index += 1;
            continue;
        }
        let next = chars[index + 1];
        index += 2;
        let piece = match next {
            '0'..='9' => {
                let mut digits = next.to_string();
                if index < chars.len() && chars[index].is_ascii_digit() {
                    digits.push(chars[index]);
                    index += 1;
                }
                group(digits.parse().unwrap_or(0))?
            }
            'g' => {
                let close = chars[index..].iter().position(|c| *c == '>');
                let (Some('<'), Some(close)) = (chars.get(index), close) else {
                    return Err(bad("missing group name".into()));
                };
                let name: String = chars[index + 1..index + close].iter().collect();
                index += close + 1;
                named_group(compiled, &name).map_err(bad)?
            }
            'n' => Piece::Text("\n".into()),
            't' => Piece::Text("\t".into()),
            'r' => Piece::Text("\r".into()),
            'f' => Piece::Text("\u{c}".into()),
            'v' => Piece::Text("\u{b}".into()),
            'a' => Piece::Text("\u{7}".into()),
            '\\' => Piece::Text("\\".into()),
            other if other.is_ascii_alphabetic() => return Err(bad(format!("bad escape \\{other}"))),
            other => Piece::Text(format!("\\{other}")),
        };
        match piece {
            Piece::Text(text) => literal.push_str(&text),
            group => {
                pieces.push(Piece::Text(std::mem::take(&mut literal)));
                pieces.push(group);
            }
        }
    }
    pieces.push(Piece::Text(literal));
    Ok(pieces)
}

/// `\\g<name>` or `\\g<number>`: the group it names, or the `re.error` text.
fn named_group(compiled: &regex::Regex, name: &str) -> Result<Piece, String> {
    match name.parse::<usize>() {
        Ok(number) => group_number(compiled, number),
        Err(_) => match compiled.capture_names().position(|known| known == Some(name)) {
            Some(number) => Ok(Piece::Group(number)),
            None => Err(format!("unknown group name '{name}'")),
        },
    }
}

/// A group of the pattern by number, or the `re.error` text.
fn group_number(compiled: &regex::Regex, index: usize) -> Result<Piece, String> {
    if index < compiled.captures_len() {
        Ok(Piece::Group(index))
    } else {
        Err(format!("invalid group reference {index}"))
    }
}
