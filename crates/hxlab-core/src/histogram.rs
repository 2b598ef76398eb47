//! Latency histograms: HDR histograms in microseconds that serialise (HdrHistogram V2,
//! deflate-free, base64) into a `RunResult` and merge exactly across threads, processes and
//! machines. Memory is fixed by the range and precision, never by the number of samples.

use base64::Engine;
use hdrhistogram::serialization::{Deserializer, Serializer, V2Serializer};
use hdrhistogram::Histogram;
use serde::{
    Deserialize, Deserializer as SerdeDeserializer, Serialize, Serializer as SerdeSerializer,
};
use std::time::Duration;

/// Highest value recorded, in microseconds (one hour); larger values are clamped to it.
pub const MAX_MICROS: u64 = 3_600_000_000;

/// A histogram of durations in microseconds, 3 significant digits.
#[derive(Clone, Debug)]
pub struct LatencyHistogram {
    inner: Histogram<u64>,
}

impl Default for LatencyHistogram {
    fn default() -> Self {
        Self::new()
    }
}

/// Summary figures of a histogram, in microseconds.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Percentiles {
    /// Number of samples.
    pub count: u64,
    /// Smallest sample.
    pub min: u64,
    /// Arithmetic mean.
    pub mean: f64,
    /// Standard deviation.
    pub stdev: f64,
    /// Median.
    pub p50: u64,
    /// 90th percentile.
    pub p90: u64,
    /// 99th percentile.
    pub p99: u64,
    /// 99.9th percentile.
    pub p999: u64,
    /// Largest sample.
    pub max: u64,
}

impl LatencyHistogram {
    /// An empty histogram covering 1 µs to one hour at 3 significant digits.
    pub fn new() -> Self {
        // Bounds are constants that hdrhistogram accepts, so this cannot fail.
        let inner = Histogram::new_with_bounds(1, MAX_MICROS, 3).expect("valid histogram bounds");
        Self { inner }
    }

    /// Records one duration (clamped into the histogram's range).
    pub fn record(&mut self, d: Duration) {
        self.record_micros(d.as_micros().min(MAX_MICROS as u128) as u64);
    }

    /// Records one value in microseconds (clamped into the histogram's range).
    pub fn record_micros(&mut self, us: u64) {
        self.inner.saturating_record(us.clamp(1, MAX_MICROS));
    }

    /// Records `n` samples of one value in microseconds (clamped into the histogram's range).
    pub fn record_n_micros(&mut self, us: u64, n: u64) {
        if n > 0 {
            let _ = self.inner.record_n(us.clamp(1, MAX_MICROS), n);
        }
    }

    /// Records `value` and back-fills the samples a stalled closed loop would have missed,
    /// for a fixed expected interval between samples (coordinated-omission correction).
    pub fn record_corrected_micros(&mut self, us: u64, expected_interval_us: u64) {
        let us = us.clamp(1, MAX_MICROS);
        let _ = self.inner.record_correct(us, expected_interval_us);
    }

    /// Adds every sample of `other` to this histogram; exact, order-independent.
    pub fn merge(&mut self, other: &LatencyHistogram) {
        // Same bounds on both sides, so add cannot fail; saturate defensively all the same.
        let _ = self.inner.add(&other.inner);
    }

    /// Number of samples.
    pub fn len(&self) -> u64 {
        self.inner.len()
    }

    /// True when no sample was recorded.
    pub fn is_empty(&self) -> bool {
        self.inner.is_empty()
    }

    /// The value at quantile `q` (0..=1) in microseconds; 0 when empty.
    pub fn quantile(&self, q: f64) -> u64 {
        if self.inner.is_empty() {
            0
        } else {
            self.inner.value_at_quantile(q)
        }
    }

    /// Summary figures in microseconds.
    pub fn percentiles(&self) -> Percentiles {
        if self.inner.is_empty() {
            return Percentiles::default();
        }
        let h = &self.inner;
        Percentiles {
            count: h.len(),
            min: h.min(),
            mean: h.mean(),
            stdev: h.stdev(),
            p50: h.value_at_quantile(0.5),
            p90: h.value_at_quantile(0.9),
            p99: h.value_at_quantile(0.99),
            p999: h.value_at_quantile(0.999),
            max: h.max(),
        }
    }

    /// The underlying HDR histogram, for iteration.
    pub fn raw(&self) -> &Histogram<u64> {
        &self.inner
    }

    /// Serialises as HdrHistogram V2 (uncompressed), base64-encoded.
    pub fn to_base64(&self) -> String {
        let mut buf = Vec::new();
        // Writing into a Vec cannot fail for a histogram of valid bounds.
        let _ = V2Serializer::new().serialize(&self.inner, &mut buf);
        base64::engine::general_purpose::STANDARD.encode(buf)
    }

    /// Reads a histogram written by [`LatencyHistogram::to_base64`] (or any V2 writer).
    pub fn from_base64(text: &str) -> Result<Self, String> {
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(text.trim())
            .map_err(|e| format!("histogram is not base64: {e}"))?;
        check_v2(&bytes)?;
        let decoded: Histogram<u64> = Deserializer::new()
            .deserialize(&mut bytes.as_slice())
            .map_err(|e| format!("histogram is not HdrHistogram V2: {e:?}"))?;
        let mut h = Self::new();
        h.inner
            .add(&decoded)
            .map_err(|e| format!("histogram out of range: {e:?}"))?;
        Ok(h)
    }
}

/// Checks an HdrHistogram V2 encoding before hdrhistogram reads it, refusing what would make
/// it misbehave on hostile input (found by fuzzing, crates/hxlab-core via fuzz/): a header
/// that declares more payload than there is (it allocates the declared size first: 40 bytes
/// asked for 2.9 GB), the zlib-compressed form (a decompression bomb), more than 5
/// significant digits, a zero-run count of −2⁶³ (negating it overflows), and counts summing
/// past 2⁵³ (its quantile sums overflow).
fn check_v2(bytes: &[u8]) -> Result<(), String> {
    const V2_COOKIE: u32 = 0x1c84_9313;
    let bad = |why: &str| Err(format!("histogram is not HdrHistogram V2: {why}"));
    if bytes.len() < 40 {
        return bad("shorter than its header");
    }
    let u32_at =
        |i: usize| u32::from_be_bytes([bytes[i], bytes[i + 1], bytes[i + 2], bytes[i + 3]]);
    if u32_at(0) != V2_COOKIE {
        return bad("not the uncompressed V2 cookie");
    }
    if u32_at(4) as usize != bytes.len() - 40 {
        return bad("payload length disagrees with the data");
    }
    if u32_at(12) > 5 {
        return bad("more than 5 significant digits");
    }
    // Counts: zig-zag LEB128, at most 9 bytes (the 9th carries 8 bits). Their sum must stay
    // far from u64::MAX, or hdrhistogram's own sums overflow (a quantile of counts near 2⁶⁴).
    const MAX_TOTAL: u64 = 1 << 53;
    let mut total: u64 = 0;
    let mut i = 40;
    while i < bytes.len() {
        let mut n: u64 = 0;
        let mut shift = 0;
        loop {
            let Some(&b) = bytes.get(i) else {
                return bad("a count is cut short");
            };
            i += 1;
            if shift == 56 {
                n |= u64::from(b) << 56;
                break;
            }
            n |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                break;
            }
            shift += 7;
        }
        let v = ((n >> 1) as i64) ^ -((n & 1) as i64);
        if v == i64::MIN {
            return bad("a zero run out of range");
        }
        if v > 0 {
            total = total.saturating_add(v as u64);
            if total > MAX_TOTAL {
                return bad("more samples than any run records");
            }
        }
    }
    Ok(())
}

impl Serialize for LatencyHistogram {
    fn serialize<S: SerdeSerializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_base64())
    }
}

impl<'de> Deserialize<'de> for LatencyHistogram {
    fn deserialize<D: SerdeDeserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        Self::from_base64(&text).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {

    /// Inputs fuzzing found (fuzz/regressions/histogram): a 40-byte header declaring a
    /// 2.9 GB payload (hdrhistogram allocated it), and a zero run of −2⁶³ (negation
    /// overflow). Both are one error, not an allocation or a panic.
    #[test]
    fn hostile_encodings_are_refused() {
        for text in [
            "HISTE7AAAAAAAAAAAAAAAwAAAAAAAAABAAAAANaTpAA/8AAAAAAAAA==",
            "HISTEwAAAAkAAAAAAAAAAwAAAAAAAAABAAAAANaTpAA/8AAAAAAAAP///////////w==",
            // Counts near 2^64: hdrhistogram's quantile sum overflowed (a 10-minute run).
            "HISTEwAAAJMAAAAAAAAAAwAAAAAAQAABACUA/dUApAA/8AAAAAAAAAAhOzMzMzMzMzMzMzIzMwAAAAAAAAMAAAAAAAAAQP0AJQAB1QAApAA/8AAAAAAAAAD6///yMDU3AACSioqKioqKioqKioqKioqKioqKioqKAAAAEwAAAIqKioqKioqKioqKioqKioqKioqKiooAAAATAAAAAAAAAAMAAAAAAEAAAQAlADMpMzPOPTMzzMzTAD//AA==",
        ] {
            let e = LatencyHistogram::from_base64(text).unwrap_err();
            assert!(e.contains("not HdrHistogram V2"), "{e}");
        }
        // What we write still reads back.
        let mut h = LatencyHistogram::new();
        h.record_micros(1234);
        h.record_micros(3_000_000);
        let back = LatencyHistogram::from_base64(&h.to_base64()).unwrap();
        assert_eq!(back.len(), 2);
    }

    use super::*;

    #[test]
    fn roundtrip_and_merge_are_exact() {
        let mut a = LatencyHistogram::new();
        let mut b = LatencyHistogram::new();
        for i in 1..=1000u64 {
            a.record_micros(i * 7);
            b.record_micros(i * 13);
        }
        let a2 = LatencyHistogram::from_base64(&a.to_base64()).unwrap();
        assert_eq!(a.percentiles(), a2.percentiles());
        let mut m = a2.clone();
        m.merge(&b);
        assert_eq!(m.len(), 2000);
        assert_eq!(m.raw().max(), b.raw().max());
        assert!(LatencyHistogram::from_base64("not base64!").is_err());
        let mut n = LatencyHistogram::new();
        n.record_n_micros(250, 4);
        n.record_n_micros(9, 0);
        assert_eq!((n.len(), n.quantile(1.0)), (4, 250));
    }
}
