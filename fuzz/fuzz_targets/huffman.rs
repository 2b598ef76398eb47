//! The HPACK Huffman code (RFC 7541 §5.2, Appendix B), shared by HPACK and QPACK:
//! `hxlab_wire::hpack::huffman_decode` on any bytes.
//! Checks: a string that decodes is exactly the canonical encoding of what it decodes to
//! (code bits, then at most 7 one-bits of padding), so `huffman_encode` gives the input back;
//! the returned length is the number of bytes produced; and any bytes survive
//! encode-then-decode.
#![no_main]
use hxlab_wire::hpack::{huffman_decode, huffman_encode};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut out = Vec::new();
    if let Ok(n) = huffman_decode(data, |b| out.push(b)) {
        assert_eq!(n, out.len());
        let mut enc = Vec::new();
        huffman_encode(&out, &mut enc);
        assert_eq!(enc, data, "a valid Huffman string is the canonical encoding");
    }
    let mut enc = Vec::new();
    huffman_encode(data, &mut enc);
    let mut back = Vec::new();
    let n = huffman_decode(&enc, |b| back.push(b)).expect("our own encoding must decode");
    assert_eq!(n, data.len());
    assert_eq!(back, data);
});
