//! The web view's sessions as the store keeps them (`ui_sessions`): opened by a login, looked
//! up by every request of the view that carries the cookie (one primary-key read, outside any
//! write transaction), deleted by a logout, and pruned by retention once expired. The HTTP
//! layer hands in only a session's key, a keyed hash of its cookie's id: neither the id nor
//! the admin token reaches the store. Expiry is checked against this process's clock.

use super::context::now_millis;
use super::error::EngineError;
use super::transact::Engine;
use crate::store::{Store, UiSessionRow};

impl<S: Store> Engine<S> {
    /// Stores a session of `key` that lasts `lifetime_secs` from now.
    pub(super) async fn open_session(&self, key: String, lifetime_secs: u64) -> Result<(), EngineError> {
        self.transact(move |ctx| {
            let expires_at = ctx.now.saturating_add(lifetime_secs.saturating_mul(1000));
            let row = UiSessionRow { key, created_at: ctx.now, expires_at };
            // Keys are hashes of 256 random bits: a taken one is a caller's bug, not bad luck.
            if ctx.tx.insert_ui_session(&row)? {
                Ok(())
            } else {
                Err(EngineError::Conflict { what: "web view session".to_string() })
            }
        })
        .await
    }

    /// Whether the session of `key` exists and has not expired.
    pub(super) async fn session_valid(&self, key: String) -> Result<bool, EngineError> {
        let row = self.read(move |tx| tx.ui_session(&key)).await?;
        Ok(row.is_some_and(|row| row.expires_at > now_millis()))
    }

    /// Deletes the session of `key`; false when there was none.
    pub(super) async fn close_session(&self, key: String) -> Result<bool, EngineError> {
        self.transact(move |ctx| Ok(ctx.tx.delete_ui_session(&key)?)).await
    }
}
