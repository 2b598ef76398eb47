//! mahimahi delivery traces (`hxlab link --down-trace FILE`): `hxlab_link::Trace::parse`.
//!
//! Input: any bytes, read as UTF-8 (lossily). Checks: no panic; an accepted trace has at
//! least one opportunity and a positive period; the scheduling queries agree with each
//! other: for times up to ten periods past the start, the opportunity
//! `first_opportunity_at_or_after(t)` is at or after `t`, and the one before it is before `t`.
#![no_main]
use hxlab_link::Trace;
use libfuzzer_sys::fuzz_target;
use std::time::Duration;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let Ok(trace) = Trace::parse(&text, "fuzz.trace") else {
        return;
    };
    assert!(trace.opportunities() > 0);
    let period = trace.period();
    assert!(period > Duration::ZERO);
    assert!(trace.average_bits_per_sec() > 0.0);
    // Probe times derived from the input bytes, within ten periods.
    for chunk in data.chunks(4).take(16) {
        let mut b = [0u8; 4];
        b[..chunk.len()].copy_from_slice(chunk);
        let us = u64::from(u32::from_le_bytes(b)) % (period.as_micros() as u64 * 10 + 1);
        let t = Duration::from_micros(us);
        let k = trace.first_opportunity_at_or_after(t);
        assert!(trace.opportunity_time(k) >= t, "opportunity {k} before {t:?}");
        if k > 0 {
            assert!(trace.opportunity_time(k - 1) < t, "opportunity {} not before {t:?}", k - 1);
        }
    }
});
