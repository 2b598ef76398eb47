//! The report's charts, drawn as SVG small multiples (see [`grid`]): one chart per swept
//! factor (medians with 95 % intervals and every repetition, categorical factors as grouped
//! points, numeric ones on a true scale), latency and TTFB percentile plots from the HDR
//! histograms, and throughput and p99 over time from the per-interval series.

pub mod grid;
pub mod svg;
pub mod timeseries;

use crate::comparisons::display_value;
use crate::model::Metric;
use crate::report::Report;
use grid::{Grid, Panel, Point, Series, XAxis};
use hxlab_core::{LatencyHistogram, RunResult};

/// A chart ready to embed: an id, a title, a caption saying how to read it, and the SVG.
#[derive(Clone, Debug)]
pub struct Chart {
    /// Element id (unique in the report).
    pub id: String,
    /// Title.
    pub title: String,
    /// How to read it.
    pub caption: String,
    /// The SVG element.
    pub svg: String,
}

/// Conditions drawn at most per chart (the rest are in the tables).
pub const MAX_PANELS: usize = 12;

/// The panels a chart shows: the first [`MAX_PANELS`]; None when there are none (no chart).
fn shown(mut panels: Vec<Panel>) -> Option<Vec<Panel>> {
    panels.truncate(MAX_PANELS);
    (!panels.is_empty()).then_some(panels)
}

/// Every chart of the report, in reading order.
pub fn all(r: &Report) -> Vec<Chart> {
    let mut out = factor_charts(r);
    out.extend(percentile_charts(r));
    out.extend(time_series_charts(r));
    out
}

/// The metric's label in display units (ms for times, as the axes are drawn): used for
/// both a chart's y axis and its title, so a title never names another unit than its axis.
pub fn metric_axis(m: Metric) -> &'static str {
    match m {
        Metric::TimeS => "time to last byte (ms)",
        Metric::FcpS => "first contentful paint (ms)",
        Metric::LcpS => "largest contentful paint (ms)",
        Metric::SpeedIndexS => "Speed Index (ms)",
        Metric::RequestsPerSec => "requests/s",
    }
}

/// Protocols in the experiment's order (`all` when the cells have none).
pub(crate) fn protocols(r: &Report) -> Vec<String> {
    let p = r.levels_of("protocol");
    if p.is_empty() {
        vec!["all".into()]
    } else {
        p
    }
}

pub(crate) fn legend(labels: &[String]) -> Vec<(String, svg::Style)> {
    labels.iter().cloned().zip(svg::styles(labels)).collect()
}

/// The cell of protocol `p` under the conditions `combo` ([`Report::find_cell`]); `all`
/// stands for cells that name no protocol.
pub(crate) fn cell_of<'a>(
    r: &'a Report,
    p: &str,
    combo: &[(String, String)],
) -> Option<&'a crate::cells::CellSummary> {
    r.find_cell(combo, (p != "all").then_some(("protocol", p)))
}

/// Swept factors that are conditions: not the protocol and not tied to it.
pub(crate) fn condition_factors(r: &Report) -> Vec<String> {
    let tied = r.tied_factors();
    r.swept()
        .into_iter()
        .filter(|f| f != "protocol" && !tied.contains(f))
        .collect()
}

/// Every combination of `factors`' levels that some cell has, in level order.
pub(crate) fn combos(r: &Report, factors: &[String]) -> Vec<Vec<(String, String)>> {
    let mut out: Vec<Vec<(String, String)>> = vec![Vec::new()];
    for f in factors {
        let mut next = Vec::new();
        for c in &out {
            for l in r.levels_of(f) {
                let mut c2 = c.clone();
                c2.push((f.clone(), l));
                next.push(c2);
            }
        }
        out = next;
    }
    out.retain(|combo| {
        r.cells
            .iter()
            .any(|c| combo.iter().all(|(k, v)| c.factors.get(k) == Some(v)))
    });
    out
}

pub(crate) fn combo_title(combo: &[(String, String)]) -> String {
    combo
        .iter()
        .map(|(k, v)| format!("{k} {v}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Levels as numbers on one scale with its unit: durations in ms, sizes in KiB, plain
/// numbers as they are; None when some level is not a number (a categorical factor).
pub fn numeric_levels(levels: &[String]) -> Option<(Vec<f64>, &'static str)> {
    if levels.len() < 2 {
        return None;
    }
    let plain: Option<Vec<f64>> = levels
        .iter()
        .map(|l| l.trim().parse::<f64>().ok())
        .collect();
    if let Some(v) = plain.filter(|v| v.iter().all(|x| x.is_finite())) {
        return Some((v, ""));
    }
    let durations: Option<Vec<f64>> = levels
        .iter()
        .map(|l| {
            hxlab_core::parse_duration(l)
                .ok()
                .map(|d| d.as_secs_f64() * 1000.0)
        })
        .collect();
    if let Some(v) = durations {
        return Some((v, "ms"));
    }
    let sizes: Option<Vec<f64>> = levels
        .iter()
        .map(|l| hxlab_core::parse_size(l).ok().map(|b| b as f64 / 1024.0))
        .collect();
    sizes.map(|v| (v, "KiB"))
}

/// With no condition swept: one chart of the protocols side by side.
fn protocol_chart(r: &Report) -> Option<Chart> {
    let protos = protocols(r);
    let y_label = metric_axis(r.metric).to_string();
    let series = protos
        .iter()
        .zip(svg::styles(&protos))
        .enumerate()
        .filter_map(|(i, (p, style))| {
            let cell = cell_of(r, p, &[])?;
            let pt = cell_point(r, cell, i as f64)?;
            Some(Series {
                label: p.clone(),
                style,
                points: vec![pt],
                line: false,
                markers: true,
            })
        })
        .collect::<Vec<_>>();
    if series.is_empty() {
        return None;
    }
    let grid = Grid {
        x: XAxis::Categorical(protos.clone()),
        x_label: "protocol".into(),
        y_label,
        panels: vec![Panel {
            title: String::new(),
            series,
        }],
        legend: legend(&protos),
    };
    Some(chart(
        "chart-protocol",
        format!("{} by protocol", metric_axis(r.metric)),
        &grid,
        CI_CAPTION,
    ))
}

/// One chart per condition factor: the metric by its levels, a panel per combination of
/// the other conditions that has at least two of its levels measured. With no condition
/// swept, one chart of the protocols side by side.
fn factor_charts(r: &Report) -> Vec<Chart> {
    let conds = condition_factors(r);
    let protos = protocols(r);
    let y_label = metric_axis(r.metric).to_string();
    let mut out = Vec::new();
    if conds.is_empty() {
        out.extend(protocol_chart(r));
        return out;
    }
    for factor in &conds {
        let levels = r.levels_of(factor);
        let numeric = numeric_levels(&levels);
        let others: Vec<String> = conds.iter().filter(|f| *f != factor).cloned().collect();
        let mut panels = Vec::new();
        for combo in combos(r, &others) {
            let mut series = Vec::new();
            let mut xs_seen = std::collections::BTreeSet::new();
            for (p, style) in protos.iter().zip(svg::styles(&protos)) {
                let points: Vec<Point> = levels
                    .iter()
                    .enumerate()
                    .filter_map(|(i, l)| {
                        let mut at = combo.clone();
                        at.push((factor.clone(), l.clone()));
                        let cell = cell_of(r, p, &at)?;
                        let x = numeric.as_ref().map_or(i as f64, |(v, _)| v[i]);
                        let pt = cell_point(r, cell, x)?;
                        xs_seen.insert(i);
                        Some(pt)
                    })
                    .collect();
                if !points.is_empty() {
                    series.push(Series {
                        label: p.clone(),
                        style,
                        points,
                        line: numeric.is_some(),
                        markers: true,
                    });
                }
            }
            if xs_seen.len() >= 2 {
                panels.push(Panel {
                    title: combo_title(&combo),
                    series,
                });
            }
        }
        let Some(panels) = shown(panels) else {
            continue;
        };
        let (x, x_label) = match &numeric {
            Some((v, unit)) => {
                let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
                let hi = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                let pad = (hi - lo) * 0.08;
                let labels = v
                    .iter()
                    .zip(&levels)
                    .map(|(x, l)| (*x, l.clone()))
                    .collect();
                let label = if unit.is_empty() {
                    factor.clone()
                } else {
                    format!("{factor} ({unit}, to scale)")
                };
                (
                    XAxis::Linear {
                        lo: (lo - pad).min(lo),
                        hi: hi + pad,
                        labels,
                    },
                    label,
                )
            }
            None => (XAxis::Categorical(levels.clone()), factor.clone()),
        };
        let grid = Grid {
            x,
            x_label,
            y_label: y_label.clone(),
            panels,
            legend: legend(&protos),
        };
        out.push(chart(
            &format!("chart-{factor}"),
            format!("{} by {factor}", metric_axis(r.metric)),
            &grid,
            CI_CAPTION,
        ));
    }
    out
}

const CI_CAPTION: &str = "markers: median over repetitions; bars: its 95 % bootstrap interval; faint dots: each repetition; one panel per condition";

pub(crate) fn chart(id: &str, title: String, grid: &Grid, caption: &str) -> Chart {
    Chart {
        id: id.to_string(),
        title,
        caption: caption.to_string(),
        svg: grid.render(id),
    }
}

/// A cell's median, interval and repetitions in display units.
fn cell_point(r: &Report, c: &crate::cells::CellSummary, x: f64) -> Option<Point> {
    if c.values.is_empty() || !c.median.is_finite() {
        return None;
    }
    let d = |v: f64| display_value(r.metric, v);
    Some(Point {
        x,
        y: d(c.median),
        ci: Some((d(c.ci.0), d(c.ci.1))),
        reps: c.values.iter().map(|v| d(*v)).collect(),
        mark: true,
        tip: format!(
            "{}: median {} ({}–{}), n = {}{}",
            c.key,
            crate::figures::fmt_num(d(c.median)),
            crate::figures::fmt_num(d(c.ci.0)),
            crate::figures::fmt_num(d(c.ci.1)),
            c.values.len(),
            if c.warnings.is_empty() {
                ""
            } else {
                " (warnings)"
            }
        ),
    })
}

/// The clean results of a cell (the last record of each repetition).
pub fn clean_results<'a>(r: &'a Report, cell: &str) -> Vec<&'a RunResult> {
    r.cells
        .iter()
        .find(|c| c.key == cell)
        .map(|c| {
            c.clean
                .iter()
                .filter_map(|&i| r.records[i].result.as_ref())
                .collect()
        })
        .unwrap_or_default()
}

/// x of percentile p on the 1/(1−p) log axis.
fn p_x(p: f64) -> f64 {
    (1.0 / (1.0 - p)).log10()
}

/// Percentile points of a histogram (ms), from p0 up to the percentile its count supports
/// (1/(1−p) ≤ count), at most p99.99.
pub fn percentile_points(h: &LatencyHistogram) -> Vec<Point> {
    let n = h.len();
    if n == 0 {
        return Vec::new();
    }
    let max_x = (n as f64).log10().min(4.0);
    (0..=40)
        .map(|k| k as f64 / 10.0)
        .filter(|x| *x <= max_x + 1e-9)
        .map(|x| {
            let p = 1.0 - 10f64.powf(-x);
            let v = h.quantile(p) as f64 / 1000.0;
            Point {
                x,
                y: v,
                ci: None,
                reps: Vec::new(),
                tip: format!("p{}: {} ms", pct_label(p), crate::figures::fmt_num(v)),
                mark: (x * 10.0).round() as i64 % 10 == 0 || (x - p_x(0.5)).abs() < 0.05,
            }
        })
        .collect()
}

fn pct_label(p: f64) -> String {
    let s = format!("{:.2}", p * 100.0);
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// Picks one histogram of a run.
type PickHistogram = fn(&RunResult) -> &LatencyHistogram;

/// Latency and TTFB percentile plots: a panel per condition, a line per protocol, from the
/// histograms of every clean repetition merged.
fn percentile_charts(r: &Report) -> Vec<Chart> {
    let conds = condition_factors(r);
    let protos = protocols(r);
    let mut out = Vec::new();
    let what: [(&str, &str, PickHistogram); 2] = [
        ("latency", "request latency", |x| &x.histograms.latency),
        ("ttfb", "time to first byte", |x| &x.histograms.ttfb),
    ];
    for (id, name, pick) in what {
        let mut panels = Vec::new();
        for combo in combos(r, &conds) {
            let mut series = Vec::new();
            for (p, style) in protos.iter().zip(svg::styles(&protos)) {
                let Some(cell) = cell_of(r, p, &combo) else {
                    continue;
                };
                let mut h = LatencyHistogram::new();
                for res in clean_results(r, &cell.key) {
                    h.merge(pick(res));
                }
                let mut points = percentile_points(&h);
                if points.is_empty() {
                    continue;
                }
                for pt in &mut points {
                    pt.tip = format!("{p}, {}: {}", combo_title(&combo), pt.tip);
                }
                series.push(Series {
                    label: p.clone(),
                    style,
                    points,
                    line: true,
                    markers: false,
                });
            }
            if !series.is_empty() {
                panels.push(Panel {
                    title: combo_title(&combo),
                    series,
                });
            }
        }
        let Some(panels) = shown(panels) else {
            continue;
        };
        let max_x = panels
            .iter()
            .flat_map(|p| p.series.iter().flat_map(|s| s.points.iter().map(|pt| pt.x)))
            .fold(0.0_f64, f64::max)
            .max(1.0);
        let labels: Vec<(f64, String)> = [
            (0.0, "0"),
            (p_x(0.5), "50"),
            (1.0, "90"),
            (2.0, "99"),
            (3.0, "99.9"),
            (4.0, "99.99"),
        ]
        .into_iter()
        .filter(|(x, _)| *x <= max_x + 1e-9)
        .map(|(x, l)| (x, l.to_string()))
        .collect();
        let grid = Grid {
            x: XAxis::Linear {
                lo: 0.0,
                hi: max_x.ceil().max(1.0),
                labels,
            },
            x_label: "percentile (log scale of 1/(1−p))".into(),
            y_label: format!("{name} (ms)"),
            panels,
            legend: legend(&protos),
        };
        out.push(chart(
            &format!("chart-{id}-percentiles"),
            format!("{name} percentiles"),
            &grid,
            "the distribution of every request of every clean repetition (HDR histograms merged); a line ends at the highest percentile its request count supports",
        ));
    }
    out
}

/// Throughput and p99 latency over time ([`timeseries`]).
fn time_series_charts(r: &Report) -> Vec<Chart> {
    timeseries::charts(r)
}
