//! The frame view's HTTP/3 stream parser, `hxlab_trace::h3wire::H3StreamWire`: request
//! streams (HEADERS through QPACK, DATA, PUSH_PROMISE), the control stream (SETTINGS,
//! GOAWAY, MAX_PUSH_ID, CANCEL_PUSH), push streams and QPACK encoder/decoder streams.
//!
//! Input: one byte — bit 0 the direction, bit 1 bidirectional (request stream) or
//! unidirectional (type varint first), the rest seeding the split — then the stream's bytes.
//! Checks: no panic; fed whole or split into pieces, the same events (up to the first error,
//! compared by kind only) and the same stream kind at the end; `finish` works in any state.
#![no_main]
#[path = "../common.rs"]
mod common;

use hxlab_trace::{h3wire::H3StreamWire, Dir};
use libfuzzer_sys::fuzz_target;

use common::{seen, Seen};

fuzz_target!(|data: &[u8]| {
    let Some((&sel, bytes)) = data.split_first() else {
        return;
    };
    let dir = if sel & 1 == 0 { Dir::Send } else { Dir::Recv };
    let bidi = sel & 2 == 0;
    let id = if bidi { 0 } else { 3 };
    let mut whole = H3StreamWire::new(dir, id, bidi);
    let all = whole.feed(bytes);
    let mut split = H3StreamWire::new(dir, id, bidi);
    let mut parts = Vec::new();
    for p in common::pieces(sel, bytes) {
        parts.extend(split.feed(p));
    }
    assert_eq!(seen(all), seen(parts), "events differ between a whole feed and a split one");
    assert_eq!(whole.kind(), split.kind());
    let _ = whole.finish();
});
