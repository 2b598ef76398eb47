//! Per-protocol counters behind `/stats`: plain relaxed atomics, no locks in the hot path.
//! What `/stats` serves is hxlab-contract's [`StatsSnapshot`], built here.

use hxlab_contract::{ProtoStats, ServeLatency, StatsSnapshot, SERVE_LATENCY_BUCKETS_US};
use hxlab_core::sched::{Lowat, Scheduler};
use hxlab_wire::priority::{Priority, Signal};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

/// The protocol a connection or request was served over (hxlab-core's one protocol type).
pub(crate) use hxlab_core::Protocol;

/// Names of the congestion controllers counted per connection, in slot order; anything
/// else the kernel reports is counted as "other".
const CC_NAMES: [&str; 4] = ["reno", "cubic", "bbr", "other"];

/// The counter slot of a congestion controller's name.
pub(crate) fn cc_slot(name: &str) -> usize {
    CC_NAMES
        .iter()
        .position(|n| *n == name)
        .unwrap_or(CC_NAMES.len() - 1)
}

#[derive(Default)]
struct Counters {
    requests: AtomicU64,
    body_bytes: AtomicU64,
    connections: AtomicU64,
    open_connections: AtomicU64,
    early_data_accepted: AtomicU64,
    tfo_accepted: AtomicU64,
    retries: AtomicU64,
    refused: AtomicU64,
    cc: [AtomicU64; CC_NAMES.len()],
    /// Send low-water marks read back: off, the configured one, another.
    lowat: [AtomicU64; 3],
    /// Responses by urgency × incremental (slot `u * 2 + i`).
    priorities: [AtomicU64; 16],
    /// Responses by where their priority came from ([`SIGNALS`]).
    signals: [AtomicU64; 4],
    response_header_bytes: AtomicU64,
    request_header_bytes: AtomicU64,
    /// Connections by their encoder's table size: locked once per connection, at its first
    /// response, never per request.
    encoder_tables: std::sync::Mutex<BTreeMap<u64, u64>>,
    /// Counted responses by their latency ([`SERVE_LATENCY_BUCKETS_US`], then the rest), and
    /// the latencies' sum in microseconds.
    latency: [AtomicU64; SERVE_LATENCY_BUCKETS_US.len() + 1],
    latency_sum_us: AtomicU64,
}

/// Where a response's priority came from, in slot order.
const SIGNALS: [&str; 4] = ["default", "header", "priority_update", "rfc7540"];

fn signal_slot(s: Signal) -> usize {
    match s {
        Signal::Default => 0,
        Signal::Header => 1,
        Signal::Update => 2,
        Signal::Rfc7540 => 3,
    }
}

/// All counters of one server.
pub(crate) struct Stats {
    started: Instant,
    by: [Counters; 5],
    scheduler: Scheduler,
    lowat: Lowat,
    /// HTTP/3 header compression, kept apart from the per-protocol counters.
    pub h3_qpack: QpackCounters,
}

impl Stats {
    /// Counters of a server that schedules with `scheduler` and sets `lowat` on its TCP
    /// sockets (what sockets run is read back and counted against it).
    pub fn new(scheduler: Scheduler, lowat: Lowat) -> Stats {
        Stats {
            started: Instant::now(),
            by: Default::default(),
            scheduler,
            lowat,
            h3_qpack: QpackCounters::default(),
        }
    }

    /// Counts the send low-water mark a TCP connection of `p` runs, as read back.
    pub fn lowat(&self, p: Protocol, running: Lowat) {
        let slot = match running {
            Lowat::Off => 0,
            l if l == self.lowat => 1,
            _ => 2,
        };
        self.by[p.index()].lowat[slot].fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a response of `p` started with `priority`, which came from `source`.
    pub fn priority(&self, p: Protocol, priority: Priority, source: Signal) {
        let c = &self.by[p.index()];
        let slot = usize::from(priority.urgency.min(7)) * 2 + usize::from(priority.incremental);
        c.priorities[slot].fetch_add(1, Ordering::Relaxed);
        c.signals[signal_slot(source)].fetch_add(1, Ordering::Relaxed);
    }

    /// Counts `n` bytes of response head sent on `p` (h1: status and header lines; h2: HPACK
    /// block; h3: QPACK field section).
    pub fn response_head_bytes(&self, p: Protocol, n: u64) {
        self.by[p.index()]
            .response_header_bytes
            .fetch_add(n, Ordering::Relaxed);
    }

    /// Counts `n` bytes of request head received on `p`, counted as responses are.
    pub fn request_head_bytes(&self, p: Protocol, n: u64) {
        self.by[p.index()]
            .request_header_bytes
            .fetch_add(n, Ordering::Relaxed);
    }

    /// Counts a connection of `p` whose response encoder uses a table of `size` bytes.
    pub fn encoder_table(&self, p: Protocol, size: u64) {
        let mut m = self.by[p.index()]
            .encoder_tables
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        *m.entry(size).or_default() += 1;
    }

    /// Counts a response of `p` handed whole to the protocol stack, whose request's head the
    /// server had at `since`.
    pub fn request_done(&self, p: Protocol, since: impl Into<Instant>) {
        let since: Instant = since.into();
        let c = &self.by[p.index()];
        c.requests.fetch_add(1, Ordering::Relaxed);
        let us = u64::try_from(since.elapsed().as_micros()).unwrap_or(u64::MAX);
        c.latency[ServeLatency::bucket(us)].fetch_add(1, Ordering::Relaxed);
        c.latency_sum_us.fetch_add(us, Ordering::Relaxed);
    }

    pub fn body_bytes(&self, p: Protocol, n: u64) {
        if n > 0 {
            self.by[p.index()]
                .body_bytes
                .fetch_add(n, Ordering::Relaxed);
        }
    }

    /// Counts a new connection; the guard counts it closed when dropped.
    pub fn connection(self: &std::sync::Arc<Self>, p: Protocol) -> ConnectionGuard {
        let c = &self.by[p.index()];
        c.connections.fetch_add(1, Ordering::Relaxed);
        c.open_connections.fetch_add(1, Ordering::Relaxed);
        ConnectionGuard {
            stats: self.clone(),
            proto: p,
            _ticket: None,
        }
    }

    /// Connections closed so far, every protocol.
    pub fn closed_total(&self) -> u64 {
        self.by
            .iter()
            .map(|c| {
                c.connections
                    .load(Ordering::Relaxed)
                    .saturating_sub(c.open_connections.load(Ordering::Relaxed))
            })
            .sum()
    }

    /// Connections of `p` open now (handshake complete).
    pub fn open(&self, p: Protocol) -> u64 {
        self.by[p.index()].open_connections.load(Ordering::Relaxed)
    }

    /// Counts a connection whose early data was accepted.
    pub fn early_data_accepted(&self, p: Protocol) {
        self.by[p.index()]
            .early_data_accepted
            .fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a connection whose SYN carried data (TCP Fast Open).
    pub fn tfo_accepted(&self, p: Protocol) {
        self.by[p.index()]
            .tfo_accepted
            .fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a connection attempt answered with a Retry.
    pub fn retried(&self, p: Protocol) {
        self.by[p.index()].retries.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a connection attempt refused.
    pub fn refused(&self, p: Protocol) {
        self.by[p.index()].refused.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts the congestion controller (a [`cc_slot`]) a connection of `p` runs.
    pub fn cc(&self, p: Protocol, slot: usize) {
        if let Some(c) = self.by[p.index()].cc.get(slot) {
            c.fetch_add(1, Ordering::Relaxed);
        }
    }

    pub fn snapshot(&self) -> StatsSnapshot {
        let mut by_protocol = BTreeMap::new();
        let mut total = ProtoStats::default();
        for p in Protocol::ALL {
            let c = &self.by[p.index()];
            let s = ProtoStats {
                requests: c.requests.load(Ordering::Relaxed),
                body_bytes: c.body_bytes.load(Ordering::Relaxed),
                connections: c.connections.load(Ordering::Relaxed),
                open_connections: c.open_connections.load(Ordering::Relaxed),
                early_data_accepted: c.early_data_accepted.load(Ordering::Relaxed),
                tfo_accepted: c.tfo_accepted.load(Ordering::Relaxed),
                retries: c.retries.load(Ordering::Relaxed),
                refused: c.refused.load(Ordering::Relaxed),
                cc: CC_NAMES
                    .iter()
                    .zip(&c.cc)
                    .map(|(n, v)| (n.to_string(), v.load(Ordering::Relaxed)))
                    .filter(|(_, v)| *v > 0)
                    .collect(),
                notsent_lowat: ["off".to_string(), self.lowat.name(), "other".to_string()]
                    .into_iter()
                    .zip(&c.lowat)
                    .map(|(n, v)| (n, v.load(Ordering::Relaxed)))
                    .filter(|(_, v)| *v > 0)
                    .collect(),
                priorities: c
                    .priorities
                    .iter()
                    .enumerate()
                    .map(|(i, v)| {
                        let p = Priority {
                            urgency: (i / 2) as u8,
                            incremental: i % 2 == 1,
                        };
                        (p.to_string(), v.load(Ordering::Relaxed))
                    })
                    .filter(|(_, v)| *v > 0)
                    .collect(),
                priority_signals: SIGNALS
                    .iter()
                    .zip(&c.signals)
                    .map(|(n, v)| (n.to_string(), v.load(Ordering::Relaxed)))
                    .filter(|(_, v)| *v > 0)
                    .collect(),
                response_header_bytes: c.response_header_bytes.load(Ordering::Relaxed),
                request_header_bytes: c.request_header_bytes.load(Ordering::Relaxed),
                encoder_tables: c
                    .encoder_tables
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .iter()
                    .map(|(k, v)| (k.to_string(), *v))
                    .collect(),
                latency: latency(&c.latency, &c.latency_sum_us),
            };
            total.requests += s.requests;
            total.body_bytes += s.body_bytes;
            total.connections += s.connections;
            total.open_connections += s.open_connections;
            total.early_data_accepted += s.early_data_accepted;
            total.tfo_accepted += s.tfo_accepted;
            total.retries += s.retries;
            total.refused += s.refused;
            hxlab_core::cc::add_counts(&mut total.cc, &s.cc);
            hxlab_core::cc::add_counts(&mut total.notsent_lowat, &s.notsent_lowat);
            hxlab_core::cc::add_counts(&mut total.priorities, &s.priorities);
            hxlab_core::cc::add_counts(&mut total.priority_signals, &s.priority_signals);
            hxlab_core::cc::add_counts(&mut total.encoder_tables, &s.encoder_tables);
            total.response_header_bytes += s.response_header_bytes;
            total.request_header_bytes += s.request_header_bytes;
            total.latency.add(&s.latency);
            by_protocol.insert(p.stats_key().to_string(), s);
        }
        let (cpu_user_s, cpu_sys_s) = hxlab_core::rusage::process_cpu();
        StatsSnapshot {
            uptime_s: self.started.elapsed().as_secs_f64(),
            cpu_user_s,
            cpu_sys_s,
            by_protocol,
            total,
            scheduler: self.scheduler.name().to_string(),
            h3_qpack: self.h3_qpack.snapshot(),
        }
    }
}

/// A protocol's latency counters as `/stats` shows them (no buckets when none was counted).
fn latency(counts: &[AtomicU64], sum_us: &AtomicU64) -> ServeLatency {
    let counts: Vec<u64> = counts.iter().map(|c| c.load(Ordering::Relaxed)).collect();
    if counts.iter().all(|n| *n == 0) {
        return ServeLatency::default();
    }
    ServeLatency {
        counts,
        sum_us: sum_us.load(Ordering::Relaxed),
    }
}

/// HTTP/3 header bytes and QPACK counters (what `/stats` shows as `h3_qpack`); a
/// connection adds what it did as it goes.
#[derive(Default)]
pub(crate) struct QpackCounters {
    request_header_bytes: AtomicU64,
    response_header_bytes: AtomicU64,
    dynamic_refs_decoded: AtomicU64,
    dynamic_refs_encoded: AtomicU64,
    inserts_received: AtomicU64,
    inserts_made: AtomicU64,
    blocked_streams: AtomicU64,
    blocked_resets: AtomicU64,
    table_capacity: AtomicU64,
    blocked_streams_allowed: AtomicU64,
    /// Client SETTINGS seen, by "capacity=N,blocked=M" (one entry per distinct pair).
    client_settings: std::sync::Mutex<BTreeMap<String, u64>>,
}

/// What one HTTP/3 connection's QPACK did since it last reported ([`QpackCounters::add`]).
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct QpackDelta {
    pub request_header_bytes: u64,
    pub response_header_bytes: u64,
    pub dynamic_refs_decoded: u64,
    pub dynamic_refs_encoded: u64,
    pub inserts_received: u64,
    pub inserts_made: u64,
    pub blocked_streams: u64,
    pub blocked_resets: u64,
}

impl QpackCounters {
    /// Adds what a connection did.
    pub fn add(&self, d: &QpackDelta) {
        for (c, v) in [
            (&self.request_header_bytes, d.request_header_bytes),
            (&self.response_header_bytes, d.response_header_bytes),
            (&self.dynamic_refs_decoded, d.dynamic_refs_decoded),
            (&self.dynamic_refs_encoded, d.dynamic_refs_encoded),
            (&self.inserts_received, d.inserts_received),
            (&self.inserts_made, d.inserts_made),
            (&self.blocked_streams, d.blocked_streams),
            (&self.blocked_resets, d.blocked_resets),
        ] {
            if v > 0 {
                c.fetch_add(v, Ordering::Relaxed);
            }
        }
    }

    /// Records what we advertise: table capacity and blocked streams.
    pub fn advertised(&self, capacity: u64, blocked: u64) {
        self.table_capacity.store(capacity, Ordering::Relaxed);
        self.blocked_streams_allowed
            .store(blocked, Ordering::Relaxed);
    }

    /// Counts a client's QPACK SETTINGS (once per connection).
    pub fn client_settings(&self, capacity: u64, blocked: u64) {
        let key = format!("capacity={capacity},blocked={blocked}");
        if let Ok(mut m) = self.client_settings.lock() {
            // Clients choose these numbers: past a few distinct pairs, the rest is "other".
            let key = if m.len() < 32 || m.contains_key(&key) {
                key
            } else {
                "other".to_string()
            };
            *m.entry(key).or_default() += 1;
        }
    }

    fn snapshot(&self) -> hxlab_contract::H3QpackStats {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        hxlab_contract::H3QpackStats {
            request_header_bytes: get(&self.request_header_bytes),
            response_header_bytes: get(&self.response_header_bytes),
            dynamic_refs_decoded: get(&self.dynamic_refs_decoded),
            dynamic_refs_encoded: get(&self.dynamic_refs_encoded),
            inserts_received: get(&self.inserts_received),
            inserts_made: get(&self.inserts_made),
            blocked_streams: get(&self.blocked_streams),
            blocked_resets: get(&self.blocked_resets),
            table_capacity: get(&self.table_capacity),
            blocked_streams_allowed: get(&self.blocked_streams_allowed),
            client_settings: self
                .client_settings
                .lock()
                .map(|m| m.clone())
                .unwrap_or_default(),
        }
    }
}

/// Marks a connection closed in the counters when dropped, and gives back its admission
/// slots (when it holds them: an HTTP/1.1 connection in an epoll set outlives the task that
/// accepted it, so its slots travel with it here).
pub(crate) struct ConnectionGuard {
    stats: std::sync::Arc<Stats>,
    proto: Protocol,
    /// Boxed: the guard is part of every HTTP/1.1 connection's future.
    _ticket: Option<Box<crate::tcp_admit::Ticket>>,
}

impl ConnectionGuard {
    /// This guard, holding `ticket` for as long as the connection lives.
    pub(crate) fn holding(mut self, ticket: Option<crate::tcp_admit::Ticket>) -> Self {
        self._ticket = ticket.map(Box::new);
        self
    }
}

impl Drop for ConnectionGuard {
    fn drop(&mut self) {
        self.stats.by[self.proto.index()]
            .open_connections
            .fetch_sub(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn qpack_counters_add_up_and_client_settings_stay_bounded() {
        let stats = Stats::new(Scheduler::default(), Lowat::default());
        let q = &stats.h3_qpack;
        q.advertised(4096, 100);
        let d = QpackDelta {
            request_header_bytes: 10,
            dynamic_refs_decoded: 3,
            inserts_made: 2,
            ..QpackDelta::default()
        };
        q.add(&d);
        q.add(&d);
        // A client choosing new numbers on every connection fills 32 keys, then "other".
        for i in 0..100 {
            q.client_settings(i, 1);
        }
        q.client_settings(0, 1);
        let s = stats.snapshot().h3_qpack;
        assert_eq!(
            (
                s.request_header_bytes,
                s.dynamic_refs_decoded,
                s.inserts_made
            ),
            (20, 6, 4)
        );
        assert_eq!((s.table_capacity, s.blocked_streams_allowed), (4096, 100));
        assert_eq!(s.client_settings.len(), 33);
        assert_eq!(s.client_settings.get("other"), Some(&68));
        assert_eq!(s.client_settings.get("capacity=0,blocked=1"), Some(&2));
        // The snapshot's JSON carries them, and a document without them still parses.
        let back = StatsSnapshot::from_json(&stats.snapshot().to_json()).expect("json");
        assert_eq!(back.h3_qpack, s);
        let old = r#"{"uptime_s":1,"cpu_user_s":0,"cpu_sys_s":0,"by_protocol":{},"total":{"requests":0,"body_bytes":0,"connections":0,"open_connections":0}}"#;
        assert_eq!(
            StatsSnapshot::from_json(old).expect("old").h3_qpack,
            Default::default()
        );
    }
}
