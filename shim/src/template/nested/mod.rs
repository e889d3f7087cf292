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
use super::evaluate::ParameterScope;
use super::expr::budget::{Budget, EVALUATION_BUDGET, value_bytes};
use super::expr::{EvalError, Expr};
pub use super::provider::{NestedDefinition, NestedKind, nested_kind};
use facade::Facade;
use level::Level;

/// Heat's `max_nested_stack_depth` default: a root stack's resources are at depth 0.
pub const MAX_NESTED_DEPTH: usize = 5;
/// Heat's `max_resources_per_stack` default, counted over the whole expanded tree
/// (`MaxResources::default`).
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
    #[error("{}", limit.exceeded(None))]
    TooManyResources { limit: MaxResources },
    #[error("the nested stacks' expressions expand to more than {MAX_EXPANDED_NODES} nodes")]
    TooLarge,
    /// The copies the expansion made (definitions of nested resources and group members, the
    /// expressions substituted into them) are over the evaluation budget.
    #[error("the nested stacks' definitions are {}", EvalError::OverBudget { limit: *limit })]
    OverBudget { limit: usize },
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
        matches!(self, NestedError::TooManyResources { .. } | NestedError::TooLarge | NestedError::OverBudget { .. })
    }
}

/// How many resources a stack may have in all, nested stacks and group members included:
/// Heat's `max_resources_per_stack` (`None`: unlimited, Heat's -1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MaxResources(pub Option<usize>);

impl Default for MaxResources {
    fn default() -> MaxResources {
        MaxResources(Some(MAX_RESOURCES))
    }
}

impl MaxResources {
    /// From Heat's option value: a count, or -1 for no limit.
    pub fn from_option(value: i64) -> Result<MaxResources, String> {
        match value {
            -1 => Ok(MaxResources(None)),
            count if count >= 0 => Ok(MaxResources(usize::try_from(count).ok())),
            other => Err(format!("{other} is not a number of resources (-1 for no limit)")),
        }
    }

    pub fn allows(&self, count: usize) -> bool {
        self.0.is_none_or(|limit| count <= limit)
    }

    /// Heat's refusal (heat.common.exception.StackResourceLimitExceeded inside
    /// RequestLimitExceeded), with the count when it is known and where the limit is set.
    pub fn exceeded(&self, count: Option<usize>) -> String {
        let limit = self.0.map_or_else(|| "unlimited".to_owned(), |limit| limit.to_string());
        let counted = match count {
            Some(count) => format!("The stack would have {count} resources"),
            None => format!("The stack would have more than {limit} resources"),
        };
        format!(
            "Request limit exceeded: Maximum resources per stack exceeded. {counted} (nested stacks, resource groups \
             and deployment group members counted); the limit is {limit}, Heat's max_resources_per_stack (anneal-shim \
             serve --max-resources-per-stack, template validate --max-resources-per-stack)"
        )
    }
}

/// `--max-resources-per-stack N`: a count, or -1 for no limit (as Heat's option).
impl std::str::FromStr for MaxResources {
    type Err = String;

    fn from_str(text: &str) -> Result<MaxResources, String> {
        let value: i64 = text.trim().parse().map_err(|_| format!("{text:?} is not a number of resources"))?;
        MaxResources::from_option(value)
    }
}

/// What an expansion may make: resources in all and bytes copied (charged to `budget`).
#[derive(Debug, Clone, Copy)]
pub struct Limits<'a> {
    pub max_resources: MaxResources,
    pub budget: &'a Budget,
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
    limits: Limits<'a>,
    problems: Vec<NestedError>,
    /// Provider templates parsed so far (an empty problem list: not in `files`).
    parsed: BTreeMap<String, Result<Rc<Template>, Vec<String>>>,
    /// The root stack's id (empty when it has none yet, as in `template validate`): nested
    /// stack names are derived from it.
    root_id: String,
}

impl Expander<'_> {
    /// Counts a copied expression against `MAX_EXPANDED_NODES` and its bytes against the
    /// evaluation budget (each node that is not a literal as a list item: `budget::value_bytes`).
    fn charge(&mut self, expr: &Expr) -> Result<(), NestedError> {
        let (mut size, mut bytes) = (0usize, 0usize);
        expr.visit(&mut |node| {
            let (nodes, cost) = match node {
                Expr::Literal(value) => (value_size(value), value_bytes(value)),
                _ => (1, value_bytes(&Value::Null) + 16),
            };
            size = size.saturating_add(nodes);
            bytes = bytes.saturating_add(cost);
        });
        self.nodes = self.nodes.saturating_add(size);
        if self.nodes > MAX_EXPANDED_NODES {
            return Err(NestedError::TooLarge);
        }
        let budget = self.limits.budget;
        budget.charge(bytes).map_err(|_| NestedError::OverBudget { limit: budget.limit() })
    }

    /// Whether `expr` reads a hidden parameter of the root.
    fn reads_hidden(&self, expr: &Expr) -> bool {
        expr.reads_hidden(&|name| self.hidden.iter().any(|hidden| hidden == name))
    }

    /// The root's parameters, evaluations through it charged to the budget.
    fn scope(&self) -> ParameterScope<'_> {
        ParameterScope { parameters: self.parameters, budget: Some(self.limits.budget) }
    }

    /// Counts one resource of the expanded template against `max_resources`.
    fn count_resource(&mut self) -> Result<(), NestedError> {
        self.resources += 1;
        let limit = self.limits.max_resources;
        if limit.allows(self.resources) { Ok(()) } else { Err(NestedError::TooManyResources { limit }) }
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
    let budget = Budget::new(EVALUATION_BUDGET);
    let limits = Limits { max_resources: MaxResources::default(), budget: &budget };
    Ok(expand_within(template, environment, files, parameters, limits)?.map(|expansion| expansion.template))
}

/// `expand` within `limits`: the resources counted against `max_resources`, the copies'
/// bytes charged to `budget` (what the rest of the check, and the stack, may still produce).
pub fn expand_within(
    template: &Template,
    environment: &Environment,
    files: &Map<String, Value>,
    parameters: &BTreeMap<String, Value>,
    limits: Limits,
) -> Result<Option<Expansion>, Vec<String>> {
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
        limits,
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
    Ok(Some(Expansion { template: flat, resources: expander.resources }))
}

/// A flattened template and how many resources it stands for: its leaves and the nested
/// resources they replaced (as Heat counts a stack's resources, nested stacks' included).
#[derive(Debug, Clone)]
pub struct Expansion {
    pub template: Template,
    pub resources: usize,
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
