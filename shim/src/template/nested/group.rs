//! `OS::Heat::ResourceGroup` (heat.engine.resources.openstack.heat.resource_group): `count`
//! members named "0", "1", ... skipping the names its `removal_policies` list, each the
//! `resource_def` with `index_var` replaced by its name in every string of its properties.
//! The count and the removal list must be known when the stack is validated (from parameters).
//! A member of a nested type expands further (`<group>/<index>/<inner>`).

use serde_json::{Value, json};

use super::facade::{GroupFacts, select_path};
use super::{Child, Expander, MaxResources, NestedDefinition, NestedError, hidden_value, nested_kind, report};
use crate::template::expr::{EvalError, Expr, collapse_list, collapse_map};
use crate::template::{Resource, ResourceType, Template, type_names};

const PROPERTIES: &[&str] = &["count", "index_var", "resource_def", "removal_policies", "removal_policies_mode"];

/// One member definition: its type, properties and metadata.
struct Definition {
    kind: String,
    properties: Vec<(String, Expr)>,
    metadata: Expr,
}

pub(super) fn members(ex: &mut Expander, child: &Child, version: &str) -> Result<(Template, GroupFacts), NestedError> {
    let problem = |problem: String| NestedError::Group { resource: child.flat.clone(), problem };
    let mut problems = Vec::new();
    for (property, _) in &child.properties {
        if !PROPERTIES.contains(&property.as_str()) {
            problems.push(problem(format!("Unknown Property {property}")));
        }
    }
    let limit = ex.limits.max_resources;
    let count = known(ex, child, "count").and_then(|count| member_count(count.unwrap_or(json!(1)), limit));
    // A count read from a hidden parameter is refused without quoting it.
    let hidden_count = child.properties.iter().any(|(name, expr)| name == "count" && ex.reads_hidden(expr));
    let count = count.map_err(|problem| match (hidden_count, limit.0) {
        (true, Some(most)) => format!("count: the hidden value is not a non-negative integer up to {most}"),
        (true, None) => "count: the hidden value is not a non-negative integer".to_string(),
        (false, _) => problem,
    });
    let index_var = known(ex, child, "index_var").and_then(|var| match var {
        None => Ok("%index%".to_owned()),
        Some(Value::String(var)) if var.chars().count() >= 3 => Ok(var),
        Some(_) => Err("index_var: must be a string of at least 3 characters".to_owned()),
    });
    let removed = removed_names(ex, child);
    let definition = definition(ex, child);
    let (count, index_var, removed, definition) = match (count, index_var, removed, definition) {
        (Ok(count), Ok(var), Ok(removed), Ok(definition)) if problems.is_empty() => (count, var, removed, definition),
        (count, var, removed, definition) => {
            let found = [count.err(), var.err(), removed.err(), definition.err()];
            problems.extend(found.into_iter().flatten().map(problem));
            return Err(report(ex, problems));
        }
    };
    let names: Vec<String> =
        (0..).map(|index: usize| index.to_string()).filter(|name| !removed.contains(name)).take(count).collect();
    let mut members = Vec::with_capacity(names.len());
    for name in &names {
        members.push((name.clone(), member(ex, child, &definition, &index_var, name)?));
    }
    let template = Template {
        version: version.to_owned(),
        description: None,
        parameters: Vec::new(),
        resources: members,
        outputs: Vec::new(),
    };
    Ok((template, GroupFacts { names, removed }))
}

/// A property's value from the parameters alone; `Ok(None)` when it is not set.
fn known(ex: &Expander, child: &Child, property: &str) -> Result<Option<Value>, String> {
    let Some((_, expr)) = child.properties.iter().find(|(name, _)| name == property) else { return Ok(None) };
    match expr.evaluate(&ex.scope()) {
        Ok(Value::Null) => Ok(None),
        Ok(value) => Ok(Some(value)),
        Err(EvalError::NotReady { resource, .. }) => Err(format!(
            "{property}: must be known when the stack is validated (from parameters), but it reads resource \
             \"{resource}\""
        )),
        Err(EvalError::Invalid { .. }) if ex.reads_hidden(expr) => {
            Err(format!("{property}: {}", crate::template::HIDDEN_REFUSED))
        }
        Err(EvalError::Invalid { message } | EvalError::HiddenInvalid { message }) => {
            Err(format!("{property}: {message}"))
        }
        Err(error @ EvalError::OverBudget { .. }) => Err(format!("{property}: {error}")),
    }
}

/// `count`: an integer (or integer text) from 0 up to the resource limit.
fn member_count(value: Value, limit: MaxResources) -> Result<usize, String> {
    let number = match &value {
        Value::Number(number) => {
            number.as_u64().or_else(|| number.as_f64().filter(|f| f.fract() == 0.0 && *f >= 0.0).map(|f| f as u64))
        }
        Value::String(text) => text.trim().parse::<u64>().ok(),
        _ => None,
    };
    match number {
        Some(count) => match usize::try_from(count).ok().filter(|count| limit.allows(*count)) {
            Some(count) => Ok(count),
            None => Err(format!("count: {count} is over the limit. {}", limit.exceeded(Some(count as usize)))),
        },
        None => Err(format!("count: {value} is not a non-negative integer")),
    }
}

/// The names `removal_policies` skip (heat's skiplist, names as `str(n)`), sorted as Heat
/// stores them. Kept for this update only: Heat's `append` mode also keeps the names of
/// earlier updates, which the shim does not store.
fn removed_names(ex: &Expander, child: &Child) -> Result<Vec<String>, String> {
    if let Some(Value::String(mode)) = known(ex, child, "removal_policies_mode")?
        && mode != "append"
        && mode != "update"
    {
        return Err(format!("removal_policies_mode: \"{mode}\" is not one of append, update"));
    }
    let policies = match known(ex, child, "removal_policies")? {
        None => return Ok(Vec::new()),
        Some(Value::Array(policies)) => policies,
        Some(other) => return Err(format!("removal_policies: {other} is not a list")),
    };
    let mut names = Vec::new();
    for policy in policies {
        let Value::Object(policy) = policy else { return Err("removal_policies: each policy must be a map".into()) };
        for (key, list) in policy {
            let Value::Array(list) = list else {
                return Err(format!("removal_policies: {key} must be a list"));
            };
            if key != "resource_list" {
                return Err(format!("removal_policies: Unknown Property {key}"));
            }
            names.extend(list.iter().map(|name| match name {
                Value::String(text) => text.clone(),
                other => other.to_string(),
            }));
        }
    }
    names.sort();
    names.dedup();
    Ok(names)
}

/// `resource_def`: required, a map of `type` (known now), `properties` and `metadata`.
fn definition(ex: &Expander, child: &Child) -> Result<Definition, String> {
    let Some((_, expr)) = child.properties.iter().find(|(name, _)| name == "resource_def") else {
        return Err("Property resource_def not assigned".into());
    };
    let fields = entries(ex, expr).ok_or("resource_def: must be a map")?;
    let mut definition = Definition { kind: String::new(), properties: Vec::new(), metadata: Expr::Literal(json!({})) };
    for (key, value) in fields {
        match key.as_str() {
            "type" => match value.evaluate(&ex.scope()) {
                Ok(Value::String(kind)) => definition.kind = kind,
                _ => return Err("resource_def: type must be a resource type name known from parameters".into()),
            },
            "properties" => match value {
                Expr::Literal(Value::Null) => {}
                other => definition.properties = entries(ex, &other).ok_or("resource_def: properties must be a map")?,
            },
            "metadata" => definition.metadata = value,
            other => return Err(format!("resource_def: Unknown Property {other}")),
        }
    }
    if definition.kind.is_empty() {
        return Err("resource_def: Property type not assigned".into());
    }
    Ok(definition)
}

/// A map expression's entries; a map known only from parameters is evaluated (its entries
/// marked when it read a hidden parameter).
fn entries(ex: &Expander, expr: &Expr) -> Option<Vec<(String, Expr)>> {
    match expr {
        Expr::Map(entries) => Some(entries.clone()),
        Expr::Literal(Value::Object(map)) => {
            Some(map.iter().map(|(key, value)| (key.clone(), Expr::Literal(value.clone()))).collect())
        }
        other => match other.evaluate(&ex.scope()).ok()? {
            Value::Object(map) => {
                let hidden = ex.reads_hidden(other);
                let entry = |value| if hidden { hidden_value(Expr::Literal(value)) } else { Expr::Literal(value) };
                Some(map.into_iter().map(|(key, value)| (key, entry(value))).collect())
            }
            _ => None,
        },
    }
}

/// The member `name`: the definition with `index_var` replaced in its properties, charged to
/// the expansion's budget (every member is a copy).
fn member(
    ex: &mut Expander,
    child: &Child,
    definition: &Definition,
    index_var: &str,
    name: &str,
) -> Result<Resource, NestedError> {
    let flat = format!("{}/{name}", child.flat);
    let kind = ex
        .environment
        .resolve_type(name, &definition.kind)
        .map_err(|problem| NestedError::Group { resource: flat.clone(), problem })?;
    let mut properties = Vec::with_capacity(definition.properties.len());
    for (key, expr) in &definition.properties {
        let copy = replace_index(ex, expr, index_var, name);
        ex.charge(&copy)?;
        properties.push((key.clone(), copy));
    }
    let mut resource = Resource {
        kind: ResourceType::None,
        properties,
        depends_on: Vec::new(),
        condition: None,
        line: child.line,
        nested: None,
        // Heat's member definitions have no policies (ResourceGroup.build_resource_definition).
        policies: crate::template::Policies::default(),
        stack: None,
    };
    match (nested_kind(&kind), ResourceType::parse(&kind)) {
        (Some(nested), _) => {
            let (_, deletion_policy, update_policy) = crate::template::provider::default_facade();
            let metadata = replace_index(ex, &definition.metadata, index_var, name);
            resource.nested =
                Some(Box::new(NestedDefinition { kind: nested, metadata, update_policy, deletion_policy }));
        }
        (None, Some(parsed)) => resource.kind = parsed,
        (None, None) => {
            return Err(NestedError::Group {
                resource: child.flat.clone(),
                problem: type_names::unknown_type(&flat, &kind),
            });
        }
    }
    Ok(resource)
}

/// `index_var` replaced by the member name in every string (map keys kept), as
/// ResourceGroup._handle_repl_val does to the resolved definition. A root parameter whose
/// value has the text is read now (the definition is already in the root's namespace) and
/// replaced in: Heat replaces in the parameter's resolved value as well.
fn replace_index(ex: &Expander, expr: &Expr, index_var: &str, name: &str) -> Expr {
    let again = |expr: &Expr| replace_index(ex, expr, index_var, name);
    match expr {
        Expr::Literal(value) => Expr::Literal(replace_in_value(value, index_var, name)),
        Expr::List(items) => collapse_list(items.iter().map(again).collect()),
        Expr::Map(entries) => collapse_map(entries.iter().map(|(key, item)| (key.clone(), again(item))).collect()),
        Expr::GetParam { name: parameter, path } => match ex.parameters.get(parameter) {
            // Only a value that has the text is inlined: the rest stay read at run time.
            Some(value) if replace_in_value(value, index_var, name) != *value => {
                let inlined = again(&select_path(Expr::Literal(value.clone()), path.clone()));
                if ex.hidden.contains(parameter) { hidden_value(inlined) } else { inlined }
            }
            _ => Expr::GetParam { name: parameter.clone(), path: path.iter().map(again).collect() },
        },
        Expr::GetAttr { resource, attribute, path } => Expr::GetAttr {
            resource: resource.clone(),
            attribute: attribute.clone(),
            path: path.iter().map(again).collect(),
        },
        Expr::GetResource(_) | Expr::GetInput(_) => expr.clone(),
        Expr::StrReplace { template, params } => {
            Expr::StrReplace { template: Box::new(again(template)), params: Box::new(again(params)) }
        }
        Expr::ListJoin { delimiter, lists } => {
            Expr::ListJoin { delimiter: delimiter.replace(index_var, name), lists: lists.iter().map(again).collect() }
        }
        Expr::Call { function, args } => Expr::Call { function: *function, args: Box::new(again(args)) },
        Expr::If { condition, then, otherwise } => Expr::If {
            condition: condition.clone(),
            then: Box::new(again(then)),
            otherwise: otherwise.as_deref().map(|otherwise| Box::new(again(otherwise))),
        },
    }
}

fn replace_in_value(value: &Value, index_var: &str, name: &str) -> Value {
    match value {
        Value::String(text) => Value::String(text.replace(index_var, name)),
        Value::Array(items) => Value::Array(items.iter().map(|item| replace_in_value(item, index_var, name)).collect()),
        Value::Object(map) => Value::Object(
            map.iter().map(|(key, item)| (key.clone(), replace_in_value(item, index_var, name))).collect(),
        ),
        other => other.clone(),
    }
}
