//! `hxlab report DIR [--baseline OTHER_DIR]`: re-renders report.md, results.csv,
//! report.html and summary.json from a results directory's results.jsonl and
//! experiment.json, and prints the verdict and the table; with a baseline, the report gains a
//! before/after section matching the cells of both runs.

use super::run::{emit, emit_raw};
use hxlab_report::export::TerminalExporter;
use hxlab_report::Exporter;
use std::path::PathBuf;
use std::process::ExitCode;

/// Options of `hxlab report`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Results directory written by `hxlab run` or `hxlab compare`.
    #[arg(value_name = "DIR")]
    pub dir: PathBuf,
    /// An earlier results directory of the same experiment: the report compares every cell
    /// with its match there (ratio, 95 % CI, shift, Mann-Whitney p) and says what got faster
    /// or slower.
    #[arg(long, value_name = "OTHER_DIR")]
    pub baseline: Option<PathBuf>,
    /// Do not print the table on the terminal.
    #[arg(long, short = 'q')]
    pub quiet: bool,
}

/// Runs `hxlab report`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    if !args.dir.join(hxlab_report::META_FILE).is_file() {
        return Err(super::usage(format!(
            "{} is not a results directory (no {}); give the directory `hxlab run` wrote",
            args.dir.display(),
            hxlab_report::META_FILE
        )));
    }
    let report = match &args.baseline {
        None => super::run::render(&args.dir)?,
        Some(base) => render_against(&args.dir, base)?,
    };
    let results = args.dir.join(hxlab_report::RESULTS_FILE);
    if let Ok((_, Some(line))) = hxlab_report::read_records_and_cut(&results) {
        // Said even with -q: the report holds one repetition less than the file began.
        eprintln!(
            "hxlab: note: {} line {line} was cut short (an interrupted run) and is left out; `hxlab run --resume` runs that repetition again",
            results.display()
        );
    }
    if !args.quiet {
        emit_raw!("{}", TerminalExporter.render(&report)?);
    }
    emit!("report: {}", args.dir.join("report.md").display());
    Ok(ExitCode::SUCCESS)
}

/// Builds the report of `dir` with a before/after section against `base`, and writes it.
fn render_against(
    dir: &std::path::Path,
    base: &std::path::Path,
) -> anyhow::Result<hxlab_report::Report> {
    if !base.join(hxlab_report::META_FILE).is_file() {
        return Err(super::usage(format!(
            "--baseline {}: not a results directory (no {})",
            base.display(),
            hxlab_report::META_FILE
        )));
    }
    let read = |d: &std::path::Path| -> anyhow::Result<hxlab_report::Report> {
        let (meta, records) = hxlab_report::load_dir(d)
            .map_err(|e| super::usage(format!("cannot read results in {}: {e}", d.display())))?;
        Ok(hxlab_report::Report::build(meta, records))
    };
    let before = read(base)?;
    let mut report = read(dir)?;
    let ba = report
        .against(&before, &base.display().to_string())
        .map_err(|e| super::usage(format!("--baseline: {e}")))?;
    report.before_after = Some(ba);
    hxlab_report::render_all(dir, &report)
        .map_err(|e| anyhow::anyhow!("cannot write the report: {e}"))?;
    Ok(report)
}
