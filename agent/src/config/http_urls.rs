//! The URLs of an `http` source: `url = "..."` (one URL, as before), `url = ["...", "..."]` or
//! `urls = [...]` (replicas of one service, in fail-over order; see docs/configuration.md). Serde
//! hands both keys over as TOML values, so that a value of the wrong kind is reported here like
//! every other problem, naming the key (an internally tagged `[[source]]` loses the position
//! serde would give). `validate` checks that exactly one of the two keys is given, that the list
//! is neither empty nor longer than `MAX_HTTP_URLS`, and each URL as a single one is checked,
//! naming `url[2]` (or `urls[2]`) when one in a list is wrong. No reason ever quotes a URL: its
//! query string may be a credential.

use toml::Value;

use super::{Problem, check_url};

/// The most URLs one `http` source may list: more replicas than this is a misconfiguration, and
/// a signal's origin is looked up in every list (see `signal::route`).
pub const MAX_HTTP_URLS: usize = 16;

/// The source's URLs from `url` (a string or a list of strings) and `urls` (a list); the problem
/// names the key as the config wrote it.
pub(super) fn validate(url: Option<Value>, urls: Option<Value>) -> Result<Vec<String>, Problem> {
    let (key, urls, listed) = match (url, urls) {
        (Some(_), Some(_)) => {
            return Err(("url".to_string(), "`url` and `urls` are both given; give only one of them".to_string()));
        }
        (None, None) => {
            return Err(("url".to_string(), "missing field `url` (a URL or a list of URLs; or `urls`)".to_string()));
        }
        (Some(Value::String(url)), None) => ("url", vec![url], false),
        (Some(value), None) => ("url", strings("url", value, "a URL or a list of URLs")?, true),
        (None, Some(value)) => ("urls", strings("urls", value, "a list of URLs")?, true),
    };
    if urls.is_empty() {
        return Err((key.to_string(), "the list is empty; give at least one URL".to_string()));
    }
    if urls.len() > MAX_HTTP_URLS {
        return Err((key.to_string(), format!("at most {MAX_HTTP_URLS} URLs, got {}", urls.len())));
    }
    let item_key = |index: usize| if listed { format!("{key}[{index}]") } else { key.to_string() };
    for (index, url) in urls.iter().enumerate() {
        check_url(url).map_err(|reason| (item_key(index), reason))?;
        if let Some(first) = urls[..index].iter().position(|earlier| earlier == url) {
            return Err((item_key(index), format!("the same URL as {}", item_key(first))));
        }
    }
    Ok(urls)
}

/// The strings of a TOML array; `expected` says what `key` should have been otherwise.
fn strings(key: &str, value: Value, expected: &str) -> Result<Vec<String>, Problem> {
    let Value::Array(items) = value else {
        return Err((key.to_string(), format!("must be {expected}, got {}", a_type(&value))));
    };
    items
        .into_iter()
        .enumerate()
        .map(|(index, item)| match item {
            Value::String(url) => Ok(url),
            other => Err((format!("{key}[{index}]"), format!("must be a URL (a string), got {}", a_type(&other)))),
        })
        .collect()
}

/// `an integer`, `a table`: the value's TOML type for a message (never the value: it may be a
/// credential).
pub(super) fn a_type(value: &Value) -> String {
    let name = value.type_str();
    let article = if name.starts_with(['a', 'e', 'i', 'o', 'u']) { "an" } else { "a" };
    format!("{article} {name}")
}
