//! `hxlab trace`.

use std::process::ExitCode;

/// Options of `hxlab trace`.
#[derive(clap::Args, Debug)]
pub struct Args {}

/// Runs `hxlab trace`.
pub fn run(_args: Args) -> anyhow::Result<ExitCode> {
    super::not_yet("trace", 6)
}
