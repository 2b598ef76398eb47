//! The one recorder: what every driver reports goes through these methods, so a request,
//! a connection or a byte is counted the same way on HTTP/1.1, HTTP/2 and HTTP/3.
//!
//! One recorder per worker thread (shared by that worker's connections through `Rc`, never
//! across threads); the worker recorders are merged once at the end into a `RunResult`.

use crate::per_client::ClientSpans;
use crate::plan::{Req, SharedLedger};
use crate::request_log::RequestLog;
use crate::series::Series;
use hxlab_core::header_table::{add_header_table, HeaderTableSeen};
use hxlab_core::result::{ByteCounts, ErrorCounts, Histograms};
use hxlab_core::RunResult;
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;
use std::time::{Duration, Instant};

/// A worker's recorder, shared by its connections.
pub type SharedRecorder = Rc<RefCell<Recorder>>;

/// Kinds of failure, as `RunResult.errors` counts them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    /// TCP/UDP connect failed.
    Connect,
    /// TLS/QUIC handshake failed (certificate, ALPN, version).
    Tls,
    /// A timeout expired.
    Timeout,
    /// The peer reset or closed the stream/connection.
    Reset,
    /// Malformed response, wrong protocol.
    Protocol,
    /// Anything else.
    Other,
}

impl ErrorKind {
    /// Classifies an I/O error met while talking on an established connection.
    pub fn of_io(e: &std::io::Error) -> ErrorKind {
        use std::io::ErrorKind as K;
        match e.kind() {
            K::ConnectionReset | K::ConnectionAborted | K::BrokenPipe | K::UnexpectedEof => {
                ErrorKind::Reset
            }
            K::TimedOut => ErrorKind::Timeout,
            K::InvalidData => ErrorKind::Protocol,
            K::ConnectionRefused | K::NotConnected | K::AddrNotAvailable => ErrorKind::Connect,
            _ => ErrorKind::Other,
        }
    }
}

/// Highest status code counted individually; others count under "other".
const MAX_STATUS: usize = 1000;

/// Counters and histograms of one worker.
#[derive(Debug)]
pub struct Recorder {
    /// Requests sent before this instant are warm-up and not recorded.
    pub measure_start: Instant,
    /// False during warm-up: bytes and connections are not counted.
    pub measuring: bool,
    /// Histograms (microseconds).
    pub hist: Histograms,
    status: Vec<u64>,
    /// Requests sent (measured phase).
    pub started: u64,
    /// Requests answered (any status).
    pub done: u64,
    /// Requests answered during the warm-up.
    pub warm_up_done: u64,
    /// Answered with 2xx/3xx.
    pub succeeded: u64,
    /// Requests that got no complete response.
    pub failed: u64,
    /// Errors by kind.
    pub errors: ErrorCounts,
    /// First distinct error messages.
    pub error_samples: Vec<String>,
    /// The first connection-level failure, for the one-line message when nothing worked.
    pub first_connect_error: Option<String>,
    /// Connections established.
    pub connections: u64,
    /// Negotiated protocol per connection.
    pub negotiated: BTreeMap<&'static str, u64>,
    /// TLS versions per connection.
    pub tls_versions: BTreeMap<&'static str, u64>,
    /// Congestion controller per connection, read back from the socket or QUIC connection.
    pub cc: BTreeMap<String, u64>,
    /// Connections that sent early data (0-RTT), by protocol: (accepted, rejected).
    pub early: BTreeMap<&'static str, (u64, u64)>,
    /// TCP Fast Open connections, by protocol: (SYN data acknowledged, not acknowledged).
    pub tfo: BTreeMap<&'static str, (u64, u64)>,
    /// Resumed TLS sessions / accepted 0-RTT.
    pub resumed: u64,
    /// Byte counts.
    pub bytes: ByteCounts,
    /// Completion time of the last measured response.
    pub last_done: Option<Instant>,
    /// Pushed (HTTP/2 server push) responses that completed.
    pub pushed: u64,
    /// Open model: the worker's timetables and unsettled requests (None in the closed model).
    pub ledger: Option<SharedLedger>,
    /// Open model, set by [`Recorder::finish_open`]: requests of the measured timetable.
    pub scheduled: u64,
    /// Open model: scheduled requests never sent.
    pub not_sent: u64,
    /// Open model: requests sent and neither answered nor failed when the run ended.
    pub in_flight_at_end: u64,
    /// The time series (None with `--interval 0`): every count above that has a time goes
    /// into its interval too, under the same rules (warm-up, deadline, open model).
    pub series: Option<Series>,
    /// The header tables the connections agreed on.
    pub header_tables: Vec<HeaderTableSeen>,
    /// Each client's answers and active span (h2load's `req/s` row).
    pub clients: ClientSpans,
    /// `--log-file` and `-v` (None: neither asked).
    pub log: Option<RequestLog>,
}

impl Recorder {
    /// What it has counted so far, for live metrics.
    pub fn live(&self) -> hxlab_contract::metrics::LoadLive {
        let mut l = hxlab_contract::metrics::LoadLive {
            started: self.started,
            done: self.done,
            succeeded: self.succeeded,
            failed: self.failed,
            bytes_received: self.bytes.total_received,
            connections: self.connections,
            latency: self.hist.latency.clone(),
            errors: crate::live::errors(&self.errors),
            ..Default::default()
        };
        for (code, n) in self.status.iter().enumerate() {
            if *n > 0 {
                l.status.insert(code as u16, *n);
            }
        }
        l
    }

    /// An empty recorder; recording starts with requests sent at or after `measure_start`.
    pub fn new(measure_start: Instant, measuring: bool) -> Recorder {
        Recorder {
            measure_start,
            measuring,
            hist: Histograms::default(),
            status: vec![0; MAX_STATUS],
            started: 0,
            done: 0,
            warm_up_done: 0,
            succeeded: 0,
            failed: 0,
            errors: ErrorCounts::default(),
            error_samples: Vec::new(),
            first_connect_error: None,
            connections: 0,
            negotiated: BTreeMap::new(),
            tls_versions: BTreeMap::new(),
            cc: BTreeMap::new(),
            early: BTreeMap::new(),
            tfo: BTreeMap::new(),
            resumed: 0,
            bytes: ByteCounts::default(),
            last_done: None,
            pushed: 0,
            ledger: None,
            scheduled: 0,
            not_sent: 0,
            in_flight_at_end: 0,
            series: None,
            header_tables: Vec::new(),
            clients: ClientSpans::default(),
            log: None,
        }
    }

    /// Open model: the request due at `scheduled` no longer waits for an answer.
    #[inline]
    fn settle(&self, scheduled: Instant) {
        if let Some(ledger) = &self.ledger {
            ledger.borrow_mut().settled(scheduled);
        }
    }

    /// Open model, once the run is over (`end`: the deadline, or when the last client
    /// stopped): counts the measured timetable, the requests never sent and those still in
    /// flight, and records every measured request that was due before `end` and never
    /// answered into the corrected `latency` histogram at `end − due` (a lower bound of what
    /// it would have waited), so a server that stops answering shows in the percentiles
    /// instead of vanishing from them. `start` is the timetable's offset zero.
    /// `latency_uncorrected` and `ttfb` stay answered requests only.
    pub fn finish_open(&mut self, start: Instant, end: Instant) {
        let Some(ledger) = self.ledger.clone() else {
            return;
        };
        let books = ledger.borrow();
        let from_offset = self.measure_start.saturating_duration_since(start);
        let end_offset = end.saturating_duration_since(start);
        let micros = |d: Duration| d.as_micros().min(u128::from(u64::MAX)) as u64;
        let mut scheduled = 0;
        // The time series counts them at `end`, as the totals do.
        let mut last = self.series.as_mut().map(|s| s.at(end));
        let hist = &mut self.hist;
        let mut unanswered = |us: u64, n: u64| {
            hist.latency.record_n_micros(us, n);
            if let Some(iv) = last.as_deref_mut() {
                iv.latency.record_n_micros(us, n);
            }
        };
        for s in &books.schedules {
            let from = s.first_index_due_at_or_after(from_offset);
            scheduled += s.count_between(from, u64::MAX);
            s.unsent_waits(from, end_offset, |wait, n| unanswered(micros(wait), n));
        }
        // Taken and unsettled: in flight, or taken but not written yet (waiting for a
        // connection or for stream credit) — unanswered either way.
        for (due, n) in books.outstanding(self.measure_start, end) {
            unanswered(micros(end.saturating_duration_since(due)), u64::from(n));
        }
        self.scheduled = scheduled;
        self.not_sent = scheduled.saturating_sub(self.started);
        self.cut_at_deadline();
    }

    /// A `-D` run cut at its deadline (either model): the requests sent and neither answered
    /// nor failed are counted as in flight at the end, so a server that went silent shows in
    /// the result instead of vanishing.
    pub fn cut_at_deadline(&mut self) {
        self.in_flight_at_end = self.started.saturating_sub(self.done + self.failed);
    }

    /// A request was sent at `sent` (or, in the open model, became due at `scheduled` and was
    /// sent at `sent`: the difference goes into the `send_lag` histogram).
    #[inline]
    pub fn request_started(&mut self, scheduled: Instant, sent: Instant) {
        if scheduled >= self.measure_start {
            self.started += 1;
            if self.ledger.is_some() {
                let lag = sent.saturating_duration_since(scheduled);
                self.hist.send_lag.record(lag);
                if let Some(series) = &mut self.series {
                    series.at(sent).send_lag.record(lag);
                }
            }
        }
    }

    /// A request that was written but will be sent again (the server closed the connection
    /// before answering a pipelined request, or refused the stream): it no longer counts as
    /// started. Not to be confused with the open model's `not_sent` (due, never sent).
    pub fn request_unsent(&mut self, scheduled: Instant) {
        if scheduled >= self.measure_start {
            self.started = self.started.saturating_sub(1);
        }
    }

    /// A complete response to `req`: latency from its due time (= its send in the closed
    /// model) and from its send, time to first byte from its send.
    #[inline]
    pub fn response(&mut self, req: &Req, first_byte: Instant, done: Instant, status: u16) {
        let (scheduled, sent) = (req.scheduled, req.sent);
        self.settle(scheduled);
        if scheduled < self.measure_start {
            self.warm_up_done += 1;
            return;
        }
        self.done += 1;
        self.clients.answered(req.client);
        if let Some(log) = &mut self.log {
            log.response(req, first_byte, done, status);
        }
        let ok = (200..400).contains(&status);
        if ok {
            self.succeeded += 1;
        }
        self.status[(status as usize).min(MAX_STATUS - 1)] += 1;
        let latency = done.saturating_duration_since(scheduled);
        self.hist.latency.record(latency);
        if let Some(series) = &mut self.series {
            let iv = series.at(done);
            iv.requests_done += 1;
            iv.requests_succeeded += u64::from(ok);
            iv.latency.record(latency);
        }
        self.hist
            .latency_uncorrected
            .record(done.saturating_duration_since(sent));
        self.hist
            .ttfb
            .record(first_byte.saturating_duration_since(sent));
        self.last_done = Some(done);
    }

    /// A request that got no complete response.
    pub fn request_failed(&mut self, req: &Req, kind: ErrorKind, message: &dyn std::fmt::Display) {
        self.settle(req.scheduled);
        if req.scheduled < self.measure_start {
            return;
        }
        self.failed += 1;
        let now = Instant::now();
        if let Some(log) = &mut self.log {
            log.failed(req, now, message);
        }
        if let Some(series) = &mut self.series {
            series.at(now).requests_failed += 1;
        }
        self.error(now, kind, message);
    }

    /// Closed model: requests never sent because every connection of the worker failed
    /// (the open model counts them as not sent instead, see [`Recorder::finish_open`]).
    pub fn requests_abandoned(&mut self, n: u64) {
        self.failed += n;
        if let Some(series) = &mut self.series {
            series.at(Instant::now()).requests_failed += n;
        }
    }

    /// A connection attempt failed (counted once, as an error of `kind`).
    pub fn connect_failed(&mut self, kind: ErrorKind, message: &dyn std::fmt::Display) {
        if let Some(log) = &self.log {
            log.connection(format_args!("connection failed: {message}"));
        }
        if self.first_connect_error.is_none() {
            self.first_connect_error = Some(message.to_string());
        }
        if self.measuring {
            self.error(Instant::now(), kind, message);
        }
    }

    /// One error of `kind`, seen at `now` (failures are rare: reading the clock here keeps
    /// it off the drivers' hot paths).
    fn error(&mut self, now: Instant, kind: ErrorKind, message: &dyn std::fmt::Display) {
        if let Some(series) = &mut self.series {
            series.at(now).errors += 1;
        }
        match kind {
            ErrorKind::Connect => self.errors.connect += 1,
            ErrorKind::Tls => self.errors.tls += 1,
            ErrorKind::Timeout => self.errors.timeout += 1,
            ErrorKind::Reset => self.errors.reset += 1,
            ErrorKind::Protocol => self.errors.protocol += 1,
            ErrorKind::Other => self.errors.other += 1,
        }
        if self.error_samples.len() < 10 {
            let text = message.to_string();
            if !self.error_samples.contains(&text) {
                self.error_samples.push(text);
            }
        }
    }

    /// A connection is up: TCP connect time (None on QUIC), TLS/QUIC handshake time (None on plain TCP),
    /// whether the handshake resumed a session, what was negotiated, the congestion
    /// controller read back from the connection.
    pub fn connected(
        &mut self,
        connect: Option<Duration>,
        handshake: Option<Duration>,
        resumed: bool,
        negotiated: &'static str,
        tls_version: Option<&'static str>,
        cc: Option<&str>,
    ) {
        // Counted during warm-up too: kept-alive connections opened then carry the measured
        // requests, and `negotiated` must say what they speak.
        self.connections += 1;
        if let Some(log) = self.log.as_ref().filter(|l| l.verbose()) {
            let ms = |d: Option<Duration>| {
                d.map_or("-".into(), |d| format!("{:.3} ms", d.as_secs_f64() * 1e3))
            };
            log.connection(format_args!(
                "connected: {negotiated}{}, cc {}, connect {}, handshake {}{}",
                tls_version.map_or(String::new(), |v| format!(" {v}")),
                cc.unwrap_or("-"),
                ms(connect),
                ms(handshake),
                if resumed { " (resumed)" } else { "" }
            ));
        }
        if let Some(c) = connect {
            self.hist.connect.record(c);
        }
        if let Some(h) = handshake {
            self.hist.handshake.record(h);
            if resumed {
                self.hist.handshake_resumed.record(h);
            }
        }
        if resumed {
            self.resumed += 1;
        }
        *self.negotiated.entry(negotiated).or_default() += 1;
        if let Some(v) = tls_version {
            *self.tls_versions.entry(v).or_default() += 1;
        }
        if let Some(cc) = cc {
            match self.cc.get_mut(cc) {
                Some(n) => *n += 1,
                None => {
                    self.cc.insert(cc.to_string(), 1);
                }
            }
        }
    }

    /// A connection that sent early data (0-RTT) learnt whether the server accepted it.
    pub fn early_data(&mut self, negotiated: &'static str, accepted: bool) {
        let e = self.early.entry(negotiated).or_default();
        if accepted {
            e.0 += 1;
        } else {
            e.1 += 1;
        }
    }

    /// A TCP Fast Open connection learnt whether the server acknowledged its SYN data.
    pub fn syn_data(&mut self, negotiated: &'static str, acked: bool) {
        let e = self.tfo.entry(negotiated).or_default();
        if acked {
            e.0 += 1;
        } else {
            e.1 += 1;
        }
    }

    /// Bytes received at the HTTP layer at `now`: all of them, the header part, the body
    /// part.
    #[inline]
    pub fn received(&mut self, now: Instant, total: u64, header: u64, body: u64) {
        if self.measuring {
            if total > 0 {
                if let Some(series) = &mut self.series {
                    series.at(now).bytes_received += total;
                }
            }
            self.bytes.total_received += total;
            self.bytes.header_received += header;
            self.bytes.body_received += body;
        }
    }

    /// Counts a connection's header tables (HPACK or QPACK), as read from the settings the
    /// two ends exchanged; the h2 and h3 sessions call it once per connection.
    pub fn header_table(&mut self, seen: &HeaderTableSeen) {
        add_header_table(&mut self.header_tables, seen);
    }

    /// `n` pushed responses completed with the request scheduled at `scheduled`.
    #[inline]
    pub fn pushed_responses(&mut self, scheduled: Instant, n: u64) {
        if scheduled >= self.measure_start {
            self.pushed += n;
        }
    }

    /// Uncompressed size of received response headers.
    #[inline]
    pub fn received_header_uncompressed(&mut self, n: u64) {
        if self.measuring {
            self.bytes.header_uncompressed += n;
        }
    }

    /// Bytes sent at the HTTP layer: all of them, request header bytes on the wire, request
    /// header bytes before compression.
    #[inline]
    pub fn sent(&mut self, total: u64, header: u64, header_uncompressed: u64) {
        if self.measuring {
            self.bytes.total_sent += total;
            self.bytes.header_sent += header;
            self.bytes.header_sent_uncompressed += header_uncompressed;
        }
    }

    /// Adds this worker's figures to `r` (counts, maps, histograms; not times or CPU).
    pub fn add_to(&self, r: &mut RunResult) {
        let mut part = RunResult {
            schema: r.schema,
            requests_started: self.started,
            requests_done: self.done,
            warm_up_requests_done: self.warm_up_done,
            requests_succeeded: self.succeeded,
            requests_failed: self.failed,
            requests_scheduled: self.scheduled,
            requests_not_sent: self.not_sent,
            requests_in_flight_at_end: self.in_flight_at_end,
            errors: self.errors.clone(),
            error_samples: self.error_samples.clone(),
            connections: self.connections,
            resumed: self.resumed,
            pushed: self.pushed,
            bytes: self.bytes.clone(),
            histograms: self.hist.clone(),
            interval_s: self
                .series
                .as_ref()
                .map_or(0.0, |s| s.width().as_secs_f64()),
            intervals: self
                .series
                .as_ref()
                .map(|s| s.intervals().to_vec())
                .unwrap_or_default(),
            ..Default::default()
        };
        for (code, n) in self.status.iter().enumerate() {
            if *n > 0 {
                part.status.insert(code.to_string(), *n);
            }
        }
        for (k, v) in &self.negotiated {
            part.negotiated.insert(k.to_string(), *v);
        }
        for (k, v) in &self.tls_versions {
            part.tls_versions.insert(k.to_string(), *v);
        }
        part.congestion_control = self.cc.clone();
        part.client_request_rates = self.clients.rates();
        part.header_tables = self.header_tables.clone();
        for (k, (a, r)) in &self.tfo {
            part.tfo_syn_data_acked.insert(k.to_string(), *a);
            part.tfo_syn_data_not_acked.insert(k.to_string(), *r);
        }
        for (k, (a, r)) in &self.early {
            part.early_data_accepted.insert(k.to_string(), *a);
            part.early_data_rejected.insert(k.to_string(), *r);
        }
        // Keep the caller's identity fields; merge only the counts.
        part.config = r.config.clone();
        part.tool_version = r.tool_version.clone();
        part.started_unix_s = r.started_unix_s;
        let duration = r.duration_s;
        r.merge(&part);
        r.duration_s = duration;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hxlab_core::result::Interval;

    /// A request of client 0 due at `scheduled`, sent at `sent`.
    fn req(scheduled: Instant, sent: Instant) -> Req {
        Req {
            scheduled,
            sent,
            ticket: 0,
            client: 0,
        }
    }

    /// The series counts what the totals count, where the totals count it: a response in the
    /// interval of its completion, warm-up requests nowhere, bytes only while measuring,
    /// failures and errors in theirs; the sums equal the totals.
    #[test]
    fn the_series_follows_the_totals() {
        let start = Instant::now();
        let ms = |n: u64| start + Duration::from_millis(n);
        let measure_start = ms(1000);
        let mut r = Recorder::new(measure_start, false);
        r.series = Some(Series::new(measure_start, Duration::from_millis(100)));
        // Warm-up: sent before the measured start, answered after it.
        r.response(&req(ms(990), ms(990)), ms(1005), ms(1010), 200);
        r.received(ms(999), 50, 10, 40);
        r.measuring = true;
        r.received(ms(1050), 300, 100, 200);
        r.received(ms(1250), 70, 0, 70);
        // Completions at 1.05 s, 1.1 s (a boundary: the later interval) and 1.25 s.
        r.response(&req(ms(1001), ms(1001)), ms(1040), ms(1050), 200);
        r.response(&req(ms(1002), ms(1003)), ms(1090), ms(1100), 503);
        r.response(&req(ms(1200), ms(1200)), ms(1240), ms(1250), 204);
        r.request_failed(&req(ms(1000), ms(1000)), ErrorKind::Reset, &"reset");
        r.request_failed(
            &req(ms(999), ms(999)),
            ErrorKind::Reset,
            &"warm-up: not counted",
        );
        let mut out = RunResult::default();
        r.add_to(&mut out);
        assert_eq!(out.interval_s, 0.1);
        let iv = &out.intervals;
        let done: Vec<u64> = iv.iter().map(|i| i.requests_done).collect();
        assert_eq!(done[..3], [1, 1, 1]);
        assert_eq!(iv[1].requests_succeeded, 0);
        assert_eq!(iv[0].bytes_received, 300);
        assert_eq!(iv[2].bytes_received, 70);
        // 49 ms, known within 1/16.
        let p100 = iv[0].latency.quantile(1.0);
        assert!((49_000..=49_000 * 17 / 16).contains(&p100), "{p100}");
        let sum = |f: fn(&Interval) -> u64| iv.iter().map(f).sum::<u64>();
        assert_eq!(sum(|i| i.requests_done), out.requests_done);
        assert_eq!(sum(|i| i.requests_succeeded), out.requests_succeeded);
        assert_eq!(sum(|i| i.requests_failed), out.requests_failed);
        assert_eq!(sum(|i| i.errors), out.errors.total());
        assert_eq!(sum(|i| i.bytes_received), out.bytes.total_received);
        assert_eq!(sum(|i| i.latency.len()), out.histograms.latency.len());
        assert_eq!((out.requests_done, out.requests_failed), (3, 1));
    }

    /// Open model: each request's send lag goes into the interval of its send time as well
    /// as the totals (warm-up requests nowhere), so a long run's lag can be read per minute.
    #[test]
    fn the_series_keeps_the_send_lag() {
        let start = Instant::now();
        let ms = |n: u64| start + Duration::from_millis(n);
        let mut r = Recorder::new(ms(1000), false);
        r.series = Some(Series::new(ms(1000), Duration::from_millis(100)));
        r.ledger = Some(Default::default());
        r.request_started(ms(990), ms(1001));
        r.request_started(ms(1010), ms(1012));
        r.request_started(ms(1150), ms(1180));
        let mut out = RunResult::default();
        r.add_to(&mut out);
        let lag: Vec<u64> = out.intervals.iter().map(|i| i.send_lag.len()).collect();
        assert_eq!(lag[..2], [1, 1]);
        assert_eq!(out.histograms.send_lag.len(), 2);
        // 30 ms, known within 1/16.
        let p100 = out.intervals[1].send_lag.quantile(1.0);
        assert!((30_000..=30_000 * 17 / 16).contains(&p100), "{p100}");
    }
}
