//! hxlab-load: the load generator behind `hxlab load`.
//!
//! What it is for: driving an HTTP origin over HTTP/1.1 (plain or TLS, keep-alive or not,
//! pipelined), HTTP/2 (TLS with ALPN, or h2c with prior knowledge) and HTTP/3 (QUIC), in a
//! closed model (`-n`/`-D`, `-c` connections × `-m` streams) or an open model (`--rate`,
//! latency corrected for coordinated omission), and counting every protocol the same way
//! into one [`hxlab_core::RunResult`].
//!
//! How it is built (after h2load's workers): `-t` OS threads, each with its own
//! current-thread tokio runtime, its own connections and its own [`recorder::Recorder`]
//! (HDR histograms and counters); nothing is shared in the hot path and the recorders are
//! merged once at the end. Each protocol has its own module ([`h1`], [`h2`], [`h3`]) with a
//! [`session::Session`] (after h2load's Http1Session/Http2Session/Http3Session) for one
//! connection's requests, and every protocol runs through the one client loop,
//! [`session::drive`], with one request timeout rule (the layers import only downwards: worker
//! → a client's connections → sessions → the client context they share); what to send next
//! and when comes from one
//! [`plan::Plan`] (a closed-model budget or the open-model [`scheduler::Schedule`]), and
//! what happened goes into the same recorder, so a number means the same thing on every
//! protocol. The recorder also cuts the run into intervals ([`series`]) by the time things
//! happened, so the result holds a time series that adds up to its totals.
//!
//! The wire rules it shares with the origin (HTTP/2 control frames, the HTTP/3 control
//! stream, HPACK, QPACK) come from hxlab-wire, and the QUIC driver's socket and transmit pass
//! from hxlab-quic, so both ends keep them the same way.
//!
//! [`probe`] asks a URL's host, one request per protocol with this client and hxlab-trace's
//! tap on the connection, which protocols it offers (`hxlab compare --url`).
//!
//! What it is not: a browser (no page model, no caching, no redirects), a correctness
//! checker (responses are counted and their bodies discarded), or a server.

mod client;
pub mod config;
mod connect;
mod deadlines;
pub mod h1;
pub mod h2;
pub mod h3;
pub mod live;
pub mod net;
pub mod per_client;
pub mod plan;
pub mod precise_sleep;
pub mod priority_probe;
pub mod probe;
mod progress;
mod qlog;
pub mod recorder;
pub mod request_log;
mod run_config;
pub mod scheduler;
pub mod series;
pub mod session;
pub mod shard;
pub mod target;
pub mod tls;
mod worker;

pub use config::{parse_header_arg, CongestionControl, LoadConfig, Proto, Shard};
/// The HPACK and QPACK codecs the clients use (from hxlab-wire).
pub use hxlab_wire::{hpack, qpack};
pub use live::Live;
pub use worker::{run, run_live, run_tapped};

/// Why a load run could not start (bad configuration, unreadable files, no threads).
///
/// Failures *during* a run (refused connections, resets, timeouts) are not errors of
/// [`run`]: they are counted in the returned [`hxlab_core::RunResult`].
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The configuration is inconsistent or a value is out of range.
    #[error("{0}")]
    Config(String),
    /// A URL could not be used.
    #[error("bad URL {url:?}: {reason}")]
    Url {
        /// The URL as given.
        url: String,
        /// Why it was refused.
        reason: String,
    },
    /// The host name did not resolve.
    #[error("cannot resolve {host}: {reason}")]
    Resolve {
        /// Host name.
        host: String,
        /// Resolver message.
        reason: String,
    },
    /// A file named in the configuration could not be read.
    #[error("cannot read {path}: {source}")]
    File {
        /// The path.
        path: String,
        /// The I/O error.
        source: std::io::Error,
    },
    /// TLS or QUIC client configuration failed.
    #[error("TLS setup: {0}")]
    Tls(String),
    /// A worker thread or runtime could not be created.
    #[error("cannot start worker: {0}")]
    Worker(String),
}

impl From<hxlab_contract::ConfigError> for LoadError {
    fn from(e: hxlab_contract::ConfigError) -> Self {
        LoadError::Config(e.0)
    }
}
