//! HTTP/2 frame heads, padding and control-frame payloads (RFC 9113 §4.1, §6):
//! `hxlab_wire::h2::FrameHead::parse`, `h2::strip_padding` and `h2::control`'s decoders on
//! the bytes after the head.
//! Checks: a head is parsed exactly when 9 bytes are there; its fields are in range (24-bit
//! length, 31-bit stream id); `write` gives the 9 input bytes back with only the reserved
//! bit cleared; `strip_padding` returns the payload (not PADDED) or the bytes between the
//! pad-length byte and the padding, and fails only when the padding does not fit; a control
//! frame decodes only when its stream and length keep RFC 9113 §6's rules.
#![no_main]
use hxlab_wire::h2::control::{GoAway, Ping, Priority, RstStream, Settings, WindowUpdate};
use hxlab_wire::h2::{self, flag, frame, FrameHead, PaddingError};
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
    let _ = (
        h2::frame_type_name(h.kind),
        h2::setting_name(h.stream_id as u16),
    );
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

    let (n, on_zero) = (payload.len(), h.stream_id == 0);
    let kept = match h.kind {
        frame::SETTINGS => Settings::parse(&h, payload)
            .map(|s| s.iter().count() == n / 6 && on_zero && n % 6 == 0 && (!s.ack || n == 0)),
        frame::PING => Ping::parse(&h, payload).map(|_| on_zero && n == 8),
        frame::GOAWAY => GoAway::parse(&h, payload).map(|g| on_zero && g.debug.len() + 8 == n),
        frame::RST_STREAM => RstStream::parse(&h, payload).map(|_| !on_zero && n == 4),
        frame::PRIORITY => {
            Priority::parse(&h, payload).map(|p| !on_zero && n == 5 && p.weight >= 1)
        }
        frame::WINDOW_UPDATE => WindowUpdate::parse(&h, payload)
            .map(|w| n == 4 && (w.increment > 0 || !on_zero) && w.increment <= h2::MAX_STREAM_ID),
        _ => Ok(true),
    };
    assert!(
        kept.unwrap_or(true),
        "a control frame decoded against its rules"
    );
});
