//! `hxlab page`.

use std::process::ExitCode;

/// Options of `hxlab page`.
#[derive(clap::Args, Debug)]
pub struct Args {}

/// Runs `hxlab page`.
pub fn run(_args: Args) -> anyhow::Result<ExitCode> {
    super::not_yet("page", 7)
}
