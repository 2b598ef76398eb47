//! `hxlab link`.

use std::process::ExitCode;

/// Options of `hxlab link`.
#[derive(clap::Args, Debug)]
pub struct Args {}

/// Runs `hxlab link`.
pub fn run(_args: Args) -> anyhow::Result<ExitCode> {
    super::not_yet("link", 4)
}
