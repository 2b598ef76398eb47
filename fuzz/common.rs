//! Helpers shared by the fuzz targets (each target includes this file with `#[path]`).
#![allow(dead_code)]

/// Cuts `data` into pieces whose sizes come from a small generator seeded with `seed`
/// (1..=16 bytes, or 1..=512 when the seed's top bit is set), so a streaming parser sees the
/// same bytes arrive in many different splits. Deterministic: a saved input replays exactly.
pub fn pieces(seed: u8, data: &[u8]) -> Vec<&[u8]> {
    let max = if seed & 0x80 != 0 { 512 } else { 16 };
    let mut x = u32::from(seed) | 0x100;
    let mut out = Vec::new();
    let mut rest = data;
    while !rest.is_empty() {
        // xorshift32: cheap and good enough to vary piece sizes.
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        let n = (1 + (x as usize) % max).min(rest.len());
        let (a, b) = rest.split_at(n);
        out.push(a);
        rest = b;
    }
    out
}

/// Splits `data` into records, each a 2-byte big-endian length and that many bytes (a length
/// past the end takes what is left). Lets one input carry a sequence of header blocks.
pub fn records(mut data: &[u8]) -> Vec<&[u8]> {
    let mut out = Vec::new();
    while data.len() >= 2 {
        let n = usize::from(u16::from_be_bytes([data[0], data[1]])).min(data.len() - 2);
        out.push(&data[2..2 + n]);
        data = &data[2 + n..];
    }
    out
}
