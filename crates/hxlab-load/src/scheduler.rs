//! The open-model timetable, as pure logic on virtual time (offsets from the run's start),
//! so it is tested without clocks or sockets.
//!
//! With `--rate R`, request number `j` of the run (0, 1, 2, ...) is due at `j / R` seconds
//! after the start. Each client takes an arithmetic progression of it (client `k` of `c`
//! takes `k`, `k + c`, ...; with shards, see [`crate::parts`]), so the aggregate stays
//! exactly `R` whatever the number of connections, threads or shards, and no client talks
//! to another.
//!
//! Coordinated omission: a request that could not be sent when due (its connection was busy
//! or stalled) is still timed from when it was *due*; [`corrected_latency`] is that rule.
//! A request that was due but never answered before the run ended (never sent, or still in
//! flight) has waited at least from its due time to the end: [`Schedule::unsent_waits`]
//! gives those lower bounds for the requests a client never sent.

use std::time::Duration;

/// One client's share of an open-model timetable.
#[derive(Clone, Debug, PartialEq)]
pub struct Schedule {
    /// Requests per second of the whole timetable this client shares.
    rate: f64,
    /// Timetable index of this client's first request.
    first: u64,
    /// Distance between this client's requests in the timetable (its worker's client count).
    stride: u64,
    /// Timetable length (exclusive); `u64::MAX` when time-bound.
    limit: u64,
    /// Next timetable index this client will send.
    next: u64,
}

impl Schedule {
    /// Client `first` of `stride` clients sharing a timetable of `limit` requests at `rate`/s.
    pub fn new(rate: f64, first: u64, stride: u64, limit: u64) -> Schedule {
        Schedule {
            rate: rate.max(1e-9),
            first,
            stride: stride.max(1),
            limit,
            next: first,
        }
    }

    /// Offset from the start at which timetable index `index` is due.
    pub fn due_at(&self, index: u64) -> Duration {
        Duration::from_secs_f64(index as f64 / self.rate)
    }

    /// The next request of this client: (timetable index, due offset); None when done.
    pub fn peek(&self) -> Option<(u64, Duration)> {
        (self.next < self.limit).then(|| (self.next, self.due_at(self.next)))
    }

    /// Takes the next request (see [`Schedule::peek`]).
    pub fn take(&mut self) -> Option<(u64, Duration)> {
        let next = self.peek()?;
        self.next = self.next.saturating_add(self.stride);
        Some(next)
    }

    /// Gives back an unanswered request (e.g. pipelined requests the server closed on), so it
    /// is sent again with its original due time. Requests given back are the newest ones.
    pub fn give_back(&mut self, index: u64) {
        if index < self.next
            && index >= self.first
            && (index - self.first).is_multiple_of(self.stride)
        {
            self.next = index;
        }
    }

    /// How many of this client's requests are due by `elapsed` (inclusive).
    pub fn due_by(&self, elapsed: Duration) -> u64 {
        let last = (elapsed.as_secs_f64() * self.rate).floor() as u64;
        let last = last.min(self.limit.saturating_sub(1));
        if self.limit == 0 || last < self.first {
            0
        } else {
            (last - self.first) / self.stride + 1
        }
    }

    /// How many of this client's requests come before timetable index `index`.
    pub fn taken_before(&self, index: u64) -> u64 {
        if index <= self.first {
            0
        } else {
            (index - self.first).div_ceil(self.stride)
        }
    }

    /// The first timetable index due at or after `offset` (the timetable-wide index, not only
    /// this client's). Agrees exactly with [`Schedule::due_at`], rounding included, so a count
    /// made with it matches what the recorder sees.
    pub fn first_index_due_at_or_after(&self, offset: Duration) -> u64 {
        // Float estimate, then exact steps either way (a few; bounded all the same).
        let mut i = (offset.as_secs_f64() * self.rate)
            .ceil()
            .min(u64::MAX as f64 / 2.0) as u64;
        for _ in 0..100_000 {
            if i > 0 && self.due_at(i - 1) >= offset {
                i -= 1;
            } else if self.due_at(i) < offset {
                i += 1;
            } else {
                break;
            }
        }
        i
    }

    /// This client's requests with a timetable index in `from..to` (`to` capped at the limit).
    pub fn count_between(&self, from: u64, to: u64) -> u64 {
        let to = to.min(self.limit);
        if to <= from {
            0
        } else {
            self.taken_before(to) - self.taken_before(from)
        }
    }

    /// Timetable index of the next request this client will take.
    pub fn next_index(&self) -> u64 {
        self.next
    }

    /// The requests this client has not taken yet (its never-sent ones, once the run is
    /// over) with an index at or after `from` and due before `end`: calls `f(wait, n)` with
    /// the time from their due time to `end`, `n` requests at a time. Neighbours are grouped
    /// while their waits differ by less than 1/2048 of the wait (finer than the histogram's
    /// 3 significant digits), so even millions of requests cost a few thousand calls.
    pub fn unsent_waits(&self, from: u64, end: Duration, mut f: impl FnMut(Duration, u64)) {
        let stop = self.first_index_due_at_or_after(end).min(self.limit);
        let start = self.next.max(from);
        // First index of this client at or after `start`.
        let mut j = if start <= self.first {
            self.first
        } else {
            self.first + (start - self.first).div_ceil(self.stride) * self.stride
        };
        let per_second = self.rate / self.stride as f64;
        while j < stop {
            let left = self.count_between(j, stop);
            let wait = end.saturating_sub(self.due_at(j));
            let group = ((wait.as_secs_f64() * per_second / 2048.0) as u64).clamp(1, left);
            // The group's middle request stands for all of it.
            let middle = j + (group / 2) * self.stride;
            f(end.saturating_sub(self.due_at(middle)), group);
            j += group * self.stride;
        }
    }

    /// Requests of this client in the whole timetable (`u64::MAX` when time-bound).
    pub fn total(&self) -> u64 {
        if self.limit == u64::MAX {
            u64::MAX
        } else if self.limit <= self.first {
            0
        } else {
            (self.limit - 1 - self.first) / self.stride + 1
        }
    }
}

/// Latency corrected for coordinated omission: from the due time (not the late actual send)
/// to the last byte.
pub fn corrected_latency(due: Duration, done: Duration) -> Duration {
    done.saturating_sub(due)
}

#[cfg(test)]
mod tests {
    use super::*;
    use hxlab_core::LatencyHistogram;

    #[test]
    fn clients_interleave_into_one_exact_timetable() {
        let rate = 1000.0;
        let mut all = Vec::new();
        for k in 0..3 {
            let mut s = Schedule::new(rate, k, 3, 10);
            assert_eq!(s.total(), [4, 3, 3][k as usize]);
            while let Some((i, due)) = s.take() {
                all.push((i, due));
            }
        }
        all.sort();
        assert_eq!(all.len(), 10);
        for (j, (i, due)) in all.iter().enumerate() {
            assert_eq!(*i, j as u64);
            assert_eq!(*due, Duration::from_millis(j as u64));
        }
    }

    #[test]
    fn due_by_counts_requests_at_the_rate() {
        let s = Schedule::new(200.0, 1, 2, u64::MAX);
        // Timetable indices due by 1 s: 0..=200; this client has the odd ones: 100.
        assert_eq!(s.due_by(Duration::from_secs(1)), 100);
        let whole = Schedule::new(200.0, 0, 1, 50);
        assert_eq!(whole.due_by(Duration::from_secs(10)), 50);
        assert_eq!(whole.due_by(Duration::ZERO), 1);
    }

    #[test]
    fn give_back_rewinds_to_the_oldest_unanswered() {
        let mut s = Schedule::new(10.0, 0, 2, 100);
        let a = s.take().unwrap();
        let b = s.take().unwrap();
        let _c = s.take().unwrap();
        s.give_back(b.0);
        assert_eq!(s.take().unwrap(), b);
        s.give_back(a.0);
        assert_eq!(s.peek().unwrap(), a);
        s.give_back(1); // not this client's index: ignored
        assert_eq!(s.peek().unwrap(), a);
    }

    #[test]
    fn first_index_due_at_or_after_agrees_with_due_at() {
        for rate in [3.0, 7.0, 200.0, 333.3, 1e6 / 7.0] {
            let s = Schedule::new(rate, 0, 1, u64::MAX);
            for ms in [0u64, 1, 999, 1000, 2000, 12_345] {
                let at = Duration::from_millis(ms);
                let i = s.first_index_due_at_or_after(at);
                assert!(s.due_at(i) >= at, "rate {rate} at {at:?}");
                assert!(i == 0 || s.due_at(i - 1) < at, "rate {rate} at {at:?}");
            }
        }
        // 2 s at 200/s: indices 0..400 are due before the end.
        let s = Schedule::new(200.0, 0, 1, u64::MAX);
        assert_eq!(s.first_index_due_at_or_after(Duration::from_secs(2)), 400);
    }

    #[test]
    fn count_between_splits_the_timetable_among_clients() {
        let clients: Vec<Schedule> = (0..3).map(|k| Schedule::new(100.0, k, 3, 50)).collect();
        let total: u64 = clients.iter().map(|s| s.count_between(7, 1000)).sum();
        assert_eq!(total, 43);
        assert_eq!(clients[1].count_between(7, 11), 2); // indices 7 and 10
        assert_eq!(clients[0].count_between(9, 9), 0);
    }

    /// The grouped waits of never-sent requests: the exact count, each due before the end and
    /// at or after `from`, and quantiles as a one-by-one recording gives them.
    #[test]
    fn unsent_waits_group_without_losing_requests_or_precision() {
        let mut s = Schedule::new(50_000.0, 1, 2, u64::MAX);
        for _ in 0..10 {
            s.take();
        }
        let end = Duration::from_secs(20);
        let from = 1000;
        let (mut calls, mut grouped, mut single) =
            (0u64, LatencyHistogram::new(), LatencyHistogram::new());
        s.unsent_waits(from, end, |wait, n| {
            calls += 1;
            grouped.record_n_micros(wait.as_micros() as u64, n);
        });
        let mut j = 1001;
        while s.due_at(j) < end {
            single.record(end - s.due_at(j));
            j += 2;
        }
        assert_eq!(grouped.len(), single.len());
        assert_eq!(grouped.len(), (1_000_000 - 1000) / 2);
        assert!(calls < 30_000, "{calls} calls");
        for q in [0.0, 0.01, 0.5, 0.9, 0.99, 1.0] {
            let (a, b) = (grouped.quantile(q) as f64, single.quantile(q) as f64);
            assert!((a - b).abs() <= b * 0.002 + 1.0, "q {q}: {a} vs {b}");
        }
        // A client that took everything due has nothing unsent.
        let mut s = Schedule::new(100.0, 0, 1, 10);
        while s.take().is_some() {}
        s.unsent_waits(0, end, |_, _| panic!("nothing is unsent"));
    }

    /// A closed connection (one request at a time) at a fixed rate against a server that
    /// answers in 100 µs but stalls once for 1 s: the corrected p99 shows the stall, the
    /// uncorrected one does not. Runs on virtual time.
    #[test]
    fn a_stall_shows_in_corrected_latency_only() {
        let mut s = Schedule::new(100.0, 0, 1, 300);
        let mut corrected = LatencyHistogram::new();
        let mut uncorrected = LatencyHistogram::new();
        let mut free_at = Duration::ZERO;
        let mut n = 0;
        while let Some((_, due)) = s.take() {
            let sent = due.max(free_at);
            let service = if n == 50 {
                Duration::from_secs(1)
            } else {
                Duration::from_micros(100)
            };
            let done = sent + service;
            free_at = done;
            corrected.record(corrected_latency(due, done));
            uncorrected.record(done - sent);
            n += 1;
        }
        assert_eq!(corrected.len(), 300);
        assert!(
            corrected.quantile(0.99) >= 900_000,
            "corrected p99 {}",
            corrected.quantile(0.99)
        );
        assert!(
            uncorrected.quantile(0.99) < 1_000,
            "uncorrected p99 {}",
            uncorrected.quantile(0.99)
        );
        assert!(uncorrected.raw().max() >= 1_000_000);
    }
}
