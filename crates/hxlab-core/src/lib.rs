//! hxlab-core: the shared vocabulary of hxlab.
//!
//! What it is for: units as users write them (sizes, durations, rates), the `RunResult`
//! schema every measurement is stored as, HDR histograms that serialise and merge exactly,
//! and the statistics the reports use. Wire formats (HPACK, QPACK, frames) live in hxlab-wire.
//! [`cc`] holds the congestion-control vocabulary with the one TCP socket option that applies
//! and reads it back, so both ends set it the same way (quinn's side is in hxlab-quic).
//! [`write_atomically`] is the one way any crate replaces a file others may be reading.
//! [`Protocol`] (what a connection spoke) and [`Proto`] (what a client is asked to speak) are
//! the one protocol vocabulary.
//! [`interval`] holds a run's time series (one small histogram per interval).
//! [`shard`] says which part of which run a result is, and checks that parts make a whole.
//! [`waterfall`] is a page load resource by resource, phase by phase, for reports to draw.
//! [`page`] is what a browser page load measured and what a series of loads adds up to.
//! With the `schema` feature, [`RunResult`] and the vocabulary the configs use have JSON
//! Schemas (`schemars`); its `schema` module holds the hand-written ones.
//! [`SplitMix64`] is the one seeded generator; [`rusage`] the one reader of CPU time.
//! What it is not: no other I/O, no protocol code, no async runtime (QUIC's sockets and
//! quinn's hooks are hxlab-quic).

pub mod atomic_file;

pub mod cc;
pub mod env;
pub mod files;
pub mod har;
pub mod header_table;
pub mod histogram;
pub mod interval;
pub mod page;
pub mod protocol;
pub mod result;
pub mod rusage;
pub mod sched;
#[cfg(feature = "schema")]
pub mod schema;
pub mod shard;
pub mod splitmix;
pub mod stats;
pub mod units;
pub mod waterfall;

pub use atomic_file::write_atomically;
pub use files::{read_capped, read_capped_string, read_lines_capped, Line};
pub use histogram::LatencyHistogram;
pub use protocol::{Proto, Protocol};
pub use result::RunResult;
pub use splitmix::SplitMix64;
pub use units::{parse_duration, parse_rate, parse_size, UnitError};
