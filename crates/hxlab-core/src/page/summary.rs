//! Medians and 95 % bootstrap confidence intervals over the runs that count.

use super::PageRun;
use crate::stats::{bootstrap_ci, median};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Bootstrap resamples for the confidence intervals (deterministic: fixed seed in core).
const RESAMPLES: usize = 2000;

/// One metric over the valid runs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct MetricSummary {
    /// Runs that had this metric.
    pub n: usize,
    /// Median.
    pub median: f64,
    /// 95 % confidence interval of the median, low end (bootstrap).
    pub ci95_low: f64,
    /// 95 % confidence interval of the median, high end.
    pub ci95_high: f64,
}

/// The figures over many runs of one page and protocol.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct PageSummary {
    /// Runs given.
    pub runs: usize,
    /// Runs that counted (no flag).
    pub valid_runs: usize,
    /// Runs left out, with why ("run 3: asked for h3 but the browser used 31×h2").
    pub left_out: Vec<String>,
    /// Metrics by name: ttfb_ms, dom_content_loaded_ms, load_ms, fcp_ms, lcp_ms, cls,
    /// speed_index_ms, first_visual_change_ms, visually_complete_ms, connections, bytes,
    /// resources_loaded. Missing when no valid run had it.
    pub metrics: BTreeMap<String, MetricSummary>,
}

fn summary_of(xs: &[f64]) -> Option<MetricSummary> {
    let xs: Vec<f64> = xs
        .iter()
        .copied()
        .filter(|x| x.is_finite() && *x >= 0.0)
        .collect();
    if xs.is_empty() {
        return None;
    }
    let (lo, hi) = bootstrap_ci(&xs, 0.95, RESAMPLES, median);
    Some(MetricSummary {
        n: xs.len(),
        median: median(&xs),
        ci95_low: lo,
        ci95_high: hi,
    })
}

/// Summarises runs: flagged runs are listed in `left_out` and excluded from every figure.
pub fn summarize(runs: &[PageRun]) -> PageSummary {
    let valid: Vec<&PageRun> = runs.iter().filter(|r| r.is_valid()).collect();
    let left_out = runs
        .iter()
        .enumerate()
        .filter_map(|(i, r)| r.flag.as_ref().map(|f| format!("run {}: {f}", i + 1)))
        .collect();
    type Getter = fn(&PageRun) -> Option<f64>;
    let getters: [(&str, Getter); 12] = [
        ("ttfb_ms", |r| Some(r.ttfb_ms)),
        ("dom_content_loaded_ms", |r| Some(r.dom_content_loaded_ms)),
        ("load_ms", |r| Some(r.load_ms)),
        ("fcp_ms", |r| r.fcp_ms),
        ("lcp_ms", |r| r.lcp_ms),
        ("cls", |r| r.cls),
        ("speed_index_ms", |r| r.speed_index_ms),
        ("first_visual_change_ms", |r| r.first_visual_change_ms),
        ("visually_complete_ms", |r| r.visually_complete_ms),
        ("connections", |r| Some(f64::from(r.connections))),
        ("bytes", |r| Some(r.bytes as f64)),
        ("resources_loaded", |r| Some(f64::from(r.resources_loaded))),
    ];
    let mut metrics = BTreeMap::new();
    for (name, get) in getters {
        let xs: Vec<f64> = valid.iter().filter_map(|r| get(r)).collect();
        if let Some(s) = summary_of(&xs) {
            metrics.insert(name.to_string(), s);
        }
    }
    PageSummary {
        runs: runs.len(),
        valid_runs: valid.len(),
        left_out,
        metrics,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Proto;

    fn run(load: f64, flag: Option<&str>) -> PageRun {
        PageRun {
            url: "https://127.0.0.1/".into(),
            requested_protocol: Proto::H2,
            browser: "Chromium 156".into(),
            browser_major: 156,
            protocol_ok: flag.is_none(),
            flag: flag.map(str::to_string),
            ttfb_ms: 1.0,
            dom_content_loaded_ms: 2.0,
            load_ms: load,
            connections: 1,
            bytes: 100,
            resources_loaded: 3,
            ..PageRun::default()
        }
    }

    #[test]
    fn flagged_runs_are_left_out_of_the_figures() {
        let runs = vec![
            run(10.0, None),
            run(1000.0, Some("fell back")),
            run(20.0, None),
            run(30.0, None),
        ];
        let s = summarize(&runs);
        assert_eq!((s.runs, s.valid_runs), (4, 3));
        assert_eq!(s.left_out, vec!["run 2: fell back".to_string()]);
        let load = &s.metrics["load_ms"];
        assert_eq!((load.n, load.median), (3, 20.0));
        assert!(load.ci95_low >= 10.0 && load.ci95_high <= 30.0);
        assert!(!s.metrics.contains_key("fcp_ms"));
    }
}
