//! hxlab-child: how hxlab runs its own children.
//!
//! What it is for: [`child`] — a child in its own process group, tied to the parent's life
//! (killed when the parent dies), bounded in time, its whole tree killed at the end, the end
//! of its stderr kept; [`origin`] — one `hxlab serve` started with a typed `ServeConfig` and
//! known by its ready file, which `hxlab page` and the lab's runner both measure against;
//! [`get_stats`] and [`get_replay_counts`] — a server's `/stats` and `/replay-stats`, read
//! into their contract types. The lab and hxlab-page both use it, so starting a process
//! needs neither the experiment model nor a browser.
//! What it is not: no experiments or records (hxlab-lab), no browser (hxlab-browser, run by
//! hxlab-page), no server code (it starts `hxlab serve` as a child and reads what it says).

pub mod child;
pub mod origin;
mod stats_get;

pub use stats_get::{get_replay_counts, get_stats};
