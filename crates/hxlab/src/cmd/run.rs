//! `hxlab run`: an experiment file or a built-in scenario → results.jsonl, report.md,
//! results.csv, report.html and a table on the terminal.

use anyhow::Context;

/// Writes a line to stdout; a closed pipe (`hxlab run ... | head`) is not an error worth a
/// panic, so write errors are ignored.
macro_rules! emit {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout().lock(), $($t)*);
    }};
}
/// Like `emit!` without the newline.
macro_rules! emit_raw {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        let _ = write!(std::io::stdout().lock(), $($t)*);
    }};
}
use hxlab_lab::scenarios;
use hxlab_lab::{Experiment, Overrides, RunOptions, RunSummary, Runner};
use hxlab_report::export::TerminalExporter;
use hxlab_report::{Exporter, Report};
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
pub(crate) use {emit, emit_raw};

/// Options of `hxlab run`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Experiment file (TOML); see docs/experiments.md and examples/.
    #[arg(value_name = "FILE", conflicts_with = "scenario")]
    pub file: Option<PathBuf>,
    /// Run a built-in scenario instead of a file (see --list-scenarios).
    #[arg(long, value_name = "NAME")]
    pub scenario: Option<String>,
    /// List the built-in scenarios and exit.
    #[arg(long)]
    pub list_scenarios: bool,
    /// Print the cells the experiment expands to and exit without running anything.
    #[arg(long)]
    pub dry_run: bool,
    #[command(flatten)]
    pub common: CommonArgs,
}

/// Options `hxlab run` and `hxlab compare` share.
#[derive(clap::Args, Debug, Default)]
pub struct CommonArgs {
    /// Results directory (default: ./hxlab-NAME-YYYYMMDD-HHMMSS).
    #[arg(long, short = 'o', value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Continue an interrupted run in --out DIR, skipping finished repetitions.
    #[arg(long, requires = "out")]
    pub resume: bool,
    /// Repetitions per cell (overrides the file).
    #[arg(long, short = 'r', value_name = "N")]
    pub repetitions: Option<u32>,
    /// Replace a factor's values, e.g. --set delay=0ms,30ms --set protocol=h1,h2 (repeatable).
    #[arg(long = "set", value_name = "FACTOR=V1,V2")]
    pub set: Vec<String>,
    /// Warm-up before measuring (throughput workload), e.g. 1s.
    #[arg(long, value_name = "DUR")]
    pub warm_up: Option<String>,
    /// Longest one repetition may take before it is stopped and recorded as failed.
    #[arg(long, value_name = "DUR")]
    pub timeout: Option<String>,
    /// Browser workload: count a page load only when every resource loaded and answered
    /// below 400 (as `hxlab page --strict`; the file's `strict = true`).
    #[arg(long)]
    pub strict: bool,
    /// No progress bar even on a terminal.
    #[arg(long)]
    pub no_progress: bool,
    /// Keep a pcapng of every network cell (its repetitions in one link) in
    /// DIR/evidence/CELL.pcapng, with SSLKEYLOGFILE's secrets embedded when it is set.
    #[arg(long)]
    pub pcap: bool,
    /// Keep a qlog of every QUIC connection of every cell in DIR/evidence/CELL/.
    #[arg(long)]
    pub qlog: bool,
}

impl CommonArgs {
    /// The overrides these options ask for.
    pub fn overrides(&self) -> anyhow::Result<Overrides> {
        let dur = |name: &str, v: &Option<String>| -> anyhow::Result<Option<Duration>> {
            v.as_deref()
                .map(|s| {
                    hxlab_core::parse_duration(s)
                        .map_err(|e| super::usage(format!("--{name}: {e}")))
                })
                .transpose()
        };
        Ok(Overrides {
            repetitions: self.repetitions,
            set: self.set.clone(),
            warm_up: dur("warm-up", &self.warm_up)?,
            timeout: dur("timeout", &self.timeout)?.filter(|d| !d.is_zero()),
            strict: self.strict,
        })
    }
}

/// Runs `hxlab run`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    if args.list_scenarios {
        for s in scenarios::SCENARIOS {
            emit!("{:<20} {}", s.name, s.summary);
        }
        return Ok(ExitCode::SUCCESS);
    }
    let overrides = args.common.overrides()?;
    let exp = match (&args.file, &args.scenario) {
        (Some(path), _) => {
            let src = hxlab_core::read_capped_string(path, hxlab_core::files::cap::TEXT)
                .map_err(|e| super::usage(format!("cannot read {}: {e}", path.display())))?;
            hxlab_lab::experiment::parse(&path.display().to_string(), &src, &overrides)
                .map_err(|e| super::usage(e.to_string()))?
        }
        (None, Some(name)) => {
            let s = scenarios::find(name).ok_or_else(|| {
                super::usage(format!(
                    "unknown scenario {name:?}; known: {}",
                    scenarios::SCENARIOS
                        .iter()
                        .map(|s| s.name)
                        .collect::<Vec<_>>()
                        .join(", ")
                ))
            })?;
            scenarios::load(s, &overrides).map_err(|e| super::usage(e.to_string()))?
        }
        (None, None) => {
            return Err(super::usage(
                "give an experiment FILE or --scenario NAME (see --list-scenarios)",
            ))
        }
    };
    if args.dry_run {
        emit!(
            "{}: {} cells × {} repetitions = {} runs",
            exp.name,
            exp.cells.len(),
            exp.repetitions,
            exp.total_runs()
        );
        for c in &exp.cells {
            emit!(
                "  {}{}",
                c.key,
                if c.config.needs_link() {
                    "  (through hxlab link)"
                } else {
                    ""
                }
            );
        }
        return Ok(ExitCode::SUCCESS);
    }
    let (summary, report, dir) = execute(&exp, &args.common, &[])?;
    finish(&summary, &report, &dir)
}

/// The `hxlab` binary the lab starts serve/load/link from: $HXLAB_BIN or this executable.
pub fn hxlab_bin() -> anyhow::Result<PathBuf> {
    if let Some(p) = std::env::var_os("HXLAB_BIN").filter(|p| !p.is_empty()) {
        return Ok(PathBuf::from(p));
    }
    std::env::current_exe().context("cannot find the hxlab executable (set HXLAB_BIN)")
}

/// `YYYYMMDD-HHMMSS` in UTC, for default directory names.
pub fn timestamp() -> String {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0);
    hxlab_core::shard::format_compact(secs)
}

/// Runs an experiment into its directory and renders the reports.
pub fn execute(
    exp: &Experiment,
    common: &CommonArgs,
    notes: &[String],
) -> anyhow::Result<(RunSummary, Report, PathBuf)> {
    let dir = common
        .out
        .clone()
        .unwrap_or_else(|| PathBuf::from(format!("hxlab-{}-{}", exp.name, timestamp())));
    let tty = std::io::stderr().is_terminal();
    eprintln!(
        "hxlab: {}: {} cells × {} repetitions = {} runs → {}",
        exp.name,
        exp.cells.len(),
        exp.repetitions,
        exp.total_runs(),
        dir.display()
    );
    let mut runner = Runner::new(RunOptions {
        out_dir: dir.clone(),
        resume: common.resume,
        hxlab_bin: hxlab_bin()?,
        progress: tty && !common.no_progress,
        log_cells: !tty,
        notes: notes.to_vec(),
        pcap: common.pcap,
        qlog: common.qlog,
    });
    let summary = runner
        .run(exp)
        .with_context(|| format!("experiment {}", exp.name))?;
    let report = render(&dir)?;
    Ok((summary, report, dir))
}

/// Re-reads a results directory and writes report.md, results.csv and report.html.
pub fn render(dir: &Path) -> anyhow::Result<Report> {
    // Results that cannot be read are bad input (exit 2), like any other file named.
    let (meta, records) = hxlab_report::load_dir(dir)
        .map_err(|e| super::usage(format!("cannot read results in {}: {e}", dir.display())))?;
    let report = Report::build(meta, records);
    hxlab_report::render_all(dir, &report).context("cannot write the report")?;
    Ok(report)
}

/// Prints the terminal table and where the files are; the exit code says whether anything
/// was measured.
pub fn finish(summary: &RunSummary, report: &Report, dir: &Path) -> anyhow::Result<ExitCode> {
    emit_raw!("{}", TerminalExporter.render(report)?);
    for n in &summary.notes {
        emit!("note: {n}");
    }
    emit!(
        "{} runs ({} failed, {} skipped{}) in {:.1} s; report: {}",
        summary.runs,
        summary.failed,
        summary.skipped,
        if summary.resumed > 0 {
            format!(", {} already done", summary.resumed)
        } else {
            String::new()
        },
        summary.wall_s + summary.setup_s,
        dir.join("report.md").display()
    );
    let clean = report.records.iter().any(|r| r.is_clean());
    Ok(if clean {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
