//! [`H3Session`]: the [`Session`] of one QUIC connection, and the [`Quic`] transport that
//! runs it through the client loop.

use super::control::{accept_uni, open_control, ControlState, Shared};
use super::wake::{ReadySet, SlotWaker};
use super::*;
use crate::net::with_tap;
use hxlab_wire::tap::Channel;
use hxlab_wire::Dir;

/// Most chunks taken from a stream per read call.
const READ_CHUNKS: usize = 16;

/// A request in flight.
struct Slot {
    id: u64,
    send: Option<quinn::SendStream>,
    /// Request bytes not yet taken by quinn.
    pending: Bytes,
    recv: quinn::RecvStream,
    req: Req,
}

/// A request whose stream is being opened (waiting for stream credit).
struct Opening {
    req: Req,
    url: usize,
}

enum SlotPoll {
    Pending,
    /// The slot is free again (answered, failed or refused).
    Freed,
    /// The connection is unusable.
    Fail(Fail),
}

fn lost(e: &quinn::ConnectionError) -> Fail {
    use quinn::ConnectionError as C;
    let kind = match e {
        C::TimedOut => ErrorKind::Timeout,
        C::ApplicationClosed(_) | C::ConnectionClosed(_) | C::Reset | C::LocallyClosed => {
            ErrorKind::Reset
        }
        _ => ErrorKind::Protocol,
    };
    Fail {
        kind,
        message: format!("h3: connection lost: {e}"),
        code: H3_NO_ERROR,
    }
}

fn varint_code(code: u64) -> quinn::VarInt {
    quinn::VarInt::from_u64(code).unwrap_or(quinn::VarInt::from_u32(0x102))
}

/// The HTTP/3 side of one QUIC connection: up to `depth` request slots, each with its own
/// waker, so a wake-up polls only the streams quinn woke.
pub struct H3Session<'c> {
    conn: &'c quinn::Connection,
    depth: usize,
    ready: Arc<ReadySet>,
    /// Per slot (cloned per poll as an `Rc`, not per waker).
    wakers: Rc<[Waker]>,
    slots: Vec<Option<Slot>>,
    parsers: Vec<ResponseParser>,
    free: Vec<usize>,
    dec: qpack::Decoder,
    opening: Option<Opening>,
    /// The stream being opened for `opening` (boxed once per connection), and what it gave.
    open: Pin<Box<Option<quinn::OpenBi<'c>>>>,
    opened: Option<Result<(quinn::SendStream, quinn::RecvStream), quinn::ConnectionError>>,
    inflight: usize,
    /// A request was started since the slots were last polled.
    started_unpolled: bool,
    answered: u64,
    sent_any: bool,
    goaway: Option<u64>,
    shared: Rc<Shared>,
    /// Our control stream must be opened again (0-RTT was rejected).
    reopen_control: bool,
    /// The control stream opened after a 0-RTT rejection.
    control: Rc<RefCell<Option<quinn::SendStream>>>,
    connect_timeout: Duration,
    /// The server's unidirectional streams (aborted when the session is dropped).
    acceptor: tokio::task::JoinHandle<()>,
}

impl Drop for H3Session<'_> {
    fn drop(&mut self) {
        self.acceptor.abort();
    }
}

impl<'c> H3Session<'c> {
    /// A session on `conn` for `ctx`'s client; starts reading the server's unidirectional
    /// streams.
    pub fn new(ctx: &ClientCtx, conn: &'c quinn::Connection) -> H3Session<'c> {
        let depth = if ctx.no_keepalive {
            1
        } else {
            ctx.depth.max(1)
        };
        let ready = Arc::new(ReadySet {
            flags: (0..=depth).map(|_| AtomicBool::new(false)).collect(),
            any: AtomicBool::new(false),
            session: AtomicWaker::new(),
        });
        let shared = Rc::new(Shared {
            state: RefCell::new(ControlState::default()),
            tap: ctx.tap.clone(),
            wake: Waker::from(Arc::new(SlotWaker {
                set: ready.clone(),
                index: depth,
            })),
        });
        let acceptor = tokio::task::spawn_local(accept_uni(conn.clone(), shared.clone()));
        let wakers = (0..depth)
            .map(|index| {
                Waker::from(Arc::new(SlotWaker {
                    set: ready.clone(),
                    index,
                }))
            })
            .collect();
        H3Session {
            conn,
            depth,
            ready,
            wakers,
            slots: (0..depth).map(|_| None).collect(),
            parsers: (0..depth).map(|_| ResponseParser::default()).collect(),
            free: (0..depth).rev().collect(),
            dec: qpack::Decoder::new(),
            opening: None,
            open: Box::pin(None),
            opened: None,
            inflight: 0,
            started_unpolled: false,
            answered: 0,
            sent_any: false,
            goaway: None,
            shared,
            reopen_control: false,
            control: Rc::new(RefCell::new(None)),
            connect_timeout: ctx.connect_timeout,
            acceptor,
        }
    }

    /// Frees slot `i` and resets what is left of its streams with `code`.
    fn release(&mut self, i: usize, code: Option<u64>) {
        if let Some(mut s) = self.slots[i].take() {
            if let Some(code) = code {
                let _ = s.recv.stop(varint_code(code));
                if let Some(send) = &mut s.send {
                    let _ = send.reset(varint_code(code));
                }
            } else if let Some(send) = &mut s.send {
                // Answered before the whole request body was taken: stop sending it.
                let _ = send.reset(varint_code(H3_NO_ERROR));
            }
            self.parsers[i].reset();
            self.free.push(i);
            self.inflight -= 1;
        }
    }

    fn fail_slot(&mut self, ctx: &mut ClientCtx, i: usize, kind: ErrorKind, message: &str) {
        if let Some(s) = &self.slots[i] {
            ctx.rec
                .borrow_mut()
                .request_failed(s.req.scheduled, kind, &message);
        }
        self.release(i, Some(H3_REQUEST_CANCELLED));
    }

    /// The request of slot `i` was not processed: it goes back to the plan.
    fn unsend(&mut self, ctx: &mut ClientCtx, i: usize) {
        if let Some(s) = &self.slots[i] {
            ctx.rec.borrow_mut().request_unsent(s.req.scheduled);
            ctx.plan.give_back(s.req.ticket);
        }
        self.release(i, Some(H3_REQUEST_CANCELLED));
    }

    /// GOAWAY: requests at or above `id` were not processed; they go back to the plan.
    fn refuse_from(&mut self, ctx: &mut ClientCtx, id: u64) {
        for i in 0..self.depth {
            if self.slots[i].as_ref().is_some_and(|s| s.id >= id) {
                self.unsend(ctx, i);
            }
        }
    }

    /// The server rejected 0-RTT: the streams sent in it are gone (our control stream
    /// too). Their requests are sent again on this connection, now in 1-RTT.
    fn early_data_rejected(&mut self, ctx: &mut ClientCtx, i: usize) -> SlotPoll {
        self.unsend(ctx, i);
        self.sent_any = false;
        self.reopen_control = true;
        SlotPoll::Freed
    }

    /// The stream for request `o` is open: the request goes into a free slot.
    fn start(
        &mut self,
        ctx: &mut ClientCtx,
        o: Opening,
        send: quinn::SendStream,
        mut recv: quinn::RecvStream,
        now: Instant,
    ) {
        let id = u64::from(send.id());
        if self.goaway.is_some_and(|g| id >= g) {
            // Opened after a GOAWAY that excludes it: never sent.
            let mut send = send;
            let _ = send.reset(varint_code(H3_REQUEST_CANCELLED));
            let _ = recv.stop(varint_code(H3_REQUEST_CANCELLED));
            ctx.plan.give_back(o.req.ticket);
            return;
        }
        let Some(i) = self.free.pop() else {
            ctx.plan.give_back(o.req.ticket);
            return;
        };
        let t = &ctx.target.requests[o.url];
        {
            let mut rec = ctx.rec.borrow_mut();
            rec.request_started(o.req.scheduled, now);
            rec.sent(
                t.h3_request.len() as u64,
                t.h3_header_payload,
                t.h2_header_size,
            );
        }
        self.slots[i] = Some(Slot {
            id,
            send: Some(send),
            pending: t.h3_request.clone(),
            recv,
            req: o.req,
        });
        self.inflight += 1;
        self.sent_any = true;
        self.ready.mark_for_this_pass(i);
        self.started_unpolled = true;
    }

    /// Writes what slot `i` still has to send; `Some` when the slot or the connection ended.
    fn write_slot(
        &mut self,
        ctx: &mut ClientCtx,
        i: usize,
        cx: &mut Context<'_>,
    ) -> Option<SlotPoll> {
        let slot = self.slots[i].as_mut()?;
        let send = slot.send.as_mut()?;
        while !slot.pending.is_empty() {
            let before = self.shared.tap.as_ref().map(|_| slot.pending.clone());
            let mut bufs = [std::mem::take(&mut slot.pending)];
            let r = pin!(send.write_chunks(&mut bufs)).poll(cx);
            slot.pending = std::mem::take(&mut bufs[0]);
            match r {
                Poll::Ready(Ok(_)) => {
                    if let (Some(tap), Some(b)) = (&self.shared.tap, before) {
                        let sent = &b[..b.len() - slot.pending.len()];
                        with_tap(tap, |t| t.bytes(Dir::Send, Channel::Quic(slot.id), sent));
                    }
                }
                Poll::Pending => break,
                // The server stopped reading the request: its response may still come.
                Poll::Ready(Err(quinn::WriteError::Stopped(_))) => {
                    slot.pending = Bytes::new();
                    break;
                }
                Poll::Ready(Err(quinn::WriteError::ZeroRttRejected)) => {
                    return Some(self.early_data_rejected(ctx, i));
                }
                Poll::Ready(Err(quinn::WriteError::ConnectionLost(e))) => {
                    let f = lost(&e);
                    self.fail_slot(ctx, i, f.kind, &f.message);
                    return Some(SlotPoll::Fail(f));
                }
                Poll::Ready(Err(e)) => {
                    let message = format!("h3: request write: {e}");
                    self.fail_slot(ctx, i, ErrorKind::Protocol, &message);
                    return Some(SlotPoll::Freed);
                }
            }
        }
        if slot.pending.is_empty() {
            let _ = send.finish();
            slot.send = None;
            if let Some(tap) = &self.shared.tap {
                with_tap(tap, |t| t.stream_end(Dir::Send, Channel::Quic(slot.id)));
            }
        }
        None
    }

    /// Writes what slot `i` still has to send and reads what arrived.
    fn poll_slot(&mut self, ctx: &mut ClientCtx, i: usize, now: Instant) -> SlotPoll {
        let wakers = self.wakers.clone();
        let mut cx = Context::from_waker(&wakers[i]);
        if let Some(end) = self.write_slot(ctx, i, &mut cx) {
            return end;
        }
        // Every chunk quinn has for the stream in one call (one connection lock) a time.
        let mut chunks: [Bytes; READ_CHUNKS] = Default::default();
        loop {
            let Some(slot) = self.slots[i].as_mut() else {
                return SlotPoll::Freed;
            };
            let r = pin!(slot.recv.read_chunks(&mut chunks)).poll(&mut cx);
            match r {
                Poll::Pending => return SlotPoll::Pending,
                Poll::Ready(Ok(Some(n))) => {
                    let p = &mut self.parsers[i];
                    let mut result = Ok(());
                    let mut bytes = 0;
                    for chunk in &mut chunks[..n] {
                        let chunk = std::mem::take(chunk);
                        if let Some(tap) = &self.shared.tap {
                            let id = Channel::Quic(slot.id);
                            with_tap(tap, |t| t.bytes(Dir::Recv, id, &chunk));
                        }
                        bytes += chunk.len() as u64;
                        result = p.feed(&mut self.dec, &chunk, now);
                        if result.is_err() {
                            break;
                        }
                    }
                    let header = std::mem::take(&mut p.header_bytes);
                    ctx.rec.borrow_mut().received(now, bytes, header, 0);
                    if let Err(e) = result {
                        return self.h3_error(ctx, i, e);
                    }
                }
                Poll::Ready(Ok(None)) => {
                    if let Some(tap) = &self.shared.tap {
                        let id = Channel::Quic(slot.id);
                        with_tap(tap, |t| t.stream_end(Dir::Recv, id));
                    }
                    return self.response_done(ctx, i, now);
                }
                Poll::Ready(Err(e)) => return self.read_error(ctx, i, e),
            }
        }
    }

    /// Slot `i`'s response stream ended.
    fn response_done(&mut self, ctx: &mut ClientCtx, i: usize, now: Instant) -> SlotPoll {
        if let Err(e) = self.parsers[i].finish() {
            return self.h3_error(ctx, i, e);
        }
        let (Some(slot), p) = (&self.slots[i], &self.parsers[i]) else {
            return SlotPoll::Freed;
        };
        {
            let mut r = ctx.rec.borrow_mut();
            r.received(now, 0, 0, p.body);
            r.received_header_uncompressed(p.uncompressed);
            let first_byte = p.first_byte.unwrap_or(now);
            r.response(slot.req.scheduled, slot.req.sent, first_byte, now, p.status);
        }
        self.answered += 1;
        self.release(i, None);
        SlotPoll::Freed
    }

    /// Reading slot `i`'s response failed.
    fn read_error(&mut self, ctx: &mut ClientCtx, i: usize, e: quinn::ReadError) -> SlotPoll {
        match e {
            quinn::ReadError::ConnectionLost(e) => {
                let f = lost(&e);
                self.fail_slot(ctx, i, f.kind, &f.message);
                SlotPoll::Fail(f)
            }
            quinn::ReadError::ZeroRttRejected => self.early_data_rejected(ctx, i),
            quinn::ReadError::Reset(code) => {
                let code = code.into_inner();
                let message = format!("h3: stream reset by the server ({})", code_name(code));
                self.fail_slot(ctx, i, ErrorKind::Reset, &message);
                SlotPoll::Freed
            }
            e => {
                let message = format!("h3: response read: {e}");
                self.fail_slot(ctx, i, ErrorKind::Protocol, &message);
                SlotPoll::Freed
            }
        }
    }

    fn h3_error(&mut self, ctx: &mut ClientCtx, i: usize, e: H3Error) -> SlotPoll {
        match e {
            H3Error::Stream { code, message } => {
                if let Some(s) = &self.slots[i] {
                    ctx.rec.borrow_mut().request_failed(
                        s.req.scheduled,
                        ErrorKind::Protocol,
                        &message,
                    );
                }
                self.release(i, Some(code));
                SlotPoll::Freed
            }
            H3Error::Connection { code, message } => {
                self.fail_slot(ctx, i, ErrorKind::Protocol, &message);
                SlotPoll::Fail(Fail {
                    kind: ErrorKind::Protocol,
                    message,
                    code,
                })
            }
        }
    }

    /// Ready when something woke the session: the stream being opened, a slot, the control
    /// streams.
    fn poll_wake(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        self.ready.session.register(cx.waker());
        if let Some(f) = self.open.as_mut().as_pin_mut() {
            if let Poll::Ready(r) = f.poll(cx) {
                self.open.set(None);
                self.opened = Some(r);
                return Poll::Ready(());
            }
        }
        if self.ready.any() {
            return Poll::Ready(());
        }
        Poll::Pending
    }

    /// Handles one wake-up: control events, the opened stream, the slots quinn woke.
    fn on_wake(&mut self, ctx: &mut ClientCtx, now: Instant) -> Result<(), Fail> {
        // A waker that fires from here on is seen on the next turn.
        self.ready.begin_pass();
        if self.ready.take(self.depth) {
            let (error, goaway) = {
                let mut st = self.shared.state.borrow_mut();
                (st.error.take(), st.goaway)
            };
            if let Some((code, message)) = error {
                return Err(Fail {
                    kind: ErrorKind::Protocol,
                    message,
                    code,
                });
            }
            if let Some(id) = goaway {
                if self.goaway.is_none_or(|g| id < g) {
                    self.goaway = Some(id);
                    self.refuse_from(ctx, id);
                }
            }
        }
        if let Some(r) = self.opened.take() {
            if let Some(o) = self.opening.take() {
                match r {
                    Ok((send, recv)) => self.start(ctx, o, send, recv, now),
                    Err(e) => {
                        ctx.plan.give_back(o.req.ticket);
                        return Err(lost(&e));
                    }
                }
            }
        }
        for i in 0..self.depth {
            if self.slots[i].is_some() && self.ready.take(i) {
                if let SlotPoll::Fail(f) = self.poll_slot(ctx, i, now) {
                    return Err(f);
                }
            }
        }
        self.started_unpolled = false;
        if self.reopen_control {
            self.reopen_control = false;
            let (conn, holder) = (self.conn.clone(), self.control.clone());
            let (limit, tap) = (self.connect_timeout, self.shared.tap.clone());
            tokio::task::spawn_local(async move {
                let open = open_control(&conn, tap.as_ref());
                if let Ok(Ok(s)) = tokio::time::timeout(limit, open).await {
                    *holder.borrow_mut() = Some(s);
                }
            });
        }
        Ok(())
    }
}

impl Session for H3Session<'_> {
    #[inline]
    fn can_submit(&self) -> bool {
        self.opening.is_none() && self.goaway.is_none() && self.inflight < self.depth
    }

    fn submit(&mut self, ctx: &mut ClientCtx, url: usize, req: Req) {
        self.opening = Some(Opening { req, url });
        self.open.set(Some(self.conn.open_bi()));
        // With stream credit the stream opens at once: the request starts in this turn and
        // the flush writes it. Otherwise the control waker wakes the loop when credit comes
        // (and the loop's wait then polls the opening with its own waker).
        let mut cx = Context::from_waker(&self.shared.wake);
        let Some(Poll::Ready(r)) = self.open.as_mut().as_pin_mut().map(|f| f.poll(&mut cx)) else {
            return;
        };
        self.open.set(None);
        match (r, self.opening.take()) {
            (Ok((send, recv)), Some(o)) => self.start(ctx, o, send, recv, req.sent),
            // Handled (the session ends) by the flush that follows.
            (r, o) => {
                self.opening = o;
                self.opened = Some(r);
            }
        }
    }

    fn inflight(&self) -> usize {
        self.inflight + usize::from(self.opening.is_some())
    }

    fn oldest_sent(&self) -> Option<Instant> {
        let opening = self.opening.as_ref().map(|o| o.req.sent);
        let slots = self.slots.iter().flatten().map(|s| s.req.sent);
        opening.into_iter().chain(slots).min()
    }

    fn answered(&self) -> u64 {
        self.answered
    }

    fn used(&self) -> bool {
        self.sent_any
    }

    fn idle_end(&mut self) -> Option<Outcome> {
        self.goaway.map(|_| {
            Ok(SessionEnd::Closed {
                answered: self.answered,
            })
        })
    }

    fn finish(&mut self, ctx: &mut ClientCtx, result: Outcome) -> SessionEnd {
        // A request whose stream never opened was not sent: it goes back to the plan.
        if let Some(o) = self.opening.take() {
            ctx.plan.give_back(o.req.ticket);
        }
        self.open.set(None);
        match result {
            Ok(end) => end,
            Err(f) => {
                for i in 0..self.depth {
                    self.fail_slot(ctx, i, f.kind, &f.message);
                }
                SessionEnd::Failed {
                    answered: self.answered,
                    kind: f.kind,
                    message: f.message,
                }
            }
        }
    }
}

/// The QUIC side of an [`H3Session`]: requests are written and responses read as their
/// slots are polled; the flush polls the slots of the requests started in the turn, a
/// wake-up comes from the slot wakers (or the stream being opened).
pub struct Quic;

impl<'c> Transport<H3Session<'c>> for Quic {
    type Input = ();

    /// Requests started in this turn are written (their slots polled) now.
    async fn flush(
        &mut self,
        s: &mut H3Session<'c>,
        ctx: &mut ClientCtx,
        now: Instant,
    ) -> Result<(), Fail> {
        if s.started_unpolled || s.opened.is_some() {
            s.on_wake(ctx, now)?;
        }
        Ok(())
    }

    async fn wait(&mut self, s: &mut H3Session<'c>) {
        std::future::poll_fn(|cx| s.poll_wake(cx)).await
    }

    fn on_input(
        &mut self,
        s: &mut H3Session<'c>,
        ctx: &mut ClientCtx,
        _input: (),
        now: Instant,
    ) -> Result<Option<SessionEnd>, Fail> {
        s.on_wake(ctx, now).map(|()| None)
    }

    async fn close(
        &mut self,
        s: &mut H3Session<'c>,
        ctx: &mut ClientCtx,
        result: Outcome,
    ) -> SessionEnd {
        let code = match &result {
            Err(f) if f.code != 0 => f.code,
            _ => H3_NO_ERROR,
        };
        s.conn.close(varint_code(code), b"");
        s.finish(ctx, result)
    }
}

/// Runs requests on one HTTP/3 connection until the plan is done or the connection fails:
/// opens our control stream, then the client loop drives an [`H3Session`].
pub async fn session(ctx: &mut ClientCtx, conn: quinn::Connection) -> SessionEnd {
    let control = match tokio::time::timeout(
        ctx.connect_timeout,
        open_control(&conn, ctx.tap.as_ref()),
    )
    .await
    {
        Err(_) => return setup_failed(ctx, ErrorKind::Timeout, "h3 setup timed out".into()),
        Ok(Err(e)) => return setup_failed(ctx, ErrorKind::Protocol, format!("h3 setup: {e}")),
        Ok(Ok(s)) => s,
    };
    let mut s = H3Session::new(ctx, &conn);
    let end = crate::session::drive(ctx, &mut s, &mut Quic).await;
    if ctx.tap.is_some() {
        // A trace shows the server's control stream too, which a server may open only after
        // answering: wait for it a little (bounded) before closing.
        let until = Instant::now() + ctx.connect_timeout.min(Duration::from_millis(500));
        while !s.shared.state.borrow().control_seen
            && conn.close_reason().is_none()
            && Instant::now() < until
        {
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        tokio::task::yield_now().await;
    }
    drop(s);
    drop(control);
    if let Some(tap) = &ctx.tap {
        tell_closed(tap, &conn);
    }
    end
}

/// Tells the tap how the connection closed and what its path counted.
fn tell_closed(tap: &crate::net::SharedTap, conn: &quinn::Connection) {
    let reason = match conn.close_reason() {
        Some(quinn::ConnectionError::LocallyClosed) | None => {
            "closing the QUIC connection (H3_NO_ERROR)".to_string()
        }
        Some(e) => format!("the QUIC connection ended: {e}"),
    };
    let stats = conn.stats();
    let s = hxlab_wire::tap::QuicStats {
        datagrams_sent: stats.udp_tx.datagrams,
        datagrams_received: stats.udp_rx.datagrams,
        packets_lost: stats.path.lost_packets,
        rtt_us: stats.path.rtt.as_micros() as u64,
        cwnd: stats.path.cwnd,
    };
    with_tap(tap, |t| {
        t.note(&reason);
        t.quic_closed(&s);
        t.closed();
    });
}

fn setup_failed(ctx: &ClientCtx, kind: ErrorKind, message: String) -> SessionEnd {
    ctx.rec.borrow_mut().connect_failed(kind, &message);
    SessionEnd::Failed {
        answered: 0,
        kind,
        message,
    }
}
