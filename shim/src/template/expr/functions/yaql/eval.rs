//! Evaluating a parsed yaql expression over JSON values: variables and their scopes (`$`,
//! `$name`, lambda arguments `$1`, `$2`), the operators with Python's semantics as yaql
//! registers them (integer `/` floors, `and`/`or` return an operand, `=` is Python's `==`),
//! attribute access and indexing, and the limits (`LIMIT_ITERATORS`, `MEMORY_QUOTA`,
//! `MAX_STEPS`). Functions and methods are `library.rs`.

// The library is below the evaluator: it calls back into it for lambdas and arguments, and
// the evaluator dispatches calls and operators to it.
pub(super) mod library;
mod operators;
mod queries;
mod text;

use serde_json::{Map, Value};

use super::parser::Argument;
use super::parser::Node;
use super::{LIMIT_ITERATORS, MAX_STEPS, MAX_VALUE_NODES, MEMORY_QUOTA, YaqlError};
use crate::template::expr::values::py_eq;

/// An intermediate value and, for a collection, what Python object yaql would hold.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Item {
    pub value: Value,
    pub kind: Kind,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Kind {
    /// A value as JSON has it (a list is a tuple to yaql: a sequence).
    Plain,
    /// A query result (an iterator): `list()` expands it; it is not a sequence.
    Iterator,
    /// A map's `keys()`, `values()` or `items()` (a view): not a sequence, not expanded.
    View,
}

impl Item {
    pub fn plain(value: Value) -> Item {
        Item { value, kind: Kind::Plain }
    }

    /// A list yaql treats as a sequence (indexable, equal to an equal list).
    pub fn is_sequence(&self) -> bool {
        self.value.is_array() && self.kind == Kind::Plain
    }

    pub fn view(items: Vec<Value>) -> Result<Item, YaqlError> {
        Ok(Item { kind: Kind::View, ..Item::iterator(items)? })
    }

    pub fn iterator(items: Vec<Value>) -> Result<Item, YaqlError> {
        if items.len() > LIMIT_ITERATORS {
            return Err(YaqlError::CollectionTooLarge);
        }
        Ok(Item { value: Value::Array(items), kind: Kind::Iterator })
    }
}

/// Variables visible to an expression; a lambda or `let` adds a scope over its parent's.
pub(super) struct Scope<'a> {
    variables: Vec<(String, Value)>,
    parent: Option<&'a Scope<'a>>,
}

impl<'a> Scope<'a> {
    pub fn child(&'a self, variables: Vec<(String, Value)>) -> Scope<'a> {
        Scope { variables, parent: Some(self) }
    }

    /// A scope for a lambda called with `args`: `$` and `$1` are the first, `$2` the second...
    pub fn lambda(&'a self, args: &[Value]) -> Scope<'a> {
        let mut variables: Vec<(String, Value)> =
            args.iter().enumerate().map(|(index, value)| ((index + 1).to_string(), value.clone())).collect();
        if let Some(first) = args.first() {
            variables.push((String::new(), first.clone()));
        }
        self.child(variables)
    }

    fn get(&self, name: &str) -> Option<&Value> {
        match self.variables.iter().rev().find(|(key, _)| key == name) {
            Some((_, value)) => Some(value),
            None => self.parent.and_then(|parent| parent.get(name)),
        }
    }
}

pub(super) struct Evaluator {
    steps: usize,
}

pub(super) fn run(node: &Node, data: Value) -> Result<Value, YaqlError> {
    let mut root = Map::new();
    root.insert("data".into(), data);
    let scope = Scope { variables: vec![(String::new(), Value::Object(root))], parent: None };
    let mut evaluator = Evaluator { steps: 0 };
    let value = evaluator.evaluate(node, &scope)?.value;
    check_output(&value)?;
    Ok(value)
}

/// The result as Heat's finalizer converts it: every collection within the iterator limit.
fn check_output(value: &Value) -> Result<(), YaqlError> {
    match value {
        Value::Array(items) if items.len() > LIMIT_ITERATORS => Err(YaqlError::CollectionTooLarge),
        Value::Object(map) if map.len() > LIMIT_ITERATORS => Err(YaqlError::CollectionTooLarge),
        Value::Array(items) => items.iter().try_for_each(check_output),
        Value::Object(map) => map.values().try_for_each(check_output),
        _ => Ok(()),
    }
}

impl Evaluator {
    /// Counts `count` steps against the budget.
    pub fn step(&mut self, count: usize) -> Result<(), YaqlError> {
        self.steps = self.steps.saturating_add(count);
        if self.steps > MAX_STEPS { Err(YaqlError::TooManySteps) } else { Ok(()) }
    }

    pub fn value(&mut self, node: &Node, scope: &Scope) -> Result<Value, YaqlError> {
        Ok(self.evaluate(node, scope)?.value)
    }

    pub fn evaluate(&mut self, node: &Node, scope: &Scope) -> Result<Item, YaqlError> {
        let item = match node {
            Node::Constant(value) => Item::plain(value.clone()),
            Node::Keyword(name) => Item::plain(Value::String(name.clone())),
            Node::Variable(name) => Item::plain(scope.get(name).cloned().unwrap_or(Value::Null)),
            Node::List(items) => {
                let values = items.iter().map(|item| self.value(item, scope)).collect::<Result<Vec<_>, _>>()?;
                Item::plain(Value::Array(values))
            }
            Node::Map(entries) => {
                let mut map = Map::new();
                for (key, value) in entries {
                    let key = map_key(self.value(key, scope)?)?;
                    map.insert(key, self.value(value, scope)?);
                }
                Item::plain(Value::Object(map))
            }
            Node::Call { name, args } => library::call_function(self, scope, name, args)?,
            Node::Method { receiver, name, args, null_safe } => {
                if let Node::Call { name: function, args: pattern } = receiver.as_ref()
                    && function == "regex"
                {
                    let item = text::regex_method(self, scope, pattern, name, &Args::new(args))?;
                    check_quota(&item.value)?;
                    return Ok(item);
                }
                let receiver = self.evaluate(receiver, scope)?;
                if *null_safe && receiver.value.is_null() {
                    return Ok(Item::plain(Value::Null));
                }
                library::call_method(self, scope, receiver, name, args)?
            }
            Node::Attribute { receiver, name, null_safe } => {
                let receiver = self.evaluate(receiver, scope)?;
                if *null_safe && receiver.value.is_null() {
                    return Ok(Item::plain(Value::Null));
                }
                attribute(receiver, name)?
            }
            Node::Index { receiver, args } => {
                let receiver = self.evaluate(receiver, scope)?;
                let args = args.iter().map(|arg| self.value(arg, scope)).collect::<Result<Vec<_>, _>>()?;
                Item::plain(index(receiver, args)?)
            }
            Node::Unary { operator, operand } => {
                let operand = self.value(operand, scope)?;
                Item::plain(unary(operator, operand)?)
            }
            Node::Binary { operator, left, right } => self.binary(operator, left, right, scope)?,
        };
        check_quota(&item.value)?;
        // Every value made or copied costs its size, so duplicating a large value repeatedly
        // (`[$b, $b]` in nested lets) or copying it per item of a loop runs out of steps.
        self.step(value_nodes(&item.value)?)?;
        Ok(item)
    }

    fn binary(&mut self, operator: &str, left: &Node, right: &Node, scope: &Scope) -> Result<Item, YaqlError> {
        match operator {
            "and" | "or" => {
                let left = self.evaluate(left, scope)?;
                if truthy(&left.value) == (operator == "or") {
                    return Ok(left);
                }
                self.evaluate(right, scope)
            }
            "->" => {
                let Node::Call { name, args } = left else {
                    return Err(unsupported_operand("->", "the left side must be let(...)"));
                };
                if name != "let" {
                    return Err(unsupported_operand("->", "the left side must be let(...)"));
                }
                let variables = library::let_variables(self, scope, args)?;
                let inner = scope.child(variables);
                self.evaluate(right, &inner)
            }
            _ => {
                let left = self.evaluate(left, scope)?;
                let right = self.evaluate(right, scope)?;
                operators::binary(self, operator, left, right)
            }
        }
    }

    /// Evaluates a lambda argument with `args` as `$`, `$1`, `$2`...
    pub fn call_lambda(&mut self, body: &Node, scope: &Scope, args: &[Value]) -> Result<Value, YaqlError> {
        let inner = scope.lambda(args);
        self.value(body, &inner)
    }
}

fn unsupported_operand(operator: &str, what: &str) -> YaqlError {
    YaqlError::Evaluation(format!("operator {operator}: {what}"))
}

/// A map key: strings only here (yaql allows any hashable value; Heat's JSON makes it a string).
pub(super) fn map_key(key: Value) -> Result<String, YaqlError> {
    match key {
        Value::String(text) => Ok(text),
        other => Err(YaqlError::Evaluation(format!(
            "map keys must be strings in the supported yaql subset, not {}",
            type_name(&other)
        ))),
    }
}

/// `receiver.name`: a map's key (missing: KeyError, as yaql), or the key of every map in a list.
fn attribute(receiver: Item, name: &str) -> Result<Item, YaqlError> {
    match receiver.value {
        Value::Object(mut map) => match map.remove(name) {
            Some(value) => Ok(Item::plain(value)),
            None => Err(YaqlError::Evaluation(format!("KeyError: '{name}'"))),
        },
        Value::Array(items) => {
            if items.len() > LIMIT_ITERATORS {
                return Err(YaqlError::CollectionTooLarge);
            }
            let values = items
                .into_iter()
                .map(|item| attribute(Item::plain(item), name).map(|item| item.value))
                .collect::<Result<Vec<_>, _>>()?;
            Item::iterator(values)
        }
        _ => Err(YaqlError::Evaluation(format!("Unknown function \"#property#{name}\""))),
    }
}

/// `receiver[index]` on a list (Python indexing) or `map[key]` / `map[key, default]`.
fn index(receiver: Item, mut args: Vec<Value>) -> Result<Value, YaqlError> {
    let no_match = || YaqlError::Evaluation("No function \"#indexer\" matches supplied arguments".into());
    match (receiver.value, args.len()) {
        (Value::Array(items), 1) if receiver.kind == Kind::Plain => {
            let Some(position) = args[0].as_i64() else { return Err(no_match()) };
            let resolved = if position < 0 {
                items.len().checked_sub(position.unsigned_abs() as usize)
            } else {
                Some(position as usize)
            };
            resolved
                .and_then(|position| items.get(position).cloned())
                .ok_or_else(|| YaqlError::Evaluation("IndexError: list index out of range".into()))
        }
        (Value::Object(mut map), 1 | 2) => {
            let default = if args.len() == 2 { args.pop() } else { None };
            let key = args.pop().unwrap_or(Value::Null);
            let found = key.as_str().and_then(|key| map.remove(key));
            match (found, default) {
                (Some(value), _) => Ok(value),
                (None, Some(default)) => Ok(default),
                (None, None) => Err(YaqlError::Evaluation(format!("KeyError: {key}"))),
            }
        }
        _ => Err(no_match()),
    }
}

fn unary(operator: &str, operand: Value) -> Result<Value, YaqlError> {
    match (operator, number(&operand)) {
        ("not", _) => Ok(Value::Bool(!truthy(&operand))),
        ("-", Some(Number::Integer(value))) => {
            value.checked_neg().map(Value::from).ok_or_else(|| YaqlError::Evaluation("integer overflow".into()))
        }
        ("-", Some(Number::Float(value))) => Ok(float(-value)),
        ("+", Some(_)) => Ok(operand),
        _ => {
            Err(YaqlError::Evaluation(format!("No function \"#unary_operator_{operator}\" matches supplied arguments")))
        }
    }
}

/// Python's truth value.
pub(super) fn truthy(value: &Value) -> bool {
    match value {
        Value::Null => false,
        Value::Bool(flag) => *flag,
        Value::Number(_) => {
            !matches!(number(value), Some(Number::Integer(0))) && number(value) != Some(Number::Float(0.0))
        }
        Value::String(text) => !text.is_empty(),
        Value::Array(items) => !items.is_empty(),
        Value::Object(map) => !map.is_empty(),
    }
}

/// yaql's `=`: Python's `==`, except that an iterator or a view equals no list.
pub(super) fn equal(left: &Item, right: &Item) -> bool {
    if (left.value.is_array() && !left.is_sequence()) || (right.value.is_array() && !right.is_sequence()) {
        return false;
    }
    py_eq(&left.value, &right.value)
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Number {
    Integer(i64),
    Float(f64),
}

/// A number (a boolean is not one to yaql's `Number` type).
pub(super) fn number(value: &Value) -> Option<Number> {
    let Value::Number(number) = value else { return None };
    if let Some(integer) = number.as_i64() {
        return Some(Number::Integer(integer));
    }
    number.as_f64().map(Number::Float)
}

pub(super) fn float(value: f64) -> Value {
    serde_json::Number::from_f64(value).map_or(Value::Null, Value::Number)
}

pub(super) fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "list",
        Value::Object(_) => "map",
    }
}

/// How many values `value` holds (itself included); more than `MAX_VALUE_NODES` is refused.
fn value_nodes(value: &Value) -> Result<usize, YaqlError> {
    let mut count = 0usize;
    let mut pending: Vec<&Value> = vec![value];
    while let Some(next) = pending.pop() {
        count += 1;
        if count > MAX_VALUE_NODES {
            return Err(YaqlError::ValueTooLarge);
        }
        match next {
            Value::Array(items) => pending.extend(items),
            Value::Object(map) => pending.extend(map.values()),
            _ => {}
        }
    }
    Ok(count)
}

/// Heat's memory quota, as `sys.getsizeof` counts the value itself (not what it contains).
pub(super) fn check_quota(value: &Value) -> Result<(), YaqlError> {
    let size = match value {
        Value::String(text) => string_size(text),
        Value::Array(items) => 56 + 8 * items.len(),
        _ => 0,
    };
    if size > MEMORY_QUOTA { Err(YaqlError::MemoryQuotaExceeded) } else { Ok(()) }
}

/// CPython's `sys.getsizeof` of a `str` (compact ASCII, Latin-1, UCS-2 or UCS-4).
fn string_size(text: &str) -> usize {
    let widest = text.chars().map(u32::from).max().unwrap_or(0);
    let length = text.chars().count();
    match widest {
        0..=0x7f => 49 + length,
        0x80..=0xff => 73 + length,
        0x100..=0xffff => 74 + 2 * length,
        _ => 76 + 4 * length,
    }
}

/// A method call as each family of methods (collections, strings, maps) sees it; each answers
/// `None` for a method that is not one of its own.
#[derive(Clone, Copy)]
pub(super) struct MethodCall<'c, 's, 'n> {
    pub scope: &'c Scope<'s>,
    pub receiver: &'c Item,
    pub name: &'c str,
    pub args: &'c Args<'n>,
}

/// A call's arguments: positional ones and `name => value` keyword ones.
pub(super) struct Args<'n> {
    pub positional: Vec<&'n Node>,
    pub named: Vec<(&'n str, &'n Node)>,
    pub pairs: Vec<(&'n Node, &'n Node)>,
}

impl<'n> Args<'n> {
    pub fn new(args: &'n [Argument]) -> Args<'n> {
        let mut split = Args { positional: Vec::new(), named: Vec::new(), pairs: Vec::new() };
        for argument in args {
            match argument {
                Argument::Positional(node) => split.positional.push(node),
                Argument::Pair(source, value) => {
                    if let Node::Keyword(name) = source {
                        split.named.push((name, value));
                    }
                    split.pairs.push((source, value));
                }
            }
        }
        split
    }

    /// The argument at `index` or named `name`, not evaluated.
    pub fn node(&self, index: usize, name: &str) -> Option<&'n Node> {
        self.positional
            .get(index)
            .copied()
            .or_else(|| self.named.iter().find(|(key, _)| *key == name).map(|(_, node)| *node))
    }

    pub fn value(
        &self,
        evaluator: &mut Evaluator,
        scope: &Scope,
        index: usize,
        name: &str,
    ) -> Result<Option<Value>, YaqlError> {
        self.node(index, name).map(|node| evaluator.value(node, scope)).transpose()
    }

    pub fn item(
        &self,
        evaluator: &mut Evaluator,
        scope: &Scope,
        index: usize,
        name: &str,
    ) -> Result<Option<Item>, YaqlError> {
        self.node(index, name).map(|node| evaluator.evaluate(node, scope)).transpose()
    }

    /// Refuses more than `most` arguments or keyword arguments not among `names`.
    pub fn at_most(&self, function: &str, most: usize, names: &[&str]) -> Result<(), YaqlError> {
        let unknown = self.named.iter().find(|(name, _)| !names.contains(name));
        if self.positional.len() + self.named.len() > most || unknown.is_some() || self.pairs.len() > self.named.len() {
            return Err(no_match(function));
        }
        Ok(())
    }
}

pub(super) fn no_match(function: &str) -> YaqlError {
    YaqlError::Evaluation(format!("No function \"{function}\" matches supplied arguments"))
}

/// Compiled size limit of a regular expression from a template.
const REGEX_SIZE_LIMIT: usize = 1 << 20;

pub(super) fn regex(pattern: &str) -> Result<regex::Regex, YaqlError> {
    regex::RegexBuilder::new(pattern)
        .size_limit(REGEX_SIZE_LIMIT)
        .dfa_size_limit(REGEX_SIZE_LIMIT)
        .build()
        .map_err(|error| YaqlError::Evaluation(format!("unsupported regular expression {pattern:?}: {error}")))
}
