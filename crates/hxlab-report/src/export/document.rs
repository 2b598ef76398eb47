//! The report as a document, its shape written once (as hyperfine's `MarkupExporter` gives
//! its markup formats one table): [`Document::write`] lays the sections out in the one order,
//! and a format (markdown, HTML, the terminal) only says how each section looks, leaving
//! out the ones it does not show. Every [`Document`] is an [`Exporter`].
//!
//! results.csv (one row per repetition) and summary.json (an object whose keys serde_json
//! sorts) are data, not documents: they have no section order to share.

use super::Exporter;
use crate::baseline::BeforeAfter;
use crate::report::Report;
use crate::ReportError;

/// One of the report's bulleted lists.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum List {
    /// The report's warnings, one per line.
    Warnings,
    /// The experiment's notes.
    Notes,
}

impl List {
    /// The section's title.
    pub fn title(self) -> &'static str {
        match self {
            List::Warnings => "Warnings",
            List::Notes => "Notes",
        }
    }
}

/// A format of the report as a document: each method writes one section into `o`; a
/// section a format does not show keeps the default, which writes nothing.
pub trait Document {
    /// File the format is written to in a results directory (None: not written to a file).
    const FILE: Option<&'static str>;

    /// The title, the description, what was swept and fixed, and how to read the figures.
    fn heading(&self, _o: &mut String, _r: &Report) {}
    /// The verdict.
    fn verdict(&self, o: &mut String, r: &Report);
    /// This run against a baseline run, when one was given.
    fn before_after(&self, o: &mut String, b: &BeforeAfter);
    /// The charts and page-load waterfalls.
    fn charts(&self, _o: &mut String, _r: &Report) {}
    /// The tables laid out like the studies'.
    fn tables(&self, o: &mut String, r: &Report);
    /// Every comparison, condition by condition.
    fn comparisons(&self, _o: &mut String, _r: &Report) {}
    /// A bulleted list (no items: no section).
    fn list(&self, o: &mut String, which: List, items: &[String]);
    /// One row per cell with its statistics.
    fn cells(&self, _o: &mut String, _r: &Report) {}
    /// What closes the document.
    fn end(&self, _o: &mut String) {}

    /// The whole document: the sections in the report's one order.
    fn write(&self, r: &Report) -> String {
        let mut o = String::new();
        self.heading(&mut o, r);
        self.verdict(&mut o, r);
        if let Some(b) = &r.before_after {
            self.before_after(&mut o, b);
        }
        self.charts(&mut o, r);
        self.tables(&mut o, r);
        self.comparisons(&mut o, r);
        self.list(&mut o, List::Warnings, &r.warnings);
        self.list(&mut o, List::Notes, &r.meta.notes);
        self.cells(&mut o, r);
        self.end(&mut o);
        o
    }
}

impl<D: Document> Exporter for D {
    fn file_name(&self) -> Option<&'static str> {
        D::FILE
    }

    fn render(&self, report: &Report) -> Result<String, ReportError> {
        Ok(self.write(report))
    }
}
