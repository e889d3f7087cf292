//! Python literals, the subset `ast.literal_eval` accepts that heat-agents' docker-compose hook
//! reads its `env_files` input with (`"[{'file_name': 'a.env', 'content': 'A=1'}]"`): strings in
//! single or double quotes with backslash escapes, numbers, `True`/`False`/`None`, lists, tuples
//! and dicts. Nesting is bounded, so a hostile input cannot exhaust the stack.

use serde_json::{Map, Value};

/// Deeper nesting is refused.
const MAX_DEPTH: usize = 64;

/// The value of the literal `text`, or why it is not one.
pub(crate) fn parse(text: &str) -> Result<Value, String> {
    let mut parser = Parser { chars: text.chars().collect(), at: 0 };
    let value = parser.value(0)?;
    parser.skip_space();
    if parser.at < parser.chars.len() {
        return Err(format!("unexpected {:?} at offset {}", parser.chars[parser.at], parser.at));
    }
    Ok(value)
}

struct Parser {
    chars: Vec<char>,
    at: usize,
}

impl Parser {
    fn peek(&self) -> Option<char> {
        self.chars.get(self.at).copied()
    }

    fn skip_space(&mut self) {
        while self.peek().is_some_and(char::is_whitespace) {
            self.at += 1;
        }
    }

    fn value(&mut self, depth: usize) -> Result<Value, String> {
        if depth > MAX_DEPTH {
            return Err(format!("nested deeper than {MAX_DEPTH} levels"));
        }
        self.skip_space();
        match self.peek() {
            Some('[') => self.sequence(']', depth),
            Some('(') => self.sequence(')', depth),
            Some('{') => self.dict(depth),
            Some(quote @ ('\'' | '"')) => self.string(quote).map(Value::String),
            Some(ch) if ch.is_ascii_digit() || ch == '-' || ch == '+' || ch == '.' => self.number(),
            Some(ch) if ch.is_ascii_alphabetic() => self.name(),
            Some(ch) => Err(format!("unexpected {ch:?} at offset {}", self.at)),
            None => Err("unexpected end of text".into()),
        }
    }

    fn sequence(&mut self, close: char, depth: usize) -> Result<Value, String> {
        self.at += 1;
        let mut items = Vec::new();
        loop {
            self.skip_space();
            if self.peek() == Some(close) {
                self.at += 1;
                return Ok(Value::Array(items));
            }
            items.push(self.value(depth + 1)?);
            self.skip_space();
            match self.peek() {
                Some(',') => self.at += 1,
                Some(ch) if ch == close => {}
                _ => return Err(format!("expected ',' or {close:?} at offset {}", self.at)),
            }
        }
    }

    fn dict(&mut self, depth: usize) -> Result<Value, String> {
        self.at += 1;
        let mut map = Map::new();
        loop {
            self.skip_space();
            if self.peek() == Some('}') {
                self.at += 1;
                return Ok(Value::Object(map));
            }
            let key = match self.value(depth + 1)? {
                Value::String(key) => key,
                other => other.to_string(),
            };
            self.skip_space();
            if self.peek() != Some(':') {
                return Err(format!("expected ':' at offset {}", self.at));
            }
            self.at += 1;
            let value = self.value(depth + 1)?;
            map.insert(key, value);
            self.skip_space();
            match self.peek() {
                Some(',') => self.at += 1,
                Some('}') => {}
                _ => return Err(format!("expected ',' or '}}' at offset {}", self.at)),
            }
        }
    }

    fn string(&mut self, quote: char) -> Result<String, String> {
        let start = self.at;
        self.at += 1;
        let mut text = String::new();
        while let Some(ch) = self.peek() {
            self.at += 1;
            match ch {
                '\\' => {
                    let escaped = self.peek().ok_or("unterminated escape")?;
                    self.at += 1;
                    match escaped {
                        'n' => text.push('\n'),
                        't' => text.push('\t'),
                        'r' => text.push('\r'),
                        '0' => text.push('\0'),
                        '\n' => {}
                        '\\' | '\'' | '"' => text.push(escaped),
                        other => {
                            text.push('\\');
                            text.push(other);
                        }
                    }
                }
                ch if ch == quote => return Ok(text),
                ch => text.push(ch),
            }
        }
        Err(format!("unterminated string starting at offset {start}"))
    }

    fn number(&mut self) -> Result<Value, String> {
        let start = self.at;
        while self.peek().is_some_and(|ch| ch.is_ascii_alphanumeric() || matches!(ch, '.' | '-' | '+' | '_')) {
            self.at += 1;
        }
        let text: String = self.chars[start..self.at].iter().filter(|ch| **ch != '_').collect();
        serde_json::from_str::<Value>(&text)
            .ok()
            .filter(Value::is_number)
            .ok_or_else(|| format!("{text:?} is not a number"))
    }

    fn name(&mut self) -> Result<Value, String> {
        let start = self.at;
        while self.peek().is_some_and(|ch| ch.is_ascii_alphanumeric() || ch == '_') {
            self.at += 1;
        }
        let name: String = self.chars[start..self.at].iter().collect();
        match name.as_str() {
            "True" => Ok(Value::Bool(true)),
            "False" => Ok(Value::Bool(false)),
            "None" => Ok(Value::Null),
            other => Err(format!("{other} is not a literal")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reads_what_literal_eval_reads() {
        let text = r#"[{'file_name': 'env/a.env', 'content': 'A=1\nB="x"'}, ("t", 2, -1.5, True, None)]"#;
        assert_eq!(
            parse(text).unwrap(),
            json!([{"file_name": "env/a.env", "content": "A=1\nB=\"x\""}, ["t", 2, -1.5, true, null]])
        );
        assert_eq!(parse(" [] ").unwrap(), json!([]));
    }

    #[test]
    fn refuses_what_is_not_a_literal() {
        for bad in ["__import__('os')", "[1,", "'open", "[1] 2", "{'a' 1}", "true"] {
            assert!(parse(bad).is_err(), "{bad}");
        }
        let deep = format!("{}{}", "[".repeat(100), "]".repeat(100));
        assert!(parse(&deep).unwrap_err().contains("deeper"));
    }
}
