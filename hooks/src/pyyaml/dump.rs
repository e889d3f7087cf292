//! PyYAML's `yaml.safe_dump(value, default_flow_style=False)` for JSON values, byte for byte: the
//! form heat-agents' salt hook writes a map config in (`<id>.sls`) and reports salt's return in,
//! and heat-agents' docker-compose script writes a map config's `docker-compose.yml` in.
//! Keys sorted, block collections (lists under a key not indented), empty ones as `{}`/`[]`,
//! scalars plain when PyYAML would read them back as the same string, else single- or
//! double-quoted, non-ASCII escaped (`allow_unicode=False`), lines folded past column 80 and
//! keys that cannot be simple (empty, multi-line, 128 characters or more) written `? key` as
//! PyYAML's emitter does.

use anneal_protocol::pyjson;
use serde_json::{Map, Value};

mod resolve;

const BEST_WIDTH: usize = 80;

/// `yaml.safe_dump(value, default_flow_style=False)`.
pub(crate) fn safe_dump(value: &Value) -> String {
    let mut emitter = Emitter::default();
    match value {
        Value::Object(map) if !map.is_empty() => emitter.mapping(map, 0, true),
        Value::Array(items) if !items.is_empty() => emitter.sequence(items, 0, true),
        scalar => {
            let plain = emitter.scalar(scalar, 2, false);
            // A plain scalar at the root leaves the document open, so PyYAML ends it.
            if plain {
                emitter.out.push_str("\n...");
            }
        }
    }
    emitter.out.push('\n');
    emitter.out
}

#[derive(Default)]
struct Emitter {
    out: String,
    column: usize,
}

impl Emitter {
    fn write(&mut self, text: &str) {
        self.out.push_str(text);
        self.column += text.chars().count();
    }

    /// A new line indented to `indent` (PyYAML's `write_indent` in the middle of a line).
    fn indent(&mut self, indent: usize) {
        if !self.out.is_empty() {
            self.out.push('\n');
        }
        self.column = 0;
        self.pad(indent);
    }

    fn pad(&mut self, indent: usize) {
        if self.column < indent {
            self.out.push_str(&" ".repeat(indent - self.column));
            self.column = indent;
        }
    }

    fn line_break(&mut self) {
        self.out.push('\n');
        self.column = 0;
    }

    /// A block mapping with its keys at `indent`; `inline`: its first key goes where the cursor
    /// is (after `- `, or at the start of the document).
    fn mapping(&mut self, map: &Map<String, Value>, indent: usize, inline: bool) {
        let mut entries: Vec<(&String, &Value)> = map.iter().collect();
        entries.sort_by(|left, right| left.0.cmp(right.0));
        for (index, (key, value)) in entries.into_iter().enumerate() {
            if index > 0 || !inline {
                self.indent(indent);
            }
            // PyYAML's `check_simple_key`: others are written `? key` then `: value`, a
            // collection value starting on the `:` line.
            let simple = !(key.is_empty() || key.contains(['\n', '\u{85}', '\u{2028}', '\u{2029}']))
                && key.chars().count() < 128;
            if simple {
                self.string(key, indent + 2, true);
            } else {
                self.write("? ");
                self.string(key, indent + 2, false);
                self.indent(indent);
            }
            self.write(":");
            match value {
                Value::Object(map) if !map.is_empty() && simple => self.mapping(map, indent + 2, false),
                // A list under a key is not indented (PyYAML's indentless sequence).
                Value::Array(items) if !items.is_empty() && simple => self.sequence(items, indent, false),
                Value::Object(map) if !map.is_empty() => {
                    self.pad(indent + 2);
                    self.mapping(map, indent + 2, true);
                }
                Value::Array(items) if !items.is_empty() => {
                    self.pad(indent + 2);
                    self.sequence(items, indent + 2, true);
                }
                scalar => {
                    self.write(" ");
                    self.scalar(scalar, indent + 2, false);
                }
            }
        }
    }

    fn sequence(&mut self, items: &[Value], indent: usize, inline: bool) {
        for (index, item) in items.iter().enumerate() {
            if index > 0 || !inline {
                self.indent(indent);
            }
            self.write("- ");
            match item {
                Value::Object(map) if !map.is_empty() => self.mapping(map, indent + 2, true),
                Value::Array(items) if !items.is_empty() => self.sequence(items, indent + 2, true),
                scalar => {
                    self.scalar(scalar, indent + 2, false);
                }
            }
        }
    }

    /// A scalar or empty collection; `true` when written as a plain scalar.
    fn scalar(&mut self, value: &Value, indent: usize, key: bool) -> bool {
        match value {
            Value::Null => self.write("null"),
            Value::Bool(flag) => self.write(if *flag { "true" } else { "false" }),
            Value::Number(_) => self.write(&number(value)),
            Value::String(text) => return self.string(text, indent, key),
            // Flow collections close the document themselves.
            Value::Array(_) => {
                self.write("[]");
                return false;
            }
            Value::Object(_) => {
                self.write("{}");
                return false;
            }
        }
        true
    }

    /// A string in the style PyYAML's `choose_scalar_style` picks; `true` when plain.
    fn string(&mut self, text: &str, indent: usize, key: bool) -> bool {
        let analysis = analyze(text);
        let multiline = analysis.line_breaks;
        let implicit = !resolve::is_implicit_non_string(text);
        if implicit && analysis.allow_plain && !(key && (text.is_empty() || multiline)) {
            self.plain(text, indent, !key);
            true
        } else if analysis.allow_single_quoted && !(key && multiline) {
            self.single_quoted(text, indent, !key);
            false
        } else {
            self.double_quoted(text, indent, !key);
            false
        }
    }

    /// PyYAML's `write_plain`: a lone space past the width becomes a line break.
    fn plain(&mut self, text: &str, indent: usize, split: bool) {
        let chars: Vec<char> = text.chars().collect();
        let mut start = 0;
        for end in 1..=chars.len() {
            let ch = chars.get(end).copied();
            if chars[end - 1] == ' ' {
                if ch != Some(' ') {
                    if start + 1 == end && self.column > BEST_WIDTH && split {
                        self.indent(indent);
                    } else {
                        self.write(&chars[start..end].iter().collect::<String>());
                    }
                    start = end;
                }
            } else if ch.is_none_or(|ch| ch == ' ') {
                self.write(&chars[start..end].iter().collect::<String>());
                start = end;
            }
        }
    }

    /// PyYAML's `write_single_quoted`.
    fn single_quoted(&mut self, text: &str, indent: usize, split: bool) {
        self.write("'");
        let chars: Vec<char> = text.chars().collect();
        let (mut start, mut spaces, mut breaks) = (0, false, false);
        for end in 0..=chars.len() {
            let ch = chars.get(end).copied();
            if spaces {
                if ch != Some(' ') {
                    if start + 1 == end && self.column > BEST_WIDTH && split && start != 0 && end != chars.len() {
                        self.indent(indent);
                    } else {
                        self.write(&chars[start..end].iter().collect::<String>());
                    }
                    start = end;
                }
            } else if breaks {
                if ch != Some('\n') {
                    // A line break is written doubled: one blank line per break, plus one.
                    self.line_break();
                    for _ in start..end {
                        self.line_break();
                    }
                    self.pad(indent);
                    start = end;
                }
            } else if ch.is_none_or(|ch| ch == ' ' || ch == '\n' || ch == '\'') && start < end {
                self.write(&chars[start..end].iter().collect::<String>());
                start = end;
            }
            if ch == Some('\'') {
                self.write("''");
                start = end + 1;
            }
            spaces = ch == Some(' ');
            breaks = ch == Some('\n');
        }
        self.write("'");
    }

    /// PyYAML's `write_double_quoted`, with `allow_unicode=False`.
    fn double_quoted(&mut self, text: &str, indent: usize, split: bool) {
        self.write("\"");
        let chars: Vec<char> = text.chars().collect();
        let mut start = 0;
        for end in 0..=chars.len() {
            let ch = chars.get(end).copied();
            if ch.is_none_or(|ch| matches!(ch, '"' | '\\') || !(' '..='~').contains(&ch)) {
                if start < end {
                    self.write(&chars[start..end].iter().collect::<String>());
                    start = end;
                }
                if let Some(ch) = ch {
                    self.write(&escape(ch));
                    start = end + 1;
                }
            }
            if 0 < end
                && end + 1 < chars.len()
                && (ch == Some(' ') || start >= end)
                && self.column as isize + end as isize - start as isize > BEST_WIDTH as isize
                && split
            {
                let data: String = chars[start.min(end)..end].iter().collect();
                if start < end {
                    start = end;
                }
                self.write(&data);
                self.write("\\");
                self.indent(indent);
                if chars.get(start) == Some(&' ') {
                    self.write("\\");
                }
            }
        }
        self.write("\"");
    }
}

/// PyYAML's escape for a character a double-quoted scalar cannot hold as is.
fn escape(ch: char) -> String {
    let short = match ch {
        '\0' => "0",
        '\x07' => "a",
        '\x08' => "b",
        '\t' => "t",
        '\n' => "n",
        '\x0b' => "v",
        '\x0c' => "f",
        '\r' => "r",
        '\x1b' => "e",
        '"' => "\"",
        '\\' => "\\",
        '\u{85}' => "N",
        '\u{a0}' => "_",
        '\u{2028}' => "L",
        '\u{2029}' => "P",
        _ => "",
    };
    match u32::from(ch) {
        _ if !short.is_empty() => format!("\\{short}"),
        code @ 0..=0xff => format!("\\x{code:02X}"),
        code @ 0x100..=0xffff => format!("\\u{code:04X}"),
        code => format!("\\U{code:08X}"),
    }
}

/// `represent_int` / `represent_float`: digits, or Python's float repr lowercased with `.0`
/// before a bare exponent, `.inf`, `.nan`.
fn number(value: &Value) -> String {
    let Value::Number(number) = value else { return String::new() };
    let text = number.to_string();
    if number.is_i64() || number.is_u64() || !text.contains(['.', 'e', 'E']) {
        return text;
    }
    match number.as_f64() {
        Some(float) if float.is_nan() => ".nan".into(),
        Some(float) if float.is_infinite() => if float > 0.0 { ".inf" } else { "-.inf" }.into(),
        None => ".nan".into(),
        Some(_) => {
            let repr = pyjson::dumps(value, false).to_lowercase();
            if !repr.contains('.') && repr.contains('e') { repr.replacen('e', ".0e", 1) } else { repr }
        }
    }
}

/// What PyYAML's `analyze_scalar` decides for block context (allow_unicode off).
struct Analysis {
    line_breaks: bool,
    allow_plain: bool,
    allow_single_quoted: bool,
}

fn analyze(text: &str) -> Analysis {
    if text.is_empty() {
        return Analysis { line_breaks: false, allow_plain: true, allow_single_quoted: true };
    }
    let chars: Vec<char> = text.chars().collect();
    let is_space = |ch: Option<&char>| ch.is_none_or(|ch| matches!(ch, '\0' | ' ' | '\t' | '\r' | '\n'));
    let is_break = |ch: char| matches!(ch, '\n' | '\u{85}' | '\u{2028}' | '\u{2029}');
    let mut block_indicators = text.starts_with("---") || text.starts_with("...");
    let (mut line_breaks, mut special, mut break_space, mut space_break) = (false, false, false, false);
    let (mut previous_space, mut previous_break) = (false, false);
    for (index, &ch) in chars.iter().enumerate() {
        let followed_by_space = is_space(chars.get(index + 1));
        let preceded_by_space = index == 0 || is_space(chars.get(index - 1));
        if index == 0 {
            block_indicators |= "#,[]{}&*!|>'\"%@`".contains(ch) || ("?:-".contains(ch) && followed_by_space);
        } else {
            block_indicators |= (ch == ':' && followed_by_space) || (ch == '#' && preceded_by_space);
        }
        line_breaks |= is_break(ch);
        if !(ch == '\n' || (' '..='~').contains(&ch)) {
            // Printable non-ASCII is special too, as PyYAML does without allow_unicode.
            special = true;
        }
        if ch == ' ' {
            break_space |= previous_break;
            (previous_space, previous_break) = (true, false);
        } else if is_break(ch) {
            space_break |= previous_space;
            (previous_space, previous_break) = (false, true);
        } else {
            (previous_space, previous_break) = (false, false);
        }
    }
    let edge_space = |ch: Option<&char>| ch.is_some_and(|&ch| ch == ' ' || is_break(ch));
    let edges = edge_space(chars.first()) || edge_space(chars.last());
    Analysis {
        line_breaks,
        allow_plain: !(edges || break_space || space_break || special || line_breaks || block_indicators),
        allow_single_quoted: !(break_space || space_break || special),
    }
}

#[cfg(test)]
mod tests;
