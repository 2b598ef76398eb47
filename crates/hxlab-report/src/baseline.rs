//! Before/after: this experiment's cells against the same cells of an earlier run
//! (`hxlab report DIR --baseline OTHER_DIR`), matched by their factor values, each with the
//! ratio of medians, its bootstrap interval, the Hodges–Lehmann shift and a Mann-Whitney
//! test, and a verdict of what got faster or slower (benchstat's layout, one cell a row).

use crate::cells::CellSummary;
use crate::charts::svg::esc;
use crate::comparisons::{compare_values, display_value, fmt_ratio, shift_text, shift_unit};
use crate::figures::{fmt_num, SIGNIFICANCE};
use crate::model::Metric;
use std::collections::BTreeMap;
use std::fmt::Write;

/// One cell before and after.
#[derive(Clone, Debug)]
pub struct Row {
    /// The cell's key in this run.
    pub cell: String,
    /// Its factor values.
    pub factors: BTreeMap<String, String>,
    /// Median before (baseline run), display units, and its repetitions.
    pub before: (f64, usize),
    /// Median now, display units, and its repetitions.
    pub after: (f64, usize),
    /// median(after) / median(before).
    pub ratio: f64,
    /// 95 % bootstrap interval of the ratio.
    pub ci: (f64, f64),
    /// Hodges–Lehmann shift after − before, display units.
    pub shift: f64,
    /// Two-sided Mann-Whitney p.
    pub p_value: f64,
    /// Whether either side has warnings.
    pub warn: bool,
}

impl Row {
    /// Whether the change is significant.
    pub fn significant(&self) -> bool {
        self.p_value < SIGNIFICANCE
    }
}

/// This run against a baseline run.
#[derive(Clone, Debug)]
pub struct BeforeAfter {
    /// Where the baseline came from (its directory or file), as given.
    pub baseline: String,
    /// The metric compared.
    pub metric: Metric,
    /// Matched cells, in this run's order.
    pub rows: Vec<Row>,
    /// Cells of this run with no match in the baseline.
    pub only_now: Vec<String>,
    /// Cells of the baseline with no match in this run.
    pub only_before: Vec<String>,
}

/// Whether two cells are the same condition: every factor both name has the same value.
fn same_cell(a: &BTreeMap<String, String>, b: &BTreeMap<String, String>) -> bool {
    a.iter().all(|(k, v)| b.get(k).is_none_or(|w| w == v)) && a.keys().any(|k| b.contains_key(k))
}

impl BeforeAfter {
    /// Matches `now`'s cells with `before`'s, both measured by `metric` (see
    /// [`crate::Report::against`]); `baseline` says where the earlier run came from.
    pub fn build(
        metric: Metric,
        now: &[CellSummary],
        before: &[CellSummary],
        baseline: &str,
    ) -> BeforeAfter {
        let mut rows = Vec::new();
        let mut only_now = Vec::new();
        let mut used = vec![false; before.len()];
        for c in now {
            let matches: Vec<usize> = (0..before.len())
                .filter(|&i| same_cell(&c.factors, &before[i].factors))
                .collect();
            let [i] = matches[..] else {
                only_now.push(c.key.clone());
                continue;
            };
            used[i] = true;
            let b = &before[i];
            let Some((ratio, ci, shift, p_value)) = compare_values(metric, &c.values, &b.values)
            else {
                only_now.push(c.key.clone());
                continue;
            };
            let d = |v: f64| display_value(metric, v);
            rows.push(Row {
                cell: c.key.clone(),
                factors: c.factors.clone(),
                before: (d(b.median), b.values.len()),
                after: (d(c.median), c.values.len()),
                ratio,
                ci,
                shift,
                p_value,
                warn: !c.warnings.is_empty() || !b.warnings.is_empty(),
            });
        }
        let only_before = before
            .iter()
            .zip(&used)
            .filter(|(_, u)| !**u)
            .map(|(c, _)| c.key.clone())
            .collect();
        BeforeAfter {
            baseline: baseline.to_string(),
            metric,
            rows,
            only_now,
            only_before,
        }
    }

    /// Whether a row got better (by the medians).
    pub fn improved(&self, r: &Row) -> bool {
        if self.metric.lower_is_better() {
            r.ratio < 1.0
        } else {
            r.ratio > 1.0
        }
    }

    /// The verdict sentence of one row: `2.10× faster (95 % CI 1.9–2.3; shift −41 ms)`, or `~`.
    pub fn row_text(&self, r: &Row) -> String {
        if !r.significant() {
            return format!(
                "~ no significant change (ratio {}, p = {:.3}, n = {}+{})",
                fmt_ratio(r.ratio),
                r.p_value,
                r.after.1,
                r.before.1
            );
        }
        let better = self.improved(r);
        let flip = better == self.metric.lower_is_better();
        let (f, lo, hi) = if flip {
            (1.0 / r.ratio, 1.0 / r.ci.1, 1.0 / r.ci.0)
        } else {
            (r.ratio, r.ci.0, r.ci.1)
        };
        format!(
            "{}× {} (95 % CI {}–{}; shift {}, p = {:.3})",
            fmt_ratio(f),
            if better { "faster" } else { "slower" },
            fmt_ratio(lo),
            fmt_ratio(hi),
            shift_text(r.shift, shift_unit(self.metric)),
            r.p_value
        )
    }

    /// `3 cells faster, 1 slower, 8 without a significant change (vs DIR)`.
    pub fn headline(&self) -> String {
        let faster = self
            .rows
            .iter()
            .filter(|r| r.significant() && self.improved(r))
            .count();
        let slower = self
            .rows
            .iter()
            .filter(|r| r.significant() && !self.improved(r))
            .count();
        let same = self.rows.len() - faster - slower;
        let mut s = format!(
            "Against {}: {faster} cell(s) faster, {slower} slower, {same} without a significant change",
            self.baseline
        );
        if !self.only_now.is_empty() || !self.only_before.is_empty() {
            let _ = write!(
                s,
                "; {} cell(s) only in this run, {} only in the baseline",
                self.only_now.len(),
                self.only_before.len()
            );
        }
        s.push('.');
        s
    }

    /// Rows with significant changes first, largest first, then the rest in run order.
    pub fn ranked(&self) -> Vec<&Row> {
        let mut rows: Vec<&Row> = self.rows.iter().collect();
        rows.sort_by(|a, b| {
            b.significant().cmp(&a.significant()).then(
                b.ratio
                    .ln()
                    .abs()
                    .total_cmp(&a.ratio.ln().abs())
                    .then(std::cmp::Ordering::Equal),
            )
        });
        rows
    }

    /// The section as markdown.
    pub fn markdown(&self) -> String {
        let mut o = format!("## Before/after\n\n**{}**\n\n", self.headline());
        let unit = shift_unit(self.metric);
        let _ = writeln!(
            o,
            "| cell | before ({unit}) | after ({unit}) | change |\n|---|---|---|---|"
        );
        for r in self.ranked() {
            let _ = writeln!(
                o,
                "| {}{} | {} | {} | {} |",
                r.cell.replace('|', "\\|"),
                if r.warn { " !" } else { "" },
                fmt_num(r.before.0),
                fmt_num(r.after.0),
                self.row_text(r)
            );
        }
        for (what, list) in [
            ("only in this run", &self.only_now),
            ("only in the baseline", &self.only_before),
        ] {
            if !list.is_empty() {
                let _ = writeln!(o, "\nCells {what}: {}", list.join("; "));
            }
        }
        o.push('\n');
        o
    }

    /// The section as HTML.
    pub fn html(&self) -> String {
        let unit = shift_unit(self.metric);
        let mut o = format!(
            "<section class=\"verdict\" id=\"before-after\"><h2>Before/after</h2><p class=\"headline\">{}</p><table><tr><th>cell</th><th>before ({unit})</th><th>after ({unit})</th><th>change</th></tr>",
            esc(&self.headline())
        );
        for r in self.ranked() {
            let _ = write!(
                o,
                "<tr{}><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                if r.warn { " class=\"warn\"" } else { "" },
                esc(&r.cell),
                fmt_num(r.before.0),
                fmt_num(r.after.0),
                esc(&self.row_text(r))
            );
        }
        o.push_str("</table>");
        for (what, list) in [
            ("only in this run", &self.only_now),
            ("only in the baseline", &self.only_before),
        ] {
            if !list.is_empty() {
                let _ = write!(o, "<p>Cells {what}: {}</p>", esc(&list.join("; ")));
            }
        }
        o.push_str("</section>\n");
        o
    }

    /// The section for a terminal.
    pub fn text(&self) -> String {
        let mut o = format!("{}\n", self.headline());
        for r in self.ranked() {
            let _ = writeln!(
                o,
                "  {} {}: {} → {} {}: {}",
                if !r.significant() {
                    "~"
                } else if self.improved(r) {
                    "+"
                } else {
                    "-"
                },
                r.cell,
                fmt_num(r.before.0),
                fmt_num(r.after.0),
                shift_unit(self.metric),
                self.row_text(r)
            );
        }
        o
    }
}
