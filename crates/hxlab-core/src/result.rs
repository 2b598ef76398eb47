//! `RunResult`: one load run, as `hxlab load --json` prints it and as the lab stores it (one
//! JSON line each in results.jsonl). Histograms travel inside it, so results from several
//! threads, processes or machines merge exactly with [`RunResult::merge`].
//!
//! Schema version 1; documented in docs/run-result.md. Times are microseconds unless the
//! field name says otherwise; counts are totals over the whole run.

use crate::cc::add_counts;
pub use crate::header_table::HeaderTableSeen;
use crate::histogram::LatencyHistogram;
pub use crate::interval::Interval;
pub use crate::shard::ShardInfo;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Current schema version of [`RunResult`].
pub const SCHEMA_VERSION: u32 = 1;

/// How many distinct error messages a (merged) result keeps.
const MAX_ERROR_SAMPLES: usize = 10;

/// Errors by kind, counted per failed request or connection attempt.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
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
        // No `..`: a new kind fails to compile until it is added here.
        let ErrorCounts {
            connect,
            tls,
            timeout,
            reset,
            protocol,
            other,
        } = o;
        self.connect += connect;
        self.tls += tls;
        self.timeout += timeout;
        self.reset += reset;
        self.protocol += protocol;
        self.other += other;
    }
}

/// Bytes on the wire, split as h2load splits them.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
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
        // No `..`: a new count fails to compile until it is added here.
        let ByteCounts {
            total_received,
            total_sent,
            header_received,
            header_uncompressed,
            body_received,
            header_sent,
            header_sent_uncompressed,
        } = o;
        self.total_received += total_received;
        self.total_sent += total_sent;
        self.header_received += header_received;
        self.header_uncompressed += header_uncompressed;
        self.body_received += body_received;
        self.header_sent += header_sent;
        self.header_sent_uncompressed += header_sent_uncompressed;
    }
}

/// Histograms of one run, microseconds.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
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
        // No `..`: a new histogram fails to compile until it is merged here.
        let Histograms {
            latency,
            latency_uncorrected,
            ttfb,
            connect,
            handshake,
            handshake_resumed,
            send_lag,
        } = o;
        self.latency.merge(latency);
        self.latency_uncorrected.merge(latency_uncorrected);
        self.ttfb.merge(ttfb);
        self.connect.merge(connect);
        self.handshake.merge(handshake);
        self.handshake_resumed.merge(handshake_resumed);
        self.send_lag.merge(send_lag);
    }
}

/// What was asked for.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
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
    /// Congestion control asked for (its name in JSON); None: the system's default on TCP
    /// and quinn's on QUIC (`hxlab load --cc system`). What ran is `congestion_control`.
    pub cc: Option<crate::cc::CongestionControl>,
    /// h2load's `--rps`: each client's most requests per second (None: unpaced).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rps: Option<f64>,
    /// h2load's `-p/--no-tls-proto`: what `auto` speaks on an http:// URL (h1 or h2c; None:
    /// h1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub no_tls_proto: Option<crate::protocol::Proto>,
    /// h2load's `--connect-to`: where the connections went instead of the URL's host and
    /// port (`host:port`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connect_to: Option<String>,
    /// h2load's `--sni`: the TLS server name sent instead of the URL's host.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sni: Option<String>,
    /// h2load's `-T`, seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connection_active_timeout_s: Option<f64>,
    /// h2load's `-N`, seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connection_inactivity_timeout_s: Option<f64>,
    /// Any other option, free-form, for the record.
    #[serde(default)]
    pub extra: BTreeMap<String, String>,
}

/// One load run's result: the one type every part of hxlab stores and reads.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
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
    /// Requests that completed during the warm-up (not measured; a server's cost read around
    /// the whole run covers them too).
    #[serde(default)]
    pub warm_up_requests_done: u64,
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
    /// The parts this result is made of: one for a run of `hxlab load` (shard 0 of 1 of its
    /// own run id, or shard I of N with `--shard`), several after [`RunResult::merge`]
    /// (sorted by run id and index). Absent in older files: empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub shards: Vec<ShardInfo>,
    /// Width of the time series' intervals, seconds (`hxlab load --interval`, 1 s by
    /// default; wider than asked when the run would need more than
    /// [`crate::interval::MAX_INTERVALS`]). 0: no time series (`--interval 0`, older files).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub interval_s: f64,
    /// The time series: interval `i` covers `[i·interval_s, (i+1)·interval_s)` seconds
    /// after the measured part began (warm-up excluded, as in the totals), `ceil(duration_s
    /// / interval_s)` of them, the last one possibly shorter. Their counts add up to the
    /// run's (see [`Interval`]). Merged: index by index.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub intervals: Vec<Interval>,
    /// Where and with what it was produced: hxlab's version and commit, the kernel, CPU and
    /// default congestion controller (see [`crate::env`]). Merged: the first part's. Absent
    /// in older files.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub environment: Option<crate::env::Environment>,
    /// The header tables (HPACK, QPACK) the connections agreed on, one entry per distinct
    /// set of sizes with its connection count (see [`HeaderTableSeen`]). Merged: entries
    /// equal in every size add their connections. Absent in older files and for h1: empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub header_tables: Vec<HeaderTableSeen>,
    /// Each client's (connection slot's) answered requests per second of the time it was
    /// active — from its first connection (or the end of the warm-up) to its last
    /// disconnection (or the end of the run) — as h2load's `req/s` row computes it, in no
    /// particular order; clients that never connected are left out. Merged: concatenated.
    /// Absent in older files: empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub client_request_rates: Vec<f64>,
}

fn is_zero(x: &f64) -> bool {
    *x == 0.0
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
    /// processes or machines): counts, maps, bytes, CPU and histograms add up; `duration_s`
    /// takes the maximum, `started_unix_s` the earliest known (0 is unknown); `schema`,
    /// `tool_version`, `config` and `environment` stay the first result's (the first that has
    /// one); `error_samples` keeps the first
    /// 10 distinct; `shards` lists every part's record; `intervals` add index by index (parts
    /// started together line up), as long as the longer, at the first non-zero `interval_s`
    /// — parts of different widths lose the series (`interval_s` 0; `hxlab merge` refuses
    /// them first). docs/run-result.md states the same rule per field.
    pub fn merge(&mut self, o: &RunResult) {
        // No `..`: a field added to RunResult fails to compile until it is merged here.
        let RunResult {
            schema,
            tool_version,
            started_unix_s,
            duration_s,
            config,
            requests_started,
            requests_done,
            warm_up_requests_done,
            requests_succeeded,
            requests_failed,
            requests_scheduled,
            requests_not_sent,
            requests_in_flight_at_end,
            status,
            errors,
            error_samples,
            connections,
            negotiated,
            tls_versions,
            congestion_control,
            early_data_accepted,
            early_data_rejected,
            tfo_syn_data_acked,
            tfo_syn_data_not_acked,
            resumed,
            pushed,
            bytes,
            cpu_user_s,
            cpu_sys_s,
            histograms,
            shards,
            interval_s,
            intervals,
            environment,
            header_tables,
            client_request_rates,
        } = o;
        self.merge_series(*interval_s, intervals);
        self.client_request_rates
            .extend_from_slice(client_request_rates);
        if self.environment.is_none() {
            self.environment = environment.clone();
        }
        if self.schema == 0 {
            self.schema = *schema;
            self.tool_version = tool_version.clone();
            self.config = config.clone();
        }
        if *started_unix_s > 0.0
            && (self.started_unix_s <= 0.0 || *started_unix_s < self.started_unix_s)
        {
            self.started_unix_s = *started_unix_s;
        }
        self.duration_s = self.duration_s.max(*duration_s);
        self.requests_started += requests_started;
        self.requests_done += requests_done;
        self.warm_up_requests_done += warm_up_requests_done;
        self.requests_succeeded += requests_succeeded;
        self.requests_failed += requests_failed;
        self.requests_scheduled += requests_scheduled;
        self.requests_not_sent += requests_not_sent;
        self.requests_in_flight_at_end += requests_in_flight_at_end;
        add_counts(&mut self.status, status);
        self.errors.add(errors);
        for e in error_samples {
            if self.error_samples.len() < MAX_ERROR_SAMPLES && !self.error_samples.contains(e) {
                self.error_samples.push(e.clone());
            }
        }
        self.connections += connections;
        add_counts(&mut self.negotiated, negotiated);
        add_counts(&mut self.tls_versions, tls_versions);
        add_counts(&mut self.congestion_control, congestion_control);
        add_counts(&mut self.early_data_accepted, early_data_accepted);
        add_counts(&mut self.early_data_rejected, early_data_rejected);
        add_counts(&mut self.tfo_syn_data_acked, tfo_syn_data_acked);
        add_counts(&mut self.tfo_syn_data_not_acked, tfo_syn_data_not_acked);
        self.resumed += resumed;
        self.pushed += pushed;
        self.bytes.add(bytes);
        self.cpu_user_s += cpu_user_s;
        self.cpu_sys_s += cpu_sys_s;
        self.histograms.merge(histograms);
        for t in header_tables {
            crate::header_table::add_header_table(&mut self.header_tables, t);
        }
        self.shards.extend(shards.iter().cloned());
        self.shards
            .sort_by(|a, b| (&a.run_id, a.index).cmp(&(&b.run_id, b.index)));
    }

    /// The time series part of [`RunResult::merge`].
    fn merge_series(&mut self, interval_s: f64, intervals: &[Interval]) {
        if interval_s == 0.0 || intervals.is_empty() {
            return;
        }
        if self.interval_s == 0.0 && self.intervals.is_empty() {
            self.interval_s = interval_s;
        }
        if self.interval_s != interval_s {
            // Index i means different times on the two sides: no series beats a wrong one.
            self.interval_s = 0.0;
            self.intervals.clear();
            return;
        }
        crate::interval::merge_series(&mut self.intervals, intervals);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counts(pairs: &[(&str, u64)]) -> BTreeMap<String, u64> {
        pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
    }

    fn histogram(micros: u64) -> LatencyHistogram {
        let mut h = LatencyHistogram::new();
        h.record_micros(micros);
        h
    }

    /// A result with every field set, to a value derived from `n` that no other field and no
    /// other `n` shares.
    fn every_field_set(n: u64, start: f64, samples: &[&str]) -> RunResult {
        let f = n as f64;
        RunResult {
            schema: n as u32,
            tool_version: format!("v{n}"),
            started_unix_s: start,
            duration_s: f + 0.5,
            config: RunConfig {
                urls: vec![format!("https://127.0.0.1:{n}/")],
                protocol: format!("p{n}"),
                clients: n + 1,
                max_concurrent_streams: n + 2,
                threads: n + 3,
                requests: n + 4,
                duration_s: f + 0.25,
                rate: Some(f + 0.75),
                no_keepalive: true,
                cc: Some(crate::cc::CongestionControl::ALL[(n % 3) as usize]),
                rps: Some(f + 0.5),
                no_tls_proto: Some(crate::protocol::Proto::H2c),
                connect_to: Some(format!("127.0.0.1:{n}")),
                sni: Some(format!("s{n}.test")),
                connection_active_timeout_s: Some(f + 1.5),
                connection_inactivity_timeout_s: Some(f + 2.5),
                extra: counts(&[("k", n)])
                    .into_iter()
                    .map(|(k, v)| (k, v.to_string()))
                    .collect(),
            },
            requests_started: n + 10,
            requests_done: n + 11,
            warm_up_requests_done: n + 97,
            requests_succeeded: n + 12,
            requests_failed: n + 13,
            requests_scheduled: n + 14,
            requests_not_sent: n + 15,
            requests_in_flight_at_end: n + 16,
            status: counts(&[("200", n + 17), (&format!("{n}"), 1)]),
            errors: ErrorCounts {
                connect: n + 18,
                tls: n + 19,
                timeout: n + 20,
                reset: n + 21,
                protocol: n + 22,
                other: n + 23,
            },
            error_samples: samples.iter().map(|e| e.to_string()).collect(),
            connections: n + 24,
            negotiated: counts(&[("h2", n + 25), (&format!("n{n}"), 1)]),
            tls_versions: counts(&[("TLSv1.3", n + 26), (&format!("t{n}"), 1)]),
            congestion_control: counts(&[("cubic", n + 27), (&format!("c{n}"), 1)]),
            early_data_accepted: counts(&[("h2", n + 28), (&format!("a{n}"), 1)]),
            early_data_rejected: counts(&[("h2", n + 29), (&format!("r{n}"), 1)]),
            tfo_syn_data_acked: counts(&[("h2", n + 30), (&format!("s{n}"), 1)]),
            tfo_syn_data_not_acked: counts(&[("h2", n + 31), (&format!("u{n}"), 1)]),
            resumed: n + 32,
            pushed: n + 33,
            bytes: ByteCounts {
                total_received: n + 34,
                total_sent: n + 35,
                header_received: n + 36,
                header_uncompressed: n + 37,
                body_received: n + 38,
                header_sent: n + 39,
                header_sent_uncompressed: n + 40,
            },
            cpu_user_s: f + 0.125,
            cpu_sys_s: f + 0.0625,
            histograms: Histograms {
                latency: histogram(n + 41),
                latency_uncorrected: histogram(n + 42),
                ttfb: histogram(n + 43),
                connect: histogram(n + 44),
                handshake: histogram(n + 45),
                handshake_resumed: histogram(n + 46),
                send_lag: histogram(n + 47),
            },
            shards: vec![ShardInfo {
                run_id: format!("r{n}"),
                index: n % 7,
                count: 7,
                ..Default::default()
            }],
            // Same width on both sides (else the series is dropped); n / 1000 + 1 intervals.
            interval_s: 0.25,
            intervals: (0..n / 1000 + 1)
                .map(|i| {
                    let mut iv = Interval {
                        start_s: i as f64 * 0.25,
                        duration_s: 0.25,
                        requests_done: n + 50 + i,
                        requests_succeeded: n + 51 + i,
                        requests_failed: n + 52 + i,
                        errors: n + 53 + i,
                        bytes_received: n + 54 + i,
                        ..Default::default()
                    };
                    iv.latency.record_micros(n + i);
                    iv
                })
                .collect(),
            environment: Some(crate::env::Environment {
                kernel: format!("kernel-{n}"),
                ..Default::default()
            }),
            header_tables: vec![table(Some(4096), 4096, n + 60), table(None, n, 1)],
            client_request_rates: vec![f + 0.5, f + 0.25],
        }
    }

    /// An h2 entry of `header_tables`.
    fn table(server: Option<u64>, encoder: u64, connections: u64) -> HeaderTableSeen {
        HeaderTableSeen {
            protocol: "h2".into(),
            client_advertised: 4096,
            server_advertised: server,
            encoder_table: encoder,
            connections,
            ..Default::default()
        }
    }

    /// Every field of a merge, by the rule docs/run-result.md states for it. The merged value
    /// is destructured without `..`, so a new field cannot skip this test either.
    #[test]
    fn merge_follows_the_rule_of_every_field() {
        let many: Vec<String> = (0..12).map(|i| format!("b{i}")).collect();
        let many: Vec<&str> = many.iter().map(String::as_str).collect();
        let a = every_field_set(1000, 2000.0, &["a0", "b0"]);
        let b = every_field_set(3000, 1500.0, &many);
        // Into an empty result (as `hxlab merge` does) and into the first one itself.
        let mut from_empty = RunResult::default();
        from_empty.merge(&a);
        from_empty.merge(&b);
        let mut into_a = a.clone();
        into_a.merge(&b);
        for m in [from_empty, into_a] {
            let RunResult {
                schema,
                tool_version,
                started_unix_s,
                duration_s,
                config,
                requests_started,
                requests_done,
                warm_up_requests_done,
                requests_succeeded,
                requests_failed,
                requests_scheduled,
                requests_not_sent,
                requests_in_flight_at_end,
                status,
                errors,
                error_samples,
                connections,
                negotiated,
                tls_versions,
                congestion_control,
                early_data_accepted,
                early_data_rejected,
                tfo_syn_data_acked,
                tfo_syn_data_not_acked,
                resumed,
                pushed,
                bytes,
                cpu_user_s,
                cpu_sys_s,
                histograms,
                shards,
                interval_s,
                intervals,
                environment,
                header_tables,
                client_request_rates,
            } = m;
            // Concatenated, the first part's first.
            assert_eq!(client_request_rates, [1000.5, 1000.25, 3000.5, 3000.25]);
            // Entries equal in every size add their connections; the others are kept.
            assert_eq!(
                header_tables,
                [
                    table(None, 1000, 1),
                    table(None, 3000, 1),
                    table(Some(4096), 4096, 4120)
                ]
            );
            // The first part's.
            assert_eq!(environment, a.environment);
            // Index by index, as long as the longer (a has 2 intervals, b 4).
            assert_eq!(interval_s, 0.25);
            let sums: Vec<[u64; 6]> = intervals
                .iter()
                .map(|iv| {
                    [
                        iv.requests_done,
                        iv.requests_succeeded,
                        iv.requests_failed,
                        iv.errors,
                        iv.bytes_received,
                        iv.latency.len(),
                    ]
                })
                .collect();
            assert_eq!(
                sums,
                [
                    [4100, 4102, 4104, 4106, 4108, 2],
                    [4102, 4104, 4106, 4108, 4110, 2],
                    [3052, 3053, 3054, 3055, 3056, 1],
                    [3053, 3054, 3055, 3056, 3057, 1],
                ]
            );
            let starts: Vec<f64> = intervals.iter().map(|iv| iv.start_s).collect();
            assert_eq!(starts, [0.0, 0.25, 0.5, 0.75]);
            // Every part's record, by run id and index.
            let ids: Vec<(String, u64)> =
                shards.iter().map(|s| (s.run_id.clone(), s.index)).collect();
            assert_eq!(ids, [("r1000".to_string(), 6), ("r3000".to_string(), 4)]);
            // The first one's.
            assert_eq!(schema, 1000);
            assert_eq!(tool_version, "v1000");
            assert_eq!(config, a.config);
            // Earliest start, longest duration.
            assert_eq!(started_unix_s, 1500.0);
            assert_eq!(duration_s, 3000.5);
            // Sums.
            assert_eq!(requests_started, 4020);
            assert_eq!(requests_done, 4022);
            assert_eq!(warm_up_requests_done, 4194);
            assert_eq!(requests_succeeded, 4024);
            assert_eq!(requests_failed, 4026);
            assert_eq!(requests_scheduled, 4028);
            assert_eq!(requests_not_sent, 4030);
            assert_eq!(requests_in_flight_at_end, 4032);
            assert_eq!(connections, 4048);
            assert_eq!(resumed, 4064);
            assert_eq!(pushed, 4066);
            assert_eq!(cpu_user_s, 4000.25);
            assert_eq!(cpu_sys_s, 4000.125);
            let ErrorCounts {
                connect,
                tls,
                timeout,
                reset,
                protocol,
                other,
            } = errors;
            assert_eq!(
                [connect, tls, timeout, reset, protocol, other],
                [4036, 4038, 4040, 4042, 4044, 4046]
            );
            let ByteCounts {
                total_received,
                total_sent,
                header_received,
                header_uncompressed,
                body_received,
                header_sent,
                header_sent_uncompressed,
            } = bytes;
            assert_eq!(
                [
                    total_received,
                    total_sent,
                    header_received,
                    header_uncompressed,
                    body_received,
                    header_sent,
                    header_sent_uncompressed
                ],
                [4068, 4070, 4072, 4074, 4076, 4078, 4080]
            );
            // Maps add per key; keys of either side are kept.
            for (map, shared, one, two, sum) in [
                (status, "200", "1000", "3000", 4034),
                (negotiated, "h2", "n1000", "n3000", 4050),
                (tls_versions, "TLSv1.3", "t1000", "t3000", 4052),
                (congestion_control, "cubic", "c1000", "c3000", 4054),
                (early_data_accepted, "h2", "a1000", "a3000", 4056),
                (early_data_rejected, "h2", "r1000", "r3000", 4058),
                (tfo_syn_data_acked, "h2", "s1000", "s3000", 4060),
                (tfo_syn_data_not_acked, "h2", "u1000", "u3000", 4062),
            ] {
                assert_eq!(map, counts(&[(shared, sum), (one, 1), (two, 1)]));
            }
            // The first 10 distinct, in order.
            assert_eq!(
                error_samples,
                ["a0", "b0", "b1", "b2", "b3", "b4", "b5", "b6", "b7", "b8"]
            );
            // Histograms hold both sides' samples.
            let Histograms {
                latency,
                latency_uncorrected,
                ttfb,
                connect,
                handshake,
                handshake_resumed,
                send_lag,
            } = histograms;
            for (i, h) in [
                latency,
                latency_uncorrected,
                ttfb,
                connect,
                handshake,
                handshake_resumed,
                send_lag,
            ]
            .iter()
            .enumerate()
            {
                let base = 1041 + i as u64;
                assert_eq!(h.len(), 2, "histogram {i}");
                assert!(h.raw().equivalent(h.raw().min(), base), "histogram {i}");
                assert!(
                    h.raw().equivalent(h.raw().max(), base + 2000),
                    "histogram {i}"
                );
            }
        }
    }

    /// Parts of different widths cannot line up: the merge keeps no series rather than a
    /// wrong one. A part without a series adds to the totals only.
    #[test]
    fn merge_of_different_interval_widths_drops_the_series() {
        let with = |w: f64| RunResult {
            interval_s: w,
            intervals: vec![Interval {
                requests_done: 3,
                ..Default::default()
            }],
            requests_done: 3,
            ..Default::default()
        };
        let mut m = with(1.0);
        m.merge(&RunResult {
            requests_done: 2,
            ..Default::default()
        });
        assert_eq!(
            (m.interval_s, m.intervals.len(), m.requests_done),
            (1.0, 1, 5)
        );
        m.merge(&with(0.5));
        assert_eq!(
            (m.interval_s, m.intervals.len(), m.requests_done),
            (0.0, 0, 8)
        );
    }

    /// The series survives JSON as it was (its small histograms stay small); a result
    /// without one writes neither field.
    #[test]
    fn intervals_round_trip_through_json() {
        let mut iv = Interval {
            start_s: 1.0,
            duration_s: 0.5,
            requests_done: 7,
            requests_succeeded: 6,
            requests_failed: 2,
            errors: 3,
            bytes_received: 4096,
            ..Default::default()
        };
        for us in [150, 900, 20_000] {
            iv.latency.record_micros(us);
        }
        let r = RunResult {
            interval_s: 0.5,
            intervals: vec![Interval::default(), iv],
            ..Default::default()
        };
        let text = serde_json::to_string(&r).unwrap();
        let back: RunResult = serde_json::from_str(&text).unwrap();
        assert_eq!(back.interval_s, 0.5);
        let b = &back.intervals[1];
        assert_eq!(
            (
                b.start_s,
                b.duration_s,
                b.requests_done,
                b.requests_succeeded
            ),
            (1.0, 0.5, 7, 6)
        );
        assert_eq!(
            (b.requests_failed, b.errors, b.bytes_received),
            (2, 3, 4096)
        );
        assert_eq!(
            b.latency.percentiles(),
            r.intervals[1].latency.percentiles()
        );
        assert_eq!(b.latency.sigfig(), crate::histogram::SMALL_SIGFIG);
        assert_eq!(b.requests_per_sec(), 14.0);
        assert!(back.intervals[0].latency.is_empty());
        let plain = serde_json::to_string(&RunResult::default()).unwrap();
        assert!(!plain.contains("interval"), "{plain}");
    }

    /// A start time of 0 is unknown, whichever side has it.
    #[test]
    fn merge_keeps_the_earliest_known_start() {
        let known = RunResult {
            schema: SCHEMA_VERSION,
            started_unix_s: 1500.0,
            ..Default::default()
        };
        let unknown = RunResult {
            schema: SCHEMA_VERSION,
            ..Default::default()
        };
        let mut m = unknown.clone();
        m.merge(&known);
        assert_eq!(m.started_unix_s, 1500.0);
        let mut m = known.clone();
        m.merge(&unknown);
        assert_eq!(m.started_unix_s, 1500.0);
    }

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
        assert!(old.intervals.is_empty());
        assert_eq!(old.interval_s, 0.0);
        assert_eq!(old.pushed, 0);
        assert_eq!(old.requests_scheduled, 0);
        assert_eq!(old.requests_not_sent, 0);
        assert_eq!(old.requests_in_flight_at_end, 0);
    }
}
