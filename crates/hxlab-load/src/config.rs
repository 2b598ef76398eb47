//! [`LoadConfig`] lives in hxlab-contract (the typed contract `hxlab load --config` takes,
//! with its one validator); hxlab-load re-exports it with the vocabulary it uses.

/// Which HTTP version to speak (hxlab-core's request form of the one protocol type).
pub use hxlab_core::Proto;

/// TCP/QUIC congestion controller (shared with `hxlab serve`).
pub use hxlab_core::cc::CongestionControl;

pub use hxlab_contract::load::{parse_header_arg, split, LoadConfig, Shard, MAX_SHARDS};
