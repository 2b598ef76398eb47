//! `hxlab run`.

use std::process::ExitCode;

/// Options of `hxlab run`.
#[derive(clap::Args, Debug)]
pub struct Args {}

/// Runs `hxlab run`.
pub fn run(_args: Args) -> anyhow::Result<ExitCode> {
    super::not_yet("run", 5)
}
