//! The LISTEN side of cross-replica wake-ups: one connection per replica, on its own task,
//! `LISTEN`ing on the documents and stacks channels. Each notification (a JSON list of the server
//! or stack names a committed transaction changed) becomes a `DocumentNotice::Changed` or
//! `DocumentNotice::StacksChanged`; every (re)connect
//! becomes a `DocumentNotice::Resync`, since whatever was committed while the connection was
//! down was not heard. The connection is re-made with a capped backoff until shutdown.

use std::time::Duration;

use futures_util::StreamExt;
use tokio::sync::mpsc;
use tokio_postgres::{AsyncMessage, NoTls};
use tokio_util::sync::CancellationToken;

use super::{DOCUMENTS_CHANNEL, STACKS_CHANNEL};
use crate::store::DocumentNotice;

/// Notices not yet taken by the engine; beyond this the listener waits (the engine reads
/// them as fast as it can re-render documents).
const QUEUE: usize = 1024;
const FIRST_RETRY: Duration = Duration::from_millis(100);
const LAST_RETRY: Duration = Duration::from_secs(5);

pub(super) fn spawn(
    config: tokio_postgres::Config,
    target: String,
    shutdown: CancellationToken,
) -> mpsc::Receiver<DocumentNotice> {
    let (sender, receiver) = mpsc::channel(QUEUE);
    tokio::spawn(async move {
        let mut retry = FIRST_RETRY;
        loop {
            tokio::select! {
                () = shutdown.cancelled() => return,
                heard = listen_once(&config, &sender) => match heard {
                    Ok(()) => retry = FIRST_RETRY,
                    Err(error) => tracing::warn!(%target, error = %crate::error_chain(&error), "lost the LISTEN connection"),
                },
            }
            if sender.is_closed() {
                return;
            }
            tokio::select! {
                () = shutdown.cancelled() => return,
                () = tokio::time::sleep(retry) => {}
            }
            retry = (retry * 2).min(LAST_RETRY);
        }
    });
    receiver
}

/// Connects, LISTENs, announces a resync, and forwards notifications until the connection ends.
async fn listen_once(
    config: &tokio_postgres::Config,
    sender: &mpsc::Sender<DocumentNotice>,
) -> Result<(), tokio_postgres::Error> {
    let (client, mut connection) = config.connect(NoTls).await?;
    let (messages_sender, mut messages) = mpsc::channel(QUEUE);
    // The connection object performs the I/O; it yields notifications as it goes.
    let driver = tokio::spawn(async move {
        let mut stream = futures_util::stream::poll_fn(move |context| connection.poll_message(context));
        while let Some(message) = stream.next().await {
            match message {
                Ok(AsyncMessage::Notification(notification)) => {
                    let heard = (notification.channel().to_owned(), notification.payload().to_owned());
                    if messages_sender.send(Ok(heard)).await.is_err() {
                        return;
                    }
                }
                Ok(_) => {}
                Err(error) => {
                    let _ = messages_sender.send(Err(error)).await;
                    return;
                }
            }
        }
    });
    let listened = client.batch_execute(&format!("LISTEN {DOCUMENTS_CHANNEL}; LISTEN {STACKS_CHANNEL}")).await;
    if let Err(error) = listened {
        driver.abort();
        return Err(error);
    }
    if sender.send(DocumentNotice::Resync).await.is_err() {
        driver.abort();
        return Ok(());
    }
    let result = loop {
        match messages.recv().await {
            Some(Ok((channel, payload))) => {
                let notice = notice(&channel, &payload);
                if sender.send(notice).await.is_err() {
                    break Ok(());
                }
            }
            Some(Err(error)) => break Err(error),
            // The connection ended without an error (the server closed it).
            None => break Ok(()),
        }
    };
    driver.abort();
    drop(client);
    result
}

/// What a notification on `channel` says; a payload that is not a list of names (nobody else
/// should NOTIFY on these channels) is a resync: anything may have changed.
fn notice(channel: &str, payload: &str) -> DocumentNotice {
    match serde_json::from_str::<Vec<String>>(payload) {
        Ok(names) if channel == STACKS_CHANNEL => DocumentNotice::StacksChanged(names),
        Ok(names) => DocumentNotice::Changed(names),
        Err(_) => DocumentNotice::Resync,
    }
}
