//! RunResult files (`hxlab load --json`, read by `hxlab merge`, `hxlab report`, the lab):
//! `serde_json::from_slice::<hxlab_core::RunResult>`, which includes the HdrHistogram V2
//! base64 histograms (`LatencyHistogram::from_base64`).
//!
//! Input: any bytes. Checks: no panic reading it, nor in what readers compute from it
//! (rates, CPU per request, percentiles, the shard summary, `check_parts`, merging it into
//! an empty result); written back as JSON it reads back with the same counts and histograms.
#![no_main]
use hxlab_core::shard::{check_parts, shards_text, Part};
use hxlab_core::RunResult;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(r) = serde_json::from_slice::<RunResult>(data) else {
        return;
    };
    let _ = (r.requests_per_sec(), r.cpu_us_per_request(), r.errors.total());
    let _ = r.bytes.header_savings();
    for h in [&r.histograms.latency, &r.histograms.ttfb, &r.histograms.send_lag] {
        let p = h.percentiles();
        assert!(p.min <= p.max || h.is_empty());
    }
    let _ = shards_text(&r);
    let part = Part { label: "fuzz.json".into(), result: &r };
    let _ = check_parts(std::slice::from_ref(&part), false, true);
    let mut merged = RunResult::default();
    merged.merge(&r);
    assert_eq!(merged.requests_done, r.requests_done);
    // Header tables merge by their sizes: no connection is lost or counted twice.
    let conns = |t: &[hxlab_core::result::HeaderTableSeen]| {
        t.iter().fold(0u64, |a, e| a.saturating_add(e.connections))
    };
    assert_eq!(conns(&merged.header_tables), conns(&r.header_tables));

    let text = serde_json::to_string(&r).expect("a RunResult always serialises");
    let back: RunResult = serde_json::from_str(&text).expect("our own JSON must read back");
    assert_eq!(back.requests_done, r.requests_done);
    assert_eq!(back.status, r.status);
    assert_eq!(back.header_tables, r.header_tables);
    assert_eq!(back.histograms.latency.len(), r.histograms.latency.len());
    assert_eq!(
        back.histograms.latency.percentiles().p99,
        r.histograms.latency.percentiles().p99
    );
});
