//! A passive tap on a byte stream: an `AsyncRead + AsyncWrite` wrapper that hands every byte the
//! real client stack wrote or read to an observer, at the moment it crossed the socket.

use crate::event::{Dir, Event, Tracer};
use crate::h1wire::H1Wire;
use crate::h2wire::H2Wire;
use std::io::IoSlice;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// Sees both directions of one connection, in order.
pub trait Observer: Send + Unpin {
    /// Bytes the client wrote.
    fn on_send(&mut self, bytes: &[u8]) -> Vec<Event>;
    /// Bytes the client read.
    fn on_recv(&mut self, bytes: &[u8]) -> Vec<Event>;
}

/// Both directions of an HTTP/2 connection. The HPACK decoders accept any dynamic table size
/// the sender announces, so SETTINGS_HEADER_TABLE_SIZE need not be carried across.
pub struct H2Observer {
    send: H2Wire,
    recv: H2Wire,
    answered_http1: Arc<AtomicBool>,
}

impl H2Observer {
    /// A fresh pair of parsers (client→server starts with the preface).
    pub fn new() -> H2Observer {
        H2Observer {
            send: H2Wire::new(Dir::Send),
            recv: H2Wire::new(Dir::Recv),
            answered_http1: Arc::new(AtomicBool::new(false)),
        }
    }

    /// Set once the server answered with HTTP/1.x instead of HTTP/2 frames, so the caller can
    /// explain the h2 error that follows.
    pub fn answered_http1(&self) -> Arc<AtomicBool> {
        self.answered_http1.clone()
    }
}

impl Default for H2Observer {
    fn default() -> Self {
        Self::new()
    }
}

impl Observer for H2Observer {
    fn on_send(&mut self, bytes: &[u8]) -> Vec<Event> {
        self.send.feed(bytes)
    }
    fn on_recv(&mut self, bytes: &[u8]) -> Vec<Event> {
        let events = self.recv.feed(bytes);
        if self.recv.answered_http1 {
            self.answered_http1.store(true, Ordering::Relaxed);
        }
        events
    }
}

/// HTTP/1.1 heads in both directions.
pub struct H1Observer {
    wire: H1Wire,
    answered_h2: Arc<AtomicBool>,
}

impl H1Observer {
    /// A fresh HTTP/1.1 observer.
    pub fn new() -> H1Observer {
        H1Observer {
            wire: H1Wire::new(),
            answered_h2: Arc::new(AtomicBool::new(false)),
        }
    }

    /// Set once the server answered with an HTTP/2 SETTINGS frame instead of HTTP/1.1, so the
    /// caller can explain the error that follows.
    pub fn answered_h2(&self) -> Arc<AtomicBool> {
        self.answered_h2.clone()
    }
}

impl Default for H1Observer {
    fn default() -> Self {
        Self::new()
    }
}

impl Observer for H1Observer {
    fn on_send(&mut self, bytes: &[u8]) -> Vec<Event> {
        self.wire.feed_send(bytes)
    }
    fn on_recv(&mut self, bytes: &[u8]) -> Vec<Event> {
        let events = self.wire.feed_recv(bytes);
        if events
            .iter()
            .any(|e| e.fields.get("looks_like_h2") == Some(&true.into()))
        {
            self.answered_h2.store(true, Ordering::Relaxed);
        }
        events
    }
}

/// The wrapper given to hyper / h2 in place of the socket.
pub struct Tap<S, O> {
    inner: S,
    observer: O,
    tracer: Tracer,
}

impl<S, O: Observer> Tap<S, O> {
    /// Wraps `inner`; events go to `tracer`.
    pub fn new(inner: S, observer: O, tracer: Tracer) -> Tap<S, O> {
        Tap {
            inner,
            observer,
            tracer,
        }
    }

    fn sent(&mut self, bytes: &[u8]) {
        for e in self.observer.on_send(bytes) {
            self.tracer.emit(e);
        }
    }
}

impl<S: AsyncRead + Unpin, O: Observer> AsyncRead for Tap<S, O> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let r = Pin::new(&mut this.inner).poll_read(cx, buf);
        if let Poll::Ready(Ok(())) = r {
            let new = &buf.filled()[before..];
            if !new.is_empty() {
                for e in this.observer.on_recv(new) {
                    this.tracer.emit(e);
                }
            }
        }
        r
    }
}

impl<S: AsyncWrite + Unpin, O: Observer> AsyncWrite for Tap<S, O> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let this = self.get_mut();
        let r = Pin::new(&mut this.inner).poll_write(cx, buf);
        if let Poll::Ready(Ok(n)) = r {
            this.sent(&buf[..n]);
        }
        r
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let this = self.get_mut();
        let r = Pin::new(&mut this.inner).poll_write_vectored(cx, bufs);
        if let Poll::Ready(Ok(n)) = r {
            // Only the first n bytes across the slices were written.
            let mut left = n;
            for s in bufs {
                if left == 0 {
                    break;
                }
                let take = left.min(s.len());
                this.sent(&s[..take]);
                left -= take;
            }
        }
        r
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[tokio::test]
    async fn tap_reports_both_directions_of_a_real_stream() {
        let (client, mut server) = tokio::io::duplex(64);
        let tracer = Tracer::capturing(true, Box::new(std::io::sink()));
        let mut tap = Tap::new(client, H1Observer::new(), tracer.clone());
        // Larger than the duplex buffer: the write is split, the head is still reported once.
        let mut req = b"GET /x HTTP/1.1\r\nhost: a\r\n".to_vec();
        req.extend(b"x-pad: ".iter().chain([b'p'; 100].iter()));
        req.extend(b"\r\n\r\n");
        let writer = async {
            tap.write_all(&req).await.expect("write");
            let mut buf = [0u8; 64];
            let n = tap.read(&mut buf).await.expect("read");
            assert!(n > 0);
        };
        let peer = async {
            let mut got = vec![0u8; req.len()];
            server.read_exact(&mut got).await.expect("server read");
            server
                .write_all(b"HTTP/1.1 204 No Content\r\n\r\n")
                .await
                .expect("server write");
        };
        tokio::join!(writer, peer);
        let events = tracer.events();
        let kinds: Vec<&str> = events.iter().map(|(_, e)| e.kind).collect();
        assert_eq!(kinds, ["h1_request", "h1_response"]);
        assert_eq!(events[0].1.fields["line"], "GET /x HTTP/1.1");
        assert_eq!(events[1].1.fields["status"], 204);
    }
}
