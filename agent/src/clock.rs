//! The agent's one wall clock: unix milliseconds, the unit of every timestamp in the journal and
//! the source cache (see docs/journal.md).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Now in unix milliseconds (0 if the clock is before 1970).
pub(crate) fn now_millis() -> u64 {
    let since_epoch = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
    millis(since_epoch)
}

/// A duration in whole milliseconds, saturating.
pub(crate) fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn now_is_after_2020_and_millis_saturate() {
        assert!(now_millis() > 1_600_000_000_000);
        assert_eq!(millis(Duration::from_secs(2)), 2_000);
        assert_eq!(millis(Duration::MAX), u64::MAX);
    }
}
