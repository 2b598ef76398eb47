//! Streams: request heads (HEADERS and CONTINUATION), request bodies (DATA, read and
//! discarded under our flow control), RST_STREAM and stream WINDOW_UPDATE, with RFC 9113
//! §5.1's rules for which frame may come in which stream state.

use super::head::{decode_request, decode_trailers, HeadError};
use super::state::{
    Block, Conn, ConnError, Pending, Phase, Stream, CANCEL_BUDGET, MAX_WINDOW, STREAM_WINDOW,
};
use crate::reply::Reply;
use crate::routes::route;
use hxlab_wire::h2::control::{self, Priority, RstStream};
use hxlab_wire::h2::{code, flag, strip_padding, FrameHead, PaddingError};
use hxlab_wire::hpack::Decoder;
use hxlab_wire::priority::{from_rfc7540_weight, Priority as Prio, Signal};

/// Error raised when a stream error ends the handling of a frame (the RST_STREAM is queued).
fn malformed_code(e: &HeadError) -> u32 {
    match e {
        HeadError::Hpack(_) => code::COMPRESSION_ERROR,
        _ => code::PROTOCOL_ERROR,
    }
}

impl Conn {
    pub(super) fn stream_index(&self, id: u32) -> Option<usize> {
        self.streams.iter().position(|s| s.id == id)
    }

    /// Whether `id` names a stream that was never opened (RFC 9113 §5.1 "idle").
    fn idle(&self, id: u32) -> bool {
        if id % 2 == 1 {
            id > self.last_client_id
        } else {
            id >= self.next_push_id
        }
    }

    /// Queues RST_STREAM for `id` and forgets the stream and everything it held.
    pub(super) fn reset(&mut self, id: u32, code: u32) {
        control::write_rst_stream(&mut self.out, id, code);
        self.remember_reset(id);
        self.queue.remove(u64::from(id));
        if let Some(i) = self.stream_index(id) {
            self.streams.swap_remove(i);
        }
    }

    pub(super) fn on_headers(&mut self, h: FrameHead, payload: &[u8]) -> Result<(), ConnError> {
        let id = h.stream_id;
        if id == 0 || id.is_multiple_of(2) {
            return Err(ConnError(
                code::PROTOCOL_ERROR,
                "HEADERS on stream 0 or an even stream",
            ));
        }
        let mut frag = match strip_padding(h.flags, payload) {
            Ok(f) => f,
            Err(PaddingError::NoPadLength) => {
                return Err(ConnError(
                    code::FRAME_SIZE_ERROR,
                    "HEADERS without pad length",
                ))
            }
            Err(PaddingError::TooLong) => {
                return Err(ConnError(code::PROTOCOL_ERROR, "HEADERS padding too long"))
            }
        };
        let mut self_dependent = false;
        let mut weight = None;
        if h.flags & flag::PRIORITY != 0 {
            let Some(p) = Priority::read(frag) else {
                return Err(ConnError(
                    code::FRAME_SIZE_ERROR,
                    "HEADERS priority too short",
                ));
            };
            self_dependent = p.dependency == id;
            weight = Some(p.weight);
            frag = &frag[5..];
        }
        let end_stream = h.flags & flag::END_STREAM != 0;
        if h.flags & flag::END_HEADERS == 0 {
            self.check_block_size(frag.len())?;
            let since = self.now();
            self.block = Some(Block {
                stream: id,
                end_stream,
                bytes: frag.to_vec(),
                since,
                weight,
            });
            return Ok(());
        }
        self.header_block(id, end_stream, self_dependent, weight, frag)
    }

    fn check_block_size(&self, len: usize) -> Result<(), ConnError> {
        let max = (self.ctx.limits.max_header_size as usize).max(16 << 10);
        if len > max {
            return Err(ConnError(
                code::ENHANCE_YOUR_CALM,
                "header block over --max-header-size",
            ));
        }
        Ok(())
    }

    pub(super) fn on_continuation(
        &mut self,
        h: FrameHead,
        payload: &[u8],
    ) -> Result<(), ConnError> {
        let Some(mut block) = self.block.take() else {
            return Err(ConnError(
                code::PROTOCOL_ERROR,
                "CONTINUATION without a header block",
            ));
        };
        if h.stream_id != block.stream {
            return Err(ConnError(
                code::PROTOCOL_ERROR,
                "CONTINUATION on another stream",
            ));
        }
        self.check_block_size(block.bytes.len() + payload.len())?;
        block.bytes.extend_from_slice(payload);
        if h.flags & flag::END_HEADERS == 0 {
            self.block = Some(block);
            return Ok(());
        }
        self.header_block(
            block.stream,
            block.end_stream,
            false,
            block.weight,
            &block.bytes,
        )
    }

    fn decoder(&mut self) -> &mut Decoder {
        // Until the client has our SETTINGS it may use the initial 4096 bytes even when we
        // advertise less, so the decoder accepts up to the larger of the two.
        let limit = self
            .ctx
            .limits
            .header_table
            .max(hxlab_wire::hpack::DEFAULT_TABLE);
        self.decoder
            .get_or_insert_with(|| Box::new(Decoder::new(limit as usize)))
    }

    /// A complete header block on stream `id`: a new request, trailers, or a protocol error.
    /// `weight`: the RFC 7540 weight its HEADERS carried, if any.
    fn header_block(
        &mut self,
        id: u32,
        end_stream: bool,
        self_dependent: bool,
        weight: Option<u16>,
        block: &[u8],
    ) -> Result<(), ConnError> {
        if let Some(i) = self.stream_index(id) {
            return self.trailers(i, end_stream, block);
        }
        if id <= self.last_client_id {
            // Keep the HPACK table in step before failing.
            let ctx = self.ctx.clone();
            let _ = decode_trailers(&ctx, block, self.decoder());
            return Err(if id == self.last_client_id || self.recently_reset(id) {
                ConnError(code::STREAM_CLOSED, "HEADERS on a closed stream")
            } else {
                ConnError(
                    code::PROTOCOL_ERROR,
                    "stream id lower than one already used",
                )
            });
        }
        self.last_client_id = id;
        let ctx = self.ctx.clone();
        ctx.stats.request_head_bytes(self.proto, block.len() as u64);
        let mut scratch = std::mem::take(&mut self.scratch);
        let decoded = decode_request(&ctx, block, self.decoder(), &mut scratch);
        self.scratch = scratch;
        if self.goaway.is_some() {
            // After GOAWAY new streams are not taken (the client retries them elsewhere).
            return match decoded {
                Err(HeadError::Hpack(_)) => Err(ConnError(code::COMPRESSION_ERROR, "HPACK")),
                _ => Ok(()),
            };
        }
        let open = self.streams.iter().filter(|s| s.id % 2 == 1).count();
        let head = match decoded {
            Err(HeadError::Hpack(_)) => {
                return Err(ConnError(
                    code::COMPRESSION_ERROR,
                    "undecodable header block",
                ))
            }
            _ if open >= self.ctx.limits.max_streams as usize => {
                self.reset(id, code::REFUSED_STREAM);
                return Ok(());
            }
            _ if self_dependent => {
                self.reset(id, code::PROTOCOL_ERROR);
                return Ok(());
            }
            Err(HeadError::TooLarge) => {
                self.requests += 1;
                self.refuse_too_large(id, end_stream);
                return Ok(());
            }
            Err(e) => {
                self.reset(id, malformed_code(&e));
                return Ok(());
            }
            Ok(h) => h,
        };
        self.requests += 1;
        let reply = route(
            &self.ctx,
            &head.method,
            &head.uri,
            &head.headers,
            self.proto,
        );
        let content_length = head.content_length;
        let priority = self.request_priority(id, head.priority, weight);
        let since = self.now();
        let pending = Pending::new(reply, &head, &self.scratch, priority, since);
        if end_stream {
            if content_length.is_some_and(|n| n != 0) {
                self.reset(id, code::PROTOCOL_ERROR);
                return Ok(());
            }
            self.respond(id, pending, None);
            return Ok(());
        }
        let deadline = self.now() + self.ctx.limits.body_timeout;
        self.streams.push(Stream {
            id,
            recv_open: true,
            content_length,
            received: 0,
            recv_window: STREAM_WINDOW,
            recv_unacked: 0,
            phase: Phase::Body(Box::new(pending)),
            window: self.peer.initial_window,
            deadline: Some(deadline),
            blocked_since: None,
            priority: priority.0,
            signal: priority.1,
        });
        Ok(())
    }

    /// A new request's priority: a PRIORITY_UPDATE that came before it, else its
    /// `priority` header, else (only then) its RFC 7540 weight, else RFC 9218's defaults.
    fn request_priority(
        &mut self,
        id: u32,
        header: Option<Prio>,
        weight: Option<u16>,
    ) -> (Prio, Signal) {
        if let Some(p) = self.signals.take_early(u64::from(id)) {
            return (p, Signal::Update);
        }
        match (header, weight) {
            (Some(p), _) => (p, Signal::Header),
            (None, Some(w)) => (from_rfc7540_weight(w), Signal::Rfc7540),
            (None, None) => (Prio::default(), Signal::Default),
        }
    }

    /// A priority signal that came after the request (`source`: a PRIORITY_UPDATE, or an
    /// RFC 7540 PRIORITY frame, which counts only where no RFC 9218 signal came): the
    /// stream's response is rescheduled from its next frame on. A stream not open yet keeps
    /// the update for when it opens (at most [`crate::schedule::EARLY_UPDATES`] of them); a closed one
    /// ignores it.
    pub(super) fn reprioritize(&mut self, id: u32, p: Prio, source: Signal) {
        if let Some(i) = self.stream_index(id) {
            let s = &mut self.streams[i];
            if source == Signal::Rfc7540 && matches!(s.signal, Signal::Header | Signal::Update) {
                return;
            }
            s.priority = p;
            s.signal = source;
            self.queue
                .reprioritize(u64::from(id), p, u64::from(id >> 1));
            return;
        }
        if source == Signal::Update && id % 2 == 1 && id > self.last_client_id {
            self.signals.keep_early(u64::from(id), p);
        }
    }

    /// A second header block on an open stream: trailers, which must end the stream.
    fn trailers(&mut self, i: usize, end_stream: bool, block: &[u8]) -> Result<(), ConnError> {
        let id = self.streams[i].id;
        let ctx = self.ctx.clone();
        let decoded = decode_trailers(&ctx, block, self.decoder());
        if let Err(HeadError::Hpack(_)) = decoded {
            return Err(ConnError(
                code::COMPRESSION_ERROR,
                "undecodable header block",
            ));
        }
        if !self.streams[i].recv_open {
            self.reset(id, code::STREAM_CLOSED);
            return Ok(());
        }
        if !end_stream || decoded.is_err() {
            self.reset(id, code::PROTOCOL_ERROR);
            return Ok(());
        }
        self.request_ended(i);
        Ok(())
    }

    /// The request on `streams[i]` is complete: its length is checked, its reply started.
    fn request_ended(&mut self, i: usize) {
        let s = &mut self.streams[i];
        s.recv_open = false;
        let id = s.id;
        if s.content_length.is_some_and(|n| n != s.received) {
            self.reset(id, code::PROTOCOL_ERROR);
            return;
        }
        let s = self.streams.swap_remove(i);
        if let Phase::Body(mut pending) = s.phase {
            pending.priority = (s.priority, s.signal);
            self.respond(id, *pending, Some(s.window));
        }
    }

    pub(super) fn on_data(&mut self, h: FrameHead, payload: &[u8]) -> Result<(), ConnError> {
        let id = h.stream_id;
        if id == 0 {
            return Err(ConnError(code::PROTOCOL_ERROR, "DATA on stream 0"));
        }
        if self.idle(id) {
            return Err(ConnError(code::PROTOCOL_ERROR, "DATA on an idle stream"));
        }
        let len = payload.len() as i64;
        self.recv_window -= len;
        if self.recv_window < 0 {
            return Err(ConnError(
                code::FLOW_CONTROL_ERROR,
                "DATA beyond the connection window",
            ));
        }
        self.recv_unacked += len;
        let data = match strip_padding(h.flags, payload) {
            Ok(d) => d,
            Err(PaddingError::NoPadLength) => {
                return Err(ConnError(code::FRAME_SIZE_ERROR, "DATA without pad length"))
            }
            Err(PaddingError::TooLong) => {
                return Err(ConnError(code::PROTOCOL_ERROR, "DATA padding too long"))
            }
        };
        let Some(i) = self.stream_index(id) else {
            if self.recently_reset(id) {
                return Ok(());
            }
            return Err(ConnError(code::STREAM_CLOSED, "DATA on a closed stream"));
        };
        let s = &mut self.streams[i];
        if !s.recv_open {
            self.reset(id, code::STREAM_CLOSED);
            return Ok(());
        }
        s.recv_window -= len;
        if s.recv_window < 0 {
            self.reset(id, code::FLOW_CONTROL_ERROR);
            return Ok(());
        }
        s.received += data.len() as u64;
        if s.content_length.is_some_and(|n| s.received > n) {
            self.reset(id, code::PROTOCOL_ERROR);
            return Ok(());
        }
        if h.flags & flag::END_STREAM != 0 {
            self.request_ended(i);
            return Ok(());
        }
        s.recv_unacked += len;
        if s.recv_unacked >= STREAM_WINDOW / 4 {
            let n = s.recv_unacked;
            s.recv_unacked = 0;
            s.recv_window += n;
            self.window_update(id, n as u32);
        }
        let deadline = self.now() + self.ctx.limits.body_timeout;
        self.streams[i].deadline = Some(deadline);
        Ok(())
    }

    pub(super) fn on_rst_stream(&mut self, h: FrameHead, payload: &[u8]) -> Result<(), ConnError> {
        RstStream::parse(&h, payload)?;
        if self.idle(h.stream_id) {
            return Err(ConnError(
                code::PROTOCOL_ERROR,
                "RST_STREAM on an idle stream",
            ));
        }
        // Whatever the stream held (queued body, timers, windows) is released now.
        if let Some(i) = self.stream_index(h.stream_id) {
            self.streams.swap_remove(i);
            self.cancels += 1;
            let budget = self.ctx.limits.max_streams.saturating_add(CANCEL_BUDGET);
            if self.cancels > budget {
                return Err(ConnError(
                    code::ENHANCE_YOUR_CALM,
                    "too many streams reset before their response was complete",
                ));
            }
        }
        Ok(())
    }

    pub(super) fn stream_window_update(&mut self, id: u32, inc: i64) -> Result<(), ConnError> {
        if self.idle(id) {
            return Err(ConnError(
                code::PROTOCOL_ERROR,
                "WINDOW_UPDATE on an idle stream",
            ));
        }
        if inc == 0 {
            self.reset(id, code::PROTOCOL_ERROR);
            return Ok(());
        }
        let Some(i) = self.stream_index(id) else {
            return Ok(());
        };
        let s = &mut self.streams[i];
        s.window += inc;
        if s.window > MAX_WINDOW {
            self.reset(id, code::FLOW_CONTROL_ERROR);
        }
        Ok(())
    }

    /// A request whose header list is over the limit: 431, and the rest of its body (if
    /// any) is not read.
    fn refuse_too_large(&mut self, id: u32, end_stream: bool) {
        let reply = Reply::text(
            http::StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
            "request header fields too large\n".into(),
        );
        let pending = Pending::bare(reply);
        self.respond(id, pending, None);
        if !end_stream {
            if let Some(i) = self.stream_index(id) {
                self.streams.swap_remove(i);
            }
            self.reset(id, code::NO_ERROR);
        }
    }
}
