//! The frame view's passive HTTP/1.1 parser, `hxlab_trace::h1wire::H1Wire`: request heads
//! the client sent (through httparse) and response heads and body framing it received
//! (Content-Length, chunked with trailers, until close, 1xx, HEAD responses).
//!
//! Input: one byte seeding the split, one byte `n`, then `n` bytes the client sent (request
//! heads; a HEAD request makes its response bodiless) and the rest the bytes it received.
//! Checks: no panic; the received bytes fed whole or in pieces give the same events, also
//! after `closed` (a body read until the connection closes) — up to the first error, which
//! is compared by kind only (its text quotes what had arrived) and may be reported by one
//! reading only (bytes after a 1xx head; see `same_until_error`).
#![no_main]
#[path = "../common.rs"]
mod common;

use hxlab_trace::h1wire::H1Wire;
use libfuzzer_sys::fuzz_target;

use common::{seen, Seen};

/// Equal, or equal until one reading reports an error where the other does not: the parser
/// checks that received bytes start like a response (`HTTP/`) once per read, before the first
/// head in it, so what follows a 1xx head is checked only if it arrives in a later read (a
/// split reading refuses it; a whole reading takes it, e.g. a head after blank lines, which
/// httparse skips). See docs/fuzzing.md, "known differences".
fn same_until_error(a: &[Seen], b: &[Seen]) -> bool {
    let k = a.iter().zip(b).take_while(|(x, y)| x == y).count();
    match (a.get(k), b.get(k)) {
        (None, None) => true,
        // The guard runs for each alternative that matches: an error on either side.
        (Some(e), _) | (_, Some(e)) if e.0 == "error" => true,
        _ => false,
    }
}

fuzz_target!(|data: &[u8]| {
    let [sel, n, rest @ ..] = data else {
        return;
    };
    let (sent, recv) = rest.split_at(usize::from(*n).min(rest.len()));
    let mut whole = H1Wire::new();
    let mut split = H1Wire::new();
    assert_eq!(seen(whole.feed_send(sent)), seen(split.feed_send(sent)));
    let mut a = whole.feed_recv(recv);
    a.extend(whole.closed());
    let mut b = Vec::new();
    for p in common::pieces(*sel, recv) {
        b.extend(split.feed_recv(p));
    }
    b.extend(split.closed());
    let (a, b) = (seen(a), seen(b));
    assert!(
        same_until_error(&a, &b),
        "events differ between a whole read and split reads:\n whole: {a:?}\n split: {b:?}"
    );
    // More requests after the responses (a kept-alive connection) still parse.
    let _ = whole.feed_send(recv);
});
