//! Bearer tokens: 256 random bits as hex, stored only as their SHA-256 (hex), compared in
//! constant time. Server tokens, signal tokens, wait-condition handle tokens and the admin token
//! all follow these rules.

use rand::TryRngCore;
use sha2::{Digest, Sha256};

/// A fresh token: 32 random bytes from the OS generator, as 64 hex characters. Fails only when
/// the OS cannot give randomness, in which case no token must be made at all.
pub fn new_token() -> std::io::Result<String> {
    let mut bytes = [0u8; 32];
    rand::rngs::OsRng.try_fill_bytes(&mut bytes).map_err(|error| std::io::Error::other(error.to_string()))?;
    Ok(hex(&bytes))
}

/// What the store keeps instead of the token.
pub fn hash_token(token: &str) -> String {
    hex(&Sha256::digest(token.as_bytes()))
}

/// Whether `token` has the shape of one of ours (cheap pre-check before any lookup).
pub fn is_well_formed(token: &str) -> bool {
    token.len() == 64 && token.bytes().all(|byte| byte.is_ascii_hexdigit())
}

/// Equality whose time does not depend on where the inputs differ.
pub fn constant_time_eq(left: &[u8], right: &[u8]) -> bool {
    if left.len() != right.len() {
        return false;
    }
    left.iter().zip(right).fold(0u8, |difference, (a, b)| difference | (a ^ b)) == 0
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_random_well_formed_and_hashed() {
        let first = new_token().unwrap();
        let second = new_token().unwrap();
        assert_ne!(first, second);
        assert!(is_well_formed(&first));
        assert!(!is_well_formed("short"));
        assert!(!is_well_formed(&"g".repeat(64)));
        let hash = hash_token(&first);
        assert_eq!(hash.len(), 64);
        assert_ne!(hash, first);
        assert_eq!(hash, hash_token(&first));
    }

    #[test]
    fn constant_time_comparison() {
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"abc", b"abd"));
        assert!(!constant_time_eq(b"abc", b"ab"));
    }
}
