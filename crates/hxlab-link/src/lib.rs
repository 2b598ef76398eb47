//! hxlab-link: packet-level link emulation in user space, for TCP and QUIC alike.
//!
//! What it is: a sans-IO [`model`] (loss → queue → rate/trace → delay+jitter per direction,
//! driven on virtual time) and a [`shell`] that runs it between two TUN devices (with
//! segmentation offload: [`gso`] says how super-packets are carried and when they are cut), one in the
//! namespace hxlab started in and one in a new network namespace where a command runs, like
//! mahimahi's LinkShell/DelayShell. [`profiles`] holds the published Chrome DevTools and
//! WebPageTest presets. [`settings`] turns a link as users write it (`hxlab link`'s flags, an
//! experiment's link factors) into a [`LinkConfig`], by one set of rules.
//!
//! What it is not: a traffic generator or a measurement tool (that is hxlab-load), nor a
//! kernel qdisc. Outside its own two devices it changes nothing but an nftables table of its
//! own that the kernel removes when hxlab exits, however it exits (see `nft`).
//!
//! ```no_run
//! let link = hxlab_link::Link::start(hxlab_link::LinkConfig::from_profile("wpt:Cable")?)?;
//! let status = link.command("curl").arg(format!("http://{}:8080/", link.host_addr())).status();
//! let stats = link.stop();
//! # Ok::<(), hxlab_link::LinkError>(())
//! ```

pub mod config;
pub mod gso;
pub mod model;
mod nft;
pub mod pcap;
pub mod profiles;
mod relay;
pub mod settings;
pub mod shell;
mod sys;
pub mod trace;
mod tun;

pub use config::{Aqm, Delay, DirectionConfig, LinkConfig, Loss, QueueLimit, Server};
pub use model::{Direction, DirectionStats, Dropped, Model, Packet, Pipe};
pub use settings::{Bottleneck, LinkSettings, Setting, SettingsError};
pub use shell::Link;
pub use trace::Trace;

use serde::{Deserialize, Serialize};

/// What can go wrong configuring or starting a link; each is one line for the user.
#[derive(Debug, thiserror::Error)]
pub enum LinkError {
    /// A bad parameter (profile, loss, queue, ...).
    #[error("{0}")]
    Config(String),
    /// A malformed or unreadable trace file ("file:line: reason").
    #[error("{0}")]
    Trace(String),
    /// Not allowed to create the namespace or TUN devices; the text says how to fix it.
    #[error("{0}")]
    Permission(String),
    /// Setting up or running the link failed.
    #[error("{0}")]
    Setup(String),
}

/// Counters of both directions, as `--stats` writes them (and `hxlab page --json` carries).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct LinkStats {
    /// Outside → inside.
    pub down: DirectionStats,
    /// Inside → outside.
    pub up: DirectionStats,
}
