//! `hxlab merge`: adds RunResult JSON files from several runs (threads, processes,
//! machines) into one, exactly: counts add up and histograms merge sample for sample.

use anyhow::Context;
use hxlab_core::RunResult;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

/// Options of `hxlab merge`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// RunResult JSON files (one object each, or one object per line).
    #[arg(required = true, value_name = "FILE")]
    pub inputs: Vec<PathBuf>,
    /// Write the merged result here instead of stdout.
    #[arg(short = 'o', long = "output", value_name = "OUT")]
    pub output: Option<PathBuf>,
}

/// Reads every RunResult in `path` (a JSON object, or JSON lines).
pub fn read_results(path: &std::path::Path) -> anyhow::Result<Vec<RunResult>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    if let Ok(one) = serde_json::from_str::<RunResult>(&text) {
        return Ok(vec![one]);
    }
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let r: RunResult = serde_json::from_str(line)
            .with_context(|| format!("{} line {}: not a RunResult", path.display(), i + 1))?;
        out.push(r);
    }
    if out.is_empty() {
        anyhow::bail!("{}: no RunResult in the file", path.display());
    }
    Ok(out)
}

/// Runs `hxlab merge`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let mut merged = RunResult::default();
    for p in &args.inputs {
        for r in read_results(p)? {
            // Counts from another schema may mean something else: refuse rather than mix.
            if r.schema != hxlab_core::result::SCHEMA_VERSION {
                anyhow::bail!(
                    "{}: RunResult schema {} (this hxlab reads schema {})",
                    p.display(),
                    r.schema,
                    hxlab_core::result::SCHEMA_VERSION
                );
            }
            merged.merge(&r);
        }
    }
    let text = serde_json::to_string(&merged).context("serialise the merged result")?;
    match &args.output {
        Some(p) => std::fs::write(p, format!("{text}\n"))
            .with_context(|| format!("write {}", p.display()))?,
        None => {
            let mut out = std::io::stdout().lock();
            writeln!(out, "{text}").context("write to stdout")?;
        }
    }
    Ok(ExitCode::SUCCESS)
}
