//! Each client's answered requests and the span it was active, for h2load's `req/s` row:
//! a client's rate is its answered requests divided by the time from its first connection
//! (or the end of the warm-up, if later) to its last disconnection (or the end of the run),
//! and the row shows min, max, mean, sd and the share within one sd of the mean over the
//! clients ([`hxlab_core::result::RunResult::client_request_rates`]).
//!
//! One per worker, inside its recorder; pure bookkeeping on the instants it is given.

use std::time::Instant;

/// One client's tally.
#[derive(Clone, Copy, Debug, Default)]
struct Span {
    /// Measured requests answered (any status), as h2load's per-client `req_success`.
    answered: u64,
    /// When it first connected in the measured phase.
    start: Option<Instant>,
    /// When its last connection ended.
    end: Option<Instant>,
    /// A connection is open (its end is not known yet).
    open: bool,
}

/// The clients of one worker.
#[derive(Clone, Debug, Default)]
pub struct ClientSpans {
    spans: Vec<Span>,
}

impl ClientSpans {
    /// `n` clients, none started.
    pub fn new(n: usize) -> ClientSpans {
        ClientSpans {
            spans: vec![Span::default(); n],
        }
    }

    /// Client `k` dials at `now`; its span starts no earlier than `measure_start`.
    pub fn connecting(&mut self, k: u32, now: Instant, measure_start: Instant) {
        if let Some(s) = self.spans.get_mut(k as usize) {
            s.start.get_or_insert(now.max(measure_start));
            s.open = true;
        }
    }

    /// Client `k`'s connection ended at `now` (the last one sets the span's end).
    pub fn disconnected(&mut self, k: u32, now: Instant) {
        if let Some(s) = self.spans.get_mut(k as usize) {
            s.end = Some(now);
            s.open = false;
        }
    }

    /// Client `k` got a measured answer.
    #[inline]
    pub fn answered(&mut self, k: u32) {
        if let Some(s) = self.spans.get_mut(k as usize) {
            s.answered += 1;
        }
    }

    /// The run ended at `end`: connections still open end there.
    pub fn finish(&mut self, end: Instant) {
        for s in self.spans.iter_mut().filter(|s| s.open) {
            s.end = Some(end);
            s.open = false;
        }
    }

    /// Each client's answered requests per second of its span (rounded to 0.001), for the
    /// clients whose span is known and longer than a nanosecond (as h2load leaves out the
    /// others).
    pub fn rates(&self) -> Vec<f64> {
        self.spans
            .iter()
            .filter_map(|s| {
                let secs = s.end?.saturating_duration_since(s.start?).as_secs_f64();
                (secs > 1e-9).then(|| (s.answered as f64 / secs * 1000.0).round() / 1000.0)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// On virtual time: a client connected in the warm-up counts from the measured start, a
    /// reconnecting client keeps its first start and its last end, one still connected ends
    /// with the run, and one that never connected is left out.
    #[test]
    fn rates_count_answers_over_each_clients_span() {
        let t0 = Instant::now();
        let ms = |n: u64| t0 + Duration::from_millis(n);
        let mut c = ClientSpans::new(4);
        c.connecting(0, ms(0), ms(500));
        c.connecting(1, ms(600), ms(500));
        for _ in 0..10 {
            c.answered(0);
            c.answered(1);
        }
        c.disconnected(1, ms(700));
        c.connecting(1, ms(800), ms(500));
        c.disconnected(1, ms(1100));
        c.connecting(2, ms(900), ms(500));
        c.answered(3);
        c.finish(ms(1500));
        // 10 in 1 s, 10 in 0.5 s, 0 in 0.6 s; client 3 never connected.
        assert_eq!(c.rates(), vec![10.0, 20.0, 0.0]);
    }
}
