//! The template with its resolved parameters as the checks of `validate` and `properties` see
//! it: resources by name, the reference and parameter checks of one expression, and partial
//! evaluation (what a value is once parameters are known, with resources still unknown). Both
//! checkers use it; it uses neither, so they do not import each other.

use std::cell::Cell;
use std::collections::{BTreeMap, BTreeSet, HashMap};

use serde_json::Value;

use super::evaluate::ParameterScope;
use super::expr::budget::Budget;
use super::expr::{EvalError, Expr, Reference};
use super::{Resource, Template};

/// Parameters Heat defines for every stack. `get_param` may name them without a declaration;
/// the engine supplies their values (in the map given to `validate` and through `Scope`).
pub const PSEUDO_PARAMETERS: &[&str] = &["OS::stack_name", "OS::stack_id", "OS::project_id"];

/// What the checks cannot know about parts of the template. `parameters` and `resources`: their
/// definition had a problem, already reported when the template was parsed: a broken parameter
/// is left out and a resource is kept as far as it could be read (an unknown type as an
/// `OS::Heat::None` placeholder), so that the rest of the template is still checked. A
/// reference to one is accepted without further checks (its attributes and its type are
/// unknown), so that one mistake is reported once. `unvalued`: declared parameters given no
/// value (`template validate` asks for none, as Heat's validate): a placeholder of their type
/// stands in where the template's shape needs a value (conditions, nested stacks), but what is
/// computed from one is unknown to the checks of values, which Heat's validate does not make
/// (heat.engine.service.validate_template: `strict_validate=False`, so
/// heat.engine.properties.Properties.validate checks no property value).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Incomplete {
    pub parameters: BTreeSet<String>,
    pub resources: BTreeSet<String>,
    pub unvalued: BTreeSet<String>,
}

/// The problem of an expression computed from a hidden parameter that cannot be evaluated,
/// instead of the reason, which may quote the value.
pub const HIDDEN_REFUSED: &str =
    "cannot be evaluated (the reason is not shown: it may quote a value derived from a hidden parameter)";

/// Nothing incomplete: what a template parsed without problems has.
static COMPLETE: Incomplete =
    Incomplete { parameters: BTreeSet::new(), resources: BTreeSet::new(), unvalued: BTreeSet::new() };

/// A value as far as it is known before any resource exists.
#[derive(Debug, Clone, PartialEq)]
pub enum Partial {
    Known(Value),
    /// Depends on a resource (or on a parameter already reported as unknown).
    Unknown,
    List(Vec<Partial>),
    Map(Vec<(String, Partial)>),
}

impl Partial {
    /// The items of a list, known or partial; `None` when it is not (known to be) a list.
    pub fn items(&self) -> Option<Vec<Partial>> {
        match self {
            Partial::Known(Value::Array(items)) => Some(items.iter().cloned().map(Partial::Known).collect()),
            Partial::List(items) => Some(items.clone()),
            _ => None,
        }
    }

    /// The entries of a map, known or partial; `None` when it is not (known to be) a map.
    pub fn entries(&self) -> Option<Vec<(String, Partial)>> {
        match self {
            Partial::Known(Value::Object(map)) => {
                Some(map.iter().map(|(key, item)| (key.clone(), Partial::Known(item.clone()))).collect())
            }
            Partial::Map(entries) => Some(entries.clone()),
            _ => None,
        }
    }

    pub fn known(&self) -> Option<&Value> {
        match self {
            Partial::Known(value) => Some(value),
            _ => None,
        }
    }
}

/// What the checks need to know about the template at hand.
pub(super) struct Context<'a> {
    pub template: &'a Template,
    pub parameters: &'a BTreeMap<String, Value>,
    pub is_registered_server: &'a dyn Fn(&str) -> bool,
    pub index: HashMap<&'a str, usize>,
    pub incomplete: &'a Incomplete,
    /// What partial evaluation may produce in all (the check's share of the evaluation budget).
    pub budget: Option<&'a Budget>,
    /// Whether the budget's refusal was reported: once is enough (every evaluation after it
    /// is refused too).
    over_budget: Cell<bool>,
}

impl<'a> Context<'a> {
    pub(super) fn new(
        template: &'a Template,
        parameters: &'a BTreeMap<String, Value>,
        is_registered_server: &'a dyn Fn(&str) -> bool,
    ) -> Self {
        let index = template.resources.iter().enumerate().map(|(index, (name, _))| (name.as_str(), index)).collect();
        Context {
            template,
            parameters,
            is_registered_server,
            index,
            incomplete: &COMPLETE,
            budget: None,
            over_budget: Cell::new(false),
        }
    }

    /// The same context, with the parts of the template that are `incomplete`.
    pub(super) fn with_incomplete(self, incomplete: &'a Incomplete) -> Self {
        Context { incomplete, ..self }
    }

    /// The same context, partial evaluation charged to `budget`.
    pub(super) fn with_budget(self, budget: &'a Budget) -> Self {
        Context { budget: Some(budget), ..self }
    }

    /// Reports the budget's refusal, the first time only.
    fn over_budget(&self, prefix: &str, error: &EvalError, problems: &mut Vec<String>) {
        if !self.over_budget.replace(true) {
            problems.push(format!("{prefix}: {error}"));
        }
    }

    /// A resource whose definition is complete: an incomplete one's type and attributes are
    /// unknown, so checks that need them skip it.
    pub fn resource(&self, name: &str) -> Option<&'a Resource> {
        if self.incomplete.resources.contains(name) {
            return None;
        }
        self.index.get(name).map(|index| &self.template.resources[*index].1)
    }

    /// Whether `name` is a resource of the template, complete or not.
    pub fn has_resource(&self, name: &str) -> bool {
        self.index.contains_key(name) || self.incomplete.resources.contains(name)
    }

    fn is_parameter(&self, name: &str) -> bool {
        PSEUDO_PARAMETERS.contains(&name)
            || self.incomplete.parameters.contains(name)
            || self.template.parameters.iter().any(|(declared, _)| declared == name)
    }

    /// Whether `expr` is computed from a hidden parameter (`Expr::reads_hidden`): a problem
    /// with its value must not quote it.
    pub fn reads_hidden(&self, expr: &Expr) -> bool {
        expr.reads_hidden(&|name| self.template.parameter(name).is_some_and(|parameter| parameter.hidden))
    }

    /// References, parameter names and `get_input` placement of one expression.
    pub(super) fn check_expression(&self, prefix: &str, expr: &Expr, allow_input: bool, problems: &mut Vec<String>) {
        for Reference { resource, attribute } in expr.references() {
            if self.incomplete.resources.contains(&resource) {
                continue;
            }
            let function = if attribute.is_some() { "get_attr" } else { "get_resource" };
            let Some(target) = self.resource(&resource) else {
                problems.push(format!("{prefix}: {function} names an unknown resource \"{resource}\""));
                continue;
            };
            if let Some(attribute) = attribute
                && !self.has_attribute(target, &attribute)
            {
                problems.push(format!(
                    "{prefix}: get_attr: resource \"{resource}\" ({}) has no attribute \"{attribute}\"",
                    target.kind.name()
                ));
            }
        }
        for name in expr.parameter_names() {
            if !self.is_parameter(&name) {
                problems.push(format!("{prefix}: get_param names an unknown parameter \"{name}\""));
            }
        }
        if !allow_input && !expr.input_names().is_empty() {
            problems
                .push(format!("{prefix}: get_input is only allowed in the config of an OS::Heat::StructuredConfig"));
        }
    }

    /// Whether `get_attr` of `attribute` on `resource` passes validation, as in Heat: at
    /// validation a resource's node data holds every attribute the template reads when its type
    /// resolves attributes itself (`get_attribute` overridden: the deployments and deployment
    /// groups, whose attributes include whatever outputs a config declares, and
    /// `OS::Heat::None`), else only its schema's (heat.engine.resource.Resource.node_data, read
    /// by heat.engine.hot.functions.GetAttThenSelect.validate). A deployment's name its config
    /// does not declare is refused when it is read (the engine's `StackScope`).
    fn has_attribute(&self, resource: &Resource, attribute: &str) -> bool {
        resource.kind.accepts_any_attribute()
            || resource.kind.is_deployment()
            || resource.kind.base_attributes().contains(&attribute)
            || attribute == super::expr::ALL_ATTRIBUTES
    }

    /// Evaluates what parameters alone determine. An expression that can never evaluate is a
    /// problem (`{prefix}: message`); one that needs a resource is `Unknown`.
    pub fn partial(&self, prefix: &str, expr: &Expr, problems: &mut Vec<String>) -> Partial {
        match expr {
            Expr::Literal(value) => match self.budget.map_or(Ok(()), |budget| budget.charge_value(value)) {
                Ok(()) => Partial::Known(value.clone()),
                Err(error) => {
                    self.over_budget(prefix, &error, problems);
                    Partial::Unknown
                }
            },
            Expr::List(items) => {
                let items: Vec<Partial> = items.iter().map(|item| self.partial(prefix, item, problems)).collect();
                if items.iter().all(|item| matches!(item, Partial::Known(_))) {
                    Partial::Known(Value::Array(items.into_iter().filter_map(|item| item.known().cloned()).collect()))
                } else {
                    Partial::List(items)
                }
            }
            Expr::Map(entries) => {
                let entries: Vec<(String, Partial)> =
                    entries.iter().map(|(key, item)| (key.clone(), self.partial(prefix, item, problems))).collect();
                if entries.iter().all(|(_, item)| matches!(item, Partial::Known(_))) {
                    let map =
                        entries.into_iter().filter_map(|(key, item)| item.known().cloned().map(|value| (key, value)));
                    Partial::Known(Value::Object(map.collect()))
                } else {
                    Partial::Map(entries)
                }
            }
            other => {
                // Unknown parameters are reported once, by `check_expression`; an unvalued
                // one's placeholder says nothing about the value it will have.
                let unknown =
                    |name: &String| !self.parameters.contains_key(name) || self.incomplete.unvalued.contains(name);
                if other.parameter_names().iter().any(unknown) {
                    return Partial::Unknown;
                }
                match other.evaluate(&ParameterScope { parameters: self.parameters, budget: self.budget }) {
                    Ok(value) => Partial::Known(value),
                    Err(EvalError::NotReady { .. }) => Partial::Unknown,
                    // Function errors and nested conversions may quote the value they refused.
                    Err(EvalError::Invalid { .. }) if self.reads_hidden(other) => {
                        problems.push(format!("{prefix}: {HIDDEN_REFUSED}"));
                        Partial::Unknown
                    }
                    Err(EvalError::Invalid { message } | EvalError::HiddenInvalid { message }) => {
                        problems.push(format!("{prefix}: {message}"));
                        Partial::Unknown
                    }
                    Err(error @ EvalError::OverBudget { .. }) => {
                        self.over_budget(prefix, &error, problems);
                        Partial::Unknown
                    }
                }
            }
        }
    }
}
