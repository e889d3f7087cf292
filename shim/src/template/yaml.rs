//! YAML text to a position-marked tree as Heat's loader reads it (PyYAML's `CSafeLoader`, that
//! is libyaml's scanner and PyYAML's constructor), with the limits that keep a hostile template
//! cheap. It owns scalar typing (`scalars`: PyYAML's YAML 1.1 rules), the mapping rules
//! (`mapping`: a duplicate key's last value wins, in its first place, and is reported as a
//! `DuplicateKey`; `<<` merge keys), non-string-key rejection, libyaml's leniency on quoted
//! scalars' indentation (`quoted`), the depth limit, and the charging of what anchors and aliases
//! copy against the document's byte budget (`anneal_protocol::alias_budget`). It knows nothing
//! about HOT; `hot.rs` reads the tree.

mod mapping;
mod quoted;
mod scalars;

use std::collections::HashMap;
use std::fmt;

use anneal_protocol::alias_budget::{self, AliasBudget, AliasBudgetExceeded, NODE_BYTES};
use serde_json::{Map, Value};
use yaml_rust2::parser::{Event, Parser, Tag};
use yaml_rust2::scanner::TScalarStyle;

use mapping::{Duplicates, MappingFrame};
use quoted::{Failure, Shifts};
pub use scalars::resolve_plain;
use scalars::{CORE_TAG, json_number, resolve_owned, scalar, tag_text};

/// Collections nested inside each other, aliases included.
pub const MAX_DEPTH: usize = 64;

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
    #[error("line {line} column {column}: mapping keys must be strings (quote the key)")]
    NonStringKey { line: usize, column: usize },
    /// A `<<` merge key whose value is not a mapping or a list of mappings (PyYAML refuses it).
    #[error("line {line} column {column}: {message}")]
    Merge { line: usize, column: usize, message: String },
    #[error("line {line} column {column}: unsupported YAML tag {tag}")]
    UnsupportedTag { tag: String, line: usize, column: usize },
    #[error("line {line} column {column}: the alias refers to an anchor that encloses it")]
    RecursiveAlias { line: usize, column: usize },
    #[error("line {line} column {column}: only one YAML document is allowed")]
    MultipleDocuments { line: usize, column: usize },
    #[error("the template is empty")]
    Empty,
}

/// A key written again in the same mapping. Heat reads the document all the same (PyYAML keeps
/// the last value, in the place of the first key), so this is a warning, not an error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DuplicateKey {
    pub key: String,
    /// Where the key is written again (1-based).
    pub line: usize,
    pub column: usize,
    /// Where it was written before.
    pub earlier_line: usize,
}

/// Keys longer than this are shortened in a warning (a hostile key may be a megabyte).
const SHOWN_KEY_CHARS: usize = 64;

impl fmt::Display for DuplicateKey {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        let shown: String = self.key.chars().take(SHOWN_KEY_CHARS).collect();
        let ellipsis = if shown.len() < self.key.len() { "..." } else { "" };
        write!(
            formatter,
            "line {} column {}: duplicate key \"{shown}{ellipsis}\" (also at line {}): its last value is used, as \
             in Heat",
            self.line, self.column, self.earlier_line
        )
    }
}

/// A document and what it was accepted with.
#[derive(Debug, Clone, PartialEq)]
pub struct Document {
    pub root: Node,
    /// The keys written twice in a mapping, at most 100 of them, in the order read.
    pub duplicates: Vec<DuplicateKey>,
    /// The duplicate keys past those listed.
    pub unlisted_duplicates: usize,
}

impl Document {
    /// The warnings as a user reads them, one line each.
    pub fn warnings(&self) -> Vec<String> {
        let mut warnings: Vec<String> = self.duplicates.iter().map(DuplicateKey::to_string).collect();
        if self.unlisted_duplicates > 0 {
            warnings.push(format!("... and {} more duplicate keys", self.unlisted_duplicates));
        }
        warnings
    }
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
    Mapping(MappingFrame),
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
    duplicates: Duplicates,
}

/// Parses one YAML document (JSON is YAML) into a marked tree. A JSON text (one starting with
/// `{`) keeps JSON numbers, as heat.common.template_format.parse reads it with `json.loads`.
/// Its anchors and aliases copy within the text's own budget (`AliasBudget::for_text`).
pub fn parse(text: &str) -> Result<Node, YamlError> {
    parse_with_warnings(text).map(|document| document.root)
}

/// `parse`, with what the document was accepted with (`Document::duplicates`).
pub fn parse_with_warnings(text: &str) -> Result<Document, YamlError> {
    read_document(text, true, &mut AliasBudget::for_text(text.len()))
}

/// `parse` with PyYAML's rules even for a JSON text, as heatclient and Heat read environments
/// (heat.common.environment_format.parse has no JSON branch).
pub fn parse_yaml_only(text: &str) -> Result<Node, YamlError> {
    parse_yaml_only_within(text, &mut AliasBudget::for_text(text.len()))
}

/// `parse_yaml_only` charging `budget`, which several texts read for one result share (a
/// request's environment files, one of which may be named many times).
pub fn parse_yaml_only_within(text: &str, budget: &mut AliasBudget) -> Result<Node, YamlError> {
    read_document(text, false, budget).map(|document| document.root)
}

/// Reads the document, again with a rewritten text where `quoted` gets past yaml-rust2's
/// strictness on quoted scalars: each reading charges a copy of `budget` as it was, and the one
/// that succeeds is what `budget` becomes.
fn read_document(text: &str, json_numbers: bool, budget: &mut AliasBudget) -> Result<Document, YamlError> {
    // PyYAML (which Heat uses) skips a byte-order mark at the start of the stream.
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let json = json_numbers && text.trim_start().starts_with('{');
    let before = budget.clone();
    let (document, after) = quoted::read(text, |current, shifts| {
        let mut budget = before.clone();
        build(current, json, &mut budget, shifts).map(|document| (document, budget))
    })?;
    *budget = after;
    Ok(document)
}

/// One reading of `text`; positions are given where `shifts` says they were before rewriting.
fn build(text: &str, json: bool, budget: &mut AliasBudget, shifts: &Shifts) -> Result<Document, Failure> {
    let mut parser = Parser::new_from_str(text);
    let mut builder = Builder {
        stack: Vec::new(),
        anchors: HashMap::new(),
        budget,
        root: None,
        documents: 0,
        json,
        duplicates: Duplicates::default(),
    };
    loop {
        let (event, marker) = parser.next_token().map_err(Failure::Scan)?;
        let (line, column) = shifts.position(&marker);
        match event {
            Event::StreamEnd => break,
            Event::DocumentStart => {
                builder.documents += 1;
                if builder.documents > 1 {
                    return Err(Failure::Yaml(YamlError::MultipleDocuments { line, column }));
                }
            }
            other => builder.event(other, line, column).map_err(Failure::Yaml)?,
        }
    }
    let root = builder.root.ok_or(Failure::Yaml(YamlError::Empty))?;
    let Duplicates { listed, unlisted } = builder.duplicates;
    Ok(Document { root, duplicates: listed, unlisted_duplicates: unlisted })
}

impl Builder<'_> {
    fn event(&mut self, event: Event, line: usize, column: usize) -> Result<(), YamlError> {
        match event {
            Event::Scalar(text, style, anchor, tag) => {
                let bytes = alias_budget::scalar_bytes(text.len());
                // PyYAML's resolver makes a plain `<<` the merge tag; as a key it merges.
                let merge = style == TScalarStyle::Plain && tag.is_none() && text == "<<";
                let value = match (self.json, style, &tag) {
                    (true, TScalarStyle::Plain, None) => json_number(&text).unwrap_or_else(|| resolve_owned(text)),
                    _ => scalar(text, style, tag.as_ref(), line, column)?,
                };
                self.complete(Node { line, column, body: Body::Scalar(value) }, anchor, bytes, merge)
            }
            Event::SequenceStart(anchor, tag) => self.open(FrameKind::Sequence(Vec::new()), anchor, tag, line, column),
            Event::MappingStart(anchor, tag) => {
                self.open(FrameKind::Mapping(MappingFrame::new()), anchor, tag, line, column)
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
            FrameKind::Mapping(mapping) => Body::Mapping(mapping.finish()),
        };
        self.complete(Node { line: frame.line, column: frame.column, body }, frame.anchor, frame.bytes, false)
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
        self.complete(node, 0, bytes, false)
    }

    /// Attaches a finished node that costs `bytes` to its parent (or makes it the document);
    /// `merge` when it is a plain `<<`, which merges when it is a key.
    fn complete(&mut self, node: Node, anchor: usize, bytes: usize, merge: bool) -> Result<(), YamlError> {
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
            FrameKind::Mapping(mapping) => mapping.take(node, merge, &mut self.duplicates)?,
        }
        Ok(())
    }
}
