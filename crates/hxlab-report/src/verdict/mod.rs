//! The verdict: what the experiment says, first and in one block. A headline (which
//! protocol was best where, the largest effect), then the significant differences ranked by
//! size ("h2 is 4.41× faster than h1-tls (95 % CI 4.20–4.62; −62.1 ms)"), the differences
//! that are not significant marked `~` as benchstat does (p and n shown), and the cells whose
//! figures are not the protocol's (a fallback to another protocol, errors, skips) named
//! rather than buried in the warnings.

pub mod judge;

use crate::comparisons::{fmt_ratio, Comparison};
use crate::summary::{CellSummary, Report};
use std::collections::BTreeMap;

/// What a verdict line says.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    /// A cell whose figures should not be read as the protocol's.
    Problem,
    /// A significant difference.
    Significant,
    /// No significant difference (`~`).
    Same,
}

impl Kind {
    /// The sign the line starts with: `!`, `>` or `~`.
    pub fn sign(self) -> &'static str {
        match self {
            Kind::Problem => "!",
            Kind::Significant => ">",
            Kind::Same => "~",
        }
    }
    /// Class name in HTML.
    pub fn class(self) -> &'static str {
        match self {
            Kind::Problem => "problem",
            Kind::Significant => "significant",
            Kind::Same => "same",
        }
    }
}

/// One line of the verdict.
#[derive(Clone, Debug, PartialEq)]
pub struct Line {
    /// What it says.
    pub kind: Kind,
    /// The sentence.
    pub text: String,
    /// The conditions it holds under, e.g. `delay 20ms, resources 30` (empty: every cell).
    pub condition: String,
}

/// The verdict block.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Verdict {
    /// One or two sentences answering the experiment's question.
    pub headline: String,
    /// Problems first, then significant effects by size (largest first), then the `~` ones.
    pub lines: Vec<Line>,
}

/// How much larger the better side is, as a log so 2× and 0.5× rank alike.
fn size(c: &Comparison) -> f64 {
    c.ratio.ln().abs()
}

/// `h2 is 4.41× faster than h1-tls (95 % CI 4.20–4.62; shift −62.1 ms)`.
pub fn effect_text(c: &Comparison) -> String {
    let (f, (lo, hi)) = c.factor();
    let word = if c.better() { "faster" } else { "slower" };
    format!(
        "{} is {}× {word} than {} (95 % CI {}–{}; shift {})",
        c.protocol,
        fmt_ratio(f),
        c.baseline,
        fmt_ratio(lo),
        fmt_ratio(hi),
        c.shift_text()
    )
}

/// `h1 ~ h1-tls: no significant difference (ratio 0.99, shift −3.6 ms, p = 0.690, n = 5+5)`.
pub fn same_text(c: &Comparison) -> String {
    let few = if c.n.0 < 4 || c.n.1 < 4 {
        "; too few repetitions to tell"
    } else {
        ""
    };
    format!(
        "{} ~ {}: no significant difference (ratio {}, shift {}, p = {:.3}, n = {}+{}{few})",
        c.protocol,
        c.baseline,
        fmt_ratio(c.ratio),
        c.shift_text(),
        c.p_value,
        c.n.0,
        c.n.1
    )
}

/// The problems of one cell, one sentence each.
fn problems(c: &CellSummary) -> Vec<String> {
    let proto = c.factors.get("protocol").cloned().unwrap_or_default();
    let mut out = Vec::new();
    if let Some(why) = &c.skipped {
        out.push(format!("{proto} was not measured: {why}"));
        return out;
    }
    if let Some(other) = &c.fell_back {
        out.push(format!(
            "{proto} fell back: its connections negotiated {other}, so these figures are not {proto}'s"
        ));
    }
    if c.failed > 0 {
        let first = c.first_error.as_deref().unwrap_or("");
        out.push(format!(
            "{proto} had errors in {} of {} repetitions{}",
            c.failed,
            c.ran,
            if first.is_empty() {
                String::new()
            } else {
                format!(" (first: {first})")
            }
        ));
    }
    for w in &c.cc_mismatch {
        out.push(format!("{proto}: {w}"));
    }
    out
}

impl Report {
    /// The conditions of a cell as the comparisons name them (swept factors other than the
    /// protocol and those tied to it).
    fn cell_condition(&self, c: &CellSummary, tied: &[String]) -> String {
        self.meta
            .factors
            .iter()
            .filter(|f| f.levels.len() > 1 && f.name != "protocol" && !tied.contains(&f.name))
            .filter_map(|f| c.factors.get(&f.name).map(|v| format!("{} {v}", f.name)))
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// Builds the verdict from the cells and comparisons.
    pub fn verdict(&self) -> Verdict {
        let tied = self.tied_factors();
        let mut lines = Vec::new();
        for c in &self.cells {
            for text in problems(c) {
                lines.push(Line {
                    kind: Kind::Problem,
                    text,
                    condition: self.cell_condition(c, &tied),
                });
            }
        }
        for c in &self.comparisons {
            if let Some(text) = self.cc_mismatch(c) {
                lines.push(Line {
                    kind: Kind::Problem,
                    text,
                    condition: c.condition.clone(),
                });
            }
        }
        let mut sig: Vec<&Comparison> = self
            .comparisons
            .iter()
            .filter(|c| c.significant())
            .collect();
        sig.sort_by(|a, b| size(b).total_cmp(&size(a)));
        for c in &sig {
            lines.push(Line {
                kind: Kind::Significant,
                text: effect_text(c),
                condition: c.condition.clone(),
            });
        }
        for c in self.comparisons.iter().filter(|c| !c.significant()) {
            lines.push(Line {
                kind: Kind::Same,
                text: same_text(c),
                condition: c.condition.clone(),
            });
        }
        Verdict {
            headline: self.headline(&tied, &sig),
            lines,
        }
    }

    /// When the two cells of a comparison sent with different congestion controllers, as
    /// their servers read them back: the difference is not the protocol's alone.
    fn cc_mismatch(&self, c: &Comparison) -> Option<String> {
        let cell = |k: &str| self.cells.iter().find(|x| x.key == k);
        let (a, b) = (cell(&c.cells.0)?, cell(&c.cells.1)?);
        let names = |m: &BTreeMap<String, u64>| m.keys().cloned().collect::<Vec<_>>();
        if a.server_cc.is_empty()
            || b.server_cc.is_empty()
            || names(&a.server_cc) == names(&b.server_cc)
        {
            return None;
        }
        Some(format!(
            "{} vs {}: not like for like: their servers sent with {} and {} (read back), so the difference mixes the protocol with the congestion controller; set cc for both",
            c.protocol,
            c.baseline,
            hxlab_core::cc::counts_text(&a.server_cc),
            hxlab_core::cc::counts_text(&b.server_cc)
        ))
    }

    /// Which protocol had the best median under each condition (trusted cells only), the
    /// largest significant effect, and how many differences were not significant.
    fn headline(&self, tied: &[String], sig: &[&Comparison]) -> String {
        let lower = self.metric.lower_is_better();
        let mut best: BTreeMap<String, (String, f64)> = BTreeMap::new();
        for c in self
            .cells
            .iter()
            .filter(|c| !c.values.is_empty() && c.fell_back.is_none() && c.failed == 0)
        {
            let Some(p) = c.factors.get("protocol") else {
                continue;
            };
            let cond = self.cell_condition(c, tied);
            let e = best.entry(cond).or_insert((p.clone(), c.median));
            if (lower && c.median < e.1) || (!lower && c.median > e.1) {
                *e = (p.clone(), c.median);
            }
        }
        let mut parts = Vec::new();
        if !best.is_empty() {
            let mut wins: BTreeMap<&str, usize> = BTreeMap::new();
            for (p, _) in best.values() {
                *wins.entry(p.as_str()).or_default() += 1;
            }
            let mut wins: Vec<(&str, usize)> = wins.into_iter().collect();
            let order = self.levels_of("protocol");
            wins.sort_by_key(|(p, n)| (std::cmp::Reverse(*n), order.iter().position(|o| o == p)));
            let total = best.len();
            let list: Vec<String> = wins
                .iter()
                .map(|(p, n)| {
                    if total == 1 {
                        (*p).to_string()
                    } else {
                        format!("{p} in {n} of {total} conditions")
                    }
                })
                .collect();
            let word = if lower { "Fastest" } else { "Most requests/s" };
            parts.push(format!("{word}: {}.", list.join(", ")));
        }
        if let Some(top) = sig.first() {
            let cond = if top.condition.is_empty() {
                String::new()
            } else {
                format!(" at {}", top.condition)
            };
            parts.push(format!("Largest effect: {}{cond}.", effect_text(top)));
        }
        let same = self.comparisons.iter().filter(|c| !c.significant()).count();
        if same > 0 {
            parts.push(format!(
                "{same} of {} comparisons show no significant difference (~).",
                self.comparisons.len()
            ));
        }
        let problems = self
            .cells
            .iter()
            .filter(|c| !problems(c).is_empty())
            .count();
        if problems > 0 {
            parts.push(format!(
                "{problems} cell(s) have problems (!) that change what their figures mean."
            ));
        }
        if parts.is_empty() {
            return "Nothing was measured.".into();
        }
        parts.join(" ")
    }
}
