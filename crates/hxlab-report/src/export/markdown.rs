//! report.md: the tables laid out like the studies', comparisons, warnings and cell details.

use super::document::{Document, List};
use super::{
    cc_text, cell_figures, figure_text, fixed_line, negotiated_text, scheduling_text,
    secondary_text, swept_line,
};
use crate::baseline::BeforeAfter;
use crate::report::Report;
use crate::verdict::Kind;
use std::fmt::Write;

/// Markdown report (`report.md`).
pub struct MarkdownExporter;

fn cell(s: &str) -> String {
    s.replace('|', "\\|")
}

impl Document for MarkdownExporter {
    const FILE: Option<&'static str> = Some("report.md");

    /// The title, description, what was swept and fixed, and how to read the figures.
    fn heading(&self, o: &mut String, r: &Report) {
        let m = &r.meta;
        let _ = writeln!(
            o,
            "# {}\n",
            if m.title.is_empty() {
                &m.name
            } else {
                &m.title
            }
        );
        if !m.description.is_empty() {
            let _ = writeln!(o, "{}\n", m.description.trim());
        }
        let _ = writeln!(
            o,
            "- experiment: `{}`, workload `{}`, metric: {}, {} repetitions per cell\n- swept: {}\n- fixed: {}\n",
            m.name,
            format!("{:?}", m.workload()).to_lowercase(),
            r.metric.label(),
            m.repetitions,
            swept_line(r),
            fixed_line(r)
        );
        let _ = writeln!(o, "Figures are medians over repetitions with their 95 % bootstrap interval; `!` marks a figure with a warning below.\n");
    }

    /// The verdict block: the headline in bold, then its lines (the same text as the terminal's;
    /// markdown signs, since a leading `>` would open a quote).
    fn verdict(&self, o: &mut String, r: &Report) {
        let v = r.verdict();
        let _ = writeln!(o, "## Verdict\n\n**{}**\n", v.headline);
        for l in &v.lines {
            let sign = match l.kind {
                Kind::Problem => "⚠",
                Kind::Significant => "▸",
                Kind::Untested => "?",
                Kind::Same => "~",
                Kind::Info => "·",
            };
            let _ = writeln!(o, "- {sign} {}", l.text);
        }
        if r.comparisons.is_empty() {
            let _ = writeln!(o, "\nCharts: report.html.\n");
        } else {
            let _ = writeln!(
                o,
                "\nEvery comparison, condition by condition: [Comparisons](#comparisons). Charts: report.html.\n"
            );
        }
    }

    fn before_after(&self, o: &mut String, b: &BeforeAfter) {
        o.push_str(&b.markdown());
    }

    /// Each table as a section: header row, then one line per row (published labels in italics).
    fn tables(&self, o: &mut String, r: &Report) {
        for t in &r.tables {
            let _ = writeln!(o, "## {}\n", t.title);
            let _ = writeln!(
                o,
                "| {} | {} |",
                cell(&t.corner),
                t.columns
                    .iter()
                    .map(|c| cell(c))
                    .collect::<Vec<_>>()
                    .join(" | ")
            );
            let _ = writeln!(o, "|---|{}", "---|".repeat(t.columns.len()));
            for row in &t.rows {
                let label = if row.published {
                    format!("*{}*", cell(&row.label))
                } else {
                    cell(&row.label)
                };
                let figures: Vec<String> = row
                    .cells
                    .iter()
                    .map(|f| figure_text(f, !row.published))
                    .collect();
                let _ = writeln!(o, "| {label} | {} |", figures.join(" | "));
            }
            let _ = writeln!(o);
        }
    }

    /// The comparisons section, one bullet per comparison with its p-value (none: nothing).
    fn comparisons(&self, o: &mut String, r: &Report) {
        if r.comparisons.is_empty() {
            return;
        }
        let _ = writeln!(o, "## Comparisons\n");
        let _ = writeln!(
            o,
            "Ratio of medians with its 95 % bootstrap interval, Hodges–Lehmann shift, Mann-Whitney U at p < 0.05; differences within {:.0} % are equal (see the verdict).\n",
            crate::verdict::NEGLIGIBLE * 100.0
        );
        for c in &r.comparisons {
            let cond = if c.condition.is_empty() {
                String::new()
            } else {
                format!("{}: ", c.condition)
            };
            let _ = writeln!(
                o,
                "- {cond}{}: {}",
                c.sentence(),
                crate::verdict::judge(c).text()
            );
        }
        let _ = writeln!(o);
    }

    /// A section titled as the list is, with one bullet per item (no items: no section).
    fn list(&self, o: &mut String, which: List, items: &[String]) {
        if items.is_empty() {
            return;
        }
        let _ = writeln!(o, "## {}\n", which.title());
        for item in items {
            let _ = writeln!(o, "- {item}");
        }
        let _ = writeln!(o);
    }

    /// The cells section: one row per cell with its statistics, or why it was skipped.
    fn cells(&self, o: &mut String, r: &Report) {
        let _ = writeln!(o, "## Cells\n");
        let _ = writeln!(o, "| cell | n | median | mean | stdev | 95 % CI | TTFB p50 (ms) | server CPU (µs/req) | head bytes/req sent / received | negotiated | cc server/client (read back) | scheduler / TCP mark / priorities (read back) |");
        let _ = writeln!(o, "|---|---|---|---|---|---|---|---|---|---|---|---|");
        for c in &r.cells {
            if let Some(why) = &c.skipped {
                let _ = writeln!(
                    o,
                    "| {} | 0 | skipped: {} | | | | | | | | | |",
                    cell(&c.key),
                    cell(why)
                );
                continue;
            }
            let [n, median, mean, stdev, ci] = cell_figures(c);
            let _ = writeln!(
                o,
                "| {} | {n} | {median} | {mean} | {stdev} | {ci} | {} | {} | {} / {} | {} | {} | {} |",
                cell(&c.key),
                secondary_text(c, "ttfb_ms"),
                secondary_text(c, "server_cpu_us_per_req"),
                secondary_text(c, "header_sent_per_req"),
                secondary_text(c, "header_received_per_req"),
                cell(&negotiated_text(&c.negotiated)),
                cell(&cc_text(&c.server_cc, &c.client_cc)),
                cell(&scheduling_text(c.scheduling.as_ref())),
            );
        }
        if let Some(env) = &r.meta.environment {
            let _ = writeln!(o, "\nProduced by {env}.");
        }
    }
}
