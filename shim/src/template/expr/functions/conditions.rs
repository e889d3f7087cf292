//! The `conditions` section, `condition` keys and `if`, as heat.engine.conditions and
//! HOTemplate20161014's condition parser: a condition is a boolean, the name of another
//! condition, or a condition function (`equals`, `not`, `and`, `or`, from 2017-09-01
//! `contains`) over `get_param` values. Names are inlined when the template is parsed, so a
//! stored expression needs no table; circular and unknown names are refused with Heat's texts.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::{Function, Meaning, Version, meaning};
use crate::template::expr::{Dialect, EvalError, Expr, Scope, collapse_list, collapse_map};

/// Deepest nesting of condition names; a longer chain is refused rather than recursed into.
const MAX_CONDITION_DEPTH: usize = 64;

/// Largest expression one condition may inline to: names are copied where they are used, so
/// `c2: {and: [c1, c1]}` doubles, and a chain of such definitions must not grow exponentially.
pub const MAX_CONDITION_NODES: usize = 1_000;

/// Most nodes all the `if`s and `condition` keys of one template may inline together.
pub const MAX_INLINED_NODES: usize = 1_000_000;

/// A template's `conditions`, each name resolved to its expression (or why it cannot be).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Conditions {
    raw: Map<String, Value>,
    resolved: BTreeMap<String, Result<Expr, String>>,
    /// Nodes inlined so far by `condition` (bounded by `MAX_INLINED_NODES`).
    inlined: std::cell::Cell<usize>,
}

impl Conditions {
    /// Resolves every definition of a `conditions` section; problems name the condition.
    pub fn parse(section: &Map<String, Value>, version: Version) -> (Conditions, Vec<String>) {
        let mut resolver =
            Resolver { raw: section, fixed: None, done: BTreeMap::new(), in_progress: Vec::new(), version };
        let mut problems = Vec::new();
        for name in section.keys() {
            if let Err(problem) = resolver.name(name) {
                problems.push(format!("condition \"{name}\": {problem}"));
            }
        }
        let resolved = resolver.done;
        (Conditions { raw: section.clone(), resolved, inlined: std::cell::Cell::new(0) }, problems)
    }

    /// A condition as written in a `condition` key or as `if`'s first argument.
    pub fn condition(&self, value: &Value, version: Version) -> Result<Expr, String> {
        let mut resolver = Resolver {
            raw: &self.raw,
            fixed: Some(&self.resolved),
            done: BTreeMap::new(),
            in_progress: Vec::new(),
            version,
        };
        let condition = resolver.condition(value)?;
        let inlined = self.inlined.get().saturating_add(size(&condition));
        if inlined > MAX_INLINED_NODES {
            return Err(format!("the conditions of this template inline to more than {MAX_INLINED_NODES} nodes"));
        }
        self.inlined.set(inlined);
        Ok(condition)
    }
}

/// The number of nodes of an expression.
fn size(expr: &Expr) -> usize {
    let mut count = 0usize;
    expr.visit(&mut |_| count += 1);
    count
}

fn too_big(expr: &Expr) -> Result<(), String> {
    if size(expr) > MAX_CONDITION_NODES {
        return Err(format!("a condition expands to more than {MAX_CONDITION_NODES} nodes"));
    }
    Ok(())
}

struct Resolver<'a> {
    raw: &'a Map<String, Value>,
    fixed: Option<&'a BTreeMap<String, Result<Expr, String>>>,
    done: BTreeMap<String, Result<Expr, String>>,
    in_progress: Vec<String>,
    version: Version,
}

impl Resolver<'_> {
    fn name(&mut self, name: &str) -> Result<Expr, String> {
        if let Some(found) = self.fixed.and_then(|fixed| fixed.get(name)).or_else(|| self.done.get(name)) {
            return found.clone();
        }
        if self.in_progress.iter().any(|open| open == name) {
            return Err(format!("Circular definition for condition \"{name}\""));
        }
        let Some(definition) = self.raw.get(name) else { return Err(format!("Invalid condition \"{name}\"")) };
        if self.in_progress.len() >= MAX_CONDITION_DEPTH {
            return Err(format!("conditions nest more than {MAX_CONDITION_DEPTH} names deep"));
        }
        self.in_progress.push(name.to_owned());
        let resolved = match definition {
            Value::Bool(_) => self.condition(definition),
            Value::Object(map) if map.len() == 1 && is_function(map, self.version) => self.condition(definition),
            _ => Err(format!("The definition of condition \"{name}\" is invalid: {definition}")),
        };
        self.in_progress.pop();
        let resolved = resolved.and_then(|expr| too_big(&expr).map(|()| expr));
        self.done.insert(name.to_owned(), resolved.clone());
        resolved
    }

    /// A value in condition position: a boolean, a condition name or a condition function.
    fn condition(&mut self, value: &Value) -> Result<Expr, String> {
        match value {
            Value::Bool(flag) => Ok(Expr::Literal(Value::Bool(*flag))),
            Value::String(name) => self.name(name),
            Value::Object(map) if map.len() == 1 => {
                let Some((name, args)) = map.iter().next() else { return Err("Invalid condition {}".into()) };
                self.function(name, args)
            }
            other => Err(format!("Invalid condition \"{other}\"")),
        }
    }

    fn function(&mut self, name: &str, args: &Value) -> Result<Expr, String> {
        let call = |function: Function, args: Expr| Expr::Call { function, args: Box::new(args) };
        match name {
            "get_param" => Expr::parse(&single(name, args), &self.dialect()),
            "equals" => Ok(call(Function::Equals, self.value(args)?)),
            "contains" if self.version >= Version::V2017_09_01 => Ok(call(Function::Contains, self.value(args)?)),
            "not" if args.is_null() => Err("Argument to \"not\" must be a condition".into()),
            "not" => Ok(call(Function::Not, self.condition(args)?)),
            "and" | "or" => {
                let function = if name == "and" { Function::And } else { Function::Or };
                let Value::Array(items) = args else {
                    return Err(format!("Arguments to \"{name}\" must be a list of conditions"));
                };
                if items.len() < 2 {
                    return Err(format!("The minimum number of condition arguments to \"{name}\" is 2."));
                }
                let mut inlined = Vec::with_capacity(items.len());
                let mut nodes = 0usize;
                for item in items {
                    let item = self.condition(item)?;
                    nodes = nodes.saturating_add(size(&item));
                    if nodes > MAX_CONDITION_NODES {
                        return Err(format!("a condition expands to more than {MAX_CONDITION_NODES} nodes"));
                    }
                    inlined.push(item);
                }
                Ok(call(function, Expr::List(inlined)))
            }
            "yaql" if self.version >= Version::V2017_09_01 => {
                super::yaql::validate_call(args)?;
                Ok(call(Function::Yaql, self.value(args)?))
            }
            _ if is_reference_function(name) => Err(format!("The function \"{name}\" is invalid in this context")),
            _ => match meaning(name, self.version) {
                Meaning::Removed => Err(format!(
                    "The template version is invalid: The function {name} is not supported in this version of HOT."
                )),
                Meaning::Data => Err(format!("Invalid condition \"{name}\"")),
                _ => Err(format!("The function \"{name}\" is invalid in this context")),
            },
        }
    }

    /// An argument of `equals` or `contains`: data, `get_param` and condition functions only.
    fn value(&mut self, value: &Value) -> Result<Expr, String> {
        match value {
            Value::Array(items) => {
                Ok(collapse_list(items.iter().map(|item| self.value(item)).collect::<Result<Vec<_>, _>>()?))
            }
            Value::Object(map) if map.len() == 1 && is_function(map, self.version) => self.condition(value),
            Value::Object(map) => {
                let entries = map
                    .iter()
                    .map(|(key, item)| Ok((key.clone(), self.value(item)?)))
                    .collect::<Result<Vec<_>, String>>()?;
                Ok(collapse_map(entries))
            }
            scalar => Ok(Expr::Literal(scalar.clone())),
        }
    }

    fn dialect(&self) -> Dialect<'static> {
        Dialect { version: self.version, conditions: None, stored: false, names: None }
    }
}

fn single(name: &str, args: &Value) -> Value {
    let mut map = Map::new();
    map.insert(name.to_owned(), args.clone());
    Value::Object(map)
}

fn is_reference_function(name: &str) -> bool {
    matches!(name, "get_param" | "get_resource" | "get_attr" | "str_replace" | "list_join" | "get_input")
}

fn is_function(map: &Map<String, Value>, version: Version) -> bool {
    map.keys().next().is_some_and(|name| is_reference_function(name) || meaning(name, version) != Meaning::Data)
}

/// `if: [condition, value_if_true, value_if_false]` (the last may be omitted when `nullable`).
pub fn parse_if(args: &Value, nullable: bool, dialect: &Dialect) -> Result<Expr, String> {
    let usage =
        || "Arguments to \"if\" must be of the form: [condition_name, value_if_true, value_if_false]".to_owned();
    let Value::Array(items) = args else { return Err(usage()) };
    let (condition, then, otherwise) = match items.as_slice() {
        [condition, then, otherwise] => (condition, then, Some(otherwise)),
        [condition, then] if nullable => (condition, then, None),
        _ => return Err(usage()),
    };
    let condition = match dialect.conditions {
        Some(conditions) => conditions.condition(condition, dialect.version)?,
        None => Conditions::default().condition(condition, dialect.version)?,
    };
    let then = Expr::parse(then, dialect)?;
    let otherwise = otherwise.map(|otherwise| Expr::parse(otherwise, dialect)).transpose()?;
    Ok(Expr::If { condition: Box::new(condition), then: Box::new(then), otherwise: otherwise.map(Box::new) })
}

impl Expr {
    /// The expression with every `if` replaced by its chosen branch, as Heat's `if` macro
    /// does when the template is parsed (conditions only read parameters, so `scope` decides
    /// them). `None`: an omitted branch was chosen for the whole expression.
    pub fn choose_branches(&self, scope: &dyn Scope) -> Result<Option<Expr>, EvalError> {
        let choose = |expr: &Expr| expr.choose_branches(scope);
        let required = |expr: &Expr| -> Result<Expr, EvalError> {
            Ok(expr.choose_branches(scope)?.unwrap_or(Expr::Literal(Value::Null)))
        };
        let chosen = match self {
            Expr::If { condition, then, otherwise } => {
                return match condition.evaluate(scope)? {
                    Value::Bool(true) => choose(then),
                    Value::Bool(false) => otherwise.as_deref().map(choose).transpose().map(Option::flatten),
                    _ => Err(EvalError::Invalid { message: "if: the condition is not a boolean".into() }),
                };
            }
            Expr::List(items) => {
                let items = items.iter().map(choose).collect::<Result<Vec<_>, _>>()?;
                collapse_list(items.into_iter().flatten().collect())
            }
            Expr::Map(entries) => {
                let mut kept = Vec::with_capacity(entries.len());
                for (key, item) in entries {
                    if let Some(item) = choose(item)? {
                        kept.push((key.clone(), item));
                    }
                }
                collapse_map(kept)
            }
            Expr::Call { function, args } => Expr::Call { function: *function, args: Box::new(required(args)?) },
            Expr::StrReplace { template, params } => {
                Expr::StrReplace { template: Box::new(required(template)?), params: Box::new(required(params)?) }
            }
            Expr::ListJoin { delimiter, lists } => Expr::ListJoin {
                delimiter: delimiter.clone(),
                lists: lists.iter().map(required).collect::<Result<_, _>>()?,
            },
            Expr::GetParam { name, path } => {
                Expr::GetParam { name: name.clone(), path: path.iter().map(required).collect::<Result<_, _>>()? }
            }
            Expr::GetAttr { resource, attribute, path } => Expr::GetAttr {
                resource: resource.clone(),
                attribute: attribute.clone(),
                path: path.iter().map(required).collect::<Result<_, _>>()?,
            },
            other => other.clone(),
        };
        Ok(Some(chosen))
    }
}
