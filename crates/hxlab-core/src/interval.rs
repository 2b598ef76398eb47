//! A run's time series: what completed in each interval of equal width (1 s unless asked
//! otherwise) after the measured part of the run began, so warm-up and congestion-control
//! ramps show. Each interval keeps a small HDR histogram
//! ([`LatencyHistogram::small`]), so series merge as exactly as the run's totals do.
//!
//! The rules (docs/run-result.md states them too): interval `i` covers
//! `[i·w, (i+1)·w)` seconds after the measured start; a request counts in the interval of
//! its completion (or failure) time; a run of measured length `d` has `ceil(d / w)` intervals
//! (at least one), the last one possibly shorter, and what completed a hair after the end
//! counts in the last one; no series holds more than [`MAX_INTERVALS`] intervals — the width
//! doubles until it fits.

use crate::histogram::LatencyHistogram;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// Most intervals a series holds; a longer run gets a wider interval (doubled until it
/// fits). At about 3 KB an interval, 10 000 of them stay near 30 MB per worker thread.
pub const MAX_INTERVALS: usize = 10_000;

/// One interval of a run's time series (see `RunResult::intervals`).
#[derive(Clone, Debug, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Interval {
    /// Start of the interval, seconds after the measured part of the run began.
    pub start_s: f64,
    /// Its length, seconds (the last one may be shorter).
    pub duration_s: f64,
    /// Requests completed in it with a response (any status, by completion time): the
    /// intervals' sum is the run's `requests_done`.
    pub requests_done: u64,
    /// Of those, the ones answered 2xx/3xx (sum: `requests_succeeded`).
    #[serde(default)]
    pub requests_succeeded: u64,
    /// Requests that failed in it, without a complete response (by the time the failure was
    /// seen; not part of `requests_done`, as in the run's totals): the intervals' sum is the
    /// run's `requests_failed`.
    pub requests_failed: u64,
    /// Errors counted in it (connect, tls, timeout, reset, protocol, other): the intervals'
    /// sum is `errors.total()`.
    pub errors: u64,
    /// Bytes received in it (all bytes: headers and bodies, as `bytes.total_received` counts
    /// them; by the time they were read): the intervals' sum is `bytes.total_received`.
    pub bytes_received: u64,
    /// Latency of the requests completed in it (same definition as `histograms.latency`,
    /// including, in the open model, the requests left unanswered at the end, in the last
    /// interval), microseconds, 1 significant digit ([`LatencyHistogram::small`]). The
    /// intervals' counts add up to `histograms.latency`'s.
    pub latency: LatencyHistogram,
    /// Open model only (empty otherwise): how late each request sent in it left (actual send
    /// − due time, by send time), microseconds, small like `latency`: the intervals' counts
    /// add up to `histograms.send_lag`'s, so a client falling behind late in a long run shows.
    #[serde(default = "LatencyHistogram::small")]
    pub send_lag: LatencyHistogram,
}

impl Default for Interval {
    fn default() -> Self {
        Interval {
            start_s: 0.0,
            duration_s: 0.0,
            requests_done: 0,
            requests_succeeded: 0,
            requests_failed: 0,
            errors: 0,
            bytes_received: 0,
            latency: LatencyHistogram::small(),
            send_lag: LatencyHistogram::small(),
        }
    }
}

impl Interval {
    /// Requests completed per second of this interval (0 for an empty length).
    pub fn requests_per_sec(&self) -> f64 {
        per_sec(self.requests_done as f64, self.duration_s)
    }

    /// Bytes received per second of this interval.
    pub fn bytes_per_sec(&self) -> f64 {
        per_sec(self.bytes_received as f64, self.duration_s)
    }

    /// Latency at quantile `q` (0..=1) of this interval, milliseconds; None when nothing
    /// completed in it.
    pub fn quantile_ms(&self, q: f64) -> Option<f64> {
        (!self.latency.is_empty()).then(|| self.latency.quantile(q) as f64 / 1000.0)
    }

    /// Adds another interval's counts and latencies to this one (its times stay).
    pub fn add(&mut self, o: &Interval) {
        // No `..`: a new count fails to compile until it is added here.
        let Interval {
            start_s: _,
            duration_s: _,
            requests_done,
            requests_succeeded,
            requests_failed,
            errors,
            bytes_received,
            latency,
            send_lag,
        } = o;
        self.requests_done += requests_done;
        self.requests_succeeded += requests_succeeded;
        self.requests_failed += requests_failed;
        self.errors += errors;
        self.bytes_received += bytes_received;
        self.latency.merge(latency);
        self.send_lag.merge(send_lag);
    }
}

fn per_sec(n: f64, secs: f64) -> f64 {
    if secs > 0.0 {
        n / secs
    } else {
        0.0
    }
}

/// Adds `from` to `into` interval by interval (parts that started together line up by
/// index); the result is as long as the longer, and an interval's length the longer of the
/// two (a part that ended earlier has a shorter last interval).
pub fn merge_series(into: &mut Vec<Interval>, from: &[Interval]) {
    for (i, o) in from.iter().enumerate() {
        match into.get_mut(i) {
            Some(mine) => {
                mine.add(o);
                mine.duration_s = mine.duration_s.max(o.duration_s);
            }
            None => into.push(o.clone()),
        }
    }
}

/// Makes the intervals `factor` times wider: each group of `factor` consecutive ones becomes
/// one (counts added, histograms merged). Times are left for [`finish_series`] to set.
pub fn widen(intervals: &mut Vec<Interval>, factor: usize) {
    if factor <= 1 {
        return;
    }
    let old = std::mem::take(intervals);
    for (i, iv) in old.into_iter().enumerate() {
        if i % factor == 0 {
            intervals.push(iv);
        } else if let Some(last) = intervals.last_mut() {
            last.add(&iv);
        }
    }
}

/// Gives a series its final shape for a measured length of `measured` at `width`: widened
/// (doubling `width`) until it holds at most [`MAX_INTERVALS`] intervals, then exactly
/// `ceil(measured / width)` of them (at least one; empty ones where nothing happened, and
/// anything recorded past the end counted in the last), each with its start `i·width` and
/// length (the last one up to the end). Returns the width used.
pub fn finish_series(
    intervals: &mut Vec<Interval>,
    width: Duration,
    measured: Duration,
) -> Duration {
    let mut width = width.max(Duration::from_nanos(1));
    let count = |w: Duration| (measured.as_nanos().div_ceil(w.as_nanos()) as usize).max(1);
    while count(width) > MAX_INTERVALS || intervals.len() > MAX_INTERVALS {
        widen(intervals, 2);
        width = width.saturating_mul(2);
    }
    let n = count(width);
    if intervals.len() > n {
        let tail: Vec<Interval> = intervals.drain(n..).collect();
        for t in &tail {
            intervals[n - 1].add(t);
        }
    }
    intervals.resize_with(n, Interval::default);
    let w = width.as_secs_f64();
    for (i, iv) in intervals.iter_mut().enumerate() {
        iv.start_s = i as f64 * w;
        iv.duration_s = w;
    }
    if let Some(last) = intervals.last_mut() {
        let before = width.saturating_mul(n as u32 - 1);
        last.duration_s = measured.saturating_sub(before).as_secs_f64();
    }
    width
}

#[cfg(test)]
mod tests {
    use super::*;

    fn interval(done: u64, latency_us: &[u64]) -> Interval {
        let mut iv = Interval {
            requests_done: done,
            requests_succeeded: done,
            requests_failed: 1,
            errors: 2,
            bytes_received: 100 * done,
            ..Default::default()
        };
        for us in latency_us {
            iv.latency.record_micros(*us);
        }
        iv
    }

    #[test]
    fn series_merge_index_wise_to_the_longer() {
        let mut a = vec![interval(1, &[10]), interval(2, &[20, 30])];
        a[1].duration_s = 0.5;
        let mut b = vec![interval(4, &[40]), interval(8, &[50]), interval(16, &[60])];
        b[1].duration_s = 1.0;
        merge_series(&mut a, &b);
        let done: Vec<u64> = a.iter().map(|i| i.requests_done).collect();
        assert_eq!(done, [5, 10, 16]);
        let counts: Vec<u64> = a.iter().map(|i| i.latency.len()).collect();
        assert_eq!(counts, [2, 3, 1]);
        assert_eq!(a[1].duration_s, 1.0);
        assert_eq!(
            (a[0].requests_failed, a[0].errors, a[0].bytes_received),
            (2, 4, 500)
        );
    }

    #[test]
    fn widening_adds_groups_and_finishing_folds_the_tail() {
        let mut s: Vec<Interval> = (1..=5).map(|n| interval(n, &[n * 100])).collect();
        widen(&mut s, 2);
        let done: Vec<u64> = s.iter().map(|i| i.requests_done).collect();
        assert_eq!(done, [3, 7, 5]);
        // 2.5 s at 1 s: three intervals, the last half as long; a fourth (completions just
        // after the end) folds into the third.
        let mut s: Vec<Interval> = (1..=4).map(|n| interval(n, &[n])).collect();
        let w = finish_series(&mut s, Duration::from_secs(1), Duration::from_millis(2500));
        assert_eq!(w, Duration::from_secs(1));
        let shape: Vec<(f64, f64, u64)> = s
            .iter()
            .map(|i| (i.start_s, i.duration_s, i.requests_done))
            .collect();
        assert_eq!(shape, [(0.0, 1.0, 1), (1.0, 1.0, 2), (2.0, 0.5, 7)]);
        assert_eq!(s[2].latency.len(), 2);
        // Nothing recorded in the later part: empty intervals up to the end.
        let mut s = vec![interval(3, &[5])];
        finish_series(&mut s, Duration::from_secs(1), Duration::from_secs(3));
        let done: Vec<u64> = s.iter().map(|i| i.requests_done).collect();
        assert_eq!(done, [3, 0, 0]);
        assert_eq!(s[2].requests_per_sec(), 0.0);
        assert_eq!(s[2].quantile_ms(0.5), None);
    }

    /// `--interval 1ms -D 1h`: 3.6 million intervals asked, at most MAX_INTERVALS kept, at a
    /// width that is the asked one doubled, with nothing lost.
    #[test]
    fn finishing_caps_the_count_by_doubling_the_width() {
        let mut s: Vec<Interval> = (0..3000).map(|_| interval(1, &[7])).collect();
        let w = finish_series(&mut s, Duration::from_millis(1), Duration::from_secs(3600));
        assert_eq!(w, Duration::from_millis(512));
        assert_eq!(s.len(), 7032);
        assert!(s.len() <= MAX_INTERVALS);
        assert_eq!(s.iter().map(|i| i.requests_done).sum::<u64>(), 3000);
        assert_eq!(s.iter().map(|i| i.latency.len()).sum::<u64>(), 3000);
        assert_eq!(s[1].start_s, 0.512);
    }
}
