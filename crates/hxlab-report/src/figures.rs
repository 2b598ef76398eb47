//! What a figure of the report is and how it is written, the same in every table, chart and
//! format: the confidence and significance levels, the secondary figures' names, and the
//! three-significant-digit form.

/// Confidence level of every interval in the report.
pub const CONFIDENCE: f64 = 0.95;
/// Bootstrap resamples per interval (deterministic generator, so reports re-render identically).
pub const RESAMPLES: usize = 2000;
/// A cell whose 95 % interval is wider than this fraction of its median gets a warning.
pub const WIDE_SPREAD: f64 = 0.25;
/// p-value below which a difference is called significant.
pub const SIGNIFICANCE: f64 = 0.05;

/// Secondary figures per cell, by name, as used in metric tables and published tables:
/// `time_s`, `req_s`, `mean_latency_us`, `ttfb_ms`, `header_savings_pct`,
/// `header_sent_per_req`, `header_received_per_req` (head bytes on the wire per completed
/// request, each way), `server_cpu_us_per_req`, `client_cpu_us_per_req`. [`CellSummary::secondary`](crate::CellSummary::secondary) also holds
/// `connections`, `bytes_received` and, for page loads, `page_ttfb_ms` (the document's
/// TTFB), which the verdict of a browser experiment shows.
pub const METRICS: [&str; 9] = [
    "time_s",
    "req_s",
    "mean_latency_us",
    "ttfb_ms",
    "header_savings_pct",
    "header_sent_per_req",
    "header_received_per_req",
    "server_cpu_us_per_req",
    "client_cpu_us_per_req",
];

/// Human header of a secondary figure.
pub fn metric_header(name: &str) -> &str {
    match name {
        "time_s" => "time (s)",
        "req_s" => "req/s",
        "mean_latency_us" => "mean latency (µs)",
        "ttfb_ms" => "TTFB p50 (ms)",
        "header_savings_pct" => "header savings (%)",
        "header_sent_per_req" => "head sent (B/req)",
        "header_received_per_req" => "head received (B/req)",
        "server_cpu_us_per_req" => "server CPU (µs/req)",
        "client_cpu_us_per_req" => "client CPU (µs/req)",
        "fcp_s" => "FCP (s)",
        "lcp_s" => "LCP (s)",
        "speed_index_s" => "Speed Index (s)",
        "connections" => "connections",
        "bytes_received" => "bytes received",
        "page_ttfb_ms" => "page TTFB (ms)",
        other => other,
    }
}

/// Formats a number with three significant digits (no exponent for ordinary magnitudes).
pub fn fmt_num(x: f64) -> String {
    if !x.is_finite() {
        return "—".into();
    }
    let a = x.abs();
    if a == 0.0 {
        "0".into()
    } else if a >= 1000.0 {
        format!("{:.0}", x)
    } else if a >= 100.0 {
        format!("{:.1}", x)
    } else if a >= 10.0 {
        format!("{:.2}", x)
    } else if a >= 0.01 {
        format!("{:.3}", x)
    } else {
        format!("{:.2e}", x)
    }
}
