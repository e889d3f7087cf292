//! History retention: a loop beside the sweeper that keeps the `events` and `retired_signals`
//! tables bounded (see docs/http-api.md, "Retention"), and removes expired web view sessions.
//! What goes is the store's rule (`Tx::prune_history`, `Tx::prune_ui_sessions`); this only runs
//! it now and then, each pass in its own transactions.

use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::error::EngineError;
use super::transact::Engine;
use crate::store::{HistoryPruned, HistoryRetention, Store};

/// How often retention runs: often enough that a busy stack overshoots its cap by little, rarely
/// enough that its scans cost nothing noticeable.
pub const RETENTION_INTERVAL: Duration = Duration::from_secs(300);

/// Runs a pass at once, then every `interval`, until `shutdown`.
pub async fn run<S: Store>(
    engine: Engine<S>,
    retention: HistoryRetention,
    interval: Duration,
    shutdown: CancellationToken,
) {
    loop {
        match prune(&engine, retention).await {
            Ok(HistoryPruned { events: 0, retired_signals: 0 }) => {}
            Ok(pruned) => {
                tracing::info!(events = pruned.events, retired_signals = pruned.retired_signals, "history pruned");
            }
            Err(error) => tracing::error!(error = %crate::error_chain(&error), "history retention pass failed"),
        }
        match prune_sessions(&engine).await {
            Ok(0) => {}
            Ok(sessions) => tracing::info!(sessions, "expired web view sessions removed"),
            Err(error) => tracing::error!(error = %crate::error_chain(&error), "session retention pass failed"),
        }
        tokio::select! {
            () = shutdown.cancelled() => return,
            () = tokio::time::sleep(interval) => {}
        }
    }
}

/// One pass.
pub async fn prune<S: Store>(engine: &Engine<S>, retention: HistoryRetention) -> Result<HistoryPruned, EngineError> {
    engine.transact(move |ctx| Ok(ctx.tx.prune_history(&retention, ctx.now)?)).await
}

/// Removes the web view sessions expired by now; how many.
pub async fn prune_sessions<S: Store>(engine: &Engine<S>) -> Result<usize, EngineError> {
    engine.transact(move |ctx| Ok(ctx.tx.prune_ui_sessions(ctx.now)?)).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::{EngineConfig, TokenKey};
    use crate::store::SqliteStore;

    #[tokio::test]
    async fn the_loop_prunes_at_once_and_stops_on_shutdown() {
        let store = SqliteStore::open_in_memory().unwrap();
        store
            .transaction(|tx| {
                for index in 0..5 {
                    tx.append_event("gone", 1, "r", "S", &index.to_string())?;
                }
                Ok::<_, crate::store::StoreError>(())
            })
            .unwrap();
        let engine = Engine::new(store, TokenKey::from_secret(b"k"), EngineConfig::new("http://h"));
        let retention =
            HistoryRetention { max_events_per_stack: Some(2), deleted_stack_events_ms: None, retired_signals_ms: None };
        let shutdown = CancellationToken::new();
        let task = tokio::spawn(run(engine.clone(), retention, Duration::from_secs(3600), shutdown.clone()));
        for _ in 0..100 {
            if engine.store().transaction(|tx| tx.events("gone")).unwrap().len() == 2 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(
            engine.store().transaction(|tx| tx.events("gone")).unwrap().len(),
            2,
            "the first pass runs at start"
        );
        shutdown.cancel();
        tokio::time::timeout(Duration::from_secs(2), task).await.unwrap().unwrap();
    }
}
