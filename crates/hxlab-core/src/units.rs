//! Units as users write them: `5k`, `10KiB`, `1MiB`, `20ms`, `1.5s`, `10mbit`.
//!
//! Decimal prefixes (k, M, G) are powers of 1000 and binary ones (Ki, Mi, Gi) of 1024, as in
//! the SI/IEC standards; a bare number is bytes, milliseconds-free seconds are not guessed:
//! durations need a unit except zero.

use std::time::Duration;

/// A value a user wrote that hxlab cannot read, with the reason in one line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{what} {input:?}: {reason}")]
pub struct UnitError {
    /// The kind of value: "size", "duration", "rate".
    pub what: &'static str,
    /// What the user wrote.
    pub input: String,
    /// Why it was refused.
    pub reason: String,
}

fn err(what: &'static str, input: &str, reason: impl Into<String>) -> UnitError {
    UnitError {
        what,
        input: input.to_string(),
        reason: reason.into(),
    }
}

/// Splits "12.5KiB" into (12.5, "KiB"); refuses empty, negative and non-finite numbers.
fn split_number<'a>(what: &'static str, input: &'a str) -> Result<(f64, &'a str), UnitError> {
    let s = input.trim();
    let end = s
        .char_indices()
        .find(|(_, c)| !(c.is_ascii_digit() || *c == '.'))
        .map(|(i, _)| i)
        .unwrap_or(s.len());
    let (num, unit) = s.split_at(end);
    if num.is_empty() {
        if s.starts_with('-') {
            return Err(err(what, input, "must not be negative"));
        }
        return Err(err(what, input, "expected a number, e.g. 10, 2.5"));
    }
    let value: f64 = num.parse().map_err(|_| err(what, input, "not a number"))?;
    if !value.is_finite() {
        return Err(err(what, input, "not a finite number"));
    }
    Ok((value, unit.trim()))
}

/// Parses a byte size: `100`, `5k` (5000), `10KiB` (10240), `1M`, `1MiB`, `2G`, `1.5MB`.
pub fn parse_size(input: &str) -> Result<u64, UnitError> {
    // Plain digits (the common case, e.g. every `/bytes/N` request): read exactly as the
    // general path would (up to 15 digits, every value is exact in an f64), without it.
    if (1..=15).contains(&input.len()) && input.bytes().all(|b| b.is_ascii_digit()) {
        // At most 15 digits: no overflow.
        return Ok(input
            .bytes()
            .fold(0u64, |n, d| n * 10 + u64::from(d - b'0')));
    }
    let (value, unit) = split_number("size", input)?;
    let mult: f64 = match unit {
        "" | "B" | "b" => 1.0,
        "k" | "K" | "kB" | "KB" => 1e3,
        "Ki" | "KiB" => 1024.0,
        "M" | "MB" | "m" => 1e6,
        "Mi" | "MiB" => 1048576.0,
        "G" | "GB" | "g" => 1e9,
        "Gi" | "GiB" => 1073741824.0,
        "T" | "TB" => 1e12,
        "Ti" | "TiB" => 1099511627776.0,
        _ => {
            return Err(err(
                "size",
                input,
                "unknown unit; use B, k, KiB, M, MiB, G, GiB, T, TiB",
            ))
        }
    };
    let bytes = (value * mult).floor();
    if bytes > u64::MAX as f64 / 2.0 {
        return Err(err("size", input, "too large"));
    }
    Ok(bytes as u64)
}

/// Parses a duration: `250us`, `20ms`, `1.5s`, `2m`, `1h`; `0` alone is accepted.
pub fn parse_duration(input: &str) -> Result<Duration, UnitError> {
    let (value, unit) = split_number("duration", input)?;
    let secs = match unit {
        "ns" => value / 1e9,
        "us" | "µs" => value / 1e6,
        "ms" => value / 1e3,
        "s" | "sec" => value,
        "m" | "min" => value * 60.0,
        "h" => value * 3600.0,
        "" if value == 0.0 => 0.0,
        "" => return Err(err("duration", input, "needs a unit: us, ms, s, m, h")),
        _ => return Err(err("duration", input, "unknown unit; use us, ms, s, m, h")),
    };
    if secs > 366.0 * 86400.0 {
        return Err(err("duration", input, "longer than a year"));
    }
    Ok(Duration::from_secs_f64(secs))
}

/// Parses a bit rate into bits per second: `10mbit`, `1.5Mbps`, `800kbit`, `1gbit`, `5000bps`.
/// `kbit`/`mbit`/`gbit` are decimal (1000); `kibit`/`mibit` binary (1024), as tc writes them.
pub fn parse_rate(input: &str) -> Result<u64, UnitError> {
    let (value, unit) = split_number("rate", input)?;
    let mult: f64 = match unit.to_ascii_lowercase().as_str() {
        "bit" | "bps" | "b/s" => 1.0,
        "kbit" | "kbps" | "kb/s" => 1e3,
        "mbit" | "mbps" | "mb/s" => 1e6,
        "gbit" | "gbps" | "gb/s" => 1e9,
        "kibit" => 1024.0,
        "mibit" => 1048576.0,
        "gibit" => 1073741824.0,
        "" => return Err(err("rate", input, "needs a unit: bit, kbit, mbit, gbit")),
        _ => {
            return Err(err(
                "rate",
                input,
                "unknown unit; use bit, kbit, mbit, gbit, kibit, mibit",
            ))
        }
    };
    let bps = (value * mult).round();
    if bps < 1.0 {
        return Err(err("rate", input, "must be at least 1 bit/s"));
    }
    if bps > 1e13 {
        return Err(err("rate", input, "too large"));
    }
    Ok(bps as u64)
}

/// Formats a byte count for humans: `512 B`, `5.00 KiB`, `1.50 MiB`.
pub fn format_bytes(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = bytes as f64;
    let mut i = 0;
    while value >= 1024.0 && i < UNITS.len() - 1 {
        value /= 1024.0;
        i += 1;
    }
    if i == 0 {
        format!("{bytes} B")
    } else {
        format!("{value:.2} {}", UNITS[i])
    }
}

/// Formats a duration for humans with a unit that keeps 3 significant digits.
pub fn format_duration(d: Duration) -> String {
    let us = d.as_secs_f64() * 1e6;
    if us < 1000.0 {
        format!("{us:.0}us")
    } else if us < 1e6 {
        format!("{:.2}ms", us / 1e3)
    } else {
        format!("{:.3}s", us / 1e6)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("100").unwrap(), 100);
        // Plain digits take a shortcut that must read as the general path does.
        for d in ["0", "007", "4096", "999999999999999"] {
            assert_eq!(parse_size(d).unwrap(), d.parse::<u64>().unwrap());
        }
        assert_eq!(
            parse_size("9999999999999999").unwrap(),
            10_000_000_000_000_000
        );
        assert_eq!(parse_size("5k").unwrap(), 5000);
        assert_eq!(parse_size("10KiB").unwrap(), 10240);
        assert_eq!(parse_size("1M").unwrap(), 1_000_000);
        assert_eq!(parse_size("1MiB").unwrap(), 1_048_576);
        assert_eq!(parse_size("0.1MiB").unwrap(), 104_857);
        assert_eq!(parse_size("100G").unwrap(), 100_000_000_000);
        assert!(parse_size("-5").is_err());
        assert!(parse_size("5xb").is_err());
        assert!(parse_size("").is_err());
        assert!(parse_size("1e400").is_err());
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("20ms").unwrap(), Duration::from_millis(20));
        assert_eq!(parse_duration("1.5s").unwrap(), Duration::from_millis(1500));
        assert_eq!(parse_duration("250us").unwrap(), Duration::from_micros(250));
        assert_eq!(parse_duration("0").unwrap(), Duration::ZERO);
        assert!(parse_duration("20").is_err());
        assert!(parse_duration("-1ms").is_err());
        assert!(parse_duration("9999999h").is_err());
    }

    #[test]
    fn rates() {
        assert_eq!(parse_rate("10mbit").unwrap(), 10_000_000);
        assert_eq!(parse_rate("1.5Mbps").unwrap(), 1_500_000);
        assert_eq!(parse_rate("750kbit").unwrap(), 750_000);
        assert_eq!(parse_rate("1kibit").unwrap(), 1024);
        assert!(parse_rate("10").is_err());
        assert!(parse_rate("0mbit").is_err());
    }
}
