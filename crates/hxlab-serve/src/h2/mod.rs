//! HTTP/2 over TLS and h2c on our own sans-IO connection ([`conn::Conn`], frames and HPACK
//! from hxlab-wire), one task per connection: it reads into a buffer on its stack, parses the
//! frames in place, answers what can be answered into one output buffer and writes that once
//! per batch of input. Streams that wait (a delay, a body larger than the windows, a file, a
//! request body) are state in the connection, not tasks; their timers are one per
//! connection. Server push, 103 Early Hints, GOAWAY on shutdown and on idle connections, and
//! the limits of docs/serve.md "Limits and defences" are all here.

mod conn;
pub mod fuzz_entry;
mod head;
mod send;
mod state;
mod stream;
#[cfg(test)]
mod tests;

use crate::routes::Ctx;
use crate::stats::Protocol;
use send::HIGH_WATER;
pub(crate) use send::LATE_BATCH;
use state::Conn;
use std::future::Future;
use std::mem::MaybeUninit;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::{Instant, Sleep};

/// Bytes read from the socket at once.
const READ_CHUNK: usize = 32 << 10;
/// After a connection error: how long unread input is drained before the socket closes (so
/// the kernel sends FIN, not RST, and the GOAWAY is read).
const LINGER: Duration = Duration::from_secs(1);

/// Serves one HTTP/2 connection (TLS or h2c) until the peer closes it, a connection error,
/// an idle GOAWAY, or (after shutdown's GOAWAY) until its streams are done.
pub(crate) async fn serve<IO>(io: IO, ctx: Arc<Ctx>, proto: Protocol)
where
    IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let _guard = ctx.stats.connection(proto);
    let mut shutdown = ctx.shutdown.clone();
    let idle_period = ctx.limits.idle_timeout;
    let mut d = Driver {
        io,
        conn: Conn::new(ctx, proto),
        carry: Vec::new(),
        written: 0,
        timer: None,
        timer_at: None,
        shutdown: Box::pin(async move {
            let _ = shutdown.wait_for(|stop| *stop).await;
        }),
        stopping: false,
        read_closed: false,
        write_shut: false,
        stalled_since: None,
        linger_until: None,
        idle: Idle {
            next: Instant::now() + idle_period,
            period: idle_period,
            seen: 0,
            goaway_sent: false,
        },
    };
    std::future::poll_fn(|cx| d.poll(cx)).await;
}

/// The idle check: a connection with no new request and no stream open for one to two
/// periods (--idle-timeout) gets GOAWAY and is closed.
struct Idle {
    next: Instant,
    period: Duration,
    seen: u64,
    goaway_sent: bool,
}

struct Driver<IO> {
    io: IO,
    conn: Conn,
    /// A partial frame carried to the next read.
    carry: Vec<u8>,
    /// Bytes of `conn.out` already written.
    written: usize,
    timer: Option<Pin<Box<Sleep>>>,
    timer_at: Option<Instant>,
    shutdown: Pin<Box<dyn Future<Output = ()> + Send>>,
    stopping: bool,
    read_closed: bool,
    write_shut: bool,
    /// Since when output has waited for the socket.
    stalled_since: Option<Instant>,
    /// Closing after a connection error: draining input until then.
    linger_until: Option<Instant>,
    idle: Idle,
}

impl<IO: AsyncRead + AsyncWrite + Unpin> Driver<IO> {
    fn poll(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        // Bounded, so one busy connection cannot keep its thread forever.
        for _ in 0..32 {
            self.conn.now = None;
            let mut progress = false;
            if !self.stopping && self.shutdown.as_mut().poll(cx).is_ready() {
                self.stopping = true;
                self.conn.graceful_goaway();
                progress = true;
            }
            if self.poll_timer(cx) {
                progress = true;
            }
            let pending_out = self.conn.out.len() - self.written;
            if !self.read_closed && pending_out < HIGH_WATER {
                match self.read(cx) {
                    Poll::Ready(Ok(())) => progress = true,
                    Poll::Ready(Err(())) => return Poll::Ready(()),
                    Poll::Pending => {}
                }
            }
            if !self.conn.failed {
                if self.conn.poll_opening(cx) {
                    progress = true;
                }
                let until = self.fill_until();
                self.conn.fill(cx, until);
                if self.read_closed {
                    // What can no longer finish goes now, not after --send-timeout (issue 38:
                    // 6,000 window-blocked connections sat in CLOSE-WAIT for a minute).
                    self.conn.drop_unfinishable();
                }
            }
            match self.write(cx) {
                Poll::Ready(Ok(true)) => progress = true,
                Poll::Ready(Ok(false)) => {}
                Poll::Ready(Err(())) => return Poll::Ready(()),
                Poll::Pending => {}
            }
            if self.done(cx) {
                return Poll::Ready(());
            }
            if self.conn.failed && self.linger_until.is_none() {
                self.linger_until = Some(Instant::now() + LINGER);
            }
            self.arm_timer();
            if self.poll_timer(cx) {
                progress = true;
            }
            if !progress {
                return Poll::Pending;
            }
        }
        cx.waker().wake_by_ref();
        Poll::Pending
    }

    /// How far `conn.out` may be filled now. With a send low-water mark, frames are built
    /// late: only once the socket took everything built before, one [`LATE_BATCH`] at a
    /// time, so the scheduler picks each frame when the kernel wants more. Without one, up
    /// to [`HIGH_WATER`] ahead of the socket.
    fn fill_until(&self) -> usize {
        let out = self.conn.out.len();
        if self.conn.ctx.limits.lowat == hxlab_core::sched::Lowat::Off {
            return self.written + HIGH_WATER;
        }
        if out > self.written {
            return 0;
        }
        out + LATE_BATCH
    }

    /// Reads once and hands whole frames to the connection. Err: the connection is gone.
    fn read(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), ()>> {
        let mut storage = [MaybeUninit::<u8>::uninit(); READ_CHUNK];
        let mut rb = ReadBuf::uninit(&mut storage);
        match Pin::new(&mut self.io).poll_read(cx, &mut rb) {
            Poll::Pending => return Poll::Pending,
            Poll::Ready(Err(_)) => return Poll::Ready(Err(())),
            Poll::Ready(Ok(())) => {}
        }
        let got = rb.filled();
        if got.is_empty() {
            self.read_closed = true;
            self.conn.input_ended();
            return Poll::Ready(Ok(()));
        }
        if self.conn.failed {
            // Lingering: input is drained unread.
            return Poll::Ready(Ok(()));
        }
        if self.carry.is_empty() {
            let used = self.conn.receive(got);
            self.carry.extend_from_slice(&got[used..]);
        } else {
            self.carry.extend_from_slice(got);
            let used = self.conn.receive(&self.carry);
            self.carry.drain(..used);
            if self.carry.is_empty() && self.carry.capacity() > 4096 {
                self.carry = Vec::new();
            }
        }
        Poll::Ready(Ok(()))
    }

    /// Writes what is queued. Ok(true): something was written.
    fn write(&mut self, cx: &mut Context<'_>) -> Poll<Result<bool, ()>> {
        let mut wrote = false;
        while self.written < self.conn.out.len() {
            match Pin::new(&mut self.io).poll_write(cx, &self.conn.out[self.written..]) {
                Poll::Ready(Ok(0)) | Poll::Ready(Err(_)) => return Poll::Ready(Err(())),
                Poll::Ready(Ok(n)) => {
                    self.written += n;
                    wrote = true;
                    self.stalled_since = None;
                }
                Poll::Pending => {
                    self.stalled_since.get_or_insert_with(Instant::now);
                    return if wrote {
                        Poll::Ready(Ok(true))
                    } else {
                        Poll::Pending
                    };
                }
            }
        }
        if wrote {
            // TLS keeps records until flushed.
            if let Poll::Ready(Err(_)) = Pin::new(&mut self.io).poll_flush(cx) {
                return Poll::Ready(Err(()));
            }
        }
        self.conn.out.clear();
        self.written = 0;
        if self.conn.streams.is_empty() && self.conn.out.capacity() > 16 << 10 {
            // An idle connection keeps no large output buffer.
            self.conn.out = Vec::new();
        }
        Poll::Ready(Ok(wrote))
    }

    /// Whether the connection is over (its output written, the write side shut).
    fn done(&mut self, cx: &mut Context<'_>) -> bool {
        if self.linger_until.is_some_and(|t| Instant::now() >= t) {
            return true;
        }
        let flushed = self.written >= self.conn.out.len();
        let over = self.conn.finished() || (self.read_closed && !self.conn.busy());
        if !(over && flushed) {
            return false;
        }
        if !self.write_shut {
            match Pin::new(&mut self.io).poll_shutdown(cx) {
                Poll::Pending => return false,
                _ => self.write_shut = true,
            }
        }
        // After a connection error, wait for the peer's FIN (or the linger limit).
        !self.conn.failed
            || self.read_closed
            || self.linger_until.is_some_and(|t| Instant::now() >= t)
    }

    /// The next time something is due: an idle check, a stream's deadline, a stalled
    /// socket's limit, the linger limit.
    fn next_due(&self) -> Instant {
        let mut at = self.idle.next;
        if let Some(d) = self.conn.next_deadline() {
            at = at.min(d);
        }
        if let Some(s) = self.stalled_since {
            at = at.min(s + self.conn.ctx.limits.send_timeout);
        }
        if let Some(l) = self.linger_until {
            at = at.min(l);
        }
        at
    }

    fn arm_timer(&mut self) {
        let at = self.next_due();
        if self.timer_at == Some(at) {
            return;
        }
        self.timer_at = Some(at);
        match &mut self.timer {
            Some(t) => t.as_mut().reset(at),
            None => self.timer = Some(Box::pin(tokio::time::sleep_until(at))),
        }
    }

    /// Polls the timer; when it fired, acts on what was due. True: it fired.
    fn poll_timer(&mut self, cx: &mut Context<'_>) -> bool {
        let Some(t) = &mut self.timer else {
            return false;
        };
        if t.as_mut().poll(cx).is_pending() {
            return false;
        }
        let now = Instant::now();
        let next = now + self.idle.period;
        t.as_mut().reset(next);
        self.timer_at = Some(next);
        self.on_due(now);
        true
    }

    fn on_due(&mut self, now: Instant) {
        if self
            .stalled_since
            .is_some_and(|s| now >= s + self.conn.ctx.limits.send_timeout)
        {
            // The client has not taken any output for --send-timeout: give up on it.
            self.conn.failed = true;
            self.read_closed = true;
            self.conn.out.clear();
            self.written = 0;
            self.linger_until = Some(now);
            return;
        }
        if now >= self.idle.next {
            self.idle.next = now + self.idle.period;
            let fresh = self.conn.requests != self.idle.seen;
            self.idle.seen = self.conn.requests;
            if !fresh && !self.conn.busy() {
                if self.idle.goaway_sent {
                    self.conn.failed = true;
                    self.linger_until = Some(now);
                } else {
                    self.idle.goaway_sent = true;
                    self.conn.graceful_goaway();
                }
            }
        }
        if !self.conn.failed {
            self.conn.on_timer(now);
        }
    }
}
