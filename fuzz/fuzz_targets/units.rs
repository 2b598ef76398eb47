//! Units as users write them (command line, experiment files): `hxlab_core::parse_size`,
//! `parse_duration`, `parse_rate` and `hxlab_core::shard::parse_instant` (`--start-at`).
//!
//! Input: any bytes, read as UTF-8 (lossily, so every input reaches the parsers).
//! Checks: no panic; results in the documented ranges (durations at most a year, rates
//! 1 bit/s to 10 Tbit/s, instants from 1970 to the end of year 9999); round trips: a parsed size or
//! rate written back as a plain number parses to the same value, and an instant formatted
//! by `format_instant` parses back to within half a millisecond.
#![no_main]
use hxlab_core::shard::{format_instant, parse_instant};
use hxlab_core::{parse_duration, parse_rate, parse_size};
use libfuzzer_sys::fuzz_target;
use std::time::Duration;

fuzz_target!(|data: &[u8]| {
    let s = String::from_utf8_lossy(data);
    let s = s.as_ref();

    if let Ok(n) = parse_size(s) {
        assert!(n <= u64::MAX / 2);
        // Exactly representable sizes survive being written as bytes.
        if n < 1 << 53 {
            assert_eq!(parse_size(&n.to_string()), Ok(n));
            assert_eq!(parse_size(&format!("{n}B")), Ok(n));
        }
    }
    if let Ok(d) = parse_duration(s) {
        assert!(d <= Duration::from_secs(366 * 86_400));
        // Written back in microseconds it parses to within a microsecond (float rounding).
        let us = d.as_micros();
        let back = parse_duration(&format!("{us}us")).expect("a duration in us");
        assert!(back.as_micros().abs_diff(us) <= 1, "{d:?} -> {us}us -> {back:?}");
    }
    if let Ok(r) = parse_rate(s) {
        assert!((1..=10_000_000_000_000).contains(&r));
        assert_eq!(parse_rate(&format!("{r}bit")), Ok(r));
    }
    if let Ok(t) = parse_instant(s) {
        // RFC 3339 with a negative offset may land up to a day past year 9999.
        assert!(t.is_finite() && (0.0..253_402_387_200.0).contains(&t), "{t}");
        // `format_instant` writes milliseconds, so a time parses back to within 0.5 ms
        // (years up to 9999: the last second rounds into year 10000).
        if t < 253_402_300_799.0 {
            let text = format_instant(t);
            let back = parse_instant(&text).unwrap_or_else(|e| panic!("{text}: {e}"));
            assert!((back - t).abs() <= 0.0005 + t * f64::EPSILON, "{t} -> {text} -> {back}");
        }
    }
});
