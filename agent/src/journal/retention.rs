//! Which journal entries retention may remove (see docs/journal.md, "Retention"). An entry is the
//! agent's only memory that a deployment ran, so removing one whose id the metadata still lists
//! would run that deployment again: only entries of deployments that left the metadata, that owe
//! nothing (`signalled` or `skipped`) and that have been quiet for the retention period go.

use std::time::Duration;

use super::{Entry, State};
use crate::clock::millis;

/// Whether `entry` may be removed at `now` (Unix ms). `listed` says whether the current metadata
/// still lists its id; `retention` `None` keeps every entry.
pub(crate) fn expired(entry: &Entry, listed: bool, now: u64, retention: Option<Duration>) -> bool {
    let Some(retention) = retention else { return false };
    if listed || !matches!(entry.state, State::Signalled | State::Skipped) {
        return false;
    }
    last_activity(entry).saturating_add(millis(retention)) <= now
}

/// The latest time the entry records: delivery, the end of the run, or when it was first seen.
fn last_activity(entry: &Entry) -> u64 {
    let finished = entry.run.as_ref().and_then(|run| run.finished_at);
    let delivered = entry.signal.as_ref().and_then(|signal| signal.delivered_at);
    [Some(entry.seen_at), finished, delivered].into_iter().flatten().max().unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use anneal_protocol::{Deployment, HookResult};
    use serde_json::json;

    use super::*;
    use crate::signal::outcome::DeliveryOutcome;

    const DAY: Duration = Duration::from_secs(86_400);
    const DAY_MS: u64 = 86_400_000;

    fn entry(inputs: serde_json::Value) -> Entry {
        let deployment: Deployment =
            serde_json::from_value(json!({"id": "d", "group": "script", "config": "", "inputs": inputs})).unwrap();
        Entry::seen(&deployment, 1_000)
    }

    fn http_inputs() -> serde_json::Value {
        json!([{"name": "deploy_signal_id", "value": "http://127.0.0.1:1/signal"}])
    }

    #[test]
    fn only_departed_quiet_entries_that_owe_nothing_expire() {
        let mut delivered = entry(http_inputs());
        delivered.started(2_000).unwrap();
        delivered.finished(HookResult::from_process("", "", 0), 3_000).unwrap();
        assert!(!expired(&delivered, false, 3_000 + 10 * DAY_MS, Some(DAY)), "finished, not delivered");
        delivered.delivery_attempted(DeliveryOutcome::Delivered { status: 200 }, 5 * DAY_MS);
        assert_eq!(delivered.state, State::Signalled);

        // Counted from the delivery, the latest thing it records.
        assert!(!expired(&delivered, false, 6 * DAY_MS - 1, Some(DAY)));
        assert!(expired(&delivered, false, 6 * DAY_MS, Some(DAY)));
        assert!(!expired(&delivered, true, 600 * DAY_MS, Some(DAY)), "still listed: never");
        assert!(!expired(&delivered, false, 600 * DAY_MS, None), "no retention: never");

        let mut skipped = entry(json!([]));
        skipped.skipped("os-apply-config".into());
        assert!(expired(&skipped, false, 1_000 + DAY_MS, Some(DAY)));
        assert!(!expired(&skipped, true, 1_000 + DAY_MS, Some(DAY)));

        let seen = entry(json!([]));
        assert!(!expired(&seen, false, 600 * DAY_MS, Some(DAY)), "seen: decided again, kept");
    }
}
