//! Whole-template validation against resolved parameters: references, attributes, property
//! schemas (in `properties.rs`), registered servers and dependency cycles, every problem
//! collected; on success a `Plan` in dependency order. The view both checkers share (lookups,
//! expression checks, partial evaluation) is `checks.rs`.

use std::collections::BTreeMap;

use serde_json::Value;

use super::checks::{Context, Incomplete};
use super::evaluate::{ParameterScope, render};
use super::expr::Expr;
use super::expr::budget::{Budget, EVALUATION_BUDGET};
use super::{Constraint, Resource, ResourceType, SERVER_CONSTRAINTS, Template, graph, properties};

/// The resources in the order to create them: dependencies first, ties by declaration order.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    pub nodes: Vec<PlanNode>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct PlanNode {
    pub name: String,
    pub kind: ResourceType,
    /// Every resource this one needs (references and `depends_on`), sorted, without repeats.
    pub depends_on: Vec<String>,
}

/// Checks `template` with resolved `parameters`; `is_registered_server` answers whether a
/// server name is known. Every problem is returned, each naming the resource or output.
pub fn validate(
    template: &Template,
    parameters: &BTreeMap<String, Value>,
    is_registered_server: &dyn Fn(&str) -> bool,
) -> Result<Plan, Vec<String>> {
    let budget = Budget::new(EVALUATION_BUDGET);
    validate_incomplete(template, parameters, is_registered_server, &Incomplete::default(), &budget)
}

/// `validate` of a template whose `incomplete` parts were already reported (`Incomplete`):
/// references to them are accepted, and their own properties are not checked against a schema.
/// `parameters` may lack a parameter whose value was refused: what depends on it is unknown.
/// What parameters determine is evaluated within `budget`.
pub fn validate_incomplete(
    template: &Template,
    parameters: &BTreeMap<String, Value>,
    is_registered_server: &dyn Fn(&str) -> bool,
    incomplete: &Incomplete,
    budget: &Budget,
) -> Result<Plan, Vec<String>> {
    let (chosen, mut problems) = choose(template, parameters, incomplete);
    let template = &chosen;
    let context =
        Context::new(template, parameters, is_registered_server).with_incomplete(incomplete).with_budget(budget);
    let mut edges = Vec::with_capacity(template.resources.len());
    let mut dependency_names = Vec::with_capacity(template.resources.len());
    for (name, resource) in &template.resources {
        for (property, expr) in &resource.properties {
            let allow_input = resource.kind == ResourceType::StructuredConfig && property == "config";
            context.check_expression(
                &format!("resource {name}: property \"{property}\""),
                expr,
                allow_input,
                &mut problems,
            );
        }
        for dependency in &resource.depends_on {
            if !context.has_resource(dependency) {
                problems.push(format!("resource {name}: depends_on names an unknown resource \"{dependency}\""));
            }
        }
        if !incomplete.resources.contains(name) {
            properties::check(&context, name, resource, &mut problems);
        }
        let names = dependencies(&context, resource);
        edges.push(
            names.iter().filter_map(|dependency| context.index.get(dependency.as_str()).copied()).collect::<Vec<_>>(),
        );
        dependency_names.push(names);
    }
    server_constraints(template, parameters, is_registered_server, &mut problems);
    for (name, output) in &template.outputs {
        let prefix = format!("output {name}");
        context.check_expression(&prefix, &output.value, false, &mut problems);
        context.partial(&prefix, &output.value, &mut problems);
    }
    let names: Vec<&str> = template.resources.iter().map(|(name, _)| name.as_str()).collect();
    problems.extend(graph::cycles(&names, &edges));
    if !problems.is_empty() {
        return Err(problems);
    }
    let nodes = graph::order(&edges)
        .into_iter()
        .map(|index| PlanNode {
            name: names[index].to_owned(),
            kind: template.resources[index].1.kind,
            depends_on: dependency_names[index].clone(),
        })
        .collect();
    Ok(Plan { nodes })
}

/// A parameter under a server custom constraint (`nova.server`) must name a registered server,
/// as Heat's nova.server constraint asks Nova whether the server exists.
fn server_constraints(
    template: &Template,
    parameters: &BTreeMap<String, Value>,
    is_registered_server: &dyn Fn(&str) -> bool,
    problems: &mut Vec<String>,
) {
    for (name, parameter) in &template.parameters {
        let constrained = parameter.constraints.iter().any(
            |constraint| matches!(constraint, Constraint::Custom { name, .. } if SERVER_CONSTRAINTS.contains(&name.as_str())),
        );
        let Some(value) = parameters.get(name).filter(|_| constrained) else { continue };
        let servers: Vec<String> = match value {
            Value::Array(items) => items.iter().map(render).collect(),
            single => vec![render(single)],
        };
        for server in servers.iter().filter(|server| !is_registered_server(server)) {
            let shown =
                if parameter.hidden { "the server it names".to_owned() } else { format!("server \"{server}\"") };
            problems.push(format!(
                "parameter \"{name}\": custom_constraint nova.server: {shown} is not registered (anneal-shim server add)"
            ));
        }
    }
}

/// Existing resources `resource` needs, sorted and unique.
fn dependencies(context: &Context, resource: &Resource) -> Vec<String> {
    let referenced =
        resource.properties.iter().flat_map(|(_, expr)| expr.references()).map(|reference| reference.resource);
    let mut names: Vec<String> = referenced
        .chain(resource.depends_on.iter().cloned())
        .filter(|name| context.index.contains_key(name.as_str()))
        .collect();
    names.sort();
    names.dedup();
    names
}

/// The template as Heat sees it once conditions are decided: resources whose `condition` is
/// false left out (heat.engine.template_common: they are not in the stack, so a reference
/// to one is an error) and every `if` replaced by its chosen branch. The engine stores this
/// form, so what it reads (`get_resource` in `config`, `server`) is what `validate` checked.
/// `validate` reports the problems (with every other problem of the template).
pub fn apply_conditions(template: &Template, parameters: &BTreeMap<String, Value>) -> Result<Template, Vec<String>> {
    let (chosen, problems) = choose(template, parameters, &Incomplete::default());
    if problems.is_empty() { Ok(chosen) } else { Err(problems) }
}

/// Each property of `resource` with its `if` branches chosen; one that reads a parameter
/// without a value (`lacks_parameter`) is kept as written.
fn choose_properties(
    name: &str,
    resource: &mut Resource,
    scope: &ParameterScope,
    lacks_parameter: &dyn Fn(Option<&Expr>) -> bool,
    problems: &mut Vec<String>,
) {
    let mut kept = Vec::with_capacity(resource.properties.len());
    for (property, expr) in &resource.properties {
        match expr.choose_branches(scope) {
            Ok(Some(expr)) => kept.push((property.clone(), expr)),
            // An omitted branch leaves the property unset (heat's IfNullable).
            Ok(None) => {}
            Err(_) if lacks_parameter(Some(expr)) => kept.push((property.clone(), expr.clone())),
            Err(error) => problems.push(format!("resource {name}: property \"{property}\": {error}")),
        }
    }
    resource.properties = kept;
}

fn choose(
    template: &Template,
    parameters: &BTreeMap<String, Value>,
    incomplete: &Incomplete,
) -> (Template, Vec<String>) {
    let scope = ParameterScope::new(parameters);
    let lacks_parameter = |expr: Option<&Expr>| {
        let lacking = |name: &String| {
            !parameters.contains_key(name)
                && (template.parameter(name).is_some() || incomplete.parameters.contains(name))
        };
        expr.is_some_and(|expr| expr.parameter_names().iter().any(lacking))
    };
    let mut problems = Vec::new();
    let mut chosen = template.clone();
    chosen.resources.retain(|(name, resource)| {
        match resource.condition.as_ref().map(|condition| condition.evaluate(&scope)) {
            None | Some(Ok(Value::Bool(true))) => true,
            Some(Ok(Value::Bool(false))) => false,
            Some(Ok(_)) => {
                problems.push(format!("resource {name}: condition: the condition is not a boolean"));
                false
            }
            // A refused parameter value was reported already; the resource is still checked.
            Some(Err(_)) if lacks_parameter(resource.condition.as_ref()) => true,
            Some(Err(error)) => {
                problems.push(format!("resource {name}: condition: {error}"));
                false
            }
        }
    });
    let disabled: Vec<&str> = template
        .resources
        .iter()
        .map(|(name, _)| name.as_str())
        .filter(|name| chosen.resource(name).is_none())
        .collect();
    for (name, resource) in &mut chosen.resources {
        // heat.engine.rsrc_defn.dependencies: depending on a resource that is left out is
        // allowed and means nothing; a get_resource or get_attr of it is an error.
        resource.depends_on.retain(|dependency| !disabled.contains(&dependency.as_str()));
        choose_properties(name, resource, &scope, &lacks_parameter, &mut problems);
    }
    for (name, output) in &mut chosen.outputs {
        match output.value.choose_branches(&scope) {
            Ok(value) => output.value = value.unwrap_or(Expr::Literal(Value::Null)),
            Err(_) if lacks_parameter(Some(&output.value)) => {}
            Err(error) => problems.push(format!("output {name}: {error}")),
        }
    }
    (chosen, problems)
}
