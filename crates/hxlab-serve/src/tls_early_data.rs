//! TLS over TCP that takes TLS 1.3 early data (0-RTT), so HTTP/1.1 and HTTP/2 over TLS get the
//! same best case as QUIC's 0-RTT.
//!
//! tokio-rustls's server finishes the whole handshake before it hands out a stream and never
//! reads rustls's early-data buffer, so a request sent as early data would wait a round trip
//! (or be lost). [`accept`] instead returns as soon as the server has answered the ClientHello
//! when the client's early data was accepted: the HTTP stack then reads the early data first,
//! and its answer leaves as half-RTT data (rustls's `send_half_rtt_data`), before the client's
//! Finished arrives. Without early data, [`accept`] returns once the handshake is complete, as
//! tokio-rustls does.
//!
//! Replay: early data can be replayed by an attacker who captured it. rustls's stateful
//! session cache hands out each session once, which stops replays against this process, but
//! not against another server sharing tickets; hxlab serve answers only idempotent test
//! requests, and `--no-early-data` refuses 0-RTT altogether.

use std::io::{self, Read, Write};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

/// A server-side TLS connection over TCP.
pub(crate) struct TlsConn {
    io: TcpStream,
    conn: rustls::ServerConnection,
    /// The TCP peer sent FIN.
    eof: bool,
}

/// Borrows the socket as a blocking-style reader/writer for rustls: Pending becomes WouldBlock
/// (with the waker registered), as tokio-rustls does.
struct SyncIo<'a, 'b> {
    io: &'a mut TcpStream,
    cx: &'a mut Context<'b>,
}

impl Read for SyncIo<'_, '_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let mut rb = ReadBuf::new(buf);
        match Pin::new(&mut *self.io).poll_read(self.cx, &mut rb) {
            Poll::Ready(Ok(())) => Ok(rb.filled().len()),
            Poll::Ready(Err(e)) => Err(e),
            Poll::Pending => Err(io::ErrorKind::WouldBlock.into()),
        }
    }
}

impl Write for SyncIo<'_, '_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match Pin::new(&mut *self.io).poll_write(self.cx, buf) {
            Poll::Ready(r) => r,
            Poll::Pending => Err(io::ErrorKind::WouldBlock.into()),
        }
    }
    fn write_vectored(&mut self, bufs: &[io::IoSlice<'_>]) -> io::Result<usize> {
        match Pin::new(&mut *self.io).poll_write_vectored(self.cx, bufs) {
            Poll::Ready(r) => r,
            Poll::Pending => Err(io::ErrorKind::WouldBlock.into()),
        }
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl TlsConn {
    /// Caps the application data rustls holds as records not yet written to the socket
    /// (its default is 64 KiB): with a send low-water mark those bytes are committed as
    /// surely as the kernel's, so they are kept to one batch.
    pub(crate) fn limit_send_buffer(&mut self, bytes: usize) {
        self.conn.set_buffer_limit(Some(bytes));
    }

    /// The rustls connection (ALPN, protocol version, handshake state).
    pub(crate) fn rustls(&self) -> &rustls::ServerConnection {
        &self.conn
    }

    /// True when this connection's TLS 1.3 early data was accepted.
    pub(crate) fn early_data_accepted(&mut self) -> bool {
        self.conn.early_data().is_some()
    }

    /// Reads TLS records from the socket and processes them. Ready(Ok(true)) when records
    /// arrived, Ready(Ok(false)) at EOF.
    fn poll_read_tls(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<bool>> {
        let n = match self.conn.read_tls(&mut SyncIo {
            io: &mut self.io,
            cx,
        }) {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Poll::Pending,
            Err(e) => return Poll::Ready(Err(e)),
        };
        if n == 0 {
            self.eof = true;
        }
        if let Err(e) = self.conn.process_new_packets() {
            // Send the alert rustls queued, then fail.
            let _ = self.poll_write_tls(cx);
            return Poll::Ready(Err(io::Error::new(io::ErrorKind::InvalidData, e)));
        }
        Poll::Ready(Ok(n > 0))
    }

    /// Writes queued TLS records; Ready once nothing is queued.
    fn poll_write_tls(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while self.conn.wants_write() {
            match self.conn.write_tls(&mut SyncIo {
                io: &mut self.io,
                cx,
            }) {
                Ok(0) => return Poll::Ready(Err(io::ErrorKind::WriteZero.into())),
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Poll::Pending,
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
        Poll::Ready(Ok(()))
    }

    /// Drives the handshake until it is complete, or until the server's answer to the
    /// ClientHello is out and the client's early data was accepted.
    fn poll_handshake(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        loop {
            ready!(self.poll_write_tls(cx))?;
            if !self.conn.is_handshaking() || self.conn.early_data().is_some() {
                return Poll::Ready(Ok(()));
            }
            if self.eof {
                return Poll::Ready(Err(io::ErrorKind::UnexpectedEof.into()));
            }
            ready!(self.poll_read_tls(cx))?;
        }
    }
}

/// Accepts a TLS connection on `io` (see the module docs for when it returns).
pub(crate) async fn accept(
    io: TcpStream,
    config: Arc<rustls::ServerConfig>,
) -> io::Result<TlsConn> {
    let conn = rustls::ServerConnection::new(config)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
    let mut tls = TlsConn {
        io,
        conn,
        eof: false,
    };
    std::future::poll_fn(|cx| tls.poll_handshake(cx)).await?;
    Ok(tls)
}

impl AsyncRead for TlsConn {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        loop {
            // Early data first: it precedes everything the client sends after its Finished.
            if let Some(mut early) = this.conn.early_data() {
                let n = early.read(buf.initialize_unfilled())?;
                if n > 0 {
                    buf.advance(n);
                    return Poll::Ready(Ok(()));
                }
            }
            match this.conn.reader().read(buf.initialize_unfilled()) {
                Ok(n) => {
                    // 0: close_notify (or an empty buffer).
                    buf.advance(n);
                    return Poll::Ready(Ok(()));
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                // The peer closed TCP without close_notify: an end of stream, as tokio-rustls
                // reports it (HTTP framing tells whether anything was cut short).
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => {
                    return Poll::Ready(Ok(()));
                }
                Err(e) => return Poll::Ready(Err(e)),
            }
            if this.eof {
                return Poll::Ready(Ok(()));
            }
            // Handshake messages (and alerts) may be waiting to go out; never let a full
            // send buffer stop the reading side.
            if let Poll::Ready(Err(e)) = this.poll_write_tls(cx) {
                return Poll::Ready(Err(e));
            }
            ready!(this.poll_read_tls(cx))?;
        }
    }
}

impl AsyncWrite for TlsConn {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        loop {
            let n = this.conn.writer().write(buf)?;
            let flushed = this.poll_write_tls(cx)?;
            if n > 0 || buf.is_empty() {
                return Poll::Ready(Ok(n));
            }
            // rustls's plaintext buffer is full: wait until records leave.
            ready!(flushed);
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        loop {
            let n = this.conn.writer().write_vectored(bufs)?;
            let flushed = this.poll_write_tls(cx)?;
            if n > 0 || bufs.iter().all(|b| b.is_empty()) {
                return Poll::Ready(Ok(n));
            }
            ready!(flushed);
        }
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        ready!(this.poll_write_tls(cx))?;
        Pin::new(&mut this.io).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        this.conn.send_close_notify();
        ready!(this.poll_write_tls(cx))?;
        Pin::new(&mut this.io).poll_shutdown(cx)
    }
}
