//! `hxlab load`.

use std::process::ExitCode;

/// Options of `hxlab load`.
#[derive(clap::Args, Debug)]
pub struct Args {}

/// Runs `hxlab load`.
pub fn run(_args: Args) -> anyhow::Result<ExitCode> {
    super::not_yet("load", 3)
}
