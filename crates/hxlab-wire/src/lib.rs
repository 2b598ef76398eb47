//! hxlab-wire: the wire formats hxlab speaks, sans-IO (no sockets, no async runtime).
//!
//! What it is for: one copy of each codec and each table that more than one part of hxlab
//! needs. The load generator's clients encode and parse with it on their hot path, the
//! frame view (`hxlab trace`) decodes what those same clients sent and received with it, and
//! the origin's HTTP/1.1 and HTTP/3 servers read request heads with it.
//! - [`h1`]: HTTP/1.1 response framing (RFC 9112): heads, status, Content-Length, chunked and
//!   until-close bodies, fed any split of the bytes; the load client counts with it and the
//!   frame view shows what it framed.
//! - [`h1_request`]: HTTP/1.1 request framing (RFC 9112), strict: heads read in place, bodies
//!   (Content-Length, chunked) stepped over, every ambiguous framing refused; the origin's one
//!   request framer, tested at every split point.
//! - [`varint`]: QUIC variable-length integers (RFC 9000 §16).
//! - [`prefix`]: the prefix integers of HPACK and QPACK (RFC 7541 §5.1), read and written once.
//! - [`h2`]: HTTP/2 frame types, flags, error codes, SETTINGS identifiers and the 9-byte frame
//!   head (RFC 9113 §4.1); [`h2::control`] decodes and writes the control frames (SETTINGS,
//!   PING, GOAWAY, RST_STREAM, PRIORITY, WINDOW_UPDATE) with the rules RFC 9113 §6 sets on
//!   each, so the load client and the origin refuse the same frames the same way.
//! - [`hpack`]: HPACK (RFC 7541): Huffman code, the request encoder, and one decoder
//!   ([`hpack::Decoder`]) that hands whole fields to a callback (the frame view's) or keeps
//!   `:status` and lengths only (the recorder's).
//! - [`h3`]: HTTP/3 frame types, stream types, SETTINGS identifiers, error codes (RFC 9114),
//!   frame heads across chunks; [`h3::control`] is the one control-stream reader, the load
//!   client's of the server's stream and the origin's of the client's.
//! - [`qpack`]: QPACK (RFC 9204) with the static table: the request encoder, one field-section
//!   decoder ([`qpack::FieldDecoder`], a callback per field line) that the origin's request
//!   heads, the load client's length-only [`qpack::Decoder`] and the frame view's
//!   [`qpack::display`] all go through, and display of encoder/decoder stream instructions.
//! - [`priority`]: RFC 9218 extensible priorities: the `priority` field, PRIORITY_UPDATE
//!   frames of HTTP/2 and HTTP/3, and the mapping of RFC 7540 weights.
//! - [`tap`]: the hook a client session calls with every byte it sends and receives and with
//!   its transport facts, so an observer sees exactly what that session put on the wire.
//!
//! What it is not: a connection state machine (those live with the clients that drive them).

pub mod h1;
pub mod h1_request;
pub mod h2;
pub mod h3;
pub mod hpack;
pub mod prefix;
pub mod priority;
pub mod qpack;
mod qpack_table;
pub mod tap;
pub mod varint;

#[cfg(test)]
mod fixtures;

pub use tap::{Dir, Tap};
