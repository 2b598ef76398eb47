//! HTTP/1.1 (cleartext and TLS) through hyper. hyper has no API for 1xx responses, so
//! `early_hints=1` sends no 103 on HTTP/1.1 (Chromium ignores 103 on HTTP/1.1 anyway).
//! Every byte hyper reads passes [`StrictIo`] first, which refuses ambiguous framing that
//! hyper accepts (see `h1_framing`).

use crate::body::{Source, CHUNK};
use crate::h1_framing::Framing;
use crate::routes::{route, Ctx, Reply};
use crate::stats::Protocol;
use bytes::Bytes;
use http::{Method, Request, Response};
use http_body::{Body, Frame, SizeHint};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use std::convert::Infallible;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Weak};
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::Notify;

/// One HTTP/1.1 connection's shared state. Liveness is checked by a watchdog task a few times
/// a minute instead of hyper's per-request header timer, which costs a timer and an
/// allocation on every request.
struct Conn {
    ctx: Arc<Ctx>,
    proto: Protocol,
    /// Bumped on every request and body chunk.
    ticks: AtomicU64,
    in_flight: AtomicU64,
    /// Requests sleeping their `delay=` (think time, not a stall).
    delaying: AtomicU64,
    /// 1: idle, close gracefully; 2: still idle or stalled, drop the connection.
    verdict: AtomicU8,
    wake: Notify,
}

/// Counts a request in flight until dropped.
struct InFlight(Arc<Conn>);

impl InFlight {
    fn new(conn: Arc<Conn>) -> InFlight {
        conn.ticks.fetch_add(1, Ordering::Relaxed);
        conn.in_flight.fetch_add(1, Ordering::Relaxed);
        InFlight(conn)
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::Relaxed);
    }
}

/// A response body that counts what it sends, and counts the request once it is complete.
pub(crate) struct OutBody {
    source: Source,
    req: InFlight,
    counted: bool,
    done: bool,
}

impl OutBody {
    fn finish(&mut self) {
        if !self.done {
            self.done = true;
            if self.counted {
                self.req.0.ctx.stats.request_done(self.req.0.proto);
            }
        }
    }
}

impl Body for OutBody {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let this = &mut *self;
        match this.source.poll_chunk(cx, CHUNK) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(Err(e)) => Poll::Ready(Some(Err(e))),
            Poll::Ready(Ok(None)) => {
                this.finish();
                Poll::Ready(None)
            }
            Poll::Ready(Ok(Some(chunk))) => {
                let conn = &this.req.0;
                conn.ticks.fetch_add(1, Ordering::Relaxed);
                if this.counted {
                    conn.ctx.stats.body_bytes(conn.proto, chunk.len() as u64);
                }
                if this.source.remaining() == 0 {
                    this.finish();
                }
                Poll::Ready(Some(Ok(Frame::data(chunk))))
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.source.remaining() == 0
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.source.remaining())
    }
}

impl Drop for OutBody {
    fn drop(&mut self) {
        // Empty bodies (and HEAD responses) are never polled; they are complete when dropped.
        if self.source.remaining() == 0 {
            self.finish();
        }
    }
}

async fn respond(conn: Arc<Conn>, req: Request<Incoming>) -> Result<Response<OutBody>, Infallible> {
    let in_flight = InFlight::new(conn);
    let ctx = &in_flight.0.ctx;
    let proto = in_flight.0.proto;
    let (parts, mut body) = req.into_parts();
    // Read the request body to its end (discarding it) so every protocol sees the same thing;
    // a body that stops coming for --body-timeout gets a 408 and the connection closes.
    if !body.is_end_stream() {
        loop {
            match tokio::time::timeout(ctx.limits.body_timeout, body.frame()).await {
                Ok(Some(Ok(_))) => in_flight.0.ticks.fetch_add(1, Ordering::Relaxed),
                Ok(None) => break,
                // A malformed chunked body (or one refused by `StrictIo`): where this request
                // ends is unknown, so the connection cannot go on.
                Ok(Some(Err(_))) => {
                    let msg = "malformed request body\n".to_string();
                    let reply = Reply::text(http::StatusCode::BAD_REQUEST, msg);
                    return Ok(closing(in_flight, reply));
                }
                Err(_) => {
                    let msg = format!(
                        "request body stalled for {:?} (--body-timeout)\n",
                        ctx.limits.body_timeout
                    );
                    let reply = Reply::text(http::StatusCode::REQUEST_TIMEOUT, msg);
                    return Ok(closing(in_flight, reply));
                }
            };
        }
    }
    let reply: Reply = route(ctx, &parts.method, &parts.uri, &parts.headers, proto);
    if !reply.delay.is_zero() {
        in_flight.0.delaying.fetch_add(1, Ordering::Relaxed);
        tokio::time::sleep(reply.delay).await;
        in_flight.0.delaying.fetch_sub(1, Ordering::Relaxed);
        in_flight.0.ticks.fetch_add(1, Ordering::Relaxed);
    }
    let head = reply.head(ctx, true);
    let body = if parts.method == Method::HEAD {
        crate::body::BodySpec::Empty
    } else {
        reply.body
    };
    let out = OutBody {
        source: body.into_source(),
        req: in_flight,
        counted: reply.counted,
        done: false,
    };
    Ok(head.map(|()| out))
}

/// `reply` (an error) with `Connection: close`: the unread rest of the body cannot be skipped.
fn closing(in_flight: InFlight, reply: Reply) -> Response<OutBody> {
    let ctx = in_flight.0.ctx.clone();
    let mut head = reply.head(&ctx, true);
    head.headers_mut().insert(
        http::header::CONNECTION,
        http::HeaderValue::from_static("close"),
    );
    let out = OutBody {
        source: reply.body.into_source(),
        req: in_flight,
        counted: false,
        done: false,
    };
    head.map(|()| out)
}

/// The client's side of a connection as hyper reads it: every byte passes the strict framing
/// check first. At a refused byte the client's bytes end; hyper gets a NUL there instead,
/// which no request line, field or chunk-size line may hold, so hyper answers its own 400 and
/// closes, after the responses to the requests before it (hyper reads heads in order).
struct StrictIo<IO> {
    io: IO,
    framing: Framing,
    refused: bool,
}

impl<IO: AsyncRead + Unpin> AsyncRead for StrictIo<IO> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = &mut *self;
        if this.refused {
            return Poll::Ready(Ok(()));
        }
        let start = buf.filled().len();
        std::task::ready!(Pin::new(&mut this.io).poll_read(cx, buf))?;
        if let Err(refused) = this.framing.feed(&buf.filled()[start..]) {
            // `at` lies inside what was just read, so there is room for the NUL.
            buf.set_filled(start + refused.at);
            buf.put_slice(b"\0");
            this.refused = true;
        }
        Poll::Ready(Ok(()))
    }
}

impl<IO: AsyncWrite + Unpin> AsyncWrite for StrictIo<IO> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.io).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

/// Wakes the connection when it has been idle (no request in flight, nothing sent) for a
/// period, and again if it stays idle or stays stuck longer than any allowed delay. A
/// response that makes no progress for `send_timeout` while no request is sleeping its
/// delay — the client does not read (pipelined requests it never reads the answers to) —
/// drops the connection at once. `idle` is --idle-timeout: an idle connection is closed after
/// one to two of these periods.
async fn watchdog(conn: Weak<Conn>, idle: Duration, max_stall: Duration, send_timeout: Duration) {
    // Start from the initial tick count: a connection that never completes a request head
    // (slowloris) is idle from the start and must be closed within two periods.
    let step = idle.min(send_timeout / 2).max(Duration::from_millis(100));
    let mut last = 0;
    let mut quiet = Duration::ZERO;
    loop {
        tokio::time::sleep(step).await;
        let Some(c) = conn.upgrade() else { return };
        let now = c.ticks.load(Ordering::Relaxed);
        if now != last {
            last = now;
            quiet = Duration::ZERO;
            continue;
        }
        quiet += step;
        let busy = c.in_flight.load(Ordering::Relaxed) > 0;
        let write_stalled =
            busy && c.delaying.load(Ordering::Relaxed) == 0 && quiet >= send_timeout;
        let verdict = c.verdict.load(Ordering::Relaxed);
        let next = if write_stalled {
            2
        } else if (!busy && quiet >= idle) || quiet > max_stall {
            // Graceful first; if that did not end it within another period, drop.
            if verdict == 0 || quiet < 2 * idle {
                verdict.max(1)
            } else {
                2
            }
        } else {
            continue;
        };
        if next != verdict {
            c.verdict.store(next, Ordering::Relaxed);
            c.wake.notify_one();
        }
    }
}

/// Serves one HTTP/1.1 connection until it closes, idles out or the server shuts down (then
/// it finishes the request in flight and closes).
pub(crate) async fn serve<IO>(io: IO, ctx: Arc<Ctx>, proto: Protocol)
where
    IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let _guard = ctx.stats.connection(proto);
    let mut shutdown = ctx.shutdown.clone();
    let state = Arc::new(Conn {
        ctx: ctx.clone(),
        proto,
        ticks: AtomicU64::new(0),
        in_flight: AtomicU64::new(0),
        delaying: AtomicU64::new(0),
        verdict: AtomicU8::new(0),
        wake: Notify::new(),
    });
    let idle = ctx.limits.idle_timeout;
    tokio::spawn(watchdog(
        Arc::downgrade(&state),
        idle,
        ctx.limits.max_delay + 2 * idle,
        ctx.limits.send_timeout,
    ));
    let svc_state = state.clone();
    let svc = hyper::service::service_fn(move |req| respond(svc_state.clone(), req));
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .header_read_timeout(None)
        .auto_date_header(false)
        .max_buf_size((ctx.limits.max_header_size as usize).max(8192))
        .keep_alive(true);
    let io = StrictIo {
        io,
        framing: Framing::default(),
        refused: false,
    };
    let conn = builder.serve_connection(TokioIo::new(io), svc);
    tokio::pin!(conn);
    let mut stopping = *shutdown.borrow();
    if stopping {
        conn.as_mut().graceful_shutdown();
    }
    loop {
        tokio::select! {
            _ = conn.as_mut() => break,
            changed = shutdown.changed(), if !stopping => {
                stopping = true;
                if changed.is_ok() {
                    conn.as_mut().graceful_shutdown();
                }
            }
            _ = state.wake.notified() => {
                if state.verdict.load(Ordering::Relaxed) >= 2 {
                    break;
                }
                if !stopping {
                    stopping = true;
                    conn.as_mut().graceful_shutdown();
                }
            }
        }
    }
}
