//! What the terminal shows at the end of a run: the verdict, the tables in aligned columns
//! and the warnings, nothing that needs a browser.

use super::document::{Document, List};
use super::figure_text;
use crate::baseline::BeforeAfter;
use crate::report::Report;
use std::fmt::Write;

/// Plain-text tables for a terminal.
pub struct TerminalExporter;

/// Display width in characters (the figures use a few non-ASCII signs).
fn width(s: &str) -> usize {
    s.chars().count()
}

fn pad(s: &str, w: usize) -> String {
    format!("{s}{}", " ".repeat(w.saturating_sub(width(s))))
}

impl Document for TerminalExporter {
    const FILE: Option<&'static str> = None;

    // The verdict, the tables and the warnings only: every comparison, condition by
    // condition, is in report.md and report.html.
    fn verdict(&self, o: &mut String, r: &Report) {
        for line in r.verdict().plain() {
            let _ = writeln!(o, "{line}");
        }
        let _ = writeln!(o);
    }

    fn before_after(&self, o: &mut String, b: &BeforeAfter) {
        let _ = writeln!(o, "{}", b.text());
    }

    /// Each table under its title, in columns aligned by character count.
    fn tables(&self, o: &mut String, r: &Report) {
        for t in &r.tables {
            let _ = writeln!(o, "{}", t.title);
            let mut grid: Vec<Vec<String>> = Vec::new();
            let mut head = vec![t.corner.clone()];
            head.extend(t.columns.iter().cloned());
            grid.push(head);
            for row in &t.rows {
                let mut line = vec![row.label.clone()];
                line.extend(row.cells.iter().map(|f| figure_text(f, false)));
                grid.push(line);
            }
            let cols = grid.iter().map(Vec::len).max().unwrap_or(0);
            let widths: Vec<usize> = (0..cols)
                .map(|i| {
                    grid.iter()
                        .filter_map(|l| l.get(i))
                        .map(|s| width(s))
                        .max()
                        .unwrap_or(0)
                })
                .collect();
            for line in &grid {
                let cells: Vec<String> = line
                    .iter()
                    .enumerate()
                    .map(|(i, s)| pad(s, widths[i]))
                    .collect();
                let _ = writeln!(o, "  {}", cells.join("  ").trim_end());
            }
            let _ = writeln!(o);
        }
    }

    fn list(&self, o: &mut String, which: List, items: &[String]) {
        if which == List::Warnings {
            for w in items {
                let _ = writeln!(o, "warning: {w}");
            }
        }
    }
}
