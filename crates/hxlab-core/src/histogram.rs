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

/// Significant digits of a [`LatencyHistogram::small`] (a run's time series): a value is
/// known to within 1/16 (6.25 %) of itself, and a histogram holds 16 counts per power of two
/// up to the largest value recorded (about 300 counts, 2.5 KB, for values up to a minute).
pub const SMALL_SIGFIG: u8 = 1;

/// A histogram of durations in microseconds: 3 significant digits ([`LatencyHistogram::new`])
/// or 1 with its memory sized by what it holds ([`LatencyHistogram::small`]).
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

    /// An empty histogram covering 1 µs to one hour at [`SMALL_SIGFIG`] significant digits
    /// whose counts grow only as far as the largest value recorded: one per interval of a
    /// run's time series, where thousands of them are kept. It merges exactly with other small
    /// ones; merged into a 3-digit one, its values count at their bucket's lowest value.
    pub fn small() -> Self {
        Self::with_sigfig(SMALL_SIGFIG)
    }

    /// A histogram of `sigfig` (0..=2) significant digits that grows as values come.
    fn with_sigfig(sigfig: u8) -> Self {
        // 1..2 at 0..=2 digits is a valid configuration, so this cannot fail.
        let mut inner = Histogram::new_with_bounds(1, 2, sigfig).expect("valid histogram bounds");
        inner.auto(true);
        Self { inner }
    }

    /// Significant digits this histogram keeps (3, or [`SMALL_SIGFIG`]).
    pub fn sigfig(&self) -> u8 {
        self.inner.sigfig()
    }

    /// Records one duration (clamped into the histogram's range).
    pub fn record(&mut self, d: Duration) {
        self.record_micros(d.as_micros().min(MAX_MICROS as u128) as u64);
    }

    /// Records one value in microseconds (clamped into the histogram's range).
    pub fn record_micros(&mut self, us: u64) {
        let us = us.clamp(1, MAX_MICROS);
        // `record` grows a small histogram (`saturating_record` would clamp to its current
        // top instead); in range on a 3-digit one, it cannot fail.
        if self.inner.record(us).is_err() {
            self.inner.saturating_record(us);
        }
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
        // A coarse encoding (a time series' small histogram) stays coarse and small: read
        // into a 3-digit histogram it would take 180 KB, thousands of times over.
        let mut h = if decoded.sigfig() < 3 {
            Self::with_sigfig(decoded.sigfig())
        } else {
            Self::new()
        };
        if !decoded.is_empty() && decoded.max() > h.inner.highest_equivalent(MAX_MICROS) {
            return Err("histogram out of range: a value above one hour".into());
        }
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

    /// A small histogram stays small (memory follows the largest value, not the range),
    /// reads back as small, merges exactly with its kind, and knows a value within 1/16.
    #[test]
    fn small_histograms_are_small_exact_to_merge_and_within_a_sixteenth() {
        let mut a = LatencyHistogram::small();
        let mut b = LatencyHistogram::small();
        for i in 1..=1000u64 {
            a.record_micros(i * 97);
            b.record_micros(i * 31);
        }
        b.record(Duration::from_secs(60));
        // Up to a minute: 16 counts per power of two, 8 bytes each.
        assert!(
            b.raw().distinct_values() <= 400,
            "{}",
            b.raw().distinct_values()
        );
        let back = LatencyHistogram::from_base64(&b.to_base64()).unwrap();
        assert_eq!(back.sigfig(), SMALL_SIGFIG);
        assert_eq!(back.raw().distinct_values(), b.raw().distinct_values());
        assert_eq!(back.percentiles(), b.percentiles());
        let mut m = a.clone();
        m.merge(&back);
        assert_eq!(m.len(), 2001);
        assert_eq!(m.quantile(1.0), b.quantile(1.0));
        for q in [0.5, 0.9, 0.99] {
            let exact = 97.0 * (q * 1000.0f64).ceil();
            let got = a.quantile(q) as f64;
            assert!(
                (got - exact).abs() <= exact / 16.0,
                "q {q}: {got} vs {exact}"
            );
        }
        // The 3-digit histogram is what it was.
        assert_eq!(LatencyHistogram::new().sigfig(), 3);
        // Coarser and finer small encodings (0 and 2 digits) read back as they were.
        for sigfig in [0u8, 2] {
            let mut h = Histogram::<u64>::new(sigfig).unwrap();
            h.record_n(777, 3).unwrap();
            let mut buf = Vec::new();
            V2Serializer::new().serialize(&h, &mut buf).unwrap();
            let text = base64::engine::general_purpose::STANDARD.encode(buf);
            let back = LatencyHistogram::from_base64(&text).unwrap();
            assert_eq!((back.sigfig(), back.len()), (sigfig, 3));
            assert!(back.raw().equivalent(back.quantile(0.5), 777));
            assert_eq!(
                LatencyHistogram::from_base64(&back.to_base64())
                    .unwrap()
                    .len(),
                3
            );
        }
        // A coarse encoding with a value past an hour is refused, not grown into.
        let mut big = Histogram::<u64>::new(1).unwrap();
        big.record(MAX_MICROS * 4).unwrap();
        let mut buf = Vec::new();
        V2Serializer::new().serialize(&big, &mut buf).unwrap();
        let text = base64::engine::general_purpose::STANDARD.encode(buf);
        let e = LatencyHistogram::from_base64(&text).unwrap_err();
        assert!(e.contains("out of range"), "{e}");
    }
}
