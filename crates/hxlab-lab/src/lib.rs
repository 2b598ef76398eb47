//! hxlab-lab: experiments that compare HTTP/1.1, HTTP/2 and HTTP/3.
//!
//! What it is for: reading an experiment file (TOML: a base configuration and factors to
//! sweep), refusing impossible or malformed ones before anything runs (with file:line:column),
//! expanding the matrix into cells, running every repetition of every cell by driving
//! `hxlab serve`, `hxlab load`, `hxlab page` and `hxlab link` as child processes, each handed
//! its typed contract from hxlab-contract on `--config` (a `ServeConfig`, a `LoadConfig` or a
//! `PageJob` per repetition, a `LinkConfig` per link, whose command is `hxlab load --jobs`,
//! handed a `LoadJob` per repetition; one `run_child` spawns, meters, bounds and records
//! them, on hxlab-child's process groups, and records `compare --page`'s page too:
//! [`runner::record_page`]), and appending each result to `results.jsonl` as it comes (so
//! `--resume` can skip what is done). The built-in scenarios that reproduce the published
//! studies live here with their published tables.
//! Workloads: `resources` and `throughput` run `hxlab load`; `browser` runs `hxlab page`.
//! hxlab-child's `origin` starts the `hxlab serve` a run measures against; [`command`]
//! starts the other servers an experiment names (`[origins.NAME]` tables: nginx, h2o, Caddy,
//! ...) and reads their process tree's CPU; url origins are servers the lab does not run.
//! What it is not: no protocol code and no statistics of its own — the server, client and
//! link are the other subcommands (it builds without quinn, rustls, the load engine or a
//! browser crate: pages are `hxlab page` children, read back as `PageReport`s), and
//! hxlab-report turns the records into reports.

pub mod command;
pub mod experiment;
pub mod profiles;
pub mod runner;
pub mod scenarios;

pub use experiment::{Cell, CellConfig, Experiment, Overrides, Protocol, SpecError};
pub use runner::{RunOptions, RunSummary, Runner, RunnerError};
