//! hxlab-core: the shared vocabulary of hxlab.
//!
//! What it is for: units as users write them (sizes, durations, rates), the `RunResult`
//! schema every measurement is stored as, HDR histograms that serialise and merge exactly,
//! and the statistics the reports use. Wire formats (HPACK, QPACK, frames) live in hxlab-wire.
//! [`cc`] holds the congestion-control vocabulary with the one socket option and the one
//! quinn hook that apply and read it back, so both ends set it the same way.
//! [`write_atomically`] is the one way any crate replaces a file others may be reading.
//! [`Protocol`] (what a connection spoke) and [`Proto`] (what a client is asked to speak) are
//! the one protocol vocabulary.
//! [`ReadyFile`] is the file `hxlab serve` writes when it is ready, for whoever started it.
//! [`interval`] holds a run's time series (one small histogram per interval).
//! [`shard`] says which part of which run a result is, and checks that parts make a whole.
//! [`waterfall`] is a page load resource by resource, phase by phase, for reports to draw.
//! [`page`] is what a browser page load measured and what a series of loads adds up to.
//! What it is not: no other I/O, no protocol code, no async runtime.

pub mod atomic_file;

/// Receive buffer asked for on every UDP socket that carries HTTP/3, the load client's and
/// the origin's alike (the kernel caps it at `net.core.rmem_max`). The default (about
/// 208 KiB) holds only a few of the GRO batches 50 connections' packets arrive in, and a full
/// buffer drops datagrams, which then cost a loss recovery on both ends; TCP's receive buffer
/// autotunes up to `tcp_rmem`'s maximum instead. Nothing of it is seen on the wire.
pub const QUIC_UDP_RECV_BUFFER: usize = 8 << 20;
pub mod cc;
pub mod files;
pub mod har;
pub mod histogram;
pub mod interval;
pub mod page;
pub mod protocol;
pub mod ready;
pub mod result;
pub mod shard;
pub mod stats;
pub mod units;
pub mod waterfall;

pub use atomic_file::write_atomically;
pub use files::{read_capped, read_capped_string, read_lines_capped, Line};
pub use histogram::LatencyHistogram;
pub use protocol::{Proto, Protocol};
pub use ready::ReadyFile;
pub use result::RunResult;
pub use units::{parse_duration, parse_rate, parse_size, UnitError};
