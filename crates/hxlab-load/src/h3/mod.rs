//! HTTP/3: an own HTTP/3 client (RFC 9114, QPACK of RFC 9204 with the dynamic table of
//! `--header-table`, `qpack_state.rs`) directly on quinn-proto, up to `-m` requests in flight per connection.
//!
//! Why not the `h3` crate: per request it Huffman-encoded our headers, decoded the response
//! bit by bit, allocated frames and futures; this client sends each URL's request as one
//! precomputed buffer ([`crate::target::RequestTemplate::h3_request`]: a HEADERS frame and,
//! with `-d`, a DATA frame) and parses responses in place as quinn-proto hands over chunks.
//!
//! Why not quinn's async layer (`quinn::Endpoint`, `Connection`, streams): its connection
//! driver task handles incoming datagrams and transmits before the application runs, so each
//! round of responses cost an ACK-only datagram of its own, and every stream operation went
//! through a lock, a channel or a waker of its own. The worker's [`Driver`] (`driver.rs`)
//! runs quinn-proto on the worker's thread: one UDP socket through quinn-udp (GSO, GRO, the
//! lab's receive buffer, [`hxlab_quic::QUIC_UDP_RECV_BUFFER`]), one
//! `quinn_proto::Endpoint`, the connections, one timer; each turn it receives, hands the
//! connections' events to their sessions and lets them run, and only then transmits, so the
//! ACK rides with the next requests (see its docs: quinn-proto's ACK policy and transport
//! settings are unchanged, the wire stays like for like with h2).
//!
//! Pieces: [`ResponseParser`] (sans-IO: frames of one request stream, QPACK decode with
//! [`crate::qpack::Decoder`], the last field section's decode remembered, interim 1xx
//! heads, DATA counting, trailers) and
//! the server's control stream (SETTINGS first, GOAWAY: hxlab-wire's
//! [`hxlab_wire::h3::control::ControlReader`], the one the origin reads clients' with) are
//! tested on their own. [`session`] opens our control stream (SETTINGS: the QPACK table and
//! blocked streams we allow, MAX_FIELD_SECTION_SIZE; `control.rs`), then runs the
//! requests of one connection as an [`H3Session`] through the client loop
//! ([`crate::session::drive`] over [`Quic`]): the driver queues the connection's stream
//! events and wakes the session, which marks the request slots they concern and polls only
//! those (a slot's stream is read chunk by chunk until quinn-proto has no more), reads the
//! server's unidirectional streams as they become readable (control parsed, QPACK
//! encoder/decoder streams to the connection's [`qpack_state::Qpack`], anything else stopped), and allocates
//! nothing per request on our side. The dialer ([`QuicDialer`]: 0-RTT, resumption,
//! handshake limit) and the worker's driver ([`client_endpoint`]) are in `dial.rs`.
//!
//! Counting (docs/run-result.md): wire bytes are request-stream bytes (frames with their
//! heads) and QPACK stream bytes (control streams are not counted), header bytes are HEADERS
//! payloads and QPACK stream bytes (the
//! QPACK wire size, trailers included), body bytes are DATA payloads counted when the
//! response completes; the uncompressed size is h2load's (name + value of every field of
//! the final response head, `:status` included); ttfb is taken when the final HEADERS is
//! decoded, latency at the stream's end. A server GOAWAY stops new requests; those at or
//! above its stream id are given back to the plan (sent again elsewhere), those below
//! finish. Frame-level violations are connection errors (the connection closes with the
//! HTTP/3 error code), message-level ones (no `:status`, a head too large) stream errors;
//! both count as protocol errors.

use crate::client::{ClientCtx, SessionEnd};
use crate::net::ConnectError;
use crate::qpack;
use crate::recorder::ErrorKind;
use crate::session::{Fail, Outcome, Req, Session, SessionIo};
use crate::target::Target;
use bytes::Bytes;
use std::cell::RefCell;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::pin;
use std::rc::Rc;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use hxlab_wire::h3::code::{
    H3_CLOSED_CRITICAL_STREAM, H3_EXCESSIVE_LOAD, H3_FRAME_ERROR, H3_FRAME_UNEXPECTED, H3_ID_ERROR,
    H3_MESSAGE_ERROR, H3_REQUEST_CANCELLED, H3_STREAM_CREATION_ERROR, QPACK_DECODER_STREAM_ERROR,
    QPACK_DECOMPRESSION_FAILED, QPACK_ENCODER_STREAM_ERROR,
};
use hxlab_wire::h3::frame::{
    CANCEL_PUSH, DATA, GOAWAY, HEADERS, MAX_PUSH_ID, PUSH_PROMISE, SETTINGS,
};
/// HTTP/3 names and codes (from hxlab-wire).
pub use hxlab_wire::h3::{code::H3_NO_ERROR, code_name};
/// QUIC varints (from hxlab-wire).
pub use hxlab_wire::varint::{put as put_varint, read as varint};

/// Largest HEADERS frame payload buffered (and largest field section accepted, RFC 9114
/// §4.2.2 size): what we advertise as SETTINGS_MAX_FIELD_SECTION_SIZE.
const MAX_FIELD_SECTION: u64 = crate::h2::MAX_HEADER_LIST as u64;

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

impl From<hxlab_wire::h3::control::ControlError> for H3Error {
    fn from(e: hxlab_wire::h3::control::ControlError) -> H3Error {
        conn_error(e.code, e.reason)
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
mod driver;
mod parse;
mod qpack_state;
mod session;

pub(crate) use control::control_stream_bytes;
pub use dial::{client_endpoint, QuicConnection, QuicDialer};
pub use driver::{udp_transmit, ConnState, Driver, QuicConn};
pub use parse::ResponseParser;
pub use qpack_state::{QpackConfig, ResponseDecoder, BLOCKED_STREAMS};
pub use session::{session, H3Session, Quic};

#[cfg(test)]
mod peer_tests;
#[cfg(test)]
mod tests;
