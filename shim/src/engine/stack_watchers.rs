//! Who follows which stack's graph: the web view's live streams (through the HTTP layer's one
//! watcher per stack) hold a receiver of a stack's change count, which the engine bumps after
//! each commit that wrote the stack's row, nodes or edges (`Tx::changed_stacks`), and after
//! other replicas' commits that PostgreSQL announced. Nothing here reads the store: a bump
//! only says "read it again". A stack nobody follows costs nothing; its entry goes with its
//! last receiver.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use tokio::sync::watch;

#[derive(Default)]
pub(super) struct StackWatchers {
    senders: Mutex<HashMap<String, watch::Sender<u64>>>,
}

impl StackWatchers {
    /// A receiver whose value changes whenever `stack`'s graph may have changed.
    pub(super) fn subscribe(&self, stack: &str) -> watch::Receiver<u64> {
        let mut senders = self.senders.lock().unwrap_or_else(PoisonError::into_inner);
        // Entries whose every receiver is gone are dropped here, so the map holds only
        // stacks someone follows (plus at most this one).
        senders.retain(|_, sender| sender.receiver_count() > 0);
        senders.entry(stack.to_string()).or_insert_with(|| watch::channel(0).0).subscribe()
    }

    /// Wakes the followers of `stacks`.
    pub(super) fn changed(&self, stacks: &[String]) {
        if stacks.is_empty() {
            return;
        }
        let senders = self.senders.lock().unwrap_or_else(PoisonError::into_inner);
        for stack in stacks {
            if let Some(sender) = senders.get(stack) {
                sender.send_modify(|count| *count = count.wrapping_add(1));
            }
        }
    }

    /// Wakes every follower (changes may have been missed: see `replication`).
    pub(super) fn changed_all(&self) {
        let senders = self.senders.lock().unwrap_or_else(PoisonError::into_inner);
        for sender in senders.values() {
            sender.send_modify(|count| *count = count.wrapping_add(1));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn followers_are_woken_by_their_stack_only_and_forgotten_with_their_last_receiver() {
        let watchers = StackWatchers::default();
        let mut app = watchers.subscribe("app");
        let other = watchers.subscribe("other");
        watchers.changed(&["app".to_string(), "nobody".to_string()]);
        assert!(app.has_changed().unwrap());
        assert!(!other.has_changed().unwrap());
        app.mark_unchanged();
        watchers.changed_all();
        assert!(app.has_changed().unwrap() && other.has_changed().unwrap());
        drop(app);
        drop(other);
        let _again = watchers.subscribe("third");
        assert_eq!(watchers.senders.lock().unwrap().len(), 1, "unfollowed stacks are forgotten");
    }
}
