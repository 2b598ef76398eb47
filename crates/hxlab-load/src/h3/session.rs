//! [`H3Session`]: the [`Session`] of one QUIC connection, and the [`Quic`] transport that
//! runs it through the client loop.

use super::control::{control_opener, open_control, ControlState, UniReader};
use super::qpack_state::{Qpack, QpackConfig, UniWriter};
use super::*;
use crate::net::with_tap;
use hxlab_wire::tap::Channel;
use hxlab_wire::Dir;
use quinn_proto::{ReadError, StreamEvent, StreamId, WriteError};
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// Hashes stream ids (one `u64` each) with a multiply instead of SipHash: the ids are
/// ours, nothing to defend against.
#[derive(Default)]
struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        // The product's high bits are the mixed ones: fold them into the low bits too.
        self.0 ^ (self.0 >> 29)
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0.rotate_left(5) ^ n).wrapping_mul(0x517c_c1b7_2722_0a95);
    }
}

/// A request in flight.
struct Slot {
    id: StreamId,
    /// The request is still being sent (not finished or reset).
    sending: bool,
    /// Request bytes not yet taken by quinn-proto.
    pending: Bytes,
    /// Opened in 0-RTT (refused if the server rejects early data).
    zero_rtt: bool,
    req: Req,
}

/// A request waiting for stream credit.
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

/// The HTTP/3 side of one QUIC connection: up to `depth` request slots; the driver's stream
/// events mark the slots they concern, and a wake-up polls only those.
pub struct H3Session {
    conn: QuicConn,
    depth: usize,
    /// Slots with something to say (a stream event, or a request just started).
    ready: Vec<bool>,
    slots: Vec<Option<Slot>>,
    /// Request stream → slot.
    by_stream: HashMap<StreamId, usize, BuildHasherDefault<IdHasher>>,
    parsers: Vec<ResponseParser>,
    free: Vec<usize>,
    /// The connection's QPACK encoder, decoder and streams.
    qpack: Qpack,
    /// The decoder's insert count when blocked heads were last retried.
    inserts_seen: u64,
    opening: Option<Opening>,
    inflight: usize,
    /// A request was started since the slots were last polled.
    started_unpolled: bool,
    answered: u64,
    sent_any: bool,
    goaway: Option<u64>,
    /// The server's unidirectional streams and what they said.
    uni: Vec<UniReader>,
    control_state: ControlState,
    tap: Option<crate::net::SharedTap>,
    /// The connection started in 0-RTT and its verdict has not been looked at yet.
    early: bool,
    /// Our control stream being opened again (0-RTT was rejected).
    reopen_control: Option<UniWriter>,
    /// The driver's events, taken each wake-up (the buffer is kept).
    events: Vec<StreamEvent>,
}

impl H3Session {
    /// A session on `conn` for `ctx`'s client.
    pub fn new(ctx: &ClientCtx, conn: QuicConn) -> H3Session {
        let depth = if ctx.no_keepalive {
            1
        } else {
            ctx.depth.max(1)
        };
        let early = conn.state().quic.q.is_handshaking();
        H3Session {
            conn,
            depth,
            ready: vec![false; depth],
            slots: (0..depth).map(|_| None).collect(),
            by_stream: HashMap::with_capacity_and_hasher(depth, Default::default()),
            parsers: (0..depth).map(|_| ResponseParser::default()).collect(),
            free: (0..depth).rev().collect(),
            qpack: Qpack::new(QpackConfig::of(ctx), ctx.target.requests.len()),
            inserts_seen: 0,
            opening: None,
            inflight: 0,
            started_unpolled: false,
            answered: 0,
            sent_any: false,
            goaway: None,
            uni: Vec::new(),
            control_state: ControlState::default(),
            tap: ctx.tap.clone(),
            early,
            reopen_control: None,
            events: Vec::new(),
        }
    }

    /// Frees slot `i` and resets what is left of its streams with `code` (not when the
    /// streams are gone: rejected 0-RTT, whose ids quinn-proto hands out again).
    fn release(&mut self, i: usize, code: Option<u64>) {
        if let Some(s) = self.slots[i].take() {
            self.by_stream.remove(&s.id);
            if code.is_some() && !self.parsers[i].has_response() {
                // Abandoned before its head was decoded: the server's encoder is told.
                self.qpack.cancel(u64::from(s.id));
            }
            // Nothing to tell quinn-proto about a stream answered and fully sent (the usual
            // case), nor about streams that are gone.
            let gone = s.zero_rtt && self.rejected();
            if !gone && (code.is_some() || s.sending) {
                self.conn.with(|q| {
                    if let Some(code) = code {
                        let _ = q.recv_stream(s.id).stop(varint_code(code));
                        if s.sending {
                            let _ = q.send_stream(s.id).reset(varint_code(code));
                        }
                    } else if s.sending {
                        // Answered before the whole request body was taken: stop sending it.
                        let _ = q.send_stream(s.id).reset(varint_code(H3_NO_ERROR));
                    }
                });
            }
            self.parsers[i].reset();
            self.ready[i] = false;
            self.free.push(i);
            self.inflight -= 1;
        }
    }

    /// 0-RTT data was refused: the handshake is over and the server did not take it (or the
    /// connection died during the handshake), as quinn's `check_0rtt` says.
    fn rejected(&self) -> bool {
        let st = self.conn.state();
        !st.quic.q.is_handshaking() && !st.quic.q.accepted_0rtt()
    }

    /// Why the connection ended, if it did.
    fn lost(&self) -> Option<quinn::ConnectionError> {
        self.conn.state().lost.clone()
    }

    fn fail_slot(&mut self, ctx: &mut ClientCtx, i: usize, kind: ErrorKind, message: &str) {
        if let Some(s) = &self.slots[i] {
            ctx.rec.borrow_mut().request_failed(&s.req, kind, &message);
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
            if self.slots[i]
                .as_ref()
                .is_some_and(|s| u64::from(s.id) >= id)
            {
                self.unsend(ctx, i);
            }
        }
    }

    /// Once the handshake is over: if the server rejected 0-RTT, the streams sent in it are
    /// gone (our control stream too). Their requests are sent again on this connection, now
    /// in 1-RTT, and the control stream is opened again.
    fn check_early_data(&mut self, ctx: &mut ClientCtx) {
        if !self.early || self.conn.state().quic.q.is_handshaking() {
            return;
        }
        self.early = false;
        if !self.rejected() {
            return;
        }
        for i in 0..self.depth {
            if self.slots[i].as_ref().is_some_and(|s| s.zero_rtt) {
                self.unsend(ctx, i);
            }
        }
        self.sent_any = false;
        // The QPACK streams and what they carried are gone with the 0-RTT data.
        self.qpack = Qpack::new(self.qpack.config(), ctx.target.requests.len());
        self.inserts_seen = 0;
        if self.conn.state().lost.is_none() {
            self.reopen_control = Some(control_opener(self.qpack.config()));
        }
    }

    /// The stream for request `o` is open: the request goes into a free slot.
    fn start(&mut self, ctx: &mut ClientCtx, o: Opening, id: StreamId, now: Instant) {
        let zero_rtt = self.conn.state().quic.q.is_handshaking();
        if self.goaway.is_some_and(|g| u64::from(id) >= g) {
            // Opened after a GOAWAY that excludes it: never sent.
            self.conn.with(|q| {
                let _ = q.send_stream(id).reset(varint_code(H3_REQUEST_CANCELLED));
                let _ = q.recv_stream(id).stop(varint_code(H3_REQUEST_CANCELLED));
            });
            ctx.plan.give_back(o.req.ticket);
            return;
        }
        let Some(i) = self.free.pop() else {
            ctx.plan.give_back(o.req.ticket);
            return;
        };
        let (bytes, header) = self.qpack.request(&ctx.target, o.url, u64::from(id));
        // The inserts this request references go out first.
        let (qpack, tap) = (&mut self.qpack, self.tap.as_ref());
        if let Err(e) = self.conn.with(|q| qpack.flush_encoder(q, tap)) {
            self.control_state.fail(
                QPACK_ENCODER_STREAM_ERROR,
                &format!("h3: QPACK encoder stream: {e}"),
            );
        }
        {
            let mut rec = ctx.rec.borrow_mut();
            rec.request_started(o.req.scheduled, now);
            let t = &ctx.target.requests[o.url];
            rec.sent(bytes.len() as u64, header, t.h2_header_size);
        }
        self.slots[i] = Some(Slot {
            id,
            sending: true,
            pending: bytes,
            zero_rtt,
            req: o.req,
        });
        self.by_stream.insert(id, i);
        self.inflight += 1;
        self.sent_any = true;
        self.ready[i] = true;
        self.started_unpolled = true;
    }

    /// Opens the stream of the request waiting for one, if there is stream credit.
    fn try_open(&mut self, ctx: &mut ClientCtx, now: Instant) {
        // On a lost connection the request is not sent: `finish` gives it back.
        if self.opening.is_none() || self.lost().is_some() {
            return;
        }
        if let Some(id) = self.conn.with(|q| q.streams().open(quinn_proto::Dir::Bi)) {
            if let Some(o) = self.opening.take() {
                self.start(ctx, o, id, now);
            }
        }
    }

    /// Writes what slot `i` still has to send; `Some` when the slot or the connection ended.
    fn write_slot(&mut self, ctx: &mut ClientCtx, i: usize) -> Option<SlotPoll> {
        if !self.slots[i].as_ref()?.sending {
            return None;
        }
        if let Some(e) = self.lost() {
            let f = lost(&e);
            self.fail_slot(ctx, i, f.kind, &f.message);
            return Some(SlotPoll::Fail(f));
        }
        let slot = self.slots[i].as_mut()?;
        let (id, tap) = (slot.id, &self.tap);
        let before = tap.as_ref().map(|_| slot.pending.clone());
        let mut bufs = [std::mem::take(&mut slot.pending)];
        let r = self
            .conn
            .with(|q| q.send_stream(id).write_chunks(&mut bufs));
        slot.pending = std::mem::take(&mut bufs[0]);
        match r {
            Ok(_) => {
                if let (Some(tap), Some(b)) = (tap, before) {
                    let sent = &b[..b.len() - slot.pending.len()];
                    with_tap(tap, |t| {
                        t.bytes(Dir::Send, Channel::Quic(u64::from(id)), sent)
                    });
                }
            }
            Err(WriteError::Blocked) => {}
            // The server stopped reading the request: its response may still come.
            Err(WriteError::Stopped(_)) => slot.pending = Bytes::new(),
            Err(e @ WriteError::ClosedStream) => {
                let message = format!("h3: request write: {e}");
                self.fail_slot(ctx, i, ErrorKind::Protocol, &message);
                return Some(SlotPoll::Freed);
            }
        }
        if slot.pending.is_empty() {
            let _ = self.conn.with(|q| q.send_stream(id).finish());
            slot.sending = false;
            if let Some(tap) = tap {
                with_tap(tap, |t| {
                    t.stream_end(Dir::Send, Channel::Quic(u64::from(id)))
                });
            }
        }
        None
    }

    /// Writes what slot `i` still has to send and reads what arrived.
    fn poll_slot(&mut self, ctx: &mut ClientCtx, i: usize, now: Instant) -> SlotPoll {
        if let Some(end) = self.write_slot(ctx, i) {
            return end;
        }
        let Some(slot) = self.slots[i].as_ref() else {
            return SlotPoll::Freed;
        };
        let id = slot.id;
        let (p, dec, tap) = (&mut self.parsers[i], &mut self.qpack.dec, &self.tap);
        if let Err(e) = p.resume(dec, id.into(), now) {
            return self.h3_error(ctx, i, e);
        }
        if p.is_blocked() {
            // Not read further until the inserts it waits for arrive.
            return SlotPoll::Pending;
        }
        if p.ended {
            return self.response_done(ctx, i, now);
        }
        let mut result = Ok(());
        let mut bytes = 0u64;
        let mut end: Result<bool, Option<ReadError>> = Ok(false);
        self.conn.with(|q| {
            let mut rs = q.recv_stream(id);
            let Ok(mut chunks) = rs.read(true) else {
                end = Err(None);
                return;
            };
            // Bounded: every chunk consumes received data.
            loop {
                match chunks.next(usize::MAX) {
                    Ok(Some(chunk)) => {
                        if let Some(tap) = tap {
                            with_tap(tap, |t| {
                                t.bytes(Dir::Recv, Channel::Quic(id.into()), &chunk.bytes)
                            });
                        }
                        bytes += chunk.bytes.len() as u64;
                        result = p.feed(dec, id.into(), &chunk.bytes, now);
                        if result.is_err() || p.is_blocked() {
                            break;
                        }
                    }
                    Ok(None) => {
                        end = Ok(true);
                        break;
                    }
                    Err(e) => {
                        end = Err(Some(e));
                        break;
                    }
                }
            }
            let _ = chunks.finalize();
        });
        if bytes > 0 {
            let header = std::mem::take(&mut p.header_bytes);
            ctx.rec.borrow_mut().received(now, bytes, header, 0);
        }
        if let Err(e) = result {
            return self.h3_error(ctx, i, e);
        }
        match end {
            Ok(false) => SlotPoll::Pending,
            Ok(true) => {
                if let Some(tap) = &self.tap {
                    with_tap(tap, |t| t.stream_end(Dir::Recv, Channel::Quic(id.into())));
                }
                if self.parsers[i].is_blocked() {
                    self.parsers[i].ended = true;
                    return SlotPoll::Pending;
                }
                self.response_done(ctx, i, now)
            }
            Err(Some(ReadError::Blocked)) => match self.lost() {
                None => SlotPoll::Pending,
                Some(e) => {
                    let f = lost(&e);
                    self.fail_slot(ctx, i, f.kind, &f.message);
                    SlotPoll::Fail(f)
                }
            },
            Err(Some(ReadError::Reset(code))) => {
                let code = code.into_inner();
                let message = format!("h3: stream reset by the server ({})", code_name(code));
                self.fail_slot(ctx, i, ErrorKind::Reset, &message);
                SlotPoll::Freed
            }
            Err(None) => {
                if let Some(e) = self.lost() {
                    let f = lost(&e);
                    self.fail_slot(ctx, i, f.kind, &f.message);
                    return SlotPoll::Fail(f);
                }
                let message = "h3: response read: closed stream".to_string();
                self.fail_slot(ctx, i, ErrorKind::Protocol, &message);
                SlotPoll::Freed
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
            r.response(&slot.req, first_byte, now, p.status);
        }
        self.answered += 1;
        self.release(i, None);
        SlotPoll::Freed
    }

    fn h3_error(&mut self, ctx: &mut ClientCtx, i: usize, e: H3Error) -> SlotPoll {
        match e {
            H3Error::Stream { code, message } => {
                if let Some(s) = &self.slots[i] {
                    ctx.rec
                        .borrow_mut()
                        .request_failed(&s.req, ErrorKind::Protocol, &message);
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

    /// Takes the driver's events: marks the slots they concern, reads the server's
    /// unidirectional streams.
    fn take_events(&mut self) {
        let mut events = std::mem::take(&mut self.events);
        std::mem::swap(&mut events, &mut self.conn.state().events);
        for ev in events.drain(..) {
            let id = match ev {
                StreamEvent::Readable { id }
                | StreamEvent::Writable { id }
                | StreamEvent::Stopped { id, .. } => id,
                StreamEvent::Opened {
                    dir: quinn_proto::Dir::Uni,
                } => {
                    self.conn.with(|q| {
                        while let Some(id) = q.streams().accept(quinn_proto::Dir::Uni) {
                            self.uni.push(UniReader::new(id));
                        }
                    });
                    self.read_uni(None);
                    continue;
                }
                // Server-initiated bidirectional streams are not used by HTTP/3 (never
                // accepted, as before); credit is looked at by `try_open`; acknowledged
                // streams need nothing.
                _ => continue,
            };
            if id.initiator() == quinn_proto::Side::Server {
                self.read_uni(Some(id));
            } else if let Some(&i) = self.by_stream.get(&id) {
                self.ready[i] = true;
            }
        }
        self.events = events;
    }

    /// Reads the server's unidirectional stream `id` (all of them with `None`).
    fn read_uni(&mut self, id: Option<StreamId>) {
        let (uni, st, tap) = (&mut self.uni, &mut self.control_state, self.tap.as_ref());
        let qpack = &mut self.qpack;
        self.conn.with(|q| {
            for r in uni.iter_mut().filter(|r| id.is_none_or(|id| r.id == id)) {
                r.read(q, st, qpack, tap);
            }
        });
        // Finished readers go, but the control stream's stays (its end is an error once).
        self.uni.retain(|r| !r.done);
    }

    /// Handles one wake-up: the driver's events, control streams, the stream being opened,
    /// the slots that have something to say.
    fn on_wake(&mut self, ctx: &mut ClientCtx, now: Instant) -> Result<(), Fail> {
        self.check_early_data(ctx);
        self.take_events();
        if let Some((code, message)) = self.control_state.error.take() {
            return Err(Fail {
                kind: ErrorKind::Protocol,
                message,
                code,
            });
        }
        if let Some(id) = self.control_state.goaway {
            if self.goaway.is_none_or(|g| id < g) {
                self.goaway = Some(id);
                self.refuse_from(ctx, id);
            }
        }
        let inserts = self.qpack.dec.insert_count();
        if inserts != self.inserts_seen {
            // New entries: blocked heads are tried again.
            self.inserts_seen = inserts;
            for i in 0..self.depth {
                if self.parsers[i].is_blocked() {
                    self.ready[i] = true;
                }
            }
        }
        self.try_open(ctx, now);
        for i in 0..self.depth {
            if self.ready[i] && self.slots[i].is_some() {
                self.ready[i] = false;
                if let SlotPoll::Fail(f) = self.poll_slot(ctx, i, now) {
                    return Err(f);
                }
            }
        }
        self.started_unpolled = false;
        if let Some(e) = self.lost() {
            return Err(lost(&e));
        }
        self.flush_qpack(ctx, now)?;
        if let Some(opener) = &mut self.reopen_control {
            let tap = self.tap.as_ref();
            if !matches!(self.conn.with(|q| opener.poll(q, tap)), Ok(None)) {
                self.reopen_control = None;
            }
        }
        Ok(())
    }
}

impl H3Session {
    /// Writes the decoder's acknowledgements (and any encoder bytes still queued) and
    /// records the QPACK stream bytes both ways as header bytes.
    fn flush_qpack(&mut self, ctx: &mut ClientCtx, now: Instant) -> Result<(), Fail> {
        let (qpack, tap) = (&mut self.qpack, self.tap.as_ref());
        let r = self.conn.with(|q| {
            qpack
                .flush_encoder(q, tap)
                .and_then(|()| qpack.flush_decoder(q, tap))
        });
        if let Err(e) = r {
            return Err(Fail {
                kind: ErrorKind::Protocol,
                message: format!("h3: QPACK stream: {e}"),
                code: H3_CLOSED_CRITICAL_STREAM,
            });
        }
        let (out, inn) = (
            std::mem::take(&mut self.qpack.bytes_out),
            std::mem::take(&mut self.qpack.bytes_in),
        );
        if out + inn > 0 {
            let mut rec = ctx.rec.borrow_mut();
            rec.sent(out, out, 0);
            rec.received(now, inn, inn, 0);
        }
        if let Some(seen) = self.qpack.seen(false) {
            ctx.rec.borrow_mut().header_table(&seen);
        }
        Ok(())
    }
}

impl Session for H3Session {
    #[inline]
    fn can_submit(&self) -> bool {
        self.opening.is_none() && self.goaway.is_none() && self.inflight < self.depth
    }

    fn submit(&mut self, ctx: &mut ClientCtx, url: usize, req: Req) {
        // A stream id rejected 0-RTT used is handed out again: settle that first.
        self.check_early_data(ctx);
        if self.qpack.enc.peer().is_none() {
            // The server's SETTINGS may have arrived unread: with them the request can use
            // the table (read once; later requests find them read).
            self.take_events();
        }
        self.opening = Some(Opening { req, url });
        // With stream credit the stream opens at once: the request starts in this turn and
        // the flush writes it. Otherwise it opens when the driver reports credit.
        self.try_open(ctx, req.sent);
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
        if self.sent_any {
            // A connection the server's SETTINGS never reached still says what we offered.
            if let Some(seen) = self.qpack.seen(true) {
                ctx.rec.borrow_mut().header_table(&seen);
            }
        }
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
/// wake-up comes from the driver (stream events of the connection).
pub struct Quic;

impl SessionIo<H3Session> for Quic {
    type Input = ();

    /// Requests started in this turn are written (their slots polled) now; the driver sends
    /// them after the sessions it woke have run.
    async fn flush(
        &mut self,
        s: &mut H3Session,
        ctx: &mut ClientCtx,
        now: Instant,
    ) -> Result<(), Fail> {
        if s.started_unpolled {
            s.on_wake(ctx, now)?;
        }
        Ok(())
    }

    async fn wait(&mut self, s: &mut H3Session) {
        std::future::poll_fn(|cx| s.conn.poll_changed(cx)).await
    }

    fn on_input(
        &mut self,
        s: &mut H3Session,
        ctx: &mut ClientCtx,
        _input: (),
        now: Instant,
    ) -> Result<Option<SessionEnd>, Fail> {
        s.on_wake(ctx, now).map(|()| None)
    }

    async fn close(
        &mut self,
        s: &mut H3Session,
        ctx: &mut ClientCtx,
        result: Outcome,
    ) -> SessionEnd {
        let code = match &result {
            Err(f) if f.code != 0 => f.code,
            _ => H3_NO_ERROR,
        };
        s.conn.close(varint_code(code));
        s.finish(ctx, result)
    }
}

/// Runs requests on one HTTP/3 connection until the plan is done or the connection fails:
/// opens our control stream, then the client loop drives an [`H3Session`].
pub async fn session(ctx: &mut ClientCtx, conn: QuicConn) -> SessionEnd {
    let opened = open_control(&conn, QpackConfig::of(ctx), ctx.tap.as_ref());
    match tokio::time::timeout(ctx.connect_timeout, opened).await {
        Err(_) => return setup_failed(ctx, ErrorKind::Timeout, "h3 setup timed out".into()),
        Ok(Err(e)) => return setup_failed(ctx, ErrorKind::Protocol, format!("h3 setup: {e}")),
        Ok(Ok(_)) => {}
    }
    let mut s = H3Session::new(ctx, conn.clone());
    let end = crate::session::drive(ctx, &mut s, &mut Quic).await;
    if ctx.tap.is_some() {
        // A trace shows the server's control stream too, which a server may open only after
        // answering: wait for it a little (bounded) before closing.
        let until = Instant::now() + ctx.connect_timeout.min(Duration::from_millis(500));
        loop {
            s.take_events();
            if s.control_state.control_seen
                || conn.close_reason().is_some()
                || Instant::now() >= until
            {
                break;
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    }
    drop(s);
    if let Some(tap) = &ctx.tap {
        tell_closed(tap, &conn);
    }
    end
}

/// Tells the tap how the connection closed and what its path counted.
fn tell_closed(tap: &crate::net::SharedTap, conn: &QuicConn) {
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
