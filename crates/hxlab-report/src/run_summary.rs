//! The text summary of one [`RunResult`], as `hxlab load` and `hxlab merge` print it:
//! h2load's layout (requests with h2load's counts, status codes, traffic, a row per latency
//! histogram, h2load's `req/s` row over the clients) with percentiles, the per-interval
//! table, the connections' protocols and controllers, and the open model's send-lag warning.

use hxlab_core::histogram::Percentiles;
use hxlab_core::units::format_bytes;
use hxlab_core::{LatencyHistogram, RunResult};
use std::time::Duration;

fn row(name: &str, p: &Percentiles) -> String {
    let f = |us: u64| hxlab_core::units::format_duration(Duration::from_micros(us));
    let ff =
        |us: f64| hxlab_core::units::format_duration(Duration::from_secs_f64(us.max(0.0) / 1e6));
    format!(
        // The count is separated by a space so a count of 10 digits or more stays readable.
        "{name:<22}{:>10}{:>10}{:>10}{:>10}{:>10}{:>10}{:>10}{:>10} {:>9}\n",
        f(p.min),
        f(p.max),
        ff(p.mean),
        ff(p.stdev),
        f(p.p50),
        f(p.p90),
        f(p.p99),
        f(p.p999),
        p.count
    )
}

fn hist_row(out: &mut String, name: &str, h: &LatencyHistogram) {
    if !h.is_empty() {
        out.push_str(&row(name, &h.percentiles()));
    }
}

/// The human summary (h2load-like, plus percentiles).
pub fn summary(r: &RunResult) -> String {
    let mut s = String::new();
    let b = &r.bytes;
    let secs = r.duration_s.max(1e-9);
    s.push_str(&format!(
        "finished in {:.3}s, {:.2} req/s, {}/s\n",
        r.duration_s,
        r.requests_per_sec(),
        format_bytes((b.total_received as f64 / secs) as u64)
    ));
    s.push_str(&requests_line(r));
    if r.config.rate.is_none() && r.requests_in_flight_at_end > 0 {
        s.push_str(&format!(
            "unanswered: {} requests in flight when the run ended\n",
            r.requests_in_flight_at_end
        ));
    } else if r.requests_not_sent + r.requests_in_flight_at_end > 0 {
        s.push_str(&format!(
            "unanswered: {} scheduled but not sent, {} in flight at the end (of {} scheduled)\n",
            r.requests_not_sent, r.requests_in_flight_at_end, r.requests_scheduled
        ));
    }
    let class = |lo: u64| {
        r.status
            .iter()
            .filter(|(k, _)| k.parse::<u64>().map(|c| c / 100 == lo).unwrap_or(false))
            .map(|(_, v)| v)
            .sum::<u64>()
    };
    s.push_str(&format!(
        "status codes: {} 2xx, {} 3xx, {} 4xx, {} 5xx",
        class(2),
        class(3),
        class(4),
        class(5)
    ));
    let codes: Vec<String> = r.status.iter().map(|(k, v)| format!("{k}={v}")).collect();
    s.push_str(&format!(" ({})\n", codes.join(" ")));
    s.push_str(&format!(
        "traffic: {} ({}) total, {} ({}) headers (space savings {:.2}%), {} ({}) data; sent {} ({})\n",
        format_bytes(b.total_received),
        b.total_received,
        format_bytes(b.header_received),
        b.header_received,
        b.header_savings() * 100.0,
        format_bytes(b.body_received),
        b.body_received,
        format_bytes(b.total_sent),
        b.total_sent
    ));
    s.push_str(&connections_lines(r));
    s.push_str(&format!(
        "client CPU: user {:.3}s, sys {:.3}s, {:.2} us/request\n",
        r.cpu_user_s,
        r.cpu_sys_s,
        r.cpu_us_per_request()
    ));
    s.push_str(&format!(
        "{:<22}{:>10}{:>10}{:>10}{:>10}{:>10}{:>10}{:>10}{:>10} {:>9}\n",
        "", "min", "max", "mean", "sd", "p50", "p90", "p99", "p99.9", "count"
    ));
    let h = &r.histograms;
    hist_row(&mut s, "time for request:", &h.latency);
    if r.config.rate.is_some() {
        hist_row(&mut s, "  (uncorrected):", &h.latency_uncorrected);
        hist_row(&mut s, "send lag:", &h.send_lag);
    }
    hist_row(&mut s, "time to 1st byte:", &h.ttfb);
    hist_row(&mut s, "time for connect:", &h.connect);
    hist_row(&mut s, "time for handshake:", &h.handshake);
    hist_row(&mut s, "  (resumed):", &h.handshake_resumed);
    s.push_str(&client_rates_rows(&r.client_request_rates));
    if let Some(w) = cc_warning(r) {
        s.push_str(&w);
        s.push('\n');
    }
    if let Some(w) = send_lag_warning(r) {
        s.push_str(&w);
        s.push('\n');
    }
    if let Some(t) = hxlab_core::shard::shards_text(r) {
        s.push_str(&t);
        s.push('\n');
    }
    s
}

/// h2load's `requests:` line, with h2load's meanings read from the result: `total` the
/// requests the run was to make (answered, failed, in flight at the end, never sent),
/// `done` those that ended (answered or failed after they were sent), `succeeded` the 2xx
/// and 3xx answers, `failed` every request without a 2xx/3xx answer (HTTP errors
/// included), `errored` those without any answer (never sent included), `timeout` the
/// timeouts.
pub fn requests_line(r: &RunResult) -> String {
    let errored = r.requests_failed + r.requests_not_sent;
    let total = r.requests_done + errored + r.requests_in_flight_at_end;
    let done = r
        .requests_started
        .saturating_sub(r.requests_in_flight_at_end);
    let failed = r.requests_done.saturating_sub(r.requests_succeeded) + errored;
    format!(
        "requests: {total} total, {} started, {done} done, {} succeeded, {failed} failed, {errored} errored, {} timeout\n",
        r.requests_started, r.requests_succeeded, r.errors.timeout
    )
}

/// h2load's `req/s` row: min, max, mean, sd and the share within one sd of the mean of the
/// clients' request rates (population sd, as h2load when it keeps every client); nothing
/// when no client was active.
pub fn client_rates_rows(rates: &[f64]) -> String {
    let Some(st) = SpreadStat::of(rates) else {
        return String::new();
    };
    format!(
        "{:<22}{:>12}{:>12}{:>12}{:>12}{:>12}\n{:<22}{:>12.2}{:>12.2}{:>12.2}{:>12.2}{:>11.2}%\n",
        "",
        "min",
        "max",
        "mean",
        "sd",
        "+/- sd",
        "req/s (per client):",
        st.min,
        st.max,
        st.mean,
        st.sd,
        st.within_sd * 100.0
    )
}

/// Min, max, mean, population sd and the share of values within one sd of the mean.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SpreadStat {
    /// Smallest.
    pub min: f64,
    /// Largest.
    pub max: f64,
    /// Mean.
    pub mean: f64,
    /// Population standard deviation.
    pub sd: f64,
    /// Share (0..1) of the values in [mean − sd, mean + sd].
    pub within_sd: f64,
}

impl SpreadStat {
    /// The spread of `v` (None when empty).
    pub fn of(v: &[f64]) -> Option<SpreadStat> {
        if v.is_empty() {
            return None;
        }
        let n = v.len() as f64;
        let mean = v.iter().sum::<f64>() / n;
        let sd = (v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n).sqrt();
        let within = v
            .iter()
            .filter(|x| (mean - sd..=mean + sd).contains(*x))
            .count();
        Some(SpreadStat {
            min: v.iter().copied().fold(f64::INFINITY, f64::min),
            max: v.iter().copied().fold(f64::NEG_INFINITY, f64::max),
            mean,
            sd,
            within_sd: within as f64 / n,
        })
    }
}

/// A warning when the connections ran a controller other than the one asked for (the
/// kernel refused it, or a QUIC stack ignored it).
pub fn cc_warning(r: &RunResult) -> Option<String> {
    let asked = r.config.cc?;
    let other: u64 = r
        .congestion_control
        .iter()
        .filter(|(name, _)| name.as_str() != asked.name())
        .map(|(_, n)| n)
        .sum();
    (other > 0).then(|| {
        format!(
            "warning: congestion control {} was asked for, but connections ran {}",
            asked.name(),
            hxlab_core::cc::counts_text(&r.congestion_control)
        )
    })
}

/// The time series as a table: one line per interval with its start, requests and megabits
/// per second, failed requests, errors and latency p50/p99 ("-" where nothing completed);
/// in the open model also the send lag p99 of the requests sent in it.
pub fn intervals_table(r: &RunResult) -> String {
    if r.intervals.is_empty() {
        return "intervals: none recorded (--interval 0, or a result without them)\n".into();
    }
    let lag = r.intervals.iter().any(|iv| !iv.send_lag.is_empty());
    let mut s = format!(
        "{:>9}{:>11}{:>10}{:>8}{:>8}{:>10}{:>10}",
        "t (s)", "req/s", "Mbit/s", "failed", "errors", "p50 ms", "p99 ms"
    );
    s.push_str(if lag { "  lag p99 ms\n" } else { "\n" });
    let ms = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.3}"));
    for iv in &r.intervals {
        s.push_str(&format!(
            "{:>9.3}{:>11.1}{:>10.3}{:>8}{:>8}{:>10}{:>10}",
            iv.start_s,
            iv.requests_per_sec(),
            iv.bytes_per_sec() * 8.0 / 1e6,
            iv.requests_failed,
            iv.errors,
            ms(iv.quantile_ms(0.5)),
            ms(iv.quantile_ms(0.99)),
        ));
        if lag {
            let p99 = (!iv.send_lag.is_empty()).then(|| iv.send_lag.quantile(0.99) as f64 / 1e3);
            s.push_str(&format!("{:>12}", ms(p99)));
        }
        s.push('\n');
    }
    s
}

/// The `connections:` line and what the connections did beyond requests: push, TCP Fast
/// Open, early data, errors.
fn connections_lines(r: &RunResult) -> String {
    let mut s = String::new();
    let neg: Vec<String> = r
        .negotiated
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    let tls: Vec<String> = r
        .tls_versions
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    let cc = hxlab_core::cc::counts_text(&r.congestion_control);
    s.push_str(&format!(
        "connections: {} ({}){}{}{}\n",
        r.connections,
        if neg.is_empty() {
            "none".to_string()
        } else {
            neg.join(" ")
        },
        if tls.is_empty() {
            String::new()
        } else {
            format!(", {}", tls.join(" "))
        },
        if r.resumed > 0 {
            format!(", {} resumed", r.resumed)
        } else {
            String::new()
        },
        if r.congestion_control.is_empty() {
            String::new()
        } else {
            format!(", cc {cc} (read back)")
        }
    ));
    if r.pushed > 0 {
        s.push_str(&format!("pushed: {} responses\n", r.pushed));
    }
    let tfo_acked: u64 = r.tfo_syn_data_acked.values().sum();
    let tfo_not: u64 = r.tfo_syn_data_not_acked.values().sum();
    if tfo_acked + tfo_not > 0 {
        s.push_str(&format!(
            "TCP Fast Open: {tfo_acked} connections' SYN data acknowledged, {tfo_not} not\n"
        ));
    }
    let acc: u64 = r.early_data_accepted.values().sum();
    let rej: u64 = r.early_data_rejected.values().sum();
    if acc + rej > 0 {
        s.push_str(&format!(
            "early data (0-RTT): {acc} connections accepted, {rej} rejected\n"
        ));
    }
    let e = &r.errors;
    if e.total() > 0 {
        s.push_str(&format!(
            "errors: connect {}, tls {}, timeout {}, reset {}, protocol {}, other {}\n",
            e.connect, e.tls, e.timeout, e.reset, e.protocol, e.other
        ));
        for m in r.error_samples.iter().take(5) {
            s.push_str(&format!("  {m}\n"));
        }
    }
    s
}

/// Open model: a warning when requests left more than 1 ms after they were due (p99).
pub fn send_lag_warning(r: &RunResult) -> Option<String> {
    let lag = &r.histograms.send_lag;
    if r.config.rate.is_none() || lag.is_empty() {
        return None;
    }
    let p = lag.percentiles();
    (p.p99 > 1000).then(|| {
        format!(
            "warning: send lag p99 {} (max {}): the client fell behind its schedule; corrected latency includes its lag",
            hxlab_core::units::format_duration(Duration::from_micros(p.p99)),
            hxlab_core::units::format_duration(Duration::from_micros(p.max))
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// h2load's counts from an open-model result: 10 due, 8 sent, 1 in flight at the end, 5
    /// answered (one of them a 503), 2 failed after sending, 2 never sent.
    #[test]
    fn the_requests_line_counts_as_h2load() {
        let mut r = RunResult {
            requests_started: 8,
            requests_done: 5,
            requests_succeeded: 4,
            requests_failed: 2,
            requests_not_sent: 2,
            requests_in_flight_at_end: 1,
            requests_scheduled: 10,
            ..Default::default()
        };
        r.errors.timeout = 1;
        assert_eq!(
            requests_line(&r),
            "requests: 10 total, 8 started, 7 done, 4 succeeded, 5 failed, 4 errored, 1 timeout\n"
        );
    }

    /// The `req/s` row: min, max, mean, population sd, and the share within one sd.
    #[test]
    fn the_client_rate_row_is_h2loads() {
        let st = SpreadStat::of(&[2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0]).unwrap();
        assert_eq!((st.min, st.max, st.mean, st.sd), (2.0, 9.0, 5.0, 2.0));
        assert_eq!(st.within_sd, 0.75);
        let rows = client_rates_rows(&[2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0]);
        let last = rows.lines().last().unwrap();
        assert!(last.starts_with("req/s (per client):"), "{rows}");
        assert!(
            last.ends_with("2.00        9.00        5.00        2.00      75.00%"),
            "{rows}"
        );
        assert_eq!(client_rates_rows(&[]), "");
    }
}
