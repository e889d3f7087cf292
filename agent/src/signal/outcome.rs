//! What one delivery attempt became, and the id that makes a resent signal recognisable: the
//! part of signalling the journal records (it depends on nothing else of the agent).

use sha2::{Digest, Sha256};

/// What became of one delivery attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum DeliveryOutcome {
    /// The receiver answered 2xx (`status` 0: the transport has nothing to send).
    Delivered { status: u16 },
    /// Worth retrying: 408, 429, 5xx, connection failures and timeouts.
    Transient { error: String },
    /// Retrying cannot help: other 4xx, 3xx, bad URLs, refused credentials, missing inputs.
    Permanent { error: String },
}

/// `"<derived id>-<first 16 hex digits of sha256(body)>"`: stable for one body, so a resend of
/// the same result carries the same key (`X-Anneal-Signal-Id`) and a changed body a new one.
pub(crate) fn signal_id(id: &str, body: &str) -> String {
    let digest = Sha256::digest(body.as_bytes());
    let hex: String = digest.iter().take(8).map(|byte| format!("{byte:02x}")).collect();
    format!("{id}-{hex}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signal_id_is_stable_per_body() {
        let first = signal_id("dep-1", "{\"a\": 1}");
        assert_eq!(first, signal_id("dep-1", "{\"a\": 1}"));
        assert_ne!(first, signal_id("dep-1", "{\"a\": 2}"));
        let (id, hex) = first.rsplit_once('-').unwrap();
        assert_eq!(id, "dep-1");
        assert_eq!(hex.len(), 16);
        assert!(hex.bytes().all(|byte| byte.is_ascii_hexdigit() && !byte.is_ascii_uppercase()));
    }
}
