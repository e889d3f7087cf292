//! Mustache as os-apply-config renders it: pystache 0.6 with os-apply-config's `JsonRenderer`
//! (`missing_tags='ignore'`, no escaping). A string renders as itself, `null` and a missing name
//! as nothing, any other value as Python's `json.dumps` of it (so `{{map}}` is the map's JSON, in
//! document order); sections and inverted sections test Python truthiness (`0`, `""`, `[]`, `{}`
//! are false), iterate a list and push any other value; names resolve pystache's way (the first
//! part up the context stack, the rest in that value only). Standalone-line rules, comments and
//! delimiter changes follow pystache's parser, including its leniency: an unclosed section
//! renders what pystache renders. No published crate keeps these semantics (see
//! docs/builtin-hooks.md), hence this small engine.

use anneal_protocol::pyjson;
use serde_json::Value;

/// Why pystache would refuse a template (os-apply-config: "could not render moustache template").
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub(crate) enum RenderError {
    #[error("section end tag mismatch: found {{{{/{found}}}}}, expected {expected}")]
    Mismatch { found: String, expected: String },
    #[error("invalid delimiters {0:?}")]
    Delimiters(String),
}

#[derive(Debug, Clone, PartialEq)]
enum Node {
    Text(String),
    Value(String),
    Section { key: String, nodes: Vec<Node> },
    Inverted { key: String, nodes: Vec<Node> },
}

/// Renders `template` against `config` (the top of the context stack).
pub(crate) fn render(template: &str, config: &Value) -> Result<String, RenderError> {
    let nodes = parse(template)?;
    let mut out = String::with_capacity(template.len());
    render_nodes(&nodes, &mut vec![config], &mut out);
    Ok(out)
}

fn render_nodes<'v>(nodes: &[Node], stack: &mut Vec<&'v Value>, out: &mut String) {
    for node in nodes {
        match node {
            Node::Text(text) => out.push_str(text),
            Node::Value(key) => match resolve(stack, key) {
                None | Some(Value::Null) => {}
                Some(Value::String(text)) => out.push_str(text),
                Some(other) => out.push_str(&pyjson::dumps(other, true)),
            },
            Node::Section { key, nodes } => match resolve(stack, key) {
                Some(value) if pyjson::is_truthy(value) => {
                    let items: Vec<&'v Value> = match value {
                        Value::Array(items) => items.iter().collect(),
                        other => vec![other],
                    };
                    for item in items {
                        stack.push(item);
                        render_nodes(nodes, stack, out);
                        stack.pop();
                    }
                }
                _ => {}
            },
            Node::Inverted { key, nodes } => {
                if !resolve(stack, key).is_some_and(pyjson::is_truthy) {
                    render_nodes(nodes, stack, out);
                }
            }
        }
    }
}

/// pystache's `ContextStack.get`: `.` is the top; otherwise the first part is looked up in each
/// map from the top down, every further part in the value found only.
fn resolve<'a>(stack: &[&'a Value], name: &str) -> Option<&'a Value> {
    if name == "." {
        return stack.last().copied();
    }
    let mut parts = name.split('.');
    let first = parts.next()?;
    let mut value = stack.iter().rev().find_map(|item| item.as_object().and_then(|map| map.get(first)))?;
    for part in parts {
        value = value.as_object()?.get(part)?;
    }
    Some(value)
}

/// One tag found by pystache's tag regular expression.
#[derive(Debug)]
struct Tag {
    /// Where the match starts: the spaces and tabs before the opening delimiter.
    start: usize,
    /// Where the opening delimiter starts.
    open: usize,
    end: usize,
    kind: char,
    key: String,
}

/// pystache's `_Parser.parse`, returning the tree it renders.
fn parse(template: &str) -> Result<Vec<Node>, RenderError> {
    let mut delimiters = ("{{".to_string(), "}}".to_string());
    let mut cursor = 0;
    let mut current: Vec<Node> = Vec::new();
    let mut open: Vec<(char, String, Vec<Node>)> = Vec::new();
    while let Some(tag) = find_tag(template, cursor, &delimiters) {
        let (text_end, end) = standalone_bounds(template, &tag);
        if cursor != text_end {
            current.push(Node::Text(template[cursor..text_end].to_string()));
        }
        cursor = end;
        match tag.kind {
            '#' | '^' => open.push((tag.kind, tag.key, std::mem::take(&mut current))),
            '/' => {
                let Some((kind, key, outer)) = open.pop().filter(|(_, key, _)| *key == tag.key) else {
                    let expected =
                        open.last().map_or(format!("{{{{#{}}}}}", tag.key), |(k, key, _)| format!("{{{{{k}{key}}}}}"));
                    return Err(RenderError::Mismatch { found: tag.key, expected });
                };
                let nodes = std::mem::replace(&mut current, outer);
                current.push(if kind == '#' { Node::Section { key, nodes } } else { Node::Inverted { key, nodes } });
            }
            '=' => delimiters = new_delimiters(&tag.key)?,
            '!' | '>' => {}
            _ => current.push(Node::Value(tag.key)),
        }
    }
    if cursor != template.len() {
        current.push(Node::Text(template[cursor..].to_string()));
    }
    // pystache returns the innermost unclosed section's nodes as the whole template.
    Ok(current)
}

/// Where the text before `tag` ends and where parsing goes on: a standalone non-interpolating tag
/// takes its line's leading blanks and its line ending with it; any other keeps its blanks.
fn standalone_bounds(template: &str, tag: &Tag) -> (usize, usize) {
    let bytes = template.as_bytes();
    let begins_line = tag.start == 0 || matches!(bytes[tag.start - 1], b'\r' | b'\n');
    let ends_line = tag.end == bytes.len() || matches!(bytes[tag.end], b'\r' | b'\n');
    if begins_line && ends_line && !matches!(tag.kind, ' ' | '&') {
        let mut end = tag.end;
        if bytes.get(end) == Some(&b'\r') {
            end += 1;
        }
        if bytes.get(end) == Some(&b'\n') {
            end += 1;
        }
        return (tag.start, end);
    }
    (tag.open, tag.end)
}

/// `{{=<% %>=}}`: the whitespace-separated words; pystache uses the first two.
fn new_delimiters(spec: &str) -> Result<(String, String), RenderError> {
    let mut words = spec.split_whitespace();
    match (words.next(), words.next()) {
        (Some(open), Some(close)) => Ok((open.to_string(), close.to_string())),
        _ => Err(RenderError::Delimiters(spec.to_string())),
    }
}

/// The first tag at or after `from` (pystache's `_template_re.search`).
fn find_tag(template: &str, from: usize, (open, close): &(String, String)) -> Option<Tag> {
    let mut search = from;
    while let Some(found) = template[search..].find(open.as_str()) {
        let at = search + found;
        if let Some((kind, key, end)) = match_body(template, at + open.len(), close) {
            let blanks = template[from..at].bytes().rev().take_while(|b| matches!(b, b' ' | b'\t')).count();
            return Some(Tag { start: at - blanks, open: at, end, kind, key });
        }
        search = at + template[at..].chars().next().map_or(1, char::len_utf8);
    }
    None
}

/// After the opening delimiter: `= delims =`, `{ name }`, or `[!>&/#^]? key`, then the closing
/// delimiter; the kind (`' '` for a plain variable), the key and where the tag ends.
fn match_body(template: &str, after_open: usize, close: &str) -> Option<(char, String, usize)> {
    let start = skip_whitespace(template, after_open);
    let rest = &template[start..];
    if let Some(found) = rest.strip_prefix('=').and_then(|body| enclosed(body, '=', close)) {
        return Some(('=', found.0, start + 1 + found.1));
    }
    if let Some(found) = rest.strip_prefix('{').and_then(|body| enclosed(body, '}', close)) {
        return Some(('&', found.0, start + 1 + found.1));
    }
    let first = rest.chars().next()?;
    if "!>&/#^".contains(first) {
        let key_start = skip_whitespace(template, start + 1);
        if let Some((key, end)) = plain_key(template, key_start, close) {
            return Some((first, key, end));
        }
    }
    plain_key(template, start, close).map(|(key, end)| (' ', key, end))
}

/// A key of at least one character up to the first closing delimiter, trailing blanks trimmed.
fn plain_key(template: &str, key_start: usize, close: &str) -> Option<(String, usize)> {
    let first = template[key_start..].chars().next()?;
    let search = key_start + first.len_utf8();
    let found = template[search..].find(close)?;
    let key_end = search + found;
    let key = template[key_start..key_end].trim_end();
    let key = if key.is_empty() { &template[key_start..key_end] } else { key };
    Some((key.to_string(), key_end + close.len()))
}

/// `\s* (.+?) \s* <last> \s* <close>` in `body`: the trimmed inside (one line, not empty) and
/// the length consumed up to the end of the closing delimiter.
fn enclosed(body: &str, last: char, close: &str) -> Option<(String, usize)> {
    let mut search = 0;
    while let Some(found) = body[search..].find(close) {
        let at = search + found;
        let before = body[..at].trim_end();
        if let Some(inside) = before.strip_suffix(last) {
            let inside = inside.trim();
            if !inside.is_empty() && !inside.contains('\n') {
                return Some((inside.to_string(), at + close.len()));
            }
        }
        search = at + close.chars().next().map_or(1, char::len_utf8);
    }
    None
}

fn skip_whitespace(template: &str, from: usize) -> usize {
    from + template[from..].len() - template[from..].trim_start().len()
}
