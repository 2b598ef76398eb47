//! hxlab-page: a page load as `hxlab page` runs it, and the way hxlab starts its own
//! children.
//!
//! What it is for: [`page`] — the page (a URL, a synthetic page served by an origin of our
//! own, or a recording replayed by one: [`replay`]), the emulated link the browser sits
//! behind, the runs in fresh Chromiums and what they add up to; [`origin`] — one
//! `hxlab serve` started as a child with a typed `ServeConfig` and known by its ready file,
//! which the lab's runner uses too; [`child`] — children in their own process group, tied to
//! the parent's life and bounded in time; [`get_stats`] — a server's `/stats`, typed, and
//! [`get_json`] — its `/replay-stats`.
//! What it is not: no experiments (hxlab-lab), no browser protocol (hxlab-browser), no
//! rendering (the command line prints; hxlab-report draws waterfalls).

pub mod child;
pub mod origin;
pub mod page;
pub mod replay;
mod stats_get;

pub use stats_get::{get_json, get_stats};
