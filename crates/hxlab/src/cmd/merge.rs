//! `hxlab merge`.

use std::process::ExitCode;

/// Options of `hxlab merge`.
#[derive(clap::Args, Debug)]
pub struct Args {}

/// Runs `hxlab merge`.
pub fn run(_args: Args) -> anyhow::Result<ExitCode> {
    super::not_yet("merge", 3)
}
