//! `make_url`, as heat.engine.hot.functions.MakeURL: Python's `urllib.parse.quote`,
//! `urlencode` and `urlunsplit` rules for each component.

use serde_json::Value;

use crate::template::expr::EvalError;
use crate::template::expr::values::render;

const KEYS: &[&str] = &["scheme", "username", "password", "host", "port", "path", "query", "fragment"];

/// Schemes `urlunsplit` writes `//` for even without a host (urllib.parse.uses_netloc).
const USES_NETLOC: &[&str] = &[
    "ftp", "http", "gopher", "nntp", "telnet", "imap", "wais", "file", "mms", "https", "shttp", "snews", "prospero",
    "rtsp", "rtspu", "rsync", "svn", "svn+ssh", "sftp", "nfs", "git", "git+ssh", "ws", "wss",
];

fn invalid(message: impl Into<String>) -> EvalError {
    EvalError::Invalid { message: message.into() }
}

/// `urllib.parse.quote(text, safe)`: unreserved characters and `safe` stay, the rest is
/// percent-encoded UTF-8.
fn quote(text: &str, safe: &str) -> String {
    let mut out = String::new();
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || b"_.-~".contains(&byte) || safe.as_bytes().contains(&byte) {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

/// `quote_plus`: spaces become `+`.
fn quote_plus(text: &str) -> String {
    quote(text, " ").replace(' ', "+")
}

fn text<'a>(args: &'a serde_json::Map<String, Value>, key: &str) -> Result<&'a str, EvalError> {
    match args.get(key) {
        None => Ok(""),
        Some(Value::String(text)) => Ok(text),
        Some(_) => Err(invalid(format!("The \"{key}\" argument to \"make_url\" must be a string"))),
    }
}

pub fn make_url(args: Value) -> Result<Value, EvalError> {
    let Value::Object(args) = args else { return Err(invalid("The arguments to \"make_url\" must be a map")) };
    let unknown: Vec<&str> = args.keys().map(String::as_str).filter(|key| !KEYS.contains(key)).collect();
    if !unknown.is_empty() {
        return Err(invalid(format!("Invalid arguments to \"make_url\": {}", unknown.join(", "))));
    }
    let scheme = text(&args, "scheme")?;
    if scheme.contains(':') {
        return Err(invalid("URL \"scheme\" should not contain ':'"));
    }
    let mut netloc = String::new();
    let (username, password) = (quote(text(&args, "username")?, ""), quote(text(&args, "password")?, ""));
    if !username.is_empty() || !password.is_empty() {
        netloc.push_str(&username);
        if !password.is_empty() {
            netloc.push(':');
            netloc.push_str(&password);
        }
        netloc.push('@');
    }
    let mut host = text(&args, "host")?;
    if host.starts_with('[') && host.ends_with(']') && host.len() >= 2 {
        host = &host[1..host.len() - 1];
    }
    let host = quote(host, ":");
    netloc.push_str(&if host.contains(':') { format!("[{host}]") } else { host });
    if let Some(port) = port(&args)? {
        netloc.push(':');
        netloc.push_str(&port);
    }
    let path = quote(text(&args, "path")?, "/");
    let query = query(&args)?;
    let fragment = quote(text(&args, "fragment")?, "/");
    Ok(Value::String(unsplit(scheme, &netloc, path, &query, &fragment)))
}

fn port(args: &serde_json::Map<String, Value>) -> Result<Option<String>, EvalError> {
    let Some(port) = args.get("port") else { return Ok(None) };
    let number = match port {
        Value::Number(number) => number.as_i64(),
        Value::String(text) => {
            Some(text.trim().parse::<i64>().map_err(|_| invalid(format!("Invalid URL port \"{text}\" for make_url")))?)
        }
        _ => None,
    };
    match number {
        Some(number) if (1..=65535).contains(&number) => Ok(Some(render(port))),
        Some(number) => Err(invalid(format!("Invalid URL port {number}, must be in range 1-65535"))),
        None => Err(invalid("The \"port\" argument to \"make_url\" must be an integer")),
    }
}

fn query(args: &serde_json::Map<String, Value>) -> Result<String, EvalError> {
    match args.get("query") {
        None => Ok(String::new()),
        Some(Value::Object(map)) => {
            let pairs: Vec<String> = map
                .iter()
                .map(|(key, value)| format!("{}={}", quote_plus(key), quote_plus(&render_python(value))))
                .collect();
            Ok(pairs.join("&").replace("%2F", "/"))
        }
        Some(_) => Err(invalid("The \"query\" argument to \"make_url\" must be a map")),
    }
}

/// `str(value)` as `urlencode` applies it (None is "None" there, unlike in `render`).
fn render_python(value: &Value) -> String {
    match value {
        Value::Null => "None".into(),
        other => render(other),
    }
}

fn unsplit(scheme: &str, netloc: &str, mut path: String, query: &str, fragment: &str) -> String {
    if !netloc.is_empty() || (!scheme.is_empty() && USES_NETLOC.contains(&scheme) && !path.starts_with("//")) {
        if !path.is_empty() && !path.starts_with('/') {
            path.insert(0, '/');
        }
        path = format!("//{netloc}{path}");
    }
    let mut url = if scheme.is_empty() { path } else { format!("{scheme}:{path}") };
    if !query.is_empty() {
        url.push('?');
        url.push_str(query);
    }
    if !fragment.is_empty() {
        url.push('#');
        url.push_str(fragment);
    }
    url
}
