//! mahimahi-format delivery traces: one millisecond timestamp per line, each line one
//! 1500-byte delivery opportunity at that time; the trace repeats with a period equal to its
//! last timestamp (as mahimahi's LinkShell does).

use crate::LinkError;
use std::path::Path;
use std::time::Duration;

/// A parsed trace: sorted opportunity times in milliseconds and the wrap period.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Trace {
    ms: Vec<u64>,
    period_ms: u64,
}

/// Bytes per mahimahi delivery opportunity.
pub const TRACE_OPPORTUNITY_BYTES: usize = 1500;

/// Refuse traces so large they would be a mistake (a day of 1 Gbit/s opportunities is less).
const MAX_LINES: usize = 50_000_000;

impl Trace {
    /// Parses trace text; `origin` names the file in errors ("file:line: reason").
    pub fn parse(text: &str, origin: &str) -> Result<Trace, LinkError> {
        let mut ms = Vec::new();
        for (i, raw) in text.lines().enumerate() {
            let line = raw.trim();
            if line.is_empty() {
                continue;
            }
            let bad = |reason: String| LinkError::Trace(format!("{origin}:{}: {reason}", i + 1));
            let v: u64 = line
                .parse()
                .map_err(|_| bad(format!("{line:?} is not a whole number of milliseconds")))?;
            if let Some(&prev) = ms.last() {
                if v < prev {
                    return Err(bad(format!(
                        "timestamp {v} is smaller than the previous one ({prev})"
                    )));
                }
            }
            if v > 366 * 86_400_000 {
                return Err(bad(format!("timestamp {v} ms is longer than a year")));
            }
            if ms.len() >= MAX_LINES {
                return Err(bad(format!("more than {MAX_LINES} opportunities")));
            }
            ms.push(v);
        }
        let period_ms = match ms.last() {
            None => return Err(LinkError::Trace(format!("{origin}: empty trace (no timestamps)"))),
            Some(0) => {
                return Err(LinkError::Trace(format!(
                    "{origin}: the last timestamp must be above 0 ms (it is the period the trace repeats with)"
                )))
            }
            Some(&p) => p,
        };
        Ok(Trace { ms, period_ms })
    }

    /// Reads and parses a trace file.
    pub fn from_file(path: &Path) -> Result<Trace, LinkError> {
        let text = hxlab_core::read_capped_string(path, hxlab_core::files::cap::TEXT)
            .map_err(|e| LinkError::Trace(format!("{}: {e}", path.display())))?;
        Trace::parse(&text, &path.display().to_string())
    }

    /// Opportunities per period.
    pub fn opportunities(&self) -> usize {
        self.ms.len()
    }

    /// The period after which the trace repeats.
    pub fn period(&self) -> Duration {
        Duration::from_millis(self.period_ms)
    }

    /// Average capacity in bits per second (1500-byte opportunities over the period).
    pub fn average_bits_per_sec(&self) -> f64 {
        self.ms.len() as f64 * TRACE_OPPORTUNITY_BYTES as f64 * 8.0
            / (self.period_ms as f64 / 1000.0)
    }

    /// Time of the `k`-th opportunity counted from the start, wrapping around.
    pub fn opportunity_time(&self, k: u64) -> Duration {
        let n = self.ms.len() as u64;
        let cycle = k / n;
        let idx = (k % n) as usize;
        Duration::from_millis(cycle * self.period_ms + self.ms[idx])
    }

    /// Index of the first opportunity at or after `t`.
    pub fn first_opportunity_at_or_after(&self, t: Duration) -> u64 {
        let n = self.ms.len() as u64;
        // Opportunities are on whole milliseconds: round up.
        let t_ms = t.as_nanos().div_ceil(1_000_000) as u64;
        let cycle = t_ms / self.period_ms;
        let within = t_ms % self.period_ms;
        // A timestamp equal to the period belongs to the previous cycle's end, which is the
        // same instant as this cycle's start, so searching from `within` is right either way.
        let idx = self.ms.partition_point(|&m| m < within) as u64;
        let k = cycle * n + idx;
        // When `within` is 0 an opportunity at the end of the previous cycle may coincide.
        if within == 0 && cycle > 0 && self.ms[self.ms.len() - 1] == self.period_ms {
            let first_at_end = self.ms.partition_point(|&m| m < self.period_ms) as u64;
            return (cycle - 1) * n + first_at_end;
        }
        k
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_wraps() {
        let t = Trace::parse("1\n1\n5\n10\n", "t").unwrap();
        assert_eq!(t.opportunities(), 4);
        assert_eq!(t.opportunity_time(0), Duration::from_millis(1));
        assert_eq!(t.opportunity_time(3), Duration::from_millis(10));
        assert_eq!(t.opportunity_time(4), Duration::from_millis(11));
        assert_eq!(t.opportunity_time(7), Duration::from_millis(20));
        assert_eq!(t.first_opportunity_at_or_after(Duration::ZERO), 0);
        assert_eq!(t.first_opportunity_at_or_after(Duration::from_millis(2)), 2);
        assert_eq!(
            t.first_opportunity_at_or_after(Duration::from_micros(5500)),
            3
        );
        assert_eq!(
            t.first_opportunity_at_or_after(Duration::from_millis(12)),
            6
        );
        // 20 ms is both the end of cycle 1 (k=7) and the start of cycle 2.
        assert_eq!(
            t.first_opportunity_at_or_after(Duration::from_millis(20)),
            7
        );
    }

    #[test]
    fn malformed_traces_name_file_and_line() {
        let e = Trace::parse("1\n2\nx3\n", "up.trace")
            .unwrap_err()
            .to_string();
        assert!(e.contains("up.trace:3"), "{e}");
        let e = Trace::parse("5\n4\n", "f").unwrap_err().to_string();
        assert!(e.contains("f:2"), "{e}");
        let e = Trace::parse("-1\n", "f").unwrap_err().to_string();
        assert!(e.contains("f:1"), "{e}");
        assert!(Trace::parse("\n\n", "f").is_err());
        assert!(Trace::parse("0\n0\n", "f").is_err());
    }
}
