//! A resource's `deletion_policy` and `update_policy`, checked as Heat's
//! Resource.validate_template checks them: the deletion policy against the template version's
//! names (the lower-case aliases came with 2016-10-14; `Snapshot` only where the type can
//! snapshot, here OS::Heat::DeployedServer), the update policy against the type's
//! `update_policy_schema` (SoftwareDeploymentGroup: `rolling_update` and `batch_create`, each
//! `max_batch_size` and `pause_time`; ResourceGroup: `min_in_service` too; every other type: none,
//! so any key is unknown). The texts are Heat's. What the engine acts on is `Policies`. A
//! deletion policy given by a function (TripleO's `{get_param: ServerDeletionPolicy}`) is kept as
//! an expression, which the engine resolves and checks (`resolve_deletion_policy`) when it
//! stores the stack's plan.

use serde_json::Value;

use super::ResourceType;
use super::expr::functions::Version;
use super::expr::{Dialect, Expr};
use super::failure_budget::{self, FailureBudget};
use super::yaml::{Body, Node};

/// Batches of at most `max_batch_size` members, `pause_millis` apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Batching {
    pub max_batch_size: u64,
    pub pause_millis: u64,
}

/// What the engine does differently for a resource because of its policies.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Policies {
    /// `deletion_policy: Retain`: removing the resource runs nothing on its server.
    pub retain: bool,
    /// A `deletion_policy` given by a function, for the engine to resolve, and whether the
    /// template's version has the lower-case names.
    pub deletion_function: Option<Expr>,
    pub lower_case_names: bool,
    /// A deployment group's `update_policy.batch_create`.
    pub batch_create: Option<Batching>,
    /// A deployment group's `update_policy.rolling_update`.
    pub rolling_update: Option<Batching>,
    /// A deployment group's failure budget, from `metadata.anneal.failure_budget` (an anneal
    /// extension, see `failure_budget`).
    pub failure_budget: Option<FailureBudget>,
}

impl Policies {
    /// The policies as the engine stores them in a node's definition (absent when default).
    pub fn to_json(&self) -> Option<Value> {
        let inert = !self.retain
            && self.deletion_function.is_none()
            && self.batch_create.is_none()
            && self.rolling_update.is_none()
            && self.failure_budget.is_none();
        if inert {
            return None;
        }
        let batching = |batching: &Option<Batching>| {
            batching.map(|batching| {
                serde_json::json!({"max_batch_size": batching.max_batch_size, "pause_millis": batching.pause_millis})
            })
        };
        Some(serde_json::json!({"retain": self.retain, "batch_create": batching(&self.batch_create),
            "rolling_update": batching(&self.rolling_update),
            "failure_budget": self.failure_budget.map(FailureBudget::to_json),
            "deletion_function": self.deletion_function.as_ref().map(Expr::to_json),
            "lower_case_names": self.lower_case_names}))
    }

    /// Reads back what `to_json` wrote (anything else: the defaults).
    pub fn from_json(value: Option<&Value>) -> Policies {
        let Some(value) = value else { return Policies::default() };
        let batching = |key: &str| {
            let batching = value.get(key)?;
            Some(Batching {
                max_batch_size: batching.get("max_batch_size")?.as_u64()?,
                pause_millis: batching.get("pause_millis")?.as_u64()?,
            })
        };
        let deletion_function = value
            .get("deletion_function")
            .filter(|stored| !stored.is_null())
            .and_then(|stored| Expr::from_json(stored).ok());
        Policies {
            retain: value.get("retain").and_then(Value::as_bool).unwrap_or(false),
            deletion_function,
            lower_case_names: value.get("lower_case_names").and_then(Value::as_bool).unwrap_or(false),
            batch_create: batching("batch_create"),
            rolling_update: batching("rolling_update"),
            failure_budget: value.get("failure_budget").and_then(FailureBudget::from_json),
        }
    }
}

/// One resource's two policy fields as written (either may be absent), and its `metadata`,
/// where anneal's extensions are.
pub struct Written<'a> {
    pub deletion_policy: Option<&'a Node>,
    pub update_policy: Option<&'a Node>,
    pub metadata: Option<&'a Node>,
}

/// Checks both policies of resource `name` of type `kind` (`None`: a provider template, which
/// has no update policy schema); returns what the engine acts on, or pushes Heat's refusals.
pub fn check(
    name: &str,
    kind: Option<ResourceType>,
    group: bool,
    written: &Written<'_>,
    dialect: &Dialect<'_>,
    problems: &mut Vec<String>,
) -> Policies {
    let mut policies = Policies { lower_case_names: dialect.version >= Version::V2016_10_14, ..Policies::default() };
    if let Some(metadata) = written.metadata {
        policies.failure_budget = failure_budget::read(name, kind, metadata, problems);
    }
    if let Some(node) = written.deletion_policy {
        if let Body::Mapping(_) = node.body {
            match Expr::parse(&node.to_value(), dialect) {
                Ok(expr) => policies.deletion_function = Some(expr),
                Err(error) => problems.push(format!("resource {name}: deletion_policy: {error} (line {})", node.line)),
            }
        } else {
            policies.retain = deletion_policy(name, kind, node, policies.lower_case_names, problems);
        }
    }
    if let Some(node) = written.update_policy {
        let schema = match kind {
            Some(ResourceType::SoftwareDeploymentGroup | ResourceType::StructuredDeploymentGroup) => {
                Schema::Deployments
            }
            _ if group => Schema::ResourceGroup,
            _ => Schema::None,
        };
        // Heat resolves functions here; the shim takes the values as written.
        let literal = Expr::parse(&node.to_value(), dialect).map_or(true, |expr| matches!(expr, Expr::Literal(_)));
        if !literal {
            problems.push(format!(
                "resource {name}: update_policy: functions are not supported here by anneal-shim: write the values \
                 (line {})",
                node.line
            ));
            return policies;
        }
        let [batch_create, rolling_update] = update_policy(name, schema, node, problems);
        // A ResourceGroup's members are flattened into its parent: checked, not acted on.
        if schema == Schema::Deployments {
            policies.batch_create = batch_create;
            policies.rolling_update = rolling_update;
        }
    }
    policies
}

/// True for `Retain`, from a policy written as a literal.
fn deletion_policy(
    name: &str,
    kind: Option<ResourceType>,
    node: &Node,
    aliases: bool,
    problems: &mut Vec<String>,
) -> bool {
    match resolve_deletion_policy(name, kind, &node.to_value(), aliases) {
        Ok(retain) => retain,
        Err(problem) => {
            problems.push(format!("resource {name}: {problem} (line {})", node.line));
            false
        }
    }
}

/// Whether a deletion policy's value (written, or what its function gave) is `Retain`, or
/// Heat's refusal of it. `aliases`: the template's version has the lower-case names.
pub fn resolve_deletion_policy(
    name: &str,
    kind: Option<ResourceType>,
    value: &Value,
    aliases: bool,
) -> Result<bool, String> {
    let text = match value {
        Value::String(text) => text.as_str(),
        _ => return Err(format!("Resource {name} deletion_policy type must be string")),
    };
    let policy = match text {
        "Delete" | "Retain" | "Snapshot" => text.to_string(),
        "delete" | "retain" | "snapshot" if aliases => capitalised(text),
        _ => return Err(format!("Invalid deletion policy \"{text}\"")),
    };
    // Of the types here only a server (server_base.BaseServer) has handle_snapshot_delete. An
    // OS::Heat::None usually stands for an infrastructure type an environment mapped away
    // (a volume, which can snapshot): accepted, where Heat's NoneResource would refuse it.
    let can_snapshot = matches!(kind, Some(ResourceType::DeployedServer | ResourceType::None));
    if policy == "Snapshot" && !can_snapshot {
        return Err(format!("resources.{name}.deletion_policy: \"Snapshot\" deletion policy not supported"));
    }
    Ok(policy == "Retain")
}

fn capitalised(text: &str) -> String {
    let mut characters = text.chars();
    characters.next().map(|first| first.to_ascii_uppercase().to_string() + characters.as_str()).unwrap_or_default()
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Schema {
    /// SoftwareDeploymentGroup (and the Structured and deprecated names).
    Deployments,
    /// OS::Heat::ResourceGroup: `rolling_update` has `min_in_service` too.
    ResourceGroup,
    /// Every other type: Resource.update_policy_schema is empty.
    None,
}

/// The two sections (`batch_create`, `rolling_update`), each with Heat's defaults applied.
fn update_policy(name: &str, schema: Schema, node: &Node, problems: &mut Vec<String>) -> [Option<Batching>; 2] {
    let line = node.line;
    let Body::Mapping(sections) = &node.body else {
        problems.push(format!("resource {name}: Resource {name} update_policy type must be object (line {line})"));
        return [None, None];
    };
    let mut found = [None, None];
    for section in sections {
        let slot = match section.key.as_str() {
            "batch_create" if schema != Schema::None => 0,
            "rolling_update" if schema != Schema::None => 1,
            other => {
                let path = format!("resources.{name}.update_policy");
                problems
                    .push(format!("resource {name}: Property error: {path}: Unknown Property {other} (line {line})"));
                continue;
            }
        };
        let with_minimum = slot == 1 && schema == Schema::ResourceGroup;
        let path = format!("resources.{name}.update_policy.{}", section.key);
        found[slot] = batching(name, &path, &section.value, with_minimum, problems);
    }
    found
}

/// One section: a map (null: every default) of `max_batch_size` (integer >= 1, default 1),
/// `pause_time` (number >= 0, default 0) and, `with_minimum`, `min_in_service` (integer >= 0).
fn batching(name: &str, path: &str, node: &Node, with_minimum: bool, problems: &mut Vec<String>) -> Option<Batching> {
    let line = node.line;
    let mut problem = |text: String| problems.push(format!("resource {name}: Property error: {text} (line {line})"));
    let fields = match &node.body {
        Body::Mapping(fields) => fields.as_slice(),
        Body::Scalar(Value::Null) => &[],
        _ => {
            problem(format!("{path}: \"{}\" is not a map", scalar_text(node)));
            return None;
        }
    };
    let mut result = Batching { max_batch_size: 1, pause_millis: 0 };
    let mut valid = true;
    for field in fields {
        let here = format!("{path}.{}", field.key);
        match field.key.as_str() {
            "max_batch_size" => match integer(&here, &field.value, 1) {
                Ok(size) => result.max_batch_size = size.unsigned_abs(),
                Err(text) => {
                    problem(text);
                    valid = false;
                }
            },
            "min_in_service" if with_minimum => {
                if let Err(text) = integer(&here, &field.value, 0) {
                    problem(text);
                    valid = false;
                }
            }
            "pause_time" => match number(&here, &field.value) {
                Ok(seconds) => result.pause_millis = (seconds * 1000.0).round() as u64,
                Err(text) => {
                    problem(text);
                    valid = false;
                }
            },
            other => {
                problem(format!("{path}: Unknown Property {other}"));
                valid = false;
            }
        }
    }
    valid.then_some(result)
}

/// An integer as Heat's INTEGER schema takes it (an integral text too; a fraction truncated).
fn integer(path: &str, node: &Node, minimum: i64) -> Result<i64, String> {
    let value = match &node.body {
        Body::Scalar(Value::Number(number)) => number.as_i64().or_else(|| number.as_f64().map(|float| float as i64)),
        Body::Scalar(Value::String(text)) => text.trim().parse::<i64>().ok(),
        _ => None,
    };
    let Some(value) = value else {
        return Err(format!("{path}: Value '{}' is not an integer", scalar_text(node)));
    };
    if value < minimum {
        return Err(format!("{path}: {value} is out of range (min: {minimum}, max: None)"));
    }
    Ok(value)
}

/// A number >= 0 as Heat's NUMBER schema takes it (a numeric text too).
fn number(path: &str, node: &Node) -> Result<f64, String> {
    let value = match &node.body {
        Body::Scalar(Value::Number(number)) => number.as_f64(),
        Body::Scalar(Value::String(text)) => text.trim().parse::<f64>().ok().filter(|value| value.is_finite()),
        _ => None,
    };
    let Some(value) = value else {
        return Err(format!("{path}: Value '{}' is not a number", scalar_text(node)));
    };
    if value < 0.0 {
        return Err(format!("{path}: {} is out of range (min: 0, max: None)", scalar_text(node)));
    }
    Ok(value)
}

fn scalar_text(node: &Node) -> String {
    match &node.body {
        Body::Scalar(Value::String(text)) => text.clone(),
        Body::Scalar(value) => value.to_string(),
        _ => node.to_value().to_string(),
    }
}
