//! Escapes and character sets as Python's `_escape`, `_class_escape` and the `[` branch of
//! `_parse` read them: octal escapes against group references, exact-length `\x`/`\u`/`\U`,
//! `\b` (a boundary outside a set, a backspace inside one), and Python's refusals ("bad escape"
//! for an unknown ASCII-letter escape, "bad character range").

use super::{Flags, Node, Parsed, Parser, SyntaxError};

/// `\d`, `\s`, `\w` (their negations are `negated` items).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(in crate::template::parameters::pattern) enum Category {
    Digit,
    Space,
    Word,
}

#[derive(Debug, Clone)]
pub(in crate::template::parameters::pattern) enum ClassItem {
    Char(u32),
    Range(u32, u32),
    Category { category: Category, negated: bool, ascii: bool },
}

#[derive(Debug, Clone)]
pub(in crate::template::parameters::pattern) struct Class {
    pub negated: bool,
    pub items: Vec<ClassItem>,
}

/// What an escape stands for.
enum Escaped {
    Node(Node),
    Item(ClassItem),
}

impl Parser {
    /// After `\` outside a set.
    pub(super) fn escape(&mut self, flags: Flags, start: usize) -> Parsed<Node> {
        let Some(this) = self.next() else { return Err(self.error("bad escape (end of pattern)", start)) };
        let item = match this {
            'A' => return Ok(Node::StartText),
            'Z' => return Ok(Node::EndText),
            'b' | 'B' => return Ok(Node::Boundary { negated: this == 'B', ascii: flags.ascii }),
            '0' => ClassItem::Char(self.octal('0', start)?),
            '1'..='9' => match self.reference(this, start)? {
                Escaped::Node(Node::Backref { group, .. }) => {
                    return Ok(Node::Backref { group, ignore_case: flags.ignore_case });
                }
                Escaped::Node(node) => return Ok(node),
                Escaped::Item(item) => item,
            },
            other => self.common_escape(other, flags, start)?,
        };
        Ok(match item {
            ClassItem::Char(code) => Node::Literal { code, ignore_case: flags.ignore_case },
            item => Node::Class { class: Class { negated: false, items: vec![item] }, ignore_case: false },
        })
    }

    /// After `\` inside a set.
    fn class_escape(&mut self, flags: Flags, start: usize) -> Parsed<ClassItem> {
        let Some(this) = self.next() else { return Err(self.error("bad escape (end of pattern)", start)) };
        match this {
            'b' => Ok(ClassItem::Char(8)),
            '0'..='7' => {
                let code = self.octal(this, start)?;
                if code > 0o377 {
                    let message = format!("octal escape value {} outside of range 0-0o377", self.text(start));
                    return Err(self.error(&message, start));
                }
                Ok(ClassItem::Char(code))
            }
            '8' | '9' => Err(self.error(&format!("bad escape \\{this}"), start)),
            other => self.common_escape(other, flags, start),
        }
    }

    /// The escapes that read the same inside and outside a set.
    fn common_escape(&mut self, this: char, flags: Flags, start: usize) -> Parsed<ClassItem> {
        let category =
            |category: Category, negated: bool| ClassItem::Category { category, negated, ascii: flags.ascii };
        Ok(match this {
            'd' | 'D' => category(Category::Digit, this == 'D'),
            's' | 'S' => category(Category::Space, this == 'S'),
            'w' | 'W' => category(Category::Word, this == 'W'),
            'a' => ClassItem::Char(7),
            'f' => ClassItem::Char(12),
            'n' => ClassItem::Char(10),
            'r' => ClassItem::Char(13),
            't' => ClassItem::Char(9),
            'v' => ClassItem::Char(11),
            'x' => ClassItem::Char(self.hex(this, 2, start)?),
            'u' => ClassItem::Char(self.hex(this, 4, start)?),
            'U' => {
                let code = self.hex(this, 8, start)?;
                if code > 0x10_FFFF {
                    return Err(self.error(&format!("bad escape {}", self.text(start)), start));
                }
                ClassItem::Char(code)
            }
            'N' if self.peek() != Some('{') => return Err(self.error("missing {", self.pos)),
            // Python looks the name up in its Unicode database, which anneal does not carry.
            'N' => return Err(SyntaxError::Anneal("named Unicode escapes (\\N{...})".into())),
            letter if letter.is_ascii_alphabetic() => {
                return Err(self.error(&format!("bad escape \\{letter}"), start));
            }
            other => ClassItem::Char(other.into()),
        })
    }

    /// Exactly `digits` hex digits after `\x`, `\u` or `\U`.
    fn hex(&mut self, kind: char, digits: usize, start: usize) -> Parsed<u32> {
        let mut text = String::new();
        while text.len() < digits {
            match self.peek().filter(char::is_ascii_hexdigit) {
                Some(digit) => text.push(digit),
                None => break,
            }
            self.pos += 1;
        }
        if text.len() != digits {
            return Err(self.error(&format!("incomplete escape \\{kind}{text}"), start));
        }
        u32::from_str_radix(&text, 16).map_err(|_| self.error(&format!("bad escape \\{kind}{text}"), start))
    }

    /// An octal escape: `first` and up to two more octal digits.
    fn octal(&mut self, first: char, start: usize) -> Parsed<u32> {
        let mut value = first.to_digit(8).ok_or_else(|| self.error("bad escape", start))?;
        for _ in 0..2 {
            let Some(digit) = self.peek().and_then(|digit| digit.to_digit(8)) else { break };
            value = value * 8 + digit;
            self.pos += 1;
        }
        Ok(value)
    }

    /// `\1`…`\99` outside a set: a backreference, or an octal escape when three octal digits
    /// follow the backslash.
    fn reference(&mut self, first: char, start: usize) -> Parsed<Escaped> {
        let mut digits = String::from(first);
        if let Some(second) = self.peek().filter(char::is_ascii_digit) {
            self.pos += 1;
            digits.push(second);
            let third = self.peek().filter(|digit| digit.is_digit(8));
            if let (true, true, Some(third)) = (first.is_digit(8), second.is_digit(8), third) {
                self.pos += 1;
                digits.push(third);
                let code = u32::from_str_radix(&digits, 8).unwrap_or(u32::MAX);
                if code > 0o377 {
                    let message = format!("octal escape value \\{digits} outside of range 0-0o377");
                    return Err(self.error(&message, start));
                }
                return Ok(Escaped::Item(ClassItem::Char(code)));
            }
        }
        let group: usize = digits.parse().unwrap_or(usize::MAX);
        if group >= self.widths.len() {
            return Err(self.error(&format!("invalid group reference {group}"), start + 1));
        }
        self.check_reference(group)?;
        Ok(Escaped::Node(Node::Backref { group, ignore_case: false }))
    }

    /// After `[`: a set, as Python reads it (a `]` first is a literal; `-` at either end is).
    pub(super) fn class(&mut self, flags: Flags, start: usize) -> Parsed<Node> {
        let negated = self.eat('^');
        let mut items = Vec::new();
        loop {
            let item_start = self.pos;
            let Some(this) = self.next() else { return Err(self.error("unterminated character set", start)) };
            if this == ']' && !items.is_empty() {
                break;
            }
            let first = self.class_item(this, flags, item_start)?;
            if !self.eat('-') {
                items.push(first);
                continue;
            }
            let that_start = self.pos;
            let Some(that) = self.next() else { return Err(self.error("unterminated character set", start)) };
            if that == ']' {
                items.extend([first, ClassItem::Char('-'.into())]);
                break;
            }
            let last = self.class_item(that, flags, that_start)?;
            match (first, last) {
                (ClassItem::Char(low), ClassItem::Char(high)) if low <= high => items.push(ClassItem::Range(low, high)),
                _ => {
                    let range = self.text(item_start);
                    return Err(self.error(&format!("bad character range {range}"), item_start));
                }
            }
        }
        Ok(Node::Class { class: Class { negated, items }, ignore_case: flags.ignore_case })
    }

    fn class_item(&mut self, this: char, flags: Flags, start: usize) -> Parsed<ClassItem> {
        if this == '\\' { self.class_escape(flags, start) } else { Ok(ClassItem::Char(this.into())) }
    }

    /// The pattern text from `start` to the current position (for messages).
    fn text(&self, start: usize) -> String {
        self.chars[start..self.pos.min(self.chars.len())].iter().collect()
    }
}
