//! The tokens of a yaql expression, as yaql.language.lexer reads them: numbers (`12`, `1.5`),
//! quoted strings (`'..'`, `".."` with Python escapes, `` `..` `` verbatim), `$` variables,
//! names (a name directly followed by `(` is a function call), the operator words (`and`,
//! `or`, `not`, `in`, `mod`) and the operator symbols, longest first.

use super::YaqlError;

#[derive(Debug, Clone, PartialEq)]
pub(super) enum Token {
    Integer(i64),
    Float(f64),
    Text(String),
    /// `$`, `$name`, `$1`: the name without the dollar.
    Variable(String),
    /// A bare name: a keyword constant (a string) or an attribute after `.`.
    Name(String),
    /// A name directly followed by `(`, which the token includes.
    Call(String),
    True,
    False,
    Null,
    /// An operator symbol or word, or punctuation.
    Symbol(&'static str),
}

/// A token and the character offset where it starts.
pub(super) type Spanned = (Token, usize);

const SYMBOLS: &[&str] = &[
    "?.", "=>", "->", "=~", "!~", ">=", "<=", "!=", ".", "[", "]", "{", "}", "(", ")", ",", "+", "-", "*", "/", ">",
    "<", "=",
];
const WORDS: &[&str] = &["and", "or", "not", "in", "mod"];

pub(super) fn tokenize(expression: &str) -> Result<Vec<Spanned>, YaqlError> {
    let chars: Vec<char> = expression.chars().collect();
    let mut tokens = Vec::new();
    let mut position = 0;
    while position < chars.len() {
        let c = chars[position];
        if matches!(c, ' ' | '\t' | '\r' | '\n') {
            position += 1;
            continue;
        }
        let start = position;
        let token = if c.is_ascii_digit() {
            number(&chars, &mut position)?
        } else if c == '\'' || c == '"' || c == '`' {
            quoted(&chars, &mut position, c)?
        } else if c == '$' {
            position += 1;
            Token::Variable(take_word(&chars, &mut position))
        } else if c.is_alphabetic() || c == '_' {
            word(&chars, &mut position)
        } else if let Some(symbol) = SYMBOLS.iter().find(|symbol| starts_with(&chars[position..], symbol)) {
            position += symbol.chars().count();
            Token::Symbol(symbol)
        } else {
            return Err(YaqlError::Syntax { position: start, message: format!("illegal character '{c}'") });
        };
        tokens.push((token, start));
    }
    Ok(tokens)
}

fn starts_with(chars: &[char], symbol: &str) -> bool {
    symbol.chars().enumerate().all(|(index, c)| chars.get(index) == Some(&c))
}

fn is_word_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

fn take_word(chars: &[char], position: &mut usize) -> String {
    let start = *position;
    while *position < chars.len() && is_word_char(chars[*position]) {
        *position += 1;
    }
    chars[start..*position].iter().collect()
}

fn word(chars: &[char], position: &mut usize) -> Token {
    let name = take_word(chars, position);
    if chars.get(*position) == Some(&'(') {
        *position += 1;
        return Token::Call(name);
    }
    match name.as_str() {
        "true" => Token::True,
        "false" => Token::False,
        "null" => Token::Null,
        _ => match WORDS.iter().find(|word| **word == name) {
            Some(word) => Token::Symbol(word),
            None => Token::Name(name),
        },
    }
}

/// `\d+(\.?\d+)?` as a whole word: an integer or a float.
fn number(chars: &[char], position: &mut usize) -> Result<Token, YaqlError> {
    let start = *position;
    let digits = |position: &mut usize| {
        while *position < chars.len() && chars[*position].is_ascii_digit() {
            *position += 1;
        }
    };
    digits(position);
    let mut float = false;
    if chars.get(*position) == Some(&'.') && chars.get(*position + 1).is_some_and(char::is_ascii_digit) {
        float = true;
        *position += 1;
        digits(position);
    }
    if chars.get(*position).is_some_and(|c| is_word_char(*c)) {
        return Err(YaqlError::Syntax {
            position: *position,
            message: format!("illegal character '{}'", chars[*position]),
        });
    }
    let text: String = chars[start..*position].iter().collect();
    let invalid = || YaqlError::Syntax { position: start, message: format!("number {text} is out of range") };
    if float {
        text.parse().map(Token::Float).map_err(|_| invalid())
    } else {
        text.parse().map(Token::Integer).map_err(|_| invalid())
    }
}

fn quoted(chars: &[char], position: &mut usize, quote: char) -> Result<Token, YaqlError> {
    let start = *position;
    *position += 1;
    let mut text = String::new();
    while *position < chars.len() {
        let c = chars[*position];
        if c == quote {
            *position += 1;
            return Ok(Token::Text(text));
        }
        if c == '\\' && *position + 1 < chars.len() {
            if quote == '`' {
                let next = chars[*position + 1];
                if next != '`' {
                    text.push('\\');
                }
                text.push(next);
                *position += 2;
                continue;
            }
            escape(chars, position, &mut text)?;
            continue;
        }
        text.push(c);
        *position += 1;
    }
    Err(YaqlError::Syntax { position: start, message: "unterminated string".into() })
}

/// Python's escapes (`\n`, `\t`, `\\`, `\'`, `\"`, `\xNN`, `\uNNNN`, `\UNNNNNNNN`, octal);
/// any other backslash stays as written, as Python's `unicode-escape` leaves it.
fn escape(chars: &[char], position: &mut usize, text: &mut String) -> Result<(), YaqlError> {
    let start = *position;
    let next = chars[*position + 1];
    let simple = match next {
        '\\' => Some('\\'),
        '\'' => Some('\''),
        '"' => Some('"'),
        'a' => Some('\u{7}'),
        'b' => Some('\u{8}'),
        'f' => Some('\u{c}'),
        'n' => Some('\n'),
        'r' => Some('\r'),
        't' => Some('\t'),
        'v' => Some('\u{b}'),
        _ => None,
    };
    if let Some(c) = simple {
        text.push(c);
        *position += 2;
        return Ok(());
    }
    let (width, radix) = match next {
        'x' => (2, 16),
        'u' => (4, 16),
        'U' => (8, 16),
        '0'..='7' => (0, 8),
        _ => {
            text.push('\\');
            *position += 1;
            return Ok(());
        }
    };
    let digits_start = if radix == 8 { *position + 1 } else { *position + 2 };
    let limit = if radix == 8 { 3 } else { width };
    let mut end = digits_start;
    while end < chars.len() && end - digits_start < limit && chars[end].is_digit(radix) {
        end += 1;
    }
    let digits: String = chars[digits_start..end].iter().collect();
    let code = u32::from_str_radix(&digits, radix).ok().filter(|_| radix == 8 || digits.len() == width);
    let Some(c) = code.and_then(char::from_u32) else {
        return Err(YaqlError::Syntax { position: start, message: format!("invalid escape \\{next}{digits}") });
    };
    text.push(c);
    *position = end;
    Ok(())
}
