//! The connection's socket, shared between hyper and the request being served, so that a held
//! long-poll notices at once when its client goes away.
//!
//! Why: hyper, by default, keeps reading while a request is in flight to see the client hang
//! up, and for that it allocates a second 8 KiB read buffer per connection (the first one is
//! still referenced by the request). With 10,000 long-polls parked that was 40 MiB of the
//! shim's memory. The connections are therefore served with `half_close`, which stops hyper
//! from reading until the response is written; the long-poll watches the socket itself instead
//! (`Peer::gone`), with a one-byte `MSG_PEEK` that takes nothing from the stream.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

/// Bytes read from the socket per read call (the stack buffer they pass through).
const READ_CHUNK: usize = 4096;

/// The socket as hyper's transport. Reads go through a stack buffer so that only the bytes
/// that arrived are written into hyper's read buffer (its untouched pages stay unmapped).
pub(super) struct SharedStream {
    stream: Arc<TcpStream>,
}

impl SharedStream {
    pub(super) fn new(stream: TcpStream) -> (SharedStream, Peer) {
        let stream = Arc::new(stream);
        (SharedStream { stream: Arc::clone(&stream) }, Peer { stream })
    }
}

impl AsyncRead for SharedStream {
    fn poll_read(self: Pin<&mut Self>, context: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let mut chunk = [0u8; READ_CHUNK];
        let wanted = buf.remaining().min(READ_CHUNK);
        loop {
            ready!(self.stream.poll_read_ready(context))?;
            match self.stream.try_read(&mut chunk[..wanted]) {
                Ok(read) => {
                    buf.put_slice(&chunk[..read]);
                    return Poll::Ready(Ok(()));
                }
                // Readiness was stale; `try_read` cleared it, so the next poll registers.
                Err(error) if error.kind() == io::ErrorKind::WouldBlock => continue,
                Err(error) => return Poll::Ready(Err(error)),
            }
        }
    }
}

impl AsyncWrite for SharedStream {
    fn poll_write(self: Pin<&mut Self>, context: &mut Context<'_>, bytes: &[u8]) -> Poll<io::Result<usize>> {
        loop {
            ready!(self.stream.poll_write_ready(context))?;
            match self.stream.try_write(bytes) {
                Err(error) if error.kind() == io::ErrorKind::WouldBlock => continue,
                result => return Poll::Ready(result),
            }
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        context: &mut Context<'_>,
        slices: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        loop {
            ready!(self.stream.poll_write_ready(context))?;
            match self.stream.try_write_vectored(slices) {
                Err(error) if error.kind() == io::ErrorKind::WouldBlock => continue,
                result => return Poll::Ready(result),
            }
        }
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        let result = socket2::SockRef::from(self.stream.as_ref()).shutdown(std::net::Shutdown::Write);
        Poll::Ready(match result {
            // The client closed first: there is nothing left to shut down.
            Err(error) if error.kind() == io::ErrorKind::NotConnected => Ok(()),
            other => other,
        })
    }
}

/// The client end of the connection a request came on (a request extension).
#[derive(Clone)]
pub(super) struct Peer {
    stream: Arc<TcpStream>,
}

impl Peer {
    /// Completes when the client has closed the connection (or it failed). Data the client sent
    /// ahead (a pipelined request) is left for hyper, and the watch stops: such a client is
    /// still there.
    pub(super) async fn gone(&self) {
        let mut byte = [0u8; 1];
        match self.stream.peek(&mut byte).await {
            Ok(0) | Err(_) => {}
            Ok(_) => std::future::pending().await,
        }
    }
}
