//! The statistics of each cell over its repetitions: the primary metric's median, mean,
//! spread and bootstrap interval, the secondary figures, and the warnings that say when a
//! cell should not be trusted.

use crate::figures::{CONFIDENCE, RESAMPLES, WIDE_SPREAD};
use crate::model::{Metric, Record};
use hxlab_core::sched::{Lowat, Scheduling};
use hxlab_core::stats;
use std::collections::BTreeMap;

/// Request and response head bytes on the wire per completed request (h1: lines; h2: HPACK
/// blocks; h3: QPACK sections), None without a completed request or a head byte counted
/// (a record that did not count them says nothing rather than 0).
pub(crate) fn head_bytes_per_request(res: &hxlab_core::RunResult) -> Option<(f64, f64)> {
    let n = res.requests_done as f64;
    let counted = res.bytes.header_sent + res.bytes.header_received > 0;
    (res.requests_done > 0 && counted).then(|| {
        (
            res.bytes.header_sent as f64 / n,
            res.bytes.header_received as f64 / n,
        )
    })
}

/// Secondary figures of one repetition.
fn secondary(r: &Record) -> BTreeMap<&'static str, f64> {
    let mut m = BTreeMap::new();
    let Some(res) = &r.result else { return m };
    m.insert("time_s", res.duration_s);
    m.insert("req_s", res.requests_per_sec());
    let lat = res.histograms.latency.percentiles();
    if lat.count > 0 {
        m.insert("mean_latency_us", lat.mean);
    }
    if !res.histograms.ttfb.is_empty() {
        m.insert("ttfb_ms", res.histograms.ttfb.quantile(0.5) as f64 / 1000.0);
    }
    if res.bytes.header_uncompressed > 0 {
        m.insert("header_savings_pct", res.bytes.header_savings() * 100.0);
    }
    if let Some((sent, received)) = head_bytes_per_request(res) {
        m.insert("header_sent_per_req", sent);
        m.insert("header_received_per_req", received);
    }
    if let Some(c) = r.server.as_ref().and_then(|s| s.cpu_us_per_request()) {
        m.insert("server_cpu_us_per_req", c);
    }
    if res.requests_done > 0 {
        m.insert("client_cpu_us_per_req", res.cpu_us_per_request());
    }
    // Beside the verdict of a browser experiment: what each page load cost.
    if res.connections > 0 {
        m.insert("connections", res.connections as f64);
    }
    if res.bytes.total_received > 0 {
        m.insert("bytes_received", res.bytes.total_received as f64);
    }
    if let Some(ttfb) = res
        .config
        .extra
        .get("ttfb_ms")
        .and_then(|v| v.parse::<f64>().ok())
        .filter(|v| v.is_finite())
    {
        m.insert("page_ttfb_ms", ttfb);
    }
    m
}

/// The statistics of one cell over its repetitions.
#[derive(Clone, Debug, Default)]
pub struct CellSummary {
    /// The cell's key.
    pub key: String,
    /// Its factor values.
    pub factors: BTreeMap<String, String>,
    /// Repetitions recorded.
    pub repetitions: usize,
    /// The primary metric of every clean repetition.
    pub values: Vec<f64>,
    /// Median of `values` (NaN when there is none).
    pub median: f64,
    /// Mean of `values`.
    pub mean: f64,
    /// Sample standard deviation of `values`.
    pub stdev: f64,
    /// 95 % bootstrap interval of the median.
    pub ci: (f64, f64),
    /// Medians of the secondary figures over clean repetitions (see [`METRICS`](crate::figures::METRICS)).
    pub secondary: BTreeMap<&'static str, f64>,
    /// Connections per negotiated protocol, over all repetitions.
    pub negotiated: BTreeMap<String, u64>,
    /// The server's connections per congestion controller, read back, over all repetitions.
    pub server_cc: BTreeMap<String, u64>,
    /// The client's connections per congestion controller, read back, over all repetitions.
    pub client_cc: BTreeMap<String, u64>,
    /// hxlab's origin's connections by its encoder's header table size, read back, over all
    /// repetitions (empty when not known).
    pub server_encoder_tables: BTreeMap<String, u64>,
    /// Why the cell was skipped, when every repetition was.
    pub skipped: Option<String>,
    /// Problems worth a warning.
    pub warnings: Vec<String>,
    /// Repetitions that ran but were not clean (errors, failed requests, no result).
    pub failed: usize,
    /// Repetitions that ran (not skipped).
    pub ran: usize,
    /// The clean repetitions (the last record of each) as indices into [`Report::records`](crate::Report::records).
    pub clean: Vec<usize>,
    /// Where an end's congestion controllers, read back, are not what the cell asked for
    /// (one line per end; also among `warnings`).
    pub cc_mismatch: Vec<String>,
    /// The first failed repetition's explanation ([`Record::failure_text`]), when one failed.
    pub first_error: Option<String>,
    /// When connections negotiated another protocol family than the cell asked for: what
    /// they negotiated, e.g. `h2 ×5`.
    pub fell_back: Option<String>,
    /// A recorded page's replay over every repetition: hits, near misses and misses summed,
    /// the first miss kept (None: not a replay).
    pub replay: Option<hxlab_core::har::ReplayOutcome>,
    /// Repetitions whose replay had at least one miss.
    pub replay_missed_runs: usize,
    /// A page's resources that failed, answered 4xx/5xx or did not finish, over the
    /// repetitions that loaded it (browser workload).
    pub page_problems: hxlab_core::page::ProblemsAcross,
    /// What hxlab's origin sent with, read back, over every repetition: the scheduler (None
    /// when repetitions disagree or it was not said), the marks and priorities summed. None
    /// for other origins.
    pub scheduling: Option<Scheduling>,
    /// Where the origin's scheduler or mark, read back, is not what the cell asked for (also
    /// among `warnings`).
    pub origin_mismatch: Vec<String>,
}

impl CellSummary {
    /// True when the cell has at least one clean repetition and no warning.
    pub fn trusted(&self) -> bool {
        !self.values.is_empty() && self.warnings.is_empty()
    }
}

/// Which protocol family a negotiated ALPN or label belongs to.
fn family(label: &str) -> &'static str {
    match label.to_ascii_lowercase().as_str() {
        "h1" | "h1-tls" | "http/1.1" | "http/1.0" | "http1" | "http/1" => "HTTP/1.1",
        "h2" | "h2c" | "http/2" | "http2" => "HTTP/2",
        "h3" | "h3-29" | "http/3" | "http3" => "HTTP/3",
        _ => "other",
    }
}

/// The counts of the keys `wanted` refuses, as `bbr ×3`: what connections ran instead of
/// what was asked.
fn counts_except(m: &BTreeMap<String, u64>, wanted: impl Fn(&str) -> bool) -> Vec<String> {
    m.iter()
        .filter(|(k, n)| **n > 0 && !wanted(k))
        .map(|(k, n)| format!("{k} ×{n}"))
        .collect()
}

/// Warnings when an end's congestion controllers, as read back, are not what the cell asked
/// for (`cc` for both ends, `cc_server`, `cc_client`; "default" asks for nothing).
fn cc_warnings(s: &CellSummary) -> Vec<String> {
    let mut out = Vec::new();
    for (end, factor, seen) in [
        ("server", "cc_server", &s.server_cc),
        ("client", "cc_client", &s.client_cc),
    ] {
        let Some(want) = s
            .factors
            .get(factor)
            .or_else(|| s.factors.get("cc"))
            .filter(|w| w.as_str() != "default")
        else {
            continue;
        };
        let other = counts_except(seen, |k| k == want);
        if !other.is_empty() {
            out.push(format!(
                "asked for {want} on the {end} but its connections ran {}",
                other.join(", ")
            ));
        } else if seen.values().all(|n| *n == 0) && s.values.len() == s.repetitions {
            out.push(format!(
                "asked for {want} on the {end} but no connection's controller was read back"
            ));
        }
    }
    out
}

/// Warnings when hxlab's origin, as read back, did not send as the cell asked: another
/// scheduler (`scheduler`), or connections with another TCP send low-water mark
/// (`notsent_lowat`; HTTP/3 has no TCP socket to set it on).
fn origin_warnings(s: &CellSummary) -> Vec<String> {
    let mut out = Vec::new();
    let ran = s.values.len() + s.failed;
    if let Some(want) = s.factors.get("scheduler") {
        match s.scheduling.as_ref().map(|x| x.scheduler) {
            Some(Some(seen)) if seen.name() == want => {}
            Some(Some(seen)) => out.push(format!(
                "asked for scheduler {want} but the origin ran {seen}"
            )),
            Some(None) => out.push(format!(
                "asked for scheduler {want} but the origin's repetitions ran different ones or did not say"
            )),
            None if ran > 0 => out.push(format!(
                "asked for scheduler {want} but the origin's scheduler was not read back"
            )),
            None => {}
        }
    }
    let want = s
        .factors
        .get("notsent_lowat")
        .and_then(|w| Lowat::parse(w).ok());
    if let (Some(want), Some(seen)) = (want, &s.scheduling) {
        let other = counts_except(&seen.notsent_lowat, |k| k == want.name());
        if !other.is_empty() {
            out.push(format!(
                "asked for TCP_NOTSENT_LOWAT {want} but the origin's connections ran {}",
                other.join(", ")
            ));
        }
    }
    out
}

pub(crate) fn summarise(metric: Metric, key: &str, records: &[&Record]) -> CellSummary {
    let mut s = CellSummary {
        key: key.to_string(),
        repetitions: records.len(),
        ..Default::default()
    };
    if let Some(r) = records.first() {
        s.factors = r.factors.clone();
    }
    let mut sec: BTreeMap<&'static str, Vec<f64>> = BTreeMap::new();
    let mut failed_reps = 0;
    let mut first_error: Option<String> = None;
    let mut skipped = 0;
    for r in records {
        if let Some(why) = &r.skipped {
            skipped += 1;
            s.skipped.get_or_insert_with(|| why.clone());
            continue;
        }
        add_read_back(&mut s, r);
        if let Some(res) = &r.result {
            for (k, v) in &res.negotiated {
                *s.negotiated.entry(k.clone()).or_default() += v;
            }
            if let Some(expected) = r.expected_body_bytes {
                if res.bytes.body_received < expected && r.is_clean() {
                    s.warnings.push(format!(
                        "repetition {}: received {} of {} body bytes",
                        r.repetition, res.bytes.body_received, expected
                    ));
                }
            }
        }
        if r.is_clean() {
            if let Some(res) = &r.result {
                let v = metric.of(res);
                if v.is_finite() {
                    s.values.push(v);
                } else {
                    s.warnings.push(format!(
                        "repetition {}: no {} recorded",
                        r.repetition,
                        metric.label()
                    ));
                }
            }
            for (k, v) in secondary(r) {
                sec.entry(k).or_default().push(v);
            }
        } else {
            failed_reps += 1;
            if first_error.is_none() {
                first_error = Some(r.failure_text());
            }
        }
    }
    if skipped < records.len() {
        s.skipped = None;
    }
    s.failed = failed_reps;
    s.first_error = first_error.clone();
    s.ran = records.len() - skipped;
    if failed_reps > 0 {
        s.warnings.push(format!(
            "{failed_reps} of {} repetitions had errors (first: {})",
            records.len() - skipped,
            first_error.unwrap_or_default()
        ));
    }
    // An h3 cell whose browser discovers h3 (the `discovery` factor other than forced) uses
    // what it found: h2 connections there are the answer, not a fallback.
    let discovered = s.factors.get("discovery").is_some_and(|d| d != "forced");
    if let Some(proto) = s
        .factors
        .get("protocol")
        .filter(|p| !(discovered && p.as_str() == "h3"))
    {
        let want = family(proto);
        let other = counts_except(&s.negotiated, |k| family(k) == want);
        if !other.is_empty() {
            s.warnings.push(format!(
                "asked for {proto} ({want}) but connections negotiated {}",
                other.join(", ")
            ));
            s.fell_back = Some(other.join(", "));
        }
    }
    if let Some(rp) = s.replay.as_ref().filter(|rp| rp.tally.misses > 0) {
        s.warnings.push(format!(
            "the replayed recording missed {} request(s) in {} of {} repetitions (first: {})",
            rp.tally.misses,
            s.replay_missed_runs,
            records.len() - skipped,
            rp.first_miss.as_deref().unwrap_or("not listed")
        ));
    }
    s.cc_mismatch = cc_warnings(&s);
    s.warnings.extend(s.cc_mismatch.iter().cloned());
    s.origin_mismatch = origin_warnings(&s);
    s.warnings.extend(s.origin_mismatch.iter().cloned());
    s.median = stats::median(&s.values);
    s.mean = stats::mean(&s.values);
    s.stdev = stats::stdev(&s.values);
    s.ci = stats::bootstrap_ci(&s.values, CONFIDENCE, RESAMPLES, stats::median);
    if s.values.len() >= 3 && s.median > 0.0 && (s.ci.1 - s.ci.0) / s.median > WIDE_SPREAD {
        s.warnings.push(format!(
            "wide spread: the 95 % interval spans {:.0} % of the median; run more repetitions or on a quieter machine",
            (s.ci.1 - s.ci.0) / s.median * 100.0
        ));
    }
    s.secondary = sec
        .into_iter()
        .map(|(k, v)| (k, stats::median(&v)))
        .collect();
    s
}

/// Adds what one repetition read back to its cell's: both ends' controllers, the replay's
/// counts, hxlab's origin's send path.
fn add_read_back(s: &mut CellSummary, r: &Record) {
    hxlab_core::cc::add_counts(&mut s.server_cc, &r.server_cc);
    hxlab_core::cc::add_counts(&mut s.client_cc, &r.client_cc);
    hxlab_core::cc::add_counts(&mut s.server_encoder_tables, &r.server_encoder_tables);
    if let Some(rp) = &r.replay {
        add_replay(s, rp);
    }
    if let Some(p) = &r.page_problems {
        s.page_problems.add(p);
    }
    if let Some(seen) = &r.scheduling {
        match &mut s.scheduling {
            Some(sum) => sum.add(seen),
            None => s.scheduling = Some(seen.clone()),
        }
    }
}

/// Adds one repetition's replay counts to its cell's.
fn add_replay(s: &mut CellSummary, rp: &hxlab_core::har::ReplayOutcome) {
    let sum = s.replay.get_or_insert_with(Default::default);
    sum.tally.add(&rp.tally);
    if sum.first_miss.is_none() {
        sum.first_miss.clone_from(&rp.first_miss);
    }
    s.replay_missed_runs += usize::from(rp.tally.misses > 0);
}

#[cfg(test)]
mod tests {
    use super::*;
    use hxlab_core::RunResult;

    #[test]
    fn head_bytes_are_per_completed_request_and_absent_when_not_counted() {
        let mut r = RunResult {
            requests_done: 4,
            ..RunResult::default()
        };
        assert_eq!(head_bytes_per_request(&r), None, "nothing counted");
        r.bytes.header_sent = 44 + 3 * 5;
        r.bytes.header_received = 73 + 3 * 9;
        assert_eq!(head_bytes_per_request(&r), Some((14.75, 25.0)));
        let rec = Record {
            result: Some(r),
            ..Record::default()
        };
        let m = secondary(&rec);
        assert_eq!(
            (m["header_sent_per_req"], m["header_received_per_req"]),
            (14.75, 25.0)
        );
        r = RunResult::default();
        assert_eq!(head_bytes_per_request(&r), None, "no request done");
    }
}
