//! QUIC variable-length integers (RFC 9000 §16): `hxlab_wire::varint::read` on any bytes.
//! Checks: the length read is 1, 2, 4 or 8 and within the input; the value is at most
//! `varint::MAX`; `put` re-encodes it in the shortest form, which reads back to the same
//! value and is never longer than what was read.
#![no_main]
use hxlab_wire::varint;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((v, n)) = varint::read(data) else {
        // `None` only when the input ends first.
        assert!(data.is_empty() || data.len() < 1 << (data[0] >> 6));
        return;
    };
    assert!(matches!(n, 1 | 2 | 4 | 8) && n <= data.len());
    assert!(v <= varint::MAX);
    let mut out = Vec::new();
    varint::put(&mut out, v);
    assert!(out.len() <= n, "shortest encoding longer than the one read");
    assert_eq!(varint::read(&out), Some((v, out.len())));
    // `put` also clamps: an 8-byte value from the input's bytes round-trips when <= MAX.
    if data.len() >= 8 {
        let w = u64::from_be_bytes(data[..8].try_into().unwrap()) & varint::MAX;
        let mut out = Vec::new();
        varint::put(&mut out, w);
        assert_eq!(varint::read(&out), Some((w, out.len())));
    }
});
