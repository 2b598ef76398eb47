//! `RunResult`: one load run, as `hxlab load --json` prints it and as the lab stores it (one
//! JSON line each in results.jsonl). Histograms travel inside it, so results from several
//! threads, processes or machines merge exactly with [`RunResult::merge`].
//!
//! Schema version 1; documented in docs/run-result.md. Times are microseconds unless the
//! field name says otherwise; counts are totals over the whole run.

use crate::histogram::LatencyHistogram;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Current schema version of [`RunResult`].
pub const SCHEMA_VERSION: u32 = 1;

/// Errors by kind, counted per failed request or connection attempt.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorCounts {
    /// TCP/UDP connect failures (refused, unreachable).
    pub connect: u64,
    /// TLS or QUIC handshake failures (certificate, ALPN, version).
    pub tls: u64,
    /// Requests or connects that exceeded their timeout.
    pub timeout: u64,
    /// Streams or connections reset by the peer.
    pub reset: u64,
    /// Protocol violations, unexpected protocol, malformed responses.
    pub protocol: u64,
    /// Anything else (I/O errors mid-response, ...).
    pub other: u64,
}

impl ErrorCounts {
    /// Sum over all kinds.
    pub fn total(&self) -> u64 {
        self.connect + self.tls + self.timeout + self.reset + self.protocol + self.other
    }
    fn add(&mut self, o: &ErrorCounts) {
        self.connect += o.connect;
        self.tls += o.tls;
        self.timeout += o.timeout;
        self.reset += o.reset;
        self.protocol += o.protocol;
        self.other += o.other;
    }
}

/// Bytes on the wire, split as h2load splits them.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ByteCounts {
    /// All bytes received at the HTTP layer (frames incl. headers; excludes TLS/QUIC overhead).
    pub total_received: u64,
    /// Bytes sent at the HTTP layer.
    pub total_sent: u64,
    /// Response header bytes as received on the wire (compressed on h2/h3).
    pub header_received: u64,
    /// Response header bytes before compression (sum of name+value+overhead as in h1).
    pub header_uncompressed: u64,
    /// Response body bytes.
    pub body_received: u64,
    /// Request header bytes sent on the wire.
    pub header_sent: u64,
    /// Request header bytes before compression.
    pub header_sent_uncompressed: u64,
}

impl ByteCounts {
    /// Header compression savings of received headers, as h2load's "space savings" (0..1).
    pub fn header_savings(&self) -> f64 {
        if self.header_uncompressed == 0 {
            0.0
        } else {
            1.0 - self.header_received as f64 / self.header_uncompressed as f64
        }
    }
    fn add(&mut self, o: &ByteCounts) {
        self.total_received += o.total_received;
        self.total_sent += o.total_sent;
        self.header_received += o.header_received;
        self.header_uncompressed += o.header_uncompressed;
        self.body_received += o.body_received;
        self.header_sent += o.header_sent;
        self.header_sent_uncompressed += o.header_sent_uncompressed;
    }
}

/// Histograms of one run, microseconds.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Histograms {
    /// Request latency, send (or scheduled send, in open model) to last byte.
    pub latency: LatencyHistogram,
    /// Latency measured from the actual send time (uncorrected); equals `latency` in closed model.
    pub latency_uncorrected: LatencyHistogram,
    /// Time to first byte of the response (headers), from the actual send time.
    pub ttfb: LatencyHistogram,
    /// TCP connect (or QUIC: first packet to handshake done is in `handshake`) per connection.
    pub connect: LatencyHistogram,
    /// TLS/QUIC handshake per connection (after connect).
    pub handshake: LatencyHistogram,
    /// Handshakes that resumed a session (subset of `handshake`).
    pub handshake_resumed: LatencyHistogram,
    /// Open model only (empty otherwise): how late each request left, actual send − due
    /// time. Corrected latency includes it; a large one means the client fell behind.
    #[serde(default)]
    pub send_lag: LatencyHistogram,
}

impl Histograms {
    fn merge(&mut self, o: &Histograms) {
        self.latency.merge(&o.latency);
        self.latency_uncorrected.merge(&o.latency_uncorrected);
        self.ttfb.merge(&o.ttfb);
        self.connect.merge(&o.connect);
        self.handshake.merge(&o.handshake);
        self.handshake_resumed.merge(&o.handshake_resumed);
        self.send_lag.merge(&o.send_lag);
    }
}

/// What was asked for.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RunConfig {
    /// Target URLs, requested round-robin.
    pub urls: Vec<String>,
    /// Protocol asked for: h1, h2, h2c, h3, auto.
    pub protocol: String,
    /// Connections.
    pub clients: u64,
    /// Max concurrent streams per connection (h1: pipelining depth).
    pub max_concurrent_streams: u64,
    /// Worker threads.
    pub threads: u64,
    /// Requests asked for (0 when duration-bound).
    pub requests: u64,
    /// Duration asked for, seconds (0 when count-bound).
    pub duration_s: f64,
    /// Open-model rate, requests per second (None: closed model).
    pub rate: Option<f64>,
    /// New connection per request.
    pub no_keepalive: bool,
    /// Congestion control asked for, if any.
    pub cc: Option<String>,
    /// Any other option, free-form, for the record.
    #[serde(default)]
    pub extra: BTreeMap<String, String>,
}

/// One load run's result: the one type every part of hxlab stores and reads.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct RunResult {
    /// Schema version ([`SCHEMA_VERSION`]).
    pub schema: u32,
    /// hxlab version that produced it.
    pub tool_version: String,
    /// Start time, seconds since the Unix epoch.
    pub started_unix_s: f64,
    /// Measured wall time (after warm-up), seconds. Merged: the longest of the parts.
    pub duration_s: f64,
    /// What was asked for.
    pub config: RunConfig,
    /// Requests started.
    pub requests_started: u64,
    /// Requests that completed with a response (any status).
    pub requests_done: u64,
    /// Completed with 2xx/3xx.
    pub requests_succeeded: u64,
    /// Failed requests (no complete response).
    pub requests_failed: u64,
    /// Open model (`--rate`) only, 0 otherwise: requests the timetable holds for the measured
    /// run (`-n`, or every request due before the end of `-D`). Equals
    /// `requests_started + requests_not_sent`.
    #[serde(default)]
    pub requests_scheduled: u64,
    /// Open model only: scheduled requests that were never sent (every connection busy or
    /// blocked when they came due, connecting failed, or the run ended first).
    #[serde(default)]
    pub requests_not_sent: u64,
    /// Open model only: requests sent but neither answered nor failed when the run ended
    /// (`-D` deadline). `requests_started = requests_done + requests_failed +
    /// requests_in_flight_at_end`.
    #[serde(default)]
    pub requests_in_flight_at_end: u64,
    /// Responses by status code ("200": n).
    pub status: BTreeMap<String, u64>,
    /// Errors by kind.
    pub errors: ErrorCounts,
    /// First few distinct error messages, for the user.
    #[serde(default)]
    pub error_samples: Vec<String>,
    /// Connections opened (successfully).
    pub connections: u64,
    /// Negotiated protocol per connection ("h2": n, "http/1.1": n, "h3": n).
    pub negotiated: BTreeMap<String, u64>,
    /// TLS versions negotiated per connection ("TLSv1.3": n).
    #[serde(default)]
    pub tls_versions: BTreeMap<String, u64>,
    /// Congestion controller per connection ("cubic": n), read back from each socket
    /// (`getsockopt(TCP_CONGESTION)`) or QUIC connection (quinn's controller), not echoed from
    /// `config.cc`: without `--cc` it shows the system default (TCP) or quinn's (Cubic).
    #[serde(default)]
    pub congestion_control: BTreeMap<String, u64>,
    /// Connections whose early data (TLS 1.3 0-RTT on TCP, QUIC 0-RTT) the server accepted,
    /// by negotiated protocol ("h2": n), as the server said in the handshake (observed by the
    /// client, never assumed from `--0rtt`).
    #[serde(default)]
    pub early_data_accepted: BTreeMap<String, u64>,
    /// Connections whose early data the server rejected (the requests were sent again after
    /// the handshake), by negotiated protocol.
    #[serde(default)]
    pub early_data_rejected: BTreeMap<String, u64>,
    /// TCP Fast Open (`--tfo`), by negotiated protocol: connections whose SYN carried data the
    /// server acknowledged (read back from TCP_INFO's TCPI_OPT_SYN_DATA).
    #[serde(default)]
    pub tfo_syn_data_acked: BTreeMap<String, u64>,
    /// TCP Fast Open connections whose SYN data was not acknowledged (no cookie yet — the
    /// first connection only asks for one — or the server does not accept TFO).
    #[serde(default)]
    pub tfo_syn_data_not_acked: BTreeMap<String, u64>,
    /// Connections that resumed a TLS session or used 0-RTT.
    #[serde(default)]
    pub resumed: u64,
    /// HTTP/2 pushed responses that completed (`hxlab load --push`); 0 otherwise.
    #[serde(default)]
    pub pushed: u64,
    /// Bytes.
    pub bytes: ByteCounts,
    /// Client CPU time, user, seconds.
    pub cpu_user_s: f64,
    /// Client CPU time, system, seconds.
    pub cpu_sys_s: f64,
    /// Histograms (serialised as HdrHistogram V2 base64 strings).
    pub histograms: Histograms,
}

impl RunResult {
    /// Requests completed per second of measured time.
    pub fn requests_per_sec(&self) -> f64 {
        if self.duration_s > 0.0 {
            self.requests_done as f64 / self.duration_s
        } else {
            0.0
        }
    }

    /// Client CPU microseconds per completed request.
    pub fn cpu_us_per_request(&self) -> f64 {
        if self.requests_done == 0 {
            0.0
        } else {
            (self.cpu_user_s + self.cpu_sys_s) * 1e6 / self.requests_done as f64
        }
    }

    /// Adds another run's counts and histograms to this one. Runs side by side (several
    /// processes or machines): durations take the maximum; CPU adds up.
    pub fn merge(&mut self, o: &RunResult) {
        if self.schema == 0 {
            self.schema = o.schema;
            self.tool_version = o.tool_version.clone();
            self.config = o.config.clone();
            self.started_unix_s = o.started_unix_s;
        } else if o.started_unix_s > 0.0 {
            self.started_unix_s = self.started_unix_s.min(o.started_unix_s);
        }
        self.duration_s = self.duration_s.max(o.duration_s);
        self.requests_started += o.requests_started;
        self.requests_done += o.requests_done;
        self.requests_succeeded += o.requests_succeeded;
        self.requests_failed += o.requests_failed;
        self.requests_scheduled += o.requests_scheduled;
        self.requests_not_sent += o.requests_not_sent;
        self.requests_in_flight_at_end += o.requests_in_flight_at_end;
        self.pushed += o.pushed;
        for (k, v) in &o.status {
            *self.status.entry(k.clone()).or_default() += v;
        }
        self.errors.add(&o.errors);
        for e in &o.error_samples {
            if self.error_samples.len() < 10 && !self.error_samples.contains(e) {
                self.error_samples.push(e.clone());
            }
        }
        self.connections += o.connections;
        for (k, v) in &o.negotiated {
            *self.negotiated.entry(k.clone()).or_default() += v;
        }
        for (k, v) in &o.tls_versions {
            *self.tls_versions.entry(k.clone()).or_default() += v;
        }
        crate::cc::add_counts(&mut self.congestion_control, &o.congestion_control);
        crate::cc::add_counts(&mut self.early_data_accepted, &o.early_data_accepted);
        crate::cc::add_counts(&mut self.early_data_rejected, &o.early_data_rejected);
        crate::cc::add_counts(&mut self.tfo_syn_data_acked, &o.tfo_syn_data_acked);
        crate::cc::add_counts(&mut self.tfo_syn_data_not_acked, &o.tfo_syn_data_not_acked);
        self.resumed += o.resumed;
        self.bytes.add(&o.bytes);
        self.cpu_user_s += o.cpu_user_s;
        self.cpu_sys_s += o.cpu_sys_s;
        self.histograms.merge(&o.histograms);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_roundtrip_and_merge_sum() {
        let mut a = RunResult {
            schema: SCHEMA_VERSION,
            requests_done: 10,
            duration_s: 1.0,
            pushed: 3,
            requests_scheduled: 12,
            requests_not_sent: 1,
            requests_in_flight_at_end: 1,
            ..Default::default()
        };
        a.status.insert("200".into(), 10);
        a.histograms.latency.record_micros(100);
        let text = serde_json::to_string(&a).unwrap();
        let b: RunResult = serde_json::from_str(&text).unwrap();
        let mut m = RunResult::default();
        m.merge(&a);
        m.merge(&b);
        assert_eq!(m.requests_done, 20);
        assert_eq!(m.status["200"], 20);
        assert_eq!(m.histograms.latency.len(), 2);
        assert_eq!(m.requests_per_sec(), 20.0);
        assert_eq!(m.pushed, 6);
        assert_eq!(m.requests_scheduled, 24);
        assert_eq!(m.requests_not_sent, 2);
        assert_eq!(m.requests_in_flight_at_end, 2);
        // Files written before `pushed` and the open-model counts existed still read, as 0.
        let mut v: serde_json::Value = serde_json::from_str(&text).unwrap();
        let o = v.as_object_mut().unwrap();
        for k in [
            "pushed",
            "requests_scheduled",
            "requests_not_sent",
            "requests_in_flight_at_end",
        ] {
            o.remove(k);
        }
        let old: RunResult = serde_json::from_value(v).unwrap();
        assert_eq!(old.pushed, 0);
        assert_eq!(old.requests_scheduled, 0);
        assert_eq!(old.requests_not_sent, 0);
        assert_eq!(old.requests_in_flight_at_end, 0);
    }
}
