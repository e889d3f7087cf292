//! Python's `re` syntax (CPython 3.11's `re/_parser.py`, the `re` Heat 27 runs on) read into a
//! tree, with the flags resolved onto each node: a pattern Python refuses is refused here with
//! Python's message, so a template Heat refuses is refused and one it accepts is read as Heat
//! reads it. `emit` turns the tree into the Rust engines' syntax.

mod escape;
mod flags;
mod group;

use std::collections::HashMap;

pub(super) use escape::{Category, Class, ClassItem};
use flags::{FLAG_CHARS, FlagGroup};
use group::Named;

/// Python's `MAXREPEAT`: a repeat bound at or above it is refused.
const MAX_REPEAT: u64 = u32::MAX as u64;
/// Groups nested deeper than this are refused (Python's own parser gives up near 490 levels
/// with a RecursionError, the backtracking engine's near 64 of its own).
pub(super) const MAX_NESTING: usize = 40;
/// `getwidth`'s "unbounded".
const MAX_WIDTH: u64 = u64::MAX;

#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Repeat {
    Greedy,
    Lazy,
    Possessive,
}

/// One node of a parsed pattern; the flags in force where it was written are on it.
#[derive(Debug, Clone)]
pub(super) enum Node {
    /// A code point (a surrogate, from `\ud800`, matches nothing in a Rust string).
    Literal {
        code: u32,
        ignore_case: bool,
    },
    Class {
        class: Class,
        ignore_case: bool,
    },
    Any {
        dotall: bool,
    },
    /// `^`.
    Start {
        multiline: bool,
    },
    /// `$`.
    End {
        multiline: bool,
    },
    /// `\A`.
    StartText,
    /// `\Z`: the very end (unlike Perl's `\Z`).
    EndText,
    Boundary {
        negated: bool,
        ascii: bool,
    },
    Concat(Vec<Node>),
    Alternation(Vec<Node>),
    Group {
        capture: bool,
        node: Box<Node>,
    },
    Atomic(Box<Node>),
    Repeat {
        node: Box<Node>,
        min: u32,
        max: Option<u32>,
        kind: Repeat,
    },
    Look {
        behind: bool,
        negated: bool,
        node: Box<Node>,
    },
    Backref {
        group: usize,
        ignore_case: bool,
    },
    Conditional {
        group: usize,
        yes: Box<Node>,
        no: Box<Node>,
    },
}

impl Node {
    fn is_anchor(&self) -> bool {
        matches!(self, Node::Start { .. } | Node::End { .. } | Node::StartText | Node::EndText | Node::Boundary { .. })
    }
}

#[derive(Debug, Clone, Copy, Default)]
struct Flags {
    ignore_case: bool,
    multiline: bool,
    dotall: bool,
    verbose: bool,
    ascii: bool,
    unicode: bool,
}

/// Why a pattern is refused.
#[derive(Debug)]
pub(super) enum SyntaxError {
    /// Python refuses it: Python's message (with "at position N" where Python gives one).
    Python(String),
    /// Python takes it, anneal does not (docs/templates.md, "Parameters").
    Anneal(String),
}

type Parsed<T> = Result<T, SyntaxError>;

/// Parses `pattern` as `re.compile(pattern)` does for a `str` pattern.
pub(super) fn parse(pattern: &str) -> Parsed<Node> {
    let mut parser = Parser {
        chars: pattern.chars().collect(),
        pos: 0,
        widths: vec![Some((0, 0))],
        names: HashMap::new(),
        lookbehind_groups: None,
        condition_refs: Vec::new(),
        global: Flags::default(),
        depth: 0,
    };
    let node = parser.alternation(None)?;
    if parser.peek().is_some() {
        return Err(parser.error("unbalanced parenthesis", parser.pos));
    }
    if parser.global.ascii && parser.global.unicode {
        return Err(SyntaxError::Python("ASCII and UNICODE flags are incompatible".into()));
    }
    let groups = parser.widths.len();
    if let Some((group, at)) = parser.condition_refs.iter().find(|(group, _)| *group >= groups) {
        return Err(parser.error(&format!("invalid group reference {group}"), *at));
    }
    Ok(node)
}

struct Parser {
    chars: Vec<char>,
    pos: usize,
    /// Per group (group 0 is the whole match): its width once closed, `None` while open.
    widths: Vec<Option<(u64, u64)>>,
    names: HashMap<String, usize>,
    /// Inside a look-behind: the number of groups when the outermost one opened.
    lookbehind_groups: Option<usize>,
    /// Groups conditionals name by number, checked once all groups are known (as Python does).
    condition_refs: Vec<(usize, usize)>,
    /// The flags of `(?x)` at the start, which apply to the whole pattern.
    global: Flags,
    depth: usize,
}

impl Parser {
    fn peek(&self) -> Option<char> {
        self.chars.get(self.pos).copied()
    }

    fn next(&mut self) -> Option<char> {
        let next = self.peek();
        self.pos += usize::from(next.is_some());
        next
    }

    fn eat(&mut self, wanted: char) -> bool {
        let found = self.peek() == Some(wanted);
        self.pos += usize::from(found);
        found
    }

    fn error(&self, message: &str, at: usize) -> SyntaxError {
        SyntaxError::Python(format!("{message} at position {at}"))
    }

    /// `a|b|c` (`_parse_sub`); `scoped` is `None` at the top level, where the global flags
    /// (possibly set by the first branch) apply.
    fn alternation(&mut self, scoped: Option<Flags>) -> Parsed<Node> {
        let mut branches = Vec::new();
        loop {
            let first = scoped.is_none() && branches.is_empty();
            branches.push(self.sequence(scoped.unwrap_or(self.global), first)?);
            if !self.eat('|') {
                break;
            }
        }
        Ok(if branches.len() == 1 { branches.remove(0) } else { Node::Alternation(branches) })
    }

    /// A sequence up to `|`, `)` or the end (`_parse`).
    fn sequence(&mut self, mut flags: Flags, first: bool) -> Parsed<Node> {
        let mut items: Vec<Node> = Vec::new();
        while let Some(this) = self.peek() {
            if this == '|' || this == ')' {
                break;
            }
            let start = self.pos;
            self.pos += 1;
            if flags.verbose && self.skip_verbose(this) {
                continue;
            }
            match this {
                '\\' => items.push(self.escape(flags, start)?),
                '[' => items.push(self.class(flags, start)?),
                '*' | '+' | '?' | '{' => self.repeat(this, start, &mut items)?,
                '.' => items.push(Node::Any { dotall: flags.dotall }),
                '^' => items.push(Node::Start { multiline: flags.multiline }),
                '$' => items.push(Node::End { multiline: flags.multiline }),
                '(' => {
                    if let Some(global) = self.group(flags, start, first && items.is_empty(), &mut items)? {
                        flags = global;
                    }
                }
                other => items.push(Node::Literal { code: other.into(), ignore_case: flags.ignore_case }),
            }
        }
        Ok(if items.len() == 1 { items.remove(0) } else { Node::Concat(items) })
    }

    /// In verbose mode, whitespace and `#` comments are skipped; says whether `this` was one.
    fn skip_verbose(&mut self, this: char) -> bool {
        if matches!(this, ' ' | '\t' | '\n' | '\r' | '\u{b}' | '\u{c}') {
            return true;
        }
        if this != '#' {
            return false;
        }
        while let Some(next) = self.next() {
            if next == '\n' {
                break;
            }
        }
        true
    }

    /// `*`, `+`, `?`, `{m,n}` (a `{` that is not a valid bound is a literal) on the last item.
    fn repeat(&mut self, this: char, start: usize, items: &mut Vec<Node>) -> Parsed<()> {
        let (min, max) = match this {
            '?' => (0, Some(1)),
            '*' => (0, None),
            '+' => (1, None),
            _ => match self.bounds()? {
                Some(bounds) => bounds,
                None => {
                    items.push(Node::Literal { code: '{'.into(), ignore_case: false });
                    return Ok(());
                }
            },
        };
        let item = match items.pop() {
            Some(item) if !item.is_anchor() => item,
            _ => return Err(self.error("nothing to repeat", start)),
        };
        if matches!(item, Node::Repeat { .. }) {
            return Err(self.error("multiple repeat", start));
        }
        let kind = if self.eat('?') {
            Repeat::Lazy
        } else if self.eat('+') {
            Repeat::Possessive
        } else {
            Repeat::Greedy
        };
        items.push(Node::Repeat { node: Box::new(item), min, max, kind });
        Ok(())
    }

    /// After `{`: the bounds, or `None` (position back after the `{`) when it is a literal.
    fn bounds(&mut self) -> Parsed<Option<(u32, Option<u32>)>> {
        let here = self.pos;
        if self.peek() == Some('}') {
            return Ok(None);
        }
        let low = self.digits();
        let high = if self.eat(',') { self.digits() } else { low.clone() };
        if !self.eat('}') {
            self.pos = here;
            return Ok(None);
        }
        let number = |digits: &str| -> Parsed<Option<u32>> {
            if digits.is_empty() {
                return Ok(None);
            }
            match digits.parse::<u64>() {
                Ok(value) if value < MAX_REPEAT => Ok(u32::try_from(value).ok()),
                _ => Err(SyntaxError::Python("the repetition number is too large".into())),
            }
        };
        let min = number(&low)?.unwrap_or(0);
        let max = number(&high)?;
        if max.is_some_and(|max| max < min) {
            return Err(self.error("min repeat greater than max repeat", here));
        }
        Ok(Some((min, max)))
    }

    fn digits(&mut self) -> String {
        let mut digits = String::new();
        while let Some(digit) = self.peek().filter(char::is_ascii_digit) {
            digits.push(digit);
            self.pos += 1;
        }
        digits
    }

    /// After `(`: a group, look-around, conditional, comment or flags; pushes what it read.
    /// Returns the new flags when it read global flags (`(?i)` at the start).
    fn group(&mut self, flags: Flags, start: usize, first: bool, items: &mut Vec<Node>) -> Parsed<Option<Flags>> {
        if self.depth >= MAX_NESTING {
            return Err(SyntaxError::Anneal(format!("groups nested more than {MAX_NESTING} deep")));
        }
        let mut capture = None;
        let mut inner = flags;
        let mut atomic = false;
        if !self.eat('?') {
            capture = Some(None);
        } else {
            let Some(kind) = self.next() else { return Err(self.error("unexpected end of pattern", self.pos)) };
            match kind {
                'P' => match self.named(start)? {
                    Named::Group(name) => capture = Some(Some(name)),
                    Named::Backref(group) => {
                        items.push(Node::Backref { group, ignore_case: flags.ignore_case });
                        return Ok(None);
                    }
                },
                ':' => {}
                '#' => {
                    self.comment(start)?;
                    return Ok(None);
                }
                '=' | '!' | '<' => {
                    items.push(self.look(kind, flags, start)?);
                    return Ok(None);
                }
                '(' => {
                    items.push(self.conditional(flags, start)?);
                    return Ok(None);
                }
                '>' => atomic = true,
                kind if FLAG_CHARS.contains(kind) || kind == '-' => match self.flags(kind, flags)? {
                    FlagGroup::Global(added) => {
                        if !first {
                            return Err(self.error("global flags not at the start of the expression", start));
                        }
                        self.global = added;
                        return Ok(Some(added));
                    }
                    FlagGroup::Scoped(scoped) => inner = scoped,
                },
                other => return Err(self.error(&format!("unknown extension ?{other}"), start + 1)),
            }
        }
        let group = match capture {
            Some(name) => Some(self.open_group(name, start)?),
            None => None,
        };
        let node = self.nested(inner, start)?;
        if let Some(group) = group {
            let width = self.width(&node);
            self.widths[group] = Some(width);
        }
        items.push(if atomic {
            Node::Atomic(Box::new(node))
        } else {
            Node::Group { capture: group.is_some(), node: Box::new(node) }
        });
        Ok(None)
    }

    /// The alternation inside a group and its closing `)`.
    fn nested(&mut self, flags: Flags, start: usize) -> Parsed<Node> {
        self.depth += 1;
        let node = self.alternation(Some(flags));
        self.depth -= 1;
        let node = node?;
        if !self.eat(')') {
            return Err(self.error("missing ), unterminated subpattern", start));
        }
        Ok(node)
    }

    fn open_group(&mut self, name: Option<String>, start: usize) -> Parsed<usize> {
        let group = self.widths.len();
        if let Some(name) = name {
            if let Some(previous) = self.names.get(&name) {
                let message = format!("redefinition of group name '{name}' as group {group}; was group {previous}");
                return Err(self.error(&message, start + 4));
            }
            self.names.insert(name, group);
        }
        self.widths.push(None);
        Ok(group)
    }

    /// Python's `getwidth`: the least and most characters `node` can match.
    fn width(&self, node: &Node) -> (u64, u64) {
        match node {
            Node::Literal { .. } | Node::Class { .. } | Node::Any { .. } => (1, 1),
            Node::Start { .. }
            | Node::End { .. }
            | Node::StartText
            | Node::EndText
            | Node::Boundary { .. }
            | Node::Look { .. } => (0, 0),
            Node::Concat(items) => items.iter().fold((0, 0), |(low, high), item| {
                let (item_low, item_high) = self.width(item);
                (low.saturating_add(item_low), high.saturating_add(item_high))
            }),
            Node::Alternation(branches) => branches.iter().fold((MAX_WIDTH, 0), |(low, high), branch| {
                let (branch_low, branch_high) = self.width(branch);
                (low.min(branch_low), high.max(branch_high))
            }),
            Node::Group { node, .. } | Node::Atomic(node) => self.width(node),
            Node::Repeat { node, min, max, .. } => {
                let (low, high) = self.width(node);
                let high = match max {
                    None if high > 0 => MAX_WIDTH,
                    None => 0,
                    Some(max) => high.saturating_mul(u64::from(*max)),
                };
                (low.saturating_mul(u64::from(*min)), high)
            }
            Node::Backref { group, .. } => self.widths.get(*group).copied().flatten().unwrap_or((0, 0)),
            Node::Conditional { yes, no, .. } => {
                let ((yes_low, yes_high), (no_low, no_high)) = (self.width(yes), self.width(no));
                (yes_low.min(no_low), yes_high.max(no_high))
            }
        }
    }
}
