//! The verdict: what the experiment says, first and short enough to read in ten seconds.
//!
//! - A **headline**: which protocol was fastest under how many conditions, and the largest
//!   effect.
//! - **One line per protocol pair compared**, grouped across conditions: the direction, the
//!   range of ratios, the largest effect with its interval and condition, and the conditions
//!   where the two are equal within 2 % or show no significant difference, e.g.
//!   `h2 vs h1-tls: h2 faster in 4 of 5 conditions, 4.41–9.12× (largest 9.12×, CI 9.00–9.66,
//!   delay 50ms, resources 120); profile Regular 4G: no significant difference (0.99×, …)`.
//!   A browser experiment gets these lines for LCP and for the load event, and one line of
//!   per-protocol medians (page TTFB, connections, bytes).
//! - In each pair line, whether its verdict **holds across** each swept factor or **depends
//!   on** it ([`across`], the same for any factor): a pair whose conditions vary in one factor
//!   alone is said level by level, `h2 vs h1-tls: depends on scheduler — h2 faster under
//!   scheduler rfc9218 (1.70×, CI …), slower under fifo (1.60×, CI …)`; with several factors the line
//!   keeps its conditions and ends with `— depends on profile (…); holds across delay`.
//! - One line saying what hxlab's origin sent with, read back: its scheduler and TCP send
//!   low-water mark, and the protocols neither applies to.
//! - **One line per kind of problem** (fell back, errors, not measured, congestion control
//!   not as asked, not like for like, metric not recorded) with its count and first example.
//!
//! Each comparison is judged by one rule ([`judge`]): differences within [`NEGLIGIBLE`]
//! (2 %) are "equal within 2 %", and with too few repetitions for the exact Mann-Whitney
//! test to reach p < 0.05 a difference is said as it "looks", never as "no difference".
//! Every comparison, condition by condition, is in the report's Comparisons section.

pub mod across;
pub mod judge;
mod origin;
mod pairs;
mod problems;

pub use across::{Across, Direction};
pub use judge::{judge, Finding, NEGLIGIBLE};

use crate::cells::CellSummary;
use crate::comparisons::{fmt_ratio, Comparison};
use crate::model::{Metric, Workload};
use crate::report::Report;
use std::collections::BTreeMap;

/// What a verdict line says.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    /// Cells or comparisons whose figures should not be read as the protocol's.
    Problem,
    /// A pair with a significant difference larger than [`NEGLIGIBLE`] somewhere.
    Significant,
    /// A pair whose differences could not be tested: too few repetitions.
    Untested,
    /// A pair equal within [`NEGLIGIBLE`] or without significant difference everywhere.
    Same,
    /// Figures beside the verdict (a browser experiment's per-protocol medians).
    Info,
}

impl Kind {
    /// The sign the line starts with: `!`, `>`, `?`, `~` or `·`.
    pub fn sign(self) -> &'static str {
        match self {
            Kind::Problem => "!",
            Kind::Significant => ">",
            Kind::Untested => "?",
            Kind::Same => "~",
            Kind::Info => "·",
        }
    }
    /// Class name in HTML and `kind` in summary.json.
    pub fn class(self) -> &'static str {
        match self {
            Kind::Problem => "problem",
            Kind::Significant => "significant",
            Kind::Untested => "untested",
            Kind::Same => "same",
            Kind::Info => "info",
        }
    }
}

/// The kind of a problem line.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Problem {
    /// Connections negotiated another protocol family than the cell asked for.
    FellBack,
    /// Repetitions with errors or failed requests.
    Errors,
    /// A cell that was not measured.
    Skipped,
    /// An end's congestion controller, read back, is not what the cell asked for.
    CcNotAsAsked,
    /// hxlab's origin's scheduler or send low-water mark, read back, is not what the cell
    /// asked for.
    OriginNotAsAsked,
    /// Two cells compared whose servers sent with different congestion controllers.
    NotLikeForLike,
    /// Clean repetitions that did not record the metric (a page that painted nothing).
    NotRecorded,
    /// A replayed recording that lacked requests the page made (answered 404).
    ReplayMissed,
    /// Page resources that failed, answered 4xx/5xx or did not finish in runs that counted.
    ResourcesFailed,
}

impl Problem {
    /// How the verdict names the kind.
    pub fn label(self) -> &'static str {
        match self {
            Problem::FellBack => "fell back",
            Problem::Errors => "errors",
            Problem::Skipped => "not measured",
            Problem::CcNotAsAsked => "congestion control not as asked",
            Problem::OriginNotAsAsked => "origin not as asked",
            Problem::NotLikeForLike => "not like for like",
            Problem::NotRecorded => "metric not recorded",
            Problem::ReplayMissed => "replay missed the recording",
            Problem::ResourcesFailed => "page resources failed",
        }
    }
    /// The kind's key in summary.json.
    pub fn key(self) -> &'static str {
        match self {
            Problem::FellBack => "fell_back",
            Problem::Errors => "errors",
            Problem::Skipped => "skipped",
            Problem::CcNotAsAsked => "cc_not_as_asked",
            Problem::OriginNotAsAsked => "origin_not_as_asked",
            Problem::NotLikeForLike => "not_like_for_like",
            Problem::NotRecorded => "not_recorded",
            Problem::ReplayMissed => "replay_missed",
            Problem::ResourcesFailed => "resources_failed",
        }
    }
}

/// One line of the verdict.
#[derive(Clone, Debug, PartialEq)]
pub struct Line {
    /// What it says.
    pub kind: Kind,
    /// The sentence, the same in every format.
    pub text: String,
    /// For a problem line, the condition of its first example; empty for a pair line, which
    /// spans every condition.
    pub condition: String,
    /// The kind of problem, for problem lines.
    pub problem: Option<Problem>,
    /// How many comparisons (pair line) or cells and comparisons (problem line) it covers.
    pub count: usize,
    /// For a pair line, whether its verdict holds across each factor its conditions vary in.
    pub across: Vec<Across>,
}

/// The verdict block.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Verdict {
    /// One or two sentences answering the experiment's question.
    pub headline: String,
    /// One line per pair compared (per metric for a browser experiment), then the page
    /// figures of a browser experiment, then one line per kind of problem.
    pub lines: Vec<Line>,
}

impl Verdict {
    /// The verdict as plain text lines: `verdict: <headline>`, then `  <sign> <text>` per
    /// line, as the terminal prints it.
    pub fn plain(&self) -> Vec<String> {
        let mut out = vec![format!("verdict: {}", self.headline)];
        out.extend(
            self.lines
                .iter()
                .map(|l| format!("  {} {}", l.kind.sign(), l.text)),
        );
        out
    }
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

/// `a`, `a and b`, `a, b and c`.
fn and_list<S: AsRef<str>>(names: &[S]) -> String {
    match names {
        [] => String::new(),
        [one] => one.as_ref().to_string(),
        [init @ .., last] => {
            let init: Vec<&str> = init.iter().map(AsRef::as_ref).collect();
            format!("{} and {}", init.join(", "), last.as_ref())
        }
    }
}

/// How much larger the better side is, as a log so 2× and 0.5× rank alike.
fn size(c: &Comparison) -> f64 {
    c.ratio.ln().abs()
}

/// The short name of a metric in the pair lines of a browser experiment.
fn metric_name(m: Metric) -> &'static str {
    match m {
        Metric::LcpS => "LCP",
        Metric::TimeS => "load",
        Metric::FcpS => "FCP",
        Metric::SpeedIndexS => "Speed Index",
        Metric::RequestsPerSec => "requests/s",
    }
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

    /// The metrics the verdict judges by: the primary one, and for a browser experiment
    /// both LCP and the load event (the primary first).
    fn verdict_metrics(&self) -> Vec<Metric> {
        let mut out = vec![self.metric];
        if self.meta.workload() == Workload::Browser {
            for m in [Metric::LcpS, Metric::TimeS] {
                if !out.contains(&m) {
                    out.push(m);
                }
            }
        }
        out
    }

    /// Builds the verdict from the cells and comparisons.
    pub fn verdict(&self) -> Verdict {
        let tied = self.tied_factors();
        let metrics = self.verdict_metrics();
        let mut lines = Vec::new();
        let mut missing = Vec::new();
        for &m in &metrics {
            let comparisons = self.comparisons_of(m);
            if comparisons.is_empty() && metrics.len() > 1 {
                missing.push(metric_name(m));
                continue;
            }
            let prefix = if metrics.len() > 1 {
                format!("{}: ", metric_name(m))
            } else {
                String::new()
            };
            lines.extend(pairs::pair_lines(
                self,
                &comparisons,
                &self.meta.factors,
                &prefix,
            ));
        }
        if metrics.len() > 1 {
            lines.extend(pairs::page_figures(self, &missing));
        }
        lines.extend(origin::origin_line(self));
        lines.extend(problems::problem_lines(self, &tied));
        Verdict {
            headline: self.headline(&tied),
            lines,
        }
    }

    /// Which protocol had the best median under each condition (trusted cells only), the
    /// largest effect, and how many cells have problems.
    fn headline(&self, tied: &[String]) -> String {
        let mut parts = Vec::new();
        if let Some(best) = self.fastest(tied) {
            parts.push(best);
        }
        let judged: Vec<(&Comparison, Finding)> =
            self.comparisons.iter().map(|c| (c, judge(c))).collect();
        let largest = |keep: &dyn Fn(Finding) -> bool| {
            judged
                .iter()
                .filter(|(c, f)| keep(*f) && !judge::negligible(c.ratio))
                .map(|(c, _)| *c)
                // The first of equal largest, in the experiment's condition order.
                .min_by(|a, b| size(b).total_cmp(&size(a)))
        };
        let at = |c: &Comparison| {
            if c.condition.is_empty() {
                String::new()
            } else {
                format!(" at {}", c.condition)
            }
        };
        if let Some(top) = largest(&|f| matches!(f, Finding::Better | Finding::Worse)) {
            parts.push(format!("Largest effect: {}{}.", effect_text(top), at(top)));
        } else if let Some(top) = largest(&|f| f == Finding::TooFew) {
            let (f, _) = top.factor();
            let word = if top.better() { "faster" } else { "slower" };
            parts.push(format!(
                "Largest difference, untested: {} looks {}× {word} than {}{} ({}+{} repetitions).",
                top.protocol,
                fmt_ratio(f),
                top.baseline,
                at(top),
                top.n.0,
                top.n.1
            ));
        } else if !judged.is_empty() {
            parts.push(format!(
                "No significant difference larger than {:.0} %.",
                NEGLIGIBLE * 100.0
            ));
        }
        // Failed page resources are part of the page as it loaded, not of the figures'
        // meaning: counted apart.
        let count = |keep: &dyn Fn(Problem) -> bool| {
            self.cells
                .iter()
                .filter(|c| problems::cell_problems(c).iter().any(|(p, _)| keep(*p)))
                .count()
        };
        let problems = count(&|p| p != Problem::ResourcesFailed);
        if problems > 0 {
            parts.push(format!(
                "{problems} cell(s) have problems (!) that change what their figures mean."
            ));
        }
        let failed = count(&|p| p == Problem::ResourcesFailed);
        if failed > 0 {
            parts.push(format!(
                "Page resources failed in {failed} cell(s) (!); the pages loaded, so their runs count."
            ));
        }
        if parts.is_empty() {
            return "Nothing was measured.".into();
        }
        parts.join(" ")
    }

    /// `Fastest: h2 in 4 of 5 conditions, h3 in 1 of 5 conditions.` over the cells without
    /// problems; a condition whose two best medians lie within [`NEGLIGIBLE`] of each other
    /// has no winner (`h2 and h3 tie within 2 % in 1 of 5 conditions`). None when no cell has
    /// a figure.
    fn fastest(&self, tied: &[String]) -> Option<String> {
        let lower = self.metric.lower_is_better();
        let mut by_condition: BTreeMap<String, Vec<(String, f64)>> = BTreeMap::new();
        for c in self
            .cells
            .iter()
            .filter(|c| !c.values.is_empty() && c.fell_back.is_none() && c.failed == 0)
        {
            let Some(p) = c.factors.get("protocol") else {
                continue;
            };
            by_condition
                .entry(self.cell_condition(c, tied))
                .or_default()
                .push((p.clone(), c.median));
        }
        if by_condition.is_empty() {
            return None;
        }
        let total = by_condition.len();
        let order = self.levels_of("protocol");
        let mut wins: BTreeMap<&str, usize> = BTreeMap::new();
        let mut close: BTreeMap<String, usize> = BTreeMap::new();
        for medians in by_condition.values_mut() {
            // Best first; a stable sort keeps the experiment's order among equals.
            medians.sort_by(|a, b| {
                if lower {
                    a.1.total_cmp(&b.1)
                } else {
                    b.1.total_cmp(&a.1)
                }
            });
            match medians.get(1) {
                Some(second) if judge::negligible(second.1 / medians[0].1) => {
                    let best = medians[0].1;
                    let mut names: Vec<&str> = medians
                        .iter()
                        .filter(|(_, m)| judge::negligible(m / best))
                        .map(|(p, _)| p.as_str())
                        .collect();
                    names.sort_by_key(|p| order.iter().position(|o| o == p));
                    *close.entry(and_list(&names)).or_default() += 1;
                }
                _ => *wins.entry(medians[0].0.as_str()).or_default() += 1,
            }
        }
        let mut wins: Vec<(&str, usize)> = wins.into_iter().collect();
        wins.sort_by_key(|(p, n)| (std::cmp::Reverse(*n), order.iter().position(|o| o == p)));
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
        let ties: Vec<String> = close
            .into_iter()
            .map(|(names, n)| {
                let within = format!("{names} tie within {:.0} %", NEGLIGIBLE * 100.0);
                if total == 1 {
                    within
                } else {
                    format!("{within} in {n} of {total} conditions")
                }
            })
            .collect();
        let mut said = list.join(", ");
        for t in ties {
            if said.is_empty() {
                said = t;
            } else {
                said = format!("{said}; {t}");
            }
        }
        let word = if !lower {
            "Most requests/s".to_string()
        } else if self.meta.workload() == Workload::Browser {
            format!("Fastest by {}", metric_name(self.metric))
        } else {
            "Fastest".to_string()
        };
        Some(format!("{word}: {said}."))
    }
}
