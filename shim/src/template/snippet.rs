//! One snippet evaluated as a template of a given version would evaluate it, with
//! parameter values and a `conditions` section: what the differential tests against Heat's
//! own function classes compare (tests/tests/heat_functions.rs).

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::expr::functions::Version;
use super::expr::functions::conditions::Conditions;
use crate::template::evaluate::ParameterScope;
use crate::template::expr::{Dialect, Expr};

/// Parses `snippet` as a property value of a `version` template with `conditions`, and
/// evaluates it with `parameters`. The error is the parse or evaluation message. (A stack's
/// template reports every broken condition; see `hot.rs`.)
pub fn evaluate_snippet(
    version: &str,
    conditions: &Map<String, Value>,
    parameters: &BTreeMap<String, Value>,
    snippet: &Value,
) -> Result<Value, String> {
    let version = Version::parse(version).ok_or_else(|| format!("unknown heat_template_version {version}"))?;
    // As Heat, a broken condition only matters to a snippet that names it.
    let (conditions, _problems) = Conditions::parse(conditions, version);
    let dialect = Dialect { version, conditions: Some(&conditions), stored: false };
    let expr = Expr::parse(snippet, &dialect)?;
    // The stored form (the engine stores `to_json`) must read back; it is read with the
    // latest version's semantics, a superset of the earlier ones (docs/templates.md).
    let stored = Expr::from_json(&expr.to_json())?;
    if stored.to_json() != expr.to_json() {
        return Err(format!("the stored form of {} does not read back", expr.to_json()));
    }
    expr.evaluate(&ParameterScope { parameters }).map_err(|error| error.to_string())
}
