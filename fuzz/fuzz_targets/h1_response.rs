//! The load generator's HTTP/1.1 response parser, `hxlab_load::h1::ResponseParser`
//! (status line, Content-Length, chunked bodies with trailers, bodies until close,
//! interim 1xx responses, pipelined responses), as `hxlab load` drives it: `step` on the
//! unconsumed bytes, more bytes appended after `NeedMore`, `finish_at_eof` at the end.
//!
//! Input: one byte — bit 0: the request was HEAD, the rest seeding the split — then the
//! bytes a server sent.
//! Checks: no panic; `step` never claims more bytes than it was given and never stalls
//! (a step that consumes nothing is `NeedMore` or the one `Done` after a body); a head's
//! reported length is what it consumed; and fed whole or in pieces, a stream both readings
//! accept yields the same responses (heads, statuses, `close`, body bytes).
#![no_main]
#[path = "../common.rs"]
mod common;

use hxlab_load::h1::{ResponseParser, Step};
use libfuzzer_sys::fuzz_target;

/// Steps with consecutive body counts merged and empty ones dropped.
fn push(out: &mut Vec<Step>, s: Step) {
    match (out.last_mut(), s) {
        (_, Step::Body(0)) => {}
        (Some(Step::Body(n)), Step::Body(m)) => *n += m,
        _ => out.push(s),
    }
}

/// Parses `pieces` as reads arriving one after the other; `Err` when the parser refused.
fn read(head_request: bool, pieces: &[&[u8]]) -> Result<Vec<Step>, ()> {
    let mut p = ResponseParser::new();
    p.head_request = head_request;
    let mut buf = Vec::new();
    let mut start = 0;
    let mut out = Vec::new();
    for piece in pieces {
        buf.extend_from_slice(piece);
        let mut idle = 0;
        loop {
            let avail = buf.len() - start;
            let (used, step) = p.step(&buf[start..]).map_err(|_| ())?;
            assert!(used <= avail, "step used {used} of {avail} bytes");
            match step {
                Step::Head { len, .. } | Step::Interim { len } => assert_eq!(len, used),
                Step::Body(n) => assert!(n <= used),
                _ => {}
            }
            start += used;
            if step == Step::NeedMore {
                break;
            }
            idle = if used == 0 { idle + 1 } else { 0 };
            assert!(idle <= 2, "parser stalls: {step:?} without consuming");
            push(&mut out, step);
        }
    }
    if let Some(s) = p.finish_at_eof() {
        push(&mut out, s);
    }
    Ok(out)
}

fuzz_target!(|data: &[u8]| {
    let Some((&sel, bytes)) = data.split_first() else {
        return;
    };
    let head_request = sel & 1 != 0;
    let whole = read(head_request, &[bytes]);
    let split = read(head_request, &common::pieces(sel, bytes));
    if let (Ok(a), Ok(b)) = (&whole, &split) {
        assert_eq!(a, b, "responses differ between a whole read and split reads");
    }
});
