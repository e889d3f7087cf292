//! YAML text as Heat writes it for `OS::Heat::CloudConfig`: PyYAML's `yaml.dump` with Heat's
//! SafeDumper-based `heat.common.template_format.yaml_dumper` and PyYAML's defaults (block
//! style, keys sorted, indent 2, width 80, no Unicode). A port of the parts of PyYAML's
//! `yaml.emitter.Emitter` (and, where they differ, libyaml's emitter, which `CSafeDumper` uses)
//! that JSON values reach: the scalar analysis, the style choice and the
//! plain, single- and double-quoted writers with their line folding. Keys are written as
//! simple keys (Heat's cloud-config keys are short one-line strings).

use serde_json::Value;

use crate::template::yaml::resolve_plain;

const WIDTH: usize = 80;
const INDENT: usize = 2;

/// `yaml.dump(value, Dumper=yaml_dumper)`.
pub fn dump(value: &Value) -> String {
    let mut emitter = Emitter { out: String::new(), column: 0, whitespace: true, indention: true };
    match value {
        Value::Object(map) if !map.is_empty() => emitter.block_mapping(value, None, false),
        Value::Array(items) if !items.is_empty() => emitter.block_sequence(value, None, false),
        Value::Object(_) => emitter.write("{}"),
        Value::Array(_) => emitter.write("[]"),
        // libyaml, unlike PyYAML's own emitter, ends a root plain scalar without `...`.
        scalar => emitter.scalar(scalar, 0, false),
    }
    emitter.write_indent(0);
    emitter.out
}

struct Emitter {
    out: String,
    column: usize,
    whitespace: bool,
    indention: bool,
}

impl Emitter {
    fn write(&mut self, text: &str) {
        self.column += text.chars().count();
        self.out.push_str(text);
    }

    fn line_break(&mut self) {
        self.whitespace = true;
        self.indention = true;
        self.column = 0;
        self.out.push('\n');
    }

    fn write_indent(&mut self, indent: usize) {
        if !self.indention || self.column > indent || (self.column == indent && !self.whitespace) {
            self.line_break();
        }
        if self.column < indent {
            self.whitespace = true;
            let pad = " ".repeat(indent - self.column);
            self.write(&pad);
        }
    }

    fn indicator(&mut self, indicator: &str, need_whitespace: bool, whitespace: bool, indention: bool) {
        let text = if self.whitespace || !need_whitespace { indicator.to_owned() } else { format!(" {indicator}") };
        self.whitespace = whitespace;
        self.indention = self.indention && indention;
        self.write(&text);
    }

    /// The indent of a nested block collection: `parent` is the enclosing one's (`None` at the
    /// root); a sequence directly under a mapping key is not indented (PyYAML's indentless).
    fn node(&mut self, value: &Value, indent: Option<usize>, mapping_context: bool) {
        match value {
            Value::Object(map) if !map.is_empty() => self.block_mapping(value, indent, mapping_context),
            Value::Array(items) if !items.is_empty() => self.block_sequence(value, indent, mapping_context),
            Value::Object(_) => self.indicator("{}", true, false, false),
            Value::Array(_) => self.indicator("[]", true, false, false),
            scalar => self.scalar(scalar, indent.map_or(INDENT, |indent| indent + INDENT), false),
        }
    }

    fn block_mapping(&mut self, value: &Value, parent: Option<usize>, _mapping_context: bool) {
        let Value::Object(map) = value else { return };
        let indent = parent.map_or(0, |parent| parent + INDENT);
        let mut keys: Vec<&String> = map.keys().collect();
        keys.sort();
        for key in keys {
            self.write_indent(indent);
            self.scalar(&Value::String(key.clone()), indent + INDENT, true);
            self.indicator(":", false, false, false);
            self.node(&map[key], Some(indent), true);
        }
    }

    fn block_sequence(&mut self, value: &Value, parent: Option<usize>, mapping_context: bool) {
        let Value::Array(items) = value else { return };
        let indentless = mapping_context && !self.indention;
        let indent = match parent {
            None => 0,
            Some(parent) if indentless => parent,
            Some(parent) => parent + INDENT,
        };
        for item in items {
            self.write_indent(indent);
            self.indicator("-", true, false, true);
            self.node(item, Some(indent), false);
        }
    }

    /// A scalar at `indent` (the indent folded lines continue at); `simple_key` for a key.
    fn scalar(&mut self, value: &Value, indent: usize, simple_key: bool) {
        let (text, implicit) = match value {
            Value::String(text) => (text.clone(), reads_as_string(text)),
            Value::Null => ("null".to_owned(), true),
            Value::Bool(flag) => (flag.to_string(), true),
            Value::Number(number) => (number_text(number), true),
            _ => return,
        };
        let chars: Vec<char> = text.chars().collect();
        let analysis = analyze(&chars);
        let split = !simple_key;
        let plain_ok =
            implicit && !(simple_key && (analysis.empty || analysis.multiline)) && analysis.allow_block_plain;
        if plain_ok {
            self.plain(&chars, indent, split);
        } else if analysis.allow_single_quoted && !(simple_key && analysis.multiline) {
            self.single_quoted(&chars, indent, split);
        } else {
            self.double_quoted(&chars, indent, split);
        }
    }

    fn plain(&mut self, text: &[char], indent: usize, split: bool) {
        if text.is_empty() {
            return;
        }
        if !self.whitespace {
            self.write(" ");
        }
        self.whitespace = false;
        self.indention = false;
        let (mut spaces, mut start) = (false, 0);
        for end in 0..=text.len() {
            let ch = text.get(end).copied();
            if spaces {
                if ch != Some(' ') {
                    if start + 1 == end && self.column > WIDTH && split {
                        self.write_indent(indent);
                        self.whitespace = false;
                        self.indention = false;
                    } else {
                        self.write(&text[start..end].iter().collect::<String>());
                    }
                    start = end;
                }
            } else if ch.is_none_or(|ch| ch == ' ' || is_break(ch)) {
                self.write(&text[start..end].iter().collect::<String>());
                start = end;
            }
            if let Some(ch) = ch {
                spaces = ch == ' ';
            }
        }
    }

    fn single_quoted(&mut self, text: &[char], indent: usize, split: bool) {
        self.indicator("'", true, false, false);
        let (mut spaces, mut breaks, mut start) = (false, false, 0);
        for end in 0..=text.len() {
            let ch = text.get(end).copied();
            if spaces {
                if ch != Some(' ') {
                    if start + 1 == end && self.column > WIDTH && split && start != 0 && end != text.len() {
                        self.write_indent(indent);
                    } else {
                        self.write(&text[start..end].iter().collect::<String>());
                    }
                    start = end;
                }
            } else if breaks {
                if ch.is_none_or(|ch| !is_break(ch)) {
                    if text[start] == '\n' {
                        self.line_break();
                    }
                    for _ in &text[start..end] {
                        self.line_break();
                    }
                    self.write_indent(indent);
                    start = end;
                }
            } else if ch.is_none_or(|ch| ch == ' ' || is_break(ch) || ch == '\'') && start < end {
                self.write(&text[start..end].iter().collect::<String>());
                start = end;
            }
            if ch == Some('\'') {
                self.write("''");
                start = end + 1;
            }
            if let Some(ch) = ch {
                spaces = ch == ' ';
                breaks = is_break(ch);
            }
        }
        self.indicator("'", false, false, false);
    }

    /// As libyaml's `yaml_emitter_write_double_quoted_scalar` (Heat dumps with `CSafeDumper`
    /// when PyYAML has libyaml): a fold replaces a space; a fold before a second space writes `\`.
    fn double_quoted(&mut self, text: &[char], indent: usize, split: bool) {
        self.indicator("\"", true, false, false);
        let mut spaces = false;
        for (index, &ch) in text.iter().enumerate() {
            if "\"\\\u{85}\u{2028}\u{2029}\u{FEFF}".contains(ch) || !(' '..='~').contains(&ch) {
                self.write(&escape(ch));
                spaces = false;
            } else if ch == ' ' {
                if split && !spaces && self.column > WIDTH && index != 0 && index != text.len() - 1 {
                    self.write_indent(indent);
                    if text.get(index + 1) == Some(&' ') {
                        self.write("\\");
                    }
                } else {
                    self.write(" ");
                }
                spaces = true;
            } else {
                self.write(&ch.to_string());
                spaces = false;
            }
        }
        self.indicator("\"", false, false, false);
    }
}

/// Whether PyYAML's resolver reads `text`, written plain, back as a string.
fn reads_as_string(text: &str) -> bool {
    match resolve_plain(text) {
        Value::String(_) => !other_tag(text),
        // Heat's loader reads `1e5` as a float; PyYAML's YAML 1.1 float needs a point, and a
        // sign on its exponent.
        Value::Number(number) if number.is_f64() => !float_shape(text),
        _ => false,
    }
}

/// PyYAML's float pattern, for texts `resolve_plain` already read as a number.
fn float_shape(text: &str) -> bool {
    let unsigned = text.strip_prefix(['-', '+']);
    if unsigned.is_some_and(|rest| rest.starts_with('.')) {
        return false;
    }
    let unsigned = unsigned.unwrap_or(text);
    let (mantissa, exponent) = match unsigned.find(['e', 'E']) {
        Some(index) => (&unsigned[..index], Some(&unsigned[index + 1..])),
        None => (unsigned, None),
    };
    mantissa.contains('.') && exponent.is_none_or(|exponent| exponent.starts_with(['-', '+']))
}

fn is_break(ch: char) -> bool {
    matches!(ch, '\n' | '\u{85}' | '\u{2028}' | '\u{2029}')
}

/// Plain texts PyYAML's resolver types as something other than a string though Heat's loader
/// (and `resolve_plain`) reads them as strings: timestamps, sexagesimal numbers, `.inf`/`.nan`,
/// `=` and `<<`.
fn other_tag(text: &str) -> bool {
    let bytes = text.as_bytes();
    let timestamp =
        bytes.len() >= 8 && bytes[..4].iter().all(u8::is_ascii_digit) && bytes[4] == b'-' && bytes[5].is_ascii_digit();
    let unsigned = text.trim_start_matches(['-', '+']);
    let sexagesimal = unsigned.contains(':')
        && unsigned.starts_with(|ch: char| ch.is_ascii_digit())
        && unsigned.chars().all(|ch| ch.is_ascii_digit() || ch == ':' || ch == '_' || ch == '.');
    let special = matches!(unsigned, ".inf" | ".Inf" | ".INF") || matches!(text, ".nan" | ".NaN" | ".NAN");
    timestamp || sexagesimal || special || text == "=" || text == "<<"
}

/// PyYAML's `represent_int` and `represent_float` (`repr(data).lower()`, with `.0` added
/// before an exponent that lacks a point).
fn number_text(number: &serde_json::Number) -> String {
    if number.is_i64() || number.is_u64() {
        return number.to_string();
    }
    let float = number.as_f64().unwrap_or_default();
    let debug = format!("{float:?}");
    let Some((mantissa, exponent)) = debug.split_once('e') else { return debug };
    let (sign, digits) = match exponent.strip_prefix('-') {
        Some(digits) => ('-', digits),
        None => ('+', exponent),
    };
    let mantissa = if mantissa.contains('.') { mantissa.to_owned() } else { format!("{mantissa}.0") };
    format!("{mantissa}e{sign}{digits:0>2}")
}

fn escape(ch: char) -> String {
    let short = match ch {
        '\0' => "0",
        '\u{7}' => "a",
        '\u{8}' => "b",
        '\t' => "t",
        '\n' => "n",
        '\u{b}' => "v",
        '\u{c}' => "f",
        '\r' => "r",
        '\u{1b}' => "e",
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
        code @ 0..=0xFF => format!("\\x{code:02X}"),
        code @ 0x100..=0xFFFF => format!("\\u{code:04X}"),
        code => format!("\\U{code:08X}"),
    }
}

/// PyYAML's `Emitter.analyze_scalar`, the parts the style choice reads.
struct Analysis {
    empty: bool,
    multiline: bool,
    allow_block_plain: bool,
    allow_single_quoted: bool,
}

fn analyze(text: &[char]) -> Analysis {
    if text.is_empty() {
        return Analysis { empty: true, multiline: false, allow_block_plain: true, allow_single_quoted: true };
    }
    let white = |ch: Option<&char>| ch.is_none_or(|ch| "\0 \t\r\n\u{85}\u{2028}\u{2029}".contains(*ch));
    let starts = |prefix: &str| text.iter().take(3).collect::<String>() == prefix;
    let mut block_indicators = starts("---") || starts("...");
    let (mut line_breaks, mut special) = (false, false);
    let (mut leading, mut trailing, mut break_space, mut space_break) = (false, false, false, false);
    let (mut previous_space, mut previous_break) = (false, false);
    let mut preceded_by_whitespace = true;
    for (index, &ch) in text.iter().enumerate() {
        let followed_by_whitespace = white(text.get(index + 1));
        if index == 0 {
            block_indicators |= "#,[]{}&*!|>'\"%@`".contains(ch)
                || ("?:".contains(ch) && followed_by_whitespace)
                || (ch == '-' && followed_by_whitespace);
        } else {
            block_indicators |= (ch == ':' && followed_by_whitespace) || (ch == '#' && preceded_by_whitespace);
        }
        line_breaks |= is_break(ch);
        if !(ch == '\n' || (' '..='~').contains(&ch)) {
            special = true;
        }
        let last = index == text.len() - 1;
        if ch == ' ' {
            leading |= index == 0;
            trailing |= last;
            break_space |= previous_break;
            (previous_space, previous_break) = (true, false);
        } else if is_break(ch) {
            leading |= index == 0;
            trailing |= last;
            space_break |= previous_space;
            (previous_space, previous_break) = (false, true);
        } else {
            (previous_space, previous_break) = (false, false);
        }
        preceded_by_whitespace = white(Some(&ch));
    }
    let allow_single_quoted = !(break_space || space_break || special);
    let allow_block_plain = !(leading || trailing || !allow_single_quoted || line_breaks || block_indicators);
    Analysis { empty: false, multiline: line_breaks, allow_block_plain, allow_single_quoted }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::dump;

    /// Expected texts are Heat's (see tests/tests/heat_render.rs for the differential test).
    #[test]
    fn renders_as_heat_does() {
        let value = json!({"packages": ["nginx"], "runcmd": [["ls", "-l"]], "users": [{"name": "bob", "sudo": true}],
            "e": {}, "num": "123", "uni": "h\u{e9}llo", "content": "a: b\nline2\n", "big": 1e20});
        let expected = "big: 1.0e+20\ncontent: 'a: b\n\n  line2\n\n  '\ne: {}\nnum: '123'\npackages:\n- nginx\n\
                        runcmd:\n- - ls\n  - -l\nuni: \"h\\xE9llo\"\nusers:\n- name: bob\n  sudo: true\n";
        assert_eq!(dump(&value), expected);
        assert_eq!(dump(&json!(null)), "null\n");
        assert_eq!(dump(&json!({})), "{}\n");
    }
}
