//! HTTP/2 driver (TLS with ALPN h2, or h2c with prior knowledge) on the `h2` crate, up to
//! `-m` streams in flight per connection.
//!
//! Header bytes: the `h2` crate does not say how many bytes a HEADERS frame took on the
//! wire, so the connection's byte stream goes through a [`FrameTap`] that reads the 9-byte
//! frame headers in both directions and counts HEADERS/CONTINUATION payload bytes (the
//! HPACK-compressed size). The uncompressed size is the h2load one: the sum of name and value
//! lengths of every decoded field, pseudo-headers included.

use crate::net::{io_phrase, Stream};
use crate::plan::Next;
use crate::recorder::{ErrorKind, SharedRecorder};
use crate::worker::{ClientCtx, SessionEnd};
use futures::stream::{FuturesUnordered, StreamExt};
use std::cell::Cell;
use std::io;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

const FRAME_DATA: u8 = 0;
const FRAME_HEADERS: u8 = 1;
const FRAME_CONTINUATION: u8 = 9;
const PREFACE_LEN: u64 = 24;
/// Largest response header list accepted (decoded size), as h1 accepts a 64 KiB head.
pub const MAX_HEADER_LIST: u32 = 256 * 1024;

/// Counts frame bytes in one direction of an HTTP/2 byte stream.
#[derive(Debug, Default, Clone)]
pub struct FrameScanner {
    head: [u8; 9],
    head_have: usize,
    payload_left: u64,
    kind: u8,
    skip: u64,
}

/// Totals of a scanned chunk.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct FrameBytes {
    /// All bytes.
    pub total: u64,
    /// HEADERS and CONTINUATION payload bytes.
    pub header: u64,
    /// DATA payload bytes (padding included).
    pub data: u64,
}

impl FrameScanner {
    /// A scanner for the client's outgoing side, which starts with the connection preface.
    pub fn outgoing() -> FrameScanner {
        FrameScanner {
            skip: PREFACE_LEN,
            ..Default::default()
        }
    }

    /// Scans the next bytes of the stream.
    pub fn scan(&mut self, mut buf: &[u8]) -> FrameBytes {
        let mut out = FrameBytes {
            total: buf.len() as u64,
            ..Default::default()
        };
        while !buf.is_empty() {
            if self.skip > 0 {
                let n = (buf.len() as u64).min(self.skip) as usize;
                self.skip -= n as u64;
                buf = &buf[n..];
                continue;
            }
            if self.payload_left > 0 {
                let n = (buf.len() as u64).min(self.payload_left) as usize;
                self.payload_left -= n as u64;
                match self.kind {
                    FRAME_HEADERS | FRAME_CONTINUATION => out.header += n as u64,
                    FRAME_DATA => out.data += n as u64,
                    _ => {}
                }
                buf = &buf[n..];
                continue;
            }
            let n = (9 - self.head_have).min(buf.len());
            self.head[self.head_have..self.head_have + n].copy_from_slice(&buf[..n]);
            self.head_have += n;
            buf = &buf[n..];
            if self.head_have == 9 {
                self.head_have = 0;
                self.payload_left = u64::from(self.head[0]) << 16
                    | u64::from(self.head[1]) << 8
                    | u64::from(self.head[2]);
                self.kind = self.head[3];
            }
        }
        out
    }
}

/// The connection's IO with frame counting into the worker's recorder.
pub struct FrameTap {
    inner: Stream,
    rec: SharedRecorder,
    rx: FrameScanner,
    tx: FrameScanner,
}

impl FrameTap {
    /// Wraps `inner`.
    pub fn new(inner: Stream, rec: SharedRecorder) -> FrameTap {
        FrameTap {
            inner,
            rec,
            rx: FrameScanner::default(),
            tx: FrameScanner::outgoing(),
        }
    }
}

impl AsyncRead for FrameTap {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let r = Pin::new(&mut this.inner).poll_read(cx, buf);
        if let Poll::Ready(Ok(())) = r {
            let b = this.rx.scan(&buf.filled()[before..]);
            if b.total > 0 {
                // Body bytes are counted from decoded DATA in the stream (padding excluded).
                this.rec.borrow_mut().received(b.total, b.header, 0);
            }
        }
        r
    }
}

impl AsyncWrite for FrameTap {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let r = Pin::new(&mut this.inner).poll_write(cx, buf);
        if let Poll::Ready(Ok(n)) = r {
            let b = this.tx.scan(&buf[..n]);
            this.rec.borrow_mut().sent(b.total, b.header, 0);
        }
        r
    }
    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let r = Pin::new(&mut this.inner).poll_write_vectored(cx, bufs);
        if let Poll::Ready(Ok(n)) = r {
            let mut left = n;
            let mut total = crate::h2::FrameBytes::default();
            for b in bufs {
                if left == 0 {
                    break;
                }
                let k = left.min(b.len());
                let s = this.tx.scan(&b[..k]);
                total.total += s.total;
                total.header += s.header;
                left -= k;
            }
            this.rec.borrow_mut().sent(total.total, total.header, 0);
        }
        r
    }
    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }
    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

/// Kind and message of an `h2` error.
pub fn classify(e: &h2::Error) -> (ErrorKind, String) {
    if let Some(io) = e.get_io() {
        return (ErrorKind::of_io(io), io_phrase(io));
    }
    if e.is_reset() || (e.is_go_away() && e.is_remote()) {
        return (ErrorKind::Reset, format!("h2: {e}"));
    }
    (ErrorKind::Protocol, format!("h2: {e}"))
}

/// Size of a response header list as h2load counts it: name + value of every field,
/// `:status` included.
pub fn header_list_size(headers: &http::HeaderMap) -> u64 {
    let fields: usize = headers
        .iter()
        .map(|(n, v)| n.as_str().len() + v.len())
        .sum();
    (":status".len() + 3 + fields) as u64
}

struct Outcome {
    scheduled: Instant,
    ticket: u64,
    /// The server refused the stream before processing it (REFUSED_STREAM, or above the
    /// last stream id of a GOAWAY): the request may be sent again.
    refused: bool,
    result: Result<(), (ErrorKind, String)>,
}

/// True for errors after which the request was certainly not processed.
fn is_refused(e: &h2::Error) -> bool {
    e.reason() == Some(h2::Reason::REFUSED_STREAM) && e.is_reset()
}

/// True for a graceful GOAWAY (NO_ERROR): the server wants a new connection.
fn is_graceful_goaway(e: &h2::Error) -> bool {
    e.is_go_away() && e.reason() == Some(h2::Reason::NO_ERROR)
}

async fn exchange(
    response: h2::client::ResponseFuture,
    rec: SharedRecorder,
    scheduled: Instant,
    ticket: u64,
    sent: Instant,
    timed_out: Rc<Cell<Option<Duration>>>,
) -> Outcome {
    let mut refused = false;
    let work = async {
        let resp = response.await.map_err(|e| {
            refused = is_refused(&e);
            classify(&e)
        })?;
        let first_byte = Instant::now();
        let status = resp.status().as_u16();
        rec.borrow_mut()
            .received_header_uncompressed(header_list_size(resp.headers()));
        let mut body = resp.into_body();
        let mut n = 0u64;
        while let Some(chunk) = body.data().await {
            let chunk = chunk.map_err(|e| classify(&e))?;
            n += chunk.len() as u64;
            let _ = body.flow_control().release_capacity(chunk.len());
        }
        // Trailers, if any, end the stream; their size is in the HEADERS frame count.
        let _ = body.trailers().await;
        let done = Instant::now();
        let mut r = rec.borrow_mut();
        r.received(0, 0, n);
        r.response(scheduled, sent, first_byte, done, status);
        Ok(())
    };
    // No timer per request: the session has one progress timer and, when it fires, drops the
    // connection, which ends every exchange; they then report the timeout.
    let result = match (work.await, timed_out.get()) {
        (Err(_), Some(limit)) => Err((ErrorKind::Timeout, format!("no response within {limit:?}"))),
        (r, _) => r,
    };
    Outcome {
        scheduled,
        ticket,
        refused,
        result,
    }
}

/// Runs requests on one HTTP/2 connection until the plan is done or the connection fails.
pub async fn session(ctx: &mut ClientCtx, stream: Stream, h2c: bool) -> SessionEnd {
    let tap = FrameTap::new(stream, ctx.rec.clone());
    let mut builder = h2::client::Builder::new();
    // Large windows (as h2load's -w/-W 30) so flow control never paces a load test.
    builder
        .initial_window_size((1 << 30) - 1)
        .initial_connection_window_size((1 << 30) - 1)
        .max_frame_size(1 << 14)
        .enable_push(false)
        // A hostile server cannot make the client buffer more than this per response head.
        .max_header_list_size(MAX_HEADER_LIST);
    let handshake = tokio::time::timeout(
        ctx.connect_timeout,
        builder.handshake::<_, bytes::Bytes>(tap),
    )
    .await;
    let (mut client, connection) = match handshake {
        Err(_) => {
            let message = "h2 handshake timed out".to_string();
            ctx.rec
                .borrow_mut()
                .connect_failed(ErrorKind::Timeout, &message);
            return SessionEnd::Failed {
                answered: 0,
                kind: ErrorKind::Timeout,
                message,
            };
        }
        Ok(Err(e)) => {
            let (kind, message) = classify(&e);
            let message = format!(
                "HTTP/2 connection setup failed ({message}); does the server speak {}? try --proto h1 or auto",
                if h2c { "h2c (HTTP/2 over cleartext with prior knowledge)" } else { "HTTP/2" }
            );
            ctx.rec
                .borrow_mut()
                .connect_failed(ErrorKind::Protocol, &message);
            return SessionEnd::Failed {
                answered: 0,
                kind,
                message,
            };
        }
        Ok(Ok(pair)) => pair,
    };
    let driver = tokio::task::spawn_local(async move {
        let _ = connection.await;
    });
    let depth = if ctx.no_keepalive { 1 } else { ctx.depth };
    let mut inflight = FuturesUnordered::new();
    let mut answered = 0u64;
    let mut sent_any = false;
    let mut due_timer = std::pin::pin!(tokio::time::sleep_until(Instant::now().into()));
    let timed_out = Rc::new(Cell::new(None));
    let mut last_progress = Instant::now();
    let mut progress_timer = std::pin::pin!(tokio::time::sleep_until(
        (last_progress + ctx.timeout).into()
    ));
    let end = 'conn: loop {
        let mut wait_until = None;
        let mut plan_done = false;
        let closing = ctx.no_keepalive && sent_any;
        while inflight.len() < depth && !closing {
            let now = Instant::now();
            match ctx.next(now) {
                Next::Go { scheduled, ticket } => {
                    if let Err(e) = futures::future::poll_fn(|cx| client.poll_ready(cx)).await {
                        ctx.plan.give_back(ticket);
                        if is_graceful_goaway(&e) {
                            break 'conn SessionEnd::Closed { answered };
                        }
                        let (kind, message) = classify(&e);
                        break 'conn SessionEnd::Failed {
                            answered,
                            kind,
                            message,
                        };
                    }
                    let i = ctx.next_url();
                    let req = ctx.target.http_request(i);
                    let has_body = ctx.target.body.is_some();
                    let sent = Instant::now();
                    match client.send_request(req, !has_body) {
                        Ok((response, mut send)) => {
                            {
                                let mut rec = ctx.rec.borrow_mut();
                                rec.request_started(scheduled);
                                rec.sent(0, 0, ctx.target.requests[i].h2_header_size);
                            }
                            if let Some(b) = &ctx.target.body {
                                let _ = send.send_data(b.clone(), true);
                            }
                            sent_any = true;
                            if inflight.is_empty() {
                                last_progress = sent;
                            }
                            inflight.push(exchange(
                                response,
                                ctx.rec.clone(),
                                scheduled,
                                ticket,
                                sent,
                                timed_out.clone(),
                            ));
                        }
                        Err(e) => {
                            ctx.plan.give_back(ticket);
                            if is_graceful_goaway(&e) {
                                break 'conn SessionEnd::Closed { answered };
                            }
                            let (kind, message) = classify(&e);
                            break 'conn SessionEnd::Failed {
                                answered,
                                kind,
                                message,
                            };
                        }
                    }
                    if ctx.no_keepalive {
                        break;
                    }
                }
                Next::Wait(t) => {
                    wait_until = Some(t);
                    break;
                }
                Next::Done => {
                    plan_done = true;
                    break;
                }
            }
        }
        if inflight.is_empty() {
            if let Some(t) = wait_until {
                tokio::time::sleep_until(t.into()).await;
                continue;
            }
            if plan_done {
                break SessionEnd::PlanDone;
            }
            break SessionEnd::Closed { answered };
        }
        if let Some(t) = wait_until {
            due_timer.as_mut().reset(t.into());
        }
        let outcome = tokio::select! {
            biased;
            o = inflight.next() => o,
            _ = &mut due_timer, if wait_until.is_some() => continue,
            _ = &mut progress_timer => {
                // Deadlines only move forward, so the timer is re-armed only when it fires.
                let deadline = last_progress + ctx.timeout;
                if Instant::now() >= deadline {
                    timed_out.set(Some(ctx.timeout));
                    let message = format!("no response within {:?}", ctx.timeout);
                    break 'conn SessionEnd::Failed { answered, kind: ErrorKind::Timeout, message };
                }
                progress_timer.as_mut().reset(deadline.into());
                continue;
            }
        };
        last_progress = Instant::now();
        if let Some(o) = outcome {
            if settle(ctx, o, answered == 0, h2c) {
                answered += 1;
            } else if driver.is_finished() {
                // The connection itself is gone: the loop ends; streams still open fail below.
                break 'conn SessionEnd::Failed {
                    answered,
                    kind: ErrorKind::Reset,
                    message: "h2 connection closed".to_string(),
                };
            }
        }
    };
    drop(client);
    driver.abort();
    // Streams still open when the connection ended fail with it (dropping the connection
    // errors them at once; the limit is only a guard).
    let drain = async {
        while let Some(o) = inflight.next().await {
            settle(ctx, o, answered == 0, h2c);
        }
    };
    let _ = tokio::time::timeout(Duration::from_secs(2), drain).await;
    end
}

/// Records a finished exchange; true when it was answered.
fn settle(ctx: &mut ClientCtx, o: Outcome, first: bool, h2c: bool) -> bool {
    match o.result {
        Ok(()) => true,
        Err(_) if o.refused => {
            ctx.rec.borrow_mut().request_unsent(o.scheduled);
            ctx.plan.give_back(o.ticket);
            false
        }
        Err((kind, message)) => {
            // A protocol error before the first response usually means the server does
            // not speak HTTP/2 at all: say so.
            let message = if first && kind == ErrorKind::Protocol {
                format!(
                    "{message}: does the server speak {}? try --proto h1 or auto",
                    if h2c {
                        "h2c (HTTP/2 over cleartext, prior knowledge)"
                    } else {
                        "HTTP/2"
                    }
                )
            } else {
                message
            };
            ctx.rec
                .borrow_mut()
                .request_failed(o.scheduled, kind, &message);
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scanner_counts_frames_across_any_split() {
        // SETTINGS (6 bytes payload), HEADERS (5), CONTINUATION (2), DATA (10).
        let mut bytes = Vec::new();
        for (len, kind) in [(6u32, 4u8), (5, 1), (2, 9), (10, 0)] {
            bytes.extend_from_slice(&[
                (len >> 16) as u8,
                (len >> 8) as u8,
                len as u8,
                kind,
                0,
                0,
                0,
                0,
                1,
            ]);
            bytes.extend(std::iter::repeat_n(0xaa, len as usize));
        }
        for chunk in [1, 4, 9, 13, bytes.len()] {
            let mut s = FrameScanner::default();
            let mut t = FrameBytes::default();
            for c in bytes.chunks(chunk) {
                let b = s.scan(c);
                t.total += b.total;
                t.header += b.header;
                t.data += b.data;
            }
            assert_eq!(
                t,
                FrameBytes {
                    total: bytes.len() as u64,
                    header: 7,
                    data: 10
                },
                "chunk {chunk}"
            );
        }
        let mut out = FrameScanner::outgoing();
        let mut with_preface = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
        with_preface.extend_from_slice(&bytes);
        assert_eq!(out.scan(&with_preface).header, 7);
    }
}
