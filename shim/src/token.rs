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

/// Lower-case hex of `bytes` (hashes, tokens and ids are printed this way on every signal and
/// every publication, so without a `format!` per byte).
pub(crate) fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut text = String::with_capacity(bytes.len() * 2);
    for byte in bytes {
        text.push(char::from(DIGITS[usize::from(byte >> 4)]));
        text.push(char::from(DIGITS[usize::from(byte & 0x0f)]));
    }
    text
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
    fn hex_and_hashes_print_as_stored_by_earlier_versions() {
        assert_eq!(hex(&[0x00, 0x0f, 0xa5, 0xff]), "000fa5ff");
        // Stored token hashes must not change: SHA-256("abc"), lower-case hex.
        assert_eq!(hash_token("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    }

    #[test]
    fn constant_time_comparison() {
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"abc", b"abd"));
        assert!(!constant_time_eq(b"abc", b"ab"));
    }
}
