//! The origin's own HTTP/3 parsing of what a client sends (`hxlab_serve::h3_fuzz_entry`): request
//! field sections (QPACK, RFC 9114 §4.3 pseudo-header rules) and the client's control stream
//! (SETTINGS first and once, HTTP/2 frame types refused, unknown frames skipped).
//! Input: a control byte, then the bytes. Bit 0: 0 request head, 1 control stream. Request
//! heads: bit 1 set, the next byte is the length of the client's QPACK encoder-stream bytes
//! that come first (fed to a decoder with a dynamic table); the other bits pick the
//! field-section size limit (× 64); a head accepted under a limit is accepted the same
//! without one. Control streams: the other bits are a split seed; whole and in pieces give
//! the same answer.
#![no_main]
use hxlab_serve::h3_fuzz_entry::{control_stream, request_head, request_head_after};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&sel, bytes)) = data.split_first() else {
        return;
    };
    if sel & 1 == 0 {
        let limit = u64::from(sel >> 2) * 64;
        let (limited, unlimited) = match bytes.split_first() {
            Some((&n, rest)) if sel & 2 != 0 => {
                let (enc, block) = rest.split_at(usize::from(n).min(rest.len()));
                (
                    request_head_after(enc, block, limit),
                    request_head_after(enc, block, u64::MAX),
                )
            }
            _ => (request_head(bytes, limit), request_head(bytes, u64::MAX)),
        };
        if limited.is_ok() {
            assert_eq!(limited, unlimited, "a size limit changed an accepted head");
        }
        return;
    }
    let whole = control_stream([bytes]);
    let size = usize::from(sel >> 1).max(1);
    let split = control_stream(bytes.chunks(size));
    assert_eq!(whole, split, "pieces of {size} changed the control stream's answer");
});
