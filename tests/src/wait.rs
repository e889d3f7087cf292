//! Waiting with deadlines: poll a check until it yields a value or the deadline passes, then
//! panic naming what was awaited.

use std::future::Future;
use std::time::{Duration, Instant};

/// How often checks are repeated.
pub const POLL: Duration = Duration::from_millis(50);

/// Calls `check` every `POLL` until it returns `Some`; panics with `what` after `limit`.
pub async fn wait_until<T, F, Fut>(limit: Duration, what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = Instant::now() + limit;
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(Instant::now() < deadline, "timed out after {limit:?} waiting for: {what}");
        tokio::time::sleep(POLL).await;
    }
}

/// Synchronous conditions: waits until `condition` holds.
pub async fn eventually(limit: Duration, what: &str, mut condition: impl FnMut() -> bool) {
    wait_until(limit, what, || std::future::ready(condition().then_some(()))).await;
}
