//! HTTP/3: an own HTTP/3 client (RFC 9114, QPACK of RFC 9204 with the static table
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
//! their own (`parse.rs`). [`session`] opens our control stream (SETTINGS: dynamic table
//! capacity 0, no blocked streams, MAX_FIELD_SECTION_SIZE; `control.rs`), reads the server's
//! unidirectional streams in a helper task (control parsed, QPACK encoder/decoder streams
//! read and discarded, anything else stopped), and runs the requests of one connection as an
//! [`H3Session`] through the client loop ([`crate::session::drive`] over [`Quic`]): each
//! request slot has its own reusable waker (`wake.rs`), so a wake-up polls only the streams
//! that have something to say, and nothing is allocated per request on our side. The dialer
//! ([`QuicDialer`], 0-RTT, resumption) is in `dial.rs`.
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

mod control;
mod dial;
mod parse;
mod session;
mod wake;

pub use dial::{QuicConnection, QuicDialer};
pub use parse::{ControlParser, ResponseParser};
pub use session::{session, H3Session, Quic};

#[cfg(test)]
mod peer_tests;
#[cfg(test)]
mod tests;
