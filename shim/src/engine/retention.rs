//! History retention: a loop beside the sweeper that keeps the `events` and `retired_signals`
//! tables bounded (see docs/http-api.md, "Retention"). What goes is the store's rule
//! (`Tx::prune_history`); this only runs it now and then, each pass in its own transaction.

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
