//! hxlab-trace: a frame-level view of one HTTP connection, like `nghttp -v`, for HTTP/1.1,
//! HTTP/2 (TLS and h2c) and HTTP/3.
//!
//! What it is for: showing what `hxlab load`'s own client sessions put on the wire and took
//! off it — the frames `hxlab load` sends with the same flags. [`TraceTap`] is an
//! [`hxlab_wire::Tap`]: installed on load's sessions (by the `hxlab trace` command), it sees
//! the connection's transport facts (TLS or QUIC version, cipher, ALPN, resumption, RTT) and
//! every byte in both directions (after TLS on TCP, per stream on QUIC), and parses them with
//! sans-IO parsers ([`h1wire`], [`h2wire`], [`h3wire`]) whose HPACK and QPACK decoding comes
//! from hxlab-wire, the same codecs the sessions use.
//!
//! What it is not: a client (load's sessions are the client), a packet capture (QUIC
//! packets, ACKs and TCP segments are not shown), or a conformance checker (it reports, it
//! does not judge).

pub mod event;
pub mod h1wire;
pub mod h2wire;
pub mod h3wire;
pub mod tap;

pub use event::{Dir, Event, Tracer};
pub use tap::{response_event, Proto, ResponseSummary, Summary, TraceTap};
