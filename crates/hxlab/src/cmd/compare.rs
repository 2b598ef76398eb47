//! `hxlab compare`: the one-command default. No file and no setup: the built-in `compare`
//! matrix (h1, h1+TLS, h2, h3 × server delay × number of resources on loopback, plus one
//! emulated network when `hxlab link` works here), a table on the terminal, the report in a
//! directory it names, and the runner's overhead over the cells' own measured time.

use super::run::emit;
use super::run::{execute, finish, CommonArgs};
use hxlab_lab::scenarios;
use std::process::ExitCode;

/// Options of `hxlab compare`.
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    pub common: CommonArgs,
}

/// Runs `hxlab compare`.
pub fn run(mut args: Args) -> anyhow::Result<ExitCode> {
    let scenario = scenarios::find("compare")
        .ok_or_else(|| anyhow::anyhow!("the compare scenario is missing from this build"))?;
    let exp = scenarios::load(scenario, &args.common.overrides()?)
        .map_err(|e| super::usage(e.to_string()))?;
    if args.common.out.is_none() {
        args.common.out = Some(format!("hxlab-compare-{}", super::run::timestamp()).into());
    }
    let (summary, report, dir) = execute(&exp, &args.common)?;
    let code = finish(&summary, &report, &dir)?;
    if summary.measured_s > 0.0 {
        emit!(
            "runner overhead: {:.1} % over the cells' own measured time ({:.2} s wall for {:.2} s measured){}; {:.2} s before the first cell (server start{})",
            summary.overhead() * 100.0,
            summary.wall_s,
            summary.measured_s,
            if summary.link_s > 0.0 {
                format!(
                    "; {:.1} % without the {:.2} s hxlab link spent tearing its links down",
                    summary.overhead_without_link() * 100.0,
                    summary.link_s
                )
            } else {
                String::new()
            },
            summary.setup_s,
            if summary.notes.iter().any(|n| n.contains("link emulation is not available")) { "" } else { ", link probe" }
        );
    }
    Ok(code)
}
