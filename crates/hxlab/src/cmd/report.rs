//! `hxlab report`.

use std::process::ExitCode;

/// Options of `hxlab report`.
#[derive(clap::Args, Debug)]
pub struct Args {}

/// Runs `hxlab report`.
pub fn run(_args: Args) -> anyhow::Result<ExitCode> {
    super::not_yet("report", 5)
}
