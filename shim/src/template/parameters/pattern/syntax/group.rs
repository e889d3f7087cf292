//! Groups other than plain ones, as `_parse` reads them after `(?`: named groups and
//! backreferences (`(?P<name>`, `(?P=name)`), comments, look-arounds (a look-behind of a fixed
//! width only, as Python's compiler requires) and conditionals (`(?(id)yes|no)`).

use super::{Flags, Node, Parsed, Parser, SyntaxError};

impl Parser {
    /// After `(?P`: `<name>` (a named group) or `=name)` (a backreference).
    pub(super) fn named(&mut self, start: usize) -> Parsed<Named> {
        if self.eat('<') {
            let name = self.name_until('>')?;
            return Ok(Named::Group(name));
        }
        if self.eat('=') {
            let name = self.name_until(')')?;
            let Some(&group) = self.names.get(&name) else {
                return Err(self.error(&format!("unknown group name '{name}'"), start + 4));
            };
            self.check_reference(group)?;
            return Ok(Named::Backref(group));
        }
        match self.next() {
            None => Err(self.error("unexpected end of pattern", self.pos)),
            Some(other) => Err(self.error(&format!("unknown extension ?P{other}"), start + 1)),
        }
    }

    /// A group name up to `terminator` (`getuntil` plus `checkgroupname`).
    fn name_until(&mut self, terminator: char) -> Parsed<String> {
        let start = self.pos;
        let mut name = String::new();
        loop {
            match self.next() {
                None if name.is_empty() => return Err(self.error("missing group name", self.pos)),
                None => return Err(self.error(&format!("missing {terminator}, unterminated name"), start)),
                Some(found) if found == terminator && name.is_empty() => {
                    return Err(self.error("missing group name", start));
                }
                Some(found) if found == terminator => break,
                Some(other) => name.push(other),
            }
        }
        if !is_identifier(&name) {
            return Err(self.error(&format!("bad character in group name '{name}'"), start));
        }
        Ok(name)
    }

    /// A backreference to `group` must name a closed group, and not one opened inside the
    /// look-behind it is written in (`checkgroup`, `checklookbehindgroup`).
    pub(super) fn check_reference(&self, group: usize) -> Parsed<()> {
        if self.widths.get(group).is_none_or(Option::is_none) {
            return Err(self.error("cannot refer to an open group", self.pos));
        }
        if self.lookbehind_groups.is_some_and(|opened| group >= opened) {
            return Err(self.error("cannot refer to group defined in the same lookbehind subpattern", self.pos));
        }
        Ok(())
    }

    pub(super) fn comment(&mut self, start: usize) -> Parsed<()> {
        loop {
            match self.next() {
                None => return Err(self.error("missing ), unterminated comment", start)),
                Some(')') => return Ok(()),
                Some(_) => {}
            }
        }
    }

    /// After `(?=`, `(?!` or `(?<`: a look-ahead or look-behind (of a fixed width, as Python's
    /// compiler requires).
    pub(super) fn look(&mut self, kind: char, flags: Flags, start: usize) -> Parsed<Node> {
        let (behind, negated) = match kind {
            '<' => match self.next() {
                Some('=') => (true, false),
                Some('!') => (true, true),
                None => return Err(self.error("unexpected end of pattern", self.pos)),
                Some(other) => return Err(self.error(&format!("unknown extension ?<{other}"), start + 1)),
            },
            _ => (false, kind == '!'),
        };
        let outermost = behind && self.lookbehind_groups.is_none();
        if outermost {
            self.lookbehind_groups = Some(self.widths.len());
        }
        let node = self.nested(flags, start);
        if outermost {
            self.lookbehind_groups = None;
        }
        let node = node?;
        if behind {
            let (low, high) = self.width(&node);
            if low != high {
                return Err(SyntaxError::Python("look-behind requires fixed-width pattern".into()));
            }
        }
        Ok(Node::Look { behind, negated, node: Box::new(node) })
    }

    /// After `(?(`: `id)yes|no)`.
    pub(super) fn conditional(&mut self, flags: Flags, start: usize) -> Parsed<Node> {
        let at = self.pos;
        let name = self.name_or_number()?;
        let group = if is_identifier(&name) {
            match self.names.get(&name) {
                Some(&group) => group,
                None => return Err(self.error(&format!("unknown group name '{name}'"), at)),
            }
        } else {
            let group = match name.parse::<usize>() {
                Ok(group) if name.chars().all(|digit| digit.is_ascii_digit()) => group,
                _ => return Err(self.error(&format!("bad character in group name '{name}'"), at)),
            };
            if group == 0 {
                return Err(self.error("bad group number", at));
            }
            self.condition_refs.push((group, at));
            group
        };
        if self.lookbehind_groups.is_some_and(|opened| group >= opened) {
            return Err(self.error("cannot refer to group defined in the same lookbehind subpattern", self.pos));
        }
        self.depth += 1;
        let branches = self.branches(flags);
        self.depth -= 1;
        let (yes, no) = branches?;
        if !self.eat(')') {
            return Err(self.error("missing ), unterminated subpattern", start));
        }
        Ok(Node::Conditional { group, yes: Box::new(yes), no: Box::new(no) })
    }

    fn branches(&mut self, flags: Flags) -> Parsed<(Node, Node)> {
        let yes = self.sequence(flags, false)?;
        if !self.eat('|') {
            return Ok((yes, Node::Concat(Vec::new())));
        }
        let no = self.sequence(flags, false)?;
        if self.peek() == Some('|') {
            return Err(self.error("conditional backref with more than two branches", self.pos));
        }
        Ok((yes, no))
    }

    fn name_or_number(&mut self) -> Parsed<String> {
        let start = self.pos;
        let mut name = String::new();
        loop {
            match self.next() {
                None if name.is_empty() => return Err(self.error("missing group name", self.pos)),
                None => return Err(self.error("missing ), unterminated name", start)),
                Some(')') if name.is_empty() => return Err(self.error("missing group name", start)),
                Some(')') => return Ok(name),
                Some(other) => name.push(other),
            }
        }
    }
}

pub(super) enum Named {
    Group(String),
    Backref(usize),
}

/// Python's `str.isidentifier()`, near enough: a letter or `_`, then letters, digits or `_`.
pub(super) fn is_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|first| first == '_' || first.is_alphabetic())
        && chars.all(|rest| rest == '_' || rest.is_alphanumeric())
}
