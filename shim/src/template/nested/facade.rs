//! A nested resource as the parent sees it: its reference id (`get_resource`) and its
//! attributes (`get_attr`), as expressions over the flattened leaves. A provider template's
//! attributes are its outputs and `resource.<inner>` (heat.engine.resources.template_resource
//! .TemplateResource.get_attribute); a group's are `refs`, `refs_map`, `removed_rsrc_list`,
//! `attributes`, `resource.<index>` and any member attribute as a list over the members
//! (heat.engine.resources.openstack.heat.resource_group.ResourceGroup.get_attribute).

use std::collections::BTreeMap;

use serde_json::Value;

use super::{Expander, NestedError, Target};
use crate::template::expr::functions::Function;
use crate::template::expr::{ALL_ATTRIBUTES, Expr, collapse_list, collapse_map};

#[derive(Debug)]
pub(super) struct Facade {
    /// The outer resource's flattened name.
    pub name: String,
    pub id: Expr,
    pub outputs: BTreeMap<String, Expr>,
    pub inner: BTreeMap<String, Target>,
    /// Every leaf inside, for `depends_on`.
    pub members: Vec<String>,
    pub group: Option<GroupFacts>,
}

/// A group's member names in order, and the names its removal policies skip.
#[derive(Debug)]
pub(super) struct GroupFacts {
    pub names: Vec<String>,
    pub removed: Vec<String>,
}

impl Facade {
    /// `get_attr` of the nested resource. An attribute Heat refuses only when it is read (a
    /// nested output the template lacks, a group member that is not there: an output error, or
    /// the reading resource fails) fails when read, once every leaf inside exists; with no leaf
    /// to wait for it is refused now.
    pub fn attribute(&self, ex: &mut Expander, attribute: &str, path: Vec<Expr>) -> Result<Expr, NestedError> {
        match self.attribute_now(ex, attribute, path) {
            Err(error @ (NestedError::BadAttribute { .. } | NestedError::MissingMember { .. }))
                if !self.members.is_empty() =>
            {
                let waits_for = self.members.iter().map(|member| Expr::GetResource(member.clone())).collect();
                let args = vec![Expr::Literal(Value::String(error.to_string())), Expr::List(waits_for)];
                let failing = Expr::Call { function: Function::NestedFailure, args: Box::new(Expr::List(args)) };
                ex.charge(&failing)?;
                Ok(failing)
            }
            other => other,
        }
    }

    /// `attribute` without that deferral: every refusal is an error now.
    pub fn attribute_now(&self, ex: &mut Expander, attribute: &str, path: Vec<Expr>) -> Result<Expr, NestedError> {
        if attribute == ALL_ATTRIBUTES {
            return self.all_attributes(ex);
        }
        if let Some(rest) = attribute.strip_prefix("resource.") {
            return self.inner_attribute(ex, attribute, rest, path);
        }
        match &self.group {
            Some(group) => self.group_attribute(ex, group, attribute, path),
            None => {
                let Some(output) = self.outputs.get(attribute) else { return Err(self.bad(attribute)) };
                ex.charge(output)?;
                Ok(select_path(output.clone(), path))
            }
        }
    }

    /// `get_attr: [resource]`: every output of a provider template; a group's `refs`,
    /// `refs_map` and `removed_rsrc_list` (its `attributes` needs a path, so Heat leaves it out).
    fn all_attributes(&self, ex: &mut Expander) -> Result<Expr, NestedError> {
        let names: Vec<String> = match &self.group {
            Some(_) => ["refs", "refs_map", "removed_rsrc_list"].map(str::to_owned).to_vec(),
            None => self.outputs.keys().cloned().collect(),
        };
        let mut entries = Vec::with_capacity(names.len());
        for name in names {
            let value = self.attribute(ex, &name, Vec::new())?;
            entries.push((name, value));
        }
        Ok(collapse_map(entries))
    }

    fn bad(&self, attribute: &str) -> NestedError {
        NestedError::BadAttribute { resource: self.name.clone(), attribute: attribute.to_owned() }
    }

    /// `resource.<name>[.<attribute>]` then the path (heat.common.grouputils.get_nested_attrs):
    /// with no attribute, the inner resource's reference id.
    fn inner_attribute(
        &self,
        ex: &mut Expander,
        attribute: &str,
        rest: &str,
        mut path: Vec<Expr>,
    ) -> Result<Expr, NestedError> {
        let (inner, named) = match rest.split_once('.') {
            Some((inner, named)) => (inner, Some(named.to_owned())),
            None => (rest, None),
        };
        let Some(target) = self.inner.get(inner) else {
            return Err(match self.group {
                Some(_) => NestedError::MissingMember { resource: self.name.clone(), member: inner.to_owned() },
                None => self.bad(attribute),
            });
        };
        let named = match named {
            Some(named) => Some(named),
            None if path.is_empty() => None,
            None => match path.remove(0) {
                Expr::Literal(Value::String(named)) => Some(named),
                _ => return Err(self.bad(attribute)),
            },
        };
        match named {
            None => target_id(ex, target),
            // Heat names the outer resource and the whole attribute.
            Some(named) => target_attribute(ex, target, &named, path).map_err(|error| match error {
                NestedError::BadAttribute { .. } => self.bad(&format!("resource.{inner}.{named}")),
                other => other,
            }),
        }
    }

    fn group_attribute(
        &self,
        ex: &mut Expander,
        group: &GroupFacts,
        attribute: &str,
        mut path: Vec<Expr>,
    ) -> Result<Expr, NestedError> {
        let members = group.names.iter().filter_map(|name| self.inner.get(name).map(|target| (name, target)));
        let members: Vec<(&String, &Target)> = members.collect();
        match attribute {
            "refs" => {
                let ids = members.iter().map(|(_, target)| target_id(ex, target)).collect::<Result<Vec<_>, _>>()?;
                Ok(select_path(collapse_list(ids), path))
            }
            "refs_map" => {
                let mut ids = Vec::new();
                for (name, target) in &members {
                    ids.push(((*name).clone(), target_id(ex, target)?));
                }
                Ok(collapse_map(ids))
            }
            "removed_rsrc_list" => Ok(Expr::Literal(Value::from(group.removed.clone()))),
            "attributes" => {
                if path.is_empty() {
                    return Err(self.bad(attribute));
                }
                let Expr::Literal(Value::String(named)) = path.remove(0) else { return Err(self.bad(attribute)) };
                let mut values = Vec::new();
                for (name, target) in &members {
                    values.push(((*name).clone(), target_attribute(ex, target, &named, path.clone())?));
                }
                Ok(collapse_map(values))
            }
            _ => {
                // A member's missing attribute is the group's, as Heat names it.
                let values = members
                    .iter()
                    .map(|(_, target)| target_attribute(ex, target, attribute, path.clone()))
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(|error| match error {
                        NestedError::BadAttribute { .. } => self.bad(attribute),
                        other => other,
                    })?;
                Ok(collapse_list(values))
            }
        }
    }
}

/// `get_resource` of a target.
pub(super) fn target_id(ex: &mut Expander, target: &Target) -> Result<Expr, NestedError> {
    match target {
        Target::Leaf(name) => Ok(Expr::GetResource(name.clone())),
        Target::Nested(facade) => {
            ex.charge(&facade.id)?;
            Ok(facade.id.clone())
        }
        Target::Failed => Ok(Expr::Literal(Value::Null)),
    }
}

/// `get_attr` of a target.
pub(super) fn target_attribute(
    ex: &mut Expander,
    target: &Target,
    attribute: &str,
    path: Vec<Expr>,
) -> Result<Expr, NestedError> {
    match target {
        Target::Leaf(name) => Ok(Expr::GetAttr { resource: name.clone(), attribute: attribute.to_owned(), path }),
        Target::Nested(facade) => facade.attribute_now(ex, attribute, path),
        Target::Failed => Ok(Expr::Literal(Value::Null)),
    }
}

/// `path` applied to the value of `expr`, as heat.engine.attributes.select_from_attribute
/// (a missing key or index gives null): appended to a `get_attr` or `get_param` path, walked
/// now through literals, lists and maps, and otherwise selected at run time with `Fn::Select`.
pub(super) fn select_path(expr: Expr, mut path: Vec<Expr>) -> Expr {
    if path.is_empty() {
        return expr;
    }
    match expr {
        Expr::GetAttr { resource, attribute, path: mut own } => {
            own.append(&mut path);
            Expr::GetAttr { resource, attribute, path: own }
        }
        Expr::GetParam { name, path: mut own } => {
            own.append(&mut path);
            Expr::GetParam { name, path: own }
        }
        Expr::Literal(value) => match literal_path(&path) {
            Some(keys) => Expr::Literal(keys.iter().fold(value, |value, key| component(&value, key))),
            None => select_at_run_time(Expr::Literal(value), path),
        },
        Expr::List(items) => match path[0].clone() {
            Expr::Literal(key @ Value::Number(_)) => {
                let index = list_index(&key, items.len());
                let rest = path.split_off(1);
                match index {
                    Some(index) => {
                        select_path(items.into_iter().nth(index).unwrap_or(Expr::Literal(Value::Null)), rest)
                    }
                    None => Expr::Literal(Value::Null),
                }
            }
            _ => select_at_run_time(Expr::List(items), path),
        },
        Expr::Map(entries) => match path[0].clone() {
            Expr::Literal(Value::String(key)) => {
                let rest = path.split_off(1);
                let found = entries.into_iter().find(|(name, _)| *name == key).map(|(_, item)| item);
                found.map_or(Expr::Literal(Value::Null), |item| select_path(item, rest))
            }
            _ => select_at_run_time(Expr::Map(entries), path),
        },
        other => select_at_run_time(other, path),
    }
}

fn literal_path(path: &[Expr]) -> Option<Vec<Value>> {
    path.iter()
        .map(|key| match key {
            Expr::Literal(value) => Some(value.clone()),
            _ => None,
        })
        .collect()
}

/// One step of select_from_attribute: a map by string key, a list by integer index.
fn component(value: &Value, key: &Value) -> Value {
    match (value, key) {
        (Value::Object(map), Value::String(key)) => map.get(key).cloned().unwrap_or(Value::Null),
        (Value::Array(items), Value::Number(_)) => {
            list_index(key, items.len()).and_then(|index| items.get(index)).cloned().unwrap_or(Value::Null)
        }
        _ => Value::Null,
    }
}

/// Python's list indexing, negative indices from the end.
fn list_index(key: &Value, len: usize) -> Option<usize> {
    let index = key.as_i64()?;
    if index < 0 { len.checked_sub(index.unsigned_abs() as usize) } else { Some(index as usize) }
}

fn select_at_run_time(expr: Expr, path: Vec<Expr>) -> Expr {
    path.into_iter().fold(expr, |collection, key| Expr::Call {
        function: Function::Select,
        args: Box::new(Expr::List(vec![key, collection])),
    })
}
