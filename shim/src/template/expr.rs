//! The intrinsic-function tree of a property or output value: recognising functions in JSON
//! (`from_json`), writing them back (`to_json`, the stored form), and listing what an expression
//! refers to. Evaluation lives in `evaluate.rs`.

pub mod budget;
pub mod functions;
pub mod values;

use std::collections::BTreeSet;

use serde_json::{Map, Value};

use functions::conditions::{self, Conditions};
use functions::{Function, Meaning, Version, meaning};

use super::ResourceType;

/// A property or output value with its intrinsic functions recognised.
#[derive(Debug, Clone, PartialEq)]
pub enum Expr {
    /// A value with no function inside (scalars, and lists or maps of literals).
    Literal(Value),
    List(Vec<Expr>),
    Map(Vec<(String, Expr)>),
    GetParam {
        name: String,
        path: Vec<Expr>,
    },
    GetResource(String),
    GetAttr {
        resource: String,
        attribute: String,
        path: Vec<Expr>,
    },
    /// Kept as is; a StructuredDeployment substitutes it when it releases its config.
    GetInput(String),
    StrReplace {
        template: Box<Expr>,
        params: Box<Expr>,
    },
    ListJoin {
        delimiter: String,
        lists: Vec<Expr>,
    },
    /// A function of `functions` applied to its evaluated arguments.
    Call {
        function: Function,
        args: Box<Expr>,
    },
    /// `if`, its condition names inlined (`expr/functions/conditions.rs`). `otherwise: None` is
    /// 2021-04-16's omitted branch: the enclosing item is left out.
    If {
        condition: Box<Expr>,
        then: Box<Expr>,
        otherwise: Option<Box<Expr>>,
    },
}

/// How a template's functions are read: its version, its `conditions` section and, for
/// `Ref`, its names. `stored` reads the engine's stored form back, accepting every version's
/// functions.
#[derive(Debug, Clone, Copy)]
pub struct Dialect<'a> {
    pub version: Version,
    pub conditions: Option<&'a Conditions>,
    pub stored: bool,
    /// `None`: the names are not known here, so `Ref` cannot be read (the stored form never
    /// has it: it is stored as the `get_resource` or `get_param` it stands for).
    pub names: Option<&'a Names>,
}

/// The names 2013-05-23's `Ref` tells apart (heat.engine.cfn.functions.Ref): a resource's
/// name means its reference id (`get_resource`), any other a parameter's value (`get_param`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Names {
    pub resources: BTreeSet<String>,
    /// Declared parameters and the pseudo parameters Heat defines for every stack.
    pub parameters: BTreeSet<String>,
}

/// `get_attr: [resource]` (2015-10-15+) is stored as a `GetAttr` of this attribute: Heat's own
/// marker for "every attribute" (heat.engine.attributes.ALL_ATTRIBUTES), which no resource
/// attribute may be named.
pub const ALL_ATTRIBUTES: &str = "*";

impl Dialect<'_> {
    pub const STORED: Dialect<'static> =
        Dialect { version: Version::LATEST, conditions: None, stored: true, names: None };

    pub fn meaning(&self, name: &str) -> Meaning {
        if self.stored {
            use crate::template::nested::convert::{NESTED_FAILURE, NESTED_PARAMETER};
            match name {
                NESTED_PARAMETER => return Meaning::Function(Function::NestedParameter),
                NESTED_FAILURE => return Meaning::Function(Function::NestedFailure),
                functions::HIDDEN_VALUE => return Meaning::Function(Function::HiddenValue),
                _ => {}
            }
        }
        let found = meaning(name, self.version);
        match found {
            Meaning::Removed | Meaning::NotYet { .. } if self.stored => meaning(name, Version::V2013_05_23),
            Meaning::Condition(function) if self.stored => Meaning::Function(function),
            other => other,
        }
    }
}

/// A dependency an expression creates: `get_resource` (attribute `None`) or `get_attr`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Reference {
    pub resource: String,
    pub attribute: Option<String>,
}

/// What an expression reads while it is evaluated; the engine answers from its store.
pub trait Scope {
    fn parameter(&self, name: &str) -> Option<Value>;
    /// The `get_resource` value; `None` while the resource is not created yet.
    fn resource_id(&self, resource: &str) -> Option<Value>;
    /// `None` while the attribute is not available yet.
    fn attribute(&self, resource: &str, attribute: &str) -> Option<Value>;
    /// Heat's refusal of an available resource's `attribute` (then `path`, evaluated) that it
    /// does not have, raised when it is read (a deployment's output its config does not
    /// declare); `None`: `attribute` answers.
    fn attribute_refusal(&self, _resource: &str, _attribute: &str, _path: &[Value]) -> Option<String> {
        None
    }
    /// The type of a resource whose attributes are available (what `get_attr: [resource]`
    /// lists); `None` while they are not.
    fn resource_type(&self, _resource: &str) -> Option<ResourceType> {
        None
    }
    /// What the evaluation may still produce; `None`: no budget beyond each result's cap.
    fn budget(&self) -> Option<&budget::Budget> {
        None
    }
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum EvalError {
    /// A referenced resource or attribute has no value yet; evaluate again later.
    #[error("{} is not available yet", not_ready_subject(resource, attribute.as_deref()))]
    NotReady { resource: String, attribute: Option<String> },
    /// The expression can never produce a value with these inputs.
    #[error("{message}")]
    Invalid { message: String },
    /// As `Invalid`, from a nested `hidden` parameter's conversion, whose message does not quote
    /// the value: it may be shown where another error of a hidden value is withheld (the
    /// engine's `hidden`, `checks`).
    #[error("{message}")]
    HiddenInvalid { message: String },
    /// The evaluation produced more than its `budget::Budget` allows.
    #[error("{}", budget::over_budget_message(*limit))]
    OverBudget { limit: usize },
}

/// HOT (and CFN-style) functions outside the supported subset. A single-key map whose key is
/// one of these (or starts with `Fn::`) is rejected rather than passed through as data, so a
/// template written for full Heat fails loudly instead of deploying the function as text.
pub const UNSUPPORTED_FUNCTIONS: &[&str] = &["get_server_attr", "resource_facade", "Ref", "Fn::ResourceFacade"];

impl Expr {
    /// Recognises functions in a JSON value: a single-key map whose key is a function name.
    /// The error names the function and what is wrong with its arguments.
    pub fn from_json(value: &Value) -> Result<Expr, String> {
        Expr::parse(value, &Dialect::STORED)
    }

    /// Recognises functions as a template of `dialect`'s version has them.
    pub fn parse(value: &Value, dialect: &Dialect) -> Result<Expr, String> {
        match value {
            Value::Array(items) => {
                let items = items.iter().map(|item| Expr::parse(item, dialect)).collect::<Result<Vec<_>, _>>()?;
                Ok(collapse_list(items))
            }
            Value::Object(map) => {
                if let Some((name, arguments)) = map.iter().next().filter(|_| map.len() == 1)
                    && let Some(function) = function(name, arguments, dialect)?
                {
                    return Ok(function);
                }
                let entries = map
                    .iter()
                    .map(|(key, item)| Ok((key.clone(), Expr::parse(item, dialect)?)))
                    .collect::<Result<Vec<_>, String>>()?;
                Ok(collapse_map(entries))
            }
            scalar => Ok(Expr::Literal(scalar.clone())),
        }
    }

    /// The JSON form `from_json` reads back.
    pub fn to_json(&self) -> Value {
        match self {
            Expr::Literal(value) => value.clone(),
            Expr::List(items) => Value::Array(items.iter().map(Expr::to_json).collect()),
            Expr::Map(entries) => {
                Value::Object(entries.iter().map(|(key, item)| (key.clone(), item.to_json())).collect())
            }
            Expr::GetParam { name, path } if path.is_empty() => call("get_param", Value::String(name.clone())),
            Expr::GetParam { name, path } => {
                let arguments = std::iter::once(Value::String(name.clone())).chain(path.iter().map(Expr::to_json));
                call("get_param", Value::Array(arguments.collect()))
            }
            Expr::GetResource(resource) => call("get_resource", Value::String(resource.clone())),
            Expr::GetAttr { resource, attribute, .. } if attribute == ALL_ATTRIBUTES => {
                call("get_attr", Value::Array(vec![Value::String(resource.clone())]))
            }
            Expr::GetAttr { resource, attribute, path } => {
                let head = [Value::String(resource.clone()), Value::String(attribute.clone())];
                let arguments = head.into_iter().chain(path.iter().map(Expr::to_json));
                call("get_attr", Value::Array(arguments.collect()))
            }
            Expr::GetInput(name) => call("get_input", Value::String(name.clone())),
            Expr::StrReplace { template, params } => {
                let mut arguments = Map::new();
                arguments.insert("template".into(), template.to_json());
                arguments.insert("params".into(), params.to_json());
                call("str_replace", Value::Object(arguments))
            }
            Expr::ListJoin { delimiter, lists } => {
                let arguments =
                    std::iter::once(Value::String(delimiter.clone())).chain(lists.iter().map(Expr::to_json));
                call("list_join", Value::Array(arguments.collect()))
            }
            Expr::Call { function, args } => call(function.name(), args.to_json()),
            Expr::If { condition, then, otherwise } => {
                let mut arguments = vec![condition.to_json(), then.to_json()];
                arguments.extend(otherwise.iter().map(|otherwise| otherwise.to_json()));
                call("if", Value::Array(arguments))
            }
        }
    }

    /// Every `get_resource` and `get_attr` inside, first occurrence first, without repeats.
    pub fn references(&self) -> Vec<Reference> {
        let mut references = Vec::new();
        self.visit(&mut |expr| {
            let reference = match expr {
                Expr::GetResource(resource) => Reference { resource: resource.clone(), attribute: None },
                Expr::GetAttr { resource, attribute, .. } => {
                    Reference { resource: resource.clone(), attribute: Some(attribute.clone()) }
                }
                _ => return,
            };
            if !references.contains(&reference) {
                references.push(reference);
            }
        });
        references
    }

    /// Every parameter named by `get_param` inside, first occurrence first, without repeats.
    pub fn parameter_names(&self) -> Vec<String> {
        self.collect_names(|expr| match expr {
            Expr::GetParam { name, .. } => Some(name),
            _ => None,
        })
    }

    /// Every input named by `get_input` inside, first occurrence first, without repeats.
    pub fn input_names(&self) -> Vec<String> {
        self.collect_names(|expr| match expr {
            Expr::GetInput(name) => Some(name),
            _ => None,
        })
    }

    /// Whether the value is computed from a hidden parameter (`is_hidden` says which names
    /// are), through any function: a `get_param` of one, a value the expansion inlined from one
    /// (`Function::HiddenValue`), or a run-time value of a nested template's `hidden` parameter.
    /// The resources it reads are not followed: the engine does that (`engine::hidden`).
    pub fn reads_hidden(&self, is_hidden: &dyn Fn(&str) -> bool) -> bool {
        let mut found = false;
        self.visit(&mut |expr| {
            found |= match expr {
                Expr::GetParam { name, .. } => is_hidden(name),
                Expr::Call { function: Function::HiddenValue, .. } => true,
                Expr::Call { function: Function::NestedParameter, args } => converts_hidden(args),
                _ => false,
            }
        });
        found
    }

    /// Calls `visitor` on this expression and every expression nested in it, parents first.
    pub fn visit(&self, visitor: &mut dyn FnMut(&Expr)) {
        visitor(self);
        match self {
            Expr::Literal(_) | Expr::GetResource(_) | Expr::GetInput(_) => {}
            Expr::List(items) => items.iter().for_each(|item| item.visit(visitor)),
            Expr::Map(entries) => entries.iter().for_each(|(_, item)| item.visit(visitor)),
            Expr::GetParam { path, .. } | Expr::GetAttr { path, .. } => {
                path.iter().for_each(|item| item.visit(visitor))
            }
            Expr::StrReplace { template, params } => {
                template.visit(visitor);
                params.visit(visitor);
            }
            Expr::ListJoin { lists, .. } => lists.iter().for_each(|item| item.visit(visitor)),
            Expr::Call { args, .. } => args.visit(visitor),
            Expr::If { condition, then, otherwise } => {
                condition.visit(visitor);
                then.visit(visitor);
                otherwise.iter().for_each(|otherwise| otherwise.visit(visitor));
            }
        }
    }

    fn collect_names(&self, pick: impl Fn(&Expr) -> Option<&String>) -> Vec<String> {
        let mut names: Vec<String> = Vec::new();
        self.visit(&mut |expr| {
            if let Some(name) = pick(expr)
                && !names.contains(name)
            {
                names.push(name.clone());
            }
        });
        names
    }
}

/// Whether the arguments of a `Function::NestedParameter` say the nested parameter is `hidden`.
fn converts_hidden(args: &Expr) -> bool {
    use crate::template::nested::convert::HIDDEN_ARGUMENT;
    match args {
        Expr::List(items) => matches!(items.get(HIDDEN_ARGUMENT), Some(Expr::Literal(Value::Bool(true)))),
        Expr::Literal(Value::Array(items)) => items.get(HIDDEN_ARGUMENT) == Some(&Value::Bool(true)),
        _ => false,
    }
}

fn not_ready_subject(resource: &str, attribute: Option<&str>) -> String {
    match attribute {
        Some(attribute) => format!("attribute \"{attribute}\" of resource \"{resource}\""),
        None => format!("resource \"{resource}\""),
    }
}

fn call(name: &str, arguments: Value) -> Value {
    let mut map = Map::new();
    map.insert(name.to_owned(), arguments);
    Value::Object(map)
}

pub(super) fn collapse_list(items: Vec<Expr>) -> Expr {
    if items.iter().all(|item| matches!(item, Expr::Literal(_))) {
        let values = items.into_iter().map(|item| item.to_json()).collect();
        return Expr::Literal(Value::Array(values));
    }
    Expr::List(items)
}

pub(super) fn collapse_map(entries: Vec<(String, Expr)>) -> Expr {
    if entries.iter().all(|(_, item)| matches!(item, Expr::Literal(_))) {
        let values = entries.into_iter().map(|(key, item)| (key, item.to_json())).collect();
        return Expr::Literal(Value::Object(values));
    }
    Expr::Map(entries)
}

/// `Ok(None)`: not a function name, so the map is data.
fn function(name: &str, arguments: &Value, dialect: &Dialect) -> Result<Option<Expr>, String> {
    let expr = match name {
        "get_param" => get_param(arguments, dialect)?,
        "get_resource" => Expr::GetResource(string_argument(name, arguments, "a resource name")?),
        "get_attr" => get_attr(arguments, dialect)?,
        "get_input" => Expr::GetInput(string_argument(name, arguments, "an input name")?),
        "str_replace" => str_replace(arguments, dialect)?,
        "list_join" => list_join(arguments, dialect)?,
        // The literal expression is parsed now, so its errors name the resource and property.
        "yaql" if dialect.meaning(name) == Meaning::Function(Function::Yaql) => {
            functions::yaql::validate_call(arguments)?;
            Expr::Call { function: Function::Yaql, args: Box::new(Expr::parse(arguments, dialect)?) }
        }
        _ => match dialect.meaning(name) {
            Meaning::Data => return Ok(None),
            Meaning::Function(function) => Expr::Call { function, args: Box::new(Expr::parse(arguments, dialect)?) },
            Meaning::If { nullable } => conditions::parse_if(arguments, nullable, dialect)?,
            Meaning::Ref => reference(arguments, dialect)?,
            Meaning::Condition(_) => {
                return Err(format!(
                    "{name} is only valid in a condition (the conditions section, a condition key or the first argument of if)"
                ));
            }
            // heat.engine.hot.functions.Removed's message, as InvalidTemplateVersion words it.
            Meaning::Removed => {
                return Err(format!(
                    "The template version is invalid: The function {name} is not supported in this version of HOT."
                ));
            }
            Meaning::NotYet { added } => {
                return Err(format!(
                    "function {name} is not available in heat_template_version {} (it was added in {})",
                    dialect.version.date(),
                    added.date()
                ));
            }
            Meaning::Refused("unsupported function") => {
                return Err(format!("unsupported function {name}"));
            }
            Meaning::Refused(reason) => return Err(reason.to_owned()),
        },
    };
    Ok(Some(expr))
}

fn string_argument(function: &str, arguments: &Value, what: &str) -> Result<String, String> {
    match arguments {
        Value::String(text) if !text.is_empty() => Ok(text.clone()),
        _ => Err(format!("{function}: expected {what}")),
    }
}

fn get_param(arguments: &Value, dialect: &Dialect) -> Result<Expr, String> {
    const USAGE: &str = "get_param: expected a parameter name or [name, path...]";
    match arguments {
        Value::String(name) if !name.is_empty() => Ok(Expr::GetParam { name: name.clone(), path: Vec::new() }),
        Value::Array(items) => match items.split_first() {
            Some((Value::String(name), path)) if !name.is_empty() => {
                let path = path.iter().map(|item| Expr::parse(item, dialect)).collect::<Result<Vec<_>, _>>()?;
                Ok(Expr::GetParam { name: name.clone(), path })
            }
            _ => Err(USAGE.into()),
        },
        _ => Err(USAGE.into()),
    }
}

/// `get_attr`, as heat.engine.hot.functions.GetAttThenSelect / GetAtt (before 2015-10-15) and
/// GetAttAllAttributes (a lone resource name: every attribute) parse their arguments.
fn get_attr(arguments: &Value, dialect: &Dialect) -> Result<Expr, String> {
    let all_allowed = dialect.stored || dialect.version >= Version::V2015_10_15;
    let Value::Array(items) = arguments else {
        return Err("Argument to \"get_attr\" must be a list".into());
    };
    match items.as_slice() {
        [Value::String(resource)] if all_allowed && !resource.is_empty() => {
            Ok(Expr::GetAttr { resource: resource.clone(), attribute: ALL_ATTRIBUTES.to_owned(), path: Vec::new() })
        }
        [] | [_] if all_allowed => Err(
            "Arguments to \"get_attr\" can be of the next forms: [resource_name] or [resource_name, attribute, (path), ...]"
                .into(),
        ),
        [] | [_] => Err("Arguments to \"get_attr\" must be of the form [resource_name, attribute, (path), ...]".into()),
        // Heat's marker is no attribute's name (InvalidTemplateAttribute's text).
        [Value::String(resource), Value::String(attribute), ..] if attribute == ALL_ATTRIBUTES => {
            Err(format!("The Referenced Attribute ({resource} {attribute}) is incorrect."))
        }
        [Value::String(resource), Value::String(attribute), path @ ..]
            if !resource.is_empty() && !attribute.is_empty() =>
        {
            let path = path.iter().map(|item| Expr::parse(item, dialect)).collect::<Result<Vec<_>, _>>()?;
            Ok(Expr::GetAttr { resource: resource.clone(), attribute: attribute.clone(), path })
        }
        _ => Err("get_attr: expected [resource, attribute, path...] with the resource and attribute as strings".into()),
    }
}

/// `Ref` (2013-05-23, heat.engine.cfn.functions.Ref): a resource name is `get_resource`, a
/// parameter name `get_param`; any other name is Heat's InvalidTemplateReference.
fn reference(arguments: &Value, dialect: &Dialect) -> Result<Expr, String> {
    let Some(names) = dialect.names else {
        return Err("Ref is not supported in the stored form (it is stored as get_resource or get_param)".into());
    };
    // Heat also accepts a function that yields a parameter name; the shim wants the name.
    let Value::String(name) = arguments else { return Err("Ref: expected a resource or parameter name".into()) };
    if names.resources.contains(name) {
        Ok(Expr::GetResource(name.clone()))
    } else if names.parameters.contains(name) {
        Ok(Expr::GetParam { name: name.clone(), path: Vec::new() })
    } else {
        Err(format!("The specified reference \"{name}\" (in unknown) is incorrect."))
    }
}

fn str_replace(arguments: &Value, dialect: &Dialect) -> Result<Expr, String> {
    let usage = || "str_replace: expected a map with the keys \"template\" and \"params\"".to_owned();
    let Value::Object(map) = arguments else { return Err(usage()) };
    let (Some(template), Some(params), 2) = (map.get("template"), map.get("params"), map.len()) else {
        return Err(usage());
    };
    let template = Expr::parse(template, dialect)?;
    if matches!(&template, Expr::Literal(value) if !value.is_string()) {
        return Err("str_replace: template must be a string".into());
    }
    let params = Expr::parse(params, dialect)?;
    if matches!(&params, Expr::Literal(value) if !value.is_object()) || matches!(params, Expr::List(_)) {
        return Err("str_replace: params must be a map".into());
    }
    if is_legacy(dialect) {
        let args = collapse_map(vec![("template".into(), template), ("params".into(), params)]);
        return Ok(Expr::Call { function: Function::LegacyReplace, args: Box::new(args) });
    }
    Ok(Expr::StrReplace { template: Box::new(template), params: Box::new(params) })
}

/// Before 2015-10-15 `str_replace` and `list_join` are Heat's older classes. The stored form
/// reads back as the newer ones, a superset (docs/templates.md, "Functions").
fn is_legacy(dialect: &Dialect) -> bool {
    !dialect.stored && dialect.version < Version::V2015_10_15
}

fn list_join(arguments: &Value, dialect: &Dialect) -> Result<Expr, String> {
    let usage = || "list_join: expected [delimiter, list, ...]".to_owned();
    let Value::Array(items) = arguments else { return Err(usage()) };
    let Some((Value::String(delimiter), lists)) = items.split_first() else { return Err(usage()) };
    if lists.is_empty() {
        return Err(usage());
    }
    // Before 2015-10-15 list_join is heat.engine.hot.functions.Join: one list only.
    if lists.len() > 1 && is_legacy(dialect) {
        return Err(
            "Incorrect arguments to \"list_join\" should be: \"list_join\" : [ \" \", [ \"str1\", \"str2\"]]".into()
        );
    }
    let lists = lists.iter().map(|list| Expr::parse(list, dialect)).collect::<Result<Vec<_>, _>>()?;
    if lists.iter().any(|list| {
        matches!(list, Expr::Literal(value) if !value.is_array() && !value.is_null()) || matches!(list, Expr::Map(_))
    }) {
        return Err("list_join: each argument after the delimiter must be a list".into());
    }
    if is_legacy(dialect) {
        let args = collapse_list([Expr::Literal(Value::String(delimiter.clone()))].into_iter().chain(lists).collect());
        return Ok(Expr::Call { function: Function::LegacyJoin, args: Box::new(args) });
    }
    Ok(Expr::ListJoin { delimiter: delimiter.clone(), lists })
}
