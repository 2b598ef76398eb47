//! summary.json: what the report says, for machines (dashboards, CI gates): per cell the
//! median with its interval and n, per comparison the ratio with its interval, shift and p,
//! the verdict, and the before/after rows when a baseline was given. docs/experiments.md
//! documents the schema; `schema` changes when a field changes meaning.

use super::Exporter;
use crate::charts::clean_results;
use crate::report::Report;
use crate::ReportError;
use hxlab_core::LatencyHistogram;
use serde_json::{json, Value};

/// Version of the summary.json layout.
pub const SUMMARY_SCHEMA: u32 = 1;

/// The JSON summary (`summary.json`).
pub struct SummaryJsonExporter;

/// Percentiles of the merged histograms of a cell's clean repetitions, milliseconds.
fn percentiles_ms(
    r: &Report,
    cell: &str,
    pick: fn(&hxlab_core::RunResult) -> &LatencyHistogram,
) -> Value {
    let mut h = LatencyHistogram::new();
    for res in clean_results(r, cell) {
        h.merge(pick(res));
    }
    if h.is_empty() {
        return Value::Null;
    }
    let q = |p: f64| h.quantile(p) as f64 / 1000.0;
    json!({"count": h.len(), "p50": q(0.5), "p90": q(0.9), "p99": q(0.99), "p99_9": q(0.999), "max": q(1.0)})
}

/// A comparison's finding as summary.json names it.
fn finding_key(f: crate::verdict::Finding) -> &'static str {
    use crate::verdict::Finding;
    match f {
        Finding::Better => "better",
        Finding::Worse => "worse",
        Finding::Equal => "equal",
        Finding::NoDifference => "no_difference",
        Finding::TooFew => "too_few",
    }
}

impl SummaryJsonExporter {
    /// The summary as a JSON value.
    pub fn value(&self, r: &Report) -> Value {
        let cells: Vec<Value> = r
            .cells
            .iter()
            .map(|c| {
                json!({
                    "key": c.key,
                    "factors": c.factors,
                    "n": c.values.len(),
                    "repetitions": c.repetitions,
                    "values": c.values,
                    "median": c.median,
                    "ci": [c.ci.0, c.ci.1],
                    "mean": c.mean,
                    "stdev": c.stdev,
                    "secondary": c.secondary,
                    "latency_ms": percentiles_ms(r, &c.key, |x| &x.histograms.latency),
                    "ttfb_ms": percentiles_ms(r, &c.key, |x| &x.histograms.ttfb),
                    "negotiated": c.negotiated,
                    "server_cc": c.server_cc,
                    "client_cc": c.client_cc,
                    "server_encoder_tables": c.server_encoder_tables,
                    "scheduling": c.scheduling,
                    "skipped": c.skipped,
                    "failed_repetitions": c.failed,
                    "fell_back": c.fell_back,
                    "warnings": c.warnings,
                })
            })
            .collect();
        let comparisons: Vec<Value> = r
            .comparisons
            .iter()
            .map(|c| {
                json!({
                    "conditions": c.conditions.iter().cloned().collect::<std::collections::BTreeMap<_, _>>(),
                    "protocol": c.protocol,
                    "baseline": c.baseline,
                    "ratio": c.ratio,
                    "ci": [c.ci.0, c.ci.1],
                    "shift": c.shift,
                    "shift_unit": c.shift_unit(),
                    "p": c.p_value,
                    "n": [c.n.0, c.n.1],
                    "significant": c.significant(),
                    "finding": finding_key(crate::verdict::judge(c)),
                })
            })
            .collect();
        let v = r.verdict();
        let lines: Vec<Value> = v
            .lines
            .iter()
            .map(|l| {
                json!({
                    "kind": l.kind.class(),
                    "text": l.text,
                    "condition": l.condition,
                    "problem": l.problem.map(|p| p.key()),
                    "count": l.count,
                    "across": l.across.iter().map(|a| json!({
                        "factor": a.factor,
                        "holds": a.holds,
                        "levels": a.levels.iter().map(|lv| json!({
                            "level": lv.level,
                            "directions": lv.directions.iter().map(|d| d.key()).collect::<Vec<_>>(),
                        })).collect::<Vec<_>>(),
                    })).collect::<Vec<_>>(),
                })
            })
            .collect();
        let before_after = r.before_after.as_ref().map(|b| {
            json!({
                "baseline": b.baseline,
                "headline": b.headline(),
                "rows": b.rows.iter().map(|x| json!({
                    "cell": x.cell,
                    "factors": x.factors,
                    "before": x.before.0,
                    "before_n": x.before.1,
                    "after": x.after.0,
                    "after_n": x.after.1,
                    "ratio": x.ratio,
                    "ci": [x.ci.0, x.ci.1],
                    "shift": x.shift,
                    "p": x.p_value,
                    "significant": x.significant(),
                    "improved": b.improved(x),
                    "warn": x.warn,
                })).collect::<Vec<_>>(),
                "only_now": b.only_now,
                "only_before": b.only_before,
            })
        });
        let mut v = json!({
            "schema": SUMMARY_SCHEMA,
            "experiment": r.meta.name,
            "title": r.meta.title,
            "metric": r.metric.key(),
            "metric_label": r.metric.label(),
            "lower_is_better": r.metric.lower_is_better(),
            "repetitions": r.meta.repetitions,
            "factors": r.meta.factors,
            "verdict": {"headline": v.headline, "lines": lines},
            "cells": cells,
            "comparisons": comparisons,
            "before_after": before_after,
            "warnings": r.warnings,
        });
        if let Some(env) = &r.meta.environment {
            v["environment"] = json!(env);
        }
        v
    }
}

/// `v` with every object's keys in sorted order, whatever serde_json's map keeps (with its
/// `preserve_order` feature, which a dependency may switch on for the whole build, objects
/// keep insertion order): summary.json reads the same however hxlab was built.
fn sorted(v: serde_json::Value) -> serde_json::Value {
    match v {
        serde_json::Value::Object(m) => {
            let mut pairs: Vec<_> = m.into_iter().collect();
            pairs.sort_by(|a, b| a.0.cmp(&b.0));
            serde_json::Value::Object(pairs.into_iter().map(|(k, v)| (k, sorted(v))).collect())
        }
        serde_json::Value::Array(a) => {
            serde_json::Value::Array(a.into_iter().map(sorted).collect())
        }
        other => other,
    }
}

impl Exporter for SummaryJsonExporter {
    fn file_name(&self) -> Option<&'static str> {
        Some("summary.json")
    }

    fn render(&self, r: &Report) -> Result<String, ReportError> {
        let mut s = serde_json::to_string_pretty(&sorted(self.value(r))).unwrap_or_default();
        s.push('\n');
        Ok(s)
    }
}
