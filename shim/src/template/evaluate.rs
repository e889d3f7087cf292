//! Evaluating an `Expr` against a `Scope`, with Heat's semantics for each function: path
//! selection (`get_param` gives `""` and `get_attr` gives `null` for a missing path),
//! `str_replace` (longest placeholder first, replaced text never rescanned, maps and lists
//! rendered as `json.dumps(..., sort_keys=True)`), `list_join`, and `get_attr: [resource]`
//! (every attribute the type shows). Results are size-capped so a
//! template cannot make the engine build an enormous string, and their sum is charged to the
//! scope's evaluation budget (`expr/budget.rs`) so that many capped results cannot either.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::expr::budget::Budget;
use super::expr::functions;
pub use super::expr::values::{MAX_RESULT_BYTES, kind_name, render};
use super::expr::values::{str_replace, too_large};
use super::expr::{ALL_ATTRIBUTES, EvalError, Expr, Scope};

/// A `Scope` with parameters only: resources are never ready. Validation uses it to evaluate
/// what can be known before anything runs.
pub struct ParameterScope<'a> {
    pub parameters: &'a BTreeMap<String, Value>,
    /// What the evaluations through this scope may produce in all (`None`: each result's cap only).
    pub budget: Option<&'a Budget>,
}

impl<'a> ParameterScope<'a> {
    /// Parameters alone, no budget beyond each result's cap (small evaluations: a condition, a
    /// group's count).
    pub fn new(parameters: &'a BTreeMap<String, Value>) -> ParameterScope<'a> {
        ParameterScope { parameters, budget: None }
    }
}

impl Scope for ParameterScope<'_> {
    fn parameter(&self, name: &str) -> Option<Value> {
        self.parameters.get(name).cloned()
    }

    fn resource_id(&self, _resource: &str) -> Option<Value> {
        None
    }

    fn attribute(&self, _resource: &str, _attribute: &str) -> Option<Value> {
        None
    }

    fn budget(&self) -> Option<&Budget> {
        self.budget
    }
}

impl Expr {
    /// The value of the expression now. `GetInput` evaluates to `{"get_input": name}`, left for
    /// the StructuredDeployment that releases the config.
    pub fn evaluate(&self, scope: &dyn Scope) -> Result<Value, EvalError> {
        Ok(self.evaluate_item(scope)?.unwrap_or(Value::Null))
    }

    /// The value, or `None` for an `if` whose omitted branch was chosen (heat's IfNullable):
    /// the list item or map entry holding it is then left out.
    fn evaluate_item(&self, scope: &dyn Scope) -> Result<Option<Value>, EvalError> {
        match self {
            Expr::If { condition, then, otherwise } => {
                let chosen = match condition.evaluate(scope)? {
                    Value::Bool(true) => Some(then),
                    Value::Bool(false) => otherwise.as_ref(),
                    other => return Err(invalid(format!("if: the condition is {}, not a boolean", kind_name(&other)))),
                };
                chosen.map(|branch| branch.evaluate_item(scope)).transpose().map(Option::flatten)
            }
            other => other.evaluate_value(scope).map(Some),
        }
    }

    /// The value, charged to the scope's budget as it is produced: what a function, a literal
    /// or a reference gives in full, a list or map only for its entries (its items were
    /// charged when they were produced).
    fn evaluate_value(&self, scope: &dyn Scope) -> Result<Value, EvalError> {
        let value = self.produce(scope)?;
        if let Some(budget) = scope.budget() {
            match (self, &value) {
                (Expr::List(_), Value::Array(items)) => budget.charge_items(items.len())?,
                (Expr::Map(_), Value::Object(map)) => budget.charge_items(map.len())?,
                (Expr::If { .. }, _) => {}
                _ => budget.charge_value(&value)?,
            }
        }
        Ok(value)
    }

    fn produce(&self, scope: &dyn Scope) -> Result<Value, EvalError> {
        match self {
            Expr::Literal(value) => Ok(value.clone()),
            Expr::List(items) => {
                let mut list = Vec::with_capacity(items.len());
                for item in items {
                    list.extend(item.evaluate_item(scope)?);
                }
                Ok(Value::Array(list))
            }
            Expr::Map(entries) => {
                let mut map = Map::new();
                for (key, item) in entries {
                    if let Some(value) = item.evaluate_item(scope)? {
                        map.insert(key.clone(), value);
                    }
                }
                Ok(Value::Object(map))
            }
            Expr::Call { function, args } => functions::apply(*function, args.evaluate(scope)?),
            Expr::If { .. } => self.evaluate(scope),
            Expr::GetParam { name, path } => {
                let value =
                    scope.parameter(name).ok_or_else(|| invalid(format!("get_param: unknown parameter \"{name}\"")))?;
                if path.is_empty() {
                    return Ok(value);
                }
                let keys = evaluate_path("get_param", path, scope)?;
                Ok(select(&value, &keys).unwrap_or_else(|| Value::String(String::new())))
            }
            Expr::GetResource(resource) => scope
                .resource_id(resource)
                .ok_or_else(|| EvalError::NotReady { resource: resource.clone(), attribute: None }),
            Expr::GetAttr { resource, attribute, .. } if attribute == ALL_ATTRIBUTES => all_attributes(scope, resource),
            Expr::GetAttr { resource, attribute, path } => {
                let value = scope.attribute(resource, attribute).ok_or_else(|| EvalError::NotReady {
                    resource: resource.clone(),
                    attribute: Some(attribute.clone()),
                })?;
                let components = path.iter().map(|item| item.evaluate(scope)).collect::<Result<Vec<_>, _>>()?;
                if let Some(refusal) = scope.attribute_refusal(resource, attribute, &components) {
                    return Err(invalid(refusal));
                }
                let keys = path_keys("get_attr", components)?;
                Ok(select(&value, &keys).unwrap_or(Value::Null))
            }
            Expr::GetInput(name) => {
                let mut map = Map::new();
                map.insert("get_input".into(), Value::String(name.clone()));
                Ok(Value::Object(map))
            }
            Expr::StrReplace { template, params } => str_replace(template.evaluate(scope)?, params.evaluate(scope)?),
            Expr::ListJoin { delimiter, lists } => {
                let lists = lists.iter().map(|list| list.evaluate(scope)).collect::<Result<Vec<_>, _>>()?;
                list_join(delimiter, &lists)
            }
        }
    }
}

/// `get_attr: [resource]` (heat.engine.hot.functions.GetAttAllAttributes): a map of every
/// attribute the resource's type shows (`ResourceType::all_attributes`), once it is available.
fn all_attributes(scope: &dyn Scope, resource: &str) -> Result<Value, EvalError> {
    let not_ready = || EvalError::NotReady { resource: resource.to_owned(), attribute: None };
    let kind = scope.resource_type(resource).ok_or_else(not_ready)?;
    let mut map = Map::new();
    for name in kind.all_attributes() {
        map.insert((*name).to_owned(), scope.attribute(resource, name).ok_or_else(not_ready)?);
    }
    Ok(Value::Object(map))
}

fn invalid(message: String) -> EvalError {
    EvalError::Invalid { message }
}

/// A path component: a map key or a list index.
enum Key {
    Name(String),
    Index(i64),
}

fn evaluate_path(function: &str, path: &[Expr], scope: &dyn Scope) -> Result<Vec<Key>, EvalError> {
    path_keys(function, path.iter().map(|item| item.evaluate(scope)).collect::<Result<Vec<_>, _>>()?)
}

/// The evaluated path components as keys.
fn path_keys(function: &str, components: Vec<Value>) -> Result<Vec<Key>, EvalError> {
    components
        .into_iter()
        .map(|component| match component {
            Value::String(name) => Ok(Key::Name(name)),
            Value::Number(number) if number.as_i64().is_some() => Ok(Key::Index(number.as_i64().unwrap_or(0))),
            _ => Err(invalid(format!("{function}: path components must be strings or integers"))),
        })
        .collect()
}

/// Walks `keys` into `value`; `None` when a step does not exist. List indexes may be digit
/// strings and may be negative (from the end), as Python's indexing allows.
fn select(value: &Value, keys: &[Key]) -> Option<Value> {
    let mut current = value;
    for key in keys {
        current = match (current, key) {
            (Value::Object(map), Key::Name(name)) => map.get(name)?,
            (Value::Object(map), Key::Index(index)) => map.get(&index.to_string())?,
            (Value::Array(items), Key::Index(index)) => list_item(items, *index)?,
            (Value::Array(items), Key::Name(name)) => list_item(items, name.trim().parse().ok()?)?,
            _ => return None,
        };
    }
    Some(current.clone())
}

fn list_item(items: &[Value], index: i64) -> Option<&Value> {
    let position = if index < 0 {
        items.len().checked_sub(usize::try_from(index.unsigned_abs()).ok()?)?
    } else {
        usize::try_from(index).ok()?
    };
    items.get(position)
}

fn list_join(delimiter: &str, lists: &[Value]) -> Result<Value, EvalError> {
    let mut strings = Vec::new();
    let mut size = 0usize;
    for list in lists {
        let items = match list {
            // Heat skips empty arguments (`if jl:`), so a null list joins nothing.
            Value::Null => continue,
            Value::Array(items) => items,
            // The value itself is not shown: it may come from a hidden parameter.
            other => return Err(invalid(format!("list_join: expected lists, got {}", kind_name(other)))),
        };
        for item in items {
            let text = render(item);
            size = size.saturating_add(text.len()).saturating_add(delimiter.len());
            if size > MAX_RESULT_BYTES {
                return Err(too_large("list_join"));
            }
            strings.push(text);
        }
    }
    Ok(Value::String(strings.join(delimiter)))
}
