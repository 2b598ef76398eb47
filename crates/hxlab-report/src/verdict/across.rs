//! Does a pair's verdict hold across a swept factor? For every factor a pair's comparisons
//! vary in (the scheduler, the network, the delay, the origin, ...), the pair is judged at
//! each of the factor's levels, and the verdict **holds** across the factor when every two
//! conditions that differ in that factor alone say the same: faster, slower, or no
//! difference that matters. Otherwise it **depends** on the factor. Written once for any
//! factor, so one swept tomorrow (a second browser engine, send buffering, header tables) is
//! told the way the scheduler is.

use super::and_list;
use super::judge::{self, judge, Finding};
use crate::comparisons::{fmt_ratio, Comparison};
use crate::model::FactorLevels;
use std::collections::BTreeMap;

/// Which way one comparison points, as the verdict weighs it: a difference the test found
/// (or, with too few repetitions to test, one that looks larger than 2 %), or none that
/// matters.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Direction {
    /// The protocol did better than its reference (faster, or more requests/s).
    Better,
    /// The protocol did worse.
    Worse,
    /// Equal within 2 %, or no significant difference.
    Same,
}

impl Direction {
    /// The direction of one comparison.
    pub fn of(c: &Comparison) -> Direction {
        match judge(c) {
            Finding::Better => Direction::Better,
            Finding::Worse => Direction::Worse,
            Finding::TooFew if !judge::negligible(c.ratio) => {
                if c.better() {
                    Direction::Better
                } else {
                    Direction::Worse
                }
            }
            _ => Direction::Same,
        }
    }

    /// The key summary.json gives it.
    pub fn key(self) -> &'static str {
        match self {
            Direction::Better => "better",
            Direction::Worse => "worse",
            Direction::Same => "same",
        }
    }
}

/// What a pair's comparisons at one level of a factor say.
#[derive(Clone, Debug, PartialEq)]
pub struct LevelVerdict {
    /// The level, as the experiment writes it.
    pub level: String,
    /// The direction of every comparison at the level, in condition order.
    pub directions: Vec<Direction>,
    /// What each of them is said to be (`faster`, `looks slower`, `equal within 2 %`).
    pub words: Vec<String>,
}

impl LevelVerdict {
    /// The one direction of every comparison at the level; None when they differ.
    pub fn direction(&self) -> Option<Direction> {
        let first = *self.directions.first()?;
        self.directions.iter().all(|d| *d == first).then_some(first)
    }
}

/// A pair's verdict across one swept factor.
#[derive(Clone, Debug, PartialEq)]
pub struct Across {
    /// The factor.
    pub factor: String,
    /// True when every two conditions that differ in this factor alone agree.
    pub holds: bool,
    /// True when some comparison had too few repetitions to test: what holds or depends is
    /// then said as it looks.
    pub untested: bool,
    /// The verdict at each level, in the order the levels appear.
    pub levels: Vec<LevelVerdict>,
}

impl Across {
    /// True when each level holds exactly one comparison: the factor is the only one the
    /// pair's conditions vary in, and each level can be told with its own figure.
    fn one_per_level(&self) -> bool {
        self.levels.iter().all(|l| l.directions.len() == 1)
    }
}

/// The factor's value in a comparison's conditions.
fn value_of<'a>(c: &'a Comparison, factor: &str) -> Option<&'a str> {
    c.conditions
        .iter()
        .find(|(k, _)| k == factor)
        .map(|(_, v)| v.as_str())
}

/// The pair's verdict across each factor its comparisons vary in, in the conditions' order,
/// each factor's levels in the experiment's order (`factors`); a factor is left out when no
/// two conditions differ in it alone (nothing to tell from).
pub fn across(group: &[&Comparison], factors: &[FactorLevels]) -> Vec<Across> {
    let mut names: Vec<&str> = Vec::new();
    for c in group {
        for (k, _) in &c.conditions {
            if !names.contains(&k.as_str()) {
                names.push(k);
            }
        }
    }
    names
        .into_iter()
        .filter_map(|f| {
            let mut a = across_one(group, f)?;
            if let Some(order) = factors.iter().find(|x| x.name == f) {
                a.levels
                    .sort_by_key(|l| order.levels.iter().position(|x| *x == l.level));
            }
            Some(a)
        })
        .collect()
}

/// The conditions that differ in one factor alone: each one's level and direction.
type Slice<'a> = Vec<(&'a str, Direction)>;

/// The verdict across `factor`, or None when no two conditions differ in it alone.
fn across_one(group: &[&Comparison], factor: &str) -> Option<Across> {
    let mut levels: Vec<LevelVerdict> = Vec::new();
    // The other factors' values → the directions at each level of this one.
    let mut slices: BTreeMap<Vec<&(String, String)>, Slice> = BTreeMap::new();
    for c in group {
        let Some(level) = value_of(c, factor) else {
            continue;
        };
        let d = Direction::of(c);
        match levels.iter_mut().find(|l| l.level == level) {
            Some(l) => {
                l.directions.push(d);
                l.words.push(word(c));
            }
            None => levels.push(LevelVerdict {
                level: level.to_string(),
                directions: vec![d],
                words: vec![word(c)],
            }),
        }
        let rest: Vec<&(String, String)> =
            c.conditions.iter().filter(|(k, _)| k != factor).collect();
        slices.entry(rest).or_default().push((level, d));
    }
    let compared: Vec<&Slice> = slices
        .values()
        .filter(|s| s.iter().any(|(l, _)| *l != s[0].0))
        .collect();
    if compared.is_empty() {
        return None;
    }
    let holds = compared.iter().all(|s| s.iter().all(|(_, d)| *d == s[0].1));
    Some(Across {
        factor: factor.to_string(),
        holds,
        untested: group.iter().any(|c| judge(c) == Finding::TooFew),
        levels,
    })
}

/// What one comparison is said to be: `faster`, `looks slower`, `equal within 2 %`, ...
fn word(c: &Comparison) -> String {
    let equal = format!("equal within {:.0} %", judge::NEGLIGIBLE * 100.0);
    let way = if c.better() { "faster" } else { "slower" };
    match judge(c) {
        Finding::Better | Finding::Worse => way.to_string(),
        Finding::Equal => equal,
        Finding::NoDifference => "no significant difference".to_string(),
        Finding::TooFew if judge::negligible(c.ratio) => format!("looks {equal}"),
        Finding::TooFew => format!("looks {way}"),
    }
}

/// One comparison's figure: `1.70×, CI 1.62–1.79` for a difference the test found, the
/// ratio of medians otherwise.
fn figure(c: &Comparison) -> String {
    match judge(c) {
        Finding::Better | Finding::Worse => {
            let (f, (lo, hi)) = c.factor();
            format!("{}×, CI {}–{}", fmt_ratio(f), fmt_ratio(lo), fmt_ratio(hi))
        }
        Finding::TooFew if !judge::negligible(c.ratio) => format!("{}×", fmt_ratio(c.factor().0)),
        _ => format!("{}×", fmt_ratio(c.ratio)),
    }
}

/// The clause of a factor the pair's conditions vary in alone, one figure per level, the
/// levels said alike grouped: `holds across scheduler — h2 faster under scheduler rfc9218
/// (1.70×, CI 1.62–1.79) and round-robin (1.50×, CI 1.41–1.58)`, `depends on scheduler — h2
/// faster under scheduler rfc9218 (…), slower under fifo (…)`. None unless each level has
/// one comparison.
pub(super) fn alone_clause(p: &str, a: &Across, group: &[&Comparison]) -> Option<String> {
    if !a.one_per_level() {
        return None;
    }
    // Levels said alike are grouped, in the order of their first level.
    let mut said: Vec<(String, Vec<&Comparison>)> = Vec::new();
    for l in &a.levels {
        let c = *group
            .iter()
            .find(|c| value_of(c, &a.factor) == Some(l.level.as_str()))?;
        let w = word(c);
        match said.iter_mut().find(|(x, _)| *x == w) {
            Some((_, cs)) => cs.push(c),
            None => said.push((w, vec![c])),
        }
    }
    let mut named = false;
    let groups: Vec<String> = said
        .iter()
        .enumerate()
        .map(|(i, (w, cs))| {
            // The protocol is named once, before the first difference.
            let who = if !named && (w.ends_with("faster") || w.ends_with("slower")) {
                named = true;
                format!("{p} ")
            } else {
                String::new()
            };
            format!(
                "{who}{w} {} {}",
                preposition(&a.factor),
                levels_with_figures(&a.factor, cs, i == 0)
            )
        })
        .collect();
    let verdict = verdict_words(a);
    Some(format!("{verdict} — {}", groups.join(", ")))
}

/// A level as a line names it: the first with its factor (`scheduler rfc9218`, as conditions
/// are named everywhere in the report), the others by their value alone (`fifo`, `50ms`)
/// unless it is a bare number, which says nothing without its factor (`resources 24`).
fn level_name(factor: &str, level: &str, first: bool) -> String {
    // An engine is named as people name it: `in Chromium`, `in Firefox`.
    if factor == "browser" {
        if let Ok(engine) = level.parse::<hxlab_core::page::Engine>() {
            return engine.label().to_string();
        }
    }
    if first || level.parse::<f64>().is_ok() {
        format!("{factor} {level}")
    } else {
        level.to_string()
    }
}

/// How a level is introduced: `under scheduler fifo`, but `in Chromium` (a browser engine
/// is where the page ran, not a condition it ran under).
fn preposition(factor: &str) -> &'static str {
    if factor == "browser" {
        "in"
    } else {
        "under"
    }
}

/// `scheduler rfc9218 (1.70×, CI …) and round-robin (1.50×, …)` (the factor named when
/// `first`); more than three levels as one range: `delay 0ms, 10ms, 20ms and 40ms
/// (3.40–8.44×, largest 8.44× under 40ms)`.
fn levels_with_figures(factor: &str, cs: &[&Comparison], first: bool) -> String {
    let names: Vec<String> = cs
        .iter()
        .enumerate()
        .map(|(i, c)| level_name(factor, value_of(c, factor).unwrap_or("?"), first && i == 0))
        .collect();
    if cs.len() <= 3 {
        let each: Vec<String> = names
            .iter()
            .zip(cs)
            .map(|(name, c)| format!("{name} ({})", figure(c)))
            .collect();
        return and_list(&each);
    }
    let sizes: Vec<f64> = cs.iter().map(|c| c.factor().0).collect();
    let lo = sizes.iter().copied().fold(f64::INFINITY, f64::min);
    let Some(top) = cs
        .iter()
        .copied()
        .min_by(|a, b| super::size(b).total_cmp(&super::size(a)))
    else {
        return and_list(&names);
    };
    format!(
        "{} ({}–{}×, largest {} {} {})",
        and_list(&names),
        fmt_ratio(lo),
        fmt_ratio(top.factor().0),
        figure(top),
        preposition(factor),
        value_of(top, factor).unwrap_or("?")
    )
}

/// `holds across`, `depends on`, or as it looks when untested.
fn verb(holds: bool, untested: bool) -> &'static str {
    match (holds, untested) {
        (true, false) => "holds across",
        (false, false) => "depends on",
        (true, true) => "looks to hold across",
        (false, true) => "looks to depend on",
    }
}

/// `holds across F` or `depends on F`.
fn verdict_words(a: &Across) -> String {
    format!("{} {}", verb(a.holds, a.untested), a.factor)
}

/// The tail of a pair line whose conditions vary in several factors: the factors the
/// verdict depends on, each with what it says at each level, then those it holds across:
/// `depends on profile (faster under profile none; no significant difference under Regular 4G);
/// holds across delay and resources`.
pub(super) fn factors_clause(all: &[Across]) -> String {
    let untested = all.iter().any(|a| a.untested);
    let mut parts = Vec::new();
    for holds in [false, true] {
        let named: Vec<String> = all
            .iter()
            .filter(|a| a.holds == holds)
            .map(|a| {
                if holds {
                    return a.factor.clone();
                }
                let levels: Vec<String> = a
                    .levels
                    .iter()
                    .enumerate()
                    .map(|(i, l)| {
                        let name = level_name(&a.factor, &l.level, i == 0);
                        level_words(l, &format!("{} {name}", preposition(&a.factor)))
                    })
                    .collect();
                format!("{} ({})", a.factor, levels.join("; "))
            })
            .collect();
        if !named.is_empty() {
            parts.push(format!("{} {}", verb(holds, untested), and_list(&named)));
        }
    }
    parts.join("; ")
}

/// What a pair does at one level, introduced as `at` (`under profile none`, `in Firefox`), in
/// words: `faster under profile none`, `no significant difference under Regular 4G`, or for
/// a level whose conditions disagree `under 20ms: faster in 1, slower in 2 of 4`.
fn level_words(l: &LevelVerdict, at: &str) -> String {
    let way = |d: Direction| match d {
        Direction::Better => "faster",
        Direction::Worse => "slower",
        Direction::Same => "no clear difference",
    };
    if let Some(w) = l.words.first().filter(|w| l.words.iter().all(|x| x == *w)) {
        return format!("{w} {at}");
    }
    if let Some(d) = l.direction() {
        return format!("{} {at}", way(d));
    }
    let n = l.directions.len();
    let counts: Vec<String> = [Direction::Better, Direction::Worse]
        .into_iter()
        .map(|d| (d, l.directions.iter().filter(|x| **x == d).count()))
        .filter(|(_, k)| *k > 0)
        .map(|(d, k)| format!("{} in {k}", way(d)))
        .collect();
    format!("{at}: {} of {n}", counts.join(", "))
}
