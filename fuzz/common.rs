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

/// What a frame view reported, comparable across splits of the same bytes.
pub type Seen = (
    &'static str,
    String,
    Vec<String>,
    serde_json::Map<String, serde_json::Value>,
);

/// The events up to the first error; an error event counts by its kind alone (its text
/// quotes the bytes that had arrived when it was found, which depends on the split).
pub fn seen(events: Vec<hxlab_trace::Event>) -> Vec<Seen> {
    seen_until(events, |_| false)
}

/// [`seen`], also stopping after the first event `last` picks (kept in the list).
pub fn seen_until(
    events: Vec<hxlab_trace::Event>,
    last: impl Fn(&hxlab_trace::Event) -> bool,
) -> Vec<Seen> {
    let mut out = Vec::new();
    for e in events {
        if e.kind == "error" {
            out.push((e.kind, String::new(), Vec::new(), Default::default()));
            break;
        }
        let stop = last(&e);
        out.push((e.kind, e.line, e.detail, e.fields));
        if stop {
            break;
        }
    }
    out
}
