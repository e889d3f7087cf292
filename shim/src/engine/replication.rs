//! Keeping this replica's cached documents in step with commits made by other replicas of the
//! same PostgreSQL database: a notification names the servers a commit changed and their
//! documents are re-read (waking the long-polls held here); a resync (the notification
//! connection was re-made) and a periodic check compare every cached document's version with
//! the stored one, the safety net for a notification that never came. On SQLite (one process)
//! there is nothing to follow and this returns at once.

use std::collections::BTreeSet;
use std::time::Duration;

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::transact::Engine;
use crate::store::{DocumentNotice, Store};

/// How often every cached document is checked against the store, notifications or not.
pub const VERSION_CHECK_INTERVAL: Duration = Duration::from_secs(5);

/// Runs until `shutdown`.
pub async fn run<S: Store>(engine: Engine<S>, shutdown: CancellationToken) {
    let Some(mut notices) = engine.store().watch_documents(shutdown.clone()) else { return };
    let mut check = tokio::time::interval(VERSION_CHECK_INTERVAL);
    check.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let servers = tokio::select! {
            () = shutdown.cancelled() => return,
            notice = notices.recv() => match notice {
                Some(notice) => coalesce(notice, &mut notices),
                None => return,
            },
            _ = check.tick() => None,
        };
        match engine.refresh_documents(servers).await {
            Ok(0) => {}
            Ok(changed) => tracing::debug!(changed, "documents changed by other replicas"),
            Err(error) => tracing::warn!(error = %crate::error_chain(&error), "cannot refresh documents"),
        }
    }
}

/// The servers named by `first` and every notice already queued behind it, so a burst of
/// commits costs one refresh; `None` (check everything) if any of them is a resync.
fn coalesce(first: DocumentNotice, queued: &mut mpsc::Receiver<DocumentNotice>) -> Option<Vec<String>> {
    let mut servers = BTreeSet::new();
    let mut notice = Some(first);
    while let Some(current) = notice {
        match current {
            DocumentNotice::Resync => return None,
            DocumentNotice::Changed(names) => servers.extend(names),
        }
        notice = queued.try_recv().ok();
    }
    Some(servers.into_iter().collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queued_notices_are_merged_and_a_resync_wins() {
        let (sender, mut receiver) = mpsc::channel(8);
        sender.try_send(DocumentNotice::Changed(vec!["b".into(), "a".into()])).unwrap();
        let merged = coalesce(DocumentNotice::Changed(vec!["a".into()]), &mut receiver);
        assert_eq!(merged, Some(vec!["a".to_string(), "b".to_string()]));
        sender.try_send(DocumentNotice::Resync).unwrap();
        sender.try_send(DocumentNotice::Changed(vec!["c".into()])).unwrap();
        assert_eq!(coalesce(DocumentNotice::Changed(vec!["a".into()]), &mut receiver), None);
    }
}
