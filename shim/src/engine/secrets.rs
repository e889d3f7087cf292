//! Capability tokens that never touch the database in clear. Signal tokens (per derived config)
//! and wait-condition handle tokens are HMAC-SHA256 of their ids under a key kept in a 0600 file
//! beside the database; the store keeps only their SHA-256. Values that must carry a token (a
//! deployment's `deploy_signal_id`, a handle's `curl_cli` pasted into a script by `str_replace`)
//! are stored with a placeholder, and rendering for an agent or an operator substitutes the token.
//! Rendering substitutes only the placeholders the engine placed (listed per entry, by kind and
//! id), and text from outside (signal bodies, handle signals, parameters) has the placeholder
//! prefix neutralised on the way in: no supplied value can make the shim reveal a token (see
//! docs/security.md).

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use hmac::{Hmac, Mac};
use sha2::Sha256;

use crate::token;

const PLACEHOLDER_PREFIX: &str = "@@anneal-token:";
const PLACEHOLDER_SUFFIX: &str = "@@";
/// Stands for the public URL of the replica that renders the value (`serve --public-url`), in
/// the URLs the engine places (a deployment's signal URL, a handle's endpoint): a document served
/// by a replica names that replica, which answered, rather than the one that published the
/// deployment, which may have died since. Not a secret: rendered wherever it appears.
pub const BASE_URL: &str = "@@anneal-token:base@@";
/// What supplied text's placeholder prefix becomes: readable, and never a placeholder.
const NEUTRALISED_PREFIX: &str = "@@anneal-token(neutralised):";

/// The key behind derived tokens.
pub struct TokenKey {
    key: Vec<u8>,
}

impl std::fmt::Debug for TokenKey {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str("TokenKey(***)")
    }
}

/// What a token is for; part of the MAC input so one kind can never stand for another.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Purpose {
    Signal,
    Handle,
    /// The token of a server a stack created (an `OS::Heat::DeployedServer` that was not
    /// registered): its id is the one the creating node's record keeps.
    Server,
}

impl Purpose {
    fn label(self) -> &'static str {
        match self {
            Purpose::Signal => "signal",
            Purpose::Handle => "handle",
            Purpose::Server => "server",
        }
    }
}

impl TokenKey {
    /// Reads the key at `path`, creating it (32 random bytes, hex, mode 0600) on first start.
    /// An existing key that group or others may read, or another user owns, is refused (see
    /// `token::check_private_file`).
    pub fn load_or_create(path: &Path) -> std::io::Result<TokenKey> {
        token::check_private_file(path).map_err(|error| std::io::Error::other(crate::error_chain(&error)))?;
        let text = match std::fs::read_to_string(path) {
            Ok(text) => text,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
                let fresh = token::new_token()?;
                let mut file = std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(path)?;
                file.write_all(fresh.as_bytes())?;
                file.sync_all()?;
                fresh
            }
            Err(error) => return Err(error),
        };
        let key = text.trim();
        if !token::is_well_formed(key) {
            return Err(std::io::Error::other(format!("{} does not hold a 64-hex-digit key", path.display())));
        }
        Ok(TokenKey::from_secret(key.as_bytes()))
    }

    pub fn from_secret(secret: &[u8]) -> TokenKey {
        TokenKey { key: secret.to_vec() }
    }

    /// The token for `id` (a derived config id or a handle id): 64 hex characters.
    pub fn token(&self, purpose: Purpose, id: &str) -> String {
        let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(&self.key) else { return String::new() };
        mac.update(purpose.label().as_bytes());
        mac.update(b":");
        mac.update(id.as_bytes());
        crate::token::hex(&mac.finalize().into_bytes())
    }

    /// What the store keeps to find the owner of a token.
    pub fn token_hash(&self, purpose: Purpose, id: &str) -> String {
        token::hash_token(&self.token(purpose, id))
    }

    /// Replaces each placeholder in `text` that `placed` lists with its token; any other
    /// placeholder, and anything that only looks like one, is left as it is (`BASE_URL` too).
    pub fn render(&self, text: &str, placed: &[String]) -> String {
        self.render_at(text, placed, None)
    }

    /// `render`, and every `BASE_URL` replaced by `base_url` when given.
    pub fn render_at(&self, text: &str, placed: &[String], base_url: Option<&str>) -> String {
        let mut rendered = String::with_capacity(text.len());
        let mut rest = text;
        while let Some(start) = rest.find(PLACEHOLDER_PREFIX) {
            rendered.push_str(&rest[..start]);
            if let (Some(base_url), Some(after)) = (base_url, rest[start..].strip_prefix(BASE_URL)) {
                rendered.push_str(base_url);
                rest = after;
                continue;
            }
            let after = &rest[start + PLACEHOLDER_PREFIX.len()..];
            match parse_placeholder(after).filter(|(purpose, id, _)| is_placed(placed, *purpose, id)) {
                Some((purpose, id, consumed)) => {
                    rendered.push_str(&self.token(purpose, id));
                    rest = &after[consumed..];
                }
                None => {
                    rendered.push_str(PLACEHOLDER_PREFIX);
                    rest = after;
                }
            }
        }
        rendered.push_str(rest);
        rendered
    }
}

/// The name of a placed token in an entry's list (`signal:<id>`, `handle:<id>`).
pub fn placed(purpose: Purpose, id: &str) -> String {
    format!("{}:{id}", purpose.label())
}

fn is_placed(placed: &[String], purpose: Purpose, id: &str) -> bool {
    placed.iter().any(|name| name.strip_prefix(purpose.label()).and_then(|rest| rest.strip_prefix(':')) == Some(id))
}

/// `text` with every placeholder prefix neutralised: for text from outside the engine, which
/// must never carry a placeholder into a stored value.
pub fn neutralise(text: &str) -> std::borrow::Cow<'_, str> {
    if text.contains(PLACEHOLDER_PREFIX) {
        std::borrow::Cow::Owned(text.replace(PLACEHOLDER_PREFIX, NEUTRALISED_PREFIX))
    } else {
        std::borrow::Cow::Borrowed(text)
    }
}

/// `signal:<id>@@...` → (purpose, id, bytes consumed including the suffix).
fn parse_placeholder(text: &str) -> Option<(Purpose, &str, usize)> {
    let labels = [(Purpose::Signal, "signal:"), (Purpose::Handle, "handle:"), (Purpose::Server, "server:")];
    let (purpose, label) = labels.into_iter().find(|(_, label)| text.starts_with(label))?;
    let body = &text[label.len()..];
    let end = body.find(PLACEHOLDER_SUFFIX)?;
    let id = &body[..end];
    let valid =
        !id.is_empty() && id.len() <= 200 && id.bytes().all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b));
    valid.then_some((purpose, id, label.len() + end + PLACEHOLDER_SUFFIX.len()))
}

/// The placeholder that stands for a token in stored values.
pub fn placeholder(purpose: Purpose, id: &str) -> String {
    format!("{PLACEHOLDER_PREFIX}{}:{id}{PLACEHOLDER_SUFFIX}", purpose.label())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_stable_distinct_and_rendered() {
        let key = TokenKey::from_secret(b"k");
        let signal = key.token(Purpose::Signal, "abc");
        assert_eq!(signal.len(), 64);
        assert_eq!(signal, key.token(Purpose::Signal, "abc"));
        assert_ne!(signal, key.token(Purpose::Handle, "abc"));
        assert_ne!(signal, TokenKey::from_secret(b"other").token(Purpose::Signal, "abc"));
        let stored = format!("curl -X POST http://h/v1/signals/{}", placeholder(Purpose::Signal, "abc"));
        assert!(!stored.contains(&signal));
        let abc = [placed(Purpose::Signal, "abc")];
        assert_eq!(key.render(&stored, &abc), format!("curl -X POST http://h/v1/signals/{signal}"));
        assert_eq!(key.token_hash(Purpose::Signal, "abc"), token::hash_token(&signal));
        assert_eq!(key.render("a @@anneal-token:bogus:x@@ b", &abc), "a @@anneal-token:bogus:x@@ b");
        let placed_url = format!("{BASE_URL}/v1/signals/{}", placeholder(Purpose::Signal, "abc"));
        assert_eq!(key.render(&placed_url, &abc), format!("{BASE_URL}/v1/signals/{signal}"), "no base given");
        assert_eq!(
            key.render_at(&placed_url, &abc, Some("https://replica-2:8080")),
            format!("https://replica-2:8080/v1/signals/{signal}")
        );
        assert_eq!(
            key.render_at(&placed_url, &[], Some("http://b")),
            format!("http://b/v1/signals/{}", placeholder(Purpose::Signal, "abc"))
        );
        assert_eq!(
            key.render("@@anneal-token:handle:h1@@@@anneal-token:", &[placed(Purpose::Handle, "h1")]),
            format!("{}@@anneal-token:", key.token(Purpose::Handle, "h1"))
        );
    }

    #[test]
    fn only_placed_tokens_are_rendered() {
        let key = TokenKey::from_secret(b"k");
        let text = format!(
            "{} {} {}",
            placeholder(Purpose::Signal, "own"),
            placeholder(Purpose::Signal, "victim"),
            placeholder(Purpose::Handle, "own")
        );
        let rendered = key.render(&text, &[placed(Purpose::Signal, "own")]);
        assert_eq!(
            rendered,
            format!(
                "{} {} {}",
                key.token(Purpose::Signal, "own"),
                placeholder(Purpose::Signal, "victim"),
                placeholder(Purpose::Handle, "own")
            )
        );
        assert!(!rendered.contains(&key.token(Purpose::Signal, "victim")));
        assert_eq!(
            key.render(&placeholder(Purpose::Signal, "wn"), &[placed(Purpose::Signal, "own")]),
            placeholder(Purpose::Signal, "wn"),
            "a suffix of a placed id is not placed"
        );
    }

    #[test]
    fn neutralised_text_holds_no_placeholder() {
        let key = TokenKey::from_secret(b"k");
        let supplied = format!("x {} y", placeholder(Purpose::Signal, "victim"));
        let stored = neutralise(&supplied);
        assert!(!stored.contains(PLACEHOLDER_PREFIX), "{stored}");
        assert_eq!(key.render(&stored, &[placed(Purpose::Signal, "victim")]), stored);
        assert_eq!(neutralise("plain @@anneal-token"), "plain @@anneal-token");
    }

    #[test]
    fn key_file_is_created_private_and_reused() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("shim.key");
        let first = TokenKey::load_or_create(&path).unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
        let second = TokenKey::load_or_create(&path).unwrap();
        assert_eq!(first.token(Purpose::Handle, "x"), second.token(Purpose::Handle, "x"));
        std::fs::write(&path, "garbage").unwrap();
        assert!(TokenKey::load_or_create(&path).is_err());
        std::fs::write(&path, token::new_token().unwrap()).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o640)).unwrap();
        let message = TokenKey::load_or_create(&path).unwrap_err().to_string();
        assert!(message.contains("shim.key") && message.contains("chmod 600"), "{message}");
    }
}
