//! A fixed experiment for the report's tests: three protocols at two delays, five
//! repetitions each, with histograms, so every exporter has something to show and renders it
//! the same way every time.
#![allow(dead_code)]

use hxlab_core::RunResult;
use hxlab_report::{ExperimentMeta, FactorLevels, Record, Workload};
use std::collections::BTreeMap;

/// One repetition: `secs` to the last byte, `n` requests whose latencies spread from
/// `lat_us` to 3× it (a tail at the top), negotiated `negotiated`.
pub fn record(
    protocol: &str,
    delay: &str,
    rep: u32,
    secs: f64,
    negotiated: &str,
    lat_us: u64,
) -> Record {
    let mut res = RunResult {
        schema: hxlab_core::result::SCHEMA_VERSION,
        duration_s: secs,
        requests_started: 30,
        requests_done: 30,
        requests_succeeded: 30,
        connections: 1,
        ..Default::default()
    };
    res.negotiated.insert(negotiated.into(), 1);
    for k in 0..30u64 {
        let tail = if k >= 28 { 3 } else { 1 };
        res.histograms
            .latency
            .record_micros(lat_us * tail + k * lat_us / 60);
        res.histograms
            .ttfb
            .record_micros(lat_us * tail * 9 / 10 + k * lat_us / 80);
    }
    let mut factors = BTreeMap::new();
    factors.insert("protocol".to_string(), protocol.to_string());
    factors.insert("delay".to_string(), delay.to_string());
    factors.insert("resources".to_string(), "30".to_string());
    Record {
        experiment: "fixture".into(),
        cell: format!("protocol={protocol} delay={delay} resources=30"),
        factors,
        repetition: rep,
        started_unix_s: 1_700_000_000.0 + f64::from(rep),
        wall_s: secs,
        result: Some(res),
        expected_body_bytes: None,
        exit_code: Some(0),
        ..Default::default()
    }
}

/// The experiment's description.
pub fn meta(protocols: &[&str]) -> ExperimentMeta {
    ExperimentMeta {
        name: "fixture".into(),
        title: "Fixture: h1-tls, h2 and h3 at two delays".into(),
        description: "A fixed set of results for the report's tests.".into(),
        workload: Some(Workload::Resources),
        repetitions: 5,
        factors: vec![
            FactorLevels {
                name: "protocol".into(),
                levels: protocols.iter().map(|s| s.to_string()).collect(),
            },
            FactorLevels {
                name: "delay".into(),
                levels: vec!["20ms".into(), "50ms".into()],
            },
            FactorLevels {
                name: "resources".into(),
                levels: vec!["30".into()],
            },
        ],
        baseline: Some(protocols[0].to_string()),
        ..Default::default()
    }
}

/// Seconds to the last byte of repetition `rep` of a protocol at a delay: h1-tls pays the
/// delay per 6 resources, h2 and h3 once; h3 ties h2 at 50 ms and is a little slower at 20.
pub fn secs(protocol: &str, delay_ms: f64, rep: u32) -> f64 {
    let jitter = [0.0, 0.7, -0.4, 0.3, -0.2][rep as usize % 5] * 0.01;
    let base = match protocol {
        "h1-tls" => delay_ms * 5.6 / 1000.0,
        "h2" => delay_ms * 1.2 / 1000.0,
        "h3" if delay_ms < 30.0 => delay_ms * 1.45 / 1000.0,
        _ => delay_ms * 1.2 / 1000.0,
    };
    base * (1.0 + jitter)
}

/// The whole experiment: every cell, five repetitions.
pub fn experiment() -> (ExperimentMeta, Vec<Record>) {
    let protocols = ["h1-tls", "h2", "h3"];
    let mut records = Vec::new();
    for delay in ["20ms", "50ms"] {
        let d: f64 = delay.trim_end_matches("ms").parse().unwrap_or(0.0);
        for p in protocols {
            let alpn = if p == "h1-tls" { "http/1.1" } else { p };
            for rep in 0..5 {
                let s = secs(p, d, rep);
                records.push(record(p, delay, rep, s, alpn, (d * 1000.0) as u64));
            }
        }
    }
    (meta(&protocols), records)
}
