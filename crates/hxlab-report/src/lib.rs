//! hxlab-report: what an experiment's results say, in the formats people read.
//!
//! What it is for: the record format of `results.jsonl` ([`Record`]) and the experiment's
//! description beside it ([`ExperimentMeta`]), statistics over repetitions (median, mean,
//! stdev, bootstrap CI, ratios between protocols with Mann-Whitney significance), warnings
//! when a number should not be trusted, the verdict (one line per protocol pair across
//! conditions, whether it holds across each swept factor, differences within 2 % called
//! equal, differences with too few repetitions to test said as they look, problems grouped by
//! kind; see [`verdict`]), one exporter per
//! format behind the [`Exporter`] trait (markdown, csv, html with hand-written SVG charts,
//! summary.json, the terminal), before/after against a baseline run, `hxlab diff` of two
//! RunResult sets, page-load waterfalls and the `hxlab page --html` page ([`page_html`]), and
//! the text summary of one run ([`run_summary`], what `hxlab load` and `hxlab merge` print).
//! From the bottom up: [`figures`] (levels and the form of a number), [`cells`]
//! (each cell's statistics), [`comparisons`] and [`baseline`] (pairs of cells), [`report`]
//! (the [`Report`] every format shows), then [`verdict`], [`charts`] and [`export`].
//! What it is not: it runs nothing and measures nothing; it only reads `RunResult`s that
//! `hxlab load` produced and the lab stored.

pub mod baseline;
pub mod cells;
pub mod charts;
pub mod comparisons;
pub mod export;
pub mod figures;
pub mod model;
pub mod page_html;
pub mod report;
pub mod run_factors;
pub mod run_summary;
pub mod rundiff;
pub mod verdict;
pub mod waterfall;

pub use cells::CellSummary;
pub use comparisons::Comparison;
pub use export::{render_all, Exporter};
pub use model::{
    ExperimentMeta, FactorLevels, Metric, PublishedRow, PublishedTable, Record, ServerCost,
    Workload,
};
pub use report::{Report, Table};

use std::path::{Path, PathBuf};

/// Why a report could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// A file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// A line of results.jsonl is not a record as the lab writes it.
    #[error("{path} line {line}: not a result record: {reason}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// The parser's explanation, with the column.
        reason: String,
    },
    /// experiment.json is not an experiment description as the lab writes it.
    #[error("{path}: not an experiment description: {reason}")]
    Meta {
        /// The file.
        path: PathBuf,
        /// The parser's explanation, with the line and column.
        reason: String,
    },
    /// A chart could not be drawn.
    #[error("chart {title:?}: {reason}")]
    Chart {
        /// The chart's title.
        title: String,
        /// The plotting library's explanation.
        reason: String,
    },
}

/// File name of the experiment description in a results directory.
pub const META_FILE: &str = "experiment.json";
/// File name of the records, one JSON object per line.
pub const RESULTS_FILE: &str = "results.jsonl";

/// Reads `experiment.json` and `results.jsonl` from a results directory. A truncated last
/// line (an interrupted run) is ignored, since the record it began was never finished.
pub fn load_dir(dir: &Path) -> Result<(ExperimentMeta, Vec<Record>), ReportError> {
    let meta_path = dir.join(META_FILE);
    let text = hxlab_core::read_capped_string(&meta_path, hxlab_core::files::cap::TEXT).map_err(
        |source| ReportError::Io {
            path: meta_path.clone(),
            source,
        },
    )?;
    let meta: ExperimentMeta = serde_json::from_str(&text).map_err(|e| ReportError::Meta {
        path: meta_path.clone(),
        reason: e.to_string(),
    })?;
    let records = read_records(&dir.join(RESULTS_FILE))?;
    Ok((meta, records))
}

/// Reads the records of a `results.jsonl`; a missing file is an empty list.
pub fn read_records(path: &Path) -> Result<Vec<Record>, ReportError> {
    read_records_and_cut(path).map(|(records, _)| records)
}

/// Like [`read_records`], and says which line was left out because it was cut short: the
/// last line, without its newline and not a whole record (a run interrupted mid-write).
pub fn read_records_and_cut(path: &Path) -> Result<(Vec<Record>, Option<usize>), ReportError> {
    use hxlab_core::files::cap;
    let io_err = |source| ReportError::Io {
        path: path.to_path_buf(),
        source,
    };
    let lines = match hxlab_core::read_lines_capped(path, cap::RESULTS_LINE, cap::RESULTS) {
        Ok(l) => l,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok((Vec::new(), None)),
        Err(source) => return Err(io_err(source)),
    };
    let mut records = Vec::new();
    let mut cut = None;
    for (i, line) in lines.enumerate() {
        let line = line.map_err(io_err)?;
        if line.text.trim().is_empty() {
            continue;
        }
        match serde_json::from_str::<Record>(&line.text) {
            Ok(r) => records.push(r),
            // The last line may have been cut by an interruption (only the last one ends
            // without a newline); anything else is damage.
            Err(_) if !line.ended => cut = Some(i + 1),
            Err(e) => {
                return Err(ReportError::Parse {
                    path: path.to_path_buf(),
                    line: i + 1,
                    reason: record_reason(&e),
                })
            }
        }
    }
    Ok((records, cut))
}

/// serde_json's explanation of a bad line of results.jsonl, with only the column: each line
/// is parsed alone, so the "line 1" serde_json puts in every message is not the file's line.
fn record_reason(e: &serde_json::Error) -> String {
    let text = e.to_string();
    let place = format!(" at line {} column {}", e.line(), e.column());
    match text.strip_suffix(&place) {
        Some(what) => format!("{what} (column {})", e.column()),
        None => text,
    }
}
