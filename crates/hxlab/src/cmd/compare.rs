//! `hxlab compare`.

use std::process::ExitCode;

/// Options of `hxlab compare`.
#[derive(clap::Args, Debug)]
pub struct Args {}

/// Runs `hxlab compare`.
pub fn run(_args: Args) -> anyhow::Result<ExitCode> {
    super::not_yet("compare", 5)
}
