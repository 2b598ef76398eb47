//! A worker's time series while it runs: the recorder asks for the interval of an instant
//! and counts into it. Pure logic on instants given to it (no clock read here), so tests
//! drive it on made-up times.
//!
//! Interval `i` covers `[origin + i·w, origin + (i+1)·w)`; an instant before `origin` counts
//! in interval 0. Finding the interval is a comparison with the current one's bounds on the
//! hot path; a new interval (the only allocation) is found by one division. A series never
//! holds more than [`MAX_INTERVALS`]: past that the width doubles and pairs are added up
//! (exact), which only a run bounded by `-n` can need — a `-D` run starts at a width that
//! fits ([`width_for`]).

use hxlab_core::interval::{widen, MAX_INTERVALS};
use hxlab_core::result::Interval;
use std::time::{Duration, Instant};

/// The intervals of one worker.
#[derive(Debug)]
pub struct Series {
    origin: Instant,
    width: Duration,
    intervals: Vec<Interval>,
    /// The interval the last instant fell in, and its bounds (empty before the first).
    current: usize,
    current_start: Instant,
    current_end: Instant,
}

/// The width a run of `duration` starts at when asked for `asked`: doubled until the run
/// needs at most [`MAX_INTERVALS`] intervals (so every part of a `-D` run agrees on it).
pub fn width_for(asked: Duration, duration: Option<Duration>) -> Duration {
    let mut width = asked.max(Duration::from_nanos(1));
    if let Some(d) = duration {
        while d.as_nanos().div_ceil(width.as_nanos()) > MAX_INTERVALS as u128 {
            width = width.saturating_mul(2);
        }
    }
    width
}

impl Series {
    /// An empty series of intervals of `width` from `origin` (the measured start).
    pub fn new(origin: Instant, width: Duration) -> Series {
        Series {
            origin,
            width: width.max(Duration::from_nanos(1)),
            intervals: Vec::new(),
            current: 0,
            current_start: origin,
            current_end: origin,
        }
    }

    /// The interval `t` falls in (created, with any empty ones before it, if new).
    #[inline]
    pub fn at(&mut self, t: Instant) -> &mut Interval {
        if t >= self.current_start && t < self.current_end {
            return &mut self.intervals[self.current];
        }
        self.locate(t)
    }

    #[cold]
    fn locate(&mut self, t: Instant) -> &mut Interval {
        let offset = t.saturating_duration_since(self.origin).as_nanos();
        let mut index = offset / self.width.as_nanos();
        while index >= MAX_INTERVALS as u128 {
            widen(&mut self.intervals, 2);
            self.width = self.width.saturating_mul(2);
            index = offset / self.width.as_nanos();
        }
        let index = index as usize;
        if self.intervals.len() <= index {
            self.intervals.resize_with(index + 1, Interval::default);
        }
        self.current = index;
        self.current_start = self.origin + self.width.saturating_mul(index as u32);
        self.current_end = self.current_start + self.width;
        &mut self.intervals[index]
    }

    /// The current width (the one asked for, or wider after doubling).
    pub fn width(&self) -> Duration {
        self.width
    }

    /// The intervals so far (times not set yet: see `hxlab_core::interval::finish_series`).
    pub fn intervals(&self) -> &[Interval] {
        &self.intervals
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn done_per_interval(s: &Series) -> Vec<u64> {
        s.intervals().iter().map(|i| i.requests_done).collect()
    }

    /// A completion at t goes into floor(t / w), boundaries included in the later one,
    /// whatever order the instants come in; before the origin is interval 0.
    #[test]
    fn a_completion_at_t_counts_in_floor_t_over_w() {
        let origin = Instant::now() + Duration::from_secs(10);
        let w = Duration::from_millis(250);
        let mut s = Series::new(origin, w);
        let at = |ms: u64| origin + Duration::from_millis(ms);
        for ms in [0, 249, 250, 251, 999, 1000, 100, 1749] {
            s.at(at(ms)).requests_done += 1;
        }
        s.at(origin - Duration::from_secs(1)).requests_done += 1;
        s.at(at(10) + Duration::from_nanos(1))
            .latency
            .record_micros(5);
        assert_eq!(done_per_interval(&s), [4, 2, 0, 1, 1, 0, 1]);
        assert_eq!(s.intervals()[0].latency.len(), 1);
        assert_eq!(s.width(), w);
        // One nanosecond before a boundary stays in the earlier interval.
        s.at(at(500) - Duration::from_nanos(1)).requests_done += 1;
        assert_eq!(done_per_interval(&s)[1], 3);
    }

    /// A run bounded by -n that outlives MAX_INTERVALS widths: the width doubles, nothing
    /// is lost and the bucketing stays floor(t / w) at the new width.
    #[test]
    fn past_the_cap_the_width_doubles() {
        let origin = Instant::now();
        let w = Duration::from_millis(1);
        let mut s = Series::new(origin, w);
        s.at(origin).requests_done += 1;
        s.at(origin + Duration::from_millis(3)).requests_done += 1;
        let late = origin + Duration::from_millis(MAX_INTERVALS as u64 * 3);
        s.at(late).requests_done += 1;
        assert_eq!(s.width(), Duration::from_millis(4));
        assert!(s.intervals().len() <= MAX_INTERVALS);
        assert_eq!(s.intervals()[0].requests_done, 2);
        assert_eq!(s.intervals().len(), MAX_INTERVALS * 3 / 4 + 1);
        assert_eq!(
            s.intervals().iter().map(|i| i.requests_done).sum::<u64>(),
            3
        );
    }

    #[test]
    fn a_duration_bounded_run_starts_at_a_width_that_fits() {
        let s = Duration::from_secs;
        assert_eq!(width_for(s(1), Some(s(3600))), s(1));
        assert_eq!(width_for(s(1), None), s(1));
        assert_eq!(
            width_for(Duration::from_millis(1), Some(s(3600))),
            Duration::from_millis(512)
        );
    }
}
