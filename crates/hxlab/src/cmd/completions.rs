//! `hxlab completions SHELL`: the completion script of a shell for every subcommand, flag and
//! fixed value of the command line, on stdout (clap_complete). Built from the same clap
//! definitions as the parser, so it cannot fall behind a flag.

use anyhow::Context;
use std::io::Write;
use std::process::ExitCode;

/// Options of `hxlab completions`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The shell whose script to print.
    #[arg(value_name = "SHELL")]
    pub shell: clap_complete::Shell,
}

/// Prints the script completing `command` (hxlab's whole command line) in `args.shell`.
pub fn run(args: Args, mut command: clap::Command) -> anyhow::Result<ExitCode> {
    // clap_complete panics on a failed write; into memory first, so a closed stdout is an error.
    let mut script = Vec::new();
    clap_complete::generate(args.shell, &mut command, "hxlab", &mut script);
    std::io::stdout()
        .lock()
        .write_all(&script)
        .context("write the completion script to stdout")?;
    Ok(ExitCode::SUCCESS)
}
