//! One connection's requests, the same way on every protocol (after h2load's `Session`).
//!
//! [`Session`] is the protocol side of one connection: whether another request may go now,
//! submitting one, what is in flight (and since when), how it ends. [`H1Session`] and
//! [`H2Session`] are sans-IO (they take received bytes and leave bytes to write, the
//! [`ByteSession`] part); the h3 session ([`crate::h3::H3Session`]) drives quinn-proto
//! streams, woken by the worker's QUIC driver with its connection's stream events. A
//! [`SessionIo`] moves a session's input and output: [`Tcp`] (reads, the session's one write
//! buffer, one write per loop turn) for h1 and h2, [`crate::h3::Quic`] for h3.
//!
//! Memory per connection: a connection with nothing buffered reads into its worker thread's
//! one shared read buffer (borrowed only inside the read's poll, and handed to the session
//! in the same loop turn, with no await in between); only bytes the session leaves
//! unconsumed (a head or frame split across reads) are copied into the connection's own
//! buffer, which the next reads then fill until it is empty again, and which is released
//! when the connection idles (nothing in flight, waiting for the next due request). So an
//! open, idle or waiting connection holds no read buffer: at 1,000 connections this took the
//! client from ~72 KiB (h1) and ~84 KiB (h2) per connection, mostly a 64 KiB read buffer
//! each, to ~4 and ~17.
//!
//! [`drive`] is the one client loop every protocol runs: fill the connection from the plan
//! (`ClientCtx::next`), write, wait for input, the next due time ([`crate::precise_sleep::Sleep`])
//! or the request timeout, handle what woke it; one clock reading per turn, taken when the
//! wake-up is handled (as h2load's libev loop time), so the requests a response frees are
//! sent microseconds later in the same turn.
//!
//! One timeout rule (`--timeout`): a request must be answered completely (its last byte)
//! within the timeout of being sent. The deadline of a connection is the oldest in-flight
//! request's send time plus the timeout; reaching it fails that request and every other one
//! in flight on the connection with kind `timeout`, and the connection ends (the client
//! opens another). The timer is re-armed only when it fires, as deadlines only move forward.
//!
//! [`H1Session`]: crate::h1::H1Session
//! [`H2Session`]: crate::h2::H2Session

use crate::client::{ClientCtx, SessionEnd};
use crate::deadlines::{Deadlines, Expired};
use crate::net::{io_phrase, Stream};
use crate::plan::Next;
pub use crate::plan::Req;
use crate::recorder::ErrorKind;
use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::task::Poll;
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt, ReadBuf};

/// Why a connection ends with a failure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fail {
    /// How the requests in flight fail.
    pub kind: ErrorKind,
    /// One line for the user.
    pub message: String,
    /// Protocol error code to close the connection with (h2: GOAWAY, h3: CONNECTION_CLOSE;
    /// 0 where the protocol has none).
    pub code: u64,
}

impl Fail {
    /// A failure without a protocol error code.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Fail {
        Fail {
            kind,
            message: message.into(),
            code: 0,
        }
    }

    /// The request timeout was reached.
    pub fn timeout(timeout: Duration) -> Fail {
        Fail::new(
            ErrorKind::Timeout,
            format!("no response within {timeout:?}"),
        )
    }
}

/// How one turn of the loop, or the session, ends.
pub type Outcome = Result<SessionEnd, Fail>;

/// What a session made of received bytes: how many it consumed and, when the connection
/// ends in order (h1 `Connection: close`), how.
pub type Consumed = Result<(usize, Option<SessionEnd>), Fail>;

/// The protocol side of one connection (h2load's `Session`): the client loop asks it whether
/// a request may be submitted, submits requests, and asks what is in flight; the session
/// reports finished requests to the recorder itself.
pub trait Session {
    /// Whether another request may be submitted now (stream credit, pipeline depth, no
    /// GOAWAY).
    fn can_submit(&self) -> bool;
    /// Submits request `req` for URL index `url`; its bytes are written on the next flush.
    fn submit(&mut self, ctx: &mut ClientCtx, url: usize, req: Req);
    /// Requests in flight (submitted, not finished).
    fn inflight(&self) -> usize;
    /// Send time of the oldest request in flight (the timeout counts from it).
    fn oldest_sent(&self) -> Option<Instant>;
    /// Responses received on this connection.
    fn answered(&self) -> u64;
    /// A request was sent on this connection and not taken back (with `--no-keepalive` the
    /// connection then takes no other).
    fn used(&self) -> bool;
    /// Nothing in flight: the end of the session if the connection takes no more requests
    /// (GOAWAY, stream ids used up), else `None`.
    fn idle_end(&mut self) -> Option<Outcome>;
    /// Ends the session: counts what finished, fails (`Err`: with its kind) or gives back
    /// (`Closed`: the server will not answer them) what is still in flight, and says how
    /// the connection ended.
    fn finish(&mut self, ctx: &mut ClientCtx, result: Outcome) -> SessionEnd;
}

/// A session on a byte stream (TCP or TLS), without IO: it takes received bytes and leaves
/// the bytes to write in its one write buffer.
pub trait ByteSession: Session {
    /// Read buffer size this protocol wants (an h1 head or h2 frames must fit).
    const READ_BUF: usize;
    /// Prefix of IO error messages (`"h2: "`).
    const LABEL: &'static str;
    /// Whether the connection is checked for a close (or anything unasked) before it takes
    /// a request after waiting idle ([`SessionIo::closed_while_idle`]): HTTP/1.1, whose
    /// server closes idle connections without a word; h2 has GOAWAY.
    const CHECK_IDLE_CLOSE: bool = false;
    /// Bytes to write (produced since the last flush).
    fn output(&mut self) -> &mut Vec<u8>;
    /// The output was written: count it and clear it.
    fn written(&mut self, ctx: &ClientCtx);
    /// Handles received bytes: `input` is what is buffered (the last `new` bytes of it just
    /// arrived). Returns the bytes consumed and, when the connection ends in order (h1
    /// `Connection: close`), how.
    fn on_read(&mut self, ctx: &mut ClientCtx, input: &[u8], new: usize, now: Instant) -> Consumed;
    /// The peer closed the connection.
    fn on_eof(&mut self, ctx: &mut ClientCtx, now: Instant) -> Outcome;
    /// Reading failed.
    fn on_read_error(&mut self, e: std::io::Error) -> Outcome;
    /// The read buffer is full and nothing of it can be consumed.
    fn input_too_large(&self) -> Fail;
    /// Queues the connection's last bytes (h2 GOAWAY) for `result`; written best effort.
    fn goodbye(&mut self, _result: &Outcome) {}
}

/// What woke the loop.
enum Wake<I> {
    Input(I),
    Due,
    Timeout,
}

/// Moves a session's input and output over its connection. `wait` must be cancel-safe (the
/// loop races it against its timers).
pub trait SessionIo<S: Session> {
    /// What `wait` hands to `on_input`.
    type Input;
    /// Writes what the session produced (one write per loop turn); `now` is the turn's clock
    /// reading (the write deadline counts from it).
    fn flush(
        &mut self,
        s: &mut S,
        ctx: &mut ClientCtx,
        now: Instant,
    ) -> impl Future<Output = Result<(), Fail>>;
    /// Waits until there is input for the session.
    fn wait(&mut self, s: &mut S) -> impl Future<Output = Self::Input>;
    /// Hands the input to the session; `Some` when the session ends.
    fn on_input(
        &mut self,
        s: &mut S,
        ctx: &mut ClientCtx,
        input: Self::Input,
        now: Instant,
    ) -> Result<Option<SessionEnd>, Fail>;
    /// Nothing is in flight and the loop sleeps until the next request is due: a chance to
    /// release buffers the connection does not need meanwhile.
    fn idle(&mut self) {}
    /// After such a sleep, before anything is sent: whether the peer closed the connection
    /// (or sent something nobody asked for) meanwhile. Such a connection ends in order with
    /// nothing sent on it, so its next requests go on a new one and fail nothing.
    fn closed_while_idle(&mut self) -> bool {
        false
    }
    /// Ends the connection after `result` (best-effort goodbye) and the session.
    fn close(
        &mut self,
        s: &mut S,
        ctx: &mut ClientCtx,
        result: Outcome,
    ) -> impl Future<Output = SessionEnd>;
}

/// Submits requests while the session takes them and the plan has them due. Returns when
/// to wake for the next one, and whether the plan is done.
fn fill<S: Session>(ctx: &mut ClientCtx, s: &mut S, now: Instant) -> (Option<Instant>, bool) {
    if ctx.no_keepalive && s.used() {
        return (None, false);
    }
    while s.can_submit() {
        match ctx.next(now) {
            Next::Go { scheduled, ticket } => {
                let url = ctx.next_url();
                let req = Req {
                    scheduled,
                    sent: now,
                    ticket,
                    client: ctx.index,
                };
                s.submit(ctx, url, req);
                if ctx.no_keepalive {
                    break;
                }
            }
            Next::Wait(t) => return (Some(t), false),
            Next::Done => return (None, true),
        }
    }
    (None, false)
}

/// Runs requests on one connection until the plan is done or the connection ends: the one
/// client loop of every protocol (see the module docs).
pub async fn drive<S: Session, T: SessionIo<S>>(
    ctx: &mut ClientCtx,
    s: &mut S,
    io: &mut T,
) -> SessionEnd {
    let mut now = Instant::now();
    let mut deadlines = Deadlines::new(ctx.timeout, ctx.connection_timeouts, now);
    let mut timer = std::pin::pin!(tokio::time::sleep_until(deadlines.next(None, now).into()));
    let mut due_timer = crate::precise_sleep::Sleep::until(now);
    let result: Outcome = loop {
        let before = s.inflight();
        let (wait_until, plan_done) = fill(ctx, s, now);
        if s.inflight() > before {
            deadlines.activity(now);
        }
        // -T starts once the client has taken its last request (h2load: when it submits it).
        if ctx.connection_timeouts.active.is_some() && (plan_done || ctx.plan.is_done()) {
            if let Some(at) = deadlines.last_request_sent(now) {
                if at < timer.deadline().into_std() {
                    timer.as_mut().reset(at.into());
                }
            }
        }
        if let Err(f) = io.flush(s, ctx, now).await {
            break Err(f);
        }
        if s.inflight() == 0 {
            match idle(
                ctx,
                s,
                io,
                wait_until,
                plan_done,
                &deadlines,
                &mut due_timer,
            )
            .await
            {
                Idle::Next(t) => now = t,
                Idle::End(end) => break end,
            }
            continue;
        }
        if let Some(t) = wait_until {
            due_timer.reset(t);
        }
        let wake = tokio::select! {
            biased;
            input = io.wait(s) => Wake::Input(input),
            _ = &mut due_timer, if wait_until.is_some() => Wake::Due,
            _ = &mut timer => Wake::Timeout,
        };
        now = Instant::now();
        let input = match wake {
            Wake::Due => None,
            Wake::Timeout => {
                timer
                    .as_mut()
                    .reset(deadlines.next(s.oldest_sent(), now).into());
                None
            }
            Wake::Input(input) => {
                deadlines.activity(now);
                Some(io.on_input(s, ctx, input, now))
            }
        };
        match input {
            Some(Ok(Some(end))) => break Ok(end),
            Some(Err(f)) => break Err(f),
            // Input keeps coming (a server sending endless 1xx or headers) and `biased` polls
            // it first: the deadlines are checked here too, so they are kept to the read.
            Some(Ok(None)) | None => {
                if let Some(which) = deadlines.expired(s.oldest_sent(), now) {
                    break Err(expired(ctx, &deadlines, which));
                }
            }
        }
    };
    io.close(s, ctx, result).await
}

/// How the loop goes on after a turn that left nothing in flight.
enum Idle {
    /// Go on at this time (the next request is due).
    Next(Instant),
    /// The session ends.
    End(Outcome),
}

/// Nothing in flight: the session ends (GOAWAY, `--no-keepalive`, the plan done), or the
/// loop sleeps until the next request is due, unless `-N` ends the connection first.
async fn idle<S: Session, T: SessionIo<S>>(
    ctx: &mut ClientCtx,
    s: &mut S,
    io: &mut T,
    wait_until: Option<Instant>,
    plan_done: bool,
    deadlines: &Deadlines,
    due_timer: &mut crate::precise_sleep::Sleep,
) -> Idle {
    if let Some(end) = s.idle_end() {
        return Idle::End(end);
    }
    let closed = || {
        Idle::End(Ok(SessionEnd::Closed {
            answered: s.answered(),
        }))
    };
    if ctx.no_keepalive && s.used() {
        return closed();
    }
    let Some(t) = wait_until else {
        return if plan_done {
            Idle::End(Ok(SessionEnd::PlanDone))
        } else {
            closed()
        };
    };
    io.idle();
    if let Some(inactive) = deadlines.inactive_at().filter(|i| *i < t) {
        due_timer.reset(inactive);
        due_timer.await;
        return Idle::End(Err(expired(ctx, deadlines, Expired::Inactive)));
    }
    due_timer.reset(t);
    due_timer.await;
    if io.closed_while_idle() {
        return closed();
    }
    Idle::Next(Instant::now())
}

/// The failure of the requests in flight when deadline `which` passed; a connection
/// timeout (`-T`, `-N`) also retires the client.
fn expired(ctx: &mut ClientCtx, deadlines: &Deadlines, which: Expired) -> Fail {
    if which.retires_client() {
        ctx.retired = true;
    }
    Fail::new(ErrorKind::Timeout, deadlines.message(which))
}

thread_local! {
    /// The worker thread's shared read buffer: a connection with nothing buffered reads into
    /// it (borrowed only inside one poll, and handed to the session in the same loop turn),
    /// so a connection waiting for a response holds no read buffer of its own.
    static SHARED_READ: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// A TCP or TLS connection: the thread's shared read buffer, the connection's own buffer
/// (kept by the client across its connections) only for bytes the session left unconsumed
/// (a message split across reads), the session's write buffer.
pub struct Tcp<'a> {
    stream: &'a mut Stream,
    /// Unconsumed bytes at `start..end`; empty (no allocation) while nothing is left over.
    read: &'a mut Vec<u8>,
    start: usize,
    end: usize,
    /// Read size (the session's [`ByteSession::READ_BUF`]).
    size: usize,
}

impl<'a> Tcp<'a> {
    /// The connection `stream`; bytes left over between reads are kept in `read`.
    pub fn new<S: ByteSession>(stream: &'a mut Stream, read: &'a mut Vec<u8>) -> Tcp<'a> {
        Tcp {
            stream,
            read,
            start: 0,
            end: 0,
            size: S::READ_BUF,
        }
    }

    /// Reads into the thread's shared buffer.
    async fn read_shared(&mut self) -> std::io::Result<usize> {
        let size = self.size;
        std::future::poll_fn(|cx| {
            SHARED_READ.with_borrow_mut(|buf| {
                if buf.len() < size {
                    buf.resize(size, 0);
                }
                let mut rb = ReadBuf::new(&mut buf[..size]);
                match Pin::new(&mut *self.stream).poll_read(cx, &mut rb) {
                    Poll::Ready(Ok(())) => Poll::Ready(Ok(rb.filled().len())),
                    Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
                    Poll::Pending => Poll::Pending,
                }
            })
        })
        .await
    }

    /// Keeps `left` (what the session did not consume of a shared read) in the connection's
    /// own buffer, sized for a full read.
    fn keep(&mut self, left: &[u8]) {
        if self.read.len() < self.size {
            self.read.resize(self.size, 0);
        }
        self.read[..left.len()].copy_from_slice(left);
        self.start = 0;
        self.end = left.len();
    }
}

/// What a read on a TCP connection gave.
pub enum TcpInput {
    /// `read` into the connection's own buffer returned.
    Read(std::io::Result<usize>),
    /// `read` into the thread's shared buffer returned (nothing was left over).
    Shared(std::io::Result<usize>),
    /// The buffer is full with one unconsumed message.
    Full,
}

impl<S: ByteSession> SessionIo<S> for Tcp<'_> {
    type Input = TcpInput;

    async fn flush(&mut self, s: &mut S, ctx: &mut ClientCtx, now: Instant) -> Result<(), Fail> {
        let out = s.output();
        if out.is_empty() {
            return Ok(());
        }
        // The flush pushes out TLS records rustls kept back when the socket was full.
        let write = async {
            self.stream.write_all(out).await?;
            self.stream.flush().await
        };
        match tokio::time::timeout_at((now + ctx.timeout).into(), write).await {
            Ok(Ok(())) => {
                s.written(ctx);
                Ok(())
            }
            Ok(Err(e)) => {
                s.output().clear();
                let message = format!("{}write: {}", S::LABEL, io_phrase(&e));
                Err(Fail::new(ErrorKind::of_io(&e), message))
            }
            Err(_) => {
                s.output().clear();
                let message = format!("{}write timed out", S::LABEL);
                Err(Fail::new(ErrorKind::Timeout, message))
            }
        }
    }

    async fn wait(&mut self, _s: &mut S) -> TcpInput {
        if self.start == self.end {
            return TcpInput::Shared(self.read_shared().await);
        }
        if self.end == self.read.len() {
            if self.start == 0 {
                return TcpInput::Full;
            }
            self.read.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        TcpInput::Read(self.stream.read(&mut self.read[self.end..]).await)
    }

    fn on_input(
        &mut self,
        s: &mut S,
        ctx: &mut ClientCtx,
        input: TcpInput,
        now: Instant,
    ) -> Result<Option<SessionEnd>, Fail> {
        let n = match input {
            TcpInput::Full => return Err(s.input_too_large()),
            TcpInput::Read(Ok(0)) | TcpInput::Shared(Ok(0)) => return s.on_eof(ctx, now).map(Some),
            TcpInput::Read(Err(e)) | TcpInput::Shared(Err(e)) => {
                return s.on_read_error(e).map(Some)
            }
            TcpInput::Shared(Ok(n)) => {
                // Read in this same turn (no await since): the shared buffer still holds it.
                return SHARED_READ.with_borrow(|buf| {
                    let (used, end) = s.on_read(ctx, &buf[..n], n, now)?;
                    if used < n {
                        self.keep(&buf[used..n]);
                    }
                    Ok(end)
                });
            }
            TcpInput::Read(Ok(n)) => n,
        };
        self.end += n;
        let (used, end) = s.on_read(ctx, &self.read[self.start..self.end], n, now)?;
        self.start += used;
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
        }
        Ok(end)
    }

    fn idle(&mut self) {
        if self.start == self.end && !self.read.is_empty() {
            *self.read = Vec::new();
        }
    }

    fn closed_while_idle(&mut self) -> bool {
        if !S::CHECK_IDLE_CLOSE {
            return false;
        }
        // One poll that does not wait: anything ready (end of stream, an error, bytes) means
        // the connection cannot take a request. The byte read, if any, is dropped with it.
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        let mut byte = [0u8; 1];
        let mut rb = ReadBuf::new(&mut byte);
        Pin::new(&mut *self.stream)
            .poll_read(&mut cx, &mut rb)
            .is_ready()
    }

    async fn close(&mut self, s: &mut S, ctx: &mut ClientCtx, result: Outcome) -> SessionEnd {
        s.output().clear();
        s.goodbye(&result);
        let out = s.output();
        if !out.is_empty() {
            // Best effort, bounded: the last frames of a connection.
            let write = async {
                self.stream.write_all(out).await?;
                self.stream.flush().await
            };
            let _ = tokio::time::timeout(Duration::from_secs(1), write).await;
            out.clear();
        }
        s.finish(ctx, result)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::h1::H1Session;
    use crate::plan::Plan;
    use crate::recorder::Recorder;
    use crate::target::Target;
    use crate::LoadConfig;
    use std::cell::{Cell, RefCell};
    use std::rc::Rc;

    /// A client of `depth` pipelined requests with `budget` requests to send.
    fn client(depth: usize, budget: u64) -> (ClientCtx, Rc<Cell<u64>>) {
        let cfg = LoadConfig {
            urls: vec!["http://127.0.0.1:8080/x".into()],
            ..Default::default()
        };
        let target = Rc::new(Target::from_config(&cfg).unwrap());
        let budget = Rc::new(Cell::new(budget));
        let start = Instant::now() - Duration::from_secs(1);
        let ctx = ClientCtx::for_test(
            target,
            Rc::new(RefCell::new(Recorder::new(start, true))),
            Plan::Closed(budget.clone()),
            depth,
        );
        (ctx, budget)
    }

    /// Feeds `data` to `s` in pieces of `chunk` bytes through a buffer, as [`Tcp`] does.
    fn feed(
        s: &mut H1Session,
        ctx: &mut ClientCtx,
        data: &[u8],
        chunk: usize,
    ) -> Option<SessionEnd> {
        let (mut buf, mut start) = (Vec::new(), 0);
        for piece in data.chunks(chunk) {
            buf.extend_from_slice(piece);
            let (used, end) = s
                .on_read(ctx, &buf[start..], piece.len(), Instant::now())
                .unwrap();
            start += used;
            if end.is_some() {
                return end;
            }
        }
        None
    }

    const RESPONSES: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhelloHTTP/1.1 404 Not Found\r\ntransfer-encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n";

    #[test]
    fn h1_session_fills_the_pipeline_and_records_responses_in_any_split() {
        for chunk in [1, 2, 5, 17, RESPONSES.len()] {
            let (mut ctx, budget) = client(3, 5);
            let mut s = H1Session::new(3);
            s.start(&ctx);
            let t0 = Instant::now();
            assert_eq!(fill(&mut ctx, &mut s, t0), (None, false));
            assert_eq!((s.inflight(), budget.get()), (3, 2));
            assert_eq!(s.oldest_sent(), Some(t0));
            let head = ctx.target.requests[0].h1_head.clone();
            assert_eq!(s.output().len(), 3 * head.len());
            s.written(&ctx);
            assert!(s.output().is_empty());
            assert!(feed(&mut s, &mut ctx, RESPONSES, chunk).is_none());
            assert_eq!((s.inflight(), s.answered()), (0, 3), "chunk {chunk}");
            let rec = ctx.rec.borrow();
            assert_eq!((rec.started, rec.done, rec.failed), (3, 3, 0));
            assert_eq!(rec.bytes.total_sent, 3 * head.len() as u64);
            assert_eq!(rec.bytes.total_received, RESPONSES.len() as u64);
            assert_eq!(rec.bytes.body_received, 8);
        }
    }

    #[test]
    fn h1_connection_close_gives_back_the_unanswered_and_a_failure_fails_them() {
        let (mut ctx, budget) = client(3, 5);
        let mut s = H1Session::new(3);
        s.start(&ctx);
        fill(&mut ctx, &mut s, Instant::now());
        let close = b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
        let end = feed(&mut s, &mut ctx, close, close.len());
        assert!(matches!(end, Some(SessionEnd::Closed { answered: 1 })));
        let end = s.finish(&mut ctx, Ok(SessionEnd::Closed { answered: 1 }));
        assert!(matches!(end, SessionEnd::Closed { answered: 1 }));
        // The two pipelined requests go back to the plan, and no longer count as started.
        assert_eq!((s.inflight(), budget.get()), (0, 4));
        assert_eq!(ctx.rec.borrow().started, 1);

        // On the next connection, the requests in flight at a timeout fail as timeouts.
        s.start(&ctx);
        fill(&mut ctx, &mut s, Instant::now());
        let end = s.finish(&mut ctx, Err(Fail::timeout(Duration::from_secs(1))));
        assert!(matches!(
            end,
            SessionEnd::Failed {
                answered: 0,
                kind: ErrorKind::Timeout,
                ..
            }
        ));
        let rec = ctx.rec.borrow();
        assert_eq!((rec.failed, rec.errors.timeout, budget.get()), (3, 3, 1));
    }

    #[test]
    fn h1_requests_in_flight_when_a_used_connection_ends_fail() {
        let (mut ctx, budget) = client(3, 10);
        let mut s = H1Session::new(3);
        s.start(&ctx);
        fill(&mut ctx, &mut s, Instant::now());
        let one = b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n";
        assert!(feed(&mut s, &mut ctx, one, one.len()).is_none());
        // The server dies with two requests of a kept-alive connection unanswered: they
        // were sent, so they fail (they used to go back to the plan, as if never sent).
        let end = s.on_eof(&mut ctx, Instant::now());
        assert!(
            matches!(&end, Err(f) if f.kind == ErrorKind::Reset),
            "{end:?}"
        );
        s.finish(&mut ctx, end);
        let reset = std::io::Error::from(std::io::ErrorKind::ConnectionReset);
        assert!(s.on_read_error(reset).is_err());
        let rec = ctx.rec.borrow();
        assert_eq!((rec.done, rec.failed, budget.get()), (1, 2, 7));
    }
}
