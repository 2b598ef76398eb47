//! HTTP/2 (TLS with ALPN h2, or h2c with prior knowledge): an own client connection
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
//! Files: `conn.rs` (preface, opening streams, request bodies, ending streams), `frames.rs`
//! (cutting frames out of the read buffer, one handler per frame type), `push.rs` (server
//! push), `session.rs` ([`H2Session`]).
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

use crate::client::{ClientCtx, HeaderTables, SessionEnd};
use crate::hpack::{Decoder, Encoder};
use crate::net::io_phrase;
use crate::recorder::ErrorKind;
use crate::session::{ByteSession, Consumed, Fail, Outcome, Session};
use crate::target::Target;
use hxlab_core::header_table::HeaderTableSeen;
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

use hxlab_wire::h2::code::{
    CANCEL, COMPRESSION_ERROR, FLOW_CONTROL_ERROR, FRAME_SIZE_ERROR, NO_ERROR, PROTOCOL_ERROR,
    REFUSED_STREAM,
};
/// Name of an HTTP/2 error code (from hxlab-wire).
pub use hxlab_wire::h2::code_name;
use hxlab_wire::h2::flag::{ACK, END_HEADERS, END_STREAM, PRIORITY as PRIORITY_FLAG};
use hxlab_wire::h2::frame::{
    CONTINUATION, DATA, GOAWAY, HEADERS, PING, PRIORITY, PUSH_PROMISE, RST_STREAM, SETTINGS,
    WINDOW_UPDATE,
};
use hxlab_wire::h2::{be32, control, setting, MAX_STREAM_ID, PREFACE};

/// Our receive windows (as h2load -w 30 -W 30): flow control never paces a load test.
const WINDOW: u32 = (1 << 30) - 1;
/// The frame size we accept (the default; we do not raise it).
const OUR_MAX_FRAME: usize = 16_384;
/// Largest header block (wire) we buffer across CONTINUATION frames.
const MAX_BLOCK: usize = MAX_HEADER_LIST as usize;
/// Read buffer: several full frames.
const READ_BUF: usize = 4 * (OUR_MAX_FRAME + 9);
/// Pushed streams tracked at once per connection; further promises are cancelled.
const MAX_PUSHES: usize = 1024;

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
pub enum StreamEnd {
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
    pub outcome: StreamEnd,
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
    /// The SETTINGS_HEADER_TABLE_SIZE we advertised.
    our_table: u64,
    /// The server's SETTINGS_HEADER_TABLE_SIZE once its SETTINGS came (4096 unsaid).
    server_table: Option<u64>,
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

#[inline]
fn frame_head(out: &mut Vec<u8>, len: usize, kind: u8, flags: u8, id: u32) {
    hxlab_wire::h2::write_head(out, len, kind, flags, id);
}

fn strip_padding(flags: u8, payload: &[u8]) -> Result<&[u8], ConnError> {
    use hxlab_wire::h2::PaddingError;
    hxlab_wire::h2::strip_padding(flags, payload).map_err(|e| match e {
        PaddingError::NoPadLength => {
            conn_err(FRAME_SIZE_ERROR, "PADDED frame without a pad length")
        }
        PaddingError::TooLong => conn_err(PROTOCOL_ERROR, "padding longer than the frame"),
    })
}

mod conn;
mod frames;
mod push;
mod session;

pub use session::H2Session;

#[cfg(test)]
mod tests;
