//! hxlab-contract: the lab's contracts with its parts.
//!
//! What it is for: the one typed configuration each child process of hxlab takes on
//! `--config FILE|-` — [`LoadConfig`] (`hxlab load`), [`ServeConfig`] (`hxlab serve`),
//! [`PageJob`] (`hxlab page`) and, from hxlab-link, `LinkConfig` (`hxlab link`) — each with
//! its JSON form (serde, unknown keys refused) and one validator that the command-line flags,
//! a file and the lab all go through, so a value is refused the same way wherever it comes
//! from. The lab builds these values and hands them to the child; the child parses them at
//! the edge and never sees argv strings of another's making. Inside a link, the lab hands
//! `hxlab load --jobs` one [`LoadJob`] per repetition and reads back a [`JobDone`].
//! It also types what the children say back, the only way those outputs are written and
//! read: `hxlab link --stats` ([`LinkStatsFile`]), `hxlab serve`'s [`ReadyFile`], its `/stats` ([`StatsSnapshot`]) and `/replay-stats`
//! ([`ReplayCounts`]), `hxlab page --json` ([`PageReport`]) and `hxlab probe --json`
//! ([`ProbeReport`], with `--priorities` its [`PrioritiesReport`]). The synthetic page, the
//! static one a [`Synthetic`] spec asks for and `hxlab serve`'s `/page`, has one writer:
//! [`SyntheticHtml`].
//! With the `schema` feature, its `schema` module gives every contract's strict JSON Schema
//! (`hxlab schema`, docs/schema/).
//! What it is not: no I/O beyond reading a config's or a ready file's text, no protocol
//! stack, no async runtime (so hxlab-lab builds without quinn, rustls or the load engine).

pub mod connect_to;
pub mod duration_text;
pub mod job;
pub mod link_stats;
pub mod load;
pub mod metrics;
pub mod page;
pub mod page_report;
pub mod priorities;
pub mod probe;
pub mod ready;
pub mod replay;
#[cfg(feature = "schema")]
pub mod schema;
pub mod serve;
pub mod stats;
pub mod synthetic_html;

pub use connect_to::ConnectTo;
pub use hxlab_core::page::ProtocolShares;
pub use job::{JobDone, LoadJob};
pub use link_stats::LinkStatsFile;
pub use load::{parse_header_arg, split, LoadConfig, Shard, MAX_SHARDS};
pub use page::{Discovery, PageJob, Synthetic, LOCAL_ORIGIN_NAME};
pub use page_report::{
    EarlyHintsReport, PageLink, PageReport, PageRunEntry, PushReport, Recording, ReplaySource,
    SyntheticPage,
};
pub use priorities::{
    Honoured, IncrementalFigures, PrioritiesReport, PriorityScorecard, ProbeLink, SchedulingClass,
    UpdateFigures, UrgentFigures,
};
pub use probe::{ProbeOffer, ProbeReport};
pub use ready::{ReadyError, ReadyFile};
pub use replay::{NearMiss, NearMissRule, ReplayCounts};
pub use serve::ServeConfig;
pub use stats::{H3QpackStats, ProtoStats, ServeLatency, StatsSnapshot, SERVE_LATENCY_BUCKETS_US};
pub use synthetic_html::{PageDelay, SyntheticHtml};

/// Why a configuration is refused: one line for the user (a usage error, exit 2, on the
/// command line).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ConfigError(pub String);

/// Reads a config's JSON from `FILE`, or standard input for `-`, at most
/// [`MAX_CONFIG_BYTES`]; the error is one line.
pub fn read_config_text(path: &str) -> Result<String, ConfigError> {
    use std::io::Read;
    let mut text = String::new();
    let limit = MAX_CONFIG_BYTES + 1;
    let read = if path == "-" {
        std::io::stdin()
            .lock()
            .take(limit)
            .read_to_string(&mut text)
    } else {
        std::fs::File::open(path).and_then(|f| f.take(limit).read_to_string(&mut text))
    };
    read.map_err(|e| ConfigError(format!("--config {path}: {e}")))?;
    if text.len() as u64 > MAX_CONFIG_BYTES {
        return Err(ConfigError(format!(
            "--config {path}: larger than {} MiB; not a config",
            MAX_CONFIG_BYTES >> 20
        )));
    }
    Ok(text)
}

/// Reads a config of type `T` from `FILE` (or `-`: standard input) as [`read_config_text`]
/// does, parsed but not validated (the caller validates, so a command can add its own
/// checks first). The error is one line naming the file.
pub fn read_config<T: serde::de::DeserializeOwned>(path: &str) -> Result<T, ConfigError> {
    let text = read_config_text(path)?;
    serde_json::from_str(&text).map_err(|e| ConfigError(format!("--config {path}: {e}")))
}

/// Parses a config's JSON form (unknown keys refused by the type), naming `what` in the
/// error; the caller validates.
pub(crate) fn parse_json<T: serde::de::DeserializeOwned>(
    what: &str,
    text: &str,
) -> Result<T, ConfigError> {
    serde_json::from_str(text).map_err(|e| ConfigError(format!("{what}: {e}")))
}

/// A config's JSON form. Strings, numbers, paths, addresses and the link's plain fields
/// always serialise, so this cannot fail.
pub(crate) fn to_json<T: serde::Serialize>(v: &T) -> String {
    serde_json::to_string(v).unwrap_or_default()
}

/// `from_json` (parse, then the type's `validate`) and `to_json` for a config type: one
/// definition for the three contracts.
macro_rules! json_form {
    ($ty:ident, $what:literal) => {
        impl $ty {
            #[doc = concat!("Reads the JSON form and [validates](", stringify!($ty), "::validate) it.")]
            pub fn from_json(text: &str) -> Result<$ty, $crate::ConfigError> {
                let cfg: $ty = $crate::parse_json($what, text)?;
                cfg.validate()?;
                Ok(cfg)
            }

            #[doc = concat!("The JSON form (what [`", stringify!($ty), "::from_json`] reads).")]
            pub fn to_json(&self) -> String {
                $crate::to_json(self)
            }
        }
    };
}
pub(crate) use json_form;

/// Largest config file read (a request body of `hxlab load` travels inside it).
pub const MAX_CONFIG_BYTES: u64 = 64 << 20;
