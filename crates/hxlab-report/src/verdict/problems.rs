//! Problems grouped by kind: one verdict line per kind with its count and first example, so
//! ten comparisons that are not like for like make one line, not ten.

use super::{Kind, Line, Problem};
use crate::cells::CellSummary;
use crate::comparisons::Comparison;
use crate::report::Report;
use std::collections::BTreeMap;

/// The problems of one cell, each with its kind and one sentence.
pub(super) fn cell_problems(c: &CellSummary) -> Vec<(Problem, String)> {
    let proto = c.factors.get("protocol").cloned().unwrap_or_default();
    let mut out = Vec::new();
    if let Some(why) = &c.skipped {
        out.push((Problem::Skipped, format!("{proto} was not measured: {why}")));
        return out;
    }
    if let Some(other) = &c.fell_back {
        out.push((
            Problem::FellBack,
            format!("{proto} fell back: its connections negotiated {other}, so these figures are not {proto}'s"),
        ));
    }
    if c.failed > 0 {
        let first = match c.first_error.as_deref() {
            Some(e) if !e.is_empty() => format!(" (first: {e})"),
            _ => String::new(),
        };
        out.push((
            Problem::Errors,
            format!(
                "{proto} had errors in {} of {} repetitions{first}",
                c.failed, c.ran
            ),
        ));
    }
    for w in &c.cc_mismatch {
        out.push((Problem::CcNotAsAsked, format!("{proto}: {w}")));
    }
    for w in &c.origin_mismatch {
        out.push((Problem::OriginNotAsAsked, format!("{proto}: {w}")));
    }
    if let Some(rp) = c.replay.as_ref().filter(|rp| rp.tally.misses > 0) {
        out.push((
            Problem::ReplayMissed,
            format!(
                "{proto}: the replay missed {} request(s) in {} of {} repetitions (first: {})",
                rp.tally.misses,
                c.replay_missed_runs,
                c.ran,
                rp.first_miss.as_deref().unwrap_or("not listed")
            ),
        ));
    }
    for line in c.page_problems.lines("runs") {
        out.push((Problem::ResourcesFailed, format!("{proto}: {line}")));
    }
    // Clean repetitions without the metric (a page that painted nothing): left out of the
    // figures, so said.
    let unrecorded = c.clean.len().saturating_sub(c.values.len());
    if unrecorded > 0 {
        out.push((
            Problem::NotRecorded,
            format!(
                "{proto}: {unrecorded} of {} clean repetitions recorded no figure for the metric",
                c.clean.len()
            ),
        ));
    }
    out
}

/// One line per kind of problem, in the order of [`Problem`]: `not like for like ×10
/// (first: h3 vs h1-tls: … [delay 20ms, resources 30])`.
pub(super) fn problem_lines(r: &Report, tied: &[String]) -> Vec<Line> {
    let mut found: BTreeMap<Problem, Vec<(String, String)>> = BTreeMap::new();
    for c in &r.cells {
        for (kind, text) in cell_problems(c) {
            found
                .entry(kind)
                .or_default()
                .push((text, r.cell_condition(c, tied)));
        }
    }
    for c in &r.comparisons {
        for text in [mixed_controllers(r, c), mixed_header_tables(r, c)]
            .into_iter()
            .flatten()
        {
            found
                .entry(Problem::NotLikeForLike)
                .or_default()
                .push((text, c.condition.clone()));
        }
    }
    found
        .into_iter()
        .filter_map(|(kind, all)| {
            let count = all.len();
            let (text, condition) = all.into_iter().next()?;
            let at = if condition.is_empty() {
                String::new()
            } else {
                format!(" [{condition}]")
            };
            let text = if count == 1 {
                format!("{}: {text}{at}", kind.label())
            } else {
                format!("{} ×{count} (first: {text}{at})", kind.label())
            };
            Some(Line {
                kind: Kind::Problem,
                text,
                condition,
                problem: Some(kind),
                count,
                across: Vec::new(),
            })
        })
        .collect()
}

/// When the cells of one pair's comparisons had different resources go wrong (a beacon that
/// failed in the h2 runs but not in the h3 runs): the clause said beside the pair, for the
/// first such comparison and how many there were. None when every comparison's cells had
/// the same failures.
pub(super) fn failures_differ(r: &Report, group: &[&Comparison]) -> Option<String> {
    let cell = |k: &str| r.cells.iter().find(|x| x.key == k);
    let differing: Vec<(&Comparison, String, String)> = group
        .iter()
        .filter_map(|c| {
            let (a, b) = (cell(&c.cells.0)?, cell(&c.cells.1)?);
            a.page_problems
                .differs_from(&b.page_problems)
                .then(|| (*c, a.page_problems.brief(), b.page_problems.brief()))
        })
        .collect();
    let (c, a, b) = differing.first()?;
    let at = if c.condition.is_empty() {
        String::new()
    } else {
        format!(" [{}]", c.condition)
    };
    let more = match differing.len() {
        1 => String::new(),
        n => format!(" (and {} more condition(s))", n - 1),
    };
    Some(format!(
        "their failures differ, so the difference is not the protocol's alone: {} {a}, {} {b}{at}{more}",
        c.protocol, c.baseline
    ))
}

/// When hxlab's origin compressed the two cells' response heads with different header
/// tables, as it read them back (h2's HPACK against h3's QPACK, say): the difference is not
/// the protocol's alone. Cells without a table (HTTP/1.1, other origins) say nothing.
fn mixed_header_tables(r: &Report, c: &Comparison) -> Option<String> {
    let cell = |k: &str| r.cells.iter().find(|x| x.key == k);
    let (a, b) = (cell(&c.cells.0)?, cell(&c.cells.1)?);
    let (ta, tb) = (&a.server_encoder_tables, &b.server_encoder_tables);
    if ta.is_empty() || tb.is_empty() || ta.keys().eq(tb.keys()) {
        return None;
    }
    Some(format!(
        "{} vs {}: the origin compressed their response heads with header tables of {} and {} bytes (read back), so the difference mixes the protocol with header compression; set header_table for both",
        c.protocol,
        c.baseline,
        hxlab_core::cc::counts_text(ta),
        hxlab_core::cc::counts_text(tb)
    ))
}

/// When the two cells of a comparison sent with different congestion controllers, as
/// their servers read them back: the difference is not the protocol's alone.
fn mixed_controllers(r: &Report, c: &Comparison) -> Option<String> {
    let cell = |k: &str| r.cells.iter().find(|x| x.key == k);
    let (a, b) = (cell(&c.cells.0)?, cell(&c.cells.1)?);
    let names = |m: &BTreeMap<String, u64>| m.keys().cloned().collect::<Vec<_>>();
    if a.server_cc.is_empty()
        || b.server_cc.is_empty()
        || names(&a.server_cc) == names(&b.server_cc)
    {
        return None;
    }
    Some(format!(
        "{} vs {}: their servers sent with {} and {} (read back), so the difference mixes the protocol with the congestion controller; set cc for both",
        c.protocol,
        c.baseline,
        hxlab_core::cc::counts_text(&a.server_cc),
        hxlab_core::cc::counts_text(&b.server_cc)
    ))
}
