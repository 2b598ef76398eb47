//! `hxlab lab-agent` (hidden): the lab's agent inside a link. `hxlab run` starts it as the
//! command of `hxlab link` and sends it load jobs on stdin (see `hxlab_lab::agent`).

use anyhow::Context;
use std::process::ExitCode;

/// No options: everything comes as typed jobs on stdin.
#[derive(clap::Args, Debug)]
pub struct Args {}

/// Runs the agent until its input ends.
pub fn run(_args: Args) -> anyhow::Result<ExitCode> {
    let host = std::env::var("HXLAB_LINK_HOST").map_err(|_| {
        super::usage("lab-agent runs inside `hxlab link` (HXLAB_LINK_HOST is not set); it is started by `hxlab run`")
    })?;
    let bin = std::env::current_exe().context("locating the hxlab binary")?;
    let stdin = std::io::stdin().lock();
    let stdout = std::io::stdout().lock();
    hxlab_lab::agent::serve_jobs(stdin, stdout, &host, &bin).map_err(anyhow::Error::msg)?;
    Ok(ExitCode::SUCCESS)
}
