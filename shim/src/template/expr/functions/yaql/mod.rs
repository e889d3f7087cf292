//! HOT's `yaql` function (heat.engine.hot.functions.Yaql): a documented subset of the yaql
//! language (docs/templates.md, "yaql"), enough for the expressions TripleO's templates use.
//! `check` parses an expression and refuses any function or method outside the subset, so a
//! literal expression fails at validation; `evaluate` runs it over `$.data`. Heat's engine
//! limits are kept (`yaql.limit_iterators` 200, `yaql.memory_quota` 10000) with yaql's error
//! texts, and an evaluation step budget bounds the work. Tokens are `lexer.rs`, the grammar
//! `parser.rs`, evaluation `eval.rs` and `operators.rs`, the functions `library.rs`,
//! `queries.rs` and `text.rs`.

mod eval;
mod lexer;
mod parser;

use serde_json::Value;

pub use parser::MAX_DEPTH;
use parser::{Argument, Node};

/// Longest expression accepted, in bytes.
pub const MAX_EXPRESSION_BYTES: usize = 10_000;
/// Heat's `[yaql] limit_iterators`: most items a collection may have.
pub const LIMIT_ITERATORS: usize = 200;
/// Heat's `[yaql] memory_quota`: the largest value (as Python's `sys.getsizeof` counts it).
pub const MEMORY_QUOTA: usize = 10_000;
/// Most evaluation steps one expression may take: each value an operation makes or copies
/// costs its size in values (scalars, lists and maps), each item a query visits one more.
pub const MAX_STEPS: usize = 4_000_000;
/// Most values (scalars, lists and maps, nested ones included) one intermediate value may hold.
pub const MAX_VALUE_NODES: usize = 100_000;

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum YaqlError {
    #[error("Parse error: {message} at position {position}")]
    Syntax { position: usize, message: String },
    #[error("the expression nests deeper than {MAX_DEPTH} levels (at position {position})")]
    TooDeep { position: usize },
    #[error("the expression is longer than {MAX_EXPRESSION_BYTES} bytes")]
    TooLong,
    #[error("not in the supported yaql subset (docs/templates.md, \"yaql\"): {what}")]
    Unsupported { what: String },
    #[error("{0}")]
    Evaluation(String),
    #[error("Collection length exceeds {LIMIT_ITERATORS} elements")]
    CollectionTooLarge,
    #[error("Expression consumed too much memory")]
    MemoryQuotaExceeded,
    #[error("the expression takes more than {MAX_STEPS} evaluation steps")]
    TooManySteps,
    #[error("the expression makes a value of more than {MAX_VALUE_NODES} items")]
    ValueTooLarge,
}

/// A parsed expression whose every function is in the supported subset.
#[derive(Debug, Clone)]
pub struct Expression(Node);

/// Parses `expression` and checks that it uses only supported functions and methods.
pub fn check(expression: &str) -> Result<Expression, YaqlError> {
    if expression.len() > MAX_EXPRESSION_BYTES {
        return Err(YaqlError::TooLong);
    }
    let node = parser::parse(expression)?;
    supported(&node)?;
    Ok(Expression(node))
}

/// The value of `expression` with `data` as `$.data`.
pub fn evaluate(expression: &Expression, data: Value) -> Result<Value, YaqlError> {
    eval::run(&expression.0, data)
}

/// Refuses the first call of a function (or method) the library does not have.
fn supported(node: &Node) -> Result<(), YaqlError> {
    let unsupported = |what: String| Err(YaqlError::Unsupported { what });
    match node {
        Node::Constant(_) | Node::Keyword(_) | Node::Variable(_) => Ok(()),
        Node::List(items) => items.iter().try_for_each(supported),
        Node::Index { receiver, args } => {
            supported(receiver)?;
            args.iter().try_for_each(supported)
        }
        Node::Map(entries) => entries.iter().try_for_each(|(key, value)| {
            supported(key)?;
            supported(value)
        }),
        Node::Call { name, args } => {
            if !eval::library::is_function(name) {
                return unsupported(format!("function {name}()"));
            }
            arguments_supported(args)
        }
        Node::Method { receiver, name, args, .. } => {
            if !eval::library::is_method(name) {
                return unsupported(format!("method .{name}()"));
            }
            supported(receiver)?;
            arguments_supported(args)
        }
        Node::Attribute { receiver, .. } => supported(receiver),
        Node::Unary { operand, .. } => supported(operand),
        Node::Binary { left, right, .. } => {
            supported(left)?;
            supported(right)
        }
    }
}

fn arguments_supported(args: &[Argument]) -> Result<(), YaqlError> {
    args.iter().try_for_each(|argument| match argument {
        Argument::Positional(node) => supported(node),
        Argument::Pair(source, value) => {
            supported(source)?;
            supported(value)
        }
    })
}

const SYNTAX: &str = "\"yaql\" syntax should be yaql:\n  expression: $.data.var1.sum()\n  data:\n    var1: [3, 2, 1]";

/// Checks a `yaql` call as Heat's `Yaql.__init__` and `validate` do, before its arguments are
/// evaluated: a map of `expression` and optional `data`; a literal expression must parse and
/// use only the supported subset (a computed one is checked when it is evaluated).
pub fn validate_call(arguments: &Value) -> Result<(), String> {
    let Value::Object(map) = arguments else { return Err("Arguments to \"yaql\" must be a map.".into()) };
    let Some(expression) = map.get("expression") else { return Err(SYNTAX.into()) };
    if map.keys().any(|key| key != "expression" && key != "data") {
        return Err(SYNTAX.into());
    }
    match expression {
        Value::String(text) => check(text).map(drop).map_err(|error| bad_expression(text, &error)),
        Value::Object(function) if function.len() == 1 => Ok(()),
        _ => Err(NOT_A_STRING.into()),
    }
}

const NOT_A_STRING: &str = "The \"expression\" argument to yaql must contain a string.";

fn bad_expression(expression: &str, error: &YaqlError) -> String {
    format!("Bad expression {expression:?}: {error}")
}

/// `yaql` applied to its evaluated arguments (heat.engine.hot.functions.Yaql.result).
pub fn apply(arguments: Value) -> Result<Value, super::super::EvalError> {
    let invalid = |message: String| super::super::EvalError::Invalid { message };
    let Value::Object(mut map) = arguments else { return Err(invalid("Arguments to \"yaql\" must be a map.".into())) };
    let Some(Value::String(text)) = map.remove("expression") else { return Err(invalid(NOT_A_STRING.into())) };
    let data = map.remove("data").unwrap_or_else(|| Value::Object(serde_json::Map::new()));
    let expression = check(&text).map_err(|error| invalid(bad_expression(&text, &error)))?;
    evaluate(&expression, data).map_err(|error| invalid(format!("yaql: {error} (expression {text:?})")))
}
