//! One verdict line per protocol pair, grouped across conditions, and the per-protocol page
//! figures of a browser experiment.

use super::across::{across, alone_clause, factors_clause};
use super::judge::{self, judge, Finding, NEGLIGIBLE};
use super::{Kind, Line};
use crate::comparisons::{fmt_ratio, Comparison};
use crate::model::FactorLevels;
use crate::report::Report;
use hxlab_core::stats;

/// One line per (protocol, reference) pair of `comparisons`, in the order they first
/// appear, each line starting with `prefix` (e.g. `LCP: `); `factors` orders the levels.
pub(super) fn pair_lines(
    report: &Report,
    comparisons: &[Comparison],
    factors: &[FactorLevels],
    prefix: &str,
) -> Vec<Line> {
    let mut pairs: Vec<(&str, &str)> = Vec::new();
    for c in comparisons {
        let pair = (c.protocol.as_str(), c.baseline.as_str());
        if !pairs.contains(&pair) {
            pairs.push(pair);
        }
    }
    let all: Vec<&[(String, String)]> = comparisons.iter().map(|c| &c.conditions[..]).collect();
    pairs
        .into_iter()
        .map(|(p, b)| {
            let group: Vec<&Comparison> = comparisons
                .iter()
                .filter(|c| c.protocol == p && c.baseline == b)
                .collect();
            let mut line = pair_line(p, b, &group, &all, factors, prefix);
            if let Some(differ) = super::problems::failures_differ(report, &group) {
                line.text.push_str(&format!("; {differ}"));
            }
            line
        })
        .collect()
}

/// The line of one pair: its conditions, a clause per finding, the differences first, then
/// whether that holds across each factor the conditions vary in; or, when they vary in one
/// factor alone, that factor's levels, each with its figure.
fn pair_line(
    p: &str,
    b: &str,
    group: &[&Comparison],
    all: &[&[(String, String)]],
    factors: &[FactorLevels],
    prefix: &str,
) -> Line {
    let differs = group
        .iter()
        .any(|c| matches!(judge(c), Finding::Better | Finding::Worse));
    let few = group.iter().find(|c| judge(c) == Finding::TooFew);
    let factors = across(group, factors);
    let mut clauses = Vec::new();
    // One factor varied alone: the line is its levels, each with its figure.
    if let Some(alone) = match factors.as_slice() {
        [one] => alone_clause(p, one, group),
        _ => None,
    } {
        clauses.push(alone);
    } else {
        clauses.extend(conditions_clauses(p, group, all));
        if !factors.is_empty() {
            let last = clauses.pop().unwrap_or_default();
            clauses.push(format!("{last} — {}", factors_clause(&factors)));
        }
    }
    if let Some(c) = few {
        clauses.push(format!(
            "{}+{} repetitions are too few to test at 5 %: use -r {}",
            c.n.0,
            c.n.1,
            judge::repetitions_needed()
        ));
    }
    let kind = if differs {
        Kind::Significant
    } else if few.is_some() {
        Kind::Untested
    } else {
        Kind::Same
    };
    Line {
        kind,
        text: format!("{prefix}{p} vs {b}: {}", clauses.join("; ")),
        condition: String::new(),
        problem: None,
        count: group.len(),
        across: factors,
    }
}

/// The clauses of a pair across its conditions, a clause per finding, the differences
/// first: `h2 faster in 4 of 5 conditions, …; profile Regular 4G: no significant
/// difference (1.00×)`.
fn conditions_clauses(p: &str, group: &[&Comparison], all: &[&[(String, String)]]) -> Vec<String> {
    let total = group.len();
    let with = |keep: &dyn Fn(Finding) -> bool| -> Vec<&Comparison> {
        group.iter().copied().filter(|c| keep(judge(c))).collect()
    };
    let differs = with(&|f| matches!(f, Finding::Better | Finding::Worse));
    let (few_equal, few_differ): (Vec<&Comparison>, Vec<&Comparison>) =
        with(&|f| f == Finding::TooFew)
            .into_iter()
            .partition(|c| judge::negligible(c.ratio));
    let mut clauses = Vec::new();
    if !differs.is_empty() {
        clauses.push(direction_clause(p, &differs, total, all, ""));
    }
    if !few_differ.is_empty() {
        clauses.push(direction_clause(p, &few_differ, total, all, "looks "));
    }
    let equal_within = format!("equal within {:.0} %", NEGLIGIBLE * 100.0);
    for (set, what) in [
        (few_equal, format!("looks {equal_within}")),
        (with(&|f| f == Finding::Equal), equal_within.clone()),
        (
            with(&|f| f == Finding::NoDifference),
            "no significant difference".to_string(),
        ),
    ] {
        if !set.is_empty() {
            clauses.push(level_clause(&set, total, all, &what));
        }
    }
    clauses
}

/// `h2 faster in 4 of 5 conditions, 4.41–9.12× (largest 9.12×, CI 9.00–9.66, delay 50ms)`,
/// with mixed directions said as `h3 faster in 2, slower in 1 of 5 conditions: faster …,
/// slower …`. `verb` is `looks ` for untested differences, which get no interval.
fn direction_clause(
    p: &str,
    set: &[&Comparison],
    total: usize,
    all: &[&[(String, String)]],
    verb: &str,
) -> String {
    let with_ci = verb.is_empty();
    let (faster, slower): (Vec<&Comparison>, Vec<&Comparison>) =
        set.iter().partition(|c| c.better());
    if total == 1 {
        let c = set[0];
        let (f, (lo, hi)) = c.factor();
        let word = if c.better() { "faster" } else { "slower" };
        let ci = if with_ci {
            format!(" (CI {}–{})", fmt_ratio(lo), fmt_ratio(hi))
        } else {
            String::new()
        };
        return format!("{p} {verb}{}× {word}{ci}", fmt_ratio(f));
    }
    let side = |s: &[&Comparison]| effect_range(s, all, with_ci);
    match (faster.is_empty(), slower.is_empty()) {
        (false, true) => format!(
            "{p} {verb}faster in {} of {total} conditions, {}",
            faster.len(),
            side(&faster)
        ),
        (true, false) => format!(
            "{p} {verb}slower in {} of {total} conditions, {}",
            slower.len(),
            side(&slower)
        ),
        _ => format!(
            "{p} {verb}faster in {}, slower in {} of {total} conditions: faster {}, slower {}",
            faster.len(),
            slower.len(),
            side(&faster),
            side(&slower)
        ),
    }
}

/// `4.41–9.12× (largest 9.12×, CI 9.00–9.66, delay 50ms, resources 120)`: the range of the
/// factors (≥ 1) and the largest with its interval and condition.
fn effect_range(set: &[&Comparison], all: &[&[(String, String)]], with_ci: bool) -> String {
    let factors: Vec<f64> = set.iter().map(|c| c.factor().0).collect();
    // The first of equal largest, in the experiment's condition order.
    let Some(top) = set
        .iter()
        .copied()
        .min_by(|a, b| super::size(b).total_cmp(&super::size(a)))
    else {
        return String::new();
    };
    let (f, (lo, hi)) = top.factor();
    let mut inner = Vec::new();
    let smallest = fmt_ratio(factors.iter().copied().fold(f64::INFINITY, f64::min));
    let range = if smallest != fmt_ratio(f) {
        inner.push(format!("largest {}×", fmt_ratio(f)));
        format!("{smallest}–{}×", fmt_ratio(f))
    } else {
        format!("{}×", fmt_ratio(f))
    };
    if with_ci {
        inner.push(format!("CI {}–{}", fmt_ratio(lo), fmt_ratio(hi)));
    }
    let cond = short_condition(all, &top.conditions);
    if !cond.is_empty() {
        inner.push(cond);
    }
    if inner.is_empty() {
        range
    } else {
        format!("{range} ({})", inner.join(", "))
    }
}

/// `profile Regular 4G: equal within 2 % (0.99×)`, `equal within 2 % in all 5 conditions
/// (0.99–1.01×)` or `equal within 2 % in 3 conditions (…)`: the conditions where a pair
/// does not differ, with the ratios of medians.
fn level_clause(
    set: &[&Comparison],
    total: usize,
    all: &[&[(String, String)]],
    what: &str,
) -> String {
    let ratios: Vec<f64> = set.iter().map(|c| c.ratio).collect();
    let lo = ratios.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = ratios.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let range = if fmt_ratio(lo) == fmt_ratio(hi) {
        format!("{}×", fmt_ratio(lo))
    } else {
        format!("{}–{}×", fmt_ratio(lo), fmt_ratio(hi))
    };
    if total == 1 {
        let c = set[0];
        return format!(
            "{what} ({range}, p = {:.3}, n = {}+{})",
            c.p_value, c.n.0, c.n.1
        );
    }
    if set.len() == total {
        return format!("{what} in all {total} conditions ({range})");
    }
    if set.len() <= 2 {
        let names: Vec<String> = set
            .iter()
            .map(|c| short_condition(all, &c.conditions))
            .collect();
        return format!("{}: {what} ({range})", names.join(" / "));
    }
    format!("{what} in {} conditions ({range})", set.len())
}

/// The fewest of a condition's factor values that tell it from every other condition in
/// `all`, in display order: `profile Regular 4G` rather than `delay 20ms, resources 30,
/// profile Regular 4G` when it is the only one on that profile.
pub(super) fn short_condition(all: &[&[(String, String)]], this: &[(String, String)]) -> String {
    let full = |idx: &[usize]| {
        idx.iter()
            .map(|&i| format!("{} {}", this[i].0, this[i].1))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let n = this.len();
    // Beyond a handful of factors the subsets are too many to try, and a name too long.
    if n == 0 || n > 8 {
        return full(&(0..n).collect::<Vec<_>>());
    }
    let mut masks: Vec<u32> = (1..(1u32 << n)).collect();
    masks.sort_by_key(|m| (m.count_ones(), *m));
    let mut distinct: Vec<&[(String, String)]> = all.to_vec();
    distinct.sort();
    distinct.dedup();
    for m in masks {
        let idx: Vec<usize> = (0..n).filter(|i| m & (1 << i) != 0).collect();
        let matching = distinct
            .iter()
            .filter(|o| idx.iter().all(|&i| o.contains(&this[i])))
            .count();
        if matching == 1 {
            return full(&idx);
        }
    }
    full(&(0..n).collect::<Vec<_>>())
}

/// A figure in few characters: whole numbers without decimals, `41.5`, `1.20`.
fn short(x: f64) -> String {
    if x.fract() == 0.0 {
        format!("{x:.0}")
    } else if x.abs() >= 10.0 {
        format!("{x:.1}")
    } else {
        format!("{x:.2}")
    }
}

/// `medians per protocol: h2 page TTFB 45.0 ms, 3 connections, 1.20 MB; h3 …`: what each
/// protocol's page loads cost, beside the LCP and load verdicts of a browser experiment
/// (medians of the cells' medians when there are several conditions). `missing` names the
/// metrics no repetition recorded. With two browser engines each has its own medians:
/// engines are never pooled.
pub(super) fn page_figures(r: &Report, missing: &[&str]) -> Option<Line> {
    let engines = r.levels_of("browser");
    let mut parts = Vec::new();
    let mut text = String::new();
    if engines.len() > 1 {
        let mut each = Vec::new();
        for e in &engines {
            let of_engine = protocol_figures(r, Some(e));
            if !of_engine.is_empty() {
                let name = e
                    .parse::<hxlab_core::page::Engine>()
                    .map(|e| e.label().to_string())
                    .unwrap_or_else(|_| e.clone());
                each.push(format!("in {name}: {}", of_engine.join("; ")));
            }
            parts.extend(of_engine);
        }
        if !each.is_empty() {
            text = format!("medians {}", each.join(" — "));
        }
    } else {
        parts = protocol_figures(r, None);
        if !parts.is_empty() {
            text = format!("medians: {}", parts.join("; "));
        }
    }
    if !missing.is_empty() {
        if !text.is_empty() {
            text.push_str("; ");
        }
        text.push_str(&format!("not recorded: {}", missing.join(", ")));
    }
    (!text.is_empty()).then_some(Line {
        kind: Kind::Info,
        text,
        condition: String::new(),
        problem: None,
        count: parts.len(),
        across: Vec::new(),
    })
}

/// `h2 TTFB 45.0 ms, 3 connections, 1.20 MB` per protocol: medians of the cells' medians,
/// over the cells of `engine` when one is named.
fn protocol_figures(r: &Report, engine: Option<&str>) -> Vec<String> {
    let mut parts = Vec::new();
    for p in r.levels_of("protocol") {
        let cells: Vec<_> = r
            .cells
            .iter()
            .filter(|c| c.factors.get("protocol") == Some(&p) && !c.values.is_empty())
            .filter(|c| {
                engine.is_none_or(|e| c.factors.get("browser").map(String::as_str) == Some(e))
            })
            .collect();
        let figure = |key: &str| {
            let v: Vec<f64> = cells
                .iter()
                .filter_map(|c| c.secondary.get(key).copied())
                .collect();
            Some(stats::median(&v)).filter(|m| m.is_finite())
        };
        let mut f = Vec::new();
        if let Some(t) = figure("page_ttfb_ms").or_else(|| figure("ttfb_ms")) {
            f.push(format!("TTFB {} ms", short(t)));
        }
        if let Some(n) = figure("connections") {
            f.push(format!("{} connections", short(n)));
        }
        if let Some(b) = figure("bytes_received").filter(|b| *b > 0.0) {
            f.push(format!("{} MB", short(b / 1e6)));
        }
        if !f.is_empty() {
            parts.push(format!("{p} {}", f.join(", ")));
        }
    }
    parts
}
