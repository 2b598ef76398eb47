//! Parsing the server's frames: [`Conn::receive`] cuts whole frames out of the read buffer
//! and hands each to its handler; header blocks are decoded when complete.

use super::*;
use hxlab_wire::h2::control::{
    FrameError, GoAway, Ping, Priority, RstStream, Setting, Settings, WindowUpdate,
};
use hxlab_wire::h2::FrameHead;

impl From<FrameError> for ConnError {
    fn from(e: FrameError) -> ConnError {
        conn_err(e.code(), e.reason())
    }
}

impl Conn {
    /// Parses the whole frames at the start of `buf`; returns how many bytes they took.
    /// A partial frame is left for the next call.
    pub fn receive(&mut self, buf: &[u8], now: Instant) -> Result<usize, ConnError> {
        let mut pos = 0usize;
        while buf.len() - pos >= 9 {
            let Some(h) = FrameHead::parse(&buf[pos..]) else {
                break;
            };
            let (len, kind, flags, id) = (h.len, h.kind, h.flags, h.stream_id);
            if !self.got_settings && (kind != SETTINGS || flags & ACK != 0) {
                return Err(ConnError {
                    code: PROTOCOL_ERROR,
                    kind: ErrorKind::Protocol,
                    message: "h2: the server's first frame is not SETTINGS (not an HTTP/2 server?)"
                        .into(),
                });
            }
            if len > OUR_MAX_FRAME {
                return Err(conn_err(
                    FRAME_SIZE_ERROR,
                    "frame larger than SETTINGS_MAX_FRAME_SIZE",
                ));
            }
            if buf.len() - pos - 9 < len {
                break;
            }
            let payload = &buf[pos + 9..pos + 9 + len];
            pos += 9 + len;
            if self.block_stream != 0 && (kind != CONTINUATION || id != self.block_stream) {
                return Err(conn_err(PROTOCOL_ERROR, "header block interrupted"));
            }
            self.frame(&h, payload, now)?;
        }
        Ok(pos)
    }

    fn frame(&mut self, head: &FrameHead, payload: &[u8], now: Instant) -> Result<(), ConnError> {
        let (flags, id) = (head.flags, head.stream_id);
        match head.kind {
            DATA => self.on_data(head, payload, now),
            HEADERS => self.on_headers(head, payload, now),
            CONTINUATION => self.on_continuation(head, payload, now),
            // Priorities are not acted on; a malformed one ends the connection.
            PRIORITY => Priority::parse(head, payload).map(drop).map_err(Into::into),
            RST_STREAM => self.on_rst_stream(head, payload, now),
            SETTINGS => self.on_settings(head, payload),
            PUSH_PROMISE => self.on_push_promise(flags, id, payload),
            PING => self.on_ping(head, payload),
            GOAWAY => self.on_goaway(head, payload),
            WINDOW_UPDATE => self.on_window_update(head, payload),
            // Unknown frame types are ignored (RFC 9113 §4.1).
            _ => Ok(()),
        }
    }

    /// DATA: response body, flow control counted over the whole payload.
    fn on_data(&mut self, h: &FrameHead, payload: &[u8], now: Instant) -> Result<(), ConnError> {
        let (flags, id) = (h.flags, h.stream_id);
        if id == 0 {
            return Err(conn_err(PROTOCOL_ERROR, "DATA on stream 0"));
        }
        let data = strip_padding(flags, payload)?;
        // Flow control counts the whole payload, padding included.
        self.recv_conn_unacked += payload.len() as u32;
        if self.recv_conn_unacked >= WINDOW / 2 {
            control::write_window_update(&mut self.out, 0, self.recv_conn_unacked);
            self.recv_conn_unacked = 0;
        }
        if id.is_multiple_of(2) {
            return self.on_push_data(flags, id, data.len(), payload.len(), now);
        }
        let Some(k) = self.find(id) else {
            if id >= self.next_id {
                return Err(conn_err(PROTOCOL_ERROR, "DATA on an idle stream"));
            }
            // A stream we already finished or reset: ignore.
            return Ok(());
        };
        let s = &mut self.streams[k];
        if s.first_byte.is_none() {
            self.stream_protocol_error(id, k, "h2: DATA before response headers");
            return Ok(());
        }
        s.body += data.len() as u64;
        s.recv_unacked += payload.len() as u32;
        if flags & END_STREAM != 0 {
            self.complete(k, now);
        } else if s.recv_unacked >= WINDOW / 2 {
            let n = s.recv_unacked;
            s.recv_unacked = 0;
            control::write_window_update(&mut self.out, id, n);
        }

        Ok(())
    }

    /// HEADERS: a header block starts (CONTINUATIONs may follow).
    fn on_headers(&mut self, h: &FrameHead, payload: &[u8], now: Instant) -> Result<(), ConnError> {
        let (flags, id) = (h.flags, h.stream_id);
        if id == 0 {
            return Err(conn_err(PROTOCOL_ERROR, "HEADERS on stream 0"));
        }
        let mut p = strip_padding(flags, payload)?;
        if flags & PRIORITY_FLAG != 0 {
            if p.len() < 5 {
                return Err(conn_err(FRAME_SIZE_ERROR, "HEADERS too short for PRIORITY"));
            }
            p = &p[5..];
        }
        self.rx_header += payload.len() as u64;
        self.block.clear();
        self.block.extend_from_slice(p);
        self.block_end_stream = flags & END_STREAM != 0;
        self.block_promised = 0;
        if flags & END_HEADERS != 0 {
            self.headers_done(id, now)?;
        } else {
            self.block_stream = id;
        }

        Ok(())
    }

    /// CONTINUATION of the header block being assembled.
    fn on_continuation(
        &mut self,
        h: &FrameHead,
        payload: &[u8],
        now: Instant,
    ) -> Result<(), ConnError> {
        let (flags, id) = (h.flags, h.stream_id);
        if self.block_stream == 0 || id != self.block_stream {
            return Err(conn_err(PROTOCOL_ERROR, "CONTINUATION without HEADERS"));
        }
        self.rx_header += payload.len() as u64;
        if self.block.len() + payload.len() > MAX_BLOCK {
            return Err(conn_err(PROTOCOL_ERROR, "response header block too large"));
        }
        self.block.extend_from_slice(payload);
        if flags & END_HEADERS != 0 {
            self.block_stream = 0;
            if self.block_promised != 0 {
                self.promise_done(id)?;
            } else {
                self.headers_done(id, now)?;
            }
        }

        Ok(())
    }

    /// RST_STREAM: the server ended a stream.
    fn on_rst_stream(
        &mut self,
        h: &FrameHead,
        payload: &[u8],
        now: Instant,
    ) -> Result<(), ConnError> {
        let code = RstStream::parse(h, payload)?.code;
        let id = h.stream_id;
        if id.is_multiple_of(2) {
            match self.find_push(id) {
                Some(j) => self.push_end(j, false, now),
                None if id > self.last_promised => {
                    return Err(conn_err(PROTOCOL_ERROR, "RST_STREAM on an idle stream"))
                }
                None => {}
            }
            return Ok(());
        }
        match self.find(id) {
            Some(k) if code == REFUSED_STREAM => self.finish(k, StreamEnd::Refused),
            Some(k) => self.finish(
                k,
                StreamEnd::Failed(
                    ErrorKind::Reset,
                    format!("h2: stream reset by the server ({})", code_name(code)),
                ),
            ),
            None if id >= self.next_id => {
                return Err(conn_err(PROTOCOL_ERROR, "RST_STREAM on an idle stream"))
            }
            None => {}
        }

        Ok(())
    }

    /// SETTINGS: the server's limits (acknowledged at once).
    fn on_settings(&mut self, h: &FrameHead, payload: &[u8]) -> Result<(), ConnError> {
        let settings = Settings::parse(h, payload)?;
        if settings.ack {
            return Ok(());
        }
        self.got_settings = true;
        self.server_table
            .get_or_insert(hxlab_wire::hpack::DEFAULT_TABLE);
        for s in settings.iter() {
            match s? {
                Setting::HeaderTableSize(v) => {
                    self.server_table = Some(u64::from(v));
                    self.enc.set_peer_limit(v);
                }
                Setting::MaxConcurrentStreams(v) => self.peer_max_streams = v,
                Setting::InitialWindowSize(v) => {
                    let delta = i64::from(v) - self.peer_initial_window;
                    self.peer_initial_window = i64::from(v);
                    for st in self.streams.iter_mut() {
                        st.send_window += delta;
                        if st.send_window > i64::from(MAX_STREAM_ID) {
                            return Err(conn_err(FLOW_CONTROL_ERROR, "stream window above 2^31-1"));
                        }
                    }
                }
                Setting::MaxFrameSize(v) => self.peer_max_frame = v as usize,
                _ => {}
            }
        }
        control::write_settings_ack(&mut self.out);
        self.pump_bodies();

        Ok(())
    }

    /// PING: answered.
    fn on_ping(&mut self, h: &FrameHead, payload: &[u8]) -> Result<(), ConnError> {
        let ping = Ping::parse(h, payload)?;
        if !ping.ack {
            control::write_ping_ack(&mut self.out, &ping.data);
        }

        Ok(())
    }

    /// GOAWAY: no new streams; those above its last stream id go back to the plan.
    fn on_goaway(&mut self, h: &FrameHead, payload: &[u8]) -> Result<(), ConnError> {
        let g = GoAway::parse(h, payload)?;
        let last = match self.goaway {
            Some((l, _)) => l.min(g.last_stream_id),
            None => g.last_stream_id,
        };
        self.goaway = Some((last, g.code));
        // Streams above the last id were not processed: they may be sent again.
        let mut k = 0;
        while k < self.streams.len() {
            if self.streams[k].id > last {
                self.finish(k, StreamEnd::Refused);
            } else {
                k += 1;
            }
        }

        Ok(())
    }

    /// WINDOW_UPDATE: more send window for request bodies.
    fn on_window_update(&mut self, h: &FrameHead, payload: &[u8]) -> Result<(), ConnError> {
        let inc = i64::from(WindowUpdate::parse(h, payload)?.increment);
        let id = h.stream_id;
        if id == 0 {
            self.conn_send_window += inc;
            if self.conn_send_window > i64::from(MAX_STREAM_ID) {
                return Err(conn_err(
                    FLOW_CONTROL_ERROR,
                    "connection window above 2^31-1",
                ));
            }
        } else if let Some(k) = self.find(id) {
            let s = &mut self.streams[k];
            s.send_window += inc;
            if inc == 0 || s.send_window > i64::from(MAX_STREAM_ID) {
                self.rst(
                    id,
                    if inc == 0 {
                        PROTOCOL_ERROR
                    } else {
                        FLOW_CONTROL_ERROR
                    },
                );
                self.finish(
                    k,
                    StreamEnd::Failed(ErrorKind::Protocol, "h2: bad stream WINDOW_UPDATE".into()),
                );
            }
        }
        self.pump_bodies();

        Ok(())
    }

    /// A complete header block for stream `id`.
    pub(super) fn headers_done(&mut self, id: u32, now: Instant) -> Result<(), ConnError> {
        // Always decode: the HPACK table must follow the server even for streams we dropped.
        let info = self
            .dec
            .decode(&self.block)
            .map_err(|e| conn_err(COMPRESSION_ERROR, &e.to_string()))?;
        let end_stream = self.block_end_stream;
        if id.is_multiple_of(2) {
            return self.push_headers_done(id, info.status, info.uncompressed, end_stream, now);
        }
        let Some(k) = self.find(id) else {
            if id.is_multiple_of(2) || id >= self.next_id {
                return Err(conn_err(
                    PROTOCOL_ERROR,
                    "HEADERS on a stream we did not open",
                ));
            }
            return Ok(());
        };
        let s = &mut self.streams[k];
        if s.first_byte.is_none() {
            let status = match info.status {
                Some(st) if (100..1000).contains(&st) => st,
                _ => {
                    self.stream_protocol_error(id, k, "h2: response without a valid :status");
                    return Ok(());
                }
            };
            if info.uncompressed > u64::from(MAX_HEADER_LIST) {
                self.stream_protocol_error(id, k, "h2: response header list too large");
                return Ok(());
            }
            if status < 200 {
                // Informational: the final response follows.
                if end_stream {
                    self.stream_protocol_error(id, k, "h2: stream ended after a 1xx response");
                }
                return Ok(());
            }
            s.first_byte = Some(now);
            s.status = status;
            s.uncompressed = info.uncompressed;
        } else if !end_stream {
            // Trailers must end the stream.
            self.stream_protocol_error(id, k, "h2: trailers without END_STREAM");
            return Ok(());
        }
        if end_stream {
            self.complete(k, now);
        }
        Ok(())
    }
}
