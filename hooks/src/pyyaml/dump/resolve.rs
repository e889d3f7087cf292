//! PyYAML's implicit resolvers (YAML 1.1): whether a plain scalar would read back as something
//! other than a string (a bool, int, float, null, timestamp, merge or value key), in which case
//! the emitter must quote it. Hand-written matchers for PyYAML's regular expressions.

/// `True` when `text` written plain would not resolve to `str`.
pub(super) fn is_implicit_non_string(text: &str) -> bool {
    const WORDS: [&str; 25] = [
        "yes", "Yes", "YES", "no", "No", "NO", "true", "True", "TRUE", "false", "False", "FALSE", "on", "On", "ON",
        "off", "Off", "OFF", "", "~", "null", "Null", "NULL", "<<", "=",
    ];
    WORDS.contains(&text) || is_int(text.as_bytes()) || is_float(text.as_bytes()) || is_timestamp(text.as_bytes())
}

/// A cursor over ASCII bytes for the matchers.
struct Cursor<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Cursor<'_> {
    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.at).copied()
    }

    fn eat(&mut self, accept: impl Fn(u8) -> bool) -> bool {
        match self.peek() {
            Some(byte) if accept(byte) => {
                self.at += 1;
                true
            }
            _ => false,
        }
    }

    /// Eats bytes while `accept`; how many.
    fn eat_all(&mut self, accept: impl Fn(u8) -> bool) -> usize {
        let from = self.at;
        while self.eat(&accept) {}
        self.at - from
    }

    fn eat_str(&mut self, text: &str) -> bool {
        if self.bytes[self.at..].starts_with(text.as_bytes()) {
            self.at += text.len();
            return true;
        }
        false
    }

    fn done(&self) -> bool {
        self.at == self.bytes.len()
    }
}

fn digit_(byte: u8) -> bool {
    byte.is_ascii_digit() || byte == b'_'
}

fn cursor(bytes: &[u8]) -> Cursor<'_> {
    Cursor { bytes, at: 0 }
}

fn signed(bytes: &[u8]) -> Cursor<'_> {
    let mut cursor = cursor(bytes);
    cursor.eat(|byte| byte == b'+' || byte == b'-');
    cursor
}

/// `(?::[0-5]?[0-9])+`, the sexagesimal tail.
fn sexagesimal(cursor: &mut Cursor<'_>) -> bool {
    let mut parts = 0;
    while cursor.eat(|byte| byte == b':') {
        let digits = cursor.eat_all(|byte| byte.is_ascii_digit());
        let part = &cursor.bytes[cursor.at - digits..cursor.at];
        if !(digits == 1 || (digits == 2 && part[0] <= b'5')) {
            return false;
        }
        parts += 1;
    }
    parts > 0
}

/// `[-+]?0b[0-1_]+ | [-+]?0[0-7_]+ | [-+]?(?:0|[1-9][0-9_]*) | [-+]?0x[0-9a-fA-F_]+ |
/// [-+]?[1-9][0-9_]*(?::[0-5]?[0-9])+`
fn is_int(bytes: &[u8]) -> bool {
    let body = signed(bytes);
    let rest = &bytes[body.at..];
    let all = |from: usize, accept: fn(u8) -> bool| rest.len() > from && rest[from..].iter().all(|&b| accept(b));
    if rest.starts_with(b"0b") {
        return all(2, |byte| matches!(byte, b'0' | b'1' | b'_'));
    }
    if rest.starts_with(b"0x") {
        return all(2, |byte| byte.is_ascii_hexdigit() || byte == b'_');
    }
    if rest == b"0" || (rest.first() == Some(&b'0') && all(1, |byte| matches!(byte, b'0'..=b'7' | b'_'))) {
        return true;
    }
    let mut cursor = cursor(rest);
    if !cursor.eat(|byte| matches!(byte, b'1'..=b'9')) {
        return false;
    }
    cursor.eat_all(digit_);
    cursor.done() || (sexagesimal(&mut cursor) && cursor.done())
}

/// `[-+]?[0-9][0-9_]*\.[0-9_]*(?:[eE][-+][0-9]+)? | \.[0-9][0-9_]*(?:[eE][-+][0-9]+)? |
/// [-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+\.[0-9_]* | [-+]?\.(?:inf|Inf|INF) | \.(?:nan|NaN|NAN)`
fn is_float(bytes: &[u8]) -> bool {
    if [&b".nan"[..], b".NaN", b".NAN"].contains(&bytes) {
        return true;
    }
    let mut cursor = signed(bytes);
    let signed_at = cursor.at;
    if cursor.eat_str(".inf") || cursor.eat_str(".Inf") || cursor.eat_str(".INF") {
        return cursor.done();
    }
    let exponent = |cursor: &mut Cursor<'_>| {
        if cursor.eat(|byte| byte == b'e' || byte == b'E') {
            return cursor.eat(|byte| byte == b'+' || byte == b'-') && cursor.eat_all(|b| b.is_ascii_digit()) > 0;
        }
        true
    };
    if cursor.peek() == Some(b'.') {
        // The form without digits before the point takes no sign.
        if signed_at != 0 {
            return false;
        }
        cursor.at += 1;
        return cursor.eat(|byte| byte.is_ascii_digit()) && {
            cursor.eat_all(digit_);
            exponent(&mut cursor) && cursor.done()
        };
    }
    if !cursor.eat(|byte| byte.is_ascii_digit()) {
        return false;
    }
    cursor.eat_all(digit_);
    if cursor.peek() == Some(b':') && !sexagesimal(&mut cursor) {
        return false;
    }
    let sexagesimal_form = cursor.bytes[signed_at..cursor.at].contains(&b':');
    if !cursor.eat(|byte| byte == b'.') {
        return false;
    }
    cursor.eat_all(digit_);
    if sexagesimal_form { cursor.done() } else { exponent(&mut cursor) && cursor.done() }
}

/// `[0-9]{4}-[0-9]{2}-[0-9]{2}`, or `[0-9]{4}-[0-9]{1,2}-[0-9]{1,2}([Tt]|[ \t]+)[0-9]{1,2}:[0-9]{2}:
/// [0-9]{2}(\.[0-9]*)?([ \t]*(Z|[-+][0-9]{1,2}(:[0-9]{2})?))?`
fn is_timestamp(bytes: &[u8]) -> bool {
    let mut cursor = cursor(bytes);
    let digits = |cursor: &mut Cursor<'_>, min: usize, max: usize| {
        let count = cursor.eat_all(|byte| byte.is_ascii_digit());
        (min..=max).contains(&count)
    };
    let dash = |cursor: &mut Cursor<'_>| cursor.eat(|byte| byte == b'-');
    if !(digits(&mut cursor, 4, 4) && dash(&mut cursor)) {
        return false;
    }
    let month = cursor.eat_all(|byte| byte.is_ascii_digit());
    if !(dash(&mut cursor)) {
        return false;
    }
    let day = cursor.eat_all(|byte| byte.is_ascii_digit());
    if cursor.done() {
        return month == 2 && day == 2;
    }
    if !((1..=2).contains(&month) && (1..=2).contains(&day)) {
        return false;
    }
    let blank = |byte: u8| byte == b' ' || byte == b'\t';
    if !(cursor.eat(|byte| byte == b'T' || byte == b't') || cursor.eat_all(blank) > 0) {
        return false;
    }
    let colon = |cursor: &mut Cursor<'_>| cursor.eat(|byte| byte == b':');
    if !(digits(&mut cursor, 1, 2) && colon(&mut cursor) && digits(&mut cursor, 2, 2)) {
        return false;
    }
    if !(colon(&mut cursor) && digits(&mut cursor, 2, 2)) {
        return false;
    }
    if cursor.eat(|byte| byte == b'.') {
        cursor.eat_all(|byte| byte.is_ascii_digit());
    }
    cursor.eat_all(blank);
    if cursor.eat(|byte| byte == b'Z') {
        return cursor.done();
    }
    if cursor.eat(|byte| byte == b'+' || byte == b'-') {
        if !digits(&mut cursor, 1, 2) {
            return false;
        }
        if colon(&mut cursor) && !digits(&mut cursor, 2, 2) {
            return false;
        }
    }
    cursor.done()
}
