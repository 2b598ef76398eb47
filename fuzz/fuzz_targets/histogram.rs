//! HdrHistogram V2 base64 text (the histograms inside RunResult files):
//! `hxlab_core::LatencyHistogram::from_base64` on any text, including bytes that are valid
//! base64 of a crafted V2 header (input bit: encode the raw bytes as base64 first).
//!
//! Checks: no panic (nor an allocation blow-up) reading it; an accepted histogram's
//! percentiles are ordered, and its base64 form reads back to the same counts.
#![no_main]
use hxlab_core::LatencyHistogram;
use libfuzzer_sys::fuzz_target;

fn base64(bytes: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut s = String::new();
    for c in bytes.chunks(3) {
        let n = (u32::from(c[0]) << 16)
            | (u32::from(*c.get(1).unwrap_or(&0)) << 8)
            | u32::from(*c.get(2).unwrap_or(&0));
        for i in 0..4 {
            if i <= c.len() {
                s.push(A[(n >> (18 - 6 * i)) as usize & 63] as char);
            } else {
                s.push('=');
            }
        }
    }
    s
}

fuzz_target!(|data: &[u8]| {
    let Some((&sel, rest)) = data.split_first() else {
        return;
    };
    // Raw bytes reach the V2 decoder only through valid base64: encode them half the time.
    let text = if sel & 1 == 0 {
        base64(rest)
    } else {
        String::from_utf8_lossy(rest).into_owned()
    };
    let Ok(h) = LatencyHistogram::from_base64(&text) else {
        return;
    };
    let p = h.percentiles();
    if !h.is_empty() {
        assert!(p.min <= p.p50 && p.p50 <= p.p90 && p.p90 <= p.p99 && p.p99 <= p.max);
    }
    let back = LatencyHistogram::from_base64(&h.to_base64()).expect("our own encoding");
    assert_eq!(back.len(), h.len());
    assert_eq!(back.percentiles().max, p.max);
});
