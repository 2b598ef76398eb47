//! The sans-IO HTTP/2 server connection: bytes in ([`Conn::receive`]), frames parsed in
//! place, bytes out (`Conn::out`), and the connection-level frames (SETTINGS, PING, GOAWAY,
//! WINDOW_UPDATE, PRIORITY) handled here; streams are in `stream.rs`, responses and flow
//! control of what we send in `send.rs`.

use super::stream::{Block, Phase, Stream};
use crate::routes::Ctx;
use crate::stats::Protocol;
use hxlab_wire::h2::{be32, code, flag, frame, setting, write_head, FrameHead, PREFACE};
use hxlab_wire::hpack::Decoder;
use std::collections::VecDeque;
use std::sync::Arc;
use tokio::time::Instant;

/// Our stream receive window (SETTINGS_INITIAL_WINDOW_SIZE), and the connection's.
pub(super) const STREAM_WINDOW: i64 = 1 << 20;
pub(super) const CONN_WINDOW: i64 = 4 << 20;
/// The frame size we accept (we never raise SETTINGS_MAX_FRAME_SIZE).
pub(super) const MAX_FRAME: usize = 16_384;
/// Largest flow-control window (RFC 9113 §6.9.1).
pub(super) const MAX_WINDOW: i64 = (1 << 31) - 1;
/// Streams a connection may reset before their response was complete, beyond those it let
/// finish, on top of --max-streams: past it the connection gets GOAWAY ENHANCE_YOUR_CALM
/// (rapid reset, CVE-2023-44487, and resetting streams that wait for window).
pub(super) const CANCEL_BUDGET: u32 = 1000;

/// A connection error: GOAWAY with this code, then the connection closes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct ConnError(pub u32, pub &'static str);

/// The peer's SETTINGS as far as we use them.
pub(super) struct Peer {
    pub max_frame: usize,
    pub initial_window: i64,
    pub push: bool,
    pub max_streams: u32,
}

/// One HTTP/2 server connection, without I/O.
pub(crate) struct Conn {
    pub(super) ctx: Arc<Ctx>,
    pub(super) proto: Protocol,
    /// Bytes to write, in order.
    pub(crate) out: Vec<u8>,
    /// Preface bytes still expected; then whether the first SETTINGS came.
    preface_left: usize,
    got_settings: bool,
    pub(super) decoder: Option<Box<Decoder>>,
    /// Pseudo-header values of the request head being decoded.
    pub(super) scratch: Vec<u8>,
    pub(super) peer: Peer,
    /// Our send window on the connection, and what we may still receive on it.
    pub(super) send_window: i64,
    pub(super) recv_window: i64,
    pub(super) recv_unacked: i64,
    /// Open streams (client streams not yet done both ways, pushed streams being sent).
    pub(super) streams: Vec<Stream>,
    /// Streams with response data waiting to go out, in turn.
    pub(super) sending: VecDeque<u32>,
    /// The highest client stream opened, and the next stream id for a push.
    pub(super) last_client_id: u32,
    pub(super) next_push_id: u32,
    /// A header block waiting for its CONTINUATION frames.
    pub(super) block: Option<Block>,
    /// Streams we reset lately: frames the client sent before it saw the reset are ignored.
    pub(super) recent_resets: [u32; 16],
    pub(super) recent_at: usize,
    /// Streams the client reset before their response was complete, less those it let
    /// finish.
    pub(super) cancels: u32,
    /// GOAWAY sent: the last stream we take.
    pub(super) goaway: Option<u32>,
    /// A connection error was sent: nothing more is read or answered.
    pub(crate) failed: bool,
    pub(super) peer_goaway: bool,
    /// Requests opened so far (the idle check reads it).
    pub(crate) requests: u64,
    /// A clock reading taken during the current batch, if one was needed.
    pub(super) now: Option<Instant>,
}

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
            scratch: Vec::new(),
            send_window: 65_535,
            recv_window: CONN_WINDOW,
            recv_unacked: 0,
            streams: Vec::new(),
            sending: VecDeque::new(),
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
            proto,
            ctx,
        };
        let settings = [
            (setting::MAX_CONCURRENT_STREAMS, c.ctx.limits.max_streams),
            (setting::INITIAL_WINDOW_SIZE, STREAM_WINDOW as u32),
            (setting::MAX_HEADER_LIST_SIZE, c.ctx.limits.max_header_size),
        ];
        write_head(&mut c.out, settings.len() * 6, frame::SETTINGS, 0, 0);
        for (id, v) in settings {
            c.out.extend_from_slice(&id.to_be_bytes());
            c.out.extend_from_slice(&v.to_be_bytes());
        }
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
            // Unknown frame types are ignored (RFC 9113 §4.1, §5.5).
            _ => Ok(()),
        }
    }

    fn on_settings(&mut self, h: FrameHead, payload: &[u8]) -> Result<(), ConnError> {
        if h.stream_id != 0 {
            return Err(ConnError(code::PROTOCOL_ERROR, "SETTINGS on a stream"));
        }
        if h.flags & flag::ACK != 0 {
            if !payload.is_empty() {
                return Err(ConnError(
                    code::FRAME_SIZE_ERROR,
                    "SETTINGS ACK with a payload",
                ));
            }
            return Ok(());
        }
        if !payload.len().is_multiple_of(6) {
            return Err(ConnError(
                code::FRAME_SIZE_ERROR,
                "SETTINGS length not a multiple of 6",
            ));
        }
        for s in payload.chunks_exact(6) {
            let id = u16::from_be_bytes([s[0], s[1]]);
            let v = be32(&s[2..6]);
            match id {
                setting::ENABLE_PUSH => {
                    if v > 1 {
                        return Err(ConnError(code::PROTOCOL_ERROR, "ENABLE_PUSH not 0 or 1"));
                    }
                    self.peer.push = v == 1;
                }
                setting::MAX_CONCURRENT_STREAMS => self.peer.max_streams = v,
                setting::INITIAL_WINDOW_SIZE => {
                    if i64::from(v) > MAX_WINDOW {
                        return Err(ConnError(
                            code::FLOW_CONTROL_ERROR,
                            "INITIAL_WINDOW_SIZE over 2^31-1",
                        ));
                    }
                    self.set_initial_window(i64::from(v))?;
                }
                setting::MAX_FRAME_SIZE => {
                    if !(16_384..=16_777_215).contains(&v) {
                        return Err(ConnError(
                            code::PROTOCOL_ERROR,
                            "MAX_FRAME_SIZE out of range",
                        ));
                    }
                    self.peer.max_frame = v as usize;
                }
                // HEADER_TABLE_SIZE: our responses use no dynamic table. Others: ignored.
                _ => {}
            }
        }
        write_head(&mut self.out, 0, frame::SETTINGS, flag::ACK, 0);
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
        if delta > 0 {
            self.wake_blocked();
        }
        Ok(())
    }

    fn on_ping(&mut self, h: FrameHead, payload: &[u8]) -> Result<(), ConnError> {
        if h.stream_id != 0 {
            return Err(ConnError(code::PROTOCOL_ERROR, "PING on a stream"));
        }
        if payload.len() != 8 {
            return Err(ConnError(code::FRAME_SIZE_ERROR, "PING length not 8"));
        }
        if h.flags & flag::ACK == 0 {
            write_head(&mut self.out, 8, frame::PING, flag::ACK, 0);
            self.out.extend_from_slice(payload);
        }
        Ok(())
    }

    fn on_goaway(&mut self, h: FrameHead, payload: &[u8]) -> Result<(), ConnError> {
        if h.stream_id != 0 {
            return Err(ConnError(code::PROTOCOL_ERROR, "GOAWAY on a stream"));
        }
        if payload.len() < 8 {
            return Err(ConnError(
                code::FRAME_SIZE_ERROR,
                "GOAWAY shorter than 8 bytes",
            ));
        }
        self.peer_goaway = true;
        Ok(())
    }

    fn on_priority(&mut self, h: FrameHead, payload: &[u8]) -> Result<(), ConnError> {
        if h.stream_id == 0 {
            return Err(ConnError(code::PROTOCOL_ERROR, "PRIORITY on stream 0"));
        }
        if payload.len() != 5 {
            self.reset(h.stream_id, code::FRAME_SIZE_ERROR);
            return Ok(());
        }
        if be32(payload) & 0x7fff_ffff == h.stream_id {
            self.reset(h.stream_id, code::PROTOCOL_ERROR);
        }
        Ok(())
    }

    fn on_window_update(&mut self, h: FrameHead, payload: &[u8]) -> Result<(), ConnError> {
        if payload.len() != 4 {
            return Err(ConnError(
                code::FRAME_SIZE_ERROR,
                "WINDOW_UPDATE length not 4",
            ));
        }
        let inc = i64::from(be32(payload) & 0x7fff_ffff);
        if h.stream_id == 0 {
            if inc == 0 {
                return Err(ConnError(code::PROTOCOL_ERROR, "WINDOW_UPDATE of 0"));
            }
            self.send_window += inc;
            if self.send_window > MAX_WINDOW {
                return Err(ConnError(
                    code::FLOW_CONTROL_ERROR,
                    "connection window over 2^31-1",
                ));
            }
            self.wake_blocked();
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
        write_head(&mut self.out, 4, frame::WINDOW_UPDATE, 0, stream);
        self.out.extend_from_slice(&inc.to_be_bytes());
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
        self.sending.clear();
    }

    fn write_goaway(&mut self, code: u32, debug: &[u8]) {
        let last = self.last_client_id;
        self.goaway = Some(last);
        write_head(&mut self.out, 8 + debug.len(), frame::GOAWAY, 0, 0);
        self.out.extend_from_slice(&last.to_be_bytes());
        self.out.extend_from_slice(&code.to_be_bytes());
        self.out.extend_from_slice(debug);
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
