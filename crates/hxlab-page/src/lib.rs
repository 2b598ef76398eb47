//! hxlab-page: a page load as `hxlab page` runs it.
//!
//! What it is for: a whole page job ([`runs`]: checked, run, judged; the text it shows,
//! [`text`]; its `--json` report, [`totals`]) over a session ([`page`]) of the page — a URL,
//! a synthetic page served by an origin of our own ([`synthetic`]), or a recording replayed
//! by one ([`replay`]) — and the emulated link the browser sits behind, each run in a fresh
//! Chromium. It returns the typed `PageReport` the lab reads back.
//! What it is not: no flags (the command line maps them onto a `PageJob` and chooses where
//! the text goes), no experiments (hxlab-lab), no browser protocol (hxlab-browser), no
//! process supervision or server starting (hxlab-child), no HTML of its own (hxlab-report
//! draws the `--html` page; the synthetic page is hxlab-contract's).

pub mod options;
pub mod page;
mod reach;
pub mod replay;
mod replay_ports;
pub mod runs;
mod started;
pub mod synthetic;
pub mod text;
pub mod totals;

pub use runs::PageError;
