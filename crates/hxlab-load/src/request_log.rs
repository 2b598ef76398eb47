//! Per-request output beside the counts, as h2load gives it:
//!
//! - `--log-file FILE`: one line per measured request, appended to FILE, with h2load's three
//!   tab-separated columns: the request's start (its send) in microseconds since the Unix
//!   epoch, the HTTP status (`-1` for a request that failed), and the microseconds from the
//!   send to the end of the response (or to the failure). Each worker buffers its lines and
//!   writes whole lines, so with one thread the rows are in order of completion and with
//!   several they may interleave slightly out of order, as h2load's.
//! - `-v`: a line per connection and per request on stderr (h2load prints the frames'
//!   headers; this client never decodes header values, so it prints what it counted).
//!
//! One per worker, inside its recorder; only built when either is asked, so a run without
//! them pays one `Option` test per request.

use crate::plan::Req;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// A worker's per-request output.
#[derive(Debug)]
pub struct RequestLog {
    /// `--log-file`, opened for appending.
    file: Option<BufWriter<File>>,
    /// `-v`: lines on stderr.
    verbose: bool,
    /// The worker's number, in `-v` lines.
    worker: usize,
    /// An instant and the wall-clock microseconds it stands for (instants are monotonic; the
    /// log's start times are wall-clock, as h2load's).
    base: Instant,
    base_unix_us: u64,
}

/// A line of `--log-file`: start (µs since the epoch), status (`-1`: failed), µs to the end.
pub fn log_line(start_unix_us: u64, status: Option<u16>, took: Duration) -> String {
    let status = status.map_or_else(|| "-1".to_string(), |s| s.to_string());
    format!("{start_unix_us}\t{status}\t{}\n", took.as_micros())
}

impl RequestLog {
    /// The output of worker `worker`: lines to `file`, and to stderr when `verbose`; None
    /// when neither is asked.
    pub fn new(file: Option<File>, verbose: bool, worker: usize) -> Option<RequestLog> {
        if file.is_none() && !verbose {
            return None;
        }
        let base_unix_us = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_micros() as u64);
        Some(RequestLog {
            file: file.map(|f| BufWriter::with_capacity(64 * 1024, f)),
            verbose,
            worker,
            base: Instant::now(),
            base_unix_us,
        })
    }

    /// `t` as microseconds since the Unix epoch.
    fn unix_us(&self, t: Instant) -> u64 {
        match t.checked_duration_since(self.base) {
            Some(after) => self.base_unix_us + after.as_micros() as u64,
            None => self
                .base_unix_us
                .saturating_sub(self.base.duration_since(t).as_micros() as u64),
        }
    }

    /// Seconds since the worker began, for `-v` lines.
    fn at(&self, t: Instant) -> f64 {
        t.saturating_duration_since(self.base).as_secs_f64()
    }

    /// Writes one line whole (a line never straddles two writes, so workers sharing the
    /// file never split each other's lines); a failed write is dropped, as h2load's.
    fn write(&mut self, line: &str) {
        if let Some(f) = &mut self.file {
            let _ = f.write_all(line.as_bytes());
        }
    }

    /// A measured request was answered with `status` at `done`.
    pub fn response(&mut self, req: &Req, first_byte: Instant, done: Instant, status: u16) {
        let took = done.saturating_duration_since(req.sent);
        if self.file.is_some() {
            let line = log_line(self.unix_us(req.sent), Some(status), took);
            self.write(&line);
        }
        if self.verbose {
            eprintln!(
                "[{:10.6}] worker {} client {}: {status} in {:.3} ms (first byte {:.3} ms)",
                self.at(done),
                self.worker,
                req.client,
                took.as_secs_f64() * 1e3,
                first_byte.saturating_duration_since(req.sent).as_secs_f64() * 1e3
            );
        }
    }

    /// A measured request failed at `now` (`-1` in the log).
    pub fn failed(&mut self, req: &Req, now: Instant, why: &dyn std::fmt::Display) {
        let took = now.saturating_duration_since(req.sent);
        if self.file.is_some() {
            let line = log_line(self.unix_us(req.sent), None, took);
            self.write(&line);
        }
        if self.verbose {
            eprintln!(
                "[{:10.6}] worker {} client {}: failed after {:.3} ms: {why}",
                self.at(now),
                self.worker,
                req.client,
                took.as_secs_f64() * 1e3
            );
        }
    }

    /// Whether `-v` lines are asked for (the caller skips building them otherwise).
    pub fn verbose(&self) -> bool {
        self.verbose
    }

    /// `-v`: a connection is up (or, with `what` saying so, could not be made).
    pub fn connection(&self, what: std::fmt::Arguments<'_>) {
        if self.verbose {
            eprintln!(
                "[{:10.6}] worker {}: {what}",
                self.at(Instant::now()),
                self.worker
            );
        }
    }

    /// Writes out what is buffered (at the end of the worker).
    pub fn flush(&mut self) {
        if let Some(f) = &mut self.file {
            let _ = f.flush();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// h2load's columns: start µs, status or -1, duration µs; tab-separated, one per line.
    #[test]
    fn lines_have_h2loads_three_columns() {
        assert_eq!(
            log_line(
                1_700_000_000_123_456,
                Some(200),
                Duration::from_micros(1234)
            ),
            "1700000000123456\t200\t1234\n"
        );
        assert_eq!(
            log_line(5, None, Duration::from_millis(30)),
            "5\t-1\t30000\n"
        );
    }

    /// Send instants become wall-clock microseconds, before and after the base alike.
    #[test]
    fn instants_map_to_wall_clock_microseconds() {
        let log = RequestLog::new(None, true, 0).expect("verbose");
        let later = log.base + Duration::from_millis(3);
        assert_eq!(log.unix_us(later), log.base_unix_us + 3000);
        let earlier = log.base - Duration::from_millis(2);
        assert_eq!(log.unix_us(earlier), log.base_unix_us - 2000);
        assert!(RequestLog::new(None, false, 0).is_none());
    }
}
