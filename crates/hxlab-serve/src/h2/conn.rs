//! The sans-IO HTTP/2 server connection: bytes in ([`Conn::receive`]), frames parsed in
//! place, bytes out (`Conn::out`), and the connection-level frames (SETTINGS, PING, GOAWAY,
//! WINDOW_UPDATE, PRIORITY, decoded and checked by hxlab-wire's `h2::control`) handled here;
//! what the connection holds is in `state.rs`, streams in `stream.rs`, responses and flow
//! control of what we send in `send.rs`.

use super::head::ResponseHpack;
use super::state::{
    Conn, ConnError, Peer, Phase, CONN_WINDOW, MAX_FRAME, MAX_WINDOW, STREAM_WINDOW,
};
use crate::routes::Ctx;
use crate::schedule::{Queue, Scheduler, Signals};
use crate::stats::Protocol;
use hxlab_wire::h2::control::{
    self, FrameError, GoAway, Ping, Priority, Setting, Settings, WindowUpdate,
};
use hxlab_wire::h2::{code, flag, frame, setting, FrameHead, PREFACE};
use hxlab_wire::priority::{from_rfc7540_weight, Signal};
use std::sync::Arc;
use tokio::time::Instant;

impl Conn {
    /// A connection whose preface is still to come; our SETTINGS and connection
    /// WINDOW_UPDATE are queued.
    pub(crate) fn new(ctx: Arc<Ctx>, proto: Protocol) -> Conn {
        let mut c = Conn {
            peer: Peer {
                max_frame: MAX_FRAME,
                initial_window: 65_535,
                push: true,
                max_streams: u32::MAX,
            },
            out: Vec::with_capacity(256),
            preface_left: PREFACE.len(),
            got_settings: false,
            decoder: None,
            hpack: ResponseHpack::new(ctx.limits.header_table),
            scratch: Vec::new(),
            send_window: 65_535,
            recv_window: CONN_WINDOW,
            recv_unacked: 0,
            streams: Vec::new(),
            queue: Queue::new(ctx.limits.scheduler),
            signals: Signals::default(),
            last_client_id: 0,
            next_push_id: 2,
            block: None,
            recent_resets: [0; 16],
            recent_at: 0,
            cancels: 0,
            goaway: None,
            failed: false,
            peer_goaway: false,
            requests: 0,
            now: None,
            opening: false,
            proto,
            ctx,
        };
        let mut settings = vec![
            (setting::MAX_CONCURRENT_STREAMS, c.ctx.limits.max_streams),
            (setting::INITIAL_WINDOW_SIZE, STREAM_WINDOW as u32),
            (setting::MAX_HEADER_LIST_SIZE, c.ctx.limits.max_header_size),
        ];
        if c.ctx.limits.header_table != hxlab_wire::hpack::DEFAULT_TABLE {
            // The table our decoder keeps for the client's requests (4096 goes unsaid).
            settings.push((setting::HEADER_TABLE_SIZE, c.ctx.limits.header_table as u32));
        }
        if c.ctx.limits.scheduler == Scheduler::Rfc9218 {
            // RFC 9218 §2.1: we schedule by RFC 9218's signals (RFC 7540 weights are only
            // a fallback for clients that send nothing else).
            settings.push((setting::NO_RFC7540_PRIORITIES, 1));
        }
        control::write_settings(&mut c.out, &settings);
        c.window_update(0, (CONN_WINDOW - 65_535) as u32);
        c
    }

    /// The time, read once per batch.
    pub(super) fn now(&mut self) -> Instant {
        *self.now.get_or_insert_with(Instant::now)
    }

    /// Parses the whole frames at the start of `buf` and acts on them; returns the bytes
    /// used (a partial frame is left for the next call). After a connection error nothing
    /// more is read: GOAWAY is queued and `failed` set.
    pub(crate) fn receive(&mut self, buf: &[u8]) -> usize {
        if self.failed {
            return buf.len();
        }
        match self.frames(buf) {
            Ok(n) => {
                self.return_credit();
                n
            }
            Err(e) => {
                self.fail(e);
                buf.len()
            }
        }
    }

    fn frames(&mut self, buf: &[u8]) -> Result<usize, ConnError> {
        let mut pos = 0;
        if self.preface_left > 0 {
            let at = PREFACE.len() - self.preface_left;
            let n = self.preface_left.min(buf.len());
            if buf[..n] != PREFACE[at..at + n] {
                return Err(ConnError(
                    code::PROTOCOL_ERROR,
                    "invalid connection preface",
                ));
            }
            self.preface_left -= n;
            pos = n;
        }
        while let Some(h) = FrameHead::parse(&buf[pos..]) {
            if h.len > MAX_FRAME {
                return Err(ConnError(
                    code::FRAME_SIZE_ERROR,
                    "frame over SETTINGS_MAX_FRAME_SIZE",
                ));
            }
            let end = pos + 9 + h.len;
            if end > buf.len() {
                break;
            }
            self.frame(h, &buf[pos + 9..end])?;
            pos = end;
            if self.failed {
                return Ok(buf.len());
            }
        }
        Ok(pos)
    }

    fn frame(&mut self, h: FrameHead, payload: &[u8]) -> Result<(), ConnError> {
        if !self.got_settings {
            if h.kind != frame::SETTINGS || h.flags & flag::ACK != 0 {
                return Err(ConnError(
                    code::PROTOCOL_ERROR,
                    "first frame is not SETTINGS",
                ));
            }
            self.got_settings = true;
        }
        if self.block.is_some() && h.kind != frame::CONTINUATION {
            return Err(ConnError(code::PROTOCOL_ERROR, "header block interrupted"));
        }
        match h.kind {
            frame::DATA => self.on_data(h, payload),
            frame::HEADERS => self.on_headers(h, payload),
            frame::CONTINUATION => self.on_continuation(h, payload),
            frame::PRIORITY => self.on_priority(h, payload),
            frame::RST_STREAM => self.on_rst_stream(h, payload),
            frame::SETTINGS => self.on_settings(h, payload),
            frame::PUSH_PROMISE => Err(ConnError(
                code::PROTOCOL_ERROR,
                "PUSH_PROMISE from a client",
            )),
            frame::PING => self.on_ping(h, payload),
            frame::GOAWAY => self.on_goaway(h, payload),
            frame::WINDOW_UPDATE => self.on_window_update(h, payload),
            frame::PRIORITY_UPDATE => self.on_priority_update(h, payload),
            // Unknown frame types are ignored (RFC 9113 §4.1, §5.5).
            _ => Ok(()),
        }
    }

    fn on_settings(&mut self, h: FrameHead, payload: &[u8]) -> Result<(), ConnError> {
        let settings = Settings::parse(&h, payload)?;
        if settings.ack {
            return Ok(());
        }
        for s in settings.iter() {
            match s? {
                Setting::EnablePush(on) => self.peer.push = on,
                Setting::MaxConcurrentStreams(v) => self.peer.max_streams = v,
                Setting::InitialWindowSize(v) => self.set_initial_window(i64::from(v))?,
                Setting::MaxFrameSize(v) => self.peer.max_frame = v as usize,
                Setting::HeaderTableSize(v) => self.hpack.set_peer_limit(v),
                // Others: ignored.
                _ => {}
            }
        }
        control::write_settings_ack(&mut self.out);
        Ok(())
    }

    /// A new SETTINGS_INITIAL_WINDOW_SIZE changes every stream's send window by the
    /// difference (RFC 9113 §6.9.2); a window may go negative, not past 2^31-1.
    fn set_initial_window(&mut self, v: i64) -> Result<(), ConnError> {
        let delta = v - self.peer.initial_window;
        self.peer.initial_window = v;
        for s in &mut self.streams {
            s.window += delta;
            if s.window > MAX_WINDOW {
                return Err(ConnError(
                    code::FLOW_CONTROL_ERROR,
                    "stream window over 2^31-1",
                ));
            }
        }
        Ok(())
    }

    fn on_ping(&mut self, h: FrameHead, payload: &[u8]) -> Result<(), ConnError> {
        let ping = Ping::parse(&h, payload)?;
        if !ping.ack {
            control::write_ping_ack(&mut self.out, &ping.data);
        }
        Ok(())
    }

    fn on_goaway(&mut self, h: FrameHead, payload: &[u8]) -> Result<(), ConnError> {
        GoAway::parse(&h, payload)?;
        self.peer_goaway = true;
        Ok(())
    }

    fn on_priority(&mut self, h: FrameHead, payload: &[u8]) -> Result<(), ConnError> {
        self.count_priority_frame()?;
        match Priority::parse(&h, payload) {
            // A PRIORITY of the wrong size is a stream error (RFC 9113 §6.3).
            Err(e @ FrameError::PriorityLength) => self.reset(h.stream_id, e.code()),
            Err(e) => return Err(e.into()),
            Ok(p) if p.dependency == h.stream_id => self.reset(h.stream_id, code::PROTOCOL_ERROR),
            // Only the weight is kept, for a stream that sent no RFC 9218 signal; the
            // dependency tree is not (so no chain of any depth costs anything).
            Ok(p) => self.reprioritize(h.stream_id, from_rfc7540_weight(p.weight), Signal::Rfc7540),
        }
        Ok(())
    }

    /// PRIORITY_UPDATE (RFC 9218 §7.1): on stream 0 only; for a request stream, open or not
    /// yet opened. A value that is not a valid dictionary is ignored (§4).
    fn on_priority_update(&mut self, h: FrameHead, payload: &[u8]) -> Result<(), ConnError> {
        self.count_priority_frame()?;
        if h.stream_id != 0 {
            return Err(ConnError(
                code::PROTOCOL_ERROR,
                "PRIORITY_UPDATE on a stream other than 0",
            ));
        }
        let Some((id, value)) = hxlab_wire::priority::h2_update(payload) else {
            return Err(ConnError(
                code::FRAME_SIZE_ERROR,
                "PRIORITY_UPDATE shorter than its stream id",
            ));
        };
        if id == 0 {
            return Err(ConnError(
                code::PROTOCOL_ERROR,
                "PRIORITY_UPDATE for stream 0",
            ));
        }
        if let Some(p) = hxlab_wire::priority::Priority::from_field(value) {
            self.reprioritize(id, p, Signal::Update);
        }
        Ok(())
    }

    /// Counts a PRIORITY or PRIORITY_UPDATE frame against the connection's budget.
    fn count_priority_frame(&mut self) -> Result<(), ConnError> {
        self.signals
            .count_frame(self.requests)
            .map_err(|_| ConnError(code::ENHANCE_YOUR_CALM, "too many priority frames"))
    }

    fn on_window_update(&mut self, h: FrameHead, payload: &[u8]) -> Result<(), ConnError> {
        let inc = i64::from(WindowUpdate::parse(&h, payload)?.increment);
        if h.stream_id == 0 {
            self.send_window += inc;
            if self.send_window > MAX_WINDOW {
                return Err(ConnError(
                    code::FLOW_CONTROL_ERROR,
                    "connection window over 2^31-1",
                ));
            }
            return Ok(());
        }
        self.stream_window_update(h.stream_id, inc)
    }

    /// Queues WINDOW_UPDATE for the connection once a quarter of its window was used
    /// (request bodies are discarded as they come, so credit goes back at once, batched).
    fn return_credit(&mut self) {
        if self.recv_unacked >= CONN_WINDOW / 4 {
            let n = self.recv_unacked;
            self.recv_unacked = 0;
            self.recv_window += n;
            self.window_update(0, n as u32);
        }
    }

    pub(super) fn window_update(&mut self, stream: u32, inc: u32) {
        control::write_window_update(&mut self.out, stream, inc);
    }

    /// Queues GOAWAY with `code` and stops the connection (a connection error).
    pub(crate) fn fail(&mut self, e: ConnError) {
        if self.failed {
            return;
        }
        self.failed = true;
        self.block = None;
        self.write_goaway(e.0, e.1.as_bytes());
        // Everything a stream held goes now.
        self.streams.clear();
        self.queue = Queue::new(self.queue.scheduler());
        self.signals = Signals::default();
    }

    fn write_goaway(&mut self, code: u32, debug: &[u8]) {
        let last = self.last_client_id;
        self.goaway = Some(last);
        control::write_goaway(&mut self.out, last, code, debug);
    }

    /// GOAWAY NO_ERROR: streams opened so far are served, later ones ignored; the
    /// connection ends when none is left ([`Conn::finished`]).
    pub(crate) fn graceful_goaway(&mut self) {
        if self.goaway.is_none() && !self.failed {
            self.write_goaway(code::NO_ERROR, b"");
        }
    }

    /// Whether the connection has nothing left to do once its output is written.
    pub(crate) fn finished(&self) -> bool {
        self.failed || ((self.goaway.is_some() || self.peer_goaway) && self.streams.is_empty())
    }

    /// The client's input ended: a header block it left unfinished can never complete, so
    /// it no longer keeps the connection (nor the idle check) busy; nor can any stream that
    /// waits for the client ([`Conn::drop_unfinishable`]).
    pub(crate) fn input_ended(&mut self) {
        self.block = None;
        self.drop_unfinishable();
    }

    /// After the client's FIN, frees (RST_STREAM CANCEL, for a client that half-closed and
    /// still reads) every stream that needs something only the client could send: a request
    /// body, or window for response data (no WINDOW_UPDATE can follow a FIN). Streams that
    /// have window, or wait for their delay, go on: a half-closed client gets them whole.
    /// Called on every pass after the FIN, since a stream that sends runs out of window later.
    pub(crate) fn drop_unfinishable(&mut self) {
        let mut i = 0;
        while i < self.streams.len() {
            let s = &self.streams[i];
            let dead = match s.phase {
                Phase::Body(_) => true,
                Phase::Sending(_) => s.window <= 0 || self.send_window <= 0,
                Phase::Delayed(_) | Phase::Opening(_) => false,
            };
            if dead {
                self.reset(s.id, code::CANCEL);
            } else {
                i += 1;
            }
        }
    }

    /// Whether any stream is open (the idle check).
    pub(crate) fn busy(&self) -> bool {
        !self.streams.is_empty() || self.block.is_some()
    }

    /// Remembers that we reset `id`, so frames already on their way for it are ignored.
    pub(super) fn remember_reset(&mut self, id: u32) {
        self.recent_resets[self.recent_at] = id;
        self.recent_at = (self.recent_at + 1) % self.recent_resets.len();
    }

    pub(super) fn recently_reset(&self, id: u32) -> bool {
        id != 0 && self.recent_resets.contains(&id)
    }
}
