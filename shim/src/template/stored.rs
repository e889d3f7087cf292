//! The stored form of a flattened template. The engine stores a stack's template text and
//! reads its outputs back from it; once nested stacks are flattened, the outputs are
//! expressions over flattened names (`outer/inner`), which no HOT text can declare, so the
//! engine stores them in this form: the outputs in their stored JSON (`Expr::to_json`, read
//! back with every function of every version, conditions already decided) under a marker key.

use serde_json::{Value, json};

use super::expr::Expr;
use super::yaml::{Body, Node};
use super::{Output, Template, TemplateError};

/// The top-level key that marks the flattened form.
const MARKER: &str = "anneal_flattened_outputs";

/// The text to store for a flattened template.
pub fn text(template: &Template) -> String {
    let outputs: Vec<Value> = template
        .outputs
        .iter()
        .map(|(name, output)| json!([name, {"description": output.description, "value": output.value.to_json()}]))
        .collect();
    json!({"heat_template_version": template.version, MARKER: outputs}).to_string()
}

/// Whether stored `text` is the flattened form (not a template a user sent).
pub fn is_flattened(text: &str) -> bool {
    text.trim_start().starts_with('{')
        && serde_json::from_str::<Value>(text).is_ok_and(|value| value.get(MARKER).is_some())
}

/// The stored flattened form, if `root` is one.
pub fn read(root: &Node) -> Option<Result<Template, TemplateError>> {
    let Body::Mapping(entries) = &root.body else { return None };
    let outputs = entries.iter().find(|entry| entry.key == MARKER)?;
    let version = entries
        .iter()
        .find(|entry| entry.key == "heat_template_version")
        .and_then(|entry| entry.value.to_value().as_str().map(str::to_owned))
        .unwrap_or_default();
    let mut template =
        Template { version, description: None, parameters: Vec::new(), resources: Vec::new(), outputs: Vec::new() };
    let invalid = |problem: String| TemplateError::Invalid { problems: vec![problem] };
    let Value::Array(items) = outputs.value.to_value() else {
        return Some(Err(invalid(format!("{MARKER} must be a list"))));
    };
    for item in items {
        let (Some(name), Some(value)) = (item[0].as_str(), item.get(1)) else {
            return Some(Err(invalid(format!("{MARKER}: each entry must be [name, output]"))));
        };
        let description = value["description"].as_str().map(str::to_owned);
        match Expr::from_json(&value["value"]) {
            Ok(value) => template.outputs.push((name.to_owned(), Output { description, value })),
            Err(problem) => return Some(Err(invalid(format!("output {name}: {problem}")))),
        }
    }
    Some(Ok(template))
}
