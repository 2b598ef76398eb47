//! The QPACK encoder stream from a peer, as `QpackDecoder::feed_encoder` applies it (the
//! origin's and the load client's decoders).
//!
//! Input: one byte choosing the capacity we advertised (0, 220, 4096 or 64 KiB, by its low
//! two bits), then the stream's bytes.
//! Checks:
//! - no panic, whatever the bytes;
//! - every split gives what one whole feed gives: the same verdict (error or not) and the
//!   same table (insert count, size, every entry) — for every split point of inputs up to
//!   256 bytes, and byte by byte;
//! - the table never exceeds the capacity we advertised, and the memory held stays within
//!   the capacity plus a stated overhead.
#![no_main]
use hxlab_wire::qpack::QpackDecoder;
use libfuzzer_sys::fuzz_target;

const CAPACITIES: [u64; 4] = [0, 220, 4096, 64 * 1024];

/// What a decoder holds after `pieces`: the first error's position (which piece) or the
/// table's entries.
fn run<'a>(cap: u64, pieces: impl IntoIterator<Item = &'a [u8]>) -> (bool, Vec<(Vec<u8>, Vec<u8>)>, u64) {
    let mut d = QpackDecoder::new(cap, 16);
    let mut failed = false;
    for p in pieces {
        if d.feed_encoder(p).is_err() {
            failed = true;
            break;
        }
        assert!(d.table().size() <= cap, "table over the capacity we advertised");
        assert!(d.memory() as u64 <= 2 * cap + 4096, "memory {}", d.memory());
    }
    let t = d.table();
    let entries = (t.first()..t.insert_count())
        .map(|a| {
            let (n, v) = t.get(a).expect("in the table");
            (n.to_vec(), v.to_vec())
        })
        .collect();
    (failed, entries, t.insert_count())
}

fuzz_target!(|data: &[u8]| {
    let Some((&sel, stream)) = data.split_first() else {
        return;
    };
    let cap = CAPACITIES[usize::from(sel & 3)];
    let whole = run(cap, [stream]);
    if stream.len() <= 256 {
        for at in 0..=stream.len() {
            let (a, b) = stream.split_at(at);
            let split = run(cap, [a, b]);
            // An error found earlier stops the feed earlier: compare verdicts, and tables
            // only when both succeeded.
            assert_eq!(split.0, whole.0, "verdict differs at split {at}");
            if !whole.0 {
                assert_eq!(split, whole, "table differs at split {at}");
            }
        }
    }
    let bytewise = run(cap, stream.chunks(1));
    assert_eq!(bytewise.0, whole.0, "verdict differs byte by byte");
    if !whole.0 {
        assert_eq!(bytewise, whole, "table differs byte by byte");
    }
});
