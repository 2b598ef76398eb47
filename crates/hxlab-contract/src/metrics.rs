//! Live metrics in the Prometheus text format (what Prometheus scrapes), written with the
//! `prometheus-client` crate: `hxlab serve`'s `/metrics` (from the same counters as
//! `/stats`) and `hxlab load --metrics-listen` (from the run as it goes).
//!
//! Each scrape builds a registry from one consistent snapshot, so the figures of one scrape
//! belong together and nothing is counted twice on the hot path.

use crate::stats::{ServeLatency, StatsSnapshot, SERVE_LATENCY_BUCKETS_US};
use hxlab_core::LatencyHistogram;
use prometheus_client::encoding::{EncodeMetric, MetricEncoder, NoLabelSet};
use prometheus_client::metrics::counter::{ConstCounter, Counter};
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::{Registry, Unit};
use std::collections::BTreeMap;
use std::sync::atomic::AtomicU64;

/// The Content-Type of what [`serve_metrics`] and [`load_metrics`] return: the Prometheus
/// text format (0.0.4), which every Prometheus and `promtool check metrics` read.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

type Labels = Vec<(String, String)>;

fn label(k: &str, v: &str) -> Labels {
    vec![(k.to_string(), v.to_string())]
}

/// A counter family by one label, each value set once.
fn family(key: &str, values: &BTreeMap<String, u64>) -> Family<Labels, Counter> {
    let f = Family::<Labels, Counter>::default();
    for (k, v) in values {
        f.get_or_create(&label(key, k)).inc_by(*v);
    }
    f
}

/// Registers [`family`]`(key, values)` as `name`.
fn counters(reg: &mut Registry, name: &str, help: &str, key: &str, values: &BTreeMap<String, u64>) {
    reg.register(name, help, family(key, values));
}

/// The registry in the Prometheus text format: prometheus-client writes OpenMetrics, which
/// differs in three ways that matter here — a counter's HELP and TYPE name it without its
/// `_total` suffix, `# UNIT` lines, and the closing `# EOF` — so those are rewritten.
fn encode(reg: &Registry) -> String {
    let mut open = String::new();
    // Writing to a String cannot fail.
    let _ = prometheus_client::encoding::text::encode(&mut open, reg);
    let mut out = String::with_capacity(open.len());
    let mut help: Option<&str> = None;
    for line in open.lines() {
        if line.starts_with("# HELP ") {
            help = Some(line);
            continue;
        }
        if line.starts_with("# UNIT ") || line == "# EOF" {
            continue;
        }
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap_or((rest, ""));
            let full = if kind == "counter" {
                format!("{name}_total")
            } else {
                name.to_string()
            };
            if let Some(h) = help.take() {
                let text = h
                    .strip_prefix("# HELP ")
                    .and_then(|r| r.split_once(' '))
                    .map_or("", |(_, t)| t);
                out.push_str(&format!("# HELP {full} {text}\n"));
            }
            out.push_str(&format!("# TYPE {full} {kind}\n"));
            continue;
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// `hxlab serve`'s `/metrics`: per protocol, responses, body bytes, connections (so far and
/// open), refusals, Retries, early data and TFO taken, connections by congestion
/// controller; the process's CPU seconds and uptime.
pub fn serve_metrics(s: &StatsSnapshot) -> String {
    let mut reg = Registry::with_prefix("hxlab_serve");
    let by = |f: fn(&crate::stats::ProtoStats) -> u64| -> BTreeMap<String, u64> {
        s.by_protocol
            .iter()
            .map(|(p, v)| (p.clone(), f(v)))
            .collect()
    };
    counters(
        &mut reg,
        "requests",
        "Responses completed",
        "protocol",
        &by(|p| p.requests),
    );
    reg.register_with_unit(
        "response_body",
        "Response body bytes handed to the protocol stack",
        Unit::Bytes,
        family("protocol", &by(|p| p.body_bytes)),
    );
    counters(
        &mut reg,
        "connections",
        "Connections accepted",
        "protocol",
        &by(|p| p.connections),
    );
    let open = Family::<Labels, Gauge>::default();
    for (p, v) in &s.by_protocol {
        open.get_or_create(&label("protocol", p))
            .set(v.open_connections as i64);
    }
    reg.register("open_connections", "Connections open now", open);
    counters(
        &mut reg,
        "refused",
        "Connection attempts refused (QUIC table full, address over its cap)",
        "protocol",
        &by(|p| p.refused),
    );
    counters(
        &mut reg,
        "retries",
        "QUIC Retry packets sent",
        "protocol",
        &by(|p| p.retries),
    );
    counters(
        &mut reg,
        "early_data_accepted",
        "Connections whose TLS 1.3 early data was accepted",
        "protocol",
        &by(|p| p.early_data_accepted),
    );
    counters(
        &mut reg,
        "tfo_accepted",
        "TCP connections whose SYN data was taken (TCP Fast Open)",
        "protocol",
        &by(|p| p.tfo_accepted),
    );
    let cc = Family::<Labels, Counter>::default();
    for (p, v) in &s.by_protocol {
        for (name, n) in &v.cc {
            cc.get_or_create(&vec![
                ("protocol".to_string(), p.clone()),
                ("cc".to_string(), name.clone()),
            ])
            .inc_by(*n);
        }
    }
    reg.register(
        "connections_by_cc",
        "Connections by the congestion controller read back from each",
        cc,
    );
    reg.register_with_unit(
        "cpu",
        "CPU time of the server process (user + system)",
        Unit::Seconds,
        ConstCounter::new(s.cpu_user_s + s.cpu_sys_s),
    );
    reg.register_with_unit(
        "latency",
        "Server time per response, from the request's head to the response's last byte handed to the TCP socket or QUIC stream",
        Unit::Seconds,
        LabelledBuckets(
            s.by_protocol
                .iter()
                .filter(|(_, v)| v.latency.count() > 0)
                .map(|(p, v)| {
                    let b = Buckets::from_counts(&v.latency.counts, v.latency.sum_us as f64);
                    (label("protocol", p), b)
                })
                .collect(),
        ),
    );
    let up = Gauge::<f64, AtomicU64>::default();
    up.set(s.uptime_s);
    reg.register_with_unit(
        "uptime",
        "Seconds since the server started",
        Unit::Seconds,
        up,
    );
    encode(&reg)
}

/// What `hxlab load` has counted so far in a run.
#[derive(Clone, Debug, Default)]
pub struct LoadLive {
    /// Requests sent.
    pub started: u64,
    /// Requests with a complete response.
    pub done: u64,
    /// Of those, status 2xx or 3xx.
    pub succeeded: u64,
    /// Requests without a complete response.
    pub failed: u64,
    /// Responses by status code.
    pub status: BTreeMap<u16, u64>,
    /// Errors by kind.
    pub errors: BTreeMap<String, u64>,
    /// Bytes received (headers and bodies).
    pub bytes_received: u64,
    /// Connections established.
    pub connections: u64,
    /// Latency of every completed request.
    pub latency: LatencyHistogram,
    /// Whether the run has ended (then the figures are its totals).
    pub finished: bool,
}

/// Latency buckets' upper bounds (the server's, [`SERVE_LATENCY_BUCKETS_US`], for the load
/// generator's too): Prometheus' defaults, plus sub-millisecond ones (loopback requests take
/// tens of microseconds).
const BUCKETS_US: [u64; 16] = SERVE_LATENCY_BUCKETS_US;

/// A latency histogram as an OpenMetrics histogram with [`BUCKETS_US`] (and +Inf).
#[derive(Debug)]
struct Buckets {
    sum_s: f64,
    count: u64,
    buckets: Vec<(f64, u64)>,
}

impl Buckets {
    /// Per-bucket counts (the last one above every bound) and their sum, microseconds.
    fn from_counts(counts: &[u64], sum_us: f64) -> Buckets {
        // Cumulative counts are the encoder's business; these are per bucket.
        let bounds = BUCKETS_US.iter().map(|b| *b as f64 / 1e6).chain([f64::MAX]);
        let counts = (0..=BUCKETS_US.len()).map(|i| counts.get(i).copied().unwrap_or(0));
        let buckets: Vec<(f64, u64)> = bounds.zip(counts).collect();
        Buckets {
            sum_s: sum_us / 1e6,
            count: buckets.iter().map(|(_, n)| n).sum(),
            buckets,
        }
    }

    /// One pass over an HDR histogram's recorded values: each counted in the first bucket
    /// that holds it.
    fn of(h: &LatencyHistogram) -> Buckets {
        let mut counts = vec![0u64; BUCKETS_US.len() + 1];
        let mut sum_us = 0f64;
        for v in h.raw().iter_recorded() {
            let (value, n) = (v.value_iterated_to(), v.count_at_value());
            counts[ServeLatency::bucket(value)] += n;
            sum_us += value as f64 * n as f64;
        }
        Buckets::from_counts(&counts, sum_us)
    }
}

impl EncodeMetric for Buckets {
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        encoder.encode_histogram::<NoLabelSet>(self.sum_s, self.count, &self.buckets, None)
    }

    fn metric_type(&self) -> MetricType {
        MetricType::Histogram
    }
}

/// Histograms by one label (the server's latency per protocol).
#[derive(Debug)]
struct LabelledBuckets(Vec<(Labels, Buckets)>);

impl EncodeMetric for LabelledBuckets {
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        for (labels, b) in &self.0 {
            encoder
                .encode_family(labels)?
                .encode_histogram::<NoLabelSet>(b.sum_s, b.count, &b.buckets, None)?;
        }
        Ok(())
    }

    fn metric_type(&self) -> MetricType {
        MetricType::Histogram
    }
}

/// `hxlab load --metrics-listen`: the run so far (requests, statuses, errors, bytes,
/// connections, a latency histogram) and whether it has finished.
pub fn load_metrics(l: &LoadLive) -> String {
    let mut reg = Registry::with_prefix("hxlab_load");
    for (name, help, v) in [
        ("requests_started", "Requests sent", l.started),
        ("requests_done", "Requests with a complete response", l.done),
        (
            "requests_succeeded",
            "Responses with status 2xx or 3xx",
            l.succeeded,
        ),
        (
            "requests_failed",
            "Requests without a complete response",
            l.failed,
        ),
        ("connections", "Connections established", l.connections),
    ] {
        reg.register(name, help, ConstCounter::new(v));
    }
    reg.register_with_unit(
        "received",
        "Bytes received, headers and bodies",
        Unit::Bytes,
        ConstCounter::new(l.bytes_received),
    );
    let status: BTreeMap<String, u64> = l.status.iter().map(|(k, v)| (k.to_string(), *v)).collect();
    counters(
        &mut reg,
        "responses",
        "Responses by status code",
        "code",
        &status,
    );
    counters(&mut reg, "errors", "Errors by kind", "kind", &l.errors);
    reg.register_with_unit(
        "latency",
        "Request latency (request sent to last byte)",
        Unit::Seconds,
        Buckets::of(&l.latency),
    );
    let done = Gauge::<i64, std::sync::atomic::AtomicI64>::default();
    done.set(i64::from(l.finished));
    reg.register(
        "finished",
        "Whether the run has ended (1) or still goes (0)",
        done,
    );
    encode(&reg)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serve_metrics_name_every_protocol_in_the_prometheus_text_format() {
        let mut s = StatsSnapshot::from_json(
            r#"{"uptime_s":2.5,"cpu_user_s":1.0,"cpu_sys_s":0.5,"by_protocol":{},"total":{"requests":0,"body_bytes":0,"connections":0,"open_connections":0}}"#,
        )
        .expect("snapshot");
        let mut h2 = crate::stats::ProtoStats {
            requests: 7,
            body_bytes: 700,
            connections: 2,
            open_connections: 1,
            ..Default::default()
        };
        h2.cc.insert("cubic".into(), 2);
        // 1 response ≤ 100 µs, 2 in (250, 500] µs, 1 above 10 s.
        let mut counts = vec![0; SERVE_LATENCY_BUCKETS_US.len() + 1];
        (counts[0], counts[2], counts[16]) = (1, 2, 1);
        h2.latency = ServeLatency {
            counts,
            sum_us: 11_000_900,
        };
        s.by_protocol.insert("h2".into(), h2);
        let text = serve_metrics(&s);
        for line in [
            "# TYPE hxlab_serve_latency_seconds histogram\n",
            "hxlab_serve_latency_seconds_sum{protocol=\"h2\"} 11.0009\n",
            "hxlab_serve_latency_seconds_count{protocol=\"h2\"} 4\n",
            "hxlab_serve_latency_seconds_bucket{le=\"0.0001\",protocol=\"h2\"} 1\n",
            "hxlab_serve_latency_seconds_bucket{le=\"0.00025\",protocol=\"h2\"} 1\n",
            "hxlab_serve_latency_seconds_bucket{le=\"0.0005\",protocol=\"h2\"} 3\n",
            "hxlab_serve_latency_seconds_bucket{le=\"10.0\",protocol=\"h2\"} 3\n",
            "hxlab_serve_latency_seconds_bucket{le=\"+Inf\",protocol=\"h2\"} 4\n",
        ] {
            assert!(text.contains(line), "{line}not in:\n{text}");
        }
        assert!(
            text.contains("hxlab_serve_requests_total{protocol=\"h2\"} 7"),
            "{text}"
        );
        assert!(
            text.contains("hxlab_serve_response_body_bytes_total{protocol=\"h2\"} 700"),
            "{text}"
        );
        assert!(
            text.contains("hxlab_serve_open_connections{protocol=\"h2\"} 1"),
            "{text}"
        );
        assert!(text.contains("cc=\"cubic\""), "{text}");
        assert!(text.contains("hxlab_serve_cpu_seconds_total 1.5"), "{text}");
        assert!(
            text.contains("# TYPE hxlab_serve_requests_total counter\n"),
            "{text}"
        );
        assert!(
            !text.contains("# EOF") && !text.contains("# UNIT"),
            "{text}"
        );
    }

    #[test]
    fn load_latency_buckets_add_up() {
        let mut l = LoadLive::default();
        for us in [50, 300, 2_000, 2_000, 40_000_000] {
            l.latency.record_micros(us);
        }
        l.done = 5;
        let text = load_metrics(&l);
        assert!(
            text.contains("hxlab_load_latency_seconds_count 5"),
            "{text}"
        );
        assert!(
            text.contains("hxlab_load_latency_seconds_bucket{le=\"0.0001\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("hxlab_load_latency_seconds_bucket{le=\"0.0025\"} 4"),
            "{text}"
        );
        assert!(
            text.contains("hxlab_load_latency_seconds_bucket{le=\"10.0\"} 4"),
            "{text}"
        );
        assert!(
            text.contains("hxlab_load_latency_seconds_bucket{le=\"+Inf\"} 5"),
            "{text}"
        );
    }
}
