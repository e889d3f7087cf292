//! One snippet evaluated as a template of a given version would evaluate it, with
//! parameter values, a `conditions` section and, optionally, resources already created (their
//! type, reference id and attribute values, as the engine stores them): what the differential
//! tests against Heat's own function classes compare (tests/tests/heat_functions.rs,
//! tests/tests/heat_cfn.rs).

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::expr::functions::Version;
use super::expr::functions::conditions::Conditions;
use super::expr::{Names, Scope};
use super::{PSEUDO_PARAMETERS, ResourceType};
use crate::template::expr::{Dialect, Expr};

/// A created resource a snippet may read.
#[derive(Debug, Clone, PartialEq)]
pub struct SnippetResource {
    /// A type name `ResourceType::parse` knows.
    pub kind: String,
    /// What `get_resource` gives.
    pub reference_id: Value,
    /// The stored attribute values; a missing one reads as null, as the engine's.
    pub attributes: Map<String, Value>,
}

/// Parses `snippet` as a property value of a `version` template with `conditions`, and
/// evaluates it with `parameters`. The error is the parse or evaluation message. (A stack's
/// template reports every broken condition; see `hot.rs`.)
pub fn evaluate_snippet(
    version: &str,
    conditions: &Map<String, Value>,
    parameters: &BTreeMap<String, Value>,
    snippet: &Value,
) -> Result<Value, String> {
    evaluate_snippet_with_resources(version, conditions, parameters, &BTreeMap::new(), snippet)
}

/// `evaluate_snippet` in a stack that also has `resources`, created.
pub fn evaluate_snippet_with_resources(
    version: &str,
    conditions: &Map<String, Value>,
    parameters: &BTreeMap<String, Value>,
    resources: &BTreeMap<String, SnippetResource>,
    snippet: &Value,
) -> Result<Value, String> {
    let version = Version::parse(version).ok_or_else(|| format!("unknown heat_template_version {version}"))?;
    // As Heat, a broken condition only matters to a snippet that names it.
    let (conditions, _problems) = Conditions::parse(conditions, version);
    let pseudo = PSEUDO_PARAMETERS.iter().map(|name| (*name).to_owned());
    let names = Names {
        resources: resources.keys().cloned().collect(),
        parameters: parameters.keys().cloned().chain(pseudo).collect(),
    };
    let dialect = Dialect { version, conditions: Some(&conditions), stored: false, names: Some(&names) };
    let expr = Expr::parse(snippet, &dialect)?;
    // The stored form (the engine stores `to_json`) must read back; it is read with the
    // latest version's semantics, a superset of the earlier ones (docs/templates.md).
    let stored = Expr::from_json(&expr.to_json())?;
    if stored.to_json() != expr.to_json() {
        return Err(format!("the stored form of {} does not read back", expr.to_json()));
    }
    expr.evaluate(&SnippetScope { parameters, resources }).map_err(|error| error.to_string())
}

struct SnippetScope<'a> {
    parameters: &'a BTreeMap<String, Value>,
    resources: &'a BTreeMap<String, SnippetResource>,
}

impl Scope for SnippetScope<'_> {
    fn parameter(&self, name: &str) -> Option<Value> {
        self.parameters.get(name).cloned()
    }

    fn resource_id(&self, resource: &str) -> Option<Value> {
        self.resources.get(resource).map(|resource| resource.reference_id.clone())
    }

    fn attribute(&self, resource: &str, attribute: &str) -> Option<Value> {
        let resource = self.resources.get(resource)?;
        Some(resource.attributes.get(attribute).cloned().unwrap_or(Value::Null))
    }

    fn resource_type(&self, resource: &str) -> Option<ResourceType> {
        ResourceType::parse(&self.resources.get(resource)?.kind)
    }
}
