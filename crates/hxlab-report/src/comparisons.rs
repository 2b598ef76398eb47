//! Protocols compared under the same conditions: the ratio of medians with its bootstrap
//! interval, the Hodges–Lehmann shift, and a Mann-Whitney test. Every protocol is compared
//! with the baseline, and each protocol with the one listed before it (so h3 is compared
//! with h2, not only with HTTP/1.1).

use crate::figures::{fmt_num, CONFIDENCE, RESAMPLES, SIGNIFICANCE};
use crate::model::Metric;
use hxlab_core::stats;

/// One protocol compared with another (the reference) under the same conditions.
#[derive(Clone, Debug)]
pub struct Comparison {
    /// The conditions (swept non-protocol factor values), e.g. `delay 10ms, resources 100`.
    pub condition: String,
    /// The same conditions as (factor, value) pairs, in display order.
    pub conditions: Vec<(String, String)>,
    /// The protocol compared.
    pub protocol: String,
    /// The reference protocol (the baseline, or the protocol listed before `protocol`).
    pub baseline: String,
    /// median(protocol) / median(baseline).
    pub ratio: f64,
    /// 95 % bootstrap interval of the ratio.
    pub ci: (f64, f64),
    /// Hodges–Lehmann estimate of the shift, protocol − baseline: the median of every
    /// pairwise difference, in the metric's display unit ([`Comparison::shift_unit`]).
    pub shift: f64,
    /// Two-sided Mann-Whitney U p-value.
    pub p_value: f64,
    /// Repetitions on each side.
    pub n: (usize, usize),
    /// The metric compared.
    pub metric: Metric,
    /// The keys of the two cells compared: (protocol's, baseline's).
    pub cells: (String, String),
}

impl Comparison {
    /// Whether the difference is significant at [`SIGNIFICANCE`].
    pub fn significant(&self) -> bool {
        self.p_value < SIGNIFICANCE
    }

    /// Unit of [`Comparison::shift`]: `ms` for times, `req/s` for throughput.
    pub fn shift_unit(&self) -> &'static str {
        shift_unit(self.metric)
    }

    /// Whether `protocol` did better than `baseline` (by the medians).
    pub fn better(&self) -> bool {
        if self.metric.lower_is_better() {
            self.ratio < 1.0
        } else {
            self.ratio > 1.0
        }
    }

    /// How many times better (≥ 1) the better side is, with its interval, oriented so the
    /// figure reads "X is f× faster than Y".
    pub fn factor(&self) -> (f64, (f64, f64)) {
        let flip = self.better() == self.metric.lower_is_better();
        if flip {
            (1.0 / self.ratio, (1.0 / self.ci.1, 1.0 / self.ci.0))
        } else {
            (self.ratio, self.ci)
        }
    }

    /// The shift as text with its sign and unit, e.g. `−62.1 ms`.
    pub fn shift_text(&self) -> String {
        shift_text(self.shift, self.shift_unit())
    }

    /// `h2 vs h1: 0.61× (0.58–0.64), shift −62.1 ms, p = 0.008, n = 5+5`: the figures
    /// without a judgement (the verdict's [`judge`](crate::verdict::judge) gives that).
    pub fn sentence(&self) -> String {
        format!(
            "{} vs {}: {}× ({}–{}), shift {}, p = {:.3}, n = {}+{}",
            self.protocol,
            self.baseline,
            fmt_ratio(self.ratio),
            fmt_ratio(self.ci.0),
            fmt_ratio(self.ci.1),
            self.shift_text(),
            self.p_value,
            self.n.0,
            self.n.1
        )
    }
}

/// A signed shift with its unit: `−928 ms`, `+6.00 ms`, `−0.322 ms`, `+1240 req/s`.
pub fn shift_text(shift: f64, unit: &str) -> String {
    if !shift.is_finite() {
        return "—".into();
    }
    if shift == 0.0 {
        return format!("0 {unit}");
    }
    let sign = if shift < 0.0 { "−" } else { "+" };
    let a = shift.abs();
    let num = if a >= 100.0 {
        format!("{a:.0}")
    } else if a >= 10.0 {
        format!("{a:.1}")
    } else if a >= 1.0 {
        format!("{a:.2}")
    } else {
        fmt_num(a)
    };
    format!("{sign}{num} {unit}")
}

/// Unit of a metric's differences as the report shows them.
pub fn shift_unit(m: Metric) -> &'static str {
    match m {
        Metric::RequestsPerSec => "req/s",
        _ => "ms",
    }
}

/// A value of the metric in its display unit (seconds are shown as milliseconds).
pub fn display_value(m: Metric, v: f64) -> f64 {
    match m {
        Metric::RequestsPerSec => v,
        _ => v * 1000.0,
    }
}

/// Ratio with two decimals (`—` when not finite).
pub fn fmt_ratio(x: f64) -> String {
    if x.is_finite() {
        format!("{x:.2}")
    } else {
        "—".into()
    }
}

/// Hodges–Lehmann estimate of the shift between two samples: the median of every
/// difference a_i − b_j (NaN when a sample is empty).
pub fn hodges_lehmann(a: &[f64], b: &[f64]) -> f64 {
    let diffs: Vec<f64> = a
        .iter()
        .flat_map(|x| b.iter().map(move |y| x - y))
        .collect();
    stats::median(&diffs)
}

/// Compares two cells' clean repetitions (None when either has none).
pub fn compare_values(
    metric: Metric,
    other: &[f64],
    base: &[f64],
) -> Option<(f64, (f64, f64), f64, f64)> {
    if other.is_empty() || base.is_empty() {
        return None;
    }
    let ratio = stats::median(other) / stats::median(base);
    let ci = stats::ratio_ci(other, base, CONFIDENCE, RESAMPLES);
    let shift = hodges_lehmann(
        &other
            .iter()
            .map(|v| display_value(metric, *v))
            .collect::<Vec<_>>(),
        &base
            .iter()
            .map(|v| display_value(metric, *v))
            .collect::<Vec<_>>(),
    );
    Some((ratio, ci, shift, mann_whitney_p(other, base)))
}

/// Two-sided Mann-Whitney U p-value: exact (by counting rank arrangements) for small samples
/// without ties, where the normal approximation is too optimistic (3 against 3 fully
/// separated is p = 0.1, not 0.05); the tie-corrected normal approximation otherwise.
pub fn mann_whitney_p(a: &[f64], b: &[f64]) -> f64 {
    let (n1, n2) = (a.len(), b.len());
    if n1 == 0 || n2 == 0 {
        return 1.0;
    }
    let mut all: Vec<f64> = a.iter().chain(b).copied().collect();
    all.sort_by(|x, y| x.total_cmp(y));
    let ties = all.windows(2).any(|w| w[0] == w[1]);
    if ties || n1 + n2 > 60 {
        return stats::mann_whitney_u(a, b).1;
    }
    // U of `a`: pairs (x in a, y in b) with x > y.
    let u: usize = a.iter().map(|x| b.iter().filter(|y| x > *y).count()).sum();
    let max = n1 * n2;
    // counts[i][j][u]: arrangements of i values of a and j of b with statistic u, built
    // from the largest value down (it is either a's, adding j to U, or b's, adding nothing).
    let mut prev: Vec<Vec<f64>> = vec![vec![0.0; max + 1]; n2 + 1];
    for row in prev.iter_mut() {
        row[0] = 1.0;
    }
    for _ in 1..=n1 {
        let mut cur: Vec<Vec<f64>> = vec![vec![0.0; max + 1]; n2 + 1];
        cur[0][0] = 1.0;
        for j in 1..=n2 {
            for k in 0..=max {
                let from_a = if k >= j { prev[j][k - j] } else { 0.0 };
                cur[j][k] = from_a + cur[j - 1][k];
            }
        }
        prev = cur;
    }
    let counts = &prev[n2];
    let total: f64 = counts.iter().sum();
    let tail = u.min(max - u);
    let p: f64 = counts[..=tail].iter().sum::<f64>() / total;
    (2.0 * p).min(1.0)
}
