//! HTTP/2 frame heads and padding (RFC 9113 §4.1, §6.1): `hxlab_wire::h2::FrameHead::parse`
//! and `h2::strip_padding` on the bytes after the head.
//! Checks: a head is parsed exactly when 9 bytes are there; its fields are in range (24-bit
//! length, 31-bit stream id); `write` gives the 9 input bytes back with only the reserved
//! bit cleared; `strip_padding` returns the payload (not PADDED) or the bytes between the
//! pad-length byte and the padding, and fails only when the padding does not fit.
#![no_main]
use hxlab_wire::h2::{self, flag, FrameHead, PaddingError};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some(h) = FrameHead::parse(data) else {
        assert!(data.len() < h2::FRAME_HEAD);
        return;
    };
    assert!(h.len < 1 << 24 && h.stream_id <= h2::MAX_STREAM_ID);
    let mut out = Vec::new();
    h.write(&mut out);
    let mut expect = data[..9].to_vec();
    expect[5] &= 0x7f;
    assert_eq!(out, expect, "head round trip");
    let _ = (h2::frame_type_name(h.kind), h2::setting_name(h.stream_id as u16));
    let _ = h2::code_name(h.stream_id);

    let payload = &data[9..];
    match h2::strip_padding(h.flags, payload) {
        Ok(p) if h.flags & flag::PADDED == 0 => assert_eq!(p, payload),
        Ok(p) => {
            let pad = usize::from(payload[0]);
            assert_eq!(p, &payload[1..payload.len() - pad]);
        }
        Err(PaddingError::NoPadLength) => {
            assert!(h.flags & flag::PADDED != 0 && payload.is_empty())
        }
        Err(PaddingError::TooLong) => {
            assert!(h.flags & flag::PADDED != 0 && usize::from(payload[0]) > payload.len() - 1)
        }
    }
});
