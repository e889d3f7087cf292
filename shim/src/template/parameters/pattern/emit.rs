//! A parsed Python pattern written in the syntax of the Rust engines (the `regex` crate's, which
//! fancy-regex extends), so that each construct means what it means in Python: `\w` and `\s` as
//! Python's `str` classes, `.` without `\n`, `^` and `\A` at the start, `\Z` at the very end,
//! literals as `\x{..}` (no character is special by accident), groups numbered as Python numbers
//! them. Two variants: `exact` writes Python's `$` and `\b` with look-arounds (backtracking
//! engine only); the linear one writes them as the `regex` crate's, which agree with Python's
//! on the values `Features::plain` admits.

use std::fmt::Write as _;

use super::syntax::{Category, Class, ClassItem, Node, Repeat};

/// A set that matches nothing (Python's surrogates, an empty set).
const NEVER: &str = r"[^\s\S]";

/// What decides which engine checks a value.
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct Features {
    /// Look-around, back-references, conditionals, atomic groups or possessive repeats: only
    /// the backtracking engine has them.
    pub backtracking: bool,
    /// A `$` outside multi-line mode: Python's matches before a final `\n` only.
    pub dollar: bool,
    /// `\b` or `\B`: Python's `\w` is not the `regex` crate's beyond ASCII, and Python's `\B`
    /// fails on an empty string.
    pub boundary: bool,
    /// A look-around holding another backtracking construct: the backtracking engine's work
    /// inside a look-around is not counted against its limit, so this is refused.
    pub nested_look: bool,
}

impl Features {
    pub(super) fn of(node: &Node) -> Features {
        let mut features = Features::default();
        features.visit(node, false);
        features
    }

    fn visit(&mut self, node: &Node, in_look: bool) {
        let backtracking = matches!(
            node,
            Node::Look { .. }
                | Node::Atomic(_)
                | Node::Backref { .. }
                | Node::Conditional { .. }
                | Node::Repeat { kind: Repeat::Possessive, .. }
        );
        self.backtracking |= backtracking;
        self.nested_look |= backtracking && in_look;
        self.dollar |= matches!(node, Node::End { multiline: false });
        self.boundary |= matches!(node, Node::Boundary { .. });
        let in_look = in_look || matches!(node, Node::Look { .. });
        match node {
            Node::Concat(items) | Node::Alternation(items) => items.iter().for_each(|item| self.visit(item, in_look)),
            Node::Group { node, .. } | Node::Atomic(node) | Node::Repeat { node, .. } | Node::Look { node, .. } => {
                self.visit(node, in_look)
            }
            Node::Conditional { yes, no, .. } => {
                self.visit(yes, in_look);
                self.visit(no, in_look);
            }
            _ => {}
        }
    }

    /// Whether the linear variant gives Python's answer on `text`: no `\n` before the last
    /// character (for `$`), and only ASCII, not empty (for `\b`, `\B`).
    pub(super) fn plain(&self, text: &str) -> bool {
        let newline_inside = text.len() > 1 && text.as_bytes()[..text.len() - 1].contains(&b'\n');
        !(self.dollar && newline_inside) && !(self.boundary && (text.is_empty() || !text.is_ascii()))
    }
}

/// The whole pattern, anchored at the start as `re.match` is (the end is checked by the caller,
/// as Heat checks `match.end()`).
pub(super) fn emit(node: &Node, exact: bool) -> String {
    let mut out = String::from(r"\A(?:");
    write(node, exact, &mut out);
    out.push(')');
    out
}

fn write(node: &Node, exact: bool, out: &mut String) {
    match node {
        Node::Literal { code, ignore_case } => match char::from_u32(*code) {
            Some(ch) if *ignore_case => {
                out.push_str("(?i:");
                literal(ch, out);
                out.push(')');
            }
            Some(ch) => literal(ch, out),
            None => out.push_str(NEVER),
        },
        Node::Class { class, ignore_case } => {
            let set = set(class);
            if *ignore_case {
                let _ = write!(out, "(?i:{set})");
            } else {
                out.push_str(&set);
            }
        }
        Node::Any { dotall } => out.push_str(if *dotall { r"[\s\S]" } else { r"[^\n]" }),
        Node::Start { multiline: false } | Node::StartText => out.push_str(r"\A"),
        Node::Start { multiline: true } => out.push_str("(?m:^)"),
        Node::End { multiline: true } => out.push_str("(?m:$)"),
        // Python's `$`: the end, or just before a final "\n".
        Node::End { multiline: false } => out.push_str(if exact { r"(?=\n?\z)" } else { "(?m:$)" }),
        Node::EndText => out.push_str(r"\z"),
        Node::Boundary { negated, ascii } => boundary(*negated, *ascii, exact, out),
        Node::Concat(items) => items.iter().for_each(|item| write(item, exact, out)),
        Node::Alternation(branches) => {
            out.push_str("(?:");
            for (index, branch) in branches.iter().enumerate() {
                if index > 0 {
                    out.push('|');
                }
                write(branch, exact, out);
            }
            out.push(')');
        }
        Node::Group { capture, node } => wrapped(if *capture { "(" } else { "(?:" }, node, exact, out),
        Node::Atomic(node) => wrapped("(?>", node, exact, out),
        Node::Repeat { node, min, max, kind } => repeat(node, *min, *max, *kind, exact, out),
        Node::Look { behind, negated, node } => wrapped(look_open(*behind, *negated), node, exact, out),
        // Wrapped, so that a digit written after it is not read as part of the number.
        Node::Backref { group, ignore_case } => {
            let _ = write!(out, "(?{}:\\{group})", if *ignore_case { "i" } else { "" });
        }
        Node::Conditional { group, yes, no } => {
            let _ = write!(out, "(?({group})");
            write(yes, exact, out);
            out.push('|');
            write(no, exact, out);
            out.push(')');
        }
    }
}

fn wrapped(open: &str, node: &Node, exact: bool, out: &mut String) {
    out.push_str(open);
    write(node, exact, out);
    out.push(')');
}

fn look_open(behind: bool, negated: bool) -> &'static str {
    match (behind, negated) {
        (false, false) => "(?=",
        (false, true) => "(?!",
        (true, false) => "(?<=",
        (true, true) => "(?<!",
    }
}

fn repeat(node: &Node, min: u32, max: Option<u32>, kind: Repeat, exact: bool, out: &mut String) {
    if kind == Repeat::Possessive {
        out.push_str("(?>");
    }
    wrapped("(?:", node, exact, out);
    let _ = match (min, max) {
        (0, None) => write!(out, "*"),
        (1, None) => write!(out, "+"),
        (0, Some(1)) => write!(out, "?"),
        (min, None) => write!(out, "{{{min},}}"),
        (min, Some(max)) if min == max => write!(out, "{{{min}}}"),
        (min, Some(max)) => write!(out, "{{{min},{max}}}"),
    };
    match kind {
        Repeat::Greedy => {}
        Repeat::Lazy => out.push('?'),
        Repeat::Possessive => out.push(')'),
    }
}

/// Python's `\b`/`\B`: a change (or not) between word and non-word characters, and never on an
/// empty string.
fn boundary(negated: bool, ascii: bool, exact: bool, out: &mut String) {
    let word = if ascii { "[0-9A-Za-z_]" } else { r"[\p{L}\p{N}_]" };
    let _ = match (exact, negated) {
        (false, false) => write!(out, r"\b"),
        (false, true) => write!(out, r"\B"),
        (true, false) => write!(out, "(?:(?<={word})(?!{word})|(?<!{word})(?={word}))"),
        (true, true) => write!(out, r"(?:(?<={word})(?={word})|(?<!{word})(?!{word})(?:(?<=[\s\S])|(?=[\s\S])))"),
    };
}

fn literal(ch: char, out: &mut String) {
    if ch.is_ascii_alphanumeric() {
        out.push(ch);
    } else {
        let _ = write!(out, "\\x{{{:x}}}", u32::from(ch));
    }
}

/// A Python set as a Rust class; code points Rust strings cannot hold (surrogates) dropped.
fn set(class: &Class) -> String {
    let mut body = String::new();
    for item in &class.items {
        match *item {
            ClassItem::Char(code) => {
                if let Some(ch) = char::from_u32(code) {
                    literal(ch, &mut body);
                }
            }
            ClassItem::Range(low, high) => {
                // Split around the surrogates, which no Rust string holds.
                for (from, to) in [(low, high.min(0xD7FF)), (low.max(0xE000), high)] {
                    if let (Some(from), Some(to)) = (char::from_u32(from), char::from_u32(to))
                        && from <= to
                    {
                        literal(from, &mut body);
                        body.push('-');
                        literal(to, &mut body);
                    }
                }
            }
            ClassItem::Category { category, negated, ascii } => body.push_str(&category_set(category, negated, ascii)),
        }
    }
    match (body.is_empty(), class.negated) {
        (true, false) => NEVER.to_owned(),
        (true, true) => r"[\s\S]".to_owned(),
        (false, negated) => format!("[{}{body}]", if negated { "^" } else { "" }),
    }
}

/// Python's `str` classes: `\d` is Unicode's decimal digits (the `regex` crate's `\d`), `\w`
/// letters, numbers and `_` (`str.isalnum()`), `\s` Unicode's white space plus the ASCII
/// separators 0x1c-0x1f (`str.isspace()`); under `(?a)` their ASCII forms.
fn category_set(category: Category, negated: bool, ascii: bool) -> String {
    let set = match (category, ascii) {
        (Category::Digit, false) => r"\d",
        (Category::Digit, true) => "0-9",
        (Category::Space, false) => r"\s\x{1c}-\x{1f}",
        (Category::Space, true) => r"\x{9}-\x{d}\x{20}",
        (Category::Word, false) => r"\p{L}\p{N}_",
        (Category::Word, true) => "0-9A-Za-z_",
    };
    if negated { format!("[^{set}]") } else { set.to_owned() }
}
