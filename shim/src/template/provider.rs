//! Which resource types are nested stacks (a provider template named by its file, or
//! `OS::Heat::ResourceGroup`) and what `hot` keeps of such a resource for `nested` to expand:
//! its kind and the definition parts `resource_facade` reads.

use serde_json::{Value, json};

use super::expr::{Dialect, Expr};
use super::yaml::{Body, Entry, Node};

/// The type name of a group of identical resources.
pub const GROUP_TYPE: &str = "OS::Heat::ResourceGroup";

/// What a nested resource expands from.
#[derive(Debug, Clone, PartialEq)]
pub enum NestedKind {
    /// A provider template: the `files` key named as the type.
    Provider(String),
    /// `OS::Heat::ResourceGroup`.
    Group,
}

/// The parts of a nested resource's definition that its template can read through
/// `resource_facade` (heat.engine.hot.functions.ResourceFacade), parsed in the parent.
#[derive(Debug, Clone, PartialEq)]
pub struct NestedDefinition {
    pub kind: NestedKind,
    pub metadata: Expr,
    pub update_policy: Expr,
    pub deletion_policy: Expr,
}

/// The kind of nested resource a type name stands for, if any: `OS::Heat::ResourceGroup`, or
/// a template file name (heat.engine.environment reads names ending in .yaml or .template as
/// provider templates).
pub fn nested_kind(type_name: &str) -> Option<NestedKind> {
    if type_name == GROUP_TYPE {
        return Some(NestedKind::Group);
    }
    is_template_name(type_name).then(|| NestedKind::Provider(type_name.to_owned()))
}

/// Whether a type name (or registry target) names a template file.
pub fn is_template_name(name: &str) -> bool {
    name.ends_with(".yaml") || name.ends_with(".template") || name.ends_with(".yml")
}

/// The nested kind a resource's `type` node names, if any.
pub fn nested_type(node: &Node) -> Option<NestedKind> {
    match &node.body {
        Body::Scalar(Value::String(text)) => nested_kind(text),
        _ => None,
    }
}

/// A nested resource's `resource_facade` values from its definition's fields (checked by
/// `hot` as for every resource), parsed in its template's dialect.
pub fn definition(
    kind: NestedKind,
    name: &str,
    fields: &[Entry],
    dialect: &Dialect,
    problems: &mut Vec<String>,
) -> NestedDefinition {
    let (metadata, deletion_policy, update_policy) = default_facade();
    let mut definition = NestedDefinition { kind, metadata, update_policy, deletion_policy };
    for field in fields {
        let slot = match field.key.as_str() {
            "metadata" => &mut definition.metadata,
            "update_policy" => &mut definition.update_policy,
            "deletion_policy" => &mut definition.deletion_policy,
            _ => continue,
        };
        match Expr::parse(&field.value.to_value(), dialect) {
            Ok(Expr::Literal(Value::Null)) => {}
            Ok(expr) => *slot = expr,
            Err(error) => problems.push(format!("resource {name}: {}: {error} (line {})", field.key, field.line)),
        }
    }
    definition
}

/// The facade values of a resource declared without them (Heat's defaults: metadata `{}`,
/// deletion_policy `Delete`, update_policy `{}`).
pub fn default_facade() -> (Expr, Expr, Expr) {
    (Expr::Literal(json!({})), Expr::Literal(Value::String("Delete".into())), Expr::Literal(json!({})))
}
