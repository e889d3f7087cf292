//! Readers of a template's YAML nodes that name what is wrong: a string field and an item's
//! definition mapping. Shared by `hot` (resources, outputs) and `hot_parameters`, which `hot`
//! calls, so they live below both.

use serde_json::Value;

use super::yaml::{Body, Entry, Node};

/// A string field; `None` (and a problem) when it is not a string. Null counts as absent.
pub(super) fn text_value(node: &Node, what: &str, problems: &mut Vec<String>) -> Option<String> {
    match &node.body {
        Body::Scalar(Value::String(text)) => Some(text.clone()),
        Body::Scalar(Value::Null) => None,
        _ => {
            problems.push(format!("{what} must be a string (line {})", node.line));
            None
        }
    }
}

/// The entries of an item's definition, or a problem when it is not a mapping.
pub(super) fn definition<'a>(entry: &'a Entry, what: &str, problems: &mut Vec<String>) -> Option<&'a [Entry]> {
    match &entry.value.body {
        Body::Mapping(entries) => Some(entries),
        _ => {
            problems.push(format!("{what} \"{}\": the definition must be a mapping (line {})", entry.key, entry.line));
            None
        }
    }
}
