//! `hxlab diff A.json B.json`: two sets of `hxlab load` results side by side. Each side is
//! one or more RunResults (repetitions: `--json -` appended to one file, or several files);
//! first every factor that differs — asked, read back from the connections, or of the
//! environment ([`crate::run_factors`]) — then every figure with A, B and B/A, and with two
//! or more runs on each side a bootstrap interval of the ratio and a Mann-Whitney test over
//! the runs, so "faster" means faster than run-to-run noise. With one run a side the figures
//! are shown without significance, and the text says so.

use crate::comparisons::{fmt_ratio, mann_whitney_p};
use crate::figures::{fmt_num, CONFIDENCE, RESAMPLES, SIGNIFICANCE};
use crate::model::Record;
use crate::run_factors::{factors, record_factors, side_factors, Factor};
use hxlab_core::{stats, LatencyHistogram, RunResult};
use serde::{Deserialize, Serialize};
use std::fmt::Write;

/// One figure of both sides.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Figure {
    /// What it is, with its unit.
    pub name: String,
    /// Whether lower is better (None: neither, e.g. connections).
    pub lower_is_better: Option<bool>,
    /// Per-run values of A.
    pub a: Vec<f64>,
    /// Per-run values of B.
    pub b: Vec<f64>,
    /// Median of A's runs.
    pub a_median: f64,
    /// Median of B's runs.
    pub b_median: f64,
    /// median(B) / median(A).
    pub ratio: f64,
    /// Bootstrap interval of the ratio (None with fewer than two runs a side).
    pub ci: Option<(f64, f64)>,
    /// Mann-Whitney p over the runs (None with fewer than two runs a side).
    pub p_value: Option<f64>,
}

impl Figure {
    /// Whether the difference is significant (only with repetitions).
    pub fn significant(&self) -> bool {
        self.p_value.is_some_and(|p| p < SIGNIFICANCE)
    }
    /// The change in words: `1.84× better (95 % CI 1.7–2.0, p = 0.008)`, `~ (p = 0.4)`,
    /// or `1.84× (one run a side: no significance)`.
    pub fn change(&self) -> String {
        if !self.ratio.is_finite() {
            return "—".into();
        }
        let dir = match self.lower_is_better {
            Some(lower) if self.ratio != 1.0 => {
                if (self.ratio < 1.0) == lower {
                    " better"
                } else {
                    " worse"
                }
            }
            _ => "",
        };
        match (self.ci, self.p_value) {
            (Some((lo, hi)), Some(p)) if p < SIGNIFICANCE => format!(
                "{}×{dir} (95 % CI {}–{}, p = {p:.3})",
                fmt_ratio(self.ratio),
                fmt_ratio(lo),
                fmt_ratio(hi)
            ),
            (_, Some(p)) => format!("~ {}× (p = {p:.3}, not significant)", fmt_ratio(self.ratio)),
            _ => format!("{}×{dir}", fmt_ratio(self.ratio)),
        }
    }
}

/// A factor whose value differs between the sides.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FactorChange {
    /// The factor: a configuration field (`protocol`, `cc`, `tls_resume`), a factor read back
    /// from the connections (`congestion control, client (read back)`), or of the
    /// environment (`environment: kernel`).
    pub factor: String,
    /// A's value (`mixed: x | y` when A's runs disagree; `—` when A's runs lack it).
    pub a: String,
    /// B's value.
    pub b: String,
}

impl std::fmt::Display for FactorChange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {} → {}", self.factor, self.a, self.b)
    }
}

/// The diff of two sides.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RunDiff {
    /// Label of A (its files).
    pub a_label: String,
    /// Label of B.
    pub b_label: String,
    /// Runs on each side.
    pub runs: (usize, usize),
    /// Every factor that differs, asked, read back or of the environment (empty: the same
    /// in every factor the results carry).
    pub changes: Vec<FactorChange>,
    /// The figures.
    pub figures: Vec<Figure>,
}

type Pick = fn(&RunResult) -> Option<f64>;

fn q(h: &LatencyHistogram, p: f64) -> Option<f64> {
    (!h.is_empty()).then(|| h.quantile(p) as f64 / 1000.0)
}

/// The figures compared, with whether lower is better.
const FIGURES: [(&str, Option<bool>, Pick); 14] = [
    ("requests/s", Some(false), |r| Some(r.requests_per_sec())),
    ("duration (s)", None, |r| Some(r.duration_s)),
    ("latency p50 (ms)", Some(true), |r| {
        q(&r.histograms.latency, 0.5)
    }),
    ("latency p90 (ms)", Some(true), |r| {
        q(&r.histograms.latency, 0.9)
    }),
    ("latency p99 (ms)", Some(true), |r| {
        q(&r.histograms.latency, 0.99)
    }),
    ("latency p99.9 (ms)", Some(true), |r| {
        q(&r.histograms.latency, 0.999)
    }),
    ("TTFB p50 (ms)", Some(true), |r| q(&r.histograms.ttfb, 0.5)),
    ("TTFB p99 (ms)", Some(true), |r| q(&r.histograms.ttfb, 0.99)),
    ("connect p50 (ms)", Some(true), |r| {
        q(&r.histograms.connect, 0.5)
    }),
    ("handshake p50 (ms)", Some(true), |r| {
        q(&r.histograms.handshake, 0.5)
    }),
    ("failed requests", Some(true), |r| {
        Some(r.requests_failed as f64)
    }),
    ("errors", Some(true), |r| Some(r.errors.total() as f64)),
    ("client CPU (µs/request)", Some(true), |r| {
        (r.requests_done > 0).then(|| r.cpu_us_per_request())
    }),
    ("received bytes/request", Some(true), |r| {
        (r.requests_done > 0).then(|| r.bytes.total_received as f64 / r.requests_done as f64)
    }),
];

/// One side of a diff: its label, its runs' results (the figures) and each run's factors.
#[derive(Clone, Debug)]
pub struct Side {
    /// What the side was read from (its files).
    pub label: String,
    /// The RunResults (one per run).
    pub runs: Vec<RunResult>,
    /// Each run's factors ([`factors`] of a RunResult, [`record_factors`] of a lab record).
    pub factors: Vec<Vec<Factor>>,
}

impl Side {
    /// A side of `hxlab load` results.
    pub fn of_results(label: &str, runs: Vec<RunResult>) -> Side {
        Side {
            label: label.to_string(),
            factors: runs.iter().map(factors).collect(),
            runs,
        }
    }

    /// A side of lab records (the repetitions of a cell): their results for the figures
    /// (records without one add factors only), and everything the records carry as factors.
    pub fn of_records(label: &str, records: &[Record]) -> Side {
        Side {
            label: label.to_string(),
            runs: records.iter().filter_map(|r| r.result.clone()).collect(),
            factors: records.iter().map(record_factors).collect(),
        }
    }
}

/// Every factor whose value differs between the sides, in A's order, with B's own factors
/// placed after the factor they follow in B (so asked, read back and environment stay
/// together).
fn changes(a: &Side, b: &Side) -> Vec<FactorChange> {
    let (fa, fb) = (side_factors(&a.factors), side_factors(&b.factors));
    let value = |side: &[(String, String)], name: &str| {
        side.iter()
            .find(|(n, _)| n == name)
            .map_or_else(|| "—".to_string(), |(_, v)| v.clone())
    };
    let mut names: Vec<&String> = fa.iter().map(|(n, _)| n).collect();
    let mut at = 0;
    for (name, _) in &fb {
        match names.iter().position(|m| *m == name) {
            Some(i) => at = i + 1,
            None => {
                names.insert(at, name);
                at += 1;
            }
        }
    }
    names
        .into_iter()
        .filter_map(|name| {
            let (va, vb) = (value(&fa, name), value(&fb, name));
            (va != vb).then(|| FactorChange {
                factor: name.clone(),
                a: va,
                b: vb,
            })
        })
        .collect()
}

impl RunDiff {
    /// Compares the runs of A with the runs of B (each side non-empty).
    pub fn build(a_label: &str, a: &[RunResult], b_label: &str, b: &[RunResult]) -> RunDiff {
        RunDiff::of_sides(
            &Side::of_results(a_label, a.to_vec()),
            &Side::of_results(b_label, b.to_vec()),
        )
    }

    /// Compares side A with side B: every factor that differs, every figure of their runs.
    pub fn of_sides(sa: &Side, sb: &Side) -> RunDiff {
        let (a, b) = (&sa.runs, &sb.runs);
        let figures = FIGURES
            .iter()
            .filter_map(|(name, lower, pick)| {
                let va: Vec<f64> = a.iter().filter_map(pick).collect();
                let vb: Vec<f64> = b.iter().filter_map(pick).collect();
                if va.is_empty() || vb.is_empty() {
                    return None;
                }
                let (am, bm) = (stats::median(&va), stats::median(&vb));
                let ratio = if am != 0.0 {
                    bm / am
                } else if bm == 0.0 {
                    1.0
                } else {
                    f64::INFINITY
                };
                let reps = va.len() >= 2 && vb.len() >= 2;
                let ci =
                    (reps && am != 0.0).then(|| stats::ratio_ci(&vb, &va, CONFIDENCE, RESAMPLES));
                Some(Figure {
                    name: (*name).to_string(),
                    lower_is_better: *lower,
                    p_value: reps.then(|| mann_whitney_p(&vb, &va)),
                    a: va,
                    b: vb,
                    a_median: am,
                    b_median: bm,
                    ratio,
                    ci,
                })
            })
            .collect();
        RunDiff {
            a_label: sa.label.clone(),
            b_label: sb.label.clone(),
            runs: (a.len(), b.len()),
            changes: changes(sa, sb),
            figures,
        }
    }

    /// The diff as text: what changed, then one aligned line per figure.
    pub fn text(&self) -> String {
        let mut o = String::new();
        let _ = writeln!(
            o,
            "A: {} ({} run(s))\nB: {} ({} run(s))",
            self.a_label, self.runs.0, self.b_label, self.runs.1
        );
        if self.changes.is_empty() {
            let _ = writeln!(o, "factors: the same (asked, read back and environment)");
        } else {
            let _ = writeln!(o, "{} factor(s) differ (A → B):", self.changes.len());
            for c in &self.changes {
                let _ = writeln!(o, "  {c}");
            }
        }
        if self.runs.0 < 2 || self.runs.1 < 2 {
            let _ = writeln!(o, "note: one run on a side, so no interval or significance: append repetitions (`hxlab load ... --json - >> a.json`) to tell a change from run-to-run noise");
        }
        let rows: Vec<[String; 4]> = self
            .figures
            .iter()
            .map(|f| {
                [
                    f.name.clone(),
                    fmt_num(f.a_median),
                    fmt_num(f.b_median),
                    f.change(),
                ]
            })
            .collect();
        let w: Vec<usize> = (0..3)
            .map(|i| {
                rows.iter()
                    .map(|r| r[i].chars().count())
                    .max()
                    .unwrap_or(0)
                    .max(["figure", "A", "B"][i].len())
            })
            .collect();
        let pad =
            |s: &str, n: usize| format!("{s}{}", " ".repeat(n.saturating_sub(s.chars().count())));
        let _ = writeln!(
            o,
            "  {}  {}  {}  B/A",
            pad("figure", w[0]),
            pad("A", w[1]),
            pad("B", w[2])
        );
        for r in &rows {
            let _ = writeln!(
                o,
                "  {}  {}  {}  {}",
                pad(&r[0], w[0]),
                pad(&r[1], w[1]),
                pad(&r[2], w[2]),
                r[3]
            );
        }
        o
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(rps: f64, p50_us: u64) -> RunResult {
        let mut r = RunResult {
            schema: 1,
            duration_s: 1.0,
            requests_done: rps as u64,
            requests_started: rps as u64,
            ..Default::default()
        };
        r.histograms.latency.record_n_micros(p50_us, 100);
        r.config.protocol = "h2".into();
        r
    }

    #[test]
    fn repetitions_give_intervals_and_significance() {
        let a: Vec<RunResult> = [1000.0, 1010.0, 990.0, 1005.0, 995.0]
            .iter()
            .map(|x| run(*x, 2000))
            .collect();
        let mut b: Vec<RunResult> = [2000.0, 2020.0, 1980.0, 2010.0, 1990.0]
            .iter()
            .map(|x| run(*x, 1000))
            .collect();
        for x in &mut b {
            x.config.protocol = "h3".into();
        }
        let d = RunDiff::build("a.json", &a, "b.json", &b);
        let named: Vec<String> = d.changes.iter().map(|c| c.to_string()).collect();
        assert_eq!(named, ["protocol: h2 → h3"]);
        let rps = &d.figures[0];
        assert_eq!(rps.name, "requests/s");
        assert!((rps.ratio - 2.0).abs() < 1e-9);
        assert!(rps.significant());
        assert!(rps.change().starts_with("2.00× better"), "{}", rps.change());
        let p50 = d
            .figures
            .iter()
            .find(|f| f.name == "latency p50 (ms)")
            .unwrap();
        assert!(p50.change().contains("better"), "{}", p50.change());
        assert!(d
            .text()
            .contains("1 factor(s) differ (A → B):\n  protocol: h2 → h3\n"));
    }

    #[test]
    fn one_run_a_side_says_so_and_claims_no_significance() {
        let d = RunDiff::build("a", &[run(1000.0, 2000)], "b", &[run(1001.0, 2000)]);
        assert!(d
            .figures
            .iter()
            .all(|f| f.p_value.is_none() && !f.significant()));
        assert!(d.text().contains("no interval or significance"));
        assert!(d.changes.is_empty());
        assert!(d.text().contains("factors: the same"));
        let same = RunDiff::build(
            "a",
            &[run(1000.0, 2000), run(1000.0, 2000)],
            "b",
            &[run(1000.0, 2000), run(1000.0, 2000)],
        );
        assert!(
            same.figures[0].change().starts_with("~"),
            "{}",
            same.figures[0].change()
        );
    }
}
