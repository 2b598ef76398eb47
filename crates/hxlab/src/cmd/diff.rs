//! `hxlab diff A.json B.json`: `hxlab merge`'s sibling. Two sets of `hxlab load` results
//! side by side, every factor they differ in (asked, read back from the connections, or of
//! the environment), and every figure with B/A; with repetitions on both sides (several
//! documents in a file, or `--a`/`--b` lists), an interval and a significance test per
//! figure ([`hxlab_report::rundiff`]).

use super::merge::{parse_documents, read_input};
use anyhow::Context;
use hxlab_core::RunResult;
use hxlab_report::rundiff::{RunDiff, Side};
use std::path::Path;
use std::process::ExitCode;

/// Options of `hxlab diff`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// A: a RunResult file of `hxlab load --json` ("-": stdin); several JSON documents in it
    /// (`--json - >> a.json`, once per run) are A's repetitions. Or a results directory of
    /// `hxlab run`: the repetitions of one of its cells (--a-cell), whose records also carry
    /// the server's side (its congestion controller, scheduler).
    #[arg(value_name = "A")]
    pub a: String,
    /// B, as A.
    #[arg(value_name = "B")]
    pub b: String,
    /// With a results directory as A: the cell whose repetitions are A, by the factor=level
    /// words of its key that pick it out (e.g. "cc=reno scheduler=fifo"); needed when the
    /// run has several cells.
    #[arg(long = "a-cell", value_name = "KEY")]
    pub a_cell: Option<String>,
    /// The same for B.
    #[arg(long = "b-cell", value_name = "KEY")]
    pub b_cell: Option<String>,
    /// Also write the diff as JSON here ("-": stdout, and the table goes to stderr).
    #[arg(long, value_name = "FILE")]
    pub json: Option<String>,
}

/// One side: a results directory's cell, or the RunResults of a file or stdin.
fn side(name: &str, cell: Option<&str>) -> anyhow::Result<Side> {
    let dir = Path::new(name);
    if name != "-" && dir.is_dir() {
        return cell_side(dir, cell);
    }
    if let Some(c) = cell {
        return Err(super::usage(format!(
            "diff: a cell ({c:?}) is picked from a results directory; {name} is not one"
        )));
    }
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
    Ok(Side::of_results(&label, runs))
}

/// The records of one cell of the results directory `dir`: the cell whose key has every
/// `factor=level` of `cell` ("cc=reno scheduler=fifo"), or the only cell when none is named.
fn cell_side(dir: &Path, cell: Option<&str>) -> anyhow::Result<Side> {
    let records = hxlab_report::read_records(&dir.join("results.jsonl"))
        .map_err(|e| super::usage(format!("diff: {e}")))?;
    let mut cells: Vec<&str> = records.iter().map(|r| r.cell.as_str()).collect();
    cells.sort_unstable();
    cells.dedup();
    let wanted: Vec<&str> = cell.map_or_else(Vec::new, |c| c.split_whitespace().collect());
    let matching: Vec<&str> = cells
        .iter()
        .copied()
        .filter(|key| {
            let words: Vec<&str> = key.split_whitespace().collect();
            wanted.iter().all(|w| words.contains(w))
        })
        .collect();
    let key = match matching.as_slice() {
        [only] => *only,
        [] if cells.is_empty() => {
            return Err(super::usage(format!(
                "diff: {} holds no records",
                dir.display()
            )))
        }
        found => {
            let why = if found.is_empty() {
                format!("no cell has {:?}", cell.unwrap_or(""))
            } else {
                format!(
                    "{} cells match; name one with --a-cell/--b-cell",
                    found.len()
                )
            };
            let listed = if found.is_empty() { &cells[..] } else { found };
            return Err(super::usage(format!(
                "diff: {}: {why}: {}",
                dir.display(),
                listed.join(" | ")
            )));
        }
    };
    let mine: Vec<hxlab_report::Record> =
        records.iter().filter(|r| r.cell == key).cloned().collect();
    Ok(Side::of_records(
        &format!("{} cell {key}", dir.display()),
        &mine,
    ))
}

/// Runs `hxlab diff`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    if args.a == "-" && args.b == "-" {
        return Err(super::usage("diff: stdin (\"-\") may be named once"));
    }
    let a = side(&args.a, args.a_cell.as_deref())?;
    let b = side(&args.b, args.b_cell.as_deref())?;
    let d = RunDiff::of_sides(&a, &b);
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
