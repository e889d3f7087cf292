//! Bounded capture of a child's stdout or stderr: a reader task that keeps only the last
//! `limit` bytes of the stream (a hook that prints gigabytes must not exhaust the agent's memory,
//! and the tail is where the error usually is) and counts what it dropped.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, PoisonError};

use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::task::JoinHandle;

/// Size of one read from the pipe. Small on purpose: most hooks print little, and two such buffers
/// per run, once touched, stay in the agent's resident heap after they are freed; a hook that
/// prints a lot only costs more reads.
const CHUNK_BYTES: usize = 8 * 1024;

/// What was kept of one stream.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Captured {
    /// The last bytes of the stream, at most the capture limit.
    pub(crate) bytes: Vec<u8>,
    /// How many bytes were dropped from the start of the stream.
    pub(crate) dropped: u64,
}

impl Captured {
    /// The kept bytes as text (invalid UTF-8 replaced), preceded by a note when the head of the
    /// stream was dropped so that nobody mistakes the tail for the whole output.
    pub(crate) fn text(&self) -> String {
        let text = String::from_utf8_lossy(&self.bytes);
        if self.dropped == 0 {
            return text.into_owned();
        }
        format!("[anneal: output truncated, the first {} bytes were dropped]\n{text}", self.dropped)
    }

    pub(crate) fn is_truncated(&self) -> bool {
        self.dropped > 0
    }
}

/// The last `limit` bytes written to it.
#[derive(Debug)]
struct TailBuffer {
    bytes: VecDeque<u8>,
    limit: usize,
    dropped: u64,
}

impl TailBuffer {
    fn new(limit: usize) -> TailBuffer {
        TailBuffer { bytes: VecDeque::new(), limit, dropped: 0 }
    }

    fn push(&mut self, chunk: &[u8]) {
        // Only the tail of an oversized chunk can survive, so skip the rest without copying it.
        let skipped = chunk.len().saturating_sub(self.limit);
        self.dropped += skipped as u64;
        self.bytes.extend(&chunk[skipped..]);
        let excess = self.bytes.len().saturating_sub(self.limit);
        if excess > 0 {
            // Draining the front of a VecDeque of bytes only moves its head.
            self.bytes.drain(..excess);
            self.dropped += excess as u64;
        }
    }

    fn take(&mut self) -> Captured {
        let bytes = std::mem::take(&mut self.bytes);
        Captured { bytes: bytes.into(), dropped: std::mem::take(&mut self.dropped) }
    }
}

/// A stream being read in the background into a bounded buffer.
///
/// The reader keeps running after [`StreamCapture::take`] until the pipe reaches end of file: a
/// process that outlived the hook (a daemon it started) may still hold the pipe, and a closed pipe
/// would kill it with SIGPIPE on its next write.
#[derive(Debug)]
pub(crate) struct StreamCapture {
    buffer: Arc<Mutex<TailBuffer>>,
    reader: Option<JoinHandle<()>>,
}

impl StreamCapture {
    /// Starts reading `pipe` (nothing to read when `None`), keeping at most `limit` bytes.
    pub(crate) fn start<R>(pipe: Option<R>, limit: usize) -> StreamCapture
    where
        R: AsyncRead + Unpin + Send + 'static,
    {
        let buffer = Arc::new(Mutex::new(TailBuffer::new(limit)));
        let reader = pipe.map(|pipe| tokio::spawn(read_into(pipe, Arc::clone(&buffer))));
        StreamCapture { buffer, reader }
    }

    /// Waits until the stream reaches end of file.
    pub(crate) async fn finished(&mut self) {
        if let Some(reader) = self.reader.as_mut() {
            // A reader task cannot panic; a join error only means it was cancelled.
            let _ = reader.await;
            self.reader = None;
        }
    }

    /// What was captured so far.
    pub(crate) fn take(&self) -> Captured {
        self.buffer.lock().unwrap_or_else(PoisonError::into_inner).take()
    }
}

async fn read_into<R: AsyncRead + Unpin>(mut pipe: R, buffer: Arc<Mutex<TailBuffer>>) {
    let mut chunk = vec![0_u8; CHUNK_BYTES];
    loop {
        match pipe.read(&mut chunk).await {
            Ok(0) => return,
            Ok(count) => buffer.lock().unwrap_or_else(PoisonError::into_inner).push(&chunk[..count]),
            Err(error) if error.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(error) => {
                tracing::debug!(%error, "reading a hook's output failed; keeping what was read");
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_everything_under_the_limit() {
        let mut buffer = TailBuffer::new(10);
        buffer.push(b"abc");
        buffer.push(b"def");
        assert_eq!(buffer.take(), Captured { bytes: b"abcdef".to_vec(), dropped: 0 });
    }

    #[test]
    fn keeps_the_tail_and_counts_the_dropped_head() {
        let mut buffer = TailBuffer::new(4);
        buffer.push(b"abc");
        buffer.push(b"defg");
        assert_eq!(buffer.take(), Captured { bytes: b"defg".to_vec(), dropped: 3 });
        let mut buffer = TailBuffer::new(4);
        buffer.push(b"0123456789");
        assert_eq!(buffer.take(), Captured { bytes: b"6789".to_vec(), dropped: 6 });
    }

    #[test]
    fn zero_limit_keeps_nothing() {
        let mut buffer = TailBuffer::new(0);
        buffer.push(b"abc");
        assert_eq!(buffer.take(), Captured { bytes: Vec::new(), dropped: 3 });
    }

    #[test]
    fn text_notes_truncation() {
        let whole = Captured { bytes: b"tail".to_vec(), dropped: 0 };
        assert_eq!(whole.text(), "tail");
        assert!(!whole.is_truncated());
        let cut = Captured { bytes: b"tail".to_vec(), dropped: 7 };
        assert_eq!(cut.text(), "[anneal: output truncated, the first 7 bytes were dropped]\ntail");
        assert!(cut.is_truncated());
        let invalid = Captured { bytes: vec![b'a', 0xff], dropped: 0 };
        assert_eq!(invalid.text(), "a\u{fffd}");
    }

    #[tokio::test]
    async fn reads_a_stream_to_the_end() {
        let (mut writer, reader) = tokio::io::duplex(16);
        let mut capture = StreamCapture::start(Some(reader), 5);
        tokio::io::AsyncWriteExt::write_all(&mut writer, b"hello world").await.unwrap();
        drop(writer);
        capture.finished().await;
        assert_eq!(capture.take(), Captured { bytes: b"world".to_vec(), dropped: 6 });
    }

    #[tokio::test]
    async fn no_pipe_captures_nothing() {
        let mut capture = StreamCapture::start(None::<tokio::io::DuplexStream>, 5);
        capture.finished().await;
        assert_eq!(capture.take(), Captured::default());
    }
}
