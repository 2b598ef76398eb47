//! HTTP/3 frame heads (RFC 9114 §7.1): `hxlab_wire::h3::parse_frame_head` on any bytes.
//! Checks: the head length is the two varints' lengths and within the input; writing the
//! (type, length) back with `write_frame_head` gives a head that parses to the same values
//! and is no longer; the name helpers take any value.
#![no_main]
use hxlab_wire::{h3, varint};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((kind, len, n)) = h3::parse_frame_head(data) else {
        return;
    };
    let (k, a) = varint::read(data).expect("the type varint");
    let (l, b) = varint::read(&data[a..]).expect("the length varint");
    assert_eq!((kind, len, n), (k, l, a + b));
    assert!(n <= data.len());
    let mut out = Vec::new();
    h3::write_frame_head(&mut out, kind, len);
    assert!(out.len() <= n);
    assert_eq!(h3::parse_frame_head(&out), Some((kind, len, out.len())));
    let _ = (h3::frame_type_name(kind), h3::setting_name(len), h3::code_name(len));
    let _ = h3::is_grease(kind);
});
