//! The frame view's HTTP/2 parser, `hxlab_trace::h2wire::H2Wire` (frames, HEADERS /
//! CONTINUATION / PUSH_PROMISE header blocks through HPACK, SETTINGS, PING, GOAWAY, ...).
//!
//! Input: one byte — bit 0 the direction (send: starts with the connection preface;
//! recv: the server's frames), the rest seeding how the bytes are split — then the bytes of
//! one direction of a connection.
//! Checks: no panic; fed whole or split into pieces (as reads deliver them), the parser
//! reports the same events and frame count. The comparison stops at the first error event
//! (compared by kind only: its text quotes what had arrived) and the first HPACK error:
//! after one the parser marks itself broken, but frames that arrived in the same `feed`
//! call are still decoded (see docs/fuzzing.md, "known differences").
#![no_main]
#[path = "../common.rs"]
mod common;

use hxlab_trace::{h2wire::H2Wire, Dir};
use libfuzzer_sys::fuzz_target;

use common::seen_until;

/// The events up to the first error or HPACK error (after one, H2Wire still decodes what
/// came in the same read with a table that no longer follows the peer's).
fn seen(events: Vec<hxlab_trace::Event>) -> Vec<common::Seen> {
    seen_until(events, |e| e.fields.contains_key("hpack_error"))
}

fuzz_target!(|data: &[u8]| {
    let Some((&sel, bytes)) = data.split_first() else {
        return;
    };
    let dir = if sel & 1 == 0 { Dir::Send } else { Dir::Recv };
    let mut whole = H2Wire::new(dir);
    let all = whole.feed(bytes);
    let mut split = H2Wire::new(dir);
    let mut parts = Vec::new();
    for p in common::pieces(sel, bytes) {
        parts.extend(split.feed(p));
    }
    let (a, b) = (seen(all), seen(parts));
    let stopped = a
        .last()
        .is_some_and(|e| e.0 == "error" || e.3.contains_key("hpack_error"));
    assert_eq!(a, b, "events differ between a whole feed and a split one");
    if !stopped {
        assert_eq!(whole.frames, split.frames);
        assert_eq!(whole.answered_http1, split.answered_http1);
    }
});
