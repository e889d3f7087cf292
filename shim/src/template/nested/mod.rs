//! Nested stacks, flattened into the parent's graph. A resource whose type is a provider
//! template (a template in the request's `files`, named as its type or through
//! `resource_registry`) or an `OS::Heat::ResourceGroup` is replaced by the resources it
//! contains, named `<outer>/<inner>` (group members `<group>/<index>`; Heat forbids `/` in
//! resource names, so these cannot collide with declared ones). Every expression inside is
//! rewritten into the root template's namespace: `get_param` becomes the outer resource's
//! property (or the nested default), `get_resource`/`get_attr`/`depends_on` are renamed, and a
//! `get_attr` of the outer resource becomes the nested output's expression. The engine then
//! sees one ordinary template and diffs it by node name on update. Pure, and bounded for
//! hostile input: nesting depth, resources after expansion, expression size, recursion.

pub(crate) mod convert;
mod facade;
mod group;
mod level;
mod parameters;
mod rewrite;

use std::collections::BTreeMap;
use std::rc::Rc;

use serde_json::{Map, Value, json};

use super::Template;
use super::environment::Environment;
use super::expr::Expr;
pub use super::provider::{NestedDefinition, NestedKind, nested_kind};
use facade::Facade;
use level::Level;

/// Heat's `max_nested_stack_depth` default: a root stack's resources are at depth 0.
pub const MAX_NESTED_DEPTH: usize = 5;
/// Heat's `max_resources_per_stack` default, counted over the whole expanded tree.
pub const MAX_RESOURCES: usize = 1000;
/// Expression nodes that substitution may copy in all (a nested output read many times by
/// many levels would otherwise grow exponentially).
pub const MAX_EXPANDED_NODES: usize = 1_000_000;
/// The parameter name `resource_facade` is rewritten to inside a provider template.
const FACADE_PARAMETER: &str = "anneal::resource_facade::";

/// Why a nested resource could not be expanded. Each names the flattened resource.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum NestedError {
    #[error(
        "resource {resource}: the provider template \"{file}\" is not in the request's files (the client reads it relative to the template or environment that names it)"
    )]
    MissingTemplate { resource: String, file: String },
    #[error("resource {resource}: provider template \"{file}\": {problem}")]
    Template { resource: String, file: String, problem: String },
    #[error("resource {resource}: provider templates use themselves: {}", chain.join(" -> "))]
    Recursion { resource: String, chain: Vec<String> },
    #[error(
        "resource {resource}: Recursion depth exceeds {MAX_NESTED_DEPTH} (nested stacks deeper than Heat's max_nested_stack_depth)"
    )]
    TooDeep { resource: String },
    #[error("the nested stacks expand to more than {MAX_RESOURCES} resources (Heat's max_resources_per_stack)")]
    TooManyResources,
    #[error("the nested stacks' expressions expand to more than {MAX_EXPANDED_NODES} nodes")]
    TooLarge,
    #[error(
        "resource {resource}: Unknown Property {property} (the provider template \"{file}\" has no such parameter)"
    )]
    UnknownProperty { resource: String, property: String, file: String },
    #[error("resource {resource}: {problem}")]
    Parameter { resource: String, problem: String },
    #[error("resource {resource}: get_param: the nested template has no parameter \"{parameter}\"")]
    UnknownParameter { resource: String, parameter: String },
    #[error("The Referenced Attribute ({resource} {attribute}) is incorrect.")]
    BadAttribute { resource: String, attribute: String },
    #[error("Member '{member}' not found in group resource '{resource}'.")]
    MissingMember { resource: String, member: String },
    #[error("resource {resource}: {problem}")]
    Group { resource: String, problem: String },
    #[error("resource {resource}: resource_facade: {problem}")]
    Facade { resource: String, problem: String },
    #[error("resource {resource}: its nested stack refers back to itself through other nested stacks")]
    Cycle { resource: String },
}

impl NestedError {
    /// Limits over the whole expansion stop it; other problems stop only their resource.
    fn is_fatal(&self) -> bool {
        matches!(self, NestedError::TooManyResources | NestedError::TooLarge)
    }
}

/// What the whole expansion shares: the request's inputs and the budgets.
pub(super) struct Expander<'a> {
    environment: &'a Environment,
    files: &'a Map<String, Value>,
    /// The root's resolved parameters: group counts are decided from them.
    parameters: &'a BTreeMap<String, Value>,
    /// The root's `hidden` parameters: a value inlined from one is marked (`hidden_value`).
    hidden: Vec<String>,
    resources: usize,
    nodes: usize,
    problems: Vec<NestedError>,
    /// Provider templates parsed so far (an empty problem list: not in `files`).
    parsed: BTreeMap<String, Result<Rc<Template>, Vec<String>>>,
    /// The root stack's id (empty when it has none yet, as in `template validate`): nested
    /// stack names are derived from it.
    root_id: String,
}

impl Expander<'_> {
    /// Counts a copied expression against `MAX_EXPANDED_NODES`.
    fn charge(&mut self, expr: &Expr) -> Result<(), NestedError> {
        let mut size = 0usize;
        expr.visit(&mut |node| {
            size += match node {
                Expr::Literal(value) => value_size(value),
                _ => 1,
            }
        });
        self.nodes = self.nodes.saturating_add(size);
        if self.nodes > MAX_EXPANDED_NODES { Err(NestedError::TooLarge) } else { Ok(()) }
    }

    /// Whether `expr` reads a hidden parameter of the root.
    fn reads_hidden(&self, expr: &Expr) -> bool {
        expr.reads_hidden(&|name| self.hidden.iter().any(|hidden| hidden == name))
    }

    /// Counts one resource of the expanded template against `MAX_RESOURCES`.
    fn count_resource(&mut self) -> Result<(), NestedError> {
        self.resources += 1;
        if self.resources > MAX_RESOURCES { Err(NestedError::TooManyResources) } else { Ok(()) }
    }
}

/// Whether the template has a resource to expand.
pub fn has_nested(template: &Template) -> bool {
    template.resources.iter().any(|(_, resource)| resource.nested.is_some())
}

/// Expands every nested resource of `template` (parsed with `environment` and `files`), the
/// root parameters resolved. `Ok(None)` when there is nothing to expand; otherwise the flat
/// template (same parameters, rewritten outputs) or every problem found.
pub fn expand(
    template: &Template,
    environment: &Environment,
    files: &Map<String, Value>,
    parameters: &BTreeMap<String, Value>,
) -> Result<Option<Template>, Vec<String>> {
    if !has_nested(template) {
        return Ok(None);
    }
    let mut expander = Expander {
        environment,
        files,
        parameters,
        hidden: template.hidden_parameters(),
        resources: 0,
        nodes: 0,
        problems: Vec::new(),
        parsed: BTreeMap::new(),
        root_id: parameters.get("OS::stack_id").and_then(Value::as_str).unwrap_or_default().to_owned(),
    };
    let root = Level::root(template, StackIdentity::root());
    let expanded = match root.expand(&mut expander) {
        Ok(expanded) => expanded,
        Err(fatal) => return Err(vec![fatal.to_string()]),
    };
    if !expander.problems.is_empty() {
        let mut problems: Vec<String> = Vec::new();
        for problem in expander.problems {
            let text = problem.to_string();
            if !problems.contains(&text) {
                problems.push(text);
            }
        }
        return Err(problems);
    }
    let mut flat = template.clone();
    flat.resources = expanded.leaves;
    flat.outputs = expanded.outputs;
    Ok(Some(flat))
}

/// Nodes of a JSON value (literals merge, so their size is counted inside). Depth is bounded
/// by the YAML parser's and by the nesting depth.
fn value_size(value: &Value) -> usize {
    match value {
        Value::Array(items) => items.iter().map(value_size).fold(1, usize::saturating_add),
        Value::Object(map) => map.values().map(value_size).fold(1, usize::saturating_add),
        _ => 1,
    }
}

/// The nested stack's `OS::stack_name` and `OS::stack_id`, as expressions of the root's.
/// Heat names a nested stack `<parent>-<resource>-<short id>`, the short id 12 random
/// characters of base32 (heat.engine.resource.Resource.physical_resource_name,
/// heat.common.short_id); here the short id is derived from the root stack's id and the nested
/// resource's path, so it is the same on every update. The id is `<parent id>-<resource>`.
#[derive(Debug, Clone)]
struct StackIdentity {
    pub name: Expr,
    pub id: Expr,
}

impl StackIdentity {
    fn root() -> StackIdentity {
        let parameter = |name: &str| Expr::GetParam { name: name.to_owned(), path: Vec::new() };
        StackIdentity { name: parameter("OS::stack_name"), id: parameter("OS::stack_id") }
    }

    /// The identity of the stack of the nested resource `segment` (flattened `flat`) of this
    /// one, in a root stack of id `root_id`.
    fn child(&self, segment: &str, flat: &str, root_id: &str) -> StackIdentity {
        let join = |parent: &Expr, segments: &[String]| Expr::ListJoin {
            delimiter: "-".to_owned(),
            lists: vec![Expr::List(
                std::iter::once(parent.clone())
                    .chain(segments.iter().map(|segment| Expr::Literal(json!(segment))))
                    .collect(),
            )],
        };
        let segment = segment.to_owned();
        StackIdentity {
            name: join(&self.name, &[segment.clone(), short_id(root_id, flat)]),
            id: join(&self.id, &[segment]),
        }
    }

    /// `<name>/<id>`, as heat.common.identifier.HeatIdentifier.stack_path gives it.
    fn path(&self) -> Expr {
        Expr::ListJoin { delimiter: "/".to_owned(), lists: vec![Expr::List(vec![self.name.clone(), self.id.clone()])] }
    }
}

/// 12 lowercase base32 characters (Heat's short id alphabet, a-z and 2-7) of a digest of the
/// root stack's id and the nested resource's flattened path.
pub fn short_id(root_id: &str, flat: &str) -> String {
    use sha2::{Digest, Sha256};
    const ALPHABET: &[u8; 32] = b"abcdefghijklmnopqrstuvwxyz234567";
    let digest = Sha256::digest(format!("{root_id}\n{flat}").as_bytes());
    let bits = digest.iter().take(8).fold(0u64, |bits, byte| (bits << 8) | u64::from(*byte));
    (0..12).map(|index| char::from(ALPHABET[((bits >> (59 - 5 * index)) & 31) as usize])).collect()
}

/// What every resource of a nested stack gets from the outer resource: its dependencies (so
/// nothing inside starts before what the outer resource waits for) and its condition.
#[derive(Debug, Clone, Default)]
struct Inherited {
    pub depends_on: Vec<String>,
    pub condition: Option<Expr>,
}

/// What a resource name of a level stands for.
#[derive(Debug, Clone)]
enum Target {
    Leaf(String),
    Nested(Rc<Facade>),
    /// Its expansion failed (already reported): references to it add no more problems.
    Failed,
}

/// `resource_facade`'s answers inside a provider template.
#[derive(Debug, Clone)]
struct FacadeValues {
    pub metadata: Expr,
    pub deletion_policy: Expr,
    pub update_policy: Expr,
}

/// A nested resource, its expressions already in the root's namespace.
struct Child {
    pub flat: String,
    pub segment: String,
    pub properties: Vec<(String, Expr)>,
    pub inherited: Inherited,
    pub facade: FacadeValues,
    pub line: usize,
}

/// `value` marked as inlined from a hidden parameter (`Function::HiddenValue`): what is computed
/// from it is masked as what is computed from a `get_param` of a hidden parameter is
/// (docs/http-api.md, "The web view's routes"), and evaluating it gives `value`.
fn hidden_value(value: Expr) -> Expr {
    Expr::Call { function: super::expr::functions::Function::HiddenValue, args: Box::new(value) }
}

/// All problems reported: every one but the last pushed, the last returned.
fn report(ex: &mut Expander, mut problems: Vec<NestedError>) -> NestedError {
    let last = problems.pop().unwrap_or(NestedError::TooLarge);
    ex.problems.extend(problems);
    last
}
