//! Where `tests/peers/setup.sh` put the OpenStack peers (git-ignored `tests/peers/.cache`), and
//! the check every peer test starts with: a missing peer fails the test with a message saying
//! how to install it, it never skips.

use std::path::{Path, PathBuf};

/// The peers' cache directory, after checking that each of `required` (paths relative to it)
/// exists.
pub fn cache(required: &[&str]) -> PathBuf {
    let cache = Path::new(env!("CARGO_MANIFEST_DIR")).join("peers/.cache");
    for needed in required {
        assert!(
            cache.join(needed).exists(),
            "{} is missing: the OpenStack peer tests need tests/peers/setup.sh to have installed the peers \
             from PyPI (run it; it fails with a message naming the package when PyPI cannot be reached)",
            cache.join(needed).display()
        );
    }
    cache
}
