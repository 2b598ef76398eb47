//! [`StatsSnapshot`]: what `hxlab serve` answers on `GET /stats` (its plain port), and what
//! everyone who reads a server's counters (the lab, `hxlab page`, tests) parses it into.

use hxlab_core::cc::counts_since;
use hxlab_core::sched::{Scheduler, Scheduling};
use hxlab_core::Protocol;
use std::collections::BTreeMap;

/// One protocol's counters as served by `/stats`.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ProtoStats {
    /// Completed responses (the `/stats` requests themselves are not counted).
    pub requests: u64,
    /// Response body bytes handed to the protocol stack.
    pub body_bytes: u64,
    /// Connections accepted so far.
    pub connections: u64,
    /// Connections open now.
    pub open_connections: u64,
    /// TLS-over-TCP connections whose TLS 1.3 early data (0-RTT) this server accepted.
    #[serde(default)]
    pub early_data_accepted: u64,
    /// TCP connections whose SYN carried data this server took (TCP Fast Open), read back
    /// from each accepted socket (TCP_INFO).
    #[serde(default)]
    pub tfo_accepted: u64,
    /// QUIC connection attempts answered with a Retry (asked to prove their address first,
    /// because too many handshakes were in progress).
    #[serde(default)]
    pub retries: u64,
    /// Connection attempts refused: the QUIC table full, or their address over its cap.
    #[serde(default)]
    pub refused: u64,
    /// Connections served so far by congestion controller ("reno": n), read back from each
    /// accepted TCP socket (getsockopt) or QUIC connection (quinn's controller); controllers
    /// with no connection are left out.
    #[serde(default)]
    pub cc: BTreeMap<String, u64>,
    /// Connections served so far by their TCP send low-water mark ("16384": n, "off": n),
    /// read back from each accepted socket (getsockopt TCP_NOTSENT_LOWAT); HTTP/3 has none.
    #[serde(default)]
    pub notsent_lowat: BTreeMap<String, u64>,
    /// Responses started so far by the priority the server understood for them ("u=3": n,
    /// "u=5, i": n), after every signal that came before their first byte (HTTP/2, HTTP/3).
    #[serde(default)]
    pub priorities: BTreeMap<String, u64>,
    /// Where those priorities came from: "header" (the `priority` request header),
    /// "priority_update" (a PRIORITY_UPDATE frame), "rfc7540" (HTTP/2 weights only),
    /// "default" (no signal).
    #[serde(default)]
    pub priority_signals: BTreeMap<String, u64>,
    /// Response head bytes the server sent, as they went on the wire before framing: the
    /// status line and header lines (h1), the HPACK blocks of HEADERS (h2) or the QPACK
    /// field sections (h3).
    #[serde(default)]
    pub response_header_bytes: u64,
    /// Request head bytes the server received, counted the same way.
    #[serde(default)]
    pub request_header_bytes: u64,
    /// Connections by the header table size their response encoder used ("4096": n),
    /// min(`--header-table`, what the client advertised), taken at their first response
    /// (h2: HPACK; h3: the QPACK capacity); h1 has none.
    #[serde(default)]
    pub encoder_tables: BTreeMap<String, u64>,
    /// How long the server took over each counted response, from the moment it had the
    /// request's head to the moment the response's last byte was handed to the protocol
    /// stack (the TCP socket or the QUIC stream): a histogram over
    /// [`SERVE_LATENCY_BUCKETS_US`].
    #[serde(default)]
    pub latency: ServeLatency,
}

/// Upper bounds of the server's latency buckets, microseconds (Prometheus' defaults, plus
/// sub-millisecond ones: a loopback response takes tens of microseconds); a last bucket
/// holds the rest.
pub const SERVE_LATENCY_BUCKETS_US: [u64; 16] = [
    100, 250, 500, 1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000, 500_000,
    1_000_000, 2_500_000, 5_000_000, 10_000_000,
];

/// A latency histogram with fixed buckets, as `/stats` and `/metrics` carry it.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(default)]
pub struct ServeLatency {
    /// Responses per bucket: `counts[i]` took at most `SERVE_LATENCY_BUCKETS_US[i]` µs and
    /// more than the bound before it; the last entry counts those above every bound
    /// (`SERVE_LATENCY_BUCKETS_US.len() + 1` entries; empty when none was counted).
    pub counts: Vec<u64>,
    /// The sum of every counted latency, microseconds.
    pub sum_us: u64,
}

impl ServeLatency {
    /// How many responses are counted.
    pub fn count(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// Adds `other`'s counts and sum.
    pub fn add(&mut self, other: &ServeLatency) {
        if self.counts.len() < other.counts.len() {
            self.counts.resize(other.counts.len(), 0);
        }
        for (a, b) in self.counts.iter_mut().zip(&other.counts) {
            *a += b;
        }
        self.sum_us += other.sum_us;
    }

    /// The bucket of a latency of `us` microseconds.
    pub fn bucket(us: u64) -> usize {
        SERVE_LATENCY_BUCKETS_US
            .iter()
            .position(|b| us <= *b)
            .unwrap_or(SERVE_LATENCY_BUCKETS_US.len())
    }
}

/// The `/stats` document.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct StatsSnapshot {
    /// Seconds since the server started.
    pub uptime_s: f64,
    /// User CPU time of the whole server process, seconds.
    pub cpu_user_s: f64,
    /// System CPU time of the whole server process, seconds.
    pub cpu_sys_s: f64,
    /// Counters keyed by "h1", "h1-tls", "h2", "h2c", "h3" ([`Protocol::stats_key`]).
    pub by_protocol: BTreeMap<String, ProtoStats>,
    /// The sum over all protocols.
    pub total: ProtoStats,
    /// How responses share an HTTP/2 or HTTP/3 connection on this server (`rfc9218`,
    /// `round-robin`, `fifo`); empty from a server that does not say.
    #[serde(default)]
    pub scheduler: String,
    /// HTTP/3 header compression (QPACK) counters, every connection so far.
    #[serde(default)]
    pub h3_qpack: H3QpackStats,
}

/// HTTP/3 header bytes and QPACK dynamic-table use, summed over every HTTP/3 connection a
/// server has served (`/stats`, `h3_qpack`).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(default)]
pub struct H3QpackStats {
    /// Request header bytes received: HEADERS frame payloads plus the clients' QPACK
    /// encoder-stream bytes.
    pub request_header_bytes: u64,
    /// Response header bytes sent: HEADERS frame payloads plus our encoder-stream bytes.
    pub response_header_bytes: u64,
    /// Field lines of request heads that referenced the dynamic table.
    pub dynamic_refs_decoded: u64,
    /// Field lines of response heads that referenced the dynamic table.
    pub dynamic_refs_encoded: u64,
    /// Entries the clients' encoders inserted into our decoders' tables.
    pub inserts_received: u64,
    /// Entries our encoders inserted into the clients' tables.
    pub inserts_made: u64,
    /// Times a request head had to wait for inserts (a blocked stream).
    pub blocked_streams: u64,
    /// Request streams reset because their head stayed blocked past the deadline.
    pub blocked_resets: u64,
    /// The table capacity we advertised (SETTINGS_QPACK_MAX_TABLE_CAPACITY).
    pub table_capacity: u64,
    /// The blocked streams we advertised (SETTINGS_QPACK_BLOCKED_STREAMS).
    pub blocked_streams_allowed: u64,
    /// Connections by the QPACK settings their client advertised, keyed
    /// `"capacity=N,blocked=M"`.
    pub client_settings: BTreeMap<String, u64>,
}

impl StatsSnapshot {
    /// Parses a `/stats` body.
    pub fn from_json(text: &str) -> Result<StatsSnapshot, serde_json::Error> {
        serde_json::from_str(text)
    }

    /// The `/stats` body (one line of JSON).
    pub fn to_json(&self) -> String {
        // Numbers and maps of strings to numbers always serialise (serde_json writes a
        // non-finite float as null rather than failing).
        serde_json::to_string(self).unwrap_or_default()
    }

    /// User plus system CPU seconds of the whole server process.
    pub fn cpu_s(&self) -> f64 {
        self.cpu_user_s + self.cpu_sys_s
    }

    /// The counters of one protocol (under its [`Protocol::stats_key`]); None if this server
    /// does not list it.
    pub fn protocol(&self, p: Protocol) -> Option<&ProtoStats> {
        self.by_protocol.get(p.stats_key())
    }

    /// What the server's send path ran between `before` and this reading (None: since it
    /// started), for `proto`'s connections (None: every protocol's): its scheduler, the marks
    /// of the connections it accepted and the priorities of the responses it started.
    pub fn scheduling(
        &self,
        before: Option<&StatsSnapshot>,
        proto: Option<Protocol>,
    ) -> Scheduling {
        let counts = |s: &StatsSnapshot| match proto {
            Some(p) => s.protocol(p).cloned().unwrap_or_default(),
            None => s.total.clone(),
        };
        let (now, was) = (counts(self), before.map(counts).unwrap_or_default());
        Scheduling {
            scheduler: Scheduler::parse(&self.scheduler).ok(),
            scheduler_applies: proto.is_none_or(Protocol::multiplexed),
            notsent_lowat: counts_since(&now.notsent_lowat, &was.notsent_lowat),
            priorities: counts_since(&now.priorities, &was.priorities),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A body as `hxlab serve` writes it (key order, every field present, `cc` as a map).
    const BODY: &str = r#"{"uptime_s":1.5,"cpu_user_s":0.25,"cpu_sys_s":0.125,"by_protocol":{"h1":{"requests":3,"body_bytes":30,"connections":1,"open_connections":0,"early_data_accepted":0,"tfo_accepted":0,"retries":0,"refused":2,"cc":{"cubic":1},"notsent_lowat":{"16384":1},"priorities":{},"priority_signals":{},"response_header_bytes":300,"request_header_bytes":120,"encoder_tables":{},"latency":{"counts":[2,1],"sum_us":350}},"h3":{"requests":0,"body_bytes":0,"connections":0,"open_connections":0,"early_data_accepted":0,"tfo_accepted":0,"retries":1,"refused":0,"cc":{},"notsent_lowat":{},"priorities":{"u=0, i":1},"priority_signals":{"header":1},"response_header_bytes":20,"request_header_bytes":10,"encoder_tables":{"4096":1},"latency":{"counts":[],"sum_us":0}}},"total":{"requests":3,"body_bytes":30,"connections":1,"open_connections":0,"early_data_accepted":0,"tfo_accepted":0,"retries":1,"refused":2,"cc":{"cubic":1},"notsent_lowat":{"16384":1},"priorities":{"u=0, i":1},"priority_signals":{"header":1},"response_header_bytes":320,"request_header_bytes":130,"encoder_tables":{"4096":1},"latency":{"counts":[2,1],"sum_us":350}},"scheduler":"rfc9218","h3_qpack":{"request_header_bytes":900,"response_header_bytes":300,"dynamic_refs_decoded":40,"dynamic_refs_encoded":30,"inserts_received":5,"inserts_made":9,"blocked_streams":1,"blocked_resets":0,"table_capacity":4096,"blocked_streams_allowed":100,"client_settings":{"capacity=65536,blocked=100":1}}}"#;

    #[test]
    fn a_body_round_trips_byte_for_byte() {
        let s = StatsSnapshot::from_json(BODY).unwrap();
        assert_eq!(s.to_json(), BODY);
        assert_eq!(s.protocol(Protocol::H1).unwrap().refused, 2);
        assert_eq!(s.protocol(Protocol::H1).unwrap().cc["cubic"], 1);
        assert_eq!(s.cpu_s(), 0.375);
        assert!(s.protocol(Protocol::H2).is_none());
        assert_eq!(s.scheduler, "rfc9218");
        assert_eq!(s.total.priorities["u=0, i"], 1);
        let h3 = s.protocol(Protocol::H3).unwrap();
        assert_eq!(
            (h3.response_header_bytes, h3.encoder_tables["4096"]),
            (20, 1)
        );
        // A server that does not count head bytes yet: zeros and no tables.
        let old =
            StatsSnapshot::from_json(&BODY.replace(",\"response_header_bytes\":300", "")).unwrap();
        assert_eq!(old.protocol(Protocol::H1).unwrap().response_header_bytes, 0);
        assert_eq!(s.h3_qpack.dynamic_refs_decoded, 40);
        assert_eq!(s.h3_qpack.client_settings["capacity=65536,blocked=100"], 1);
    }

    #[test]
    fn scheduling_is_what_grew_between_two_readings() {
        let before = StatsSnapshot::from_json(BODY).unwrap();
        let mut after = before.clone();
        let h1 = after.by_protocol.get_mut("h1").unwrap();
        h1.notsent_lowat.insert("16384".into(), 4);
        let h3 = after.by_protocol.get_mut("h3").unwrap();
        h3.priorities.insert("u=3".into(), 2);
        let on_h1 = after.scheduling(Some(&before), Some(Protocol::H1));
        assert_eq!(on_h1.scheduler, Some(Scheduler::Rfc9218));
        assert!(!on_h1.scheduler_applies, "HTTP/1.1 has nothing to schedule");
        assert_eq!(on_h1.notsent_lowat["16384"], 3);
        assert!(on_h1.priorities.is_empty());
        let on_h3 = after.scheduling(Some(&before), Some(Protocol::H3));
        assert!(on_h3.scheduler_applies && on_h3.notsent_lowat.is_empty());
        assert_eq!(on_h3.priorities.len(), 1, "{on_h3:?}");
        // Since the start, over every protocol (a page's own origin).
        let all = before.scheduling(None, None);
        assert_eq!(
            (all.notsent_lowat["16384"], all.priorities["u=0, i"]),
            (1, 1)
        );
        after.scheduler = "lottery".into();
        assert_eq!(after.scheduling(None, None).scheduler, None);
    }

    #[test]
    fn counters_an_older_server_does_not_send_read_as_zero() {
        let old = r#"{"uptime_s":1,"cpu_user_s":0,"cpu_sys_s":0,"by_protocol":{},"total":{"requests":1,"body_bytes":2,"connections":3,"open_connections":4}}"#;
        let s = StatsSnapshot::from_json(old).unwrap();
        assert_eq!(s.total.requests, 1);
        assert_eq!((s.total.refused, s.total.cc.len()), (0, 0));
        assert!(s.scheduler.is_empty() && s.total.priorities.is_empty());
        assert!(StatsSnapshot::from_json(r#"{"uptime_s":1}"#).is_err());
    }
}
