//! hxlab-trace: a frame-level view of one HTTP connection, like `nghttp -v`, for HTTP/1.1,
//! HTTP/2 (TLS and h2c) and HTTP/3.
//!
//! What it is for: showing what really crossed the wire when the real client stacks (hyper for
//! h1, the `h2` crate for h2, h3 + quinn for h3) talk to a server: the TLS or QUIC handshake
//! (version, cipher, ALPN), and every frame in both directions with decoded fields and header
//! lists (HPACK on h2, QPACK on h3). The stacks are unchanged; a passive tap sits between them
//! and the socket (h1/h2) or the QUIC streams (h3) and parses the bytes with sans-IO parsers
//! ([`h2wire`], [`h1wire`], [`h3wire`], [`qpack`]).
//!
//! What it is not: a load generator (see hxlab-load), a packet capture (QUIC packets, ACKs
//! and TCP segments are not shown), or a conformance checker (it reports, it does not judge).

pub mod client;
pub mod event;
pub mod h1wire;
pub mod h2wire;
pub mod h3tap;
pub mod h3wire;
pub mod qpack;
pub mod tap;
pub mod tls;

pub use client::{trace, Proto, ResponseSummary, Summary, TraceOptions};
pub use event::{Dir, Event, Tracer};
/// The `http` crate this API uses (URIs, header names and values), for callers.
pub use http;
pub use tls::Trust;

/// Why a trace could not be completed. Each renders as one line for the user.
#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    /// A bad option or URL (exit status 2 in the CLI).
    #[error("{0}")]
    Usage(String),
    /// A URL that cannot be traced (wrong scheme, no host, mixed origins).
    #[error("bad URL: {0}")]
    BadUrl(String),
    /// The host name did not resolve.
    #[error("cannot resolve {host}: {reason}")]
    Resolve {
        /// The host as given.
        host: String,
        /// What the resolver said.
        reason: String,
    },
    /// The TCP connection failed (refused, unreachable).
    #[error("cannot connect to {addr}: {source}")]
    Connect {
        /// The address tried.
        addr: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// The TLS handshake failed.
    #[error("TLS handshake failed: {0}")]
    Tls(String),
    /// The QUIC connection failed.
    #[error("QUIC: {0}")]
    Quic(String),
    /// The HTTP exchange failed.
    #[error("{proto}: {reason}")]
    Http {
        /// "HTTP/1.1", "HTTP/2" or "HTTP/3".
        proto: &'static str,
        /// What went wrong.
        reason: String,
    },
    /// A step did not finish before the deadline.
    #[error("timed out after {after:?} during {phase}")]
    Timeout {
        /// What was being waited for.
        phase: &'static str,
        /// The overall time limit.
        after: std::time::Duration,
    },
}
