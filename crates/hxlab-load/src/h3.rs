//! HTTP/3 driver: an own HTTP/3 client (RFC 9114, QPACK of RFC 9204 with the static table
//! only) directly on quinn streams, up to `-m` requests in flight per connection.
//!
//! Why not the `h3` crate: per request it Huffman-encoded our headers, decoded the response
//! bit by bit, allocated frames and futures; this client sends each URL's request as one
//! precomputed buffer ([`crate::target::RequestTemplate::h3_request`]: a HEADERS frame and,
//! with `-d`, a DATA frame) and parses responses in place as quinn hands over chunks.
//!
//! Pieces: [`ResponseParser`] (sans-IO: frames of one request stream, QPACK decode with
//! [`crate::qpack::Decoder`], interim 1xx heads, DATA counting, trailers) and
//! [`ControlParser`] (the server's control stream: SETTINGS first, GOAWAY) are tested on
//! their own; [`session`] drives them. It opens our control stream (SETTINGS: dynamic table
//! capacity 0, no blocked streams, MAX_FIELD_SECTION_SIZE), reads the server's
//! unidirectional streams in a helper task (control parsed, QPACK encoder/decoder streams
//! read and discarded, anything else stopped), and runs the requests of one connection in
//! one future: each request slot has its own reusable waker, so a wake-up polls only the
//! streams that have something to say, and nothing is allocated per request on our side.
//!
//! Counting (docs/run-result.md): wire bytes are request-stream bytes (frames with their
//! heads; control and QPACK streams are not counted), header bytes are HEADERS payloads (the
//! QPACK wire size, trailers included), body bytes are DATA payloads counted when the
//! response completes; the uncompressed size is h2load's (name + value of every field of
//! the final response head, `:status` included); ttfb is taken when the final HEADERS is
//! decoded, latency at the stream's end. A server GOAWAY stops new requests; those at or
//! above its stream id are given back to the plan (sent again elsewhere), those below
//! finish. Frame-level violations are connection errors (the connection closes with the
//! HTTP/3 error code), message-level ones (no `:status`, a head too large) stream errors;
//! both count as protocol errors.

use crate::net::ConnectError;
use crate::qpack;
use crate::recorder::ErrorKind;
use crate::session::{Fail, Outcome, Req, Session, Transport};
use crate::worker::{ClientCtx, SessionEnd};
use bytes::Bytes;
use futures::task::AtomicWaker;
use std::cell::RefCell;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::{pin, Pin};
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::time::{Duration, Instant};

const DATA: u64 = 0x00;
const HEADERS: u64 = 0x01;
const CANCEL_PUSH: u64 = 0x03;
const SETTINGS: u64 = 0x04;
const PUSH_PROMISE: u64 = 0x05;
const GOAWAY: u64 = 0x07;
const MAX_PUSH_ID: u64 = 0x0d;

/// HTTP/3 error codes (RFC 9114 §8.1, RFC 9204 §6).
pub const H3_NO_ERROR: u64 = 0x100;
const H3_STREAM_CREATION_ERROR: u64 = 0x103;
const H3_CLOSED_CRITICAL_STREAM: u64 = 0x104;
const H3_FRAME_UNEXPECTED: u64 = 0x105;
const H3_FRAME_ERROR: u64 = 0x106;
const H3_EXCESSIVE_LOAD: u64 = 0x107;
const H3_ID_ERROR: u64 = 0x108;
const H3_SETTINGS_ERROR: u64 = 0x109;
const H3_MISSING_SETTINGS: u64 = 0x10a;
const H3_REQUEST_CANCELLED: u64 = 0x10c;
const H3_MESSAGE_ERROR: u64 = 0x10e;
const QPACK_DECOMPRESSION_FAILED: u64 = 0x200;

/// Largest HEADERS frame payload buffered (and largest field section accepted, RFC 9114
/// §4.2.2 size): what we advertise as SETTINGS_MAX_FIELD_SECTION_SIZE.
const MAX_FIELD_SECTION: u64 = crate::h2::MAX_HEADER_LIST as u64;
/// Largest control-stream frame (SETTINGS, GOAWAY, ...) buffered.
const MAX_CONTROL_FRAME: u64 = 16 * 1024;

/// Name of an HTTP/3 error code, for messages.
pub fn code_name(code: u64) -> &'static str {
    match code {
        0x100 => "H3_NO_ERROR",
        0x101 => "H3_GENERAL_PROTOCOL_ERROR",
        0x102 => "H3_INTERNAL_ERROR",
        0x103 => "H3_STREAM_CREATION_ERROR",
        0x104 => "H3_CLOSED_CRITICAL_STREAM",
        0x105 => "H3_FRAME_UNEXPECTED",
        0x106 => "H3_FRAME_ERROR",
        0x107 => "H3_EXCESSIVE_LOAD",
        0x108 => "H3_ID_ERROR",
        0x109 => "H3_SETTINGS_ERROR",
        0x10a => "H3_MISSING_SETTINGS",
        0x10b => "H3_REQUEST_REJECTED",
        0x10c => "H3_REQUEST_CANCELLED",
        0x10d => "H3_REQUEST_INCOMPLETE",
        0x10e => "H3_MESSAGE_ERROR",
        0x10f => "H3_CONNECT_ERROR",
        0x110 => "H3_VERSION_FALLBACK",
        0x200 => "QPACK_DECOMPRESSION_FAILED",
        0x201 => "QPACK_ENCODER_STREAM_ERROR",
        0x202 => "QPACK_DECODER_STREAM_ERROR",
        _ => "unknown error code",
    }
}

/// Reads a QUIC variable-length integer (RFC 9000 §16) from the start of `buf`: the value
/// and its length, or None when `buf` ends first.
#[inline]
pub fn varint(buf: &[u8]) -> Option<(u64, usize)> {
    let first = *buf.first()?;
    let len = 1usize << (first >> 6);
    if buf.len() < len {
        return None;
    }
    let mut v = u64::from(first & 0x3f);
    for b in &buf[1..len] {
        v = v << 8 | u64::from(*b);
    }
    Some((v, len))
}

/// Appends a QUIC variable-length integer (`v` below 2⁶²).
pub fn put_varint(out: &mut Vec<u8>, v: u64) {
    if v < 1 << 6 {
        out.push(v as u8);
    } else if v < 1 << 14 {
        out.extend_from_slice(&(v as u16 | 0x4000).to_be_bytes());
    } else if v < 1 << 30 {
        out.extend_from_slice(&(v as u32 | 0x8000_0000).to_be_bytes());
    } else {
        out.extend_from_slice(&(v | 0xc000_0000_0000_0000).to_be_bytes());
    }
}

/// An HTTP/3 error found while parsing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum H3Error {
    /// The connection must close with `code`.
    Connection {
        /// HTTP/3 error code.
        code: u64,
        /// One line.
        message: String,
    },
    /// Only this request stream fails (we stop and reset it with `code`).
    Stream {
        /// HTTP/3 error code.
        code: u64,
        /// One line.
        message: String,
    },
}

fn conn_error(code: u64, what: &str) -> H3Error {
    H3Error::Connection {
        code,
        message: format!("h3: {what} ({})", code_name(code)),
    }
}

fn stream_error(code: u64, what: &str) -> H3Error {
    H3Error::Stream {
        code,
        message: format!("h3: {what} ({})", code_name(code)),
    }
}

/// Collects a frame head (type and length varints, at most 16 bytes) across chunks.
#[derive(Debug, Default, Clone)]
struct HeadReader {
    buf: [u8; 16],
    have: usize,
}

fn parse_head(buf: &[u8]) -> Option<(u64, u64, usize)> {
    let (t, a) = varint(buf)?;
    let (l, b) = varint(&buf[a..])?;
    Some((t, l, a + b))
}

impl HeadReader {
    /// Takes bytes from `input` towards a frame head: the head once complete (type,
    /// length), and how many bytes of `input` were used.
    #[inline]
    fn feed(&mut self, input: &[u8]) -> (Option<(u64, u64)>, usize) {
        if self.have == 0 {
            if let Some((t, l, used)) = parse_head(input) {
                return (Some((t, l)), used);
            }
            // Incomplete, so shorter than 16 bytes.
            self.buf[..input.len()].copy_from_slice(input);
            self.have = input.len();
            return (None, input.len());
        }
        let n = (16 - self.have).min(input.len());
        self.buf[self.have..self.have + n].copy_from_slice(&input[..n]);
        let all = self.have + n;
        match parse_head(&self.buf[..all]) {
            Some((t, l, used)) => {
                let from_input = used - self.have;
                self.have = 0;
                (Some((t, l)), from_input)
            }
            None => {
                self.have = all;
                (None, n)
            }
        }
    }
}

/// Frame types of HTTP/2 that HTTP/3 reserves (RFC 9114 §7.2.8), and HTTP/3 control frames:
/// both are unexpected on a request stream.
fn unexpected_on_request(kind: u64) -> Option<&'static str> {
    match kind {
        CANCEL_PUSH => Some("CANCEL_PUSH"),
        SETTINGS => Some("SETTINGS"),
        GOAWAY => Some("GOAWAY"),
        MAX_PUSH_ID => Some("MAX_PUSH_ID"),
        0x02 | 0x06 | 0x08 | 0x09 => Some("an HTTP/2 frame type"),
        _ => None,
    }
}

/// The response side of one request stream, without IO: feed it the stream's bytes as they
/// come, then [`ResponseParser::finish`] at the end of the stream.
#[derive(Debug, Default)]
pub struct ResponseParser {
    head: HeadReader,
    kind: u64,
    left: u64,
    in_frame: bool,
    /// A HEADERS payload split across chunks.
    block: Vec<u8>,
    final_seen: bool,
    trailers_seen: bool,
    /// Final `:status`.
    pub status: u16,
    /// Decoded size of the final response head.
    pub uncompressed: u64,
    /// DATA payload bytes.
    pub body: u64,
    /// HEADERS payload bytes seen since the driver last took them.
    pub header_bytes: u64,
    /// When the final HEADERS was decoded.
    pub first_byte: Option<Instant>,
}

impl ResponseParser {
    /// Ready for the next request (keeps the buffer).
    pub fn reset(&mut self) {
        let block = std::mem::take(&mut self.block);
        *self = ResponseParser {
            block,
            ..Default::default()
        };
        self.block.clear();
    }

    /// True once the final (non-1xx) response head arrived.
    pub fn has_response(&self) -> bool {
        self.final_seen
    }

    /// Parses the next bytes of the stream.
    pub fn feed(
        &mut self,
        dec: &mut qpack::Decoder,
        mut buf: &[u8],
        now: Instant,
    ) -> Result<(), H3Error> {
        while !buf.is_empty() {
            if !self.in_frame {
                let (head, used) = self.head.feed(buf);
                buf = &buf[used..];
                let Some((kind, len)) = head else { continue };
                self.start_frame(kind, len)?;
                if len == 0 {
                    self.in_frame = false;
                    if kind == HEADERS {
                        self.headers_done(dec, &[], now)?;
                    }
                }
                continue;
            }
            let n = (buf.len() as u64).min(self.left) as usize;
            let (part, rest) = buf.split_at(n);
            buf = rest;
            self.left -= n as u64;
            match self.kind {
                DATA => self.body += n as u64,
                HEADERS => {
                    self.header_bytes += n as u64;
                    if self.left == 0 && self.block.is_empty() {
                        // The whole payload is in this chunk: decode in place.
                        self.headers_done(dec, part, now)?;
                    } else {
                        self.block.extend_from_slice(part);
                        if self.left == 0 {
                            let block = std::mem::take(&mut self.block);
                            let r = self.headers_done(dec, &block, now);
                            self.block = block;
                            self.block.clear();
                            r?;
                        }
                    }
                }
                _ => {}
            }
            if self.left == 0 {
                self.in_frame = false;
            }
        }
        Ok(())
    }

    fn start_frame(&mut self, kind: u64, len: u64) -> Result<(), H3Error> {
        match kind {
            DATA => {
                if !self.final_seen {
                    return Err(conn_error(
                        H3_FRAME_UNEXPECTED,
                        "DATA before the response HEADERS",
                    ));
                }
                if self.trailers_seen {
                    return Err(conn_error(H3_FRAME_UNEXPECTED, "DATA after trailers"));
                }
            }
            HEADERS => {
                if self.trailers_seen {
                    return Err(conn_error(H3_FRAME_UNEXPECTED, "HEADERS after trailers"));
                }
                if len > MAX_FIELD_SECTION {
                    return Err(stream_error(
                        H3_EXCESSIVE_LOAD,
                        "response HEADERS frame larger than we accept",
                    ));
                }
            }
            PUSH_PROMISE => {
                return Err(conn_error(
                    H3_ID_ERROR,
                    "PUSH_PROMISE, but we allowed no push",
                ))
            }
            k => {
                if let Some(name) = unexpected_on_request(k) {
                    return Err(conn_error(
                        H3_FRAME_UNEXPECTED,
                        &format!("{name} on a request stream"),
                    ));
                }
                // Unknown and reserved types are skipped (RFC 9114 §9).
            }
        }
        self.kind = kind;
        self.left = len;
        self.in_frame = true;
        Ok(())
    }

    fn headers_done(
        &mut self,
        dec: &mut qpack::Decoder,
        block: &[u8],
        now: Instant,
    ) -> Result<(), H3Error> {
        let f = dec
            .decode(block, MAX_FIELD_SECTION)
            .map_err(|e| conn_error(QPACK_DECOMPRESSION_FAILED, &e.to_string()))?;
        if self.final_seen {
            self.trailers_seen = true;
            return Ok(());
        }
        let status = match f.status {
            Some(s) if (100..1000).contains(&s) => s,
            _ => {
                return Err(stream_error(
                    H3_MESSAGE_ERROR,
                    "response without a valid :status",
                ))
            }
        };
        if status < 200 {
            // Informational: the final response follows.
            return Ok(());
        }
        self.final_seen = true;
        self.status = status;
        self.uncompressed = f.uncompressed;
        self.first_byte = Some(now);
        Ok(())
    }

    /// The stream ended: the response must be complete.
    pub fn finish(&self) -> Result<(), H3Error> {
        if self.in_frame || self.head.have > 0 {
            return Err(conn_error(
                H3_FRAME_ERROR,
                "request stream ended inside a frame",
            ));
        }
        if !self.final_seen {
            return Err(stream_error(
                H3_MESSAGE_ERROR,
                "request stream ended without a response",
            ));
        }
        Ok(())
    }
}

/// The server's control stream after its type byte, without IO.
#[derive(Debug, Default)]
pub struct ControlParser {
    head: HeadReader,
    kind: u64,
    left: u64,
    in_frame: bool,
    buf: Vec<u8>,
    /// The server's SETTINGS arrived.
    pub settings: bool,
    /// The lowest GOAWAY stream id received.
    pub goaway: Option<u64>,
}

impl ControlParser {
    /// Parses the next bytes of the control stream.
    pub fn feed(&mut self, mut input: &[u8]) -> Result<(), H3Error> {
        while !input.is_empty() {
            if !self.in_frame {
                let (head, used) = self.head.feed(input);
                input = &input[used..];
                let Some((kind, len)) = head else { continue };
                self.start(kind, len)?;
                if len == 0 {
                    self.frame_done()?;
                }
                continue;
            }
            let n = (input.len() as u64).min(self.left) as usize;
            if self.kind != u64::MAX {
                self.buf.extend_from_slice(&input[..n]);
            }
            input = &input[n..];
            self.left -= n as u64;
            if self.left == 0 {
                self.frame_done()?;
            }
        }
        Ok(())
    }

    fn start(&mut self, kind: u64, len: u64) -> Result<(), H3Error> {
        if !self.settings && kind != SETTINGS {
            return Err(conn_error(
                H3_MISSING_SETTINGS,
                "the control stream does not start with SETTINGS",
            ));
        }
        let keep = match kind {
            SETTINGS if self.settings => {
                return Err(conn_error(H3_FRAME_UNEXPECTED, "a second SETTINGS frame"))
            }
            SETTINGS | GOAWAY | CANCEL_PUSH => true,
            DATA | HEADERS | PUSH_PROMISE | MAX_PUSH_ID => {
                return Err(conn_error(
                    H3_FRAME_UNEXPECTED,
                    "a request or client-only frame on the control stream",
                ))
            }
            0x02 | 0x06 | 0x08 | 0x09 => {
                return Err(conn_error(
                    H3_FRAME_UNEXPECTED,
                    "an HTTP/2 frame type on the control stream",
                ))
            }
            _ => false,
        };
        if keep && len > MAX_CONTROL_FRAME {
            return Err(conn_error(H3_EXCESSIVE_LOAD, "control frame too large"));
        }
        // u64::MAX marks a frame that is skipped, not buffered.
        self.kind = if keep { kind } else { u64::MAX };
        self.left = len;
        self.in_frame = true;
        self.buf.clear();
        Ok(())
    }

    fn frame_done(&mut self) -> Result<(), H3Error> {
        self.in_frame = false;
        match self.kind {
            SETTINGS => {
                self.settings = true;
                let mut p = &self.buf[..];
                let mut seen: [bool; 8] = [false; 8];
                while !p.is_empty() {
                    let (id, a) = varint(p)
                        .ok_or_else(|| conn_error(H3_FRAME_ERROR, "truncated SETTINGS"))?;
                    let (_, b) = varint(&p[a..])
                        .ok_or_else(|| conn_error(H3_FRAME_ERROR, "truncated SETTINGS"))?;
                    p = &p[a + b..];
                    match id {
                        0x00 | 0x02..=0x05 => {
                            return Err(conn_error(
                                H3_SETTINGS_ERROR,
                                "an HTTP/2 setting in SETTINGS",
                            ))
                        }
                        0x01 | 0x06 | 0x07 => {
                            if seen[id as usize] {
                                return Err(conn_error(H3_SETTINGS_ERROR, "a repeated setting"));
                            }
                            seen[id as usize] = true;
                        }
                        _ => {}
                    }
                }
            }
            GOAWAY => {
                let (id, n) = varint(&self.buf)
                    .filter(|(_, n)| *n == self.buf.len())
                    .ok_or_else(|| conn_error(H3_FRAME_ERROR, "malformed GOAWAY"))?;
                if id % 4 != 0 {
                    return Err(conn_error(
                        H3_ID_ERROR,
                        "GOAWAY names a stream that is not a request stream",
                    ));
                }
                let _ = n;
                if self.goaway.is_some_and(|g| id > g) {
                    return Err(conn_error(H3_ID_ERROR, "GOAWAY id went up"));
                }
                self.goaway = Some(id);
            }
            CANCEL_PUSH if varint(&self.buf).is_none_or(|(_, n)| n != self.buf.len()) => {
                return Err(conn_error(H3_FRAME_ERROR, "malformed CANCEL_PUSH"));
            }
            _ => {}
        }
        Ok(())
    }
}

/// What opening a QUIC connection needs.
#[derive(Clone)]
pub struct QuicDialer {
    /// The worker's endpoint (one UDP socket per worker).
    pub endpoint: quinn::Endpoint,
    /// Client configs (TLS 1.3, ALPN h3, congestion controller; one per connection when
    /// resumption is on, to tell resumed handshakes).
    pub configs: crate::tls::QuicConfigs,
    /// Server address.
    pub addr: SocketAddr,
    /// TLS server name.
    pub server_name: String,
    /// Handshake limit.
    pub limit: Duration,
    /// Try 0-RTT when a ticket is available.
    pub zero_rtt: bool,
}

/// An established QUIC connection and what its setup measured.
pub struct QuicConnection {
    /// The connection.
    pub conn: quinn::Connection,
    /// Handshake time (to 1-RTT keys, or until 0-RTT could start).
    pub handshake: Duration,
    /// 0-RTT was used (acceptance is only known later).
    pub zero_rtt: Option<quinn::ZeroRttAccepted>,
    /// With resumption on: whether the handshake verified a certificate.
    pub cert_check: Option<crate::tls::CertCheck>,
}

impl QuicConnection {
    /// The completed handshake resumed a TLS session: it verified no certificate (a full
    /// TLS 1.3 handshake always does). False when resumption is off.
    pub fn resumed(&self) -> bool {
        self.cert_check.as_ref().is_some_and(|c| !c.verified())
    }
}

fn quic_error(addr: SocketAddr, e: &quinn::ConnectionError, limit: Duration) -> ConnectError {
    let (kind, why) = match e {
        quinn::ConnectionError::TimedOut => (
            ErrorKind::Timeout,
            format!("no QUIC handshake within {limit:?} (nothing listening on UDP?)"),
        ),
        quinn::ConnectionError::TransportError(t) => (ErrorKind::Tls, t.to_string()),
        quinn::ConnectionError::ConnectionClosed(c) => (ErrorKind::Tls, c.to_string()),
        quinn::ConnectionError::VersionMismatch => (ErrorKind::Protocol, e.to_string()),
        other => (ErrorKind::Connect, other.to_string()),
    };
    ConnectError {
        kind,
        message: format!("QUIC handshake with {addr}: {why}"),
    }
}

impl QuicDialer {
    /// Opens one connection (0-RTT when asked and possible).
    pub async fn dial(&self) -> Result<QuicConnection, ConnectError> {
        let t0 = Instant::now();
        let (config, cert_check) = self.configs.for_connection();
        let connecting = self
            .endpoint
            .connect_with(config, self.addr, &self.server_name)
            .map_err(|e| ConnectError {
                kind: ErrorKind::Connect,
                message: format!("QUIC connect to {}: {e}", self.addr),
            })?;
        let connecting = if self.zero_rtt {
            match connecting.into_0rtt() {
                Ok((conn, accepted)) => {
                    return Ok(QuicConnection {
                        conn,
                        handshake: t0.elapsed(),
                        zero_rtt: Some(accepted),
                        cert_check,
                    })
                }
                Err(c) => c,
            }
        } else {
            connecting
        };
        match tokio::time::timeout(self.limit, connecting).await {
            Err(_) => Err(ConnectError {
                kind: ErrorKind::Timeout,
                message: format!(
                    "QUIC handshake with {}: timed out after {:?}",
                    self.addr, self.limit
                ),
            }),
            Ok(Err(e)) => Err(quic_error(self.addr, &e, self.limit)),
            Ok(Ok(conn)) => Ok(QuicConnection {
                conn,
                handshake: t0.elapsed(),
                zero_rtt: None,
                cert_check,
            }),
        }
    }
}

/// Which request slots (and the control task, at index `depth`) have something to say, and
/// the session task to wake when one does.
struct ReadySet {
    flags: Box<[AtomicBool]>,
    /// Some flag was set since the session last looked.
    any: AtomicBool,
    session: AtomicWaker,
}

impl ReadySet {
    #[inline]
    fn take(&self, i: usize) -> bool {
        self.flags[i].load(Ordering::Relaxed) && self.flags[i].swap(false, Ordering::AcqRel)
    }

    fn mark(&self, i: usize) {
        self.flags[i].store(true, Ordering::Release);
        self.any.store(true, Ordering::Release);
    }
}

/// The waker of one slot: quinn keeps it while the slot's streams are blocked.
struct SlotWaker {
    set: Arc<ReadySet>,
    index: usize,
}

impl Wake for SlotWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.set.mark(self.index);
        self.set.session.wake();
    }
}

/// What the server's unidirectional streams told the session.
#[derive(Default)]
struct ControlState {
    /// Lowest GOAWAY stream id.
    goaway: Option<u64>,
    /// A connection error found on them.
    error: Option<(u64, String)>,
    control_seen: bool,
    encoder_seen: bool,
    decoder_seen: bool,
}

struct Shared {
    state: RefCell<ControlState>,
    /// Wakes the session (the control index of the ready set).
    wake: Waker,
}

impl Shared {
    fn fail(&self, code: u64, message: String) {
        let mut s = self.state.borrow_mut();
        if s.error.is_none() {
            s.error = Some((code, message));
        }
        drop(s);
        self.wake.wake_by_ref();
    }
}

/// Accepts the server's unidirectional streams for the connection's lifetime (the task is
/// aborted when the session ends, which aborts the readers it started).
async fn accept_uni(conn: quinn::Connection, shared: Rc<Shared>) {
    let mut readers = tokio::task::JoinSet::new();
    while let Ok(recv) = conn.accept_uni().await {
        readers.spawn_local(read_uni(recv, shared.clone()));
        // Reap finished readers so the set stays small.
        while readers.try_join_next().is_some() {}
    }
}

/// Reads one server unidirectional stream: its type, then the control stream's frames, or
/// QPACK instructions (discarded: with capacity 0 there is nothing to insert).
async fn read_uni(mut recv: quinn::RecvStream, shared: Rc<Shared>) {
    let mut head = [0u8; 8];
    let mut have = 0usize;
    let mut kind: Option<u64> = None;
    let mut control = ControlParser::default();
    loop {
        let chunk = match recv.read_chunk(64 * 1024, true).await {
            Ok(Some(c)) => c.bytes,
            Ok(None) => {
                if kind == Some(0x00) {
                    shared.fail(
                        H3_CLOSED_CRITICAL_STREAM,
                        "h3: the server closed its control stream (H3_CLOSED_CRITICAL_STREAM)"
                            .into(),
                    );
                }
                return;
            }
            Err(quinn::ReadError::Reset(_)) if kind == Some(0x00) => {
                shared.fail(
                    H3_CLOSED_CRITICAL_STREAM,
                    "h3: the server reset its control stream (H3_CLOSED_CRITICAL_STREAM)".into(),
                );
                return;
            }
            // The connection ended (the session sees that on its own streams).
            Err(_) => return,
        };
        let mut data: &[u8] = &chunk;
        if kind.is_none() {
            let n = (8 - have).min(data.len());
            head[have..have + n].copy_from_slice(&data[..n]);
            let Some((t, used)) = varint(&head[..have + n]) else {
                have += n;
                continue;
            };
            data = &data[used - have..];
            kind = Some(t);
            let mut st = shared.state.borrow_mut();
            let seen = match t {
                0x00 => Some(&mut st.control_seen),
                0x02 => Some(&mut st.encoder_seen),
                0x03 => Some(&mut st.decoder_seen),
                0x01 => {
                    drop(st);
                    shared.fail(
                        H3_ID_ERROR,
                        "h3: the server opened a push stream, but we allowed no push (H3_ID_ERROR)"
                            .into(),
                    );
                    return;
                }
                _ => None,
            };
            match seen {
                Some(flag) if *flag => {
                    drop(st);
                    shared.fail(
                        H3_STREAM_CREATION_ERROR,
                        format!(
                            "h3: a second server stream of type {t:#x} (H3_STREAM_CREATION_ERROR)"
                        ),
                    );
                    return;
                }
                Some(flag) => *flag = true,
                None => {
                    // Unknown or reserved stream type: not read (RFC 9114 §6.2).
                    drop(st);
                    let _ = recv.stop(quinn::VarInt::from_u32(H3_STREAM_CREATION_ERROR as u32));
                    return;
                }
            }
        }
        if kind == Some(0x00) {
            if let Err(e) = control.feed(data) {
                let (code, message) = match e {
                    H3Error::Connection { code, message } | H3Error::Stream { code, message } => {
                        (code, message)
                    }
                };
                shared.fail(code, message);
                return;
            }
            if let Some(id) = control.goaway {
                let mut st = shared.state.borrow_mut();
                if st.goaway != Some(id) {
                    st.goaway = Some(id);
                    drop(st);
                    shared.wake.wake_by_ref();
                }
            }
        }
    }
}

/// Opens our control stream and sends SETTINGS.
async fn open_control(conn: &quinn::Connection) -> Result<quinn::SendStream, String> {
    let mut stream = conn.open_uni().await.map_err(|e| e.to_string())?;
    let mut payload = Vec::with_capacity(16);
    for (id, v) in [(0x01, 0), (0x07, 0), (0x06, MAX_FIELD_SECTION)] {
        put_varint(&mut payload, id);
        put_varint(&mut payload, v);
    }
    let mut out = vec![0x00, SETTINGS as u8];
    put_varint(&mut out, payload.len() as u64);
    out.extend_from_slice(&payload);
    stream.write_all(&out).await.map_err(|e| e.to_string())?;
    Ok(stream)
}

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
        self.ready.mark(i);
    }

    /// Writes what slot `i` still has to send; `Some` when the slot or the connection ended.
    fn write_slot(&mut self, ctx: &mut ClientCtx, i: usize, cx: &mut Context<'_>) -> Option<SlotPoll> {
        let slot = self.slots[i].as_mut()?;
        let send = slot.send.as_mut()?;
        while !slot.pending.is_empty() {
            let mut bufs = [std::mem::take(&mut slot.pending)];
            let r = pin!(send.write_chunks(&mut bufs)).poll(cx);
            slot.pending = std::mem::take(&mut bufs[0]);
            match r {
                Poll::Ready(Ok(_)) => {}
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
        loop {
            let Some(slot) = self.slots[i].as_mut() else {
                return SlotPoll::Freed;
            };
            let r = pin!(slot.recv.read_chunk(usize::MAX, true)).poll(&mut cx);
            match r {
                Poll::Pending => return SlotPoll::Pending,
                Poll::Ready(Ok(Some(chunk))) => {
                    let p = &mut self.parsers[i];
                    let r = p.feed(&mut self.dec, &chunk.bytes, now);
                    let header = std::mem::take(&mut p.header_bytes);
                    ctx.rec
                        .borrow_mut()
                        .received(chunk.bytes.len() as u64, header, 0);
                    if let Err(e) = r {
                        return self.h3_error(ctx, i, e);
                    }
                }
                Poll::Ready(Ok(None)) => return self.response_done(ctx, i, now),
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
            r.received(0, 0, p.body);
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
                    ctx.rec
                        .borrow_mut()
                        .request_failed(s.req.scheduled, ErrorKind::Protocol, &message);
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
        if self.ready.any.load(Ordering::Acquire) {
            return Poll::Ready(());
        }
        Poll::Pending
    }

    /// Handles one wake-up: control events, the opened stream, the slots quinn woke.
    fn on_wake(&mut self, ctx: &mut ClientCtx, now: Instant) -> Result<(), Fail> {
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
        // Cleared before the slots are polled: a waker that fires from here on is seen on
        // the next turn.
        self.ready.any.store(false, Ordering::Release);
        for i in 0..self.depth {
            if self.slots[i].is_some() && self.ready.take(i) {
                if let SlotPoll::Fail(f) = self.poll_slot(ctx, i, now) {
                    return Err(f);
                }
            }
        }
        if self.reopen_control {
            self.reopen_control = false;
            let (conn, holder) = (self.conn.clone(), self.control.clone());
            let limit = self.connect_timeout;
            tokio::task::spawn_local(async move {
                if let Ok(Ok(s)) = tokio::time::timeout(limit, open_control(&conn)).await {
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

    fn submit(&mut self, _ctx: &mut ClientCtx, url: usize, req: Req) {
        self.opening = Some(Opening { req, url });
        self.open.set(Some(self.conn.open_bi()));
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
/// slots are polled, so there is nothing to flush; a wake-up comes from the slot wakers.
pub struct Quic;

impl<'c> Transport<H3Session<'c>> for Quic {
    type Input = ();

    async fn flush(
        &mut self,
        _s: &mut H3Session<'c>,
        _ctx: &ClientCtx,
        _now: Instant,
    ) -> Result<(), Fail> {
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
    let control = match tokio::time::timeout(ctx.connect_timeout, open_control(&conn)).await {
        Err(_) => return setup_failed(ctx, ErrorKind::Timeout, "h3 setup timed out".into()),
        Ok(Err(e)) => return setup_failed(ctx, ErrorKind::Protocol, format!("h3 setup: {e}")),
        Ok(Ok(s)) => s,
    };
    let mut s = H3Session::new(ctx, &conn);
    let end = crate::session::drive(ctx, &mut s, &mut Quic).await;
    drop(s);
    drop(control);
    end
}

fn setup_failed(ctx: &ClientCtx, kind: ErrorKind, message: String) -> SessionEnd {
    ctx.rec.borrow_mut().connect_failed(kind, &message);
    SessionEnd::Failed {
        answered: 0,
        kind,
        message,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(super) fn frame(kind: u64, payload: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        put_varint(&mut out, kind);
        put_varint(&mut out, payload.len() as u64);
        out.extend_from_slice(payload);
        out
    }

    /// A QPACK field section (static table and literals) of `fields`.
    pub(super) fn section(fields: &[(&str, &str)]) -> Vec<u8> {
        let mut out = Vec::new();
        qpack::encode_field_section(
            fields.iter().map(|(n, v)| (n.as_bytes(), v.as_bytes())),
            &mut out,
        );
        out
    }

    /// Feeds `chunks` to a fresh parser and finishes it.
    fn run(chunks: &[&[u8]]) -> Result<ResponseParser, H3Error> {
        let mut p = ResponseParser::default();
        let mut dec = qpack::Decoder::new();
        let now = Instant::now();
        let mut header_bytes = 0;
        for c in chunks {
            p.feed(&mut dec, c, now)?;
            header_bytes += std::mem::take(&mut p.header_bytes);
        }
        p.finish()?;
        p.header_bytes = header_bytes;
        Ok(p)
    }

    #[test]
    fn varints_round_trip() {
        for v in [
            0,
            63,
            64,
            16_383,
            16_384,
            (1 << 30) - 1,
            1 << 30,
            (1 << 62) - 1,
        ] {
            let mut out = Vec::new();
            put_varint(&mut out, v);
            assert_eq!(varint(&out), Some((v, out.len())), "{v}");
            assert_eq!(varint(&out[..out.len() - 1]), None);
        }
    }

    #[test]
    fn response_parses_the_same_for_every_split() {
        // A reserved (grease) frame, a 103, the final head (a Huffman literal among them),
        // DATA with a two-byte length, an unknown frame, DATA, trailers.
        let interim = section(&[(":status", "103"), ("link", "</a.js>; rel=preload")]);
        let head = section(&[
            (":status", "200"),
            ("content-type", "application/octet-stream"),
            ("server", "hxlab-serve"),
        ]);
        let trailers = section(&[("x-checksum", "abc")]);
        let mut bytes = frame(0x21 + 0x1f * 3, b"grease");
        bytes.extend(frame(HEADERS, &interim));
        bytes.extend(frame(HEADERS, &head));
        bytes.extend(frame(DATA, &[7u8; 70]));
        bytes.extend(frame(0x2f, &[1, 2, 3]));
        bytes.extend(frame(DATA, &[8u8; 5]));
        bytes.extend(frame(HEADERS, &trailers));
        let headers_total = (interim.len() + head.len() + trailers.len()) as u64;
        let uncompressed = (":status".len()
            + 3
            + "content-type".len()
            + "application/octet-stream".len()
            + "server".len()
            + "hxlab-serve".len()) as u64;
        let check = |p: ResponseParser, how: &str| {
            assert_eq!(p.status, 200, "{how}");
            assert_eq!(p.body, 75, "{how}");
            assert_eq!(p.uncompressed, uncompressed, "{how}");
            assert_eq!(p.header_bytes, headers_total, "{how}");
            assert!(p.first_byte.is_some());
        };
        check(run(&[&bytes]).unwrap(), "whole");
        for at in 0..=bytes.len() {
            let (a, b) = bytes.split_at(at);
            check(run(&[a, b]).unwrap(), &format!("split at {at}"));
        }
        let ones: Vec<&[u8]> = bytes.chunks(1).collect();
        check(run(&ones).unwrap(), "bytewise");
        // A parser reused after reset gives the same again.
        let mut p = ResponseParser::default();
        let mut dec = qpack::Decoder::new();
        p.feed(&mut dec, &bytes[..10], Instant::now()).unwrap();
        p.reset();
        p.feed(&mut dec, &bytes, Instant::now()).unwrap();
        p.finish().unwrap();
        assert_eq!((p.status, p.body), (200, 75));
    }

    fn code(e: &H3Error) -> (bool, u64) {
        match e {
            H3Error::Connection { code, .. } => (true, *code),
            H3Error::Stream { code, .. } => (false, *code),
        }
    }

    #[test]
    fn malformed_responses_are_errors_not_panics() {
        let ok = frame(HEADERS, &section(&[(":status", "200")]));
        let data = frame(DATA, b"xy");
        let cases: Vec<(Vec<u8>, (bool, u64))> = vec![
            // DATA before HEADERS.
            (data.clone(), (true, H3_FRAME_UNEXPECTED)),
            // A head without :status, with a non-numeric one.
            (
                frame(HEADERS, &section(&[("server", "x")])),
                (false, H3_MESSAGE_ERROR),
            ),
            (
                frame(HEADERS, &section(&[(":status", "2x0")])),
                (false, H3_MESSAGE_ERROR),
            ),
            // Required Insert Count 1, an empty field section, a truncated one.
            (
                frame(HEADERS, &[0x02, 0x00, 0x80]),
                (true, QPACK_DECOMPRESSION_FAILED),
            ),
            (frame(HEADERS, &[]), (true, QPACK_DECOMPRESSION_FAILED)),
            (
                frame(HEADERS, &[0x00, 0x00, 0x51, 0x09, b'/']),
                (true, QPACK_DECOMPRESSION_FAILED),
            ),
            // Control frames, push and HTTP/2 types on a request stream.
            (
                [ok.clone(), frame(SETTINGS, &[])].concat(),
                (true, H3_FRAME_UNEXPECTED),
            ),
            (
                [ok.clone(), frame(GOAWAY, &[0])].concat(),
                (true, H3_FRAME_UNEXPECTED),
            ),
            (frame(PUSH_PROMISE, &[0, 0, 0]), (true, H3_ID_ERROR)),
            (frame(0x08, &[0, 0, 0, 1]), (true, H3_FRAME_UNEXPECTED)),
            // Anything after trailers.
            (
                [ok.clone(), ok.clone(), data.clone()].concat(),
                (true, H3_FRAME_UNEXPECTED),
            ),
            (
                [ok.clone(), ok.clone(), ok.clone()].concat(),
                (true, H3_FRAME_UNEXPECTED),
            ),
            // The stream ends inside a frame head, inside a payload, or with no response.
            ([ok.clone(), vec![0x00]].concat(), (true, H3_FRAME_ERROR)),
            (ok[..ok.len() - 1].to_vec(), (true, H3_FRAME_ERROR)),
            (
                frame(HEADERS, &section(&[(":status", "100")])),
                (false, H3_MESSAGE_ERROR),
            ),
            (Vec::new(), (false, H3_MESSAGE_ERROR)),
        ];
        for (bytes, want) in cases {
            let got = run(&[&bytes])
                .err()
                .unwrap_or_else(|| panic!("{bytes:02x?} passed"));
            assert_eq!(code(&got), want, "{bytes:02x?}: {got:?}");
        }
        // A HEADERS frame larger than we buffer is refused from its head alone; a huge
        // DATA frame is counted as it streams, never buffered.
        let mut huge = Vec::new();
        put_varint(&mut huge, HEADERS);
        put_varint(&mut huge, MAX_FIELD_SECTION + 1);
        let got = run(&[&huge]).unwrap_err();
        assert_eq!(code(&got), (false, H3_EXCESSIVE_LOAD));
        let mut p = ResponseParser::default();
        let mut dec = qpack::Decoder::new();
        let mut big = ok.clone();
        put_varint(&mut big, DATA);
        put_varint(&mut big, 1 << 40);
        p.feed(&mut dec, &big, Instant::now()).unwrap();
        p.feed(&mut dec, &[0u8; 4096], Instant::now()).unwrap();
        assert_eq!(p.body, 4096);
        assert!(p.block.capacity() < 4096);
    }

    fn settings(pairs: &[(u64, u64)]) -> Vec<u8> {
        let mut payload = Vec::new();
        for (id, v) in pairs {
            put_varint(&mut payload, *id);
            put_varint(&mut payload, *v);
        }
        frame(SETTINGS, &payload)
    }

    #[test]
    fn control_stream_settings_and_goaway_in_every_split() {
        let mut bytes = settings(&[(0x01, 0), (0x06, 1 << 20), (0x1f * 7 + 0x21, 9)]);
        bytes.extend(frame(0x21, b"reserved frame"));
        bytes.extend(frame(GOAWAY, &[0x40, 100]));
        bytes.extend(frame(GOAWAY, &[8]));
        for at in 0..=bytes.len() {
            let mut c = ControlParser::default();
            c.feed(&bytes[..at]).unwrap();
            c.feed(&bytes[at..]).unwrap();
            assert!(c.settings, "split at {at}");
            assert_eq!(c.goaway, Some(8), "split at {at}");
        }
    }

    #[test]
    fn control_stream_violations_are_connection_errors() {
        let s = settings(&[(0x01, 0)]);
        let cases: Vec<(Vec<u8>, u64)> = vec![
            (frame(GOAWAY, &[0]), H3_MISSING_SETTINGS),
            ([s.clone(), s.clone()].concat(), H3_FRAME_UNEXPECTED),
            (settings(&[(0x02, 1)]), H3_SETTINGS_ERROR),
            (settings(&[(0x06, 1), (0x06, 2)]), H3_SETTINGS_ERROR),
            (frame(SETTINGS, &[0x06]), H3_FRAME_ERROR),
            (
                [s.clone(), frame(HEADERS, &[0, 0])].concat(),
                H3_FRAME_UNEXPECTED,
            ),
            ([s.clone(), frame(DATA, &[])].concat(), H3_FRAME_UNEXPECTED),
            (
                [s.clone(), frame(0x06, &[0; 8])].concat(),
                H3_FRAME_UNEXPECTED,
            ),
            ([s.clone(), frame(GOAWAY, &[1])].concat(), H3_ID_ERROR),
            (
                [s.clone(), frame(GOAWAY, &[4]), frame(GOAWAY, &[8])].concat(),
                H3_ID_ERROR,
            ),
            ([s.clone(), frame(GOAWAY, &[4, 4])].concat(), H3_FRAME_ERROR),
        ];
        for (bytes, want) in cases {
            let mut c = ControlParser::default();
            let got = c.feed(&bytes).unwrap_err();
            assert_eq!(code(&got), (true, want), "{bytes:02x?}: {got:?}");
        }
        // A control frame larger than we buffer is refused from its head.
        let mut big = s.clone();
        put_varint(&mut big, GOAWAY);
        put_varint(&mut big, MAX_CONTROL_FRAME + 1);
        let got = ControlParser::default().feed(&big).unwrap_err();
        assert_eq!(code(&got), (true, H3_EXCESSIVE_LOAD));
        // An unknown frame of any size is skipped without buffering.
        let mut skip = s.clone();
        put_varint(&mut skip, 0x21);
        put_varint(&mut skip, 1 << 30);
        let mut c = ControlParser::default();
        c.feed(&skip).unwrap();
        c.feed(&[0u8; 8192]).unwrap();
        assert!(c.buf.capacity() < 8192);
    }

    #[test]
    fn request_bytes_are_a_headers_frame_and_a_data_frame() {
        let cfg = crate::LoadConfig {
            urls: vec!["https://127.0.0.1:4433/bytes/100".into()],
            body: Some(vec![b'x'; 300]),
            ..Default::default()
        };
        let t = crate::target::Target::from_config(&cfg).unwrap();
        let r = &t.requests[0];
        let b = &r.h3_request[..];
        let (kind, len, used) = parse_head(b).unwrap();
        assert_eq!((kind, len), (HEADERS, r.h3_header_payload));
        let block = &b[used..used + len as usize];
        let f = qpack::Decoder::new()
            .decode(block, MAX_FIELD_SECTION)
            .unwrap();
        assert_eq!(f.uncompressed, r.h2_header_size);
        let rest = &b[used + len as usize..];
        let (kind, len, used) = parse_head(rest).unwrap();
        assert_eq!((kind, len, rest.len() - used), (DATA, 300, 300));
    }
}

/// The whole client against a scripted HTTP/3 server written here on quinn (real QUIC and
/// TLS on loopback), for what `hxlab serve` never does: GOAWAY mid-connection and broken
/// responses.
#[cfg(test)]
mod peer_tests {
    use super::tests::{frame, section};
    use super::*;
    use crate::{LoadConfig, Proto};
    use std::sync::mpsc;

    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    enum Script {
        /// Answer `n` requests per connection, then GOAWAY naming the next stream; later
        /// streams are held unanswered.
        GoawayAfter(usize),
        /// DATA before HEADERS (a connection error).
        DataFirst,
        /// A head without `:status` (a stream error).
        NoStatus,
        /// Answer normally, but with a fresh TLS session store for every connection: the
        /// client's tickets are never found, so its 0-RTT is always rejected.
        RejectEarlyData,
    }

    type Identity = (
        rustls::pki_types::CertificateDer<'static>,
        rustls::pki_types::PrivateKeyDer<'static>,
    );

    fn identity() -> Identity {
        let made = rcgen::generate_simple_self_signed(vec!["127.0.0.1".into()]).unwrap();
        let key =
            rustls::pki_types::PrivateKeyDer::try_from(made.signing_key.serialize_der()).unwrap();
        (made.cert.der().clone(), key)
    }

    /// The counts of a result, for assertion messages (its histograms are too long).
    fn brief(r: &hxlab_core::RunResult) -> String {
        format!(
            "started {} done {} failed {} errors {:?} connections {} resumed {} samples {:?}",
            r.requests_started,
            r.requests_done,
            r.requests_failed,
            r.errors,
            r.connections,
            r.resumed,
            r.error_samples
        )
    }

    /// TLS 1.3, ALPN h3, 0-RTT accepted from tickets this config issued.
    fn server_config(id: &Identity) -> quinn::ServerConfig {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut tls = rustls::ServerConfig::builder_with_provider(provider)
            .with_protocol_versions(&[&rustls::version::TLS13])
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(vec![id.0.clone()], id.1.clone_key())
            .unwrap();
        tls.alpn_protocols = vec![b"h3".to_vec()];
        tls.max_early_data_size = u32::MAX;
        let crypto = quinn::crypto::rustls::QuicServerConfig::try_from(tls).unwrap();
        quinn::ServerConfig::with_crypto(Arc::new(crypto))
    }

    fn head(fields: &[(&str, &str)]) -> Vec<u8> {
        frame(HEADERS, &section(fields))
    }

    async fn serve_conn(conn: quinn::Connection, script: Script, codes: mpsc::Sender<u64>) {
        let Ok(mut control) = conn.open_uni().await else {
            return;
        };
        let mut hello = vec![0x00];
        hello.extend(frame(SETTINGS, &[0x01, 0x00]));
        if control.write_all(&hello).await.is_err() {
            return;
        }
        let mut held = Vec::new();
        let mut k = 0usize;
        loop {
            tokio::select! {
                accepted = conn.accept_bi() => {
                    let (mut send, mut recv) = match accepted {
                        Ok(pair) => pair,
                        Err(quinn::ConnectionError::ApplicationClosed(c)) => {
                            let _ = codes.send(c.error_code.into_inner());
                            break;
                        }
                        Err(_) => break,
                    };
                    let id = u64::from(send.id());
                    if let Script::GoawayAfter(n) = script {
                        if k == n {
                            let mut g = Vec::new();
                            put_varint(&mut g, id);
                            let _ = control.write_all(&frame(GOAWAY, &g)).await;
                        }
                        if k >= n {
                            held.push((send, recv));
                            k += 1;
                            continue;
                        }
                    }
                    k += 1;
                    tokio::spawn(async move {
                        if recv.read_to_end(1 << 20).await.is_err() {
                            return;
                        }
                        let mut out = match script {
                            Script::GoawayAfter(_) | Script::RejectEarlyData => {
                                head(&[(":status", "200")])
                            }
                            Script::DataFirst => frame(DATA, b"early"),
                            Script::NoStatus => head(&[("server", "scripted")]),
                        };
                        out.extend(frame(DATA, b"0123456789"));
                        let _ = send.write_all(&out).await;
                        let _ = send.finish();
                        let _ = send.stopped().await;
                    });
                }
                closed = conn.closed() => {
                    if let quinn::ConnectionError::ApplicationClosed(c) = closed {
                        let _ = codes.send(c.error_code.into_inner());
                    }
                    break;
                }
            }
        }
        drop(held);
    }

    /// Runs the scripted server and `hxlab load` against it; returns the result and the
    /// application close codes the server saw.
    fn against(script: Script, n: u64, depth: u64) -> (hxlab_core::RunResult, Vec<u64>) {
        against_with(script, n, depth, |_| {})
    }

    fn against_with(
        script: Script,
        n: u64,
        depth: u64,
        tweak: impl FnOnce(&mut LoadConfig),
    ) -> (hxlab_core::RunResult, Vec<u64>) {
        let (addr_tx, addr_rx) = mpsc::channel();
        let (codes_tx, codes_rx) = mpsc::channel();
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let server = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let id = identity();
                let ep =
                    quinn::Endpoint::server(server_config(&id), "127.0.0.1:0".parse().unwrap())
                        .unwrap();
                addr_tx.send(ep.local_addr().unwrap()).unwrap();
                let mut stop = stop_rx;
                loop {
                    tokio::select! {
                        inc = ep.accept() => {
                            let Some(inc) = inc else { break };
                            if script == Script::RejectEarlyData {
                                ep.set_server_config(Some(server_config(&id)));
                            }
                            let codes = codes_tx.clone();
                            tokio::spawn(async move {
                                if let Ok(conn) = inc.await {
                                    serve_conn(conn, script, codes).await;
                                }
                            });
                        }
                        _ = &mut stop => break,
                    }
                }
                ep.close(quinn::VarInt::from_u32(0), b"");
            });
        });
        let addr = addr_rx.recv().unwrap();
        let mut cfg = LoadConfig {
            urls: vec![format!("https://{addr}/x")],
            requests: n,
            clients: 1,
            max_concurrent_streams: depth,
            proto: Proto::H3,
            insecure: true,
            timeout: Duration::from_secs(10),
            ..Default::default()
        };
        tweak(&mut cfg);
        let result = crate::run(cfg).expect("run");
        // Give the server a moment to see the last close.
        std::thread::sleep(Duration::from_millis(200));
        let _ = stop_tx.send(());
        server.join().unwrap();
        (result, codes_rx.try_iter().collect())
    }

    #[test]
    fn goaway_finishes_streams_below_its_id_and_resends_the_rest() {
        let (r, codes) = against(Script::GoawayAfter(3), 20, 4);
        assert_eq!(r.requests_done, 20, "{}", brief(&r));
        assert_eq!(r.requests_started, 20, "{}", brief(&r));
        assert_eq!(r.requests_failed, 0, "{}", brief(&r));
        assert_eq!(r.errors.total(), 0, "{}", brief(&r));
        // Three answers per connection.
        assert!(r.connections >= 7, "{}", r.connections);
        assert_eq!(r.bytes.body_received, 200);
        assert!(codes.iter().all(|c| *c == H3_NO_ERROR), "{codes:?}");
    }

    #[test]
    fn data_before_headers_closes_the_connection_with_frame_unexpected() {
        let (r, codes) = against(Script::DataFirst, 6, 2);
        assert_eq!(r.requests_done, 0, "{}", brief(&r));
        assert!(r.errors.protocol >= 1, "{}", brief(&r));
        assert!(codes.contains(&H3_FRAME_UNEXPECTED), "{codes:?}");
    }

    #[test]
    fn a_head_without_status_fails_only_its_stream() {
        let (r, _) = against(Script::NoStatus, 5, 2);
        assert_eq!(r.requests_done, 0, "{}", brief(&r));
        assert_eq!(r.errors.protocol, 5, "{}", brief(&r));
        assert_eq!(r.connections, 1, "{}", brief(&r));
    }

    #[test]
    fn rejected_0rtt_requests_are_sent_again_in_1rtt() {
        let (r, _) = against_with(Script::RejectEarlyData, 6, 1, |c| {
            c.zero_rtt = true;
            c.no_keepalive = true;
        });
        assert_eq!(r.requests_done, 6, "{}", brief(&r));
        assert_eq!(r.requests_started, 6, "{}", brief(&r));
        assert_eq!(r.errors.total(), 0, "{}", brief(&r));
        assert_eq!(r.connections, 6, "{}", brief(&r));
        // Every handshake was full: nothing was resumed or accepted early.
        assert_eq!(r.resumed, 0, "{}", brief(&r));
    }
}
