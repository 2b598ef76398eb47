//! One exporter per format behind one trait (as hyperfine's `src/export/`): each renders the
//! same [`Report`] into a string; [`render_all`] writes the file formats into a directory.
//! The formats that show the report as a document (markdown, HTML, the terminal) share one
//! skeleton, `document`, which holds the order of the sections.

mod csv;
mod document;
mod html;
mod json;
mod markdown;
mod terminal;

pub use self::csv::CsvExporter;
pub use self::html::HtmlExporter;
pub use self::json::{SummaryJsonExporter, SUMMARY_SCHEMA};
pub use self::markdown::MarkdownExporter;
pub use self::terminal::TerminalExporter;

use crate::cells::CellSummary;
use crate::figures::fmt_num;
use crate::report::{Figure, Report};
use crate::ReportError;
use std::path::{Path, PathBuf};

/// A report format.
pub trait Exporter {
    /// File the format is written to in a results directory (None: not written to a file).
    fn file_name(&self) -> Option<&'static str>;
    /// Renders the report.
    fn render(&self, report: &Report) -> Result<String, ReportError>;
}

/// Every file format, in the order they are written.
pub fn file_exporters() -> Vec<Box<dyn Exporter>> {
    vec![
        Box::new(MarkdownExporter),
        Box::new(CsvExporter),
        Box::new(HtmlExporter),
        Box::new(SummaryJsonExporter),
    ]
}

/// Writes report.md, results.csv, report.html and summary.json into `dir` (each atomically, so a reader
/// never sees half a file); returns their paths.
pub fn render_all(dir: &Path, report: &Report) -> Result<Vec<PathBuf>, ReportError> {
    let mut written = Vec::new();
    for e in file_exporters() {
        let Some(name) = e.file_name() else { continue };
        let text = e.render(report)?;
        let path = dir.join(name);
        hxlab_core::write_atomically(&path, text.as_bytes()).map_err(|source| ReportError::Io {
            path: path.clone(),
            source,
        })?;
        written.push(path);
    }
    Ok(written)
}

/// A figure as text: `0.512 (0.498–0.530)` for ours, `0.48` for published ones; a `!`
/// marks a figure with warnings.
pub(crate) fn figure_text(f: &Option<Figure>, with_ci: bool) -> String {
    match f {
        None => "—".into(),
        Some(f) => {
            let mut s = fmt_num(f.value);
            if with_ci {
                if let Some((lo, hi)) = f.ci {
                    if lo != hi {
                        s.push_str(&format!(" ({}–{})", fmt_num(lo), fmt_num(hi)));
                    }
                }
            }
            if f.warn {
                s.push_str(" !");
            }
            s
        }
    }
}

/// A cell's figures as the cells tables show them, in their column order: repetitions kept
/// of those run (`3/3`), median, mean, stdev, and the 95 % interval (`lo–hi`).
pub(crate) fn cell_figures(c: &CellSummary) -> [String; 5] {
    [
        format!("{}/{}", c.values.len(), c.repetitions),
        fmt_num(c.median),
        fmt_num(c.mean),
        fmt_num(c.stdev),
        format!("{}–{}", fmt_num(c.ci.0), fmt_num(c.ci.1)),
    ]
}

/// A secondary figure of a cell (see [`crate::figures::METRICS`]), `—` when it has none.
pub(crate) fn secondary_text(c: &CellSummary, name: &str) -> String {
    c.secondary
        .get(name)
        .map(|v| fmt_num(*v))
        .unwrap_or_else(|| "—".into())
}

/// The conditions every cell shares, one line.
pub(crate) fn fixed_line(report: &Report) -> String {
    report
        .meta
        .factors
        .iter()
        .filter(|f| f.levels.len() == 1)
        .map(|f| format!("{} = {}", f.name, f.levels[0]))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The swept factors, one line.
pub(crate) fn swept_line(report: &Report) -> String {
    report
        .meta
        .factors
        .iter()
        .filter(|f| f.levels.len() > 1)
        .map(|f| format!("{} ∈ {{{}}}", f.name, f.levels.join(", ")))
        .collect::<Vec<_>>()
        .join("; ")
}

/// Negotiated protocols as `h2 ×3, http/1.1 ×1`.
/// "server/client" congestion controllers as read back, e.g. `reno/reno` or `bbr/cubic 2, reno 1`.
pub(crate) fn cc_text(
    server: &std::collections::BTreeMap<String, u64>,
    client: &std::collections::BTreeMap<String, u64>,
) -> String {
    format!(
        "{}/{}",
        hxlab_core::cc::counts_text(server),
        hxlab_core::cc::counts_text(client)
    )
}

/// hxlab's origin's send path as read back, `scheduler / mark / priorities`: `rfc9218 /
/// 16384 / u=3 ×30, u=0 ×1`; HTTP/1.1 has no scheduler (`none (HTTP/1.1)`), HTTP/3 no mark
/// (`-`); `—` for another origin.
pub(crate) fn scheduling_text(s: Option<&hxlab_core::sched::Scheduling>) -> String {
    let Some(s) = s else {
        return "—".into();
    };
    let scheduler = match (s.scheduler_applies, s.scheduler) {
        (false, _) => "none (HTTP/1.1)",
        (true, Some(x)) => x.name(),
        (true, None) => "?",
    };
    format!(
        "{scheduler} / {} / {}",
        s.lowat_text(),
        negotiated_text(&s.priorities)
    )
}

pub(crate) fn negotiated_text(n: &std::collections::BTreeMap<String, u64>) -> String {
    if n.is_empty() {
        return "—".into();
    }
    n.iter()
        .map(|(k, v)| format!("{k} ×{v}"))
        .collect::<Vec<_>>()
        .join(", ")
}
