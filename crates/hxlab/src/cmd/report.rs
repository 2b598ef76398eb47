//! `hxlab report DIR`: re-renders report.md, results.csv and report.html from a results
//! directory's results.jsonl and experiment.json, and prints the table.

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
    let report = super::run::render(&args.dir)?;
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
