//! Keeping this replica's cached documents in step with commits made by other replicas of the
//! same PostgreSQL database: a notification names the servers a commit changed and their
//! documents are re-read (waking the long-polls held here), and one that names stacks wakes the
//! web view's followers of those stacks here; a resync (the notification
//! connection was re-made) and a periodic check compare every cached document's version with
//! the stored one, the safety net for a notification that never came (a resync also wakes every
//! followed stack). On SQLite (one process)
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
        let heard = tokio::select! {
            () = shutdown.cancelled() => return,
            notice = notices.recv() => match notice {
                Some(notice) => coalesce(notice, &mut notices),
                None => return,
            },
            // The safety net checks documents only: a followed stack is re-read on a resync.
            _ = check.tick() => Heard { servers: None, stacks: Some(Vec::new()) },
        };
        engine.stacks_changed(heard.stacks.as_deref());
        if heard.servers.as_ref().is_some_and(Vec::is_empty) {
            continue;
        }
        match engine.refresh_documents(heard.servers).await {
            Ok(0) => {}
            Ok(changed) => tracing::debug!(changed, "documents changed by other replicas"),
            Err(error) => tracing::warn!(error = %crate::error_chain(&error), "cannot refresh documents"),
        }
    }
}

/// What a burst of notices asks to bring up to date: the servers' documents and the stacks'
/// followers named, or (`None`) every one of them.
#[derive(Debug, PartialEq, Eq)]
struct Heard {
    servers: Option<Vec<String>>,
    stacks: Option<Vec<String>>,
}

/// The servers and stacks named by `first` and every notice already queued behind it, so a
/// burst of commits costs one refresh; everything (`None`) if any of them is a resync.
fn coalesce(first: DocumentNotice, queued: &mut mpsc::Receiver<DocumentNotice>) -> Heard {
    let (mut servers, mut stacks) = (BTreeSet::new(), BTreeSet::new());
    let mut notice = Some(first);
    while let Some(current) = notice {
        match current {
            DocumentNotice::Resync => return Heard { servers: None, stacks: None },
            DocumentNotice::Changed(names) => servers.extend(names),
            DocumentNotice::StacksChanged(names) => stacks.extend(names),
        }
        notice = queued.try_recv().ok();
    }
    Heard { servers: Some(servers.into_iter().collect()), stacks: Some(stacks.into_iter().collect()) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queued_notices_are_merged_and_a_resync_wins() {
        let (sender, mut receiver) = mpsc::channel(8);
        sender.try_send(DocumentNotice::Changed(vec!["b".into(), "a".into()])).unwrap();
        sender.try_send(DocumentNotice::StacksChanged(vec!["web".into()])).unwrap();
        let merged = coalesce(DocumentNotice::Changed(vec!["a".into()]), &mut receiver);
        let names = |names: &[&str]| Some(names.iter().map(ToString::to_string).collect::<Vec<_>>());
        assert_eq!(merged, Heard { servers: names(&["a", "b"]), stacks: names(&["web"]) });
        sender.try_send(DocumentNotice::Resync).unwrap();
        sender.try_send(DocumentNotice::Changed(vec!["c".into()])).unwrap();
        let everything = coalesce(DocumentNotice::Changed(vec!["a".into()]), &mut receiver);
        assert_eq!(everything, Heard { servers: None, stacks: None });
    }
}
