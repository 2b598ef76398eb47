//! HTTP/2 driver (TLS with ALPN h2, or h2c with prior knowledge): an own client connection
//! with up to `-m` streams in flight, built for the load generator's hot path.
//!
//! [`Conn`] is the protocol state machine without IO: it writes the preface, SETTINGS
//! (push off unless `--push`, stream windows of 2³⁰-1) and a connection WINDOW_UPDATE, encodes request
//! header blocks (each URL's block is cached while the HPACK table is unchanged, so a
//! repeated request is a memcpy of a few indexed bytes), parses whole frames out of the read
//! buffer, decodes response header blocks with [`crate::hpack::Decoder`] (lengths and
//! `:status` only), honours the server's MAX_CONCURRENT_STREAMS, MAX_FRAME_SIZE, header table
//! size and flow-control windows (request bodies), returns received window in batches,
//! answers PING and SETTINGS, and reports finished streams as [`Event`]s. [`H2Session`] is
//! the [`Session`] around it: the client loop ([`crate::session::drive`] over
//! [`crate::session::Tcp`]) runs it with one read buffer, one write buffer, one write per
//! loop turn, and finished streams go to the recorder as they end.
//!
//! Counting (docs/run-result.md): header wire bytes are HEADERS + CONTINUATION payload bytes
//! (both directions); the uncompressed size is h2load's (name + value of every field of the
//! response head); body bytes are DATA payload without padding, counted when the response
//! is complete; ttfb is taken at the final response's HEADERS, latency at END_STREAM.
//!
//! Server push (`--push`, SETTINGS_ENABLE_PUSH=1): every PUSH_PROMISE header block (with its
//! CONTINUATIONs) is decoded so the HPACK table follows the server; promised streams are
//! tracked apart (their received window returned like any stream's) and belong to the request
//! they were promised on, which completes only when its own response and every stream it
//! promised have ended: its latency is the time to the last byte of the page with its
//! pushed resources, and its body/header counts include theirs. PUSH_PROMISE payload counts as
//! header wire bytes. Without `--push` a PUSH_PROMISE is a connection error (RFC 9113 §8.4).

use crate::hpack::{Decoder, Encoder};
use crate::net::io_phrase;
use crate::recorder::ErrorKind;
use crate::session::{ByteSession, Fail, Outcome as SessionOutcome, Session};
use crate::target::Target;
use crate::worker::{ClientCtx, SessionEnd};
use std::time::Instant;

/// Largest response header list accepted (decoded size), as h1 accepts a 64 KiB head.
pub const MAX_HEADER_LIST: u32 = 256 * 1024;

/// Size of a response header list as h2load counts it: name + value of every field,
/// `:status` included.
pub fn header_list_size(headers: &http::HeaderMap) -> u64 {
    let fields: usize = headers
        .iter()
        .map(|(n, v)| n.as_str().len() + v.len())
        .sum();
    (":status".len() + 3 + fields) as u64
}

const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
const DATA: u8 = 0;
const HEADERS: u8 = 1;
const PRIORITY: u8 = 2;
const RST_STREAM: u8 = 3;
const SETTINGS: u8 = 4;
const PUSH_PROMISE: u8 = 5;
const PING: u8 = 6;
const GOAWAY: u8 = 7;
const WINDOW_UPDATE: u8 = 8;
const CONTINUATION: u8 = 9;

const END_STREAM: u8 = 0x1;
const ACK: u8 = 0x1;
const END_HEADERS: u8 = 0x4;
const PADDED: u8 = 0x8;
const PRIORITY_FLAG: u8 = 0x20;

const NO_ERROR: u32 = 0;
const PROTOCOL_ERROR: u32 = 1;
const FLOW_CONTROL_ERROR: u32 = 3;
const FRAME_SIZE_ERROR: u32 = 6;
const REFUSED_STREAM: u32 = 7;
const CANCEL: u32 = 8;
const COMPRESSION_ERROR: u32 = 9;

/// Our receive windows (as h2load -w 30 -W 30): flow control never paces a load test.
const WINDOW: u32 = (1 << 30) - 1;
/// The frame size we accept (the default; we do not raise it).
const OUR_MAX_FRAME: usize = 16_384;
/// Our HPACK table size (the default).
const OUR_TABLE: usize = 4096;
/// Largest header block (wire) we buffer across CONTINUATION frames.
const MAX_BLOCK: usize = MAX_HEADER_LIST as usize;
/// Read buffer: several full frames.
const READ_BUF: usize = 4 * (OUR_MAX_FRAME + 9);
const MAX_STREAM_ID: u32 = (1 << 31) - 1;
/// Pushed streams tracked at once per connection; further promises are cancelled.
const MAX_PUSHES: usize = 1024;

/// Name of an HTTP/2 error code, for messages.
pub fn code_name(code: u32) -> &'static str {
    match code {
        0 => "NO_ERROR",
        1 => "PROTOCOL_ERROR",
        2 => "INTERNAL_ERROR",
        3 => "FLOW_CONTROL_ERROR",
        4 => "SETTINGS_TIMEOUT",
        5 => "STREAM_CLOSED",
        6 => "FRAME_SIZE_ERROR",
        7 => "REFUSED_STREAM",
        8 => "CANCEL",
        9 => "COMPRESSION_ERROR",
        10 => "CONNECT_ERROR",
        11 => "ENHANCE_YOUR_CALM",
        12 => "INADEQUATE_SECURITY",
        13 => "HTTP_1_1_REQUIRED",
        _ => "unknown error code",
    }
}

pub use crate::session::Req;

#[derive(Debug)]
struct Slot {
    id: u32,
    req: Req,
    first_byte: Option<Instant>,
    status: u16,
    uncompressed: u64,
    body: u64,
    /// Request body bytes still to send, and the stream's send window.
    body_off: usize,
    send_window: i64,
    /// DATA bytes received since the last stream WINDOW_UPDATE.
    recv_unacked: u32,
    /// Streams it promised (PUSH_PROMISE) that have not ended yet.
    pending: u32,
    /// When its own response ended while promised streams were still open.
    ended: Option<Instant>,
    /// Pushed responses that completed, and their body and decoded head bytes.
    pushed: u64,
    push_body: u64,
    push_uncompressed: u64,
}

/// A server-initiated (pushed) stream, promised on the request stream `parent`.
#[derive(Debug)]
struct Push {
    id: u32,
    parent: u32,
    got_headers: bool,
    body: u64,
    uncompressed: u64,
    recv_unacked: u32,
}

/// How a stream ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// A complete response.
    Done {
        /// `:status`.
        status: u16,
        /// Body bytes (DATA payload without padding), pushed responses' included.
        body: u64,
        /// Decoded response head size, pushed responses' included.
        uncompressed: u64,
        /// Final HEADERS time.
        first_byte: Instant,
        /// END_STREAM time of the response or of the last stream it promised.
        done: Instant,
        /// Pushed responses (promised on this stream) that completed.
        pushed: u64,
    },
    /// The server did not process it (REFUSED_STREAM, above a GOAWAY's last stream id).
    Refused,
    /// Failed.
    Failed(ErrorKind, String),
}

/// A finished stream.
#[derive(Debug, Clone)]
pub struct Event {
    /// The request.
    pub req: Req,
    /// What happened.
    pub outcome: Outcome,
}

/// A connection error: the connection must end (we send GOAWAY with `code`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnError {
    /// HTTP/2 error code we send (NO_ERROR when the server went away).
    pub code: u32,
    /// How the streams in flight fail.
    pub kind: ErrorKind,
    /// One line.
    pub message: String,
}

fn conn_err(code: u32, what: &str) -> ConnError {
    ConnError {
        code,
        kind: ErrorKind::Protocol,
        message: format!("h2: {what} ({})", code_name(code)),
    }
}

/// The client side of one HTTP/2 connection, without IO.
pub struct Conn {
    /// Bytes to write (frames produced since the last flush).
    pub out: Vec<u8>,
    /// HEADERS/CONTINUATION payload bytes queued in `out`.
    pub out_header: u64,
    /// HEADERS/CONTINUATION payload bytes received (taken by the driver).
    pub rx_header: u64,
    /// Finished streams (drained by the driver).
    pub events: Vec<Event>,
    /// Per URL: its header fields.
    fields: Vec<Vec<(Vec<u8>, Vec<u8>)>>,
    /// Per URL: an encoded block and the encoder generation it is valid for.
    cache: Vec<(u64, Vec<u8>)>,
    body: Option<bytes::Bytes>,
    enc: Encoder,
    dec: Decoder,
    streams: Vec<Slot>,
    depth: usize,
    next_id: u32,
    /// Whether the server's SETTINGS arrived (its preface).
    got_settings: bool,
    peer_max_streams: u32,
    peer_max_frame: usize,
    peer_initial_window: i64,
    conn_send_window: i64,
    recv_conn_unacked: u32,
    /// GOAWAY from the server: (last stream id, error code).
    pub goaway: Option<(u32, u32)>,
    /// Header block being assembled: stream, END_STREAM of its HEADERS, bytes.
    block_stream: u32,
    block_end_stream: bool,
    block: Vec<u8>,
    /// The promised stream when the block being assembled is a PUSH_PROMISE's (else 0).
    block_promised: u32,
    /// Whether we advertise SETTINGS_ENABLE_PUSH=1.
    push: bool,
    /// Promised streams not yet ended.
    pushes: Vec<Push>,
    /// Highest promised stream id so far.
    last_promised: u32,
}

impl Conn {
    /// A connection for `target` with at most `depth` streams in flight, push disabled;
    /// the preface and SETTINGS are queued in `out`.
    pub fn new(target: &Target, depth: usize) -> Conn {
        Conn::with_push(target, depth, false)
    }

    /// Like [`Conn::new`]; with `push` it advertises SETTINGS_ENABLE_PUSH=1 and a request
    /// completes only when its response and every stream it promised have ended.
    pub fn with_push(target: &Target, depth: usize, push: bool) -> Conn {
        let scheme: &[u8] = if target.https { b"https" } else { b"http" };
        let fields: Vec<Vec<(Vec<u8>, Vec<u8>)>> = target
            .requests
            .iter()
            .map(|t| {
                let path = t.uri.path_and_query().map(|p| p.as_str()).unwrap_or("/");
                let mut f = vec![
                    (
                        b":method".to_vec(),
                        target.method.as_str().as_bytes().to_vec(),
                    ),
                    (b":scheme".to_vec(), scheme.to_vec()),
                    (b":authority".to_vec(), target.authority.as_bytes().to_vec()),
                    (b":path".to_vec(), path.as_bytes().to_vec()),
                ];
                for (n, v) in &t.headers {
                    f.push((n.as_str().as_bytes().to_vec(), v.as_bytes().to_vec()));
                }
                f
            })
            .collect();
        let n = fields.len();
        let mut c = Conn {
            out: Vec::with_capacity(16 * 1024),
            out_header: 0,
            rx_header: 0,
            events: Vec::with_capacity(depth),
            fields,
            cache: (0..n).map(|_| (u64::MAX, Vec::new())).collect(),
            body: target.body.clone(),
            enc: Encoder::new(),
            dec: Decoder::new(OUR_TABLE),
            streams: Vec::with_capacity(depth),
            depth: depth.max(1),
            next_id: 1,
            got_settings: false,
            // nghttp2's assumption until the server's SETTINGS arrive.
            peer_max_streams: 100,
            peer_max_frame: 16_384,
            peer_initial_window: 65_535,
            conn_send_window: 65_535,
            recv_conn_unacked: 0,
            goaway: None,
            block_stream: 0,
            block_end_stream: false,
            block: Vec::new(),
            block_promised: 0,
            push,
            pushes: Vec::new(),
            last_promised: 0,
        };
        c.out.extend_from_slice(PREFACE);
        // SETTINGS: ENABLE_PUSH, INITIAL_WINDOW_SIZE, MAX_HEADER_LIST_SIZE.
        frame_head(&mut c.out, 18, SETTINGS, 0, 0);
        for (id, v) in [(2u16, u32::from(push)), (4, WINDOW), (6, MAX_HEADER_LIST)] {
            c.out.extend_from_slice(&id.to_be_bytes());
            c.out.extend_from_slice(&v.to_be_bytes());
        }
        frame_head(&mut c.out, 4, WINDOW_UPDATE, 0, 0);
        c.out.extend_from_slice(&(WINDOW - 65_535).to_be_bytes());
        c
    }

    /// Streams in flight.
    pub fn inflight(&self) -> usize {
        self.streams.len()
    }

    /// Send time of the oldest request in flight.
    pub fn oldest_sent(&self) -> Option<Instant> {
        self.streams.iter().map(|s| s.req.sent).min()
    }

    /// True when another stream may be opened now.
    #[inline]
    pub fn can_open(&self) -> bool {
        self.goaway.is_none()
            && self.next_id <= MAX_STREAM_ID
            && self.streams.len() < self.depth.min(self.peer_max_streams as usize)
    }

    /// True when no stream can ever be opened again on this connection.
    pub fn exhausted(&self) -> bool {
        self.goaway.is_some() || self.next_id > MAX_STREAM_ID
    }

    /// Opens a stream for URL `url` (check [`Conn::can_open`] first): HEADERS (and
    /// CONTINUATION, and as much body as the windows allow) are queued in `out`.
    pub fn open(&mut self, url: usize, req: Req) -> u32 {
        let id = self.next_id;
        self.next_id += 2;
        let gen = self.enc.generation();
        if self.cache[url].0 != gen {
            let mut block = std::mem::take(&mut self.cache[url].1);
            block.clear();
            self.enc.encode(
                self.fields[url]
                    .iter()
                    .map(|(n, v)| (n.as_slice(), v.as_slice())),
                &mut block,
            );
            // Valid for later requests only if encoding it changed nothing in the table.
            let after = self.enc.generation();
            self.cache[url] = (if after == gen { gen } else { u64::MAX }, block);
        }
        let has_body = self.body.as_ref().is_some_and(|b| !b.is_empty());
        let block = &self.cache[url].1;
        let max = self.peer_max_frame;
        let mut first = true;
        let mut rest: &[u8] = block;
        loop {
            let n = rest.len().min(max);
            let last = n == rest.len();
            let mut flags = if last { END_HEADERS } else { 0 };
            if first && !has_body {
                flags |= END_STREAM;
            }
            let kind = if first { HEADERS } else { CONTINUATION };
            frame_head(&mut self.out, n, kind, flags, id);
            self.out.extend_from_slice(&rest[..n]);
            self.out_header += n as u64;
            rest = &rest[n..];
            first = false;
            if last {
                break;
            }
        }
        // An empty body is sent as END_STREAM on HEADERS.
        let body_off = if has_body { 0 } else { usize::MAX };
        self.streams.push(Slot {
            id,
            req,
            first_byte: None,
            status: 0,
            uncompressed: 0,
            body: 0,
            body_off,
            send_window: self.peer_initial_window,
            recv_unacked: 0,
            pending: 0,
            ended: None,
            pushed: 0,
            push_body: 0,
            push_uncompressed: 0,
        });
        if has_body {
            self.pump_bodies();
        }
        id
    }

    /// Sends request body DATA as far as the flow-control windows allow.
    fn pump_bodies(&mut self) {
        let Some(body) = &self.body else { return };
        for s in self.streams.iter_mut() {
            while s.body_off < body.len() {
                let left = body.len() - s.body_off;
                let room = s.send_window.min(self.conn_send_window);
                if room <= 0 {
                    break;
                }
                let n = left.min(room as usize).min(self.peer_max_frame);
                let end = n == left;
                frame_head(
                    &mut self.out,
                    n,
                    DATA,
                    if end { END_STREAM } else { 0 },
                    s.id,
                );
                self.out
                    .extend_from_slice(&body[s.body_off..s.body_off + n]);
                s.body_off += n;
                s.send_window -= n as i64;
                self.conn_send_window -= n as i64;
                if end {
                    s.body_off = usize::MAX;
                }
            }
        }
    }

    /// Queues GOAWAY (when ending the connection ourselves).
    pub fn goaway_frame(&mut self, code: u32) {
        frame_head(&mut self.out, 8, GOAWAY, 0, 0);
        self.out.extend_from_slice(&0u32.to_be_bytes());
        self.out.extend_from_slice(&code.to_be_bytes());
    }

    fn rst(&mut self, id: u32, code: u32) {
        frame_head(&mut self.out, 4, RST_STREAM, 0, id);
        self.out.extend_from_slice(&code.to_be_bytes());
    }

    /// Ends every stream in flight with `outcome`.
    pub fn fail_all(&mut self, kind: ErrorKind, message: &str) {
        self.pushes.clear();
        for s in self.streams.drain(..) {
            self.events.push(Event {
                req: s.req,
                outcome: Outcome::Failed(kind, message.to_string()),
            });
        }
    }

    fn finish(&mut self, k: usize, outcome: Outcome) {
        let s = self.streams.swap_remove(k);
        self.events.push(Event {
            req: s.req,
            outcome,
        });
    }

    /// A request stream still receiving its response.
    fn find(&self, id: u32) -> Option<usize> {
        self.streams
            .iter()
            .position(|s| s.id == id && s.ended.is_none())
    }

    /// A pushed stream still open.
    fn find_push(&self, id: u32) -> Option<usize> {
        self.pushes.iter().position(|p| p.id == id)
    }

    /// Ends pushed stream `j` (`ok`: with a complete response) and completes its request
    /// when that was the last thing it waited for.
    fn push_end(&mut self, j: usize, ok: bool, now: Instant) {
        let p = self.pushes.swap_remove(j);
        let Some(k) = self.streams.iter().position(|s| s.id == p.parent) else {
            // The request already failed: nothing waits for this stream.
            return;
        };
        let s = &mut self.streams[k];
        s.pending = s.pending.saturating_sub(1);
        if ok {
            s.pushed += 1;
            s.push_body += p.body;
            s.push_uncompressed += p.uncompressed;
        }
        if s.pending == 0 && s.ended.is_some() {
            self.release(k, now);
        }
    }

    /// Resets pushed stream `j` with `code` and ends it without a response.
    fn push_fail(&mut self, j: usize, code: u32, now: Instant) {
        let id = self.pushes[j].id;
        self.rst(id, code);
        self.push_end(j, false, now);
    }

    /// Parses the whole frames at the start of `buf`; returns how many bytes they took.
    /// A partial frame is left for the next call.
    pub fn receive(&mut self, buf: &[u8], now: Instant) -> Result<usize, ConnError> {
        let mut pos = 0usize;
        while buf.len() - pos >= 9 {
            let h = &buf[pos..pos + 9];
            let len = (h[0] as usize) << 16 | (h[1] as usize) << 8 | h[2] as usize;
            let kind = h[3];
            let flags = h[4];
            let id = u32::from_be_bytes([h[5], h[6], h[7], h[8]]) & 0x7fff_ffff;
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
            self.frame(kind, flags, id, payload, now)?;
        }
        Ok(pos)
    }

    fn frame(
        &mut self,
        kind: u8,
        flags: u8,
        id: u32,
        payload: &[u8],
        now: Instant,
    ) -> Result<(), ConnError> {
        match kind {
            DATA => {
                if id == 0 {
                    return Err(conn_err(PROTOCOL_ERROR, "DATA on stream 0"));
                }
                let data = strip_padding(flags, payload)?;
                // Flow control counts the whole payload, padding included.
                self.recv_conn_unacked += payload.len() as u32;
                if self.recv_conn_unacked >= WINDOW / 2 {
                    frame_head(&mut self.out, 4, WINDOW_UPDATE, 0, 0);
                    self.out
                        .extend_from_slice(&self.recv_conn_unacked.to_be_bytes());
                    self.recv_conn_unacked = 0;
                }
                if id.is_multiple_of(2) {
                    let Some(j) = self.find_push(id) else {
                        if id > self.last_promised {
                            return Err(conn_err(PROTOCOL_ERROR, "DATA on an idle stream"));
                        }
                        return Ok(());
                    };
                    let p = &mut self.pushes[j];
                    if !p.got_headers {
                        self.push_fail(j, PROTOCOL_ERROR, now);
                        return Ok(());
                    }
                    p.body += data.len() as u64;
                    p.recv_unacked += payload.len() as u32;
                    if flags & END_STREAM != 0 {
                        self.push_end(j, true, now);
                    } else if p.recv_unacked >= WINDOW / 2 {
                        let n = p.recv_unacked;
                        p.recv_unacked = 0;
                        frame_head(&mut self.out, 4, WINDOW_UPDATE, 0, id);
                        self.out.extend_from_slice(&n.to_be_bytes());
                    }
                    return Ok(());
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
                    self.rst(id, PROTOCOL_ERROR);
                    self.finish(
                        k,
                        Outcome::Failed(
                            ErrorKind::Protocol,
                            "h2: DATA before response headers".into(),
                        ),
                    );
                    return Ok(());
                }
                s.body += data.len() as u64;
                s.recv_unacked += payload.len() as u32;
                if flags & END_STREAM != 0 {
                    self.complete(k, now);
                } else if s.recv_unacked >= WINDOW / 2 {
                    let n = s.recv_unacked;
                    s.recv_unacked = 0;
                    frame_head(&mut self.out, 4, WINDOW_UPDATE, 0, id);
                    self.out.extend_from_slice(&n.to_be_bytes());
                }
            }
            HEADERS => {
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
            }
            CONTINUATION => {
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
            }
            PRIORITY if payload.len() != 5 => {
                return Err(conn_err(FRAME_SIZE_ERROR, "PRIORITY frame of bad size"));
            }
            RST_STREAM => {
                if id == 0 {
                    return Err(conn_err(PROTOCOL_ERROR, "RST_STREAM on stream 0"));
                }
                if payload.len() != 4 {
                    return Err(conn_err(FRAME_SIZE_ERROR, "RST_STREAM frame of bad size"));
                }
                let code = be32(payload);
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
                    Some(k) if code == REFUSED_STREAM => self.finish(k, Outcome::Refused),
                    Some(k) => self.finish(
                        k,
                        Outcome::Failed(
                            ErrorKind::Reset,
                            format!("h2: stream reset by the server ({})", code_name(code)),
                        ),
                    ),
                    None if id >= self.next_id => {
                        return Err(conn_err(PROTOCOL_ERROR, "RST_STREAM on an idle stream"))
                    }
                    None => {}
                }
            }
            SETTINGS => {
                if id != 0 {
                    return Err(conn_err(PROTOCOL_ERROR, "SETTINGS on a stream"));
                }
                if flags & ACK != 0 {
                    if !payload.is_empty() {
                        return Err(conn_err(FRAME_SIZE_ERROR, "SETTINGS ACK with a payload"));
                    }
                    return Ok(());
                }
                if !payload.len().is_multiple_of(6) {
                    return Err(conn_err(FRAME_SIZE_ERROR, "SETTINGS frame of bad size"));
                }
                self.got_settings = true;
                for s in payload.chunks_exact(6) {
                    let v = be32(&s[2..]);
                    match u16::from_be_bytes([s[0], s[1]]) {
                        1 => self.enc.set_peer_limit(v),
                        2 if v > 1 => return Err(conn_err(PROTOCOL_ERROR, "bad ENABLE_PUSH")),
                        3 => self.peer_max_streams = v,
                        4 => {
                            if v > MAX_STREAM_ID {
                                return Err(conn_err(
                                    FLOW_CONTROL_ERROR,
                                    "INITIAL_WINDOW_SIZE above 2^31-1",
                                ));
                            }
                            let delta = i64::from(v) - self.peer_initial_window;
                            self.peer_initial_window = i64::from(v);
                            for st in self.streams.iter_mut() {
                                st.send_window += delta;
                                if st.send_window > i64::from(MAX_STREAM_ID) {
                                    return Err(conn_err(
                                        FLOW_CONTROL_ERROR,
                                        "stream window above 2^31-1",
                                    ));
                                }
                            }
                        }
                        5 => {
                            if !(16_384..=16_777_215).contains(&v) {
                                return Err(conn_err(PROTOCOL_ERROR, "bad MAX_FRAME_SIZE"));
                            }
                            self.peer_max_frame = v as usize;
                        }
                        _ => {}
                    }
                }
                frame_head(&mut self.out, 0, SETTINGS, ACK, 0);
                self.pump_bodies();
            }
            PUSH_PROMISE => {
                // RFC 9113 §8.4: a PUSH_PROMISE when we disabled push is a protocol error.
                if !self.push {
                    return Err(conn_err(PROTOCOL_ERROR, "PUSH_PROMISE with push disabled"));
                }
                if id == 0 || id.is_multiple_of(2) {
                    return Err(conn_err(
                        PROTOCOL_ERROR,
                        "PUSH_PROMISE on a stream we did not open",
                    ));
                }
                let p = strip_padding(flags, payload)?;
                if p.len() < 4 {
                    return Err(conn_err(FRAME_SIZE_ERROR, "PUSH_PROMISE too short"));
                }
                let promised = be32(p) & 0x7fff_ffff;
                // RFC 9113 §5.1.1 wants promised ids to increase, but the h2 crate (our own
                // server) queues PUSH_PROMISE per request stream, so with several requests
                // in flight they can arrive out of order: accept any even id not in use.
                if promised == 0
                    || !promised.is_multiple_of(2)
                    || self.find_push(promised).is_some()
                {
                    return Err(conn_err(PROTOCOL_ERROR, "bad promised stream id"));
                }
                self.last_promised = self.last_promised.max(promised);
                self.rx_header += payload.len() as u64;
                self.block.clear();
                self.block.extend_from_slice(&p[4..]);
                self.block_end_stream = false;
                self.block_promised = promised;
                if flags & END_HEADERS != 0 {
                    self.promise_done(id)?;
                } else {
                    self.block_stream = id;
                }
            }
            PING => {
                if id != 0 {
                    return Err(conn_err(PROTOCOL_ERROR, "PING on a stream"));
                }
                if payload.len() != 8 {
                    return Err(conn_err(FRAME_SIZE_ERROR, "PING frame of bad size"));
                }
                if flags & ACK == 0 {
                    frame_head(&mut self.out, 8, PING, ACK, 0);
                    self.out.extend_from_slice(payload);
                }
            }
            GOAWAY => {
                if id != 0 {
                    return Err(conn_err(PROTOCOL_ERROR, "GOAWAY on a stream"));
                }
                if payload.len() < 8 {
                    return Err(conn_err(FRAME_SIZE_ERROR, "GOAWAY frame too short"));
                }
                let last = be32(payload) & 0x7fff_ffff;
                let code = be32(&payload[4..]);
                let last = match self.goaway {
                    Some((l, _)) => l.min(last),
                    None => last,
                };
                self.goaway = Some((last, code));
                // Streams above the last id were not processed: they may be sent again.
                let mut k = 0;
                while k < self.streams.len() {
                    if self.streams[k].id > last {
                        self.finish(k, Outcome::Refused);
                    } else {
                        k += 1;
                    }
                }
            }
            WINDOW_UPDATE => {
                if payload.len() != 4 {
                    return Err(conn_err(
                        FRAME_SIZE_ERROR,
                        "WINDOW_UPDATE frame of bad size",
                    ));
                }
                let inc = i64::from(be32(payload) & 0x7fff_ffff);
                if id == 0 {
                    if inc == 0 {
                        return Err(conn_err(PROTOCOL_ERROR, "WINDOW_UPDATE of 0"));
                    }
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
                            Outcome::Failed(
                                ErrorKind::Protocol,
                                "h2: bad stream WINDOW_UPDATE".into(),
                            ),
                        );
                    }
                }
                self.pump_bodies();
            }
            // Unknown frame types are ignored (RFC 9113 §4.1).
            _ => {}
        }
        Ok(())
    }

    /// A complete PUSH_PROMISE header block on request stream `id`.
    fn promise_done(&mut self, id: u32) -> Result<(), ConnError> {
        let promised = std::mem::take(&mut self.block_promised);
        // Always decode: the promised request's fields may change the HPACK table.
        let info = self
            .dec
            .decode(&self.block)
            .map_err(|e| conn_err(COMPRESSION_ERROR, &e.to_string()))?;
        if id >= self.next_id {
            return Err(conn_err(PROTOCOL_ERROR, "PUSH_PROMISE on an idle stream"));
        }
        match self.find(id) {
            Some(k) if self.pushes.len() < MAX_PUSHES => {
                // Its wire bytes are in header_received, so its decoded size goes with them.
                self.streams[k].push_uncompressed += info.uncompressed;
                self.streams[k].pending += 1;
                self.pushes.push(Push {
                    id: promised,
                    parent: id,
                    got_headers: false,
                    body: 0,
                    uncompressed: 0,
                    recv_unacked: 0,
                });
            }
            // The request is gone (or too many pushes): we do not want this stream.
            _ => self.rst(promised, CANCEL),
        }
        Ok(())
    }

    /// A complete response header block on pushed stream `id`.
    fn push_headers_done(
        &mut self,
        id: u32,
        status: Option<u16>,
        uncompressed: u64,
        end_stream: bool,
        now: Instant,
    ) -> Result<(), ConnError> {
        let Some(j) = self.find_push(id) else {
            if id > self.last_promised {
                return Err(conn_err(
                    PROTOCOL_ERROR,
                    "HEADERS on a stream nobody promised",
                ));
            }
            return Ok(());
        };
        let p = &mut self.pushes[j];
        if p.got_headers {
            // Trailers must end the stream.
            if end_stream {
                self.push_end(j, true, now);
            } else {
                self.push_fail(j, PROTOCOL_ERROR, now);
            }
            return Ok(());
        }
        match status {
            Some(st) if (200..1000).contains(&st) => {}
            Some(st) if (100..200).contains(&st) && !end_stream => return Ok(()),
            _ => {
                self.push_fail(j, PROTOCOL_ERROR, now);
                return Ok(());
            }
        }
        if uncompressed > u64::from(MAX_HEADER_LIST) {
            self.push_fail(j, PROTOCOL_ERROR, now);
            return Ok(());
        }
        p.got_headers = true;
        p.uncompressed = uncompressed;
        if end_stream {
            self.push_end(j, true, now);
        }
        Ok(())
    }

    /// A complete header block for stream `id`.
    fn headers_done(&mut self, id: u32, now: Instant) -> Result<(), ConnError> {
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
                    self.rst(id, PROTOCOL_ERROR);
                    self.finish(
                        k,
                        Outcome::Failed(
                            ErrorKind::Protocol,
                            "h2: response without a valid :status".into(),
                        ),
                    );
                    return Ok(());
                }
            };
            if info.uncompressed > u64::from(MAX_HEADER_LIST) {
                self.rst(id, PROTOCOL_ERROR);
                self.finish(
                    k,
                    Outcome::Failed(
                        ErrorKind::Protocol,
                        "h2: response header list too large".into(),
                    ),
                );
                return Ok(());
            }
            if status < 200 {
                // Informational: the final response follows.
                if end_stream {
                    self.rst(id, PROTOCOL_ERROR);
                    self.finish(
                        k,
                        Outcome::Failed(
                            ErrorKind::Protocol,
                            "h2: stream ended after a 1xx response".into(),
                        ),
                    );
                }
                return Ok(());
            }
            s.first_byte = Some(now);
            s.status = status;
            s.uncompressed = info.uncompressed;
        } else if !end_stream {
            // Trailers must end the stream.
            self.rst(id, PROTOCOL_ERROR);
            self.finish(
                k,
                Outcome::Failed(
                    ErrorKind::Protocol,
                    "h2: trailers without END_STREAM".into(),
                ),
            );
            return Ok(());
        }
        if end_stream {
            self.complete(k, now);
        }
        Ok(())
    }

    /// Stream `k`'s own response ended.
    fn complete(&mut self, k: usize, now: Instant) {
        let s = &mut self.streams[k];
        if s.body_off != usize::MAX {
            // The server answered before taking the whole request body: stop sending it.
            s.body_off = usize::MAX;
            let id = s.id;
            self.rst(id, NO_ERROR);
        }
        let s = &mut self.streams[k];
        if s.pending > 0 {
            // The page is complete only with the resources it promised.
            s.ended = Some(now);
            return;
        }
        self.release(k, now);
    }

    /// Request `k` is complete: its response and every stream it promised ended.
    fn release(&mut self, k: usize, now: Instant) {
        let s = &self.streams[k];
        let outcome = Outcome::Done {
            status: s.status,
            body: s.body + s.push_body,
            uncompressed: s.uncompressed + s.push_uncompressed,
            first_byte: s.first_byte.unwrap_or(now),
            done: now,
            pushed: s.pushed,
        };
        self.finish(k, outcome);
    }
}

#[inline]
fn be32(b: &[u8]) -> u32 {
    u32::from_be_bytes([b[0], b[1], b[2], b[3]])
}

#[inline]
fn frame_head(out: &mut Vec<u8>, len: usize, kind: u8, flags: u8, id: u32) {
    let l = len as u32;
    let idb = id.to_be_bytes();
    out.extend_from_slice(&[
        (l >> 16) as u8,
        (l >> 8) as u8,
        l as u8,
        kind,
        flags,
        idb[0],
        idb[1],
        idb[2],
        idb[3],
    ]);
}

fn strip_padding(flags: u8, payload: &[u8]) -> Result<&[u8], ConnError> {
    if flags & PADDED == 0 {
        return Ok(payload);
    }
    let Some((&pad, rest)) = payload.split_first() else {
        return Err(conn_err(
            FRAME_SIZE_ERROR,
            "PADDED frame without a pad length",
        ));
    };
    if pad as usize > rest.len() {
        return Err(conn_err(PROTOCOL_ERROR, "padding longer than the frame"));
    }
    Ok(&rest[..rest.len() - pad as usize])
}

/// The HTTP/2 side of one connection for the client loop: a [`Conn`] whose finished
/// streams go to the recorder as they end.
pub struct H2Session {
    conn: Conn,
    h2c: bool,
    answered: u64,
    /// No response yet: a protocol error then suggests the server does not speak HTTP/2.
    first: bool,
    used: bool,
}

impl H2Session {
    /// A session for `ctx`'s client on a new connection (`h2c`: cleartext, prior knowledge);
    /// the preface and SETTINGS are queued.
    pub fn new(ctx: &ClientCtx, h2c: bool) -> H2Session {
        let depth = if ctx.no_keepalive { 1 } else { ctx.depth };
        H2Session {
            conn: Conn::with_push(&ctx.target, depth, ctx.push),
            h2c,
            answered: 0,
            first: true,
            used: false,
        }
    }

    /// Records finished streams.
    fn settle(&mut self, ctx: &mut ClientCtx) {
        for ev in self.conn.events.drain(..) {
            match ev.outcome {
                Outcome::Done {
                    status,
                    body,
                    uncompressed,
                    first_byte,
                    done,
                    pushed,
                } => {
                    let mut r = ctx.rec.borrow_mut();
                    r.received(0, 0, body);
                    r.pushed_responses(ev.req.scheduled, pushed);
                    r.received_header_uncompressed(uncompressed);
                    r.response(ev.req.scheduled, ev.req.sent, first_byte, done, status);
                    self.answered += 1;
                    self.first = false;
                }
                Outcome::Refused => {
                    ctx.rec.borrow_mut().request_unsent(ev.req.scheduled);
                    ctx.plan.give_back(ev.req.ticket);
                }
                Outcome::Failed(kind, message) => {
                    // A protocol error before the first response usually means the server
                    // does not speak HTTP/2 at all: say so.
                    let message = if self.first && kind == ErrorKind::Protocol {
                        format!("{message}: {}", hint(self.h2c))
                    } else {
                        message
                    };
                    ctx.rec
                        .borrow_mut()
                        .request_failed(ev.req.scheduled, kind, &message);
                }
            }
        }
    }
}

impl From<ConnError> for Fail {
    fn from(e: ConnError) -> Fail {
        Fail {
            kind: e.kind,
            message: e.message,
            code: u64::from(e.code),
        }
    }
}

impl Session for H2Session {
    #[inline]
    fn can_submit(&self) -> bool {
        self.conn.can_open()
    }

    fn submit(&mut self, ctx: &mut ClientCtx, url: usize, req: Req) {
        self.conn.open(url, req);
        let mut rec = ctx.rec.borrow_mut();
        rec.request_started(req.scheduled, req.sent);
        rec.sent(0, 0, ctx.target.requests[url].h2_header_size);
        self.used = true;
    }

    fn inflight(&self) -> usize {
        self.conn.inflight()
    }

    fn oldest_sent(&self) -> Option<Instant> {
        self.conn.oldest_sent()
    }

    fn answered(&self) -> u64 {
        self.answered
    }

    fn used(&self) -> bool {
        self.used
    }

    fn idle_end(&mut self) -> Option<SessionOutcome> {
        if let Some((_, code)) = self.conn.goaway {
            if code != NO_ERROR {
                let message = format!("h2: the server sent GOAWAY ({})", code_name(code));
                return Some(Err(Fail::new(ErrorKind::Reset, message)));
            }
            return Some(Ok(SessionEnd::Closed {
                answered: self.answered,
            }));
        }
        if self.conn.exhausted() {
            return Some(Ok(SessionEnd::Closed {
                answered: self.answered,
            }));
        }
        None
    }

    fn finish(&mut self, ctx: &mut ClientCtx, result: SessionOutcome) -> SessionEnd {
        // Account what finished before the end, then fail what is left.
        self.settle(ctx);
        let e = match result {
            Ok(end) => return end,
            Err(e) => e,
        };
        let message = if self.first && e.kind == ErrorKind::Protocol {
            format!("{}: {}", e.message, hint(self.h2c))
        } else {
            e.message.clone()
        };
        let had_streams = self.conn.inflight() > 0;
        self.conn.fail_all(e.kind, &e.message);
        self.settle(ctx);
        if !had_streams && e.kind == ErrorKind::Reset && self.answered > 0 {
            // The server closed an idle kept-alive connection: open another.
            return SessionEnd::Closed {
                answered: self.answered,
            };
        }
        SessionEnd::Failed {
            answered: self.answered,
            kind: e.kind,
            message,
        }
    }
}

impl ByteSession for H2Session {
    const READ_BUF: usize = READ_BUF;
    const LABEL: &'static str = "h2: ";

    fn output(&mut self) -> &mut Vec<u8> {
        &mut self.conn.out
    }

    fn written(&mut self, ctx: &ClientCtx) {
        let n = self.conn.out.len() as u64;
        let header = std::mem::take(&mut self.conn.out_header);
        ctx.rec.borrow_mut().sent(n, header, 0);
        self.conn.out.clear();
    }

    fn on_read(
        &mut self,
        ctx: &mut ClientCtx,
        input: &[u8],
        new: usize,
        now: Instant,
    ) -> Result<(usize, Option<SessionEnd>), Fail> {
        let r = self.conn.receive(input, now);
        let header = std::mem::take(&mut self.conn.rx_header);
        ctx.rec.borrow_mut().received(new as u64, header, 0);
        let used = r?;
        self.settle(ctx);
        Ok((used, None))
    }

    fn on_eof(&mut self, _ctx: &mut ClientCtx, _now: Instant) -> SessionOutcome {
        Err(if self.conn.got_settings {
            Fail::new(ErrorKind::Reset, "h2: connection closed by the server")
        } else {
            let message = "h2: connection closed before the server's SETTINGS";
            Fail::new(ErrorKind::Protocol, message)
        })
    }

    fn on_read_error(&mut self, e: std::io::Error) -> SessionOutcome {
        let message = format!("h2: read: {}", io_phrase(&e));
        Err(Fail::new(ErrorKind::of_io(&e), message))
    }

    fn input_too_large(&self) -> Fail {
        // receive() leaves at most one partial frame, which fits: not reached.
        Fail::new(ErrorKind::Protocol, "h2: frame larger than the read buffer")
    }

    fn goodbye(&mut self, result: &SessionOutcome) {
        match result {
            // Tell the server we are done.
            Ok(_) => self.conn.goaway_frame(NO_ERROR),
            Err(e) if e.code != u64::from(NO_ERROR) || e.kind == ErrorKind::Protocol => {
                self.conn.goaway_frame(e.code as u32)
            }
            Err(_) => {}
        }
    }
}

fn hint(h2c: bool) -> String {
    format!(
        "does the server speak {}? try --proto h1 or auto",
        if h2c {
            "h2c (HTTP/2 over cleartext, prior knowledge)"
        } else {
            "HTTP/2"
        }
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hpack::{Decoder, Encoder};
    use crate::LoadConfig;
    use std::time::Duration;

    fn target(body: Option<usize>) -> Target {
        let cfg = LoadConfig {
            urls: vec!["http://127.0.0.1:8080/bytes/100".into()],
            body: body.map(|n| vec![b'x'; n]),
            ..Default::default()
        };
        Target::from_config(&cfg).unwrap()
    }

    fn req() -> Req {
        let now = Instant::now();
        Req {
            scheduled: now,
            sent: now,
            ticket: 0,
        }
    }

    fn fr(kind: u8, flags: u8, id: u32, payload: &[u8]) -> Vec<u8> {
        let mut v = Vec::new();
        frame_head(&mut v, payload.len(), kind, flags, id);
        v.extend_from_slice(payload);
        v
    }

    fn settings(pairs: &[(u16, u32)]) -> Vec<u8> {
        let mut p = Vec::new();
        for (k, v) in pairs {
            p.extend_from_slice(&k.to_be_bytes());
            p.extend_from_slice(&v.to_be_bytes());
        }
        fr(SETTINGS, 0, 0, &p)
    }

    /// Frames in `out` after the preface: (kind, flags, stream, payload).
    fn frames(mut out: &[u8]) -> Vec<(u8, u8, u32, Vec<u8>)> {
        if out.starts_with(PREFACE) {
            out = &out[PREFACE.len()..];
        }
        let mut v = Vec::new();
        while out.len() >= 9 {
            let len = (out[0] as usize) << 16 | (out[1] as usize) << 8 | out[2] as usize;
            let id = be32(&out[5..9]);
            v.push((out[3], out[4], id, out[9..9 + len].to_vec()));
            out = &out[9 + len..];
        }
        assert!(out.is_empty());
        v
    }

    fn block(enc: &mut Encoder, fields: &[(&str, &str)]) -> Vec<u8> {
        let mut b = Vec::new();
        enc.encode(
            fields.iter().map(|(n, v)| (n.as_bytes(), v.as_bytes())),
            &mut b,
        );
        b
    }

    fn done(ev: &Event) -> (u16, u64, u64) {
        match &ev.outcome {
            Outcome::Done {
                status,
                body,
                uncompressed,
                ..
            } => (*status, *body, *uncompressed),
            o => panic!("not done: {o:?}"),
        }
    }

    /// Push off by default: SETTINGS_ENABLE_PUSH=0, and a PUSH_PROMISE is a connection
    /// error of type PROTOCOL_ERROR (RFC 9113 §8.4).
    #[test]
    fn push_promise_with_push_disabled_is_protocol_error() {
        let t = target(None);
        let mut c = Conn::new(&t, 10);
        let f = frames(&c.out);
        assert_eq!(f[0].0, SETTINGS);
        assert_eq!(&f[0].3[..6], &[0, 2, 0, 0, 0, 0]);
        c.receive(&settings(&[]), Instant::now()).unwrap();
        c.open(0, req());
        let mut enc = Encoder::new();
        let mut p = 2u32.to_be_bytes().to_vec();
        p.extend(block(&mut enc, &[(":method", "GET"), (":path", "/a")]));
        let e = c
            .receive(&fr(PUSH_PROMISE, END_HEADERS, 1, &p), Instant::now())
            .unwrap_err();
        assert_eq!(e.code, PROTOCOL_ERROR);
        assert!(e.message.contains("push disabled"), "{}", e.message);
    }

    /// With push on, promised streams are tracked (their header blocks decoded, CONTINUATION
    /// included, so the HPACK table stays in sync) and the request completes only when its
    /// response and every stream it promised have ended; pushed bytes are counted in it.
    #[test]
    fn push_promise_tracked_and_request_waits_for_pushed_streams() {
        let t = target(None);
        let mut c = Conn::with_push(&t, 10, true);
        let f = frames(&c.out);
        assert_eq!(&f[0].3[..6], &[0, 2, 0, 0, 0, 1]);
        c.receive(&settings(&[]), Instant::now()).unwrap();
        let id = c.open(0, req());
        assert_eq!(id, 1);
        c.out.clear();
        let mut enc = Encoder::new();
        let now = Instant::now();
        // Promise 2, its block split over PUSH_PROMISE + CONTINUATION; the new literal
        // "x-res: a" enters the dynamic table.
        let b = block(
            &mut enc,
            &[
                (":method", "GET"),
                (":scheme", "http"),
                (":path", "/a"),
                ("x-res", "a"),
            ],
        );
        let mut p = 2u32.to_be_bytes().to_vec();
        p.extend_from_slice(&b[..3]);
        let mut wire = fr(PUSH_PROMISE, 0, 1, &p);
        wire.extend(fr(CONTINUATION, END_HEADERS, 1, &b[3..]));
        // Promise 4 (the server resets it later).
        let mut p = 4u32.to_be_bytes().to_vec();
        p.extend(block(&mut enc, &[(":method", "GET"), (":path", "/b")]));
        wire.extend(fr(PUSH_PROMISE, END_HEADERS, 1, &p));
        // The page: headers and 10 body bytes, ended.
        wire.extend(fr(
            HEADERS,
            END_HEADERS,
            1,
            &block(&mut enc, &[(":status", "200")]),
        ));
        wire.extend(fr(DATA, END_STREAM, 1, &[b'p'; 10]));
        assert_eq!(c.receive(&wire, now).unwrap(), wire.len());
        assert!(c.events.is_empty(), "completed before its pushed streams");
        assert_eq!(c.inflight(), 1);
        // Pushed response on 2: its head refers to the entry the promise added (index 62):
        // decoding fails if the PUSH_PROMISE block was not decoded.
        let head = block(&mut enc, &[(":status", "200"), ("x-res", "a")]);
        assert!(
            head.iter().any(|&x| x >= 0xbe),
            "expected a dynamic-table reference"
        );
        let mut wire = fr(HEADERS, END_HEADERS, 2, &head);
        wire.extend(fr(DATA, 0, 2, &[b'a'; 15]));
        c.receive(&wire, now).unwrap();
        assert!(c.events.is_empty());
        // Pushed stream 4 reset; stream 2 still open.
        c.receive(&fr(RST_STREAM, 0, 4, &CANCEL.to_be_bytes()), now)
            .unwrap();
        assert!(c.events.is_empty());
        let later = now + Duration::from_millis(5);
        c.receive(&fr(DATA, END_STREAM, 2, &[b'a'; 5]), later)
            .unwrap();
        assert_eq!(c.events.len(), 1);
        assert_eq!(c.inflight(), 0);
        match &c.events[0].outcome {
            Outcome::Done {
                status,
                body,
                pushed,
                first_byte,
                done,
                ..
            } => {
                assert_eq!((*status, *body, *pushed), (200, 30, 1));
                assert_eq!(*done, later);
                assert_eq!(*first_byte, now);
            }
            o => panic!("not done: {o:?}"),
        }
        // Frames on the finished pushed streams are ignored; ones nobody promised are not.
        c.receive(&fr(DATA, END_STREAM, 2, b"x"), later).unwrap();
        let e = c.receive(&fr(DATA, 0, 6, b"x"), later).unwrap_err();
        assert_eq!(e.code, PROTOCOL_ERROR);
    }

    /// Bad promises: on an idle (unopened) stream, or promising an odd stream id.
    #[test]
    fn bad_push_promises_are_protocol_errors() {
        let t = target(None);
        for (assoc, promised) in [(3u32, 2u32), (1, 3)] {
            let mut c = Conn::with_push(&t, 10, true);
            c.receive(&settings(&[]), Instant::now()).unwrap();
            c.open(0, req());
            let mut enc = Encoder::new();
            let mut p = promised.to_be_bytes().to_vec();
            p.extend(block(&mut enc, &[(":method", "GET"), (":path", "/a")]));
            let e = c
                .receive(&fr(PUSH_PROMISE, END_HEADERS, assoc, &p), Instant::now())
                .unwrap_err();
            assert_eq!(e.code, PROTOCOL_ERROR, "{assoc} {promised}");
        }
    }

    #[test]
    fn preface_settings_and_indexed_requests() {
        let t = target(None);
        let mut c = Conn::new(&t, 10);
        assert!(c.out.starts_with(PREFACE));
        let f = frames(&c.out);
        assert_eq!(f[0].0, SETTINGS);
        assert!(
            f[0].3.chunks(6).any(|s| s == [0, 2, 0, 0, 0, 0]),
            "ENABLE_PUSH=0"
        );
        assert_eq!((f[1].0, be32(&f[1].3)), (WINDOW_UPDATE, WINDOW - 65_535));
        c.out.clear();
        for _ in 0..3 {
            c.open(0, req());
        }
        let f = frames(&c.out);
        assert_eq!(f.len(), 3);
        let mut d = Decoder::new(4096);
        for (k, (kind, flags, id, p)) in f.iter().enumerate() {
            assert_eq!(
                (*kind, *flags, *id),
                (HEADERS, END_STREAM | END_HEADERS, 1 + 2 * k as u32)
            );
            let info = d.decode(p).unwrap();
            assert_eq!(info.uncompressed, t.requests[0].h2_header_size);
            if k > 0 {
                assert!(
                    p.len() <= 6,
                    "later requests are indexed: {} bytes",
                    p.len()
                );
            }
        }
        assert_eq!(
            c.out_header,
            f.iter().map(|x| x.3.len() as u64).sum::<u64>()
        );
    }

    #[test]
    fn parser_gives_the_same_result_for_every_split() {
        let t = target(None);
        let mut enc = Encoder::new();
        let mut stream = settings(&[(3, 100), (5, 20_000)]);
        stream.extend(fr(PING, 0, 0, b"12345678"));
        // Stream 1: PADDED|PRIORITY HEADERS split over a CONTINUATION, padded DATA, empty END_STREAM DATA.
        let b1 = block(
            &mut enc,
            &[
                (":status", "200"),
                ("content-length", "10"),
                ("server", "x"),
            ],
        );
        let mut h = vec![3u8, 0, 0, 0, 0, 16];
        h.extend_from_slice(&b1[..4]);
        h.extend_from_slice(&[0, 0, 0]);
        stream.extend(fr(HEADERS, PADDED | PRIORITY_FLAG, 1, &h));
        stream.extend(fr(CONTINUATION, END_HEADERS, 1, &b1[4..]));
        let mut d = vec![5u8];
        d.extend_from_slice(b"0123456789");
        d.extend_from_slice(&[0; 5]);
        stream.extend(fr(DATA, PADDED, 1, &d));
        stream.extend(fr(0xfa, 0, 0, b"unknown"));
        stream.extend(fr(DATA, END_STREAM, 1, b""));
        // Stream 3: 204 in one HEADERS with END_STREAM, partly indexed now.
        let b3 = block(&mut enc, &[(":status", "204"), ("server", "x")]);
        stream.extend(fr(HEADERS, END_STREAM | END_HEADERS, 3, &b3));
        stream.extend(fr(WINDOW_UPDATE, 0, 0, &[0, 0, 1, 0]));
        let header_payload = (h.len() + b1.len() - 4 + b3.len()) as u64;
        for chunk in 1..=stream.len() {
            let mut c = Conn::new(&t, 10);
            c.open(0, req());
            c.open(0, req());
            c.out.clear();
            let mut buf = Vec::new();
            let mut rx_header = 0;
            for part in stream.chunks(chunk) {
                buf.extend_from_slice(part);
                let used = c.receive(&buf, Instant::now()).unwrap();
                buf.drain(..used);
                rx_header += std::mem::take(&mut c.rx_header);
            }
            assert!(buf.is_empty(), "chunk {chunk}");
            assert_eq!(rx_header, header_payload, "chunk {chunk}");
            assert_eq!(c.events.len(), 2, "chunk {chunk}");
            assert_eq!(done(&c.events[0]), (200, 10, 7 + 3 + 14 + 2 + 6 + 1));
            assert_eq!(done(&c.events[1]), (204, 0, 7 + 3 + 6 + 1));
            assert_eq!(c.inflight(), 0);
            let f = frames(&c.out);
            assert!(f.contains(&(SETTINGS, ACK, 0, vec![])), "chunk {chunk}");
            assert!(
                f.contains(&(PING, ACK, 0, b"12345678".to_vec())),
                "chunk {chunk}"
            );
            assert_eq!(c.peer_max_frame, 20_000);
        }
    }

    fn data_bytes(out: &[u8]) -> (usize, bool, usize) {
        let f = frames(out);
        let mut total = 0;
        let mut end = false;
        let mut biggest = 0;
        for (kind, flags, _, p) in f {
            if kind == DATA {
                total += p.len();
                biggest = biggest.max(p.len());
                end |= flags & END_STREAM != 0;
            }
        }
        (total, end, biggest)
    }

    #[test]
    fn request_body_follows_the_servers_windows() {
        let t = target(Some(100_000));
        let mut c = Conn::new(&t, 10);
        c.receive(&settings(&[]), Instant::now()).unwrap();
        c.out.clear();
        c.open(0, req());
        let f = frames(&c.out);
        assert_eq!((f[0].0, f[0].1), (HEADERS, END_HEADERS), "body follows");
        assert_eq!(data_bytes(&c.out), (65_535, false, 16_384));
        c.out.clear();
        // Connection window opens, the stream's does not: nothing.
        c.receive(
            &fr(WINDOW_UPDATE, 0, 0, &50_000u32.to_be_bytes()),
            Instant::now(),
        )
        .unwrap();
        assert_eq!(data_bytes(&c.out).0, 0);
        // The stream's opens by 20000: that much.
        c.receive(
            &fr(WINDOW_UPDATE, 0, 1, &20_000u32.to_be_bytes()),
            Instant::now(),
        )
        .unwrap();
        assert_eq!(data_bytes(&c.out), (20_000, false, 16_384));
        c.out.clear();
        // A larger INITIAL_WINDOW_SIZE raises open streams' windows: the rest goes.
        c.receive(&settings(&[(4, 65_535 + 30_000)]), Instant::now())
            .unwrap();
        assert_eq!(data_bytes(&c.out), (100_000 - 85_535, true, 14_465));
        // Larger frames once the server allows them.
        let mut c = Conn::new(&t, 10);
        c.receive(&settings(&[(5, 40_000), (4, 1 << 20)]), Instant::now())
            .unwrap();
        c.receive(
            &fr(WINDOW_UPDATE, 0, 0, &(1u32 << 20).to_be_bytes()),
            Instant::now(),
        )
        .unwrap();
        c.out.clear();
        c.open(0, req());
        assert_eq!(data_bytes(&c.out), (100_000, true, 40_000));
        // Window overflow is a connection error.
        let e = c
            .receive(
                &fr(WINDOW_UPDATE, 0, 0, &0x7fff_ffffu32.to_be_bytes()),
                Instant::now(),
            )
            .unwrap_err();
        assert_eq!(e.code, FLOW_CONTROL_ERROR);
    }

    #[test]
    fn received_data_is_acknowledged_in_batches() {
        let t = target(None);
        let mut c = Conn::new(&t, 10);
        let mut enc = Encoder::new();
        c.receive(&settings(&[]), Instant::now()).unwrap();
        c.open(0, req());
        let b = block(&mut enc, &[(":status", "200")]);
        c.receive(&fr(HEADERS, END_HEADERS, 1, &b), Instant::now())
            .unwrap();
        c.out.clear();
        let data = fr(DATA, 0, 1, &vec![0u8; 16_384]);
        let mut sent = 0u64;
        let mut updates = Vec::new();
        // Just past half the window.
        let n = (WINDOW as usize / 2) / 16_384 + 1;
        for k in 0..n {
            c.receive(&data, Instant::now()).unwrap();
            sent += 16_384;
            for (kind, _, id, p) in frames(&c.out) {
                if kind == WINDOW_UPDATE {
                    updates.push((k, id, be32(&p)));
                }
            }
            c.out.clear();
        }
        // One update per direction, at the same frame, returning exactly what was consumed.
        assert_eq!(updates.len(), 2, "{updates:?}");
        let total: u64 = sent;
        for (k, _, inc) in &updates {
            assert_eq!(*k, n - 1);
            assert_eq!(u64::from(*inc), total);
        }
        let ids: Vec<u32> = updates.iter().map(|u| u.1).collect();
        assert!(ids.contains(&0) && ids.contains(&1));
        assert_eq!(c.inflight(), 1);
    }

    #[test]
    fn rst_stream_and_goaway() {
        let t = target(None);
        let mut c = Conn::new(&t, 10);
        c.receive(&settings(&[]), Instant::now()).unwrap();
        for _ in 0..4 {
            c.open(0, req());
        }
        c.receive(&fr(RST_STREAM, 0, 1, &8u32.to_be_bytes()), Instant::now())
            .unwrap();
        c.receive(
            &fr(RST_STREAM, 0, 3, &REFUSED_STREAM.to_be_bytes()),
            Instant::now(),
        )
        .unwrap();
        assert!(
            matches!(&c.events[0].outcome, Outcome::Failed(ErrorKind::Reset, m) if m.contains("CANCEL"))
        );
        assert_eq!(c.events[1].outcome, Outcome::Refused);
        // A late RST for a finished stream is ignored; one for an idle stream is an error.
        c.receive(&fr(RST_STREAM, 0, 1, &8u32.to_be_bytes()), Instant::now())
            .unwrap();
        assert_eq!(c.events.len(), 2);
        assert!(c.can_open());
        // GOAWAY with last id 5: stream 7 is refused, 5 goes on, nothing new opens.
        let mut g = 5u32.to_be_bytes().to_vec();
        g.extend_from_slice(&NO_ERROR.to_be_bytes());
        c.receive(&fr(GOAWAY, 0, 0, &g), Instant::now()).unwrap();
        assert_eq!(c.events[2].outcome, Outcome::Refused);
        assert_eq!(c.inflight(), 1);
        assert!(!c.can_open() && c.exhausted());
        let b = block(&mut Encoder::new(), &[(":status", "404")]);
        c.receive(
            &fr(HEADERS, END_HEADERS | END_STREAM, 5, &b),
            Instant::now(),
        )
        .unwrap();
        assert_eq!(done(&c.events[3]).0, 404);
        assert_eq!(c.goaway, Some((5, NO_ERROR)));
        let e = c
            .receive(&fr(RST_STREAM, 0, 99, &8u32.to_be_bytes()), Instant::now())
            .unwrap_err();
        assert_eq!(e.code, PROTOCOL_ERROR);
    }

    #[test]
    fn protocol_errors_are_connection_errors_not_panics() {
        let t = target(None);
        let cases: Vec<(Vec<u8>, u32)> = vec![
            (fr(PING, 0, 0, b"1234567"), FRAME_SIZE_ERROR),
            (fr(SETTINGS, 0, 0, b"12345"), FRAME_SIZE_ERROR),
            (fr(SETTINGS, ACK, 0, b"123456"), FRAME_SIZE_ERROR),
            (fr(WINDOW_UPDATE, 0, 0, b"123"), FRAME_SIZE_ERROR),
            (fr(RST_STREAM, 0, 1, b"123"), FRAME_SIZE_ERROR),
            (fr(PRIORITY, 0, 1, b"1234"), FRAME_SIZE_ERROR),
            (fr(GOAWAY, 0, 0, b"1234"), FRAME_SIZE_ERROR),
            (fr(DATA, 0, 0, b"x"), PROTOCOL_ERROR),
            (fr(DATA, 0, 9, b"x"), PROTOCOL_ERROR),
            (fr(DATA, PADDED, 1, &[9, 1, 2]), PROTOCOL_ERROR),
            (fr(DATA, PADDED, 1, &[]), FRAME_SIZE_ERROR),
            (fr(HEADERS, END_HEADERS, 2, &[0x88]), PROTOCOL_ERROR),
            (fr(HEADERS, END_HEADERS, 1, &[0x80]), COMPRESSION_ERROR),
            (fr(CONTINUATION, END_HEADERS, 1, &[0x88]), PROTOCOL_ERROR),
            (
                [fr(HEADERS, 0, 1, &[0x88]), fr(PING, 0, 0, b"12345678")].concat(),
                PROTOCOL_ERROR,
            ),
            (
                fr(PUSH_PROMISE, END_HEADERS, 1, &[0, 0, 0, 2, 0x88]),
                PROTOCOL_ERROR,
            ),
            (fr(PING, 0, 1, b"12345678"), PROTOCOL_ERROR),
            (fr(SETTINGS, 0, 0, &[0, 5, 0, 0, 0, 1]), PROTOCOL_ERROR),
            (
                fr(SETTINGS, 0, 0, &[0, 4, 0x80, 0, 0, 0]),
                FLOW_CONTROL_ERROR,
            ),
            (fr(WINDOW_UPDATE, 0, 0, &[0, 0, 0, 0]), PROTOCOL_ERROR),
            (
                fr(DATA, 0, 1, &vec![0; OUR_MAX_FRAME + 1]),
                FRAME_SIZE_ERROR,
            ),
        ];
        for (k, (bytes, code)) in cases.iter().enumerate() {
            let mut c = Conn::new(&t, 10);
            c.receive(&settings(&[]), Instant::now()).unwrap();
            c.open(0, req());
            let e = c.receive(bytes, Instant::now()).unwrap_err();
            assert_eq!(e.code, *code, "case {k}: {}", e.message);
            assert_eq!(e.kind, ErrorKind::Protocol);
        }
        // The server's preface must be SETTINGS (an HTTP/1.1 answer is not).
        let mut c = Conn::new(&t, 10);
        let e = c
            .receive(b"HTTP/1.1 400 Bad Request\r\n", Instant::now())
            .unwrap_err();
        assert!(e.message.contains("not SETTINGS"));
        // Stream errors end only their stream: DATA before HEADERS, no :status.
        let mut c = Conn::new(&t, 10);
        c.receive(&settings(&[]), Instant::now()).unwrap();
        c.open(0, req());
        c.open(0, req());
        c.receive(&fr(DATA, 0, 1, b"x"), Instant::now()).unwrap();
        let b = block(&mut Encoder::new(), &[("server", "x")]);
        c.receive(&fr(HEADERS, END_HEADERS, 3, &b), Instant::now())
            .unwrap();
        assert_eq!(c.events.len(), 2);
        assert!(c
            .events
            .iter()
            .all(|e| matches!(e.outcome, Outcome::Failed(ErrorKind::Protocol, _))));
        let rst = frames(&c.out)
            .into_iter()
            .filter(|f| f.0 == RST_STREAM)
            .count();
        assert_eq!(rst, 2);
        // Random bytes after the preface: errors or progress, never a panic.
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        for _ in 0..3000 {
            let mut c = Conn::new(&t, 10);
            c.receive(&settings(&[]), Instant::now()).unwrap();
            c.open(0, req());
            let mut junk = Vec::new();
            let n = (x % 64) as usize + 9;
            for _ in 0..n {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                junk.push(x as u8);
            }
            // Keep lengths small and types in range so the frames get parsed.
            junk[0] = 0;
            junk[1] = 0;
            junk[2] = (n - 9) as u8;
            junk[3] %= 10;
            let _ = c.receive(&junk, Instant::now());
        }
    }
}
