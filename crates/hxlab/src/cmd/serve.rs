//! `hxlab serve`.

use std::process::ExitCode;

/// Options of `hxlab serve`.
#[derive(clap::Args, Debug)]
pub struct Args {}

/// Runs `hxlab serve`.
pub fn run(_args: Args) -> anyhow::Result<ExitCode> {
    super::not_yet("serve", 2)
}
