//! YAML text to a position-marked tree, with the limits that keep a hostile template cheap: it
//! owns scalar typing (PyYAML's YAML 1.1 rules, because Heat parses templates with PyYAML),
//! duplicate-key and non-string-key rejection, the depth limit, and the charging of what anchors
//! and aliases copy against the document's byte budget (`anneal_protocol::alias_budget`). It
//! knows nothing about HOT; `hot.rs` reads the tree.

use std::collections::{HashMap, HashSet};
use std::sync::LazyLock;

use anneal_protocol::alias_budget::{self, AliasBudget, AliasBudgetExceeded, NODE_BYTES};
use regex::Regex;
use serde_json::{Map, Number, Value};
use yaml_rust2::parser::{Event, Parser, Tag};
use yaml_rust2::scanner::{Marker, ScanError, TScalarStyle};

/// Collections nested inside each other, aliases included.
pub const MAX_DEPTH: usize = 64;

/// The YAML core-schema tag prefix (`!!`).
const CORE_TAG: &str = "tag:yaml.org,2002:";

/// Why a text is not an acceptable YAML document. Line and column are 1-based.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum YamlError {
    #[error("YAML syntax error at line {line} column {column}: {message}")]
    Syntax { line: usize, column: usize, message: String },
    #[error("line {line} column {column}: nesting deeper than {limit} levels")]
    TooDeep { line: usize, column: usize, limit: usize },
    /// What anchors and aliases copy is over the budget (`AliasBudget`); what is written out in
    /// the text is not charged: the text size limit bounds it.
    #[error("line {line} column {column}: {}", AliasBudgetExceeded { limit: *limit })]
    AliasesTooLarge { line: usize, column: usize, limit: usize },
    #[error("line {line} column {column}: duplicate key \"{key}\"")]
    DuplicateKey { key: String, line: usize, column: usize },
    #[error("line {line} column {column}: mapping keys must be strings (quote the key)")]
    NonStringKey { line: usize, column: usize },
    #[error("line {line} column {column}: unsupported YAML tag {tag}")]
    UnsupportedTag { tag: String, line: usize, column: usize },
    #[error("line {line} column {column}: the alias refers to an anchor that encloses it")]
    RecursiveAlias { line: usize, column: usize },
    #[error("line {line} column {column}: only one YAML document is allowed")]
    MultipleDocuments { line: usize, column: usize },
    #[error("the template is empty")]
    Empty,
}

/// A parsed node and where it starts.
#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    pub line: usize,
    pub column: usize,
    pub body: Body,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Body {
    Scalar(Value),
    Sequence(Vec<Node>),
    Mapping(Vec<Entry>),
}

/// One key of a mapping, with the key's own position (what error messages point at).
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    pub key: String,
    pub line: usize,
    pub column: usize,
    pub value: Node,
}

impl Node {
    /// The node as JSON, dropping positions.
    pub fn to_value(&self) -> Value {
        match &self.body {
            Body::Scalar(value) => value.clone(),
            Body::Sequence(items) => Value::Array(items.iter().map(Node::to_value).collect()),
            Body::Mapping(entries) => {
                let map: Map<String, Value> =
                    entries.iter().map(|entry| (entry.key.clone(), entry.value.to_value())).collect();
                Value::Object(map)
            }
        }
    }

    /// Collection nesting depth (a scalar is 0). Bounded by `MAX_DEPTH`, so recursion is safe.
    fn depth(&self) -> usize {
        match &self.body {
            Body::Scalar(_) => 0,
            Body::Sequence(items) => 1 + items.iter().map(Node::depth).max().unwrap_or(0),
            Body::Mapping(entries) => 1 + entries.iter().map(|entry| entry.value.depth()).max().unwrap_or(0),
        }
    }
}

/// A collection being filled.
struct Frame {
    line: usize,
    column: usize,
    anchor: usize,
    kind: FrameKind,
    /// What the collection costs so far (`alias_budget`): what a copy of it would add.
    bytes: usize,
}

enum FrameKind {
    Sequence(Vec<Node>),
    /// `index` holds the keys once the mapping is large, so duplicate detection stays cheap
    /// for a template with thousands of resources without a set per small mapping.
    Mapping {
        entries: Vec<Entry>,
        index: Option<HashSet<String>>,
        key: Option<(String, usize, usize)>,
    },
}

/// An anchored node kept for aliases, with what a copy of it costs.
struct Anchored {
    node: Node,
    bytes: usize,
    depth: usize,
}

struct Builder<'a> {
    stack: Vec<Frame>,
    anchors: HashMap<usize, Anchored>,
    /// What anchors and aliases may still copy.
    budget: &'a mut AliasBudget,
    root: Option<Node>,
    documents: usize,
    /// A JSON text: Heat's template_format.parse reads it with `json.loads`, so its numbers
    /// are JSON numbers (`1.5e2`), not PyYAML's.
    json: bool,
}

/// Parses one YAML document (JSON is YAML) into a marked tree. A JSON text (one starting with
/// `{`) keeps JSON numbers, as heat.common.template_format.parse reads it with `json.loads`.
/// Its anchors and aliases copy within the text's own budget (`AliasBudget::for_text`).
pub fn parse(text: &str) -> Result<Node, YamlError> {
    parse_document(text, true, &mut AliasBudget::for_text(text.len()))
}

/// `parse` with PyYAML's rules even for a JSON text, as heatclient and Heat read environments
/// (heat.common.environment_format.parse has no JSON branch).
pub fn parse_yaml_only(text: &str) -> Result<Node, YamlError> {
    parse_yaml_only_within(text, &mut AliasBudget::for_text(text.len()))
}

/// `parse_yaml_only` charging `budget`, which several texts read for one result share (a
/// request's environment files, one of which may be named many times).
pub fn parse_yaml_only_within(text: &str, budget: &mut AliasBudget) -> Result<Node, YamlError> {
    parse_document(text, false, budget)
}

fn parse_document(text: &str, json_numbers: bool, budget: &mut AliasBudget) -> Result<Node, YamlError> {
    // PyYAML (which Heat uses) skips a byte-order mark at the start of the stream.
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut parser = Parser::new_from_str(text);
    let json = json_numbers && text.trim_start().starts_with('{');
    let mut builder = Builder { stack: Vec::new(), anchors: HashMap::new(), budget, root: None, documents: 0, json };
    loop {
        let (event, marker) = parser.next_token().map_err(syntax_error)?;
        let (line, column) = position(&marker);
        match event {
            Event::StreamEnd => break,
            Event::DocumentStart => {
                builder.documents += 1;
                if builder.documents > 1 {
                    return Err(YamlError::MultipleDocuments { line, column });
                }
            }
            other => builder.event(other, line, column)?,
        }
    }
    builder.root.ok_or(YamlError::Empty)
}

impl Builder<'_> {
    fn event(&mut self, event: Event, line: usize, column: usize) -> Result<(), YamlError> {
        match event {
            Event::Scalar(text, style, anchor, tag) => {
                let bytes = alias_budget::scalar_bytes(text.len());
                let value = match (self.json, style, &tag) {
                    (true, TScalarStyle::Plain, None) => json_number(&text).unwrap_or_else(|| resolve_owned(text)),
                    _ => scalar(text, style, tag.as_ref(), line, column)?,
                };
                self.complete(Node { line, column, body: Body::Scalar(value) }, anchor, bytes)
            }
            Event::SequenceStart(anchor, tag) => self.open(FrameKind::Sequence(Vec::new()), anchor, tag, line, column),
            Event::MappingStart(anchor, tag) => {
                self.open(FrameKind::Mapping { entries: Vec::new(), index: None, key: None }, anchor, tag, line, column)
            }
            Event::SequenceEnd | Event::MappingEnd => self.close(),
            Event::Alias(anchor) => self.alias(anchor, line, column),
            _ => Ok(()),
        }
    }

    /// Takes what a copy adds from the budget; called before the copy is made, so a bomb fails
    /// without being built.
    fn charge(&mut self, bytes: usize, line: usize, column: usize) -> Result<(), YamlError> {
        self.budget.charge(bytes).map_err(|exceeded| YamlError::AliasesTooLarge { line, column, limit: exceeded.limit })
    }

    fn open(
        &mut self,
        kind: FrameKind,
        anchor: usize,
        tag: Option<Tag>,
        line: usize,
        column: usize,
    ) -> Result<(), YamlError> {
        if let Some(tag) = tag {
            let expected = if matches!(kind, FrameKind::Sequence(_)) { "seq" } else { "map" };
            if tag.handle != CORE_TAG || tag.suffix != expected {
                return Err(YamlError::UnsupportedTag { tag: tag_text(&tag), line, column });
            }
        }
        if self.stack.len() >= MAX_DEPTH {
            return Err(YamlError::TooDeep { line, column, limit: MAX_DEPTH });
        }
        self.stack.push(Frame { line, column, anchor, kind, bytes: NODE_BYTES });
        Ok(())
    }

    fn close(&mut self) -> Result<(), YamlError> {
        // The parser balances start and end events, so an empty stack here cannot happen; treat
        // it as a no-op rather than panic.
        let Some(frame) = self.stack.pop() else { return Ok(()) };
        let body = match frame.kind {
            FrameKind::Sequence(items) => Body::Sequence(items),
            FrameKind::Mapping { entries, .. } => Body::Mapping(entries),
        };
        self.complete(Node { line: frame.line, column: frame.column, body }, frame.anchor, frame.bytes)
    }

    fn alias(&mut self, anchor: usize, line: usize, column: usize) -> Result<(), YamlError> {
        // The parser rejects unknown anchors itself; an anchor it knows but we have not
        // completed is one that is still open around this alias.
        let Some(anchored) = self.anchors.get(&anchor) else {
            return Err(YamlError::RecursiveAlias { line, column });
        };
        if self.stack.len() + anchored.depth > MAX_DEPTH {
            return Err(YamlError::TooDeep { line, column, limit: MAX_DEPTH });
        }
        let bytes = anchored.bytes;
        self.charge(bytes, line, column)?;
        let Some(anchored) = self.anchors.get(&anchor) else {
            return Err(YamlError::RecursiveAlias { line, column });
        };
        let mut node = anchored.node.clone();
        node.line = line;
        node.column = column;
        self.complete(node, 0, bytes)
    }

    /// Attaches a finished node that costs `bytes` to its parent (or makes it the document).
    fn complete(&mut self, node: Node, anchor: usize, bytes: usize) -> Result<(), YamlError> {
        if anchor != 0 {
            // The copy kept for aliases is charged too: anchors nested in anchors would otherwise
            // copy the text once per level.
            self.charge(bytes, node.line, node.column)?;
            let anchored = Anchored { bytes, depth: node.depth(), node: node.clone() };
            self.anchors.insert(anchor, anchored);
        }
        let Some(frame) = self.stack.last_mut() else {
            self.root = Some(node);
            return Ok(());
        };
        frame.bytes = frame.bytes.saturating_add(bytes);
        match &mut frame.kind {
            FrameKind::Sequence(items) => items.push(node),
            FrameKind::Mapping { entries, index, key } => match key.take() {
                Some((key, line, column)) => entries.push(Entry { key, line, column, value: node }),
                None => {
                    let Body::Scalar(Value::String(text)) = node.body else {
                        return Err(YamlError::NonStringKey { line: node.line, column: node.column });
                    };
                    if is_duplicate(entries, index, &text) {
                        return Err(YamlError::DuplicateKey { key: text, line: node.line, column: node.column });
                    }
                    *key = Some((text, node.line, node.column));
                }
            },
        }
        Ok(())
    }
}

/// Mappings up to this size are searched linearly for duplicate keys.
const SMALL_MAPPING: usize = 16;

/// Whether `key` is already in the mapping; records it in the index when there is one.
fn is_duplicate(entries: &[Entry], index: &mut Option<HashSet<String>>, key: &str) -> bool {
    if let Some(index) = index {
        return !index.insert(key.to_owned());
    }
    let duplicate = entries.iter().any(|entry| entry.key == key);
    if !duplicate && entries.len() >= SMALL_MAPPING {
        let keys = entries.iter().map(|entry| entry.key.clone()).chain(std::iter::once(key.to_owned()));
        *index = Some(keys.collect());
    }
    duplicate
}

fn position(marker: &Marker) -> (usize, usize) {
    // yaml-rust2 counts lines from 1 and columns from 0.
    (marker.line(), marker.col() + 1)
}

fn syntax_error(error: ScanError) -> YamlError {
    let (line, column) = position(error.marker());
    YamlError::Syntax { line, column, message: error.info().to_owned() }
}

fn tag_text(tag: &Tag) -> String {
    if tag.handle == CORE_TAG { format!("!!{}", tag.suffix) } else { format!("{}{}", tag.handle, tag.suffix) }
}

/// A JSON number literal (a plain scalar of a JSON text).
fn json_number(text: &str) -> Option<Value> {
    let first = text.bytes().next()?;
    if !(first.is_ascii_digit() || first == b'-') {
        return None;
    }
    // Validate as JSON, then store as serde_json would without arbitrary precision.
    serde_json::from_str::<Number>(text).ok()?;
    if !text.contains(['.', 'e', 'E']) {
        if let Ok(integer) = text.parse::<i64>() {
            return Some(Value::Number(integer.into()));
        }
        if let Ok(integer) = text.parse::<u64>() {
            return Some(Value::Number(integer.into()));
        }
    }
    text.parse::<f64>().ok().and_then(Number::from_f64).map(Value::Number)
}

/// Types one scalar: quoted and block scalars are strings; plain ones follow PyYAML's implicit
/// resolvers; core tags force a type.
fn scalar(
    text: String,
    style: TScalarStyle,
    tag: Option<&Tag>,
    line: usize,
    column: usize,
) -> Result<Value, YamlError> {
    let Some(tag) = tag else {
        return Ok(if style == TScalarStyle::Plain { resolve_owned(text) } else { Value::String(text) });
    };
    // "!" alone is YAML's non-specific tag: the value stays a string.
    if tag.handle.is_empty() && tag.suffix == "!" {
        return Ok(Value::String(text));
    }
    let unsupported = || YamlError::UnsupportedTag { tag: tag_text(tag), line, column };
    if tag.handle != CORE_TAG {
        return Err(unsupported());
    }
    let resolved = resolve_plain(&text);
    let accepted = match tag.suffix.as_str() {
        "str" => return Ok(Value::String(text)),
        "int" => resolved.as_i64().is_some() || resolved.as_u64().is_some(),
        "float" => resolved.is_number(),
        "bool" => resolved.is_boolean(),
        "null" => resolved.is_null(),
        _ => false,
    };
    if accepted { Ok(resolved) } else { Err(unsupported()) }
}

/// PyYAML's YAML 1.1 implicit typing of a plain scalar, minus sexagesimal numbers and with
/// timestamps kept as strings (as Heat's loader does). Non-finite floats stay strings because
/// JSON cannot hold them.
pub fn resolve_plain(text: &str) -> Value {
    resolve_owned(text.to_owned())
}

fn resolve_owned(text: String) -> Value {
    match text.as_str() {
        "" | "~" | "null" | "Null" | "NULL" => return Value::Null,
        "true" | "True" | "TRUE" | "yes" | "Yes" | "YES" | "on" | "On" | "ON" => return Value::Bool(true),
        "false" | "False" | "FALSE" | "no" | "No" | "NO" | "off" | "Off" | "OFF" => return Value::Bool(false),
        _ => {}
    }
    // Most scalars are words; only these can start a number.
    let numeric_start = text.bytes().next().is_some_and(|first| first.is_ascii_digit() || b"+-.".contains(&first));
    if !numeric_start {
        return Value::String(text);
    }
    if text.contains(':') {
        return resolve_sexagesimal(&text).unwrap_or(Value::String(text));
    }
    resolve_integer(&text).or_else(|| resolve_float(&text)).unwrap_or(Value::String(text))
}

/// YAML 1.1's base 60 (PyYAML's resolver: ints `[-+]?[1-9][0-9_]*(:[0-5]?[0-9])+`, floats
/// `[-+]?[0-9][0-9_]*(:[0-5]?[0-9])+\.[0-9_]*`), so `1:30` is 90 as Heat reads it.
fn resolve_sexagesimal(text: &str) -> Option<Value> {
    let (negative, unsigned) = match text.as_bytes().first() {
        Some(b'-') => (true, &text[1..]),
        Some(b'+') => (false, &text[1..]),
        _ => (false, text),
    };
    let (digits, fraction) = match unsigned.split_once('.') {
        Some((digits, fraction)) => (digits, Some(fraction)),
        None => (unsigned, None),
    };
    let mut parts = digits.split(':');
    let first = parts.next()?;
    let leading_ok = match fraction {
        None => first.starts_with(|ch: char| ('1'..='9').contains(&ch)),
        Some(_) => first.starts_with(|ch: char| ch.is_ascii_digit()),
    };
    if !leading_ok || !first.chars().all(|ch| ch.is_ascii_digit() || ch == '_') {
        return None;
    }
    let mut value: f64 = first.replace('_', "").parse().ok()?;
    for part in parts {
        let sixty = (1..=2).contains(&part.len())
            && part.chars().all(|ch| ch.is_ascii_digit())
            && (part.len() == 1 || part.as_bytes()[0] <= b'5');
        if !sixty {
            return None;
        }
        value = value * 60.0 + part.parse::<f64>().ok()?;
    }
    let sign = if negative { -1.0 } else { 1.0 };
    match fraction {
        None if value < 9.0e15 => Some(Value::Number(((value as i64) * sign as i64).into())),
        None => None,
        Some(fraction) if fraction.chars().all(|ch| ch.is_ascii_digit() || ch == '_') => {
            let fraction: f64 = format!("0.{}", fraction.replace('_', "")).parse().ok()?;
            Number::from_f64(sign * (value + fraction)).map(Value::Number)
        }
        Some(_) => None,
    }
}

fn resolve_integer(text: &str) -> Option<Value> {
    let (negative, unsigned) = match text.as_bytes().first() {
        Some(b'-') => (true, &text[1..]),
        Some(b'+') => (false, &text[1..]),
        _ => (false, text),
    };
    let (radix, digits) = if let Some(rest) = unsigned.strip_prefix("0b") {
        (2, rest)
    } else if let Some(rest) = unsigned.strip_prefix("0x") {
        (16, rest)
    } else if unsigned.len() > 1 && unsigned.starts_with('0') {
        (8, &unsigned[1..])
    } else {
        (10, unsigned)
    };
    // PyYAML allows `_` as a digit separator but not as the first character of the digits.
    if digits.is_empty() || digits.starts_with('_') {
        return None;
    }
    let clean: String = digits.chars().filter(|ch| *ch != '_').collect();
    if clean.is_empty() || !clean.chars().all(|ch| ch.is_digit(radix)) {
        return None;
    }
    let magnitude = u128::from_str_radix(&clean, radix).ok()?;
    if negative {
        let value = i64::try_from(magnitude).ok().and_then(i64::checked_neg).or_else(|| {
            // i64::MIN has no positive counterpart in i64.
            (magnitude == 1u128 << 63).then_some(i64::MIN)
        })?;
        Some(Value::Number(value.into()))
    } else if let Ok(value) = u64::try_from(magnitude) {
        Some(Value::Number(value.into()))
    } else {
        Number::from_f64(magnitude as f64).map(Value::Number)
    }
}

/// PyYAML's float resolver without the base-60, infinity and NaN forms: a point is required,
/// a sign only before a leading digit (`-.5` is a string), an exponent only with its own sign
/// (`1.0e3` is a string, `1.0e+3` a number).
fn resolve_float(text: &str) -> Option<Value> {
    static FLOAT: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r"^(?:[-+]?[0-9][0-9_]*\.[0-9_]*(?:[eE][-+][0-9]+)?|\.[0-9][0-9_]*(?:[eE][-+][0-9]+)?)$")
            .expect("a valid pattern")
    });
    if !FLOAT.is_match(text) {
        return None;
    }
    let clean: String = text.chars().filter(|ch| *ch != '_').collect();
    let float: f64 = clean.parse().ok()?;
    Number::from_f64(float).map(Value::Number)
}
