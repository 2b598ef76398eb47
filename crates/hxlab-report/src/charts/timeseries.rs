//! Throughput and p99 latency over time, from the per-interval series `hxlab load` records
//! (`RunResult::intervals`): one panel per condition, one line per protocol, the clean
//! repetitions pooled interval by interval (requests added, histograms merged exactly), so
//! warm-up, congestion-control ramps and stalls show.

use super::grid::{Grid, Panel, Point, Series, XAxis};
use super::{
    cell_of, chart, clean_results, combo_title, combos, condition_factors, legend, protocols, svg,
    Chart, MAX_PANELS,
};
use crate::figures::fmt_num;
use crate::report::Report;
use hxlab_core::LatencyHistogram;

/// Intervals a cell's runs need before its series is drawn.
pub const MIN_INTERVALS: usize = 3;

/// One pooled interval: its middle (s), requests per second, p99 latency (ms).
type Pooled = (f64, f64, Option<f64>);

/// The repetitions' intervals pooled index by index.
fn pooled(r: &Report, cell: &str) -> Vec<Pooled> {
    let runs = clean_results(r, cell);
    let n = runs.iter().map(|x| x.intervals.len()).max().unwrap_or(0);
    (0..n)
        .filter_map(|i| {
            let mut done = 0u64;
            let mut secs = 0.0;
            let mut start = f64::NAN;
            let mut h = LatencyHistogram::new();
            for run in &runs {
                if let Some(iv) = run.intervals.get(i) {
                    done += iv.requests_done;
                    secs += iv.duration_s;
                    if start.is_nan() {
                        start = iv.start_s + iv.duration_s / 2.0;
                    }
                    h.merge(&iv.latency);
                }
            }
            (secs > 0.0).then(|| {
                let p99 = (!h.is_empty()).then(|| h.quantile(0.99) as f64 / 1000.0);
                // The repetitions' average rate in this interval: their requests over their seconds.
                (start, done as f64 / secs, p99)
            })
        })
        .collect()
}

/// The two time-series charts (none when no cell has [`MIN_INTERVALS`] intervals).
pub fn charts(r: &Report) -> Vec<Chart> {
    let conds = condition_factors(r);
    let protos = protocols(r);
    let mut thr_panels = Vec::new();
    let mut p99_panels = Vec::new();
    let mut t_max = 0.0_f64;
    for combo in combos(r, &conds) {
        let mut thr = Vec::new();
        let mut p99 = Vec::new();
        for (p, style) in protos.iter().zip(svg::styles(&protos)) {
            let Some(cell) = cell_of(r, p, &combo) else {
                continue;
            };
            let series = pooled(r, &cell.key);
            if series.len() < MIN_INTERVALS {
                continue;
            }
            t_max = series.iter().map(|s| s.0).fold(t_max, f64::max);
            // A marker every fifth interval, so the lines part without colour.
            let point = |i: usize, x: f64, y: f64, what: &str| Point {
                x,
                y,
                tip: format!(
                    "{p}, {}: {} {what} at {x:.1} s",
                    combo_title(&combo),
                    fmt_num(y)
                ),
                mark: i.is_multiple_of(5),
                ..Default::default()
            };
            thr.push(Series {
                label: p.clone(),
                style,
                points: series
                    .iter()
                    .enumerate()
                    .map(|(i, s)| point(i, s.0, s.1, "req/s"))
                    .collect(),
                line: true,
                markers: false,
            });
            p99.push(Series {
                label: p.clone(),
                style,
                points: series
                    .iter()
                    .enumerate()
                    .filter_map(|(i, s)| s.2.map(|v| point(i, s.0, v, "ms p99")))
                    .collect(),
                line: true,
                markers: false,
            });
        }
        if !thr.is_empty() {
            thr_panels.push(Panel {
                title: combo_title(&combo),
                series: thr,
            });
            p99_panels.push(Panel {
                title: combo_title(&combo),
                series: p99,
            });
        }
    }
    if thr_panels.is_empty() {
        return Vec::new();
    }
    thr_panels.truncate(MAX_PANELS);
    p99_panels.truncate(MAX_PANELS);
    let x = XAxis::Linear {
        lo: 0.0,
        hi: t_max.max(1.0) * 1.02,
        labels: Vec::new(),
    };
    let caption = "per interval of the run (hxlab load --interval), the clean repetitions pooled interval by interval";
    let thr = Grid {
        x: x.clone(),
        x_label: "time since the run began (s)".into(),
        y_label: "requests/s".into(),
        panels: thr_panels,
        legend: legend(&protos),
    };
    let p99 = Grid {
        x,
        x_label: "time since the run began (s)".into(),
        y_label: "p99 latency (ms)".into(),
        panels: p99_panels,
        legend: legend(&protos),
    };
    vec![
        chart(
            "chart-throughput-over-time",
            "throughput over time".into(),
            &thr,
            caption,
        ),
        chart(
            "chart-p99-over-time",
            "p99 latency over time".into(),
            &p99,
            caption,
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{ExperimentMeta, FactorLevels, Record, Workload};
    use hxlab_core::result::Interval;
    use hxlab_core::RunResult;

    fn rec(p: &str, rep: u32, per_interval: &[u64]) -> Record {
        let mut res = RunResult {
            schema: 1,
            duration_s: per_interval.len() as f64,
            interval_s: 1.0,
            ..Default::default()
        };
        for (i, n) in per_interval.iter().enumerate() {
            let mut iv = Interval {
                start_s: i as f64,
                duration_s: 1.0,
                requests_done: *n,
                requests_succeeded: *n,
                ..Default::default()
            };
            for _ in 0..*n {
                iv.latency.record_micros(1000 * (i as u64 + 1));
            }
            res.requests_done += n;
            res.requests_started += n;
            res.requests_succeeded += n;
            res.histograms.latency.merge(&iv.latency);
            res.intervals.push(iv);
        }
        Record {
            cell: format!("protocol={p}"),
            factors: [("protocol".to_string(), p.to_string())]
                .into_iter()
                .collect(),
            repetition: rep,
            result: Some(res),
            ..Default::default()
        }
    }

    #[test]
    fn repetitions_pool_interval_by_interval() {
        let meta = ExperimentMeta {
            name: "t".into(),
            workload: Some(Workload::Throughput),
            repetitions: 2,
            factors: vec![FactorLevels {
                name: "protocol".into(),
                levels: vec!["h2".into(), "h3".into()],
            }],
            ..Default::default()
        };
        let records = vec![
            rec("h2", 0, &[100, 200, 300]),
            rec("h2", 1, &[300, 400, 500]),
            rec("h3", 0, &[10, 20]),
            rec("h3", 1, &[10, 20]),
        ];
        let r = Report::build(meta, records);
        let p = pooled(&r, "protocol=h2");
        assert_eq!(
            p.iter().map(|x| x.1).collect::<Vec<_>>(),
            vec![200.0, 300.0, 400.0]
        );
        assert_eq!(
            p.iter().map(|x| x.0).collect::<Vec<_>>(),
            vec![0.5, 1.5, 2.5]
        );
        // Every request of interval i took i+1 ms; a small histogram is within 1/16.
        for (i, x) in p.iter().enumerate() {
            let want = (i + 1) as f64;
            assert!((x.2.expect("p99") - want).abs() <= want / 16.0, "{x:?}");
        }
        let charts = charts(&r);
        assert_eq!(charts.len(), 2);
        assert_eq!(charts[0].id, "chart-throughput-over-time");
        // h3 has two intervals only: not drawn.
        assert_eq!(charts[0].svg.matches("class=\"series\"").count(), 1);
        assert!(charts[1].svg.contains("p99 latency (ms)"));
    }
}
