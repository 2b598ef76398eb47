//! `hxlab diff A.json B.json`: `hxlab merge`'s sibling. Two sets of `hxlab load` results
//! side by side, every factor they differ in (asked, read back from the connections, or of
//! the environment), and every figure with B/A; with repetitions on both sides (several
//! documents in a file, or `--a`/`--b` lists), an interval and a significance test per
//! figure ([`hxlab_report::rundiff`]).

use super::merge::{parse_documents, read_input};
use anyhow::Context;
use hxlab_core::RunResult;
use hxlab_report::rundiff::RunDiff;
use std::path::Path;
use std::process::ExitCode;

/// Options of `hxlab diff`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// A: a RunResult file of `hxlab load --json` ("-": stdin). Several JSON documents in it
    /// (`--json - >> a.json`, once per run) are A's repetitions.
    #[arg(value_name = "A")]
    pub a: String,
    /// B, as A.
    #[arg(value_name = "B")]
    pub b: String,
    /// Also write the diff as JSON here ("-": stdout, and the table goes to stderr).
    #[arg(long, value_name = "FILE")]
    pub json: Option<String>,
}

fn side(name: &str) -> anyhow::Result<(String, Vec<RunResult>)> {
    let (label, text) = read_input(name)?;
    let docs = parse_documents(&label, &text)?;
    for s in &docs.skipped {
        eprintln!("diff: not JSON, skipped: {s}");
    }
    let runs: Vec<RunResult> = docs.results.into_iter().map(|(_, r)| r).collect();
    for r in &runs {
        if r.schema != hxlab_core::result::SCHEMA_VERSION {
            return Err(super::usage(format!(
                "{label}: RunResult schema {} (this hxlab reads schema {})",
                r.schema,
                hxlab_core::result::SCHEMA_VERSION
            )));
        }
    }
    Ok((label, runs))
}

/// Runs `hxlab diff`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    if args.a == "-" && args.b == "-" {
        return Err(super::usage("diff: stdin (\"-\") may be named once"));
    }
    let (la, a) = side(&args.a)?;
    let (lb, b) = side(&args.b)?;
    let d = RunDiff::build(&la, &a, &lb, &b);
    let text = d.text();
    match args.json.as_deref() {
        None => print!("{text}"),
        Some("-") => {
            eprint!("{text}");
            println!(
                "{}",
                serde_json::to_string(&d).context("serialise the diff")?
            );
        }
        Some(p) => {
            print!("{text}");
            let json = serde_json::to_string_pretty(&d).context("serialise the diff")?;
            hxlab_core::files::write_output(Path::new(p), format!("{json}\n").as_bytes())
                .with_context(|| format!("write {p}"))?;
        }
    }
    Ok(ExitCode::SUCCESS)
}
